"""nn.Module's API against torch.nn.Module, case by case: each case builds the same structure with
``torch.nn`` and with ``luminal.nn`` and compares what comes out (names, orders, flags, reprs) or,
for an error, that luminal raises an instance of torch's exception class (luminal's messages add
the module and the name at fault, so their text is not compared; ``test_module_registration.py``
checks the words). Covered: state_dict/load_state_dict (strict, returned keys, shape mismatch,
assign=, prefixes, non-persistent buffers, tied parameters and shared submodules), the traversals
(named_modules/children/modules, remove_duplicate, prefix, memo), apply, train/eval, requires_grad_,
zero_grad, registration and its errors, __setattr__/__delattr__, get_submodule/get_parameter/
get_buffer, repr, and the containers (Sequential, ModuleList, ModuleDict, ParameterList,
ParameterDict). Where luminal knowingly differs from torch the case says why, in
``test_known_differences``."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest
import torch

import luminal as lm
from luminal import nn

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def A(ns, *shape):
    return torch.ones(shape) if ns is torch.nn else np.ones(shape, np.float32)


def P(ns, *shape):
    return ns.Parameter(A(ns, *shape))


def tied(ns):
    class Tied(ns.Module):
        def __init__(self):
            super().__init__()
            self.a = ns.Linear(2, 2)
            self.b = ns.Linear(2, 2)
            self.b.weight = self.a.weight

    return Tied()


def shared(ns):
    lin = ns.Linear(2, 2)
    return ns.Sequential(lin, ns.ReLU(), lin)


def nested(ns):
    return ns.Sequential(OrderedDict(enc=ns.Sequential(ns.Linear(2, 3), ns.BatchNorm1d(3)), dec=ns.Linear(3, 1)))


def nonpersistent(ns):
    m = ns.Module()
    m.register_buffer("a", A(ns, 2))
    m.register_buffer("b", A(ns, 2), persistent=False)
    return m


def S(ns):
    return ns.Sequential(ns.Linear(1, 2), ns.ReLU(), ns.Linear(2, 3), ns.Tanh())


def ML(ns):
    return ns.ModuleList([ns.Linear(1, 2), ns.ReLU(), ns.Tanh()])


def MD(ns):
    return ns.ModuleDict({"b": ns.ReLU(), "a": ns.Tanh()})


def PL(ns):
    return ns.ParameterList([P(ns, 2), P(ns, 3)])


def PD(ns):
    return ns.ParameterDict({"b": P(ns, 2), "a": P(ns, 3)})


def names(pairs):
    return [n for n, _ in pairs]


def kinds(mods):
    return [type(m).__name__ for m in mods]


def then(f, *after):
    """Call ``f(obj)`` for its effect, then return ``after``'s functions of ``obj``."""
    def run(obj):
        f(obj)
        return tuple(g(obj) for g in after)
    return run


def keys_of(result):
    return tuple(map(list, result))


def shapes(params):
    return [tuple(p.shape) for p in params]


def applied(m):
    seen = []
    m.apply(lambda x: seen.append(type(x).__name__))
    return seen


