"""Module machinery against torch's: what an assignment or a register_* call accepts and refuses (and
the error it gives), per-module buffer persistence, parameters()/buffers() as iterators, the
containers' list methods and indexing, load_state_dict's return value and its old-BatchNorm rule,
and train()'s argument."""

from collections import OrderedDict

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def arr(*shape):
    return np.ones(shape, np.float32)


def tensor_of(ns, *shape):
    return arr(*shape) if ns is nn else torch.ones(shape)


def both_raise(build, kind, *parts):
    """``build(ns)`` raises ``kind`` for torch.nn and for luminal.nn; luminal's message holds ``parts``."""
    with pytest.raises(kind):
        build(torch.nn)
    with pytest.raises(kind) as e:
        build(nn)
    message = e.value.args[0] if isinstance(e.value, KeyError) else str(e.value)  # (a KeyError's str is a repr)
    for part in parts:
        assert part in message, f"{part!r} not in {message}"


def names(m):
    return [n for n, _ in m.named_children()]


# containers hold modules only (finding 1) ---------------------------------------------------------


@pytest.mark.parametrize("build,parts", [
    (lambda ns: ns.Sequential([ns.Linear(2, 3), ns.ReLU()]), ["Sequential", "list", "Sequential(*layers)"]),
    (lambda ns: ns.Sequential({"fc": ns.Linear(2, 3)}), ["Sequential", "dict", "OrderedDict"]),
    (lambda ns: ns.Sequential(3), ["Sequential", "int is not a Module"]),
    (lambda ns: ns.Sequential(ns.Linear(1, 1)).append(3), ["Sequential.append", "int"]),
    (lambda ns: ns.ModuleList([1, 2]), ["ModuleList", "int is not a Module"]),
    (lambda ns: ns.ModuleList([ns.ReLU()]).append(3), ["ModuleList.append", "int"]),
    (lambda ns: ns.ModuleList([ns.ReLU()]).extend(["x"]), ["ModuleList.extend", "str"]),
    (lambda ns: ns.ModuleDict({"a": ns.ReLU()}).__setitem__("c", 3), ["ModuleDict", "int is not a Module"]),
    (lambda ns: ns.ModuleDict({"a": 3}), ["ModuleDict", "int is not a Module"]),
    (lambda ns: ns.Sequential().add_module("x", "oops"), ["Sequential", "str is not a Module"]),
])
def test_containers_refuse_what_is_not_a_module(build, parts):
    both_raise(build, TypeError, *parts)


def test_a_list_given_to_sequential_was_an_identity():
    """The silent case the audit found: Sequential([...]) built an empty Sequential that passed its input
    through; torch refuses it, and so do we, before any graph is built."""
    with pytest.raises(TypeError, match=r"Sequential\(\*layers\)"):
        nn.Sequential([nn.Linear(2, 3), nn.ReLU()])
    seq = nn.Sequential(*[nn.Linear(2, 3), nn.ReLU()])
    assert len(seq) == 2 and len(list(seq.parameters())) == 2


# registration: what an assignment accepts (findings 5, 7, 13) -------------------------------------


class _Net:
    @staticmethod
    def make(ns):
        class Net(ns.Module):
            def __init__(self):
                super().__init__()
                self.fc = ns.Linear(3, 2)
                self.bn = ns.BatchNorm1d(2)

        return Net()


@pytest.mark.parametrize("build,parts", [
    (lambda ns: setattr(ns.Linear(3, 2), "weight", tensor_of(ns, 2, 3)),
     ["Linear", "cannot assign", "as parameter 'weight'", "nn.Parameter or None expected", ".weight.set(array)"]),
    (lambda ns: setattr(ns.Linear(3, 2), "weight", ns.Linear(3, 2)), ["as parameter 'weight'"]),
    (lambda ns: setattr(_Net.make(ns), "fc", "oops"),
     ["Net", "cannot assign 'str' as child module 'fc'", "nn.Module or None expected"]),
    (lambda ns: ns.Linear(1, 1).register_parameter("scale", tensor_of(ns, 1)),
     ["Linear", "cannot assign 'ndarray' object to parameter 'scale'", "nn.Parameter or None required"]),
    (lambda ns: setattr(ns.BatchNorm1d(3), "running_mean", [1.0, 2.0, 3.0]),
     ["BatchNorm1d", "cannot assign 'list' as buffer 'running_mean'"]),
])
def test_a_registered_name_takes_only_its_kind(build, parts):
    both_raise(build, TypeError, *parts)


