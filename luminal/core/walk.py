"""One iterative post-order walk for every DAG the compiler handles (frontend nodes, terms, e-graph
classes, kernel expressions): graphs are thousands deep, so no recursion. (``term.topological`` is
the same walk written out over ``srcs``, for the whole-program walks.)"""

from __future__ import annotations


def postorder(roots, children, key=id) -> list:
    """Everything reachable from ``roots``, each once (by ``key``), producers before consumers, in
    depth-first order (first child first). Each stack entry holds an iterator over its node's
    children, so every node is pushed once and every edge looked at once."""
    order, seen = [], set()
    for r in roots:
        k = key(r)
        if k in seen:
            continue
        seen.add(k)
        stack = [(r, iter(children(r)))]
        while stack:
            x, it = stack[-1]
            for c in it:
                k = key(c)
                if k not in seen:
                    seen.add(k)
                    stack.append((c, iter(children(c))))
                    break
            else:
                stack.pop()
                order.append(x)
    return order
