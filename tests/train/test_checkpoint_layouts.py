"""A checkpoint keeps the layouts the saved run timed (``CpuProgram.layouts``): layouts round differently
in the last bit, and a timing in the resumed process could pick another one, so the resumed step lays
its bindings out as the saved run did, without timing, and its losses continue the saved run's exactly.
The timings here are fakes (``tune.measure``), so each process's choice is forced, never measured."""

from __future__ import annotations

import json

import numpy as np
import pytest

import luminal as lm
from luminal import nn, train
from luminal.backends.cpu import Cpu, _Run, tune
from luminal.core.safetensors_io import load_with_metadata, save_file
from luminal.frontend.seed import manual_seed

SEARCH = 3


def _run(monkeypatch):
    """A small AdamW step whose cpu program times up to ``SEARCH`` layouts at each binding's first call
    (the backend's search alone: no egglog candidates timed)."""
    manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    g = lm.Graph()
    x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
    opt = train.AdamW(model.parameters(), lr=1e-2)
    with monkeypatch.context() as m:
        m.setattr(Cpu, "program", lambda self, kg, plan, search=0: _Run(kg, plan, SEARCH))
        step = train.compile_step(train.cross_entropy(model(x), y), opt, backend="cpu")
    return model, opt, step


def _batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [dict(x=rng.standard_normal((5, 6)).astype(np.float32), y=rng.integers(0, 3, 5).astype(np.int32))
            for _ in range(n)]


def _timer(monkeypatch, seconds_of, timed):
    """Fake ``tune.measure``: runs the binding (as the real one does: its warm-up points it at the
    arrays) and says it took ``seconds_of(choices)``."""
    def measure(b, arrays, limit_s=None, budget_s=None):
        timed.append(b.choices)
        b.run(arrays)
        return seconds_of(b.choices)

    monkeypatch.setattr(tune, "measure", measure)
    monkeypatch.setattr(tune, "_let_blas_threads_sleep", lambda: None)


def test_a_resumed_step_lays_its_bindings_out_as_the_saved_run_did(monkeypatch, tmp_path):
    """Run A's timing keeps a layout other than the default; run B, resumed from A's checkpoint in a
    setting whose timing would keep the default, times nothing, lays the binding out as A did, and its
    next losses are A's, bit for bit."""
    timed: list = []
    _timer(monkeypatch, lambda c: 1.0 if c == tune.DEFAULT else 0.5, timed)
    model, opt, step = _run(monkeypatch)
    batches = _batches(5)
    for b in batches[:2]:
        step(**b)
    (chosen,) = [b.choices for b in step._update.runner.program._bindings.values()]
    assert timed and chosen != tune.DEFAULT  # (the fake timing kept another layout)
    path = tmp_path / "ckpt.safetensors"
    train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    want = [float(step(**b)) for b in batches[2:]]

    timed.clear()
    _timer(monkeypatch, lambda c: 0.5 if c == tune.DEFAULT else 1.0, timed)
    model2, opt2, step2 = _run(monkeypatch)
    train.load_checkpoint(path, model=model2, optimizer=opt2, step=step2)
    got = [float(step2(**b)) for b in batches[2:]]
    program = step2._update.runner.program
    assert not program.searches  # nothing timed for it (its label guard's layout is timed: a check only)
    assert [b.choices for b in program._bindings.values()] == [chosen]
    assert got == want
    assert program.layouts() == step._update.runner.program.layouts()  # (a second save keeps it again)

    # a batch of another size is a binding the saved run never laid out: timed here as ever
    step2(x=np.ones((7, 6), np.float32), y=np.zeros(7, np.int32))
    assert list(program.searches) == [(7,)] and len(program._bindings) == 2


def test_a_step_that_ran_before_the_load_lays_out_again(monkeypatch):
    """A step that timed its own layout before ``load_state_dict`` takes the state's: its binding is laid
    out again at the next call (nothing timed), and a state without layouts leaves it as it is."""
    _timer(monkeypatch, lambda c: 1.0 if c == tune.DEFAULT else 0.5, [])
    _, _, step = _run(monkeypatch)
    (b,) = _batches(1)
    step(**b)
    saved = step.state_dict()
    _timer(monkeypatch, lambda c: 0.5 if c == tune.DEFAULT else 1.0, [])
    _, _, other = _run(monkeypatch)
    other(**b)
    program = other._update.runner.program
    assert [x.choices for x in program._bindings.values()] == [tune.DEFAULT]
    other.load_state_dict(saved)
    other(**b)
    assert not program.searches and [x.choices for x in program._bindings.values()] == \
        [x.choices for x in step._update.runner.program._bindings.values()]
    other.load_state_dict({k: v for k, v in saved.items() if k != "layouts"})
    other(**b)
    assert not program.searches and len(program._bindings) == 1


