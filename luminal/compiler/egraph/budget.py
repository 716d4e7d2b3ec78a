"""Bounds on one egglog run. Hitting one is not an error: the compile goes on with what was found,
and ``stats["budget_hit"]`` says which bound stopped it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    max_enodes: int = 500_000  # e-graph size (rows of the term constructors), checked between rounds
    iterations: int = 32  # rewrite iterations in all
    match_limit: int = 50_000  # back-off scheduler: matches per rule per iteration before it is banned
    seconds: float = 60.0  # wall clock for the rewrite rounds, checked between rounds
    round_iterations: int = 2  # iterations per egglog call between the checks (egglog's repeat has no early exit)
    backoff_above: int = 2_000  # lowered items above which the back-off scheduler runs (schedule.py)