def test_the_refused_assignment_changes_nothing():
    m = nn.Linear(3, 2)
    with pytest.raises(TypeError):
        m.weight = arr(2, 3)
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"] and isinstance(m.weight, nn.Parameter)


def test_an_array_for_a_buffer_is_its_new_value():
    """As documented (docs/modules.md): an array, or a tensor whose values are known now, assigned to a
    buffer's name becomes the buffer (torch's ``self.bias = self.bias[:, :, :n, :n]``), keeping its
    persistence."""
    bn = nn.BatchNorm1d(3)
    bn.running_mean = np.array([1.0, 2.0, 3.0], np.float32)
    assert isinstance(bn.running_mean, nn.Buffer) and list(bn.state_dict())[2] == "running_mean"
    np.testing.assert_array_equal(bn.state_dict()["running_mean"], [1, 2, 3])
    m = nn.Module()
    m.register_buffer("mask", np.ones((4, 4), np.float32), persistent=False)
    m.mask = m.mask[:2, :2]
    assert m.mask.shape == (2, 2) and [n for n, _ in m.named_buffers()] == ["mask"] and not m.state_dict()


def test_none_keeps_the_name_registered_in_its_place():
    """torch keeps a name set to None registered: set again, it is back in its place in state_dict."""
    for ns, p in ((nn, nn.Parameter(arr(2, 3))), (torch.nn, torch.nn.Parameter(torch.ones(2, 3)))):
        m = ns.Linear(3, 2)
        m.weight = None
        assert list(m.state_dict()) == ["bias"] and "weight" in m._parameters and m.weight is None
        m.weight = p
        assert list(m.state_dict()) == ["weight", "bias"]
    for ns in (nn, torch.nn):
        net = _Net.make(ns)
        net.fc = None
        assert net.fc is None and names(net) == ["bn"] and "fc" in net._modules
        net.fc = ns.Linear(3, 2)
        assert list(net.state_dict())[:2] == ["fc.weight", "fc.bias"]


@pytest.mark.parametrize("ns", [nn, torch.nn], ids=["luminal", "torch"])
def test_register_buffer_none(ns):
    m = ns.Linear(3, 2)
    m.register_buffer("scale", None)
    assert m.scale is None and "scale" in m._buffers and list(m.state_dict()) == ["weight", "bias"]
    assert [n for n, _ in m.named_buffers()] == []
    m.scale = tensor_of(ns, 2)
    assert list(m.state_dict()) == ["weight", "bias", "scale"]


@pytest.mark.parametrize("build,parts", [
    (lambda ns: ns.ModuleDict({"train": ns.Linear(1, 1)}), ["ModuleDict", "attribute 'train' already exists"]),
    (lambda ns: ns.Linear(1, 1).register_buffer("forward", tensor_of(ns, 1)), ["attribute 'forward' already"]),
    (lambda ns: ns.Linear(3, 2).register_buffer("weight", tensor_of(ns, 2, 3)), ["Linear", "'weight' already"]),
    (lambda ns: ns.Linear(3, 2).register_parameter("training", None), ["'training' already exists"]),
    (lambda ns: ns.Sequential().add_module("a.b", ns.Linear(1, 1)), ["Sequential", "can't contain \".\""]),
    (lambda ns: ns.ModuleDict({"a.b": ns.ReLU()}), ["can't contain \".\", got: a.b"]),
    (lambda ns: ns.Linear(1, 1).register_buffer("a.b", tensor_of(ns, 1)), ["buffer name can't contain"]),
    (lambda ns: ns.Linear(1, 1).register_parameter("", ns.Parameter(tensor_of(ns, 1))),
     ["parameter name can't be empty"]),
    (lambda ns: ns.Sequential().add_module("", ns.ReLU()), ["module name can't be empty"]),
])
def test_names_are_checked_as_torch_does(build, parts):
    both_raise(build, KeyError, *parts)


def test_a_name_of_the_same_kind_may_be_registered_again():
    for ns in (nn, torch.nn):
        m = ns.BatchNorm1d(2)
        m.register_buffer("running_mean", tensor_of(ns, 2))  # (a buffer's name, re-registered: allowed)
        m.register_parameter("weight", ns.Parameter(tensor_of(ns, 2)))
        d = ns.ModuleDict({"a": ns.ReLU()})
        d["a"] = ns.Tanh()
        assert type(d["a"]).__name__ == "Tanh"
        assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


