"""Quick-tier checks of nn.Module API behaviours a torch port relies on (the full comparison against
torch, case by case, is ``test_module_api_audit.py``): load_state_dict's error caught as torch's
RuntimeError, ``assign=True``, Sequential's ``*`` and ``+=``, ParameterDict's order and names, and
register_buffer refusing what is not an array."""

from collections import OrderedDict

import numpy as np
import pytest
import torch

from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_strict_load_falls_back_as_in_torch():
    m = nn.Linear(2, 3)
    sd = {**m.state_dict(), "extra": np.zeros(1, np.float32)}
    try:
        m.load_state_dict(sd)
    except RuntimeError as e:
        assert "unexpected: extra" in str(e)
        result = m.load_state_dict(sd, strict=False)
    assert result.unexpected_keys == ["extra"] and result.missing_keys == []


def test_assign_shares_the_checkpoints_arrays():
    m = nn.Linear(2, 3)
    sd = {"weight": np.full((3, 2), 0.5), "bias": np.arange(3.0)}  # float64
    m.load_state_dict(sd, assign=True)
    t = torch.nn.Linear(2, 3)
    t.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, assign=True)
    assert m.weight.dtype.name == str(t.weight.dtype).removeprefix("torch.") == "float64"
    assert np.shares_memory(m.weight.data, sd["weight"])


@pytest.mark.parametrize("build", [lambda ns, s: s * 2, lambda ns, s: 2 * s, lambda ns, s: s.__iadd__(s[:])])
def test_sequential_repeat_and_iadd_as_torch(build):
    def structure(ns):
        out = build(ns, ns.Sequential(ns.Linear(1, 2), ns.ReLU()))
        return len(out), list(out.state_dict()), len(list(out.parameters()))
    assert structure(nn) == structure(torch.nn)


def test_parameter_dict_order_and_names_as_torch():
    def keys(ns, values):
        return list(ns.ParameterDict(values).state_dict())
    for ns in (nn, torch.nn):
        p = lambda: ns.Parameter(torch.ones(1) if ns is torch.nn else np.ones(1, np.float32))  # noqa: E731
        assert keys(ns, {"b": p(), "a": p()}) == ["a", "b"]  # a plain dict: sorted, as torch's
        assert keys(ns, OrderedDict(b=p(), a=p())) == ["b", "a"]
        with pytest.raises(KeyError):
            ns.ParameterDict({"train": p()})  # (it would hide the method)
        with pytest.raises(KeyError):
            ns.ParameterDict({"a.b": p()})  # (a state_dict name joins with dots)


def test_register_buffer_refuses_what_is_not_an_array():
    with pytest.raises(TypeError, match="cannot assign 'list' as buffer 'scale'"):
        nn.Module().register_buffer("scale", [1.0, 2.0])


def test_a_forward_hook_keeps_an_activation_as_torchs():
    import luminal as lm

    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    t = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    m = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    m.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    kept = {}
    for seq in (t, m):
        seq[1].register_forward_hook(lambda mod, args, out, seq=seq: kept.__setitem__(id(seq), out))
    t(torch.from_numpy(x))
    g = lm.Graph()
    m(g.input("x", x.shape))
    (act,) = lm.compile([kept[id(m)]])(x=x)
    np.testing.assert_allclose(act, kept[id(t)].detach().numpy(), rtol=1e-5, atol=1e-6)
