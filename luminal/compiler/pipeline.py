"""The compile pipeline: frontend graph -> egglog (rolled, bounded) -> extracted terms -> kernel graph
-> memory plan. Each stage is timed for the report; stages that run past a second show progress.

A program compiled before (by this process or an earlier one) comes from the compile cache
(``cache.py``) instead: no stage runs, and egglog is not imported."""

from __future__ import annotations

import time
from contextlib import contextmanager

from tqdm import tqdm

from luminal.compiler import cache
from luminal.compiler.errors import CompileError
from luminal.compiler.kernels import build_kernels
from luminal.compiler.memory import plan_memory
from luminal.compiler.report import Report
from luminal.compiler.rolling import Loops, optimize_rolled
from luminal.compiler.term import topological
from luminal.core.gc_paused import gc_paused

STAGES = ("optimize", "kernels", "memory plan")


class _Stages:
    """Times each stage; a progress bar appears only when compiling takes more than a second."""

    def __init__(self):
        self.times: dict[str, float] = {}
        self.bar = tqdm(total=len(STAGES), desc="compile", unit="stage", delay=1.0, leave=False)

    @contextmanager
    def __call__(self, name: str):
        self.bar.set_description(f"compile: {name}", refresh=False)
        t0 = time.perf_counter()
        try:
            yield
        except CompileError:
            raise
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - egglog panics are BaseExceptions
            raise CompileError(name, f"{type(e).__name__}: {e}") from e
        finally:
            self.times[name] = time.perf_counter() - t0
            self.bar.update(1)

    def close(self):
        self.bar.close()


def compile_graph(graph, outputs, updates, *, search: int = 0, seed: int = 0, budget=None, timer=None,
                  on_miss=None):
    """``outputs``: [(Node, View)]; ``updates``: [(state name, Node, View)]. Returns the kernel graph,
    its memory plan, the report and the nodes the roots read (a ``rolling.Loops``: ``nodes()``,
    ``reads(node)``). ``timer(kernel_graph) -> seconds`` times a candidate for ``search``;
    ``on_miss()`` is called before the stages run (the program was not in the compile cache).

    The result comes from the compile cache when it holds this program (``cache.py``: the key covers
    the program, the options and luminal's source; a search timed on this machine is never cached);
    the report then says so (``report.cache``, the stage times ``cache: key`` and ``cache: load``).

    The cyclic collector is off while compiling: the stages allocate many small objects and free
    few, so its passes would be wasted work. It comes back on only once ``_compile`` has returned and
    its intermediates (the linked terms, the rolling tables: most of what was allocated) are freed,
    so that its first pass walks the results alone."""
    with gc_paused():
        program = None
        if cache.usable(search, timer):
            program = cache.describe(graph, outputs, updates, search=search, seed=seed, budget=budget)
            hit = cache.load(program) if program is not None else None
            if hit is not None:
                return hit
        if on_miss is not None:
            on_miss()
        t0 = time.perf_counter()
        kg, plan, report, found = _compile(graph, outputs, updates, search=search, seed=seed, budget=budget,
                                           timer=timer)
        if program is not None:
            t1 = time.perf_counter()
            cache.store(program, kg, plan, report, found, t1 - t0)
            report.times["cache: key"] = program.seconds
            report.times["cache: store"] = time.perf_counter() - t1
        return kg, plan, report, found


def _compile(graph, outputs, updates, *, search, seed, budget, timer):
    stage = _Stages()
    try:
        roots = list(dict.fromkeys([n for n, _ in outputs] + [n for _, n, _ in updates]))
        with stage("optimize"):
            found = Loops(graph, roots)
            cand_timer = None
            if search and timer is not None:
                cand_timer = lambda terms: timer(_kernel_graph(graph, terms, outputs, updates))  # noqa: E731
            res = optimize_rolled(roots, graph, found=found, constants=graph.constants, budget=budget, search=search,
                                  seed=seed, timer=cand_timer)
        with stage("kernels"):
            kg = _kernel_graph(graph, res.terms, outputs, updates, res.order)
        with stage("memory plan"):
            plan = plan_memory(kg)
    finally:
        stage.close()
    times = {**{f"optimize: {k}": v for k, v in res.stats.get("times", {}).items()}, **stage.times}
    return kg, plan, Report.from_stats(res.stats, kg, plan, times), found


def _kernel_graph(graph, terms, outputs, updates, order=None):
    """``order``: the terms the outputs and updates read, producers first, when known (rolling's
    link has walked the program already; the walk below would give the same order)."""
    kinds = {**{k: "input" for k in graph.inputs}, **{k: "state" for k in graph.states},
             **{k: "random" for k in graph.random}}
    outs = [(terms[n.id], v) for n, v in outputs]
    ups = [(name, terms[n.id], v) for name, n, v in updates]
    if order is None:
        order = topological([t for t, _ in outs] + [t for _, t, _ in ups])
    return build_kernels(order, outs, ups, kinds, graph.constants)
