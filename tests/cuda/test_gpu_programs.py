"""On a GPU (marked ``gpu``; skipped without one): the kernels the GPU lowering generates for whole
programs, compiled by NVRTC and launched through the driver, give what the emulator gives.

The same program is compiled twice for ``cuda-emulated``; the second copy's program is swapped for
the device's (``DeviceProgram``: the same runtime over the driver instead of the simulated device), so
everything but the device (lowering, arena layout, staging, read-back) is shared and the comparison
isolates it. Transcendentals (exp2, log2, sin) are
not correctly rounded in CUDA's libm, and tensor cores accumulate in their own order: a tolerance."""

import numpy as np
import pytest
from programs import BUILDERS, compiled, train_step

from luminal.backends.cuda.program import DeviceProgram

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_device")]  # (tests/cuda/conftest.py)


def _on_device(f):
    f.runner.program = DeviceProgram(f.runner.program.kg, f.runner.program.plan)
    return f


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b.__name__)
def test_program_on_the_device_matches_the_emulator(builder):
    emulated, inputs = compiled(builder)
    device, _ = compiled(builder)
    want = emulated(**inputs)
    got = _on_device(device)(**inputs)
    for w, g in zip(want, got, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-3, atol=2e-3)


def test_train_steps_on_the_device_match_the_emulator():
    step_e, inputs, _ = train_step()
    step_d, _, update = train_step()
    _on_device(update)
    for _ in range(3):
        le, ld = step_e(**inputs), step_d(**inputs)
        np.testing.assert_allclose(float(ld), float(le), rtol=1e-4, atol=1e-5)


def test_signed_zeros_and_nan_on_the_device_match_the_emulator():
    """Max as IEEE maximum (-0 < +0, NaN propagates) and the zero-signed roundings, as the device runs
    them (``lm_max`` orders zeros by their sign bits): bit for bit the emulator's signs and NaNs."""
    import luminal as lm

    x = np.array([0.0, -0.0, -0.3, 0.3, -1e-30, np.nan, -2.5, 2.5], np.float32)

    def build():
        g = lm.Graph()
        t, z = g.input("x", (x.size,)), g.input("z", (2,))
        outs = [t.abs(), lm.maximum(t, -t), lm.minimum(t, t * 0), t.floor(), t.ceil(), t.round(), t.tanh(),
                1 / t.abs(), z.amin(), z.amax()]
        return lm.compile(outs, backend="cuda-emulated")

    emulated, device = build(), _on_device(build())
    for zeros in ([0.0, -0.0], [-0.0, 0.0]):
        z = np.array(zeros, np.float32)
        for k, (w, g) in enumerate(zip(emulated(x=x, z=z), device(x=x, z=z), strict=True)):
            w, g = np.asarray(w), np.asarray(g)
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w), err_msg=f"output {k}, z={zeros}")
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=0, err_msg=f"output {k}, z={zeros}")
