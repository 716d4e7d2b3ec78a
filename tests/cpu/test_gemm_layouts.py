"""GEMM-friendly storage orders (``cpu/layout.py``'s ``walk_order`` and ``gemm_orders``): a temp that a
GEMM reads or writes is stored so that its batch, row and column axes each form one run, so that a
convolution-shaped product (a weight broadcast over images) is one BLAS call with ``N = B*H*W``
instead of one per image. Results are checked against the reference interpreter and torch; the
shape of the BLAS calls is checked on the binding (one thread, so no call is cut)."""

from __future__ import annotations

import numpy as np
import pytest
from parity import TOLERANCE, compare_outputs, rand, to_torch

import luminal as lm
from luminal.backends.cpu import layout
from luminal.backends.cpu.gemm import Strided
from luminal.core.symbolic import evaluate

# name: (input shapes, op on luminal and torch tensors alike)
CASES = {
    # a weight times every image's columns: the im2col product of a convolution's forward pass
    "conv_forward": ([("B", 3, 20), (6, 3)], lambda x, w: ((w @ (x * 2)).relu() + 1,)),
    # the same, with the columns' rows a merged run of axes (channels x kernel taps)
    "conv_forward_merged_rows": ([("B", 2, 3, 20), (4, 6)],
                                 lambda x, w: (w @ (x * 2).reshape(x.shape[0], 6, 20) + 1,)),
    # the input gradient: the weight transposed times every image's output gradient
    "conv_input_grad": ([("B", 6, 20), (6, 3)], lambda dy, w: (w.transpose(0, 1) @ (dy * 2),)),
    # the product read again by another GEMM and by an elementwise kernel
    "chained": ([("B", 3, 20), (6, 3), (5, 6)], lambda x, w, v: (v @ (w @ (x - 1)), (w @ (x - 1)) * 3)),
    # a caller's batch-major input read sequence-major (a transformer's (S, B, d) projection of a (B, S, d)
    # input): its rows merge in memory order, (B, S), and the product is stored to match
    "sequence_major_rows": ([("B", 4, 3), (3, 6)], lambda x, w: ((x.permute(1, 0, 2) @ w) + 1,)),
    # images are a true batch here (both operands move along it): stays a batched GEMM
    "weight_grad": ([("B", 6, 20), ("B", 3, 20)], lambda dy, x: ((dy * 2) @ (x + 1).transpose(1, 2),)),
}
BINDINGS = ({"B": 3}, {"B": 1}, {"B": 0}, {"B": 4})


@pytest.mark.parametrize("name", list(CASES))
def test_gemm_layouts_against_reference_and_torch(name, monkeypatch):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    shapes, op = CASES[name]
    g = lm.Graph()
    xs = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
    outs = list(op(*xs))
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    for k, env in enumerate(BINDINGS):
        arrays = [rand(tuple(env.get(d, d) for d in s), lm.float32, seed=10 * k + i, low=-3, high=3)
                  for i, s in enumerate(shapes)]
        inputs = {f"x{i}": a for i, a in enumerate(arrays)}
        for _ in range(2):  # a second run over the same buffers
            got, want = cpu(**inputs), ref(**inputs)
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        theirs = op(*[to_torch(a, lm.float32) for a in arrays])
        rt, at = TOLERANCE[lm.float32]
        compare_outputs(outs, got, theirs, rtol=rt * 10, atol=at * 10, where=f"{env}: ")


def _matmuls(f) -> list:
    """The operand shapes of every BLAS call of ``f``'s binding."""
    b = next(iter(f.runner.program._bindings.values()))
    return [[a.shape for a in args] for fn, args in b.schedule.steps if fn is np.matmul]


@pytest.mark.parametrize("name,calls", [
    ("conv_forward", [[(6, 3), (3, 100), (6, 100)]]),
    ("conv_forward_merged_rows", [[(4, 6), (6, 100), (4, 100)]]),
    ("conv_input_grad", [[(3, 6), (6, 100), (3, 100)]]),
    ("weight_grad", [[(5, 6, 20), (5, 20, 3), (5, 6, 3)]]),
    ("sequence_major_rows", [[(20, 3), (3, 6), (20, 6)]]),
])
def test_a_weight_over_images_is_one_gemm(name, calls, monkeypatch):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    shapes, op = CASES[name]
    g = lm.Graph()
    xs = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
    f = lm.compile(list(op(*xs)), backend="cpu")
    f(**{f"x{i}": rand(tuple(5 if d == "B" else d for d in s), lm.float32, seed=i) for i, s in enumerate(shapes)})
    assert _matmuls(f) == calls


