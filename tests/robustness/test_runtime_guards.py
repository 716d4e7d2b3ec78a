"""Class labels that arrive as an input are range-checked on every call, before the program runs
(``Graph.guard``): an out-of-range label is an IndexError naming the loss, the label and the user's
lines, not the backend's "gather: index 7 is out of range"; a train step with such a batch changes
nothing; a program that does not compute the loss (an eval program of the training graph, another
op reading the same ints) is not guarded by them."""

from __future__ import annotations

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_out_of_range_input_label_names_the_loss(loss, backend):
    g = lm.Graph()
    x, y = g.input("x", ("B", 3)), g.input("y", ("B",), dtype=lm.int32)
    inp = x.log_softmax(-1) if loss == "nll_loss" else x
    f = lm.compile(getattr(train, loss)(inp, y), backend=backend)
    xs = np.zeros((4, 3), np.float32)
    assert np.isfinite(f(x=xs, y=np.array([0, 2, 1, -100], np.int32)))  # in range, and ignore_index
    for bad, shown in (([0, 7, 1, 2], 7), ([0, -2, 1, 2], -2), ([3, -5, 9, 2], 9)):
        with pytest.raises(IndexError) as e:
            f(x=xs, y=np.array(bad, np.int32))
        msg = str(e.value)
        assert msg.startswith(f"{loss}: target holds class {shown}, out of range for 3 classes"), msg
        assert "test_runtime_guards.py" in msg  # the user's line
        assert "gather" not in msg


def test_a_train_step_with_a_bad_label_changes_nothing():
    lm.manual_seed(0)
    model = nn.Linear(4, 3)
    g = lm.Graph()
    x, y = g.input("x", ("B", 4)), g.input("y", ("B",), dtype=lm.int32)
    opt = train.AdamW(model.parameters(), lr=0.1)
    step = train.compile_step(train.cross_entropy(model(x), y), opt, backend="cpu")
    xs = np.ones((2, 4), np.float32)
    step(x=xs, y=np.array([0, 1], np.int32))
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(IndexError, match="cross_entropy: target holds class 5"):
        step(x=xs, y=np.array([0, 5], np.int32))
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    assert opt.steps == 1


@pytest.mark.parametrize("bad", ["label", "id"])
def test_a_refused_step_draws_no_dropout_mask(bad):
    """A call refused for a bad label (a guard) or a bad id (the program's own check) leaves the graph's
    generator as it was: the next step draws the masks it would have drawn, so a run that skips a bad
    batch matches one that never saw it."""
    def run(refuse: bool):
        lm.manual_seed(0)
        emb, head = nn.Embedding(6, 16), nn.Linear(16, 3)
        drop = nn.Dropout(0.5)
        g = lm.Graph()
        ids, y = g.input("ids", ("B",), dtype=lm.int32), g.input("y", ("B",), dtype=lm.int32)
        loss = train.cross_entropy(head(drop(emb(ids))), y)
        step = train.compile_step(loss, train.SGD([*emb.parameters(), *head.parameters()], lr=0.1))
        good = dict(ids=np.array([0, 1, 2, 3], np.int32), y=np.array([0, 1, 2, 0], np.int32))
        step(**good)
        if refuse:
            wrong = dict(good, y=np.array([0, 5, 2, 0], np.int32)) if bad == "label" else \
                dict(good, ids=np.array([0, 9, 2, 3], np.int32))
            with pytest.raises(IndexError):
                step(**wrong)
        return [float(step(**good)) for _ in range(3)]

    assert run(True) == run(False)


def test_a_failed_call_does_not_undo_another_programs_draws():
    """Two programs of one graph share its generator, each with its own lock: a call of one that fails
    after the other drew must not put the generator back over the other's draws (its masks would
    repeat; found in review)."""
    lm.manual_seed(0)
    emb = nn.Embedding(6, 8)
    g = lm.Graph()
    ids = g.input("ids", (4,), dtype=lm.int32)
    fa = lm.compile(nn.Dropout(0.5)(emb(ids)))
    fb = lm.compile(g.rand((4, 8)))
    good = np.array([0, 1, 2, 3], np.int32)
    fa(ids=good)
    seen = [fb()]
    run = fa.runner

    def other_draws_then_fails(arrays, env):  # another thread's call lands while this one runs
        seen.append(fb())
        return run(arrays, env)

    fa.runner = other_draws_then_fails
    with pytest.raises(IndexError):
        fa(ids=np.array([0, 9, 2, 3], np.int32))
    seen += [fb(), fb()]  # (put back before fb's draw, the generator would give it that draw again)
    assert not any(np.array_equal(a, b) for i, a in enumerate(seen) for b in seen[i + 1:])


def test_a_program_that_does_not_read_the_labels_is_not_guarded_by_them():
    g = lm.Graph()
    x, y = g.input("x", ("B", 3)), g.input("y", ("B",), dtype=lm.int32)
    train.cross_entropy(x, y)
    probs = lm.compile(x.softmax(-1))  # the eval program of a graph that also has a loss
    np.testing.assert_allclose(probs(x=np.zeros((2, 3), np.float32)), np.full((2, 3), 1 / 3), rtol=1e-6)


def test_a_program_that_reads_the_labels_for_something_else_is_not_guarded_by_them(backend):
    """The same ints as a loss's target and as another op's index: only programs computing the loss
    check them as class labels (an index_select by 4 of 5 rows is fine)."""
    g = lm.Graph()
    t, idx = g.input("t", (5, 3)), g.input("idx", (2,), dtype=lm.int32)
    train.cross_entropy(t[:2], idx)  # classes 0..2
    picked = lm.compile(t.index_select(0, idx), backend=backend)
    rows = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(picked(t=rows, idx=np.array([4, 4], np.int32)), rows[[4, 4]])


