"""``optimize_rolled``: the e-graph stage run once per body and once on the rest, then linked.

Detection (``detect.py``) finds the bodies; each body's template and the rest (``template.py``) is
one e-graph run; the link (``link.py``) makes one Term DAG of the results. The compile report counts
detection, template and rest building and linking as rolling's time (``times["roll"]``).
"""

from __future__ import annotations

import time
from collections import Counter

from luminal.compiler.rolling.detect import Loops
from luminal.compiler.rolling.link import _Cycle, _Link
from luminal.compiler.rolling.template import BodyTemplate, _build_rest, _build_template, _Ids, _unoptimized
from luminal.core.gc_paused import gc_paused


def _optimize(roots, **kw):
    """The e-graph stage (a module-level hook, so tests can count and replace its runs)."""
    from luminal.compiler.egraph import optimize

    return optimize(roots, **kw)


def optimize_rolled(roots, graph, *, found: Loops | None = None, search: int = 0, timer=None, **kw):
    """``egraph.optimize`` of ``graph``'s ``roots`` with repeated blocks rolled: same result,
    ``stats["loops"]`` added. ``found``: ``Loops(graph, roots)``, when the caller already has it.

    Each template and the rest is one e-graph run. With ``search``, a run's candidates are timed as
    whole programs: linked with the runs already done and, for those still to come, their nodes
    one to one (the same in every candidate, so the comparison stays fair)."""
    found = Loops(graph, roots) if found is None else found  # times itself (``found.seconds``)
    t0 = time.perf_counter()
    with gc_paused():
        loops = [BodyTemplate(k, w) for k, w in enumerate(found.spans)]
        if loops:
            ids = _Ids()
            for lp in loops:
                _build_template(lp, found, graph.nodes, ids)
                lp.outputs = found.outputs[lp.index]
            rest_roots, rest_inputs = _build_rest(roots, graph.nodes, loops, found, ids)
            units = [[lp.template[p] for p in lp.outputs] for lp in loops] + ([rest_roots] if rest_roots else [])
            unit_terms = [_unoptimized(u) for u in units] if search and timer is not None else [{} for _ in units]
    roll_s = time.perf_counter() - t0 + found.seconds
    if not loops:
        res = _optimize(roots, search=search, timer=timer, **kw)
        _add_roll_stats(res.stats, [], roll_s)
        return res
    sizes: list[int] = []  # terms in each linked program, every Call expanded
    orders: list[list] = []  # each linked program's terms, producers first

    def link():
        for lp, terms in zip(loops, unit_terms):
            lp.terms = terms
        with gc_paused():
            ln = _Link(loops, graph.nodes, found, unit_terms[-1] if rest_roots else {}, rest_inputs, roots)
            terms = ln.run()
        sizes.append(ln.size())
        orders.append(ln.order)
        return terms

    def timed(i):
        def run(candidate):
            unit_terms[i] = candidate
            try:
                return timer(link())
            except _Cycle:
                return float("inf")
        return run

    results = []
    for i, u in enumerate(units):
        results.append(_optimize(u, search=search, timer=timed(i) if search and timer is not None else None, **kw))
        unit_terms[i] = results[-1].terms
    t1 = time.perf_counter()
    try:
        terms = link()
    except _Cycle:  # an extracted template read an input its value does not depend on: do not roll
        res = _optimize(roots, search=search, timer=timer, **kw)
        _add_roll_stats(res.stats, [], roll_s + time.perf_counter() - t1)
        return res
    roll_s += time.perf_counter() - t1
    stats = _merge_stats([r.stats for r in results], [lp.span.trips for lp in loops] + [1], found.size,
                         sizes[-1])
    _add_roll_stats(stats, loops, roll_s)
    return type(results[0])(terms=terms, stats=stats, order=orders[-1])



# stats ----------------------------------------------------------------------------------------
def _merge_stats(stats: list[dict], copies: list[int], nodes_before: int, nodes_after: int) -> dict:
    """One run's stats from the runs of every template and the rest; costs count every trip."""
    out = {"nodes_before": nodes_before, "nodes_after": nodes_after,
           "egraph": Counter(), "rules": Counter(), "budget_hit": None, "times": Counter(), "candidates": []}
    if all("cost" in s for s in stats):
        out["cost"] = sum(s["cost"] * c for s, c in zip(stats, copies))
    for s in stats:
        out["egraph"].update(s.get("egraph", {}))
        out["rules"].update(s.get("rules", {}))
        out["times"].update(s.get("times", {}))
        out["candidates"] += s.get("candidates", [])
        out["budget_hit"] = out["budget_hit"] or s.get("budget_hit")
    for key in ("egraph", "rules", "times"):
        out[key] = dict(out[key])
    return out


def _add_roll_stats(stats: dict, loops, seconds: float) -> None:
    stats["loops"] = [{"body_nodes": lp.span.length, "trips": lp.span.trips} for lp in loops]
    stats.setdefault("times", {})["roll"] = seconds