CASES = {
    # state_dict and traversals of tied parameters and shared modules
    "tied named_parameters": lambda ns: names(tied(ns).named_parameters()),
    "tied named_parameters remove_duplicate=False": lambda ns: names(tied(ns).named_parameters(remove_duplicate=False)),
    "tied parameters count": lambda ns: len(list(tied(ns).parameters())),
    "tied state_dict": lambda ns: list(tied(ns).state_dict()),
    "shared named_modules": lambda ns: names(shared(ns).named_modules()),
    "shared named_modules remove_duplicate=False": lambda ns: names(shared(ns).named_modules(remove_duplicate=False)),
    "shared named_children": lambda ns: names(shared(ns).named_children()),
    "shared children": lambda ns: len(list(shared(ns).children())),
    "shared modules": lambda ns: kinds(shared(ns).modules()),
    "shared state_dict": lambda ns: list(shared(ns).state_dict()),
    "shared named_parameters": lambda ns: names(shared(ns).named_parameters()),
    "shared apply": lambda ns: applied(shared(ns)),
    "named_modules prefix": lambda ns: names(shared(ns).named_modules(prefix="x")),
    "named_modules memo": lambda ns: (lambda m: names(m.named_modules(memo={m[0]} if ns is torch.nn else {id(m[0])})))(
        ns.Sequential(ns.ReLU(), ns.Tanh())),
    "named_parameters prefix": lambda ns: names(shared(ns).named_parameters(prefix="x")),
    "named_parameters recurse=False": lambda ns: names(nested(ns).named_parameters(recurse=False)),
    "nested state_dict": lambda ns: list(nested(ns).state_dict()),
    "nested state_dict prefix": lambda ns: list(nested(ns).state_dict(prefix="model.")),
    "nested named_buffers": lambda ns: names(nested(ns).named_buffers()),
    "nested named_modules": lambda ns: names(nested(ns).named_modules()),
    "nested modules": lambda ns: kinds(nested(ns).modules()),
    "nested apply order": lambda ns: applied(nested(ns)),
    "apply returns the module": lambda ns: (lambda m: m.apply(lambda x: None) is m)(nested(ns)),
    "non-persistent state_dict": lambda ns: list(nonpersistent(ns).state_dict()),
    "non-persistent named_buffers": lambda ns: names(nonpersistent(ns).named_buffers()),
    "a None parameter": lambda ns: then(lambda m: setattr(m, "bias", None), lambda m: list(m.state_dict()),
                                        lambda m: names(m.named_parameters()))(ns.Linear(2, 2)),
    # load_state_dict
    "load strict=False keys": lambda ns: keys_of(nested(ns).load_state_dict(
        {"enc.0.weight": A(ns, 3, 2), "zz": A(ns, 1)}, strict=False)),
    "load strict positional": lambda ns: keys_of(ns.Linear(2, 2).load_state_dict({"weight": A(ns, 2, 2)}, False)),
    "load strict=True": lambda ns: nested(ns).load_state_dict({"enc.0.weight": A(ns, 3, 2), "zz": A(ns, 1)}),
    "load shape mismatch strict=False": lambda ns: nested(ns).load_state_dict({"enc.0.weight": A(ns, 2, 2)},
                                                                                strict=False),
    "load assign=True keys": lambda ns: keys_of(ns.Linear(2, 2).load_state_dict(
        {"weight": A(ns, 2, 2), "bias": A(ns, 2)}, assign=True)),
    "load assign=True shape mismatch": lambda ns: ns.Linear(2, 2).load_state_dict(
        {"weight": A(ns, 3, 2), "bias": A(ns, 2)}, assign=True),
    "load without a non-persistent buffer": lambda ns: keys_of(nonpersistent(ns).load_state_dict({"a": A(ns, 2)})),
    "load a non-persistent buffer": lambda ns: keys_of(nonpersistent(ns).load_state_dict(
        {"a": A(ns, 2), "b": A(ns, 2)}, strict=False)),
    "load a shared module under both names": lambda ns: keys_of(shared(ns).load_state_dict(
        {"0.weight": A(ns, 2, 2), "0.bias": A(ns, 2), "2.weight": A(ns, 2, 2), "2.bias": A(ns, 2)})),
    "load a shared module under one name": lambda ns: keys_of(shared(ns).load_state_dict(
        {"0.weight": A(ns, 2, 2), "0.bias": A(ns, 2)}, strict=False)),
    "load tied": lambda ns: keys_of(tied(ns).load_state_dict(
        {"a.weight": A(ns, 2, 2), "a.bias": A(ns, 2), "b.bias": A(ns, 2)}, strict=False)),
    "load into a None parameter": lambda ns: then(lambda m: setattr(m, "bias", None), lambda m: keys_of(
        m.load_state_dict({"weight": A(ns, 2, 2), "bias": A(ns, 2)}, strict=False)))(ns.Linear(2, 2)),
    "load a list": lambda ns: ns.Linear(2, 2).load_state_dict([("weight", A(ns, 2, 2))]),
    # modes and flags
    "train/eval propagation": lambda ns: (lambda m: [
        [x.training for x in m.eval().modules()], [x.training for x in m.train().modules()],
        (m[0].eval(), [x.training for x in m.modules()])[1]])(nested(ns)),
    "train() and eval() return the module": lambda ns: (lambda m: m.train() is m and m.eval() is m)(nested(ns)),
    "training set on one module": lambda ns: then(lambda m: setattr(m, "training", False),
                                                  lambda m: [x.training for x in m.modules()])(
        ns.Sequential(ns.ReLU())),
    "train('eval')": lambda ns: ns.ReLU().train("eval"),
    "requires_grad_": lambda ns: [p.requires_grad for p in nested(ns).requires_grad_(False).parameters()],
    "requires_grad_ returns the module": lambda ns: type(nested(ns).requires_grad_(False)).__name__,
    "requires_grad_ default True": lambda ns: [p.requires_grad for p in
                                               ns.Linear(2, 2).requires_grad_(False).requires_grad_().parameters()],
    "requires_grad_ tied": lambda ns: [p.requires_grad for p in tied(ns).requires_grad_(False).parameters()],
    "zero_grad": lambda ns: nested(ns).zero_grad(),
    "zero_grad set_to_none=False": lambda ns: nested(ns).zero_grad(set_to_none=False),
    # registration
    "register_module": lambda ns: then(lambda m: m.register_module("r", ns.ReLU()),
                                       lambda m: names(m.named_children()))(ns.Linear(2, 2)),
    "register_buffer of an int": lambda ns: ns.Linear(2, 2).register_buffer("x", 3),
    "register_buffer of a str": lambda ns: ns.Linear(2, 2).register_buffer("x", "abc"),
    "register_buffer of a list": lambda ns: ns.Linear(2, 2).register_buffer("x", [1.0, 2.0]),
    "register_buffer named by an int": lambda ns: ns.Linear(2, 2).register_buffer(3, A(ns, 1)),
    "register_buffer over a parameter": lambda ns: ns.Linear(2, 2).register_buffer("weight", None),
    "register_parameter over a plain attribute": lambda ns: then(lambda m: setattr(m, "foo", 1),
                                                                 lambda m: m.register_parameter("foo", P(ns, 1)))(
        ns.Linear(2, 2)),
    "a Parameter over a plain attribute": lambda ns: then(
        lambda m: (setattr(m, "foo", 3), setattr(m, "foo", P(ns, 2))), lambda m: names(m.named_parameters()))(
        ns.Linear(2, 2)),
    "a Module over a plain attribute": lambda ns: then(
        lambda m: (setattr(m, "foo", 1), setattr(m, "foo", ns.ReLU())), lambda m: names(m.named_children()))(
        ns.Linear(2, 2)),
    "a Parameter over a buffer": lambda ns: then(
        lambda m: setattr(m, "running_mean", P(ns, 2)), lambda m: names(m.named_parameters()),
        lambda m: names(m.named_buffers()), lambda m: list(m.state_dict()))(ns.BatchNorm1d(2)),
    "a Module over a parameter": lambda ns: setattr(ns.Linear(2, 2), "weight", ns.ReLU()),
    "a Parameter over a module": lambda ns: then(lambda m: setattr(m, "0", P(ns, 1)),
                                                 lambda m: list(m.state_dict()))(ns.Sequential(ns.Linear(2, 2))),
    "an int over a buffer": lambda ns: setattr(ns.BatchNorm1d(2), "running_mean", 3),
    "an int over a module": lambda ns: setattr(ns.Sequential(ns.Linear(2, 2)), "0", 3),
    "del a parameter": lambda ns: then(lambda m: delattr(m, "weight"), lambda m: list(m.state_dict()),
                                       lambda m: hasattr(m, "weight"))(ns.Linear(2, 2)),
    "del a buffer": lambda ns: then(lambda m: delattr(m, "running_mean"), lambda m: list(m.state_dict()),
                                    lambda m: hasattr(m, "running_mean"))(ns.BatchNorm1d(2)),
    "del a child": lambda ns: then(lambda m: delattr(m, "0"), lambda m: list(m.state_dict()), len)(
        ns.Sequential(ns.Linear(2, 2), ns.ReLU())),
    "del a missing attribute": lambda ns: delattr(ns.Linear(2, 2), "nope"),
    "a missing attribute": lambda ns: ns.Linear(2, 2).nope,
    # lookups
    "get_submodule": lambda ns: type(nested(ns).get_submodule("enc.1")).__name__,
    "get_submodule ''": lambda ns: type(nested(ns).get_submodule("")).__name__,
    "get_submodule missing": lambda ns: nested(ns).get_submodule("enc.7"),
    "get_submodule of a parameter": lambda ns: nested(ns).get_submodule("enc.0.weight"),
    "get_submodule of a None child": lambda ns: then(lambda m: setattr(m, "0", None),
                                                     lambda m: m.get_submodule("0"))(ns.Sequential(ns.Linear(2, 2))),
    "get_parameter": lambda ns: tuple(nested(ns).get_parameter("enc.0.weight").shape),
    "get_parameter top level": lambda ns: tuple(ns.Linear(2, 3).get_parameter("weight").shape),
    "get_parameter missing": lambda ns: nested(ns).get_parameter("enc.0.zz"),
    "get_parameter of a buffer": lambda ns: nested(ns).get_parameter("enc.1.running_mean"),
    "get_parameter of a missing module": lambda ns: nested(ns).get_parameter("foo.weight"),
    "get_buffer": lambda ns: tuple(nested(ns).get_buffer("enc.1.running_mean").shape),
    "get_buffer non-persistent": lambda ns: tuple(nonpersistent(ns).get_buffer("b").shape),
    "get_buffer of a parameter": lambda ns: nested(ns).get_buffer("enc.1.weight"),
    "set_submodule": lambda ns: then(lambda m: m.set_submodule("enc.0", ns.ReLU()), lambda m: kinds(m.modules()),
                                     lambda m: list(m.state_dict()))(nested(ns)),
    "set_submodule a new name": lambda ns: then(lambda m: m.set_submodule("enc.extra", ns.ReLU()),
                                                lambda m: names(m.named_modules()))(nested(ns)),
    "set_submodule a new name strict": lambda ns: nested(ns).set_submodule("enc.extra", ns.ReLU(), strict=True),
    "set_submodule over a parameter": lambda ns: nested(ns).set_submodule("enc.0.weight", ns.ReLU()),
    "set_submodule of a missing parent": lambda ns: nested(ns).set_submodule("nope.x", ns.ReLU()),
    "set_submodule ''": lambda ns: nested(ns).set_submodule("", ns.ReLU()),
    "set_submodule of an int": lambda ns: nested(ns).set_submodule("dec", 3),
    "_get_name": lambda ns: ns.Linear(2, 2)._get_name(),
    "Parameter(data, False)": lambda ns: (ns.Parameter(A(ns, 2), False).requires_grad,
                                          ns.Parameter(A(ns, 2)).requires_grad,
                                          ns.Parameter(A(ns, 2), requires_grad=False).requires_grad),
    "a deepcopy keeps tied parameters tied": lambda ns: (lambda c: c.a.weight is c.b.weight)(copy.deepcopy(tied(ns))),
    "a deepcopy keeps a shared module shared": lambda ns: (lambda c: c[0] is c[2])(copy.deepcopy(shared(ns))),
    "state_dict keep_vars of tied parameters": lambda ns: (lambda sd: sd["a.weight"] is sd["b.weight"])(
        tied(ns).state_dict(keep_vars=True)),
    "pickle keeps the state_dict's names": lambda ns: list(pickle.loads(pickle.dumps(nested(ns))).state_dict()),
    "load_state_dict's result repr": lambda ns: (repr(ns.Linear(2, 2).load_state_dict(ns.Linear(2, 2).state_dict())),
                                                 repr(ns.Linear(2, 2).load_state_dict({}, strict=False))),
    "a module twice in a ModuleList": lambda ns: (lambda lin: (len(list(ns.ModuleList([lin, lin]).parameters())),
                                                               list(ns.ModuleList([lin, lin]).state_dict())))(
        ns.Linear(2, 2)),
    "reversed containers": lambda ns: (kinds(reversed(ML(ns))), kinds(reversed(S(ns)))),
    # repr
    "repr nested": lambda ns: repr(nested(ns)),
    "repr empty Sequential": lambda ns: repr(ns.Sequential()),
    "repr ModuleList runs": lambda ns: repr(ns.ModuleList([ns.Linear(2, 2), ns.Linear(2, 2), ns.ReLU()])),
    "repr empty ModuleList": lambda ns: repr(ns.ModuleList()),
    "repr ModuleDict": lambda ns: repr(MD(ns)),
    "repr a None child": lambda ns: then(lambda m: setattr(m, "0", None), repr)(ns.Sequential(ns.Linear(2, 2))),
    "repr Linear": lambda ns: repr(ns.Linear(2, 3)),
    "repr ParameterList": lambda ns: repr(PL(ns)),
    "repr ParameterDict": lambda ns: repr(PD(ns)),
    "repr a multi-line extra_repr": lambda ns: repr(type("Foo", (ns.Module,), {
        "extra_repr": lambda s: "a=1\nb=2",
        "__init__": lambda s: (ns.Module.__init__(s), s.add_module("l", ns.ReLU()))[0]})()),
    # Sequential
    "Sequential index": lambda ns: type(S(ns)[1]).__name__,
    "Sequential negative index": lambda ns: type(S(ns)[-1]).__name__,
    "Sequential index out of range": lambda ns: S(ns)[4],
    "Sequential str index": lambda ns: S(ns)["0"],
    "Sequential slice": lambda ns: (type(S(ns)[1:3]).__name__, names(S(ns)[1:3].named_children())),
    "Sequential slice state_dict": lambda ns: list(S(ns)[2:].state_dict()),
    "Sequential len": lambda ns: len(S(ns)),
    "Sequential bool of empty": lambda ns: bool(ns.Sequential()),
    "Sequential iteration": lambda ns: kinds(S(ns)),
    "Sequential append": lambda ns: names(S(ns).append(ns.ReLU()).named_children()),
    "Sequential insert": lambda ns: kinds(S(ns).insert(1, ns.Sigmoid())),
    "Sequential insert negative": lambda ns: kinds(S(ns).insert(-1, ns.Sigmoid())),
    "Sequential insert out of range": lambda ns: S(ns).insert(9, ns.Sigmoid()),
    "Sequential extend": lambda ns: names(S(ns).extend([ns.ReLU()]).named_children()),
    "Sequential extend itself": lambda ns: len(S(ns).extend(S(ns))),
    "Sequential pop": lambda ns: (lambda s: (type(s.pop(1)).__name__, names(s.named_children())))(S(ns)),
    "Sequential pop negative": lambda ns: (lambda s: (type(s.pop(-1)).__name__, len(s)))(S(ns)),
    "Sequential pop slice": lambda ns: (lambda s: (type(s.pop(slice(0, 2))).__name__, len(s)))(S(ns)),
    "Sequential del slice": lambda ns: then(lambda s: s.__delitem__(slice(0, 2)), lambda s: names(s.named_children()),
                                            lambda s: list(s.state_dict()))(S(ns)),
    "Sequential del negative": lambda ns: then(lambda s: s.__delitem__(-1), kinds)(S(ns)),
    "Sequential del out of range": lambda ns: S(ns).__delitem__(7),
    "Sequential setitem negative": lambda ns: then(lambda s: s.__setitem__(-1, ns.ReLU()), kinds)(S(ns)),
    "Sequential setitem slice": lambda ns: S(ns).__setitem__(slice(0, 1), ns.ReLU()),
    "Sequential + Sequential": lambda ns: names((S(ns) + S(ns)).named_children()),
    "Sequential +=": lambda ns: then(lambda s: s.__iadd__(S(ns)), len, lambda s: names(s.named_children()))(S(ns)),
    "Sequential * 2": lambda ns: len(S(ns) * 2),
    "2 * Sequential": lambda ns: len(2 * S(ns)),
    "Sequential *= 2": lambda ns: (lambda s: (s.__imul__(2), len(s), names(s.named_children()))[1:])(S(ns)),
    "Sequential * 0": lambda ns: S(ns) * 0,
    "Sequential * -1": lambda ns: S(ns) * -1,
    "Sequential * 1.5": lambda ns: S(ns) * 1.5,
    "Sequential *= 0": lambda ns: S(ns).__imul__(0),
    "Sequential * 2 shares the modules": lambda ns: len(list((S(ns) * 2).parameters())),
    "Sequential * 2 state_dict": lambda ns: list((S(ns) * 2).state_dict()),
    "Sequential OrderedDict names": lambda ns: names(ns.Sequential(OrderedDict(a=ns.ReLU(), b=ns.Tanh()))
                                                     .named_children()),
    "Sequential OrderedDict slice": lambda ns: names(ns.Sequential(OrderedDict(a=ns.ReLU(), b=ns.Tanh()))[1:]
                                                     .named_children()),
    "Sequential OrderedDict negative index": lambda ns: type(ns.Sequential(OrderedDict(a=ns.ReLU(), b=ns.Tanh()))[-1])
    .__name__,
    "Sequential OrderedDict append": lambda ns: names(ns.Sequential(OrderedDict(a=ns.ReLU(), b=ns.Tanh()))
                                                      .append(ns.ReLU()).named_children()),
    "Sequential OrderedDict del": lambda ns: then(lambda s: s.__delitem__(0), lambda s: names(s.named_children()))(
        ns.Sequential(OrderedDict(a=ns.ReLU(), b=ns.Tanh()))),
    # ModuleList
    "ModuleList negative index": lambda ns: type(ML(ns)[-1]).__name__,
    "ModuleList str index": lambda ns: ML(ns)["0"],
    "ModuleList slice": lambda ns: (type(ML(ns)[1:]).__name__, names(ML(ns)[1:].named_children())),
    "ModuleList insert": lambda ns: then(lambda m: m.insert(0, ns.Sigmoid()), kinds,
                                         lambda m: names(m.named_children()))(ML(ns)),
    "ModuleList insert returns None": lambda ns: ML(ns).insert(0, ns.Sigmoid()),
    "ModuleList extend": lambda ns: names(ML(ns).extend([ns.ReLU()]).named_children()),
    "ModuleList extend of an int": lambda ns: ML(ns).extend(3),
    "ModuleList +=": lambda ns: then(lambda m: m.__iadd__([ns.ReLU()]), len)(ML(ns)),
    "ModuleList += returns itself": lambda ns: (lambda m: m.__iadd__([ns.ReLU()]) is m)(ML(ns)),
    "ModuleList + ModuleList": lambda ns: len(ML(ns) + ML(ns)),
    "ModuleList + list": lambda ns: len(ML(ns) + [ns.ReLU()]),
    "ModuleList del": lambda ns: then(lambda m: m.__delitem__(0), lambda m: names(m.named_children()),
                                      lambda m: list(m.state_dict()))(ML(ns)),
    "ModuleList del slice": lambda ns: then(lambda m: m.__delitem__(slice(0, 2)),
                                            lambda m: names(m.named_children()))(ML(ns)),
    "ModuleList pop": lambda ns: (lambda m: (type(m.pop(0)).__name__, kinds(m)))(ML(ns)),
    "ModuleList pop negative": lambda ns: (lambda m: (type(m.pop(-1)).__name__, kinds(m)))(ML(ns)),
    "ModuleList pop slice": lambda ns: (lambda m: (kinds(m.pop(slice(0, 2))), kinds(m)))(ML(ns)),
    "ModuleList setitem negative": lambda ns: then(lambda m: m.__setitem__(-1, ns.ReLU()), kinds,
                                                   lambda m: names(m.named_children()))(ML(ns)),
    "ModuleList setitem out of range": lambda ns: ML(ns).__setitem__(5, ns.ReLU()),
    "ModuleList setitem an int": lambda ns: ML(ns).__setitem__(0, 3),
    "ModuleList contains": lambda ns: (lambda m: m[0] in m)(ML(ns)),
    "ModuleList called": lambda ns: ML(ns)(1),
    # ModuleDict
    "ModuleDict keys": lambda ns: list(MD(ns).keys()),
    "ModuleDict iteration": lambda ns: list(MD(ns)),
    "ModuleDict items": lambda ns: [(k, type(v).__name__) for k, v in MD(ns).items()],
    "ModuleDict from pairs": lambda ns: list(ns.ModuleDict([("b", ns.ReLU()), ("a", ns.Tanh())]).keys()),
    "ModuleDict update": lambda ns: then(lambda d: d.update({"c": ns.ReLU(), "a": ns.Sigmoid()}), list,
                                         lambda d: type(d["a"]).__name__)(MD(ns)),
    "ModuleDict update of a plain dict keeps its order": lambda ns: then(
        lambda d: d.update({"z": ns.ReLU(), "c": ns.ReLU()}), list)(ns.ModuleDict()),
    "ModuleDict update of pairs": lambda ns: then(lambda d: d.update([("z", ns.ReLU())]), list)(MD(ns)),
    "ModuleDict update of a ModuleDict": lambda ns: then(lambda d: d.update(MD(ns)), list)(ns.ModuleDict()),
    "ModuleDict update of an int": lambda ns: MD(ns).update(3),
    "ModuleDict update of a triple": lambda ns: MD(ns).update([("a", ns.ReLU(), 3)]),
    "ModuleDict update of a non-pair": lambda ns: MD(ns).update([3]),
    "ModuleDict setitem of an existing key keeps its place": lambda ns: then(
        lambda d: d.__setitem__("b", ns.Sigmoid()), list)(MD(ns)),
    "ModuleDict pop": lambda ns: (lambda d: (type(d.pop("b")).__name__, list(d)))(MD(ns)),
    "ModuleDict pop missing": lambda ns: MD(ns).pop("zz"),
    "ModuleDict del missing": lambda ns: MD(ns).__delitem__("zz"),
    "ModuleDict getitem missing": lambda ns: MD(ns)["zz"],
    "ModuleDict in": lambda ns: ("a" in MD(ns), "z" in MD(ns)),
    "ModuleDict clear": lambda ns: then(lambda d: d.clear(), len)(MD(ns)),
    "ModuleDict dotted key": lambda ns: MD(ns).__setitem__("a.b", ns.ReLU()),
    "ModuleDict int key": lambda ns: MD(ns).__setitem__(1, ns.ReLU()),
    "ModuleDict key 'train'": lambda ns: ns.ModuleDict({"train": ns.ReLU()}),
    # ParameterList
    "ParameterList names": lambda ns: names(PL(ns).named_parameters()),
    "ParameterList state_dict": lambda ns: list(PL(ns).state_dict()),
    "ParameterList negative index": lambda ns: tuple(PL(ns)[-1].shape),
    "ParameterList index out of range": lambda ns: PL(ns)[5],
    "ParameterList slice": lambda ns: (type(PL(ns)[1:]).__name__, names(PL(ns)[1:].named_parameters())),
    "ParameterList append an array": lambda ns: shapes(PL(ns).append(A(ns, 4))),
    "ParameterList append returns itself": lambda ns: type(PL(ns).append(P(ns, 1))).__name__,
    "ParameterList extend of arrays": lambda ns: len(PL(ns).extend([A(ns, 2)])),
    "ParameterList extend of an int": lambda ns: PL(ns).extend(3),
    "ParameterList +=": lambda ns: then(lambda p: p.__iadd__([P(ns, 1)]), len)(PL(ns)),
    "ParameterList setitem negative": lambda ns: then(lambda p: p.__setitem__(-1, P(ns, 5)), shapes)(PL(ns)),
    "ParameterList setitem out of range": lambda ns: PL(ns).__setitem__(5, P(ns, 5)),
    # ParameterDict
    "ParameterDict keys of a plain dict (sorted, as torch's)": lambda ns: list(PD(ns).keys()),
    "ParameterDict values": lambda ns: shapes(PD(ns).values()),
    "ParameterDict iteration": lambda ns: list(PD(ns)),
    "ParameterDict reversed": lambda ns: list(reversed(PD(ns))),
    "ParameterDict state_dict": lambda ns: list(PD(ns).state_dict()),
    "ParameterDict named_parameters": lambda ns: names(PD(ns).named_parameters()),
    "ParameterDict from pairs": lambda ns: list(ns.ParameterDict([("b", P(ns, 1)), ("a", P(ns, 1))])),
    "ParameterDict from an OrderedDict": lambda ns: list(ns.ParameterDict(OrderedDict([("b", P(ns, 1)),
                                                                                        ("a", P(ns, 1))]))),
    "ParameterDict update": lambda ns: then(lambda d: d.update({"c": P(ns, 1)}), list)(PD(ns)),
    "ParameterDict update of a ParameterDict": lambda ns: then(lambda d: d.update(ns.ParameterDict(OrderedDict(
        [("b", P(ns, 1)), ("a", P(ns, 1))]))), list)(ns.ParameterDict()),
    "ParameterDict update of an int": lambda ns: ns.ParameterDict().update(3),
    "ParameterDict update of a 1-tuple": lambda ns: ns.ParameterDict().update([("a",)]),
    "ParameterDict in": lambda ns: ("a" in PD(ns), "q" in PD(ns)),
    "ParameterDict len": lambda ns: len(PD(ns)),
    "ParameterDict get": lambda ns: ns.ParameterDict().get("x", 5),
    "ParameterDict pop": lambda ns: (lambda d: (tuple(d.pop("b").shape), list(d)))(PD(ns)),
    "ParameterDict popitem": lambda ns: (lambda d: (d.popitem()[0], list(d)))(PD(ns)),
    "ParameterDict popitem of an empty one": lambda ns: ns.ParameterDict().popitem(),
    "ParameterDict del missing": lambda ns: ns.ParameterDict().__delitem__("x"),
    "ParameterDict clear": lambda ns: then(lambda d: d.clear(), len, lambda d: list(d.state_dict()))(PD(ns)),
    "ParameterDict copy": lambda ns: (lambda d: (list(d.copy()), all(a is b for a, b in zip(d.copy().values(),
                                                                                           d.values()))))(PD(ns)),
    "ParameterDict setdefault": lambda ns: (lambda d: (tuple(d.setdefault("z", P(ns, 4)).shape),
                                                       tuple(d.setdefault("a", P(ns, 9)).shape), list(d)))(PD(ns)),
    "ParameterDict fromkeys": lambda ns: (lambda d: (list(d.fromkeys(["x", "y"], P(ns, 2))),
                                                     shapes(d.fromkeys(["x", "y"], P(ns, 2)).values())))(PD(ns)),
    "ParameterDict fromkeys None": lambda ns: (lambda d: (list(d), list(d.state_dict()), repr(d)))(
        PD(ns).fromkeys(["x", "y"])),
    "ParameterDict |": lambda ns: list(PD(ns) | ns.ParameterDict(OrderedDict([("c", P(ns, 1)), ("a", P(ns, 7))]))),
    "dict | ParameterDict": lambda ns: list({"z": P(ns, 1)} | PD(ns)),
    "ParameterDict |=": lambda ns: then(lambda d: d.__ior__({"c": P(ns, 1)}), list)(PD(ns)),
    "ParameterDict dotted key": lambda ns: PD(ns).__setitem__("a.b", P(ns, 1)),
    "ParameterDict key 'train'": lambda ns: ns.ParameterDict({"train": P(ns, 1)}),
}


