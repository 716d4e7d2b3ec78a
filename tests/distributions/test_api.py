"""lm.distributions' public surface: torch's names (each class and function is torch.distributions'),
a docstring and a return annotation on every public function, method and property."""

from __future__ import annotations

import inspect

import torch.distributions as TD

import luminal as lm
import luminal.distributions as D


def _members(cls):
    for n, v in vars(cls).items():
        if n.startswith("_"):
            continue
        if isinstance(v, property):
            yield f"{cls.__name__}.{n}", v.fget
        elif callable(v) and not isinstance(v, type):
            yield f"{cls.__name__}.{n}", v.__func__ if isinstance(v, staticmethod) else v


def test_names_are_torchs():
    assert lm.distributions is D
    for name in D.__all__:
        assert hasattr(TD, name), name


def test_docstrings_and_return_annotations():
    checked = []
    for name in D.__all__:
        obj = getattr(D, name)
        if inspect.ismodule(obj):
            continue
        checked += list(_members(obj)) if isinstance(obj, type) else [(name, obj)]
        assert obj.__doc__, name
    assert len(checked) > 100
    undocumented = [n for n, f in checked if not f.__doc__]
    unannotated = [n for n, f in checked if inspect.signature(f).return_annotation is inspect.Signature.empty]
    assert not undocumented and not unannotated, (undocumented, unannotated)