# a buffer reassigned in forward (finding 2) --------------------------------------------------------


def _ema(ns, in_graph_update):
    class EMA(ns.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("avg", np.zeros(3, np.float32) if ns is nn else torch.zeros(3))

        def forward(self, x):
            if in_graph_update:
                new = self.avg * 0.9 + x.mean(0) * 0.1
                x.graph.assign(self.avg, new)
                return x - new
            self.avg = self.avg * 0.9 + x.mean(0) * 0.1
            return x - self.avg

    return EMA()


def test_a_buffer_reassigned_with_a_graph_tensor_names_graph_assign():
    """torch's ``self.avg = self.avg * 0.9 + ...`` in forward updates the buffer; here the assignment would
    only hide it (the module's array, read by every run, never changed, and the buffer left the
    state_dict). It is refused, naming the buffer and ``graph.assign``; the buffer stays registered."""
    m = _ema(nn, in_graph_update=False)
    g = lm.Graph()
    with pytest.raises(TypeError) as e:
        m(g.input("x", (4, 3)))
    for part in ("EMA", "buffer 'avg'", "graph.assign(self.avg"):
        assert part in str(e.value)
    assert isinstance(m.avg, nn.Buffer) and list(m.state_dict()) == ["avg"]


def test_graph_assign_updates_the_buffer_as_torch_reassigning_it():
    xs = [np.random.default_rng(i).standard_normal((4, 3)).astype(np.float32) for i in range(3)]
    m, tm = _ema(nn, in_graph_update=True), _ema(torch.nn, in_graph_update=False)
    g = lm.Graph()
    f = lm.compile([m(g.input("x", (4, 3)))], backend="cpu")
    for x in xs:
        out = f(x=x)[0]
        with torch.no_grad():
            tout = tm(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(out, tout, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.avg.data, tm.avg.numpy(), rtol=1e-5, atol=1e-7)


# persistence per module (finding 3) ----------------------------------------------------------------


@pytest.mark.parametrize("first_persistent", [True, False])
def test_a_shared_buffer_is_saved_where_it_is_persistent(first_persistent):
    def keys(ns):
        a, b, root = ns.Module(), ns.Module(), ns.Module()
        a.register_buffer("x", tensor_of(ns, 2), persistent=first_persistent)
        b.register_buffer("x", a.x, persistent=not first_persistent)
        root.a, root.b = a, b
        return list(root.state_dict()), [n for n, _ in root.named_buffers()]

    assert keys(nn) == keys(torch.nn) == (["a.x" if first_persistent else "b.x"], ["a.x"])


def test_persistence_survives_a_new_value_and_a_deepcopy():
    import copy

    m = nn.Module()
    m.register_buffer("x", arr(2), persistent=False)
    m.x = np.zeros(2, np.float32)  # (a new value keeps the name's persistence, as torch's)
    assert not m.state_dict() and not copy.deepcopy(m).state_dict()
    m.x = nn.Buffer(arr(2))  # (a Buffer brings its own: persistent by default, as torch's nn.Buffer)
    assert list(m.state_dict()) == ["x"]
    del m.x
    m.register_buffer("x", arr(2))
    assert list(m.state_dict()) == ["x"]


# parameters() / buffers() are iterators (finding 6), named_*(remove_duplicate=) (15) -----------------


def test_parameters_and_buffers_are_iterators():
    m, tm = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)), torch.nn.Sequential(torch.nn.Linear(3, 2),
                                                                                    torch.nn.BatchNorm1d(2))
    assert next(m.parameters()) is m[0].weight and next(m.buffers()) is m[1].running_mean
    assert next(m.parameters()).dtype is lm.float32
    assert [p.shape for p in m.parameters()] == [tuple(p.shape) for p in tm.parameters()]
    assert [b.shape for b in m.buffers()] == [tuple(b.shape) for b in tm.buffers()]
    assert [p.shape for p in m.parameters(recurse=False)] == []