def outcome(case, ns):
    try:
        return "ok", case(ns)
    except Exception as e:  # noqa: BLE001 (the exception is the outcome compared)
        return "raised", e


@pytest.mark.parametrize("label", list(CASES))
def test_same_as_torch(label):
    want_kind, want = outcome(CASES[label], torch.nn)
    got_kind, got = outcome(CASES[label], nn)
    assert got_kind == want_kind, f"torch {want_kind} {want!r}, luminal {got_kind} {got!r}"
    if want_kind == "raised":
        assert isinstance(got, type(want)), f"torch raised {want!r}, luminal {got!r}"
    else:
        assert got == want


def test_load_state_dict_errors_are_runtime_errors_too():
    """A port's ``try: load_state_dict(sd) except RuntimeError: load_state_dict(sd, strict=False)``:
    luminal's error was a ValueError only, which that except let through."""
    m = nested(nn)
    sd = {**m.state_dict(), "extra": np.zeros(1, np.float32)}
    try:
        m.load_state_dict(sd)
    except RuntimeError:
        missing, unexpected = m.load_state_dict(sd, strict=False)
    assert (missing, unexpected) == ([], ["extra"])
    with pytest.raises(ValueError, match="enc.0.weight: checkpoint \\(2, 2\\) vs model \\(3, 2\\)"):
        m.load_state_dict({"enc.0.weight": np.zeros((2, 2), np.float32)}, strict=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_assign_takes_the_checkpoints_arrays_and_dtypes_as_torch(dtype):
    """assign=True: the module holds the checkpoint's arrays (shared memory, as torch's holds the
    checkpoint's tensors) in their dtype; the forward computes with them, as torch's."""
    rng = np.random.default_rng(0)
    sd = {"weight": rng.standard_normal((3, 4)).astype(dtype), "bias": rng.standard_normal(3).astype(dtype)}
    t = torch.nn.Linear(4, 3)
    tsd = {k: torch.from_numpy(v.copy()) for k, v in sd.items()}
    t.load_state_dict(tsd, assign=True)
    m = nn.Linear(4, 3)
    w = m.weight
    m.load_state_dict(sd, assign=True)
    assert m.weight is w and m.weight.requires_grad  # (the Parameter object stays: optimizers keep it)
    assert t.weight.data_ptr() == tsd["weight"].data_ptr()
    assert np.shares_memory(m.weight.data, sd["weight"]) and np.shares_memory(m.bias.data, sd["bias"])
    assert m.weight.dtype.np == np.dtype(dtype) and t.weight.dtype == tsd["weight"].dtype
    x = rng.standard_normal((2, 4)).astype(dtype)
    g = lm.Graph()
    out = lm.compile(m(g.input("x", (2, 4), dtype=m.weight.dtype)))(x=x)
    want = t(torch.from_numpy(x)).detach().numpy()
    tol = 2e-3 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(np.asarray(out, np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def test_assign_copies_what_a_state_cannot_hold_as_it_is():
    """An int64 count (integers are int32 here), a read-only or a strided array: copied, values kept."""
    bn = nn.BatchNorm1d(3)
    sd = {k: np.asarray(v).copy() for k, v in bn.state_dict().items()}
    sd["num_batches_tracked"] = np.array(7, np.int64)
    sd["running_mean"] = np.arange(6, dtype=np.float32)[::2]  # strided
    sd["weight"].flags.writeable = False
    bn.load_state_dict(sd, assign=True)
    assert bn.num_batches_tracked.dtype is lm.int32 and int(bn.num_batches_tracked.data) == 7
    np.testing.assert_array_equal(bn.running_mean.data, [0, 2, 4])
    assert bn.running_mean.data.flags.c_contiguous and bn.weight.data.flags.writeable
    assert not np.shares_memory(bn.weight.data, sd["weight"])


def test_assign_refuses_a_dtype_change_under_a_live_graph():
    """A graph built from the module reads its states in their old dtype: assign=True changing one is
    refused, naming the state and the dtypes, and nothing is loaded."""
    m = nn.Linear(2, 2)
    g = lm.Graph()
    m(g.input("x", (1, 2)))
    before = m.weight.data.copy()
    sd = {"weight": np.zeros((2, 2), np.float64), "bias": np.zeros(2, np.float64)}
    with pytest.raises(RuntimeError, match=r"weight \(float32 -> float64\).*1 graph"):
        m.load_state_dict(sd, assign=True)
    np.testing.assert_array_equal(m.weight.data, before)
    m.load_state_dict({k: v.astype(np.float32) for k, v in sd.items()}, assign=True)  # same dtype: fine
    assert m.weight.dtype is lm.float32 and not m.weight.data.any()


def test_known_differences():
    """Where luminal knowingly differs from torch, each for a reason:
    - ModuleList.insert takes list.insert's negative positions (torch's raises KeyError('-1')) and
      refuses a position past the end (torch's registers the module as "10" after "0".."2");
    - ParameterDict[missing] is a KeyError (torch's an AttributeError from its attribute lookup);
    - ParameterList.append of what is not an array is a TypeError naming the container (torch keeps
      it as a plain attribute, which neither parameters() nor state_dict sees);
    - ``seq += seq`` appends a copy of its modules (torch's raises "dictionary changed size during
      iteration")."""
    s = S(nn)
    s += s
    assert kinds(s) == kinds(S(nn)) * 2 and list(s.state_dict())[-2:] == ["6.weight", "6.bias"]
    m = ML(nn)
    m.insert(-1, nn.Sigmoid())
    assert kinds(m) == ["Linear", "ReLU", "Sigmoid", "Tanh"]
    with pytest.raises(IndexError, match="ModuleList.insert: index 10"):
        m.insert(10, nn.ReLU())
    with pytest.raises(KeyError):
        PD(nn)["zz"]
    with pytest.raises(TypeError, match="ParameterList.append: cannot make a parameter of str"):
        PL(nn).append("abc")


# forward hooks (torch's register_forward_pre_hook / register_forward_hook) ----------------------------


def run_both(build, x):
    """``build(ns)`` -> (module, kept): the torch model on ``x``, and the luminal one built in a graph
    and compiled with every tensor its hooks kept, as arrays: (output, [kept...]) for each."""
    tm, tkept = build(torch.nn)
    tout = tm(torch.from_numpy(x))
    tvals = (tout.detach().numpy(), [k.detach().numpy() for k in tkept])
    lmod, lkept = build(nn)
    g = lm.Graph()
    out = lmod(g.input("x", x.shape))
    vals = lm.compile([out, *lkept])(x=x)
    return tvals, (vals[0], list(vals[1:]))


def model(ns, seed=0):
    """A Linear-ReLU-Linear with the same weights in both."""
    m = ns.Sequential(ns.Linear(3, 4), ns.ReLU(), ns.Linear(4, 2))
    rng = np.random.default_rng(seed)
    sd = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in m.state_dict().items()}
    m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()} if ns is torch.nn else sd)
    return m


