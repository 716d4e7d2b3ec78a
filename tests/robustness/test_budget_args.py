"""Budget fields and compile's budget argument are checked where the user wrote them."""

from __future__ import annotations

import math

import pytest

import luminal as lm
from luminal.compiler.egraph import Budget


@pytest.mark.parametrize("kw,exc,match", [
    (dict(seconds=-1), ValueError, r"Budget: seconds must be >= 0.*-1"),
    (dict(seconds=float("nan")), ValueError, r"Budget: seconds"),
    (dict(seconds="1"), TypeError, r"Budget: seconds must be a number"),
    (dict(max_enodes="x"), TypeError, r"Budget: max_enodes must be an int, got 'x'"),
    (dict(max_enodes=-5), ValueError, r"Budget: max_enodes must be >= 0"),
    (dict(iterations=2.5), TypeError, r"Budget: iterations must be an int"),
    (dict(iterations=True), TypeError, r"Budget: iterations must be an int"),
    (dict(round_iterations=0), ValueError, r"Budget: round_iterations must be >= 1"),
    (dict(match_limit=0), ValueError, r"Budget: match_limit must be >= 1"),
    (dict(backoff_above=-1), ValueError, r"Budget: backoff_above must be >= 0"),
])
def test_bad_budget_fields_are_refused_naming_the_field(kw, exc, match):
    with pytest.raises(exc, match=match):
        Budget(**kw)


def test_meaningful_edge_values_are_accepted():
    Budget(seconds=0.0, max_enodes=0, backoff_above=0, iterations=1, round_iterations=1)
    Budget(seconds=math.inf)


def test_compile_with_a_dict_budget_names_the_argument_and_the_class():
    """Before: CompileError 'optimize': AttributeError ... backoff_above."""
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(TypeError, match=r"compile: budget must be a luminal\.compiler\.egraph\.Budget.*got dict"):
        lm.compile(x * 2, budget={"seconds": 1})
