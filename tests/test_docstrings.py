"""Every public callable of the user's namespaces has a docstring: ``lm`` (luminal/__init__.py),
``luminal.nn`` (and ``nn.init``), ``luminal.nn.functional``, ``luminal.train``, ``luminal.data``,
``luminal.linalg``, ``luminal.distributions``, ``luminal.autograd`` (and ``autograd.functional``),
``luminal.train.swa_utils``, and the public methods and properties of every public class there (GraphTensor,
Graph, Module and the layers, the optimizers, the schedulers, ...). Public: no leading underscore; a
method GraphTensor gets from an op function counts with that function's docstring; a method
inherited from a luminal base class counts with the base's (as ``help()`` shows it)."""

from __future__ import annotations

import inspect
import types

import luminal as lm
import luminal.nn.functional as F
from luminal import autograd, data, distributions, linalg, nn, train
from luminal.autograd import functional as autograd_functional
from luminal.train import swa_utils

NAMESPACES = {"lm": lm, "nn": nn, "nn.init": nn.init, "F": F, "train": train, "data": data, "linalg": linalg,
              "distributions": distributions, "autograd": autograd, "autograd.functional": autograd_functional,
              "train.swa_utils": swa_utils}


def _public(ns):
    names = getattr(ns, "__all__", None) or [n for n in dir(ns) if not n.startswith("_")]
    return [(n, getattr(ns, n)) for n in names if not n.startswith("_")]


def _members(cls):
    """The public methods and properties of ``cls`` that luminal defines (its own or a luminal
    base class's; what ``object``, ``tuple`` or ``dict`` provide is theirs to document)."""
    for n in dir(cls):
        if n.startswith("_"):
            continue
        owner = next((k for k in cls.__mro__ if n in vars(k)), None)
        if owner is None or not owner.__module__.startswith("luminal"):
            continue
        v = vars(owner)[n]
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if isinstance(v, property) or (callable(v) and not isinstance(v, type)):
            yield n, v


def _callables():
    out = []
    for prefix, ns in NAMESPACES.items():
        for n, v in _public(ns):
            if isinstance(v, types.ModuleType) or not callable(v):
                continue
            out.append((f"{prefix}.{n}", v))
            if isinstance(v, type):
                out.extend((f"{prefix}.{n}.{m}", mv) for m, mv in _members(v))
    return out


def _doc(obj) -> str:
    if isinstance(obj, property):
        return (obj.__doc__ or (obj.fget.__doc__ if obj.fget else None) or "").strip()
    if isinstance(obj, type):
        return (obj.__doc__ or "").strip()
    return (inspect.getdoc(obj) or "").strip()


def test_every_public_callable_has_a_docstring():
    checked = _callables()
    assert len(checked) > 1000  # the walk reaches the layers' and GraphTensor's members
    missing = sorted({q for q, v in checked if not _doc(v)})
    assert not missing, f"{len(missing)} public callables without a docstring:\n" + "\n".join(missing)


def test_the_walk_sees_a_missing_docstring():
    """The check itself: an undocumented function, method and property are reported."""

    def f(x):
        return x

    class C:
        def m(self):
            return 1

        @property
        def p(self):
            return 2

    assert not _doc(f) and not _doc(C.__dict__["m"]) and not _doc(C.__dict__["p"])
    assert _doc(lm.GraphTensor.relu).startswith("torch")  # an op installed as a method: the op's docstring