def test_one_hot_of_an_out_of_range_class_raises_as_torch(backend):
    """A comparison with every class gave an out-of-range class a silent row of zeros; torch raises."""
    from luminal.nn import functional as F

    g = lm.Graph()
    t = g.input("t", ("B",), dtype=lm.int32)
    f = lm.compile(F.one_hot(t, 4), backend=backend)
    np.testing.assert_array_equal(f(t=np.array([0, 3], np.int32)), [[1, 0, 0, 0], [0, 0, 0, 1]])
    for bad, shown in (([0, 1, 7], 7), ([0, -1], -1)):
        with pytest.raises(IndexError, match=f"^one_hot: class {shown} is out of range for 4 classes") as e:
            f(t=np.array(bad, np.int32))
        assert "test_runtime_guards.py" in str(e.value)
    with pytest.raises(IndexError, match="one_hot: class 5 is out of range"):  # known now: refused now
        F.one_hot(g.constant(np.array([5], np.int32)), 4)


def test_an_id_out_of_range_at_run_time_names_the_layer_and_its_line(backend):
    """A gather's index checked by the program itself (no guard: an embedding's ids) fails naming the
    op or layer the user called, the line that made it and the call; a train step changes nothing."""
    lm.manual_seed(0)
    emb, head = nn.Embedding(10, 8), nn.Linear(8, 2)
    g = lm.Graph()
    ids = g.input("ids", ("B",), dtype=lm.int32)
    out = head(emb(ids))  # the line the error names
    made = f"test_runtime_guards.py:{out.origin[1]}"
    f = lm.compile(out, backend=backend)
    with pytest.raises(IndexError) as e:
        f(ids=np.array([1, 12], np.int32))
    msg = str(e.value)
    assert msg.startswith("Embedding(10, 8): index 12 is out of range for a dim of size 10 (its gather, made at "), msg
    assert made in msg and msg.count("test_runtime_guards.py") == 2  # made at, called at
    step = train.compile_step(out.sum(), train.SGD([*emb.parameters(), *head.parameters()], lr=0.1), backend=backend)
    before = {k: v.copy() for k, v in emb.state_dict().items()}
    with pytest.raises(IndexError, match=r"^Embedding\(10, 8\): index -3 is out of range"):
        step(ids=np.array([1, -3], np.int32))
    for k, v in emb.state_dict().items():
        np.testing.assert_array_equal(v, before[k], err_msg=k)
    x, i = g.input("x", (5, 3)), g.input("i", (2,), dtype=lm.int32)
    picked = lm.compile(x.index_select(0, i), backend=backend)
    with pytest.raises(IndexError, match=r"^index_select: index 9 is out of range for a dim of size 5 \(its gather, "
                                         r"made at .*test_runtime_guards.py"):
        picked(x=np.ones((5, 3), np.float32), i=np.array([0, 9], np.int32))


def test_guard_arguments_are_checked():
    g = lm.Graph()
    x = g.input("x", (3,))
    with pytest.raises(ValueError, match="guard: failed must be a scalar"):
        g.guard(x > 0, x.sum(), IndexError, "m")
    with pytest.raises(TypeError, match="guard: failed must be bool"):
        g.guard(x.sum(), x.sum(), IndexError, "m")


@pytest.mark.parametrize("i,j,bad", [(0, 5, "index 5 is out of range for dim 1 of size 4"),
                                     (0, -5, "index -5 is out of range for dim 1 of size 4"),
                                     (3, 0, "index 3 is out of range for dim 0 of size 3")])
def test_each_of_several_tensor_indices_is_checked_against_its_own_dim(i, j, bad, backend):
    """``x[i, j]`` of a (3, 4) tensor with j=5 read x[1, 1]: the indices combine into one flat position
    (0 * 4 + 5), which was inside x. torch: ``index 5 is out of bounds for dimension 1 with size 4``. The
    message gives the user's value and dim, not the flat position or a wrapped -1."""
    g = lm.Graph()
    x, gi, gj = g.input("x", (3, 4)), g.input("i", (1,), dtype=lm.int32), g.input("j", (1,), dtype=lm.int32)
    f = lm.compile(x[gi, gj], backend=backend)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.raises(IndexError, match=rf"^getitem: {bad} \(its gather, made at .*test_runtime_guards.py"):
        f(x=a, i=np.array([i], np.int32), j=np.array([j], np.int32))
    np.testing.assert_array_equal(f(x=a, i=np.array([-1], np.int32), j=np.array([-4], np.int32)), [8.0])


@pytest.mark.parametrize("op", ["getitem", "take_along_dim", "setitem"])
def test_a_negative_index_past_the_dim_is_reported_as_given(op, backend):
    """``x[i]`` with i=-4 on a size-3 dim said ``gather: index -1`` (the index after wrapping negatives,
    under the primitive's name); setitem's said ``gather: index 7`` with no line. Now the user's op, value
    and line."""
    g = lm.Graph()
    x, i = g.input("x", (3,)), g.input("i", (1,), dtype=lm.int32)
    if op == "getitem":
        y = x[i]
    elif op == "take_along_dim":
        y = x.take_along_dim(i, 0)
    else:
        y = x * 1
        y[i] = 1.0
    f = lm.compile(y, backend=backend)
    with pytest.raises(IndexError, match=rf"^{op}: index -4 is out of range for dim 0 of size 3 \(its gather, made "
                                         rf"at .*test_runtime_guards.py"):
        f(x=np.zeros(3, np.float32), i=np.array([-4], np.int32))
