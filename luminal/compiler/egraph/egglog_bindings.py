"""egglog's Rust bindings (``egglog.bindings``), the only part of egglog the compiler drives, loaded
without the package's Python layer.

``from egglog import bindings`` runs ``egglog/__init__.py`` first, which builds egglog's high-level
Python language (and imports ``black``, to print it): about 0.2 s of a process's first compile, for
nothing the compiler uses, against about 0.01 s for the extension module alone. So the extension
module is loaded here by itself, under its own name, from the package's folder.

It stays the one the package uses if it is imported later: an extension module made with PyO3 may be
initialised once per process, so ``import egglog`` must find this one. It does (``sys.modules``), but
the import system sets a submodule as its package's attribute only when it loads the submodule itself:
:class:`_GiveBindings` sets ``egglog.bindings`` on the package before its ``__init__`` runs.

Where egglog is imported already, or its bindings are not an extension file in the package's folder
(another way of packaging it), this is the plain import.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

NAME = "egglog.bindings"


def _load():
    if NAME in sys.modules:
        return sys.modules[NAME]
    if "egglog" not in sys.modules:
        spec = importlib.util.find_spec("egglog")  # (finds the package without running it)
        for folder in (spec.submodule_search_locations or []) if spec is not None else []:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "bindings" + suffix)
                if os.path.isfile(path):
                    return _load_extension(path)
    return importlib.import_module(NAME)


def _load_extension(path: str):
    loader = importlib.machinery.ExtensionFileLoader(NAME, path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(NAME, path, loader=loader))
    sys.modules[NAME] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[NAME]
        raise
    sys.meta_path.insert(0, _GiveBindings())
    return module


class _GiveBindings(importlib.abc.MetaPathFinder):
    """For the ``egglog`` package: its own spec, its loader wrapped so that the package has ``bindings``
    before its ``__init__`` runs. It leaves ``sys.meta_path`` once the package is executed (a
    ``find_spec`` that only looks, an optional-dependency check, does not use it up), by a new list: other
    threads' imports walk the list they read, which must not change under them."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "egglog":
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _WithBindings(spec.loader, self)
        return spec

    def leave(self) -> None:
        sys.meta_path = [f for f in sys.meta_path if f is not self]


class _WithBindings(importlib.abc.Loader):
    """The package's loader, which first gives the module the bindings loaded here; anything else
    (resource readers, source) is the wrapped loader's."""

    def __init__(self, loader, finder: _GiveBindings):
        self.loader, self.finder = loader, finder

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.finder.leave()
        module.bindings = sys.modules[NAME]
        self.loader.exec_module(module)

    def __getattr__(self, name):
        if name in ("loader", "finder") or name.startswith("__"):  # (copy and pickle make one without __init__)
            raise AttributeError(name)
        return getattr(self.loader, name)


bindings = _load()