def assert_same(tvals, lvals):
    np.testing.assert_allclose(lvals[0], tvals[0], rtol=1e-5, atol=1e-5)
    assert len(lvals[1]) == len(tvals[1])
    for a, b in zip(lvals[1], tvals[1]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


X = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)


def test_forward_hooks_keep_and_replace_as_torch():
    """A hook keeping an activation (the feature-extraction use), a pre-hook replacing the input (a
    single value: the one positional argument), a hook replacing the output, in torch's order."""
    def build(ns):
        m, kept, order = model(ns), [], []
        m[0].register_forward_hook(lambda mod, args, out: kept.append(out))
        m[2].register_forward_pre_hook(lambda mod, args: args[0] * 2)
        m[2].register_forward_hook(lambda mod, args, out: (order.append("second"), out + 1)[1])
        m[2].register_forward_hook(lambda mod, args, out: (order.append("first"), out * 3)[1], prepend=True)
        m.register_forward_hook(lambda mod, args, out: kept.append(args[0]))  # (the Sequential's input)
        return m, kept
    assert_same(*run_both(build, X))


def test_forward_hooks_with_kwargs_as_torch():
    def build(ns):
        m, kept = model(ns), []

        def pre(mod, args, kwargs):
            return (args[0] - 1,), kwargs

        m[0].register_forward_pre_hook(pre, with_kwargs=True)
        m[1].register_forward_hook(lambda mod, args, kwargs, out: kept.append(out * 0.5) or out, with_kwargs=True)
        return m, kept
    assert_same(*run_both(build, X))