def test_walk_order_of_a_merged_run():
    # an im2col buffer (B, C, kh, kw, H, W) read as (B, C*kh*kw, H*W): rows = the (C, kh, kw) run
    shape = (4, 2, 3, 3, 5, 5)
    v = Strided((4, 18, 25), (450, 25, 1), 0)
    walk = layout.axis_walk(v, shape)
    assert walk == [((0,), 1), ((1, 2, 3), 1), ((4, 5), 1)]
    # N = (B, H*W) as one run, K = (C, kh, kw) outside it
    order = layout.walk_order(v, shape, [[], [1], [0, 2]])
    assert order == (1, 2, 3, 0, 4, 5)
    moved = layout.remap(v, shape, order)
    assert moved == Strided((4, 18, 25), (25, 100, 1), 0)
    # an order that splits the run does not remap
    assert layout.remap(v, shape, (2, 1, 3, 0, 4, 5)) is None


def test_a_run_walked_twice_or_partly_is_no_walk():
    shape = (2, 3, 4)
    assert layout.axis_walk(Strided((12, 4), (1, 1), 0), shape) is None  # two axes over one run
    assert layout.axis_walk(Strided((6,), (1,), 4), shape) is None  # a run from the middle of its axes
    assert layout.axis_walk(Strided((12,), (1,), 0), shape) == [((1, 2), 1)]


def test_gemm_orders_keeps_the_current_layout_on_a_tie():
    # plain row-major operands are one GEMM as they are: nothing moves
    out = Strided((4, 5), (5, 1), 0)
    domain, ks = (4, 3, 5), (1,)
    av = Strided(domain, (3, 1, 0), 0)
    bv = Strided(domain, (0, 5, 1), 0)
    chosen = layout.gemm_orders(domain, ks, [(av, (4, 3), [None, (1, 0)]), (bv, (3, 5), [None, (1, 0)]),
                                             (out, (4, 5), [None, (1, 0)])])
    assert chosen == [None, None, None]



def test_a_sum_over_the_gemm_batch_is_one_gemm(monkeypatch):
    """A convolution's weight gradient: a product per image summed over the images (and fused with an
    update) is folded (``cpu/fold.py``) into one GEMM whose contraction runs over images and pixels."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    g = lm.Graph()
    dy, x, w = g.input("dy", ("B", 64, 20)), g.input("x", ("B", 64, 20)), g.input("w", (64, 64))
    out = w - 0.1 * ((dy * 2) @ (x + 1).transpose(1, 2)).sum(0)
    small = g.input("w2", (6, 3)) - ((dy[:, :6] * 2) @ (x[:, :3] + 1).transpose(1, 2)).sum(0)
    cpu, ref = lm.compile([out, small], backend="cpu"), lm.compile([out, small], backend="reference")
    for k, env in enumerate(BINDINGS):
        n = env["B"]
        inputs = {"dy": rand((n, 64, 20), seed=k), "x": rand((n, 64, 20), seed=k + 1),
                  "w": rand((64, 64), seed=k + 2), "w2": rand((6, 3), seed=k + 3)}
        got = cpu(**inputs)
        for a, b in zip(got, ref(**inputs), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)
        want = inputs["w"] - 0.1 * np.einsum("bip,bjp->ij", inputs["dy"] * 2, inputs["x"] + 1)
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-3)
    # K = 3 images x 20 pixels (the first binding) for the 64 x 64 product; the 6 x 3 one stays batched
    assert _matmuls(cpu) == [[(64, 60), (60, 64), (64, 64)], [(3, 6, 20), (3, 20, 3), (3, 6, 3)]]
    # the folded product's memory-plan slot is as large as the largest buffer placed in it (the 64 x 64
    # product among them), not as the plan's unfolded (B, 64, 64) product (which for B = 0 has no room)
    program = cpu.runner.program
    slot = program.plan.slot_of[_folded(program).id]
    for b in program._bindings.values():
        env = b.schedule.env
        placed = [int(np.prod([evaluate(d, env) for d in buf.shape])) * buf.dtype.np.itemsize
                  for buf in program.kg.buffers if program.plan.slot_of.get(buf.id) == slot]
        assert b.schedule.storages[slot].nbytes == max(placed) >= 64 * 64 * 4, env
        if env["B"] > 1:
            assert b.schedule.storages[slot].nbytes < program.plan.slot_bytes(env)[slot], env


def test_a_sum_over_the_gemm_batch_in_a_rolled_body_is_one_gemm(monkeypatch):
    """The same fold inside a rolled loop's body (a transformer block's weight gradients are products
    summed over the batch in its body): before it, every trip ran a batched GEMM and a sum kernel."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    g = lm.Graph()
    x, outs = g.input("x", ("B", 64, 20)), []
    for i in range(10):
        y = g.input(f"w{i}", (64, 64)) - 0.01 * ((x * 2) @ (x + 1).transpose(1, 2)).sum(0)
        x = (y @ x) * 0.05
        outs.append(y)
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    for k, env in enumerate(BINDINGS):
        inputs = {"x": rand((env["B"], 64, 20), seed=k), **{f"w{i}": rand((64, 64), seed=k + i + 1) for i in range(10)}}
        for a, b in zip(cpu(**inputs), ref(**inputs), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(b).max())))
    assert any(lp["trips"] >= 9 for lp in cpu.report(show=False).loops), "the stack did not roll"
    calls = _matmuls(cpu)  # the first binding's (B = 3): K = 3 images x 20 pixels, per trip
    assert calls.count([(64, 60), (60, 64), (64, 64)]) == 10 and [(3, 64, 20), (3, 20, 64), (3, 64, 64)] not in calls


