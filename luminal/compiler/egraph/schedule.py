"""Bounded runs of the rulesets.

``facts`` (once), then the combined ``rewrite`` ruleset (``algebra`` + ``matmul`` + ``contraction``:
``runner.REWRITE``) in rounds of ``round_iterations``, the e-graph size and the wall clock checked
between rounds, until a round's last iteration changes nothing or a budget runs out; then
``fusion``, which only derives relations over existing classes (it cannot grow the e-graph) and
saturates in two iterations.

Small graphs (at most ``Budget.backoff_above`` lowered items) run under egglog's default scheduler:
no rule of ours can match more than a few times per e-node there, so a match limit could never
trigger, and the back-off scheduler costs ~1 ms per call, more than the whole compile of a small
graph. Larger graphs run under a back-off scheduler with ``match_limit``; its reports count some
iterations twice, so a round ends the run only when its last iteration matched nothing at all.
In the common case the whole run is one egglog call (rewrite and fusion in one schedule).
"""

from __future__ import annotations

import time

from luminal.compiler.egraph import runner
from luminal.compiler.egraph.budget import Budget
from luminal.compiler.egraph.schema import CONSTRUCTORS

_STAGE = "egglog: run rulesets"
_FUSION_ITERATIONS = 2


def run(eg, budget: Budget, n_items: int, fired: dict) -> str | None:
    """Run everything; returns the budget that stopped the rewriting early (a sentence), or None."""
    t0 = time.perf_counter()
    backoff = n_items > budget.backoff_above
    done, hit = 0, None
    while True:
        n = min(budget.round_iterations, budget.iterations - done)
        first = "(run facts)" if done == 0 else ""
        if backoff:
            report = _report(eg, f"(let-scheduler bo (back-off :match-limit {budget.match_limit})) {first} "
                                 f"(repeat {n} (run-with bo rewrite))")
            _add(fired, report.iterations)
            settled = not report.updated or _quiet(report.iterations[-1])
        else:  # fusion rides along: if rewriting goes on, it simply runs again after the next round
            report = _report(eg, f"{first} (repeat {n} (run rewrite)) (repeat {_FUSION_ITERATIONS} (run fusion))")
            its = report.iterations
            settled = not its[-1 - _FUSION_ITERATIONS].rule_set_report.changed
            _add(fired, its if settled else its[:-_FUSION_ITERATIONS])
        done += n
        if settled:
            break
        if done >= budget.iterations:
            hit = f"iteration budget: still rewriting after iterations={budget.iterations}"
        elif (size := _size(eg)) > budget.max_enodes:
            hit = f"e-graph size budget: {size} e-nodes > max_enodes={budget.max_enodes} after {done} iterations"
        elif time.perf_counter() - t0 > budget.seconds:
            hit = f"time budget: rewriting ran past seconds={budget.seconds} after {done} iterations"
        if hit:
            break
    if backoff or not settled:
        limit = max(budget.match_limit, 64 * n_items)  # fusion must not lose verdicts to a ban
        sched = f"(repeat {_FUSION_ITERATIONS} (run fusion))" if not backoff else (
            f"(let-scheduler bf (back-off :match-limit {limit})) (repeat {_FUSION_ITERATIONS} (run-with bf fusion))")
        _add(fired, _report(eg, sched).iterations)
    return hit


def _report(eg, schedule: str):
    return runner.run(eg, _STAGE, f"(run-schedule {schedule})")[0].report


def _quiet(iteration) -> bool:
    """No rule matched anything in this iteration."""
    return not any(r.num_matches for rs in iteration.rule_set_report.rule_reports.values() for r in rs)


def _add(fired: dict, iterations) -> None:
    """Rule fire counts (matches, as egglog reports them) into ``fired``."""
    for it in iterations:
        for name, reports in it.rule_set_report.rule_reports.items():
            n = sum(r.num_matches for r in reports)
            if n:
                fired[name] = fired.get(name, 0) + n


def _size(eg) -> int:
    out = runner.run(eg, _STAGE, "(print-size)")
    return sum(n for name, n in out[0].sizes if name in CONSTRUCTORS)
