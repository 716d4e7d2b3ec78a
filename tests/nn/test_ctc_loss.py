"""``ctc_loss`` (``luminal/nn/losses_ctc.py``) against torch's ``F.ctc_loss``: values and gradients for
every reduction and ``zero_infinity``, padded and concatenated targets, lengths given as ints or as
int32 tensors (known only at run time), unbatched input, and the edge cases torch defines (empty
targets, zero-length inputs, impossible alignments, -inf log-probabilities); then the errors.

The losses take ``log_softmax`` of the logits the harness feeds, on both sides: torch's kernel returns
``exp(log_probs) - posterior`` as the gradient w.r.t. ``log_probs`` (the logits' gradient), which equals
the true gradient (ours) only through ``log_softmax`` (``test_gradient_wrt_log_probs_is_exact``).
torch runs in float64 and its results are rounded to float32: its float32 gradient loses ~1e-4 to
cancellation at T ~ 100 (``exp(alpha + beta - lp + nll)`` with nll ~ 1000), ours stays ~1e-5.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from error_table import raises_naming
from parity import BACKENDS, check, rand

import luminal as lm
from luminal import train
from luminal.nn.layers.loss_more import CTCLoss
from luminal.nn.losses_ctc import ctc_loss

pytestmark = [pytest.mark.usefixtures("one_torch_thread")]
REDUCTIONS = ("none", "mean", "sum")
T, N, C, S = 9, 4, 6, 4
# per sample: full length with repeats (1 1 needs a blank between), a shorter input, an empty target,
# a target of one label in a 2-frame input
TARGETS = np.int32([[2, 2, 3, 1], [1, 4, 5, 0], [0, 0, 0, 0], [5, 0, 0, 0]])
IN_LEN, TG_LEN = [9, 6, 5, 2], [4, 3, 0, 1]


def _concat(targets, lengths):
    return np.concatenate([targets[i, :k] for i, k in enumerate(lengths)]).astype(np.int32)


def _compare(x, targets, in_len, tg_len, backend, variants, lengths_as=None, grad=True, unbatched=False):
    """Our ctc_loss of ``log_softmax(x)`` against torch's (in float64, rounded to float32), one output
    per (reduction, zero_infinity) of ``variants``. ``lengths_as``: "tensor" gives the lengths as graph
    inputs of int32 (their values known only at run time), else Python lists (ints when unbatched)."""
    cdim = x.ndim - 1
    inputs = [x, targets]
    if lengths_as == "tensor":
        inputs += [np.int32(in_len), np.int32(tg_len)]

    def ours(x, t, *lens):
        il, tl = lens if lens else (in_len, tg_len)
        return tuple(ctc_loss(x.log_softmax(cdim), t, il, tl, reduction=r, zero_infinity=z) for r, z in variants)

    def theirs(x, t, *lens):
        il, tl = (lens[0].long(), lens[1].long()) if lens else (torch.tensor(in_len), torch.tensor(tg_len))
        return tuple(F.ctc_loss(x.double().log_softmax(cdim), t.long(), il, tl, reduction=r, zero_infinity=z).float()
                     for r, z in variants)

    return check(ours, inputs, torch_op=theirs, backend=backend, grad=grad)


ALL = [(r, z) for r in REDUCTIONS for z in (False, True)]


def _tiered(*quick):
    """Every backend, the reference one in the quick tier and the others in the full tier (``slow``):
    each graph of the unrolled recursion costs seconds of LLVM compile on the cpu backend, so the quick
    tier runs it there only for the main cases (``quick``: parameter tuples that run everywhere)."""
    def mark(case, b):
        quick_here = b == "reference" or case in quick
        return pytest.param(*case, b, marks=() if quick_here else pytest.mark.slow, id="-".join((b, *case)))
    return mark


CASES = [("padded", "ints"), ("concatenated", "tensor"), ("padded", "tensor"), ("concatenated", "ints")]
_main = _tiered(*CASES[:2])
_edge = _tiered()
ON_REFERENCE = pytest.mark.parametrize("backend", [_edge((), b) for b in BACKENDS])


@pytest.mark.parametrize("layout,lengths_as,backend", [_main(c, b) for c in CASES for b in BACKENDS])
def test_ctc_loss(layout, lengths_as, backend):
    targets = TARGETS if layout == "padded" else _concat(TARGETS, TG_LEN)
    _compare(rand((T, N, C), low=-3, high=3), targets, IN_LEN, TG_LEN, backend, ALL, lengths_as)


@ON_REFERENCE
def test_ctc_loss_blank_not_zero(backend):
    """blank is any class: here the last; the labels avoid it."""
    x = rand((T, N, C), low=-3, high=3)
    t = np.where(TARGETS == 5, 0, TARGETS).astype(np.int32)

    def ours(x, t):
        return tuple(ctc_loss(x.log_softmax(2), t, IN_LEN, TG_LEN, blank=C - 1, reduction=r) for r in REDUCTIONS)

    def theirs(x, t):
        lp = x.double().log_softmax(2)
        return tuple(F.ctc_loss(lp, t.long(), IN_LEN, TG_LEN, blank=C - 1, reduction=r).float() for r in REDUCTIONS)

    check(ours, [x, t], torch_op=theirs, backend=backend)


@ON_REFERENCE
def test_ctc_loss_unbatched(backend):
    """(T, C) log-probabilities with a 1-d target of exactly its length, lengths as ints or 0-d tensors."""
    x = rand((T, C), low=-3, high=3)
    t = np.int32([3, 3, 1])
    _compare(x, t, 7, 3, backend, [(r, False) for r in REDUCTIONS])
    _compare(x, t, np.int32(7), np.int32(3), backend, [("none", False), ("mean", False)], lengths_as="tensor")


@ON_REFERENCE
def test_ctc_loss_impossible_and_empty(backend):
    """Impossible alignments: a target longer than its input, repeats without room for the blank between,
    a target for a zero-length input; and what torch defines as 0: an empty target for a zero-length
    input. With zero_infinity they cost 0 and get 0 gradients (torch's too); without it the loss is inf,
    as torch's, and our gradient stays finite (0 for those samples) where torch's is NaN."""
    x = rand((5, N, C), low=-3, high=3)
    t = np.int32([[1, 2, 3, 4], [2, 2, 2, 0], [1, 0, 0, 0], [0, 0, 0, 0]])
    il, tl = [3, 4, 0, 0], [4, 3, 1, 0]
    _compare(x, t, il, tl, backend, [(r, True) for r in REDUCTIONS])
    _compare(x, t, il, tl, backend, [("none", False), ("sum", False)], grad=False)
    g = lm.Graph()
    xi = g.input("x", x.shape)
    y = ctc_loss(xi.log_softmax(2), g.constant(t), il, tl, reduction="sum")
    loss, grad = lm.compile([y, train.grad(y, xi)], backend=backend)(x=x)
    assert loss == np.inf and np.isfinite(grad).all() and not grad.any()


@ON_REFERENCE
def test_ctc_loss_all_padding_batch(backend):
    """Every target empty: the loss is the log-probability of all blanks; 'mean' divides by 1, not 0."""
    x = rand((4, 3, C), low=-3, high=3)
    _compare(x, np.zeros((3, 2), np.int32), [4, 2, 1], [0, 0, 0], backend, [(r, False) for r in REDUCTIONS])


@ON_REFERENCE
def test_ctc_loss_minus_inf_log_probs(backend):
    """A class of probability 0 (-inf logits, so -inf log-probabilities) that the target needs at some
    frames: the loss is torch's (from the other paths). Our gradient is finite everywhere and torch's
    on the frames where torch's is finite; at the -inf frames torch's is NaN (``-inf - -inf`` in its
    kernel)."""
    x = rand((6, 2, C), low=-2, high=2)
    x[1:3, :, 2] = -np.inf  # class 2 impossible at frames 1 and 2
    t, il, tl = np.int32([[2, 1], [3, 2]]), [6, 6], [2, 2]
    _compare(x, t, il, tl, backend, [(r, False) for r in REDUCTIONS], grad=False)
    g = lm.Graph()
    xi = g.input("x", x.shape)
    y = ctc_loss(xi.log_softmax(2), g.constant(t), il, tl, reduction="sum")
    got = lm.compile(train.grad(y, xi), backend=backend)(x=x)
    leaf = torch.from_numpy(x).double().requires_grad_()
    F.ctc_loss(leaf.log_softmax(2), torch.from_numpy(t).long(), il, tl, reduction="sum").backward()
    want = leaf.grad.numpy()
    assert np.isfinite(got).all() and np.isnan(want[1:3]).all()
    np.testing.assert_allclose(got[[0, 3, 4, 5]], want[[0, 3, 4, 5]], rtol=1e-4, atol=1e-5)


@ON_REFERENCE
def test_ctc_loss_float64(backend):
    x = rand((T, N, C), low=-3, high=3).astype(np.float64)

    def ours(x, t):
        return tuple(ctc_loss(x.log_softmax(2), t, IN_LEN, TG_LEN, reduction=r) for r in REDUCTIONS)

    def theirs(x, t):
        return tuple(F.ctc_loss(x.log_softmax(2), t.long(), IN_LEN, TG_LEN, reduction=r) for r in REDUCTIONS)

    check(ours, [x, TARGETS], torch_op=theirs, backend=backend)


def test_gradient_wrt_log_probs_is_exact():
    """Differentiated w.r.t. ``log_probs`` themselves (no log_softmax), ours is the exact gradient
    ``-posterior``; torch's kernel gives ``exp(log_probs) - posterior`` on the frames each input has
    (the gradient w.r.t. the logits). Their difference is exactly that term."""
    lp = torch.from_numpy(rand((T, N, C), low=-3, high=3)).double().log_softmax(2)
    leaf = lp.clone().requires_grad_()
    F.ctc_loss(leaf, torch.from_numpy(TARGETS).long(), IN_LEN, TG_LEN, reduction="sum").backward()
    frames = (np.arange(T)[:, None] < np.array(IN_LEN)[None, :])[:, :, None]
    want = leaf.grad.numpy() - np.exp(lp.numpy()) * frames
    g = lm.Graph()
    x = g.input("lp", (T, N, C), lm.float64)
    y = ctc_loss(x, g.constant(TARGETS), IN_LEN, TG_LEN, reduction="sum")
    got = lm.compile(train.grad(y, x), backend="reference")(lp=lp.numpy())
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("t_max", [50, 100])
def test_ctc_loss_long_input_compiles_and_matches(t_max, backend):
    """T = 50 and 100 frames: the unrolled recursion builds, compiles and runs, values and gradients
    within tolerance of torch's float64. The build + compile + first run time is printed (``-s``)."""
    rng = np.random.default_rng(0)
    n, c, s = 4, 20, 12
    x = rand((t_max, n, c), low=-3, high=3, seed=2)
    t = rng.integers(1, c, (n, s)).astype(np.int32)
    il, tl = [t_max, t_max - 7, t_max // 2, 3], [s, 9, 5, 0]
    start = time.perf_counter()
    _compare(x, t, il, tl, backend, [("mean", False), ("sum", True)])
    print(f"\nctc_loss T={t_max} on {backend}: build + grad + compile + run {time.perf_counter() - start:.1f} s")


@ON_REFERENCE
def test_ctc_loss_module(backend):
    """nn.CTCLoss with torch's arguments (positional, as torch's signature places them) and its
    forward's, lengths as int32 tensors. The labels avoid both blanks used (0 and C - 1)."""
    x = rand((T, N, C), low=-3, high=3)
    made = [((C - 1, "sum", True), {}), ((), {"reduction": "none"}), ((), {})]
    t = np.where(TARGETS == 5, 3, TARGETS).astype(np.int32)

    def ours(x, t, il, tl):
        return tuple(CTCLoss(*a, **k)(x.log_softmax(2), t, il, tl) for a, k in made)

    def theirs(x, t, il, tl):
        lp = x.double().log_softmax(2)
        return tuple(torch.nn.CTCLoss(*a, **k)(lp, t.long(), il.long(), tl.long()).float() for a, k in made)

    check(ours, [x, t, np.int32(IN_LEN), np.int32(TG_LEN)], torch_op=theirs, backend=backend)


# errors -----------------------------------------------------------------------------------------
def _errors():
    g = lm.Graph()
    lp, t = g.input("lp", (T, N, C)), g.constant(TARGETS)
    il = g.input("il", (N,), lm.int32)
    return [
        (lambda: ctc_loss(g.input("x4", (T, N, C, 1)), t, IN_LEN, TG_LEN), ValueError, ["ctc_loss", "(T, N, C)"]),
        (lambda: ctc_loss(g.input("xs", ("T", N, C)), t, IN_LEN, TG_LEN), ValueError, ["ctc_loss", "static"]),
        (lambda: ctc_loss(g.input("xi", (T, N, C), lm.int32), t, IN_LEN, TG_LEN), TypeError, ["ctc_loss", "float"]),
        (lambda: ctc_loss(lp, g.input("tf", (N, S)), IN_LEN, TG_LEN), TypeError, ["ctc_loss", "int", "float32"]),
        (lambda: ctc_loss(lp, g.input("t3", (3, S), lm.int32), IN_LEN, TG_LEN), ValueError, ["ctc_loss", "(3, 4)"]),
        (lambda: ctc_loss(lp, t, IN_LEN, TG_LEN, blank=C), ValueError, ["ctc_loss", "blank", "[0, 6)"]),
        (lambda: ctc_loss(lp, t, IN_LEN, TG_LEN, reduction="batchmean"), ValueError, ["ctc_loss", "batchmean"]),
        (lambda: ctc_loss(lp, t, [9, 9, 9], TG_LEN), ValueError, ["ctc_loss", "input_lengths", "4 entries", "3"]),
        (lambda: ctc_loss(lp, t, [9, 10, 9, 9], TG_LEN), ValueError, ["ctc_loss", "input_lengths holds 10", "[0, 9]"]),
        (lambda: ctc_loss(lp, t, IN_LEN, [1, 5, 1, 1]), ValueError, ["ctc_loss", "target_lengths holds 5", "width 4"]),
        (lambda: ctc_loss(lp, t, IN_LEN, [1, -1, 1, 1]), ValueError, ["ctc_loss", "target_lengths holds -1"]),
        (lambda: ctc_loss(lp, t, [9.0] * 4, TG_LEN), TypeError, ["ctc_loss", "input_lengths", "sequence of ints"]),
        (lambda: ctc_loss(lp, t, il * 1.0, TG_LEN), TypeError, ["ctc_loss", "input_lengths must hold ints"]),
        (lambda: ctc_loss(lp, t, g.input("il2", (2,), lm.int32), TG_LEN), ValueError, ["ctc_loss", "(4,)", "(2,)"]),
        (lambda: ctc_loss(lp, g.constant(np.int32([1, 2, 3])), IN_LEN, TG_LEN), ValueError,
         ["ctc_loss", "sum(target_lengths) = 8", "got 3"]),
        (lambda: ctc_loss(lp, t, 9, TG_LEN), TypeError, ["ctc_loss", "input_lengths", "int"]),  # batched: a sequence
        (lambda: ctc_loss(lp, t, IN_LEN, TG_LEN, 0, "mean", False, 1), TypeError, ["positional"]),
    ]


@pytest.mark.parametrize("k", range(len(_errors())))
def test_errors(k):
    raises_naming(*_errors()[k])


def test_run_time_lengths_and_labels_are_checked():
    """Lengths and labels that only a run sees are checked before it runs, naming the loss and the value
    (torch refuses bad lengths; an out-of-range label it reads out of bounds)."""
    g = lm.Graph()
    x, t = g.input("x", (T, N, C)), g.input("t", (N, S), lm.int32)
    il, tl = g.input("il", (N,), lm.int32), g.input("tl", (N,), lm.int32)
    f = lm.compile(ctc_loss(x, t, il, tl), backend="reference")
    lp = torch.from_numpy(rand((T, N, C))).log_softmax(2).numpy()
    ok = dict(x=lp, t=TARGETS, il=np.int32(IN_LEN), tl=np.int32(TG_LEN))
    assert np.isfinite(f(**ok))
    bad = [(dict(il=np.int32([9, 12, 1, 1])), "input_lengths holds 12, out of range [0, 9]"),
           (dict(il=np.int32([9, -2, 1, 1])), "input_lengths holds -2"),
           (dict(tl=np.int32([4, 5, 0, 0])), "target_lengths holds 5, out of range [0, 4]"),
           (dict(t=np.int32([[2, 2, 3, 1], [1, 6, 5, 0], [9, 9, 9, 9], [5, 0, 0, 0]])), "targets hold label 6")]
    for change, msg in bad:
        kind = IndexError if "label" in msg else ValueError
        with pytest.raises(kind, match="^ctc_loss: " + msg.replace("[", r"\[").replace("]", r"\]")):
            f(**{**ok, **change})
    # concatenated targets: the lengths must add up to the labels given
    tc = g.input("tc", (8,), lm.int32)
    f = lm.compile(ctc_loss(x, tc, il, tl), backend="reference")
    assert np.isfinite(f(x=lp, tc=_concat(TARGETS, TG_LEN), il=np.int32(IN_LEN), tl=np.int32(TG_LEN)))
    with pytest.raises(ValueError, match=r"^ctc_loss: concatenated targets need sum\(target_lengths\) = 7 labels"):
        f(x=lp, tc=_concat(TARGETS, TG_LEN), il=np.int32(IN_LEN), tl=np.int32([3, 3, 0, 1]))
