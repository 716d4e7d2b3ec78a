"""``compile_step(..., search=N)``: the step's programs are compiled with ``lm.compile``'s ``search``, so
the cpu backend times its layouts on the first call of each batch shape and keeps the fastest; the step
trains as the default one does."""

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train


def _step(search):
    lm.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    g = lm.Graph()
    x, y = g.input("x", ("B", 12)), g.input("y", ("B",), dtype=lm.int32)
    step = train.compile_step(train.cross_entropy(model(x), y), train.AdamW(model.parameters(), lr=1e-2),
                              backend="cpu", search=search)
    return model, step


def test_a_searched_step_trains_as_the_default_one():
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((24, 12)).astype(np.float32), rng.integers(0, 3, 24).astype(np.int32))
               for _ in range(3)]
    runs = {}
    for search in (0, 3):
        model, step = _step(search)
        losses = [float(step(x=xb, y=yb)) for xb, yb in batches]
        runs[search] = (losses, {k: np.array(v) for k, v in model.state_dict().items()})
        searched = step._update.runner.program.searches
        assert bool(searched) == (search > 1), searched  # the layouts of B=24 were timed under search=3
    np.testing.assert_allclose(runs[3][0], runs[0][0], rtol=1e-5)
    for k, v in runs[0][1].items():
        np.testing.assert_allclose(runs[3][1][k], v, rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("bad", [-1, True, 2.0, "4"])
def test_search_must_be_a_non_negative_int(bad):
    with pytest.raises(ValueError, match="compile_step: search must be a non-negative int"):
        _step(bad)