def _folded(program):
    """The buffer of the product folded over its batch (the 64 x 64 one)."""
    return next(buf for k in program.kg.kernels if k.kind == "matmul" for buf, _ in k.outputs
                if tuple(buf.shape) == (64, 64))


def _kinds(f) -> list:
    """The kinds of ``f``'s kernels after the fold, rolled bodies' kernels included."""
    kg = f.runner.program.kg
    return [k.kind for k in kg.kernels] + [k.kind for body in kg.bodies() for k in body.kernels]


def test_a_folded_sum_with_nothing_after_it_is_written_by_the_gemm(monkeypatch):
    """A weight gradient taken as it is (a data-parallel step writes it into its bucket): after the fold
    the sum kernel would only copy the product over size-1 axes, so the GEMM writes the sum's buffer
    and no reduce kernel is left, in the program and in a rolled body. A transposed reader (the
    gradient of ``x @ w.T``) then reads it in the order the GEMM was free to store it in."""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    g = lm.Graph()
    dy, x = g.input("dy", ("B", 64, 20)), g.input("x", ("B", 64, 20))
    grad = ((dy * 2) @ (x + 1).transpose(1, 2)).sum(0)
    outs = [grad, grad.T * 1.0]
    h = x
    for i in range(10):  # a stack that rolls, each trip with a weight gradient of its own
        y = g.input(f"w{i}", (64, 64))
        outs.append(((h * 2) @ (h + 1).transpose(1, 2)).sum(0).T * 1.0)
        h = (y @ h) * 0.05
    cpu, ref = lm.compile(outs, backend="cpu"), lm.compile(outs, backend="reference")
    for k, env in enumerate(BINDINGS):
        n = env["B"]
        inputs = {"dy": rand((n, 64, 20), seed=k), "x": rand((n, 64, 20), seed=k + 1),
                  **{f"w{i}": rand((64, 64), seed=k + i + 2) for i in range(10)}}
        for a, b in zip(cpu(**inputs), ref(**inputs), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(b).max())))
    assert any(lp["trips"] >= 9 for lp in cpu.report(show=False).loops), "the stack did not roll"
    assert "matmul" in _kinds(cpu) and "reduce" not in _kinds(cpu), _kinds(cpu)


def test_an_im2col_matrix_stored_for_its_gemm_is_written_front_to_back(monkeypatch):
    """The layout planner stores a convolution's im2col matrix with the image axis inside the channel
    and window axes (one GEMM over all images); the copy that fills it then walks it in that memory
    order (``codegen/lowering/elementwise.py``'s ``_store_order``) instead of the logical (image,
    channel, window, pixel) order, which wrote one row's 14 floats at a time all over the matrix.
    Values as the reference's. (Planned with BLAS's GEMMs: by default the product gathers its columns
    from the image and the matrix is not made, ``gathered.py``.)"""
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "1")
    from luminal.backends.cpu import tune
    from luminal.backends.cpu.compiled import Binding
    from luminal.backends.cpu.plan import plan
    from luminal.codegen.lowering import elementwise as cpu_codegen
    from luminal.core.kernel_graph import expand_calls

    orders = []
    real = cpu_codegen._store_order
    monkeypatch.setattr(cpu_codegen, "_store_order", lambda shape, out: orders.append(real(shape, out)) or orders[-1])
    g = lm.Graph()  # 16 channels: the reordered copy's outermost axis (MIN_OUTER)
    x, w, bias = g.input("x", ("B", 16, 14, 14)), g.input("w", (8, 16, 5, 5)), g.input("bias", (8,))
    y = lm.nn.functional.conv2d(x, w, bias, padding=2)
    prog, ref = lm.compile([y], backend="cpu").runner.program, lm.compile([y], backend="reference")
    for n in (4, 1):
        inputs = {"x": rand((n, 16, 14, 14), seed=n), "w": rand((8, 16, 5, 5), seed=5), "bias": rand((8,), seed=6)}
        b = Binding(plan(prog.kg, expand_calls(prog.kg.kernels), prog.plan, {"B": n}, tune.Choices(gemm="blas")))
        np.testing.assert_allclose(b.run(inputs)[0], ref(**inputs)[0], rtol=1e-4, atol=1e-4)
    assert any(o is not None and o[0] != 0 for o in orders), orders  # some copy walks another axis outermost
