"""Checks shared by the optimizers whose hyperparameters include tuples of numbers (Rprop's ``etas`` and
``step_sizes``, Adafactor's ``eps``, Muon's ``ns_coefficients``)."""

from __future__ import annotations

from luminal.core.errors import check_number


def as_tuple(owner: str, what: str, v, n: int, allow_none: tuple[int, ...] = ()) -> tuple:
    """``v`` as a tuple of ``n`` numbers (a list from a config file or a checkpoint compares equal to
    torch's tuple); the positions in ``allow_none`` may be None (Adafactor's ``eps[0]``). A wrong
    length or a non-number fails here, naming the optimizer and the argument."""
    try:
        t = tuple(v)
    except TypeError:
        raise TypeError(f"{owner}: {what} must be a tuple of {n} numbers, got {v!r}") from None
    if len(t) != n:
        raise ValueError(f"{owner}: {what} must be a tuple of {n} numbers, got {v!r}")
    for i, x in enumerate(t):
        if not (x is None and i in allow_none):
            check_number(owner, f"{what}[{i}]", x)
    return t
