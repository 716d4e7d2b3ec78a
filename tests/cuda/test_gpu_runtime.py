"""On a GPU (marked ``gpu``; skipped without one): ``backend="cuda"`` end to end through the driver,
as ``cuda-emulated`` runs it on the simulated device: the same results, States resident on the device
across calls and programs, graphs replayed, and the backend's device timer."""

import numpy as np
import pytest
from programs import train_step

import luminal as lm
from luminal.core.backend import get_backend

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("cuda_device")]  # (tests/cuda/conftest.py)


def test_train_steps_on_cuda_match_cuda_emulated_with_states_on_the_device():
    step_e, inputs, _ = train_step("cuda-emulated")
    step_d, _, update = train_step("cuda")
    for _ in range(4):  # launch by launch, then captured and replayed
        np.testing.assert_allclose(float(step_d(**inputs)), float(step_e(**inputs)), rtol=1e-4, atol=1e-5)
    params = step_d.optimizer.param_groups[0]["params"]
    assert all(p.device_current and not p._host_current for p in params)
    (binding,) = update.runner.program._bindings.values()
    assert binding._graphs is not None
    for p, q in zip(params, step_e.optimizer.param_groups[0]["params"], strict=True):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-4, atol=1e-5)


def test_the_cuda_backend_times_a_candidate_on_the_device():
    g = lm.Graph()
    x = g.input("x", ("B", 64))
    f = lm.compile((x * 2.0).exp().sum(-1), backend="cuda")
    program = f.runner.program
    seconds = get_backend("cuda").time(program.kg, program.plan)
    assert 0 < seconds < 1.0