def _tied(ns):
    class Tied(ns.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = ns.Linear(3, 3), ns.Linear(3, 3)
            self.b.weight = self.a.weight
            self.register_buffer("m", tensor_of(ns, 2))
            self.c = ns.Module()
            self.c.register_buffer("m", self.m)

    return Tied()


def test_remove_duplicate_lists_a_shared_state_under_each_name():
    m, tm = _tied(nn), _tied(torch.nn)
    for kw in ({}, {"remove_duplicate": False}, {"prefix": "net"}, {"recurse": False}):
        assert [n for n, _ in m.named_parameters(**kw)] == [n for n, _ in tm.named_parameters(**kw)], kw
        assert [n for n, _ in m.named_buffers(**kw)] == [n for n, _ in tm.named_buffers(**kw)], kw
    dup = dict(m.named_parameters(remove_duplicate=False))
    assert dup["b.weight"] is dup["a.weight"]


# state_dict / load_state_dict (findings 10, 14, 15) ------------------------------------------------


def test_state_dict_prefix_and_keep_vars():
    m, tm = _tied(nn), _tied(torch.nn)
    assert list(m.state_dict(prefix="net.")) == list(tm.state_dict(prefix="net."))
    kept = m.state_dict(keep_vars=True)
    assert kept["a.weight"] is m.a.weight and kept["m"] is m.m
    dest = OrderedDict(first=1)
    assert m.state_dict(destination=dest) is dest and list(dest)[0] == "first"


def test_load_state_dict_returns_torchs_named_tuple():
    m, tm = nn.Sequential(nn.Linear(3, 2)), torch.nn.Sequential(torch.nn.Linear(3, 2))
    sd = {k: v.numpy() for k, v in tm.state_dict().items()}
    got, want = m.load_state_dict(sd), tm.load_state_dict(tm.state_dict())
    assert repr(got) == repr(want) == "<All keys matched successfully>"
    part = dict(sd, extra=np.ones(1, np.float32))
    del part["0.bias"]
    got = m.load_state_dict(part, strict=False)
    want = tm.load_state_dict({k: torch.from_numpy(v) for k, v in part.items()}, strict=False)
    assert got.missing_keys == want.missing_keys == ["0.bias"]
    assert got.unexpected_keys == want.unexpected_keys == ["extra"]
    missing, unexpected = got
    assert (missing, unexpected) == (["0.bias"], ["extra"]) and repr(got) == repr(want)


@pytest.mark.parametrize("make", [lambda ns: ns.BatchNorm1d(3), lambda ns: ns.BatchNorm2d(3, affine=False),
                                  lambda ns: ns.InstanceNorm1d(3, track_running_stats=True)],
                         ids=["BatchNorm1d", "BatchNorm2d", "InstanceNorm1d"])
def test_an_old_batchnorm_checkpoint_without_num_batches_tracked_loads(make):
    """torch's ``_NormBase`` added ``num_batches_tracked`` in its version 2; a state_dict without it loads
    strictly, the buffer keeping its value (torch's ``_load_from_state_dict``)."""
    m, tm = nn.Sequential(make(nn)), torch.nn.Sequential(make(torch.nn))
    m[0].num_batches_tracked.set(5)
    tm[0].num_batches_tracked.fill_(5)
    old = {k: v.numpy() + 1 for k, v in tm.state_dict().items() if not k.endswith("num_batches_tracked")}
    got = m.load_state_dict(old)
    want = tm.load_state_dict({k: torch.from_numpy(v) for k, v in old.items()})
    assert repr(got) == repr(want) == "<All keys matched successfully>"
    assert int(m[0].num_batches_tracked.data) == tm[0].num_batches_tracked.item() == 5
    np.testing.assert_array_equal(m[0].running_var.data, tm[0].running_var.numpy())


def test_only_num_batches_tracked_may_be_absent():
    m = nn.BatchNorm1d(3)
    sd = {k: v for k, v in m.state_dict().items() if k != "running_mean"}
    with pytest.raises(ValueError, match="missing: running_mean"):
        m.load_state_dict(sd)
    m = nn.Module()
    m.register_buffer("num_batches_tracked", np.zeros((), np.int32))  # (not a norm: no exception)
    with pytest.raises(ValueError, match="missing: num_batches_tracked"):
        m.load_state_dict({})


def test_a_torch_bfloat16_state_dict_names_load_state_dict_and_the_key():
    tm = torch.nn.Linear(3, 2).bfloat16()
    m = nn.Linear(3, 2)
    before = m.weight.data.copy()
    with pytest.raises(ValueError) as e:
        m.load_state_dict(tm.state_dict())
    for part in ("load_state_dict into Linear", "'weight'", "BFloat16", "t.float().numpy()"):
        assert part in str(e.value)
    np.testing.assert_array_equal(m.weight.data, before)
    m.load_state_dict({k: v.float().numpy() for k, v in tm.state_dict().items()})
    np.testing.assert_array_equal(m.weight.data, tm.weight.float().detach().numpy())


def test_any_value_numpy_cannot_read_is_a_load_error():
    class Unreadable:
        def __array__(self, dtype=None, copy=None):
            raise TypeError("no array here")

    with pytest.raises(ValueError, match=r"load_state_dict into Linear: the value for 'bias' cannot be read as an "
                                         r"array \(Unreadable: no array here\)"):
        nn.Linear(1, 1).load_state_dict({"weight": arr(1, 1), "bias": Unreadable()})


# the containers' list methods and indexing (findings 10, 15) ---------------------------------------


def _seq(ns):
    return ns.Sequential(ns.Linear(1, 2), ns.ReLU(), ns.Linear(2, 3))


def _ml(ns):
    return ns.ModuleList([ns.Linear(1, 1), ns.ReLU(), ns.Tanh()])


def _layout(m):
    return [(n, type(c).__name__) for n, c in m.named_children()]


def _seq_edits():
    def setitem(s, ns):
        s[1] = ns.Tanh()

    def delitem(s, ns):
        del s[0]

    def delslice(s, ns):
        del s[0:2]

    def del_then_append(s, ns):
        del s[-3]
        s.append(ns.Sigmoid())

    def pop(s, ns):
        assert type(s.pop(1)).__name__ == "ReLU"

    def insert(s, ns):
        assert s.insert(1, ns.Tanh()) is s

    def extend(s, ns):
        assert s.extend(ns.Sequential(ns.Tanh(), ns.Sigmoid())) is s

    def append(s, ns):
        assert s.append(ns.Tanh()) is s

    return [setitem, delitem, delslice, del_then_append, pop, insert, extend, append]


@pytest.mark.parametrize("edit", _seq_edits(), ids=lambda f: f.__name__)
def test_sequential_edits_match_torch(edit):
    s, ts = _seq(nn), _seq(torch.nn)
    edit(s, nn)
    edit(ts, torch.nn)
    assert _layout(s) == _layout(ts)
    assert list(s.state_dict()) == list(ts.state_dict())


def test_sequential_sum_and_named_edits():
    assert _layout(_seq(nn) + _seq(nn)) == _layout(_seq(torch.nn) + _seq(torch.nn))
    named = [("a", "Linear"), ("b", "ReLU")]

    def od(ns):
        return ns.Sequential(OrderedDict([("a", ns.Linear(1, 1)), ("b", ns.ReLU())]))

    s, ts = od(nn), od(torch.nn)
    s[1], ts[1] = nn.Tanh(), torch.nn.Tanh()  # (replacing keeps the name)
    assert _layout(s) == _layout(ts) == [named[0], ("b", "Tanh")]
    del s[0]
    del ts[0]
    assert _layout(s) == _layout(ts) == [("0", "Tanh")]  # (deleting renumbers, as torch's)
    with pytest.raises(TypeError, match="can only add a Sequential"):
        _ = s + [nn.ReLU()]


def _ml_edits():
    def delitem(m, ns):
        del m[0]

    def delslice(m, ns):
        del m[1:]

    def pop(m, ns):
        assert type(m.pop(0)).__name__ == "Linear"

    def iadd(m, ns):
        m += [ns.Sigmoid()]

    def insert0(m, ns):
        m.insert(0, ns.Sigmoid())

    def setneg(m, ns):
        m[-1] = ns.Sigmoid()

    return [delitem, delslice, pop, iadd, insert0, setneg]


@pytest.mark.parametrize("edit", _ml_edits(), ids=lambda f: f.__name__)
def test_modulelist_edits_match_torch(edit):
    m, tm = _ml(nn), _ml(torch.nn)
    edit(m, nn)
    edit(tm, torch.nn)
    assert _layout(m) == _layout(tm)


def test_modulelist_sum():
    both = _ml(nn) + _ml(nn)
    assert type(both) is nn.ModuleList and _layout(both) == _layout(_ml(torch.nn) + _ml(torch.nn))
    with pytest.raises(TypeError, match="ModuleList \\+: int is not a Module"):
        _ = _ml(nn) + [1]


@pytest.mark.parametrize("make", [_seq, _ml], ids=["Sequential", "ModuleList"])
def test_indices_are_integers_as_torchs(make):
    m, tm = make(nn), make(torch.nn)
    assert type(m[np.int64(1)]).__name__ == type(tm[np.int64(1)]).__name__ == "ReLU"
    assert type(m[np.int32(-1)]).__name__ == type(tm[np.int32(-1)]).__name__
    name = type(m).__name__
    both_raise(lambda ns: make(ns)["0"], TypeError, name, "indices must be integers or slices, got str")
    both_raise(lambda ns: make(ns)[1.0], TypeError, name, "float")
    both_raise(lambda ns: make(ns)[3], IndexError, name, "index 3 is out of range")
    both_raise(lambda ns: make(ns).__delitem__(-4), IndexError, "index -4 is out of range")


def test_insert_positions():
    """list.insert's positions, -len .. len; torch's Sequential.insert refuses others (a ModuleList of
    torch's stores one under a name past its end, so ours refuses too)."""
    both_raise(lambda ns: _seq(ns).insert(4, ns.ReLU()), IndexError, "Sequential.insert", "index 4 is out of range")
    with pytest.raises(IndexError, match="ModuleList.insert: index -4 is out of range"):
        _ml(nn).insert(-4, nn.ReLU())
    s, ts = _seq(nn), _seq(torch.nn)
    s.insert(3, nn.Tanh())
    ts.insert(3, torch.nn.Tanh())
    assert _layout(s) == _layout(ts)
    m = _ml(nn)
    m.insert(-1, nn.Sigmoid())  # (torch's ModuleList.insert(-1) fails with a KeyError: list.insert's position here)
    assert [type(x).__name__ for x in m] == ["Linear", "ReLU", "Sigmoid", "Tanh"]


# train()'s argument (finding 11) -------------------------------------------------------------------


def test_train_takes_a_boolean():
    both_raise(lambda ns: ns.Linear(1, 1).train("eval"), ValueError, "Linear.train",
               "training mode is expected to be boolean", "eval()")
    m = nn.Linear(1, 1)
    assert m.train(False) is m and not m.training and m.train(np.bool_(True)).training


def test_parameter_dict_pop_get_and_clear_as_torchs():
    """torch's ParameterDict has pop, get and clear (luminal's had none of them)."""
    mine = nn.ParameterDict({"a": nn.Parameter(np.ones(2, np.float32)), "b": nn.Parameter(np.zeros(3, np.float32))})
    theirs = torch.nn.ParameterDict({"a": torch.nn.Parameter(torch.ones(2)), "b": torch.nn.Parameter(torch.zeros(3))})
    assert tuple(mine.pop("a").shape) == tuple(theirs.pop("a").shape) == (2,)
    assert list(mine.keys()) == list(theirs.keys()) == ["b"]
    assert [k for k, _ in mine.named_parameters()] == ["b"] and list(mine.state_dict()) == ["b"]
    assert mine.get("zz", 5) == theirs.get("zz", 5) == 5 and mine.get("b") is mine["b"]
    with pytest.raises(KeyError):
        mine.pop("zz")
    mine.clear()
    theirs.clear()
    assert len(mine) == len(theirs) == 0 and list(mine.state_dict()) == []


def test_a_module_pickled_before_per_module_persistence_loads():
    """Modules pickled before buffer persistence was kept per module have no
    ``_non_persistent_buffers_set`` (their Buffers carried the flag): state_dict, register_buffer and
    assigning a buffer raised AttributeError after unpickling. ``Module.__setstate__`` fills it in."""
    import pickle

    m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8))
    m[1].register_buffer("scratch", np.zeros(3, np.float32), persistent=False)
    want = list(m.state_dict())
    old = pickle.loads(pickle.dumps(m))
    for mod in old.modules():  # as an old pickle has it: no set, the flag on the Buffer
        del mod.__dict__["_non_persistent_buffers_set"]
    revived = pickle.loads(pickle.dumps(old))
    assert list(revived.state_dict()) == want and "1.scratch" not in want
    revived[1].running_mean = np.ones(8, np.float32)
    revived.register_buffer("extra", np.zeros(2, np.float32))
    assert "extra" in revived.state_dict()
