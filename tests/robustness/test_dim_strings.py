"""A dim string that is an expression is refused naming the op and the user's line, with the code to
write instead."""

from __future__ import annotations

import pytest

import luminal as lm


@pytest.mark.parametrize("dim,hint", [
    ("S+1", 'lm.sym("S") + 1'),
    ("2*M", '2 * lm.sym("M")'),
    ("(S+1)//2", '(lm.sym("S") + 1) // 2'),
])
def test_expression_dim_string_names_the_op_line_and_hint(dim, hint):
    """Before: "symbolic dim name 'S+1' is not an identifier" and nothing else."""
    g = lm.Graph()
    with pytest.raises(ValueError) as e:
        g.input("q", (dim,))  # the line the error must point at
    msg = str(e.value)
    assert msg.startswith(f"input 'q': symbolic dim name {dim!r}")
    assert "must be a single name" in msg and f"write {hint}" in msg
    assert f"{__file__}:" in msg and 'g.input("q", (dim,))' in msg


def test_hinted_expression_is_what_the_user_meant():
    g = lm.Graph()
    q = g.input("q", (lm.sym("S") + 1,))
    assert str(q.shape[0]) == "S+1"


def test_non_expression_strings_get_no_expression_hint():
    g = lm.Graph()
    with pytest.raises(ValueError, match=r"input 'q': symbolic dim name '1B' is not an identifier") as e:
        g.input("q", ("1B", 3))
    assert "lm.sym" not in str(e.value)


def test_other_ops_parsing_dims_name_themselves():
    g = lm.Graph()
    x = g.input("x", (6,))
    with pytest.raises(ValueError, match=r"^reshape: symbolic dim name 'A-1'.*lm\.sym\(\"A\"\) - 1"):
        x.reshape("A-1")
