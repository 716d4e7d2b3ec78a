"""One iterative post-order walk for every DAG the compiler handles (frontend nodes, terms, e-graph
classes, kernel expressions): graphs are thousands deep, so no recursion."""

from __future__ import annotations


def postorder(roots, children, key=id) -> list:
    """Everything reachable from ``roots``, each once (by ``key``), producers before consumers."""
    order, seen = [], set()
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        x, done = stack.pop()
        if done:
            order.append(x)
            continue
        k = key(x)
        if k in seen:
            continue
        seen.add(k)
        stack.append((x, True))
        stack.extend((c, False) for c in reversed(list(children(x))) if key(c) not in seen)
    return order
