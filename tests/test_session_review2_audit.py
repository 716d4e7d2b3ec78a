"""Second review of this session's commits: the graph ``lm.autograd.functional`` finds from the names a
function reads (823a058), a save path the OS would refuse (f6568bd), and the cpu backend's search at a
binding's first call (fdb7b57): each test failed before its fix."""

import os

import numpy as np
import pytest
import torch
import torch.autograd.functional as TF

import luminal as lm
from luminal.autograd import functional as AF
from luminal.backends.cpu import compiled, tune
from luminal.codegen import llvm

pytestmark = pytest.mark.usefixtures("one_torch_thread")
D = lm.float64
W = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
XA = np.array([[0.3, -0.7, 1.2], [1.0, 0.5, -0.25]])
lin, tlin = lm.nn.functional.linear, torch.nn.functional.linear

# module globals the functions below read (or, for ``mean``, do not read: ``.mean()`` is an attribute)
GRAPH = lm.Graph()
mean = GRAPH.input("mean", (3,), D)
x_global = GRAPH.input("x", (2, 3), D)


def _weight():
    p = lm.nn.Parameter(np.array(W))
    return p, torch.tensor(W, requires_grad=True)


def _same(ours, theirs, **feeds):
    got = np.asarray(ours) if ours.graph.host else lm.compile(ours, backend="cpu")(**feeds)
    np.testing.assert_allclose(got, theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_an_attribute_named_as_a_global_tensor_does_not_pick_its_graph():
    """``(w * w).mean()`` names the attribute ``mean``, not the global graph tensor ``mean``: the
    function reads no graph's tensor, so its jacobian is a host tensor with values now, as torch's
    (it was a tensor of GRAPH, with no values)."""
    p = lm.nn.Parameter(np.array([1.0, 2.0, 3.0]))
    J = AF.jacobian(lambda w: (w * w).mean(), p)
    assert J.graph.host
    _same(J, TF.jacobian(lambda w: (w * w).mean(), torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)))


def test_a_closure_variable_assigned_after_the_call_is_skipped():
    """An empty closure cell (a variable the function would read on another branch, assigned later) was
    ``ValueError: Cell is empty`` from the closure scan."""
    p, tp = _weight()

    def outer():
        def f(w):
            return (w * w).sum() if w.shape[0] == 2 else later

        J = AF.jacobian(f, p)
        later = None
        return J, later

    J, _ = outer()
    _same(J, TF.jacobian(lambda w: (w * w).sum(), tp))


def _x_in_comprehension(w):
    return lm.stack([lin(x_global, w) for _ in range(2)]).sum()


def _x_in_nested_function(w):
    def inner(v):
        return lin(x_global, v).sum()

    return inner(w)


def _helper(w):
    return lin(x_global, w).sum()


class _Reads:
    def __init__(self, x):
        self.batch = x

    def method(self, w):
        return lin(self.batch, w).sum()

    def __call__(self, w):
        return lin(self.batch, w).sum()


@pytest.mark.parametrize("how", ["comprehension", "nested function", "helper", "method", "callable object"])
def test_a_graph_tensor_read_inside_nested_code_a_helper_or_self_is_found(how):
    """The graph tensor the function reads in a comprehension or nested function (its own code objects),
    in a helper it calls by name, or as ``self.batch`` in a method or ``__call__``: the Parameter joins
    that graph (these were all 'output 0 ... belongs to another graph'; the method only when no global
    shared the attribute's name)."""
    p, tp = _weight()
    reads = _Reads(x_global)
    func = {"comprehension": _x_in_comprehension, "nested function": _x_in_nested_function,
            "helper": lambda w: _helper(w), "method": reads.method, "callable object": reads}[how]
    J = AF.jacobian(func, p)
    assert J.graph is GRAPH
    scale = 2.0 if how == "comprehension" else 1.0
    _same(J, TF.jacobian(lambda w: tlin(torch.tensor(XA), w).sum() * scale, tp), x=XA)