@pytest.mark.parametrize("layouts, message", [
    ({"update": [[[5], "threads='own'"]]}, "is not one this version of luminal lays out"),
    ({"update": [[[5, 1], None]]}, "a layout must be"),
    ({"update": [[["5"], tune.encode(tune.DEFAULT)]]}, "a layout must be"),
    ({"update": [[[5], tune.encode(tune.DEFAULT).replace("'auto'", "'__import__(\"os\")'", 1)]]},
     "is not one this version of luminal lays out"),
    ({"micro": []}, "this step's programs are ['update']"),
    ([], "layouts for list in the state"),
])
def test_a_checkpoint_with_layouts_it_cannot_take_is_refused_before_anything_changes(monkeypatch, tmp_path,
                                                                                   layouts, message):
    """Layouts a checkpoint holds are data: an entry that is not ``[dims, choices]`` this version lays
    out (a choices text is parsed against the values a search may give, never evaluated) is a
    ValueError naming the file, and the model is left as it was."""
    _timer(monkeypatch, lambda c: 1.0, [])
    model, opt, step = _run(monkeypatch)
    step(**_batches(1)[0])
    path = tmp_path / "ckpt.safetensors"
    train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    tensors, meta = load_with_metadata(path)
    meta["step"] = json.dumps({**json.loads(meta["step"]), "layouts": layouts})
    save_file(tensors, path, metadata=meta)
    model2, opt2, step2 = _run(monkeypatch)
    before = {k: v.copy() for k, v in model2.state_dict().items()}
    with pytest.raises(ValueError, match=f"{path}.*") as e:
        train.load_checkpoint(path, model=model2, optimizer=opt2, step=step2)
    assert message in str(e.value)
    for k, v in model2.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_a_binding_prepared_before_the_load_takes_the_saved_layout_untimed(monkeypatch):
    """A binding laid out before the load (``prepare``: untimed until its first call) whose layout is
    already the one the state keeps is not timed at its first call: a timing could pick another."""
    _timer(monkeypatch, lambda c: 0.5 if c == tune.DEFAULT else 1.0, [])
    _, _, step = _run(monkeypatch)
    (b,) = _batches(1)
    step(**b)
    saved = step.state_dict()
    assert saved["layouts"]["update"] == [[[5], tune.encode(tune.DEFAULT)]]
    _timer(monkeypatch, lambda c: 1.0 if c == tune.DEFAULT else 0.5, [])
    _, _, other = _run(monkeypatch)
    other.prepare(x=(5, 6), y=(5,))
    other.load_state_dict(saved)
    other(**b)
    program = other._update.runner.program
    assert not program.searches
    assert [x.choices for x in program._bindings.values()] == [tune.DEFAULT]


def test_a_step_rebuilt_at_its_first_call_after_the_load_keeps_the_saved_layouts(monkeypatch, tmp_path):
    """The saved run unfroze its first layer after two updates (its step built again, those parameters
    counting their own steps); the resumed step, compiled with every layer training, takes those first
    steps from the checkpoint and is built again at its first call: the rebuilt programs are laid out as
    the checkpoint says, untimed, and the losses continue the saved run's."""
    monkeypatch.setattr(Cpu, "program", lambda self, kg, plan, search=0: _Run(kg, plan, SEARCH))  # (rebuilds too)
    _timer(monkeypatch, lambda c: 1.0 if c == tune.DEFAULT else 0.5, [])
    manual_seed(0)
    batches = _batches(6)

    def build(frozen):
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
        for p in model[0].parameters():
            p.requires_grad_(not frozen)
        g = lm.Graph()
        x, y = g.input("x", ("B", 6)), g.input("y", ("B",), dtype=lm.int32)
        opt = train.AdamW(model.parameters(), lr=1e-2)
        return model, opt, train.compile_step(train.cross_entropy(model(x), y), opt, backend="cpu")

    model, opt, step = build(frozen=True)
    for b in batches[:2]:
        step(**b)
    for p in model[0].parameters():
        p.requires_grad_(True)
    for b in batches[2:4]:
        step(**b)  # (built again at the first of these)
    (chosen,) = [b.choices for b in step._update.runner.program._bindings.values()]
    assert chosen != tune.DEFAULT
    path = tmp_path / "ckpt.safetensors"
    train.save_checkpoint(path, model=model, optimizer=opt, step=step)
    want = [float(step(**b)) for b in batches[4:]]

    _timer(monkeypatch, lambda c: 0.5 if c == tune.DEFAULT else 1.0, [])
    model2, opt2, step2 = build(frozen=False)
    before = step2._update
    train.load_checkpoint(path, model=model2, optimizer=opt2, step=step2)
    got = [float(step2(**b)) for b in batches[4:]]
    program = step2._update.runner.program
    assert step2._update is not before  # (built again)
    assert not program.searches
    assert [b.choices for b in program._bindings.values()] == [chosen]
    assert got == want
