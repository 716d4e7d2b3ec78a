"""``compiled.report()``: every compile explains itself, and ``search=N`` goes through the same API."""

import numpy as np

import luminal as lm
from luminal import nn


def _mlp_stack(depth: int):
    lm.manual_seed(0)
    g = lm.Graph()
    y = g.input("x", ("B", 8))
    for _ in range(depth):
        y = nn.Linear(8, 8)(y).relu()
    return g, y


def test_report_lists_every_part(capsys):
    _, y = _mlp_stack(8)
    f = lm.compile([y.softmax(-1)])
    r = f.report()
    out = capsys.readouterr().out
    for part in ("nodes:", "e-graph:", "rules fired:", "kernels:", "loops rolled:", "memory:", "time per stage:"):
        assert part in out, out
    assert r.nodes_before > 0 and r.egraph["enodes"] > 0 and r.rules.get("matmul", 0) >= 1
    assert r.kernels_by_kind.get("matmul") == 8
    assert {"body_nodes": r.loops[0]["body_nodes"], "trips": 8} == r.loops[0]
    assert "memory: symbolic sizes" in out  # "B" is bound only when it runs
    f(x=np.ones((3, 8), np.float32))
    assert r.memory["binding"] == {"B": 3} and 0 < r.memory["peak_bytes"] <= r.memory["no_reuse_bytes"]
    assert set(r.times) >= {"optimize", "kernels", "memory plan"}


def test_search_compiles_the_same_values():
    g, y = _mlp_stack(2)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    searched = lm.compile([y], search=4, seed=1)
    assert "optimize: search" in searched.report(show=False).times
    np.testing.assert_allclose(searched(x=x), lm.compile([y], backend="reference")(x=x), rtol=1e-5, atol=1e-6)


def test_reference_backend_reports_that_nothing_was_compiled(capsys):
    _, y = _mlp_stack(1)
    lm.compile([y], backend="reference").report()
    assert "nothing compiled" in capsys.readouterr().out
