"""Bounds on one egglog run. Hitting one is not an error: the compile goes on with what was found,
and ``stats["budget_hit"]`` says which bound stopped it.

The fields are checked when a Budget is made: a negative time or a string size would otherwise be
taken as given and fail (or loop) deep inside the rewrite rounds, far from the line that wrote it."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields


@dataclass(frozen=True)
class Budget:
    max_enodes: int = 500_000  # e-graph size (rows of the term constructors), checked between rounds
    iterations: int = 32  # rewrite iterations in all
    match_limit: int = 50_000  # back-off scheduler: matches per rule per iteration before it is banned
    seconds: float = 60.0  # wall clock for the rewrite rounds, checked between rounds
    round_iterations: int = 2  # iterations per egglog call between the checks (egglog's repeat has no early exit)
    backoff_above: int = 2_000  # lowered items above which the back-off scheduler runs (schedule.py)

    def __post_init__(self):
        # the least value that means something: 0 rounds would never advance, 0 matches bans every rule
        least = {"max_enodes": 0, "iterations": 1, "match_limit": 1, "round_iterations": 1, "backoff_above": 0}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "seconds":
                if not isinstance(v, numbers.Real) or isinstance(v, bool):
                    raise TypeError(f"Budget: seconds must be a number, got {v!r} ({type(v).__name__})")
                if math.isnan(v) or v < 0:
                    raise ValueError(f"Budget: seconds must be >= 0 (math.inf for no time bound), got {v!r}")
                continue
            if not isinstance(v, numbers.Integral) or isinstance(v, bool):
                raise TypeError(f"Budget: {f.name} must be an int, got {v!r} ({type(v).__name__})")
            if v < least[f.name]:
                raise ValueError(f"Budget: {f.name} must be >= {least[f.name]}, got {v!r}")