def test_removed_hooks_do_not_run():
    def build(ns):
        m, kept = model(ns), []
        h = m[0].register_forward_hook(lambda mod, args, out: out * 100)
        with m[1].register_forward_pre_hook(lambda mod, args: args[0] * 100):
            pass
        h.remove()
        h.remove()  # (twice: nothing more)
        return m, kept
    assert_same(*run_both(build, X))


def test_a_pre_hook_with_kwargs_returning_one_value_is_refused_as_torch():
    for ns in (torch.nn, nn):
        m = model(ns)
        m[0].register_forward_pre_hook(lambda mod, args, kwargs: args[0], with_kwargs=True)
        x = torch.from_numpy(X) if ns is torch.nn else lm.Graph().input("x", X.shape)
        with pytest.raises(RuntimeError, match="forward pre-hook"):
            m(x)


def test_always_call_runs_when_forward_raises():
    for ns in (torch.nn, nn):
        seen = []
        m = ns.Linear(3, 2)
        m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
        m.register_forward_hook(lambda mod, args, out: seen.append("not always"))
        x = torch.ones(4, 5) if ns is torch.nn else lm.Graph().input("x", (4, 5))
        with pytest.raises(Exception):  # noqa: B017 (torch's RuntimeError, luminal's shape error)
            m(x)
        assert seen == [None]


def test_backward_hooks_name_what_to_do_instead():
    m = nn.Linear(2, 2)
    for name in ("register_full_backward_hook", "register_full_backward_pre_hook", "register_backward_hook"):
        assert hasattr(torch.nn.Module, name)
        with pytest.raises(NotImplementedError, match=f"Linear.{name}: luminal has no backward hooks.*"
                                                      f"register_forward_hook"):
            getattr(m, name)(lambda *a: None)