@pytest.mark.parametrize("tail", [".", ".."])
def test_a_path_ending_in_dot_names_a_directory_and_is_refused(tmp_path, tail):
    """``ckpt.pt/.`` resolved by text is ``ckpt.pt``: lm.save overwrote that file (open refuses the path)."""
    target = tmp_path / "ckpt.pt"
    target.write_bytes(b"OLD")
    with pytest.raises(IsADirectoryError, match=r"ends in a separator, '\.' or '\.\.'"):
        lm.save({"a": np.ones(2)}, f"{target}{os.sep}{tail}")
    assert target.read_bytes() == b"OLD" and sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


@pytest.mark.parametrize("through", ["a file", "a missing directory"])
def test_a_path_through_a_file_or_a_missing_directory_is_refused(tmp_path, through):
    """``ckpt.pt/../x.pt`` (ckpt.pt a file) and ``missing/../x.pt``: open refuses both, lm.save saved x.pt."""
    (tmp_path / "ckpt.pt").write_bytes(b"OLD")
    part = "ckpt.pt" if through == "a file" else "missing"
    path = os.path.join(tmp_path, part, "..", "x.pt")
    with pytest.raises(OSError):
        open(path, "wb")
    with pytest.raises(FileNotFoundError, match=r"cannot save: the directory .*\.\.' does not exist"):
        lm.save({"a": np.ones(2)}, path)
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def _program(monkeypatch, measure, search=3):
    monkeypatch.setenv("LUMINAL_NUM_THREADS", "2")
    monkeypatch.setattr(tune, "measure", measure)
    g = lm.Graph()
    x = g.input("x", (300, 1000))
    program = lm.compile((x * 3 + 1).sqrt(), backend="cpu").runner.program
    return compiled.CpuProgram(program.kg, program.plan, search=search)


def _fake_time(b, arrays, limit_s=None, budget_s=None):
    b.run(arrays)
    return 1e-3 if b.choices.threads == "own" else 2e-3


@pytest.mark.parametrize("search", [0, 3])
def test_an_interrupted_first_call_search_runs_again_at_the_next_call(monkeypatch, tmp_path, search):
    """A Ctrl-C during the first call's search (an undecided binding's, or search=N's) left the default
    layout kept and never timed; the next call now runs the search, as before fdb7b57."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    calls = []

    def measure(b, arrays, limit_s=None, budget_s=None):
        calls.append(b.choices)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return _fake_time(b, arrays)

    prog = _program(monkeypatch, measure, search)
    a = np.random.default_rng(0).uniform(0, 2, (300, 1000)).astype(np.float32)
    with pytest.raises(KeyboardInterrupt):
        prog({"x": a}, {})
    assert not prog.searches
    for _ in range(2):
        (got,), _ = prog({"x": a}, {})
        np.testing.assert_allclose(got, np.sqrt(a * np.float32(3) + np.float32(1)), rtol=1e-6)
        (record,) = prog.searches.values()
        assert record.chosen.threads == "own" and not record.cached
    # (the interrupted one, the timing, and a search's rematch: tune.threads has none)
    assert len(calls) == 1 + len(record.timed) + (2 if search else 0)


def test_the_report_counts_the_llvm_objects_a_first_call_search_made(monkeypatch, tmp_path):
    """The code generation numbers count the objects LLVM compiled or found cached for every layout the
    first call's search made (fdb7b57 counted only the default's: 0 of 1 compiled, 1 of 6 cached)."""
    monkeypatch.setenv("LUMINAL_CACHE_DIR", str(tmp_path))
    prog = _program(monkeypatch, _fake_time)
    before = dict(llvm.STATS)
    prog({"x": np.ones((300, 1000), np.float32)}, {})
    made = llvm.STATS["compiled"] - before["compiled"] + llvm.STATS["reused"] - before["reused"]
    assert made > 1 and prog.codegen["compiled"] + prog.codegen["cached"] == made
