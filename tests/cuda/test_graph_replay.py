"""A binding's first call runs launch by launch; later calls replay the captured CUDA graphs (the run,
then the commit), which must give exactly what running the launches one by one gives;
``LUMINAL_CUDA_SYNC=1`` never captures."""

import numpy as np
from programs import train_step

from luminal.backends.cuda import runtime as rt


def _losses_and_params(steps, sync, monkeypatch):
    if sync:
        monkeypatch.setenv("LUMINAL_CUDA_SYNC", "1")
    else:
        monkeypatch.delenv("LUMINAL_CUDA_SYNC", raising=False)
    step, inputs, update = train_step()
    dev = rt.simulated().device
    replays = dev.replays
    losses = [float(step(**inputs)) for _ in range(steps)]
    params = [np.array(p.data) for p in step.optimizer.param_groups[0]["params"]]
    (binding,) = update.runner.program._bindings.values()
    return losses, params, (dev.replays - replays, binding._graphs is not None)


def test_replay_gives_what_launch_by_launch_gives(monkeypatch):
    eager_losses, eager_params, eager_replays = _losses_and_params(4, True, monkeypatch)
    graph_losses, graph_params, graph_replays = _losses_and_params(4, False, monkeypatch)
    assert eager_replays == (0, False)
    # calls 2 to 4 replay the step's run and commit graphs (and the label check's, a program of its own)
    assert graph_replays[0] >= 2 * 3 and graph_replays[1]
    assert graph_losses == eager_losses  # the same kernels in the same order: bit for bit
    for a, b in zip(graph_params, eager_params, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_timed_replay_runs_the_graph_and_changes_no_state(monkeypatch):
    """``time_run`` (what the ``cuda`` backend's timer measures with device events) replays the run
    graph alone: the launches run again, the States stay as the last call left them."""
    monkeypatch.delenv("LUMINAL_CUDA_SYNC", raising=False)
    step, inputs, update = train_step()
    for _ in range(2):
        step(**inputs)
    (binding,) = update.runner.program._bindings.values()
    params = [np.array(p.data) for p in step.optimizer.param_groups[0]["params"]]
    dev = rt.simulated().device
    launches = dev.launches
    times = binding.time_run(2)
    assert len(times) == 2 and all(t > 0 for t in times)
    assert dev.launches - launches == 2 * len(binding.runs)
    for p, before in zip(step.optimizer.param_groups[0]["params"], params, strict=True):
        np.testing.assert_array_equal(p.data, before)
