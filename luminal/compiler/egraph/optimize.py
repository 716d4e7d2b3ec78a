"""``optimize``: frontend nodes -> extracted Terms, through the egglog rulesets.

Stages (each timed in ``stats["times"]``): lower (with constant folding), run (the rulesets, in
bounded rounds: ``schedule.py``), extract (our DAG cost model), and optionally search (time
neighbours of the extracted program with ``timer``).

``stats``: ``nodes_before`` (frontend nodes reachable from the roots), ``nodes_after`` (terms
extracted), ``egraph`` (``enodes``, ``eclasses``, ``choices``: the classes with more than one e-node
a program could use, i.e. what extraction and ``search`` choose between), ``rules`` (rule name ->
matches, as egglog counts them, plus the folds done while lowering), ``budget_hit`` (None or which
budget stopped the rewriting), ``times``, ``candidates`` (seconds of each timed program, the cost
model's first) and ``cost`` (the cost model's estimate of the extracted program).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from luminal.compiler.egraph import lower as lowering
from luminal.compiler.egraph import runner, schedule
from luminal.compiler.egraph.budget import Budget
from luminal.compiler.egraph.cost import CPU, CostModel
from luminal.compiler.egraph.egraph_read import read
from luminal.compiler.egraph.extract import Costs, build_terms, dag_cost, extract
from luminal.compiler.egraph.search import neighbours
from luminal.compiler.errors import CompileError
from luminal.compiler.term import topological


@dataclass
class Result:
    terms: dict  # root node id -> Term
    stats: dict = field(default_factory=dict)
    order: list | None = None  # every term the roots read, producers first, when a stage has it at hand


def optimize(roots, *, constants=None, budget: Budget | None = None, search: int = 0, seed: int = 0,
             timer=None, cost_model: CostModel = CPU) -> Result:
    """Optimise the graph reachable from ``roots`` (frontend Nodes). ``constants`` (ConstKey ->
    array) is accepted for folding array constants, which is not done (scalars are folded)."""
    budget = budget or Budget()
    times: dict = {}
    stats: dict = {"rules": {}, "budget_hit": None, "times": times, "candidates": []}
    t = time.perf_counter()
    try:
        low = lowering.lower(list(roots))
    except Exception as e:
        raise CompileError("egglog: lower", f"{type(e).__name__}: {e}") from e
    stats["nodes_before"] = low.nodes_before
    stats["rules"].update(low.folds)
    with runner.session() as eg:
        runner.run(eg, "egglog: lower", commands=lowering.commands(low))
        times["lower"] = time.perf_counter() - t
        t = time.perf_counter()
        stats["budget_hit"] = schedule.run(eg, budget, len(low.items), stats["rules"])
        times["run"] = time.perf_counter() - t
        t = time.perf_counter()
        g = runner.guard(eg, "extract", read, eg, low)
    try:
        costs = Costs(g, low, cost_model)
        roots_cls = [g.item_class[k] for k in low.roots.values()]
        choice = extract(g, costs, roots_cls)
        terms = build_terms(g, choice, costs, low, roots_cls)
    except Exception as e:
        raise CompileError("extract", f"{type(e).__name__}: {e}") from e
    times["extract"] = time.perf_counter() - t
    stats["egraph"] = {"enodes": g.n_enodes, "eclasses": len(g.classes), "choices": g.n_choices()}
    stats["cost"] = dag_cost(choice, costs, roots_cls)
    by_root = _by_root(g, low, terms)
    if search and timer is not None:
        t = time.perf_counter()
        by_root = _search(g, choice, costs, low, roots_cls, by_root, search, seed, timer, stats["candidates"])
        times["search"] = time.perf_counter() - t
    stats["nodes_after"] = len(topological(list(by_root.values())))
    return Result(by_root, stats)


def _by_root(g, low, terms) -> dict:
    return {rid: terms[g.item_class[k]] for rid, k in low.roots.items()}


def _search(g, choice, costs, low, roots_cls, best, n, seed, timer, candidates) -> dict:
    """Time the cost model's program and up to ``n`` neighbours; the fastest wins (ties: the first)."""
    best_s = float(timer(best))
    candidates.append(best_s)
    for cand in neighbours(g, choice, roots_cls, n, seed):
        terms = _by_root(g, low, build_terms(g, cand, costs, low, roots_cls))
        secs = float(timer(terms))
        candidates.append(secs)
        if secs < best_s:
            best_s, best = secs, terms
    return best
