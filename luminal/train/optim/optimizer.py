"""The optimizer base: torch's param-group layout, per-parameter state as persistent States, and the
update written as graph ops so forward + backward + update compile into one program.

A subclass declares ``state_names`` (per-parameter arrays, zero-initialised like the parameter) and
implements two methods:

* ``scalars(group, t) -> dict[str, float]``: every number the update of this group reads at step
  ``t`` (1-based): hyperparameters (lr, betas, ...) and host-computed values such as Adam's bias
  corrections, in float64 on the host. They reach the graph as 0-d runtime inputs, so a
  scheduler changing ``group["lr"]`` never recompiles: float64 for float64 parameters (torch's
  update of a float64 tensor reads its Python-float hyperparameters in double; rounded to float32,
  ``eps=1e-50`` would be 0 and a zero gradient 0 / 0), float32 for the others (a 0-d scalar takes the
  tensor's dtype, so a float32 or 16-bit update computes as before, reading no float64 value).
* ``update(p, g, state, s, group) -> (new_p, new_state)``: graph ops over the parameter tensor
  ``p``, its gradient ``g``, its state tensors and the scalar tensors ``s`` (same keys as
  ``scalars``). ``group`` is the Python dict, for structural choices fixed at build time
  (``nesterov``, ``amsgrad``, whether ``weight_decay`` is nonzero).
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from typing import NoReturn

import numpy as np

from luminal.core import dtype as dt
from luminal.core.errors import check_number
from luminal.core.interrupts import interrupts_deferred
from luminal.frontend.eager import TRAIN_STEP, eager_only
from luminal.frontend.state import State, scalar_state, zeros_state


def _optimizer_options() -> frozenset:
    """Every hyperparameter some optimizer takes (its constructor's arguments, torch's kernel flags aside):
    the group keys that change an update's math."""
    def every(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from every(sub)

    skip = {"self", "params", "defaults", "foreach", "fused", "capturable", "differentiable"}
    return frozenset(k for cls in every(Optimizer) for k in inspect.signature(cls.__init__).parameters) - skip


def _ordered(owner: str, what: str, params) -> None:
    """Parameters must come in an ordered collection (torch's rule for a group's params; here for the
    whole list too): a set's order follows the parameters' hashes, which change from run to run, and the
    state dict maps state to parameters by position, so a checkpoint would load into the wrong ones."""
    if isinstance(params, (set, frozenset)):
        raise TypeError(f"{owner}: {what} is a {type(params).__name__}; give the parameters in an ordered "
                        f"collection (a list): a set's order changes between runs, and the optimizer's state "
                        f"dict maps its state to parameters by position")


def _is_number(x) -> bool:
    """A real number (not a bool), or a 0-d numeric array (a value a numpy schedule computed). (A plain
    float or int first: a train step checks its optimizer's numbers on every call, and ``numbers.Real``'s
    ABC check made that about 20 us of an MNIST MLP's 1.2 ms step.)"""
    if type(x) is float or type(x) is int:
        return True
    if isinstance(x, (bool, np.bool_)):
        return False
    return isinstance(x, numbers.Real) or (isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf")


class Optimizer:
    """The optimizer base, as torch's: ``param_groups`` (dicts of parameters and hyperparameters),
    per-parameter state as persistent States, and the update written as graph ops, so that
    ``train.compile_step`` compiles forward, backward and update into one program.

    Args:
        params: an iterable of Parameters, or of param-group dicts (``{"params": [...], "lr": ...}``).
        defaults: the hyperparameters a group takes when it does not set them.
    """

    state_names: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        """A subclass's ``scalars`` checks the group's numbers first (``_check_numbers``): the step reads
        ``param_groups``, which the user may have edited since the constructor checked them."""
        super().__init_subclass__(**kwargs)
        own = vars(cls).get("scalars")
        if own is not None:
            @functools.wraps(own)
            def scalars(self, group: dict, t: int) -> dict[str, float]:
                self._check_numbers(group)
                return own(self, group, t)
            cls.scalars = scalars

    def __init__(self, params, defaults: dict):
        _ordered(type(self).__name__, "params", params)
        try:
            params = list(params)
        except TypeError:
            hint = " (pass module.parameters())" if hasattr(params, "parameters") else ""
            raise TypeError(f"{type(self).__name__}: params must be an iterable of Parameters or of param-group "
                            f"dicts, got {type(params).__name__}{hint}") from None
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]  # (name, param) pairs: one group
        self.defaults = dict(defaults)
        self.param_groups: list[dict] = []
        for grp in groups:
            self.add_param_group(grp)
        self.steps = 0  # completed updates; the next update is step t = steps + 1
        self.state: dict[int, dict[str, State]] = {}  # id(param) -> name -> State
        # id(param) -> the step count when it first trained, moved on by each update it sat out (frozen, or
        # not reached by the loss): a parameter unfrozen or added later counts its own steps, ``steps -
        # first_steps[id]`` (Adam's bias corrections), as torch's per-parameter "step"
        self.first_steps: dict[int, int] = {}
        self.first_steps_loaded = 0  # bumped when a load changes them: a compiled step then builds again
        self.first_steps_moved = 0  # bumped when an update moves some on (count_update): steps look again

    def add_param_group(self, group: dict) -> None:
        """torch's ``Optimizer.add_param_group``: a new group of parameters with its own hyperparameters
        (those not given take the optimizer's defaults). A subclass checks the values first.

        Args:
            group: a dict with ``"params"`` (a Parameter or an iterable of them, float, in no other
                group) and any hyperparameters.
        """
        group = dict(group)
        if "params" not in group:  # (torch: "parameter group didn't specify a value of required ... params")
            raise ValueError(f"{type(self).__name__}: param group {len(self.param_groups)} has no \"params\" (each "
                             f"group is a dict {{\"params\": [...], <hyperparameters>}}), got keys {list(group)}")
        name, gi = type(self).__name__, len(self.param_groups)
        ps = group["params"]
        _ordered(name, f"param group {gi}'s params", ps)
        group["params"] = [ps] if isinstance(ps, State) else list(ps)
        self._names(group)
        for p in group["params"]:
            if not isinstance(p, State):
                raise TypeError(f"{name}: parameters must be nn.Parameter, got {type(p).__name__}")
            if not p.dtype.is_float:
                raise TypeError(f"{name}: cannot optimize {p.describe()}: not a float dtype")
        here: dict[int, int] = {}
        for k, p in enumerate(group["params"]):
            first = here.setdefault(id(p), k)
            if first != k:  # (torch warns that this "will cause an error" in future, and steps it twice)
                raise ValueError(f"{name}: param group {gi} holds {p.describe()} twice (at {first} and {k}); "
                                 f"list each parameter once (torch would apply its update twice)")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise ValueError(f"{name}: a parameter appears in more than one group")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)

    def _names(self, group: dict) -> None:
        """torch's named parameters: ``params`` given as ``(name, parameter)`` pairs
        (``model.named_parameters()``) become the parameters, and their names the group's
        ``param_names`` (kept in the state dict, as torch's). All of a group's parameters are named or
        none, and so are all groups (torch's rule)."""
        ps = group["params"]
        pairs = [isinstance(p, tuple) for p in ps]
        name, gi = type(self).__name__, len(self.param_groups)
        if any(pairs):
            if not all(pairs):
                raise ValueError(f"{name}: param group {gi} mixes (name, parameter) pairs and bare parameters; "
                                 f"give every parameter a name or none")
            bad = next((p for p in ps if len(p) != 2 or not isinstance(p[0], str)), None)
            if bad is not None:
                raise TypeError(f"{name}: a named parameter is a (name, parameter) pair with a str name, as "
                                f"model.named_parameters() gives, got {bad!r}")
            group["param_names"] = [n for n, _ in ps]
            group["params"] = [p for _, p in ps]
        if self.param_groups and ("param_names" in group) != ("param_names" in self.param_groups[0]):
            named = ("named", "not named") if "param_names" in group else ("not named", "named")
            raise ValueError(f"{name}: param group {gi} is {named[0]}, and group 0 is {named[1]}; give every group "
                             f"(name, parameter) pairs or none")

    def _torch_kernels(self, foreach=None, fused=None, capturable=False, differentiable=False) -> None:
        """torch's flags that pick its kernels (``foreach``, ``fused``, ``capturable``: a porting script
        passes them): accepted and changing nothing, as the compiled step is one program for the whole
        update anyway. ``differentiable=True`` (gradients through the update) is refused."""
        name = type(self).__name__
        for k, v in (("foreach", foreach), ("fused", fused), ("capturable", capturable)):
            if v is not None and not isinstance(v, (bool, np.bool_)):
                raise TypeError(f"{name}: {k} must be None, True or False, got {v!r}")
        if differentiable:
            raise ValueError(f"{name}: differentiable=True (gradients through the optimizer's update) is not "
                             f"supported: a compiled train step's update is not differentiated")

    def _validate(self, h: dict) -> None:
        """Check a group's hyperparameters ``h`` (the constructor's and ``add_param_group``'s checks,
        which ``load_state_dict`` applies to a checkpoint's groups too). Each optimizer implements it."""

    def _nonnegative(self, h: dict, keys) -> None:
        """The hyperparameters ``keys`` of ``h`` must be numbers >= 0 (NaN is refused too). A str or None
        fails here, naming the optimizer, not later in a comparison or in the compiled step."""
        name = type(self).__name__
        for k in keys:
            if not check_number(name, k, h[k]) >= 0:
                raise ValueError(f"{name}: invalid {k} {h[k]!r} (must be >= 0)")

    def _epsilon(self, h: dict) -> None:
        """``eps`` keeps the update's denominator off 0: it must be > 0 (torch takes 0, and then an
        exactly-zero gradient, a dead unit's or a padding row's, makes its parameter 0 / 0 = NaN)."""
        name = type(self).__name__
        if not check_number(name, "eps", h["eps"]) > 0:
            raise ValueError(f"{name}: invalid eps {h['eps']!r} (must be > 0: it keeps the update's denominator off 0)")

    # state ------------------------------------------------------------------------------------
    def state_for(self, p: State) -> dict[str, State]:
        """The persistent state of ``p``, each array created zero-filled on first use (also one an option
        switched on later needs: momentum's buffer, as torch's lazy state)."""
        st = self.state.setdefault(id(p), {})
        for n in self.state_names:
            if n not in st:
                st[n] = zeros_state(p.shape, p.dtype, f"{p.name or 'param'}.{n}")
        return st

    @staticmethod
    def scalar_dtype(p: State) -> dt.DType:
        """The dtype of the runtime scalars of ``p``'s update: float64 for a float64 parameter, else
        float32 (a 16-bit parameter's update reads float32 scalars, as torch's opmath)."""
        return dt.float64 if p.dtype is dt.float64 else dt.float32

    def scalar_states(self, group_index: int, t: int, start: int = 0, dtype=dt.float32) -> dict[str, State]:
        """The runtime scalars of a group as States holding their values for step ``t``, for its
        parameters that first trained at step count ``start`` (their own step ``t - start``), in
        ``dtype`` (``scalar_dtype``: one set per dtype a group's parameters need); the train-step
        runner refreshes them before every run."""
        group = self.param_groups[group_index]
        dtype = dt.as_dtype(dtype)
        holders = group.setdefault("_scalars", {}).setdefault((start, dtype.name), {})
        tag = f"opt.g{group_index}" + (f".from{start}" if start else "") + ("" if dtype is dt.float32 else
                                                                             f".{dtype.name}")
        for k, v in self.scalars(group, t - start).items():
            if k not in holders:
                holders[k] = scalar_state(v, f"{tag}.{k}", dtype)
            else:
                holders[k].set(v)
        return holders

    def _check_numbers(self, group: dict) -> None:
        """The group's numeric hyperparameters (those whose default is a number, or a tuple of numbers as
        ``betas``) must still be numbers when ``scalars`` reads them: ``param_groups[i]["lr"] = "0.1"`` or
        ``None``, set after the constructor's checks, failed inside its arithmetic naming nothing."""
        name = type(self).__name__
        gi = next((i for i, g in enumerate(self.param_groups) if g is group), None)
        for k, d in self.defaults.items():
            if k not in group or not (_is_number(d) or isinstance(d, tuple) and all(map(_is_number, d))):
                continue
            v, where = group[k], (f"param_groups[{gi}]" if gi is not None else "a param group") + f"[{k!r}]"
            if isinstance(d, tuple):
                if not (isinstance(v, (tuple, list)) and len(v) == len(d) and all(map(_is_number, v))):
                    raise TypeError(f"{name}: {where} must be a tuple of {len(d)} numbers, got {v!r}")
            elif not _is_number(v):
                raise TypeError(f"{name}: {where} must be a number, got {type(v).__name__} {v!r}")

    def first_step(self, p) -> int:
        """The step count from which ``p`` counts its own steps (now, for one that has not trained yet)."""
        return self.first_steps.setdefault(id(p), self.steps)

    def count_update(self, trained) -> None:
        """Count an update that trained the parameters with ids ``trained``. Each other parameter that
        trained before sat it out (torch skips a parameter without a gradient): its own step count stays
        as it was, so that, trained again, it goes on from there."""
        self.steps += 1
        sat_out = [pid for pid in self.first_steps if pid not in trained]
        for pid in sat_out:
            self.first_steps[pid] += 1
        if sat_out:
            self.first_steps_moved += 1

    def params(self):
        """(group index, parameter) for every parameter."""
        return [(i, p) for i, g in enumerate(self.param_groups) for p in g["params"]]

    def state_dict(self) -> dict:
        """Arrays by ``"state.<param index>.<name>"``, plus the step count and group hyperparameters
        (everything a checkpoint needs to resume exactly)."""
        arrays = {}
        for k, (_, p) in enumerate(self.params()):
            for n, s in self.state_for(p).items():
                arrays[f"state.{k}.{n}"] = s.data
        groups = [{**{k: v for k, v in g.items() if k not in ("params", "_scalars")}, "param_count": len(g["params"])}
                  for g in self.param_groups]
        first = {str(k): self.first_steps[id(p)] for k, (_, p) in enumerate(self.params()) if id(p) in self.first_steps}
        return {"arrays": arrays, "steps": self.steps, "param_groups": groups, "optimizer": type(self).__name__,
                "first_steps": first}

    def load_state_dict(self, sd: dict) -> None:
        """Restore hyperparameters, step count and per-parameter state; nothing changes unless all of
        it loads (see ``prepare_load``)."""
        self.prepare_load(sd)()

    def prepare_load(self, sd: dict):
        """``load_state_dict``'s checks and conversions, changing nothing; returns ``apply()``. The
        groups must match in number and size, and the arrays one to one (named by parameter)."""
        name = f"{type(self).__name__}.load_state_dict"
        self._check_format(name, sd)
        saved_by = sd.get("optimizer")  # absent in state saved before it was recorded
        if saved_by is not None and saved_by != type(self).__name__:
            raise ValueError(f"{name}: the state was saved by {saved_by}, and this optimizer is "
                             f"{type(self).__name__}; resume with a {saved_by} (or load only the model)")
        saved_groups = sd["param_groups"]
        if not isinstance(saved_groups, list) or not all(isinstance(g, dict) for g in saved_groups):
            raise ValueError(f"{name}: param_groups must be a list of dicts, got {saved_groups!r}")
        steps = sd["steps"]
        if not isinstance(steps, numbers.Integral) or isinstance(steps, bool) or steps < 0:
            raise ValueError(f"{name}: steps must be a non-negative int, got {steps!r}")
        steps = int(steps)
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}: {len(saved_groups)} groups in the checkpoint, {len(self.param_groups)} here")
        loaded = []  # each group's hyperparameters as they will be, checked as the constructor checks them
        for i, (g, saved) in enumerate(zip(self.param_groups, saved_groups)):
            n = saved.get("param_count", len(g["params"]))  # older checkpoints did not record it
            if n != len(g["params"]):
                raise ValueError(f"{name}: group {i} has {n} parameters in the checkpoint, {len(g['params'])} here")
            own = sorted(k for k in saved if k in ("params", "_scalars"))
            if own:
                raise ValueError(f"{name}: group {i}: the checkpoint sets {own[0]!r}, which is this optimizer's own "
                                 f"(a checkpoint holds hyperparameters and param_count)")
            foreign = sorted(str(k) for k in saved if k not in g and k in _optimizer_options())
            if foreign:  # (another optimizer's option, e.g. decoupled_weight_decay in an SGD group, would switch a
                # code path on, silently; other keys load as saved: a scheduler's initial_lr, the user's own)
                raise ValueError(f"{name}: group {i}: the checkpoint sets {', '.join(map(repr, foreign))}, an option "
                                 f"this {type(self).__name__} does not have")
            self._check_types(name, i, g, saved)
            new = {k: (tuple(v) if isinstance(v, list) and isinstance(g.get(k), tuple) else v)  # (betas)
                   for k, v in saved.items() if k != "param_count"}
            checked = {**g, **new}
            lr = checked.get("lr")
            if isinstance(lr, numbers.Real) and not isinstance(lr, bool) and math.isfinite(lr) and lr < 0:
                # a scheduler may have set it below 0 (OneCycleLR's linear anneal ends there, as torch's):
                # any finite lr loads; the constructor's lr >= 0 is about what a user asks for
                checked["lr"] = 0.0
            try:
                self._validate(checked)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{name}: group {i}: {e}") from None
            self._check_same_structure(name, i, g, new)
            loaded.append(new)
        arrays, values, wanted = sd["arrays"], [], set()
        for k, (_, p) in enumerate(self.params()):
            for n, st in self.state_for(p).items():
                key = f"state.{k}.{n}"
                wanted.add(key)
                if key not in arrays:
                    raise ValueError(f"{name}: missing {key} ({p.describe()})")
                try:
                    values.append((st, st.prepared(arrays[key])))
                except ValueError as e:
                    raise ValueError(f"{name}: {key}: {e}") from None
        extra = sorted(set(arrays) - wanted)
        if extra:
            raise ValueError(f"{name}: the checkpoint has state this optimizer does not: {', '.join(extra)}")
        first = self._first_steps(name, sd, steps)

        def apply():
            with interrupts_deferred():  # all of it or, interrupted before it starts, none
                for g, new in zip(self.param_groups, loaded):
                    g.update(new)
                self.steps = steps
                if first != self.first_steps:
                    self.first_steps = first
                    self.first_steps_loaded += 1
                for st, v in values:
                    np.copyto(st.data, v, casting="unsafe")

        return apply

    @staticmethod
    def _check_format(name: str, sd) -> None:
        """``sd`` must be a state dict of this library's optimizers: a dict with ``arrays``, ``steps`` and
        ``param_groups`` (``Optimizer.state_dict()``). torch's ``optimizer.state_dict()`` (``state`` by
        parameter index, with per-parameter ``step`` tensors) is another layout, refused by name rather
        than failing on its first missing key: its moments would map over one to one for most
        optimizers, but not SGD's unstarted buffers, NAdam's ``mu_product`` or torch's kernel flags,
        and a half-converted state would resume silently off torch's run."""
        if not isinstance(sd, dict):
            raise TypeError(f"{name}: expected a dict from Optimizer.state_dict(), got {type(sd).__name__}")
        if "state" in sd and "arrays" not in sd:
            raise ValueError(f"{name}: this is torch.optim's state_dict layout ('state' by parameter index, "
                             f"'param_groups' with parameter indices), which luminal's optimizers do not load; "
                             f"they load their own state_dict() (keys 'arrays', 'steps', 'param_groups', "
                             f"'optimizer', 'first_steps'), as train.save_checkpoint writes it. Start from the "
                             f"model's weights (model.load_state_dict) with a fresh optimizer")
        missing = [k for k in ("arrays", "steps", "param_groups") if k not in sd]
        if missing:
            raise ValueError(f"{name}: the state has no {', '.join(map(repr, missing))}; expected a dict from "
                             f"Optimizer.state_dict() (keys 'arrays', 'steps', 'param_groups', 'optimizer', "
                             f"'first_steps'), got keys {sorted(map(str, sd))}")

    def _first_steps(self, name: str, sd: dict, steps: int) -> dict[int, int]:
        """``first_steps`` of a state dict (parameter index -> step count, each in [0, steps]) by id of
        this optimizer's parameters. A state saved before it was recorded: every parameter from step 0."""
        params = [p for _, p in self.params()]
        saved = sd.get("first_steps")
        if saved is None:
            return {id(p): 0 for p in params} if steps else {}
        if not isinstance(saved, dict):
            raise ValueError(f"{name}: first_steps must be a dict, got {type(saved).__name__}")
        out = {}
        for k, v in saved.items():
            if not (isinstance(k, str) and k.isdigit() and int(k) < len(params)):
                raise ValueError(f"{name}: first_steps: {k!r} is not a parameter index (0..{len(params) - 1})")
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not 0 <= v <= steps:
                raise ValueError(f"{name}: first_steps[{k}] must be an int in [0, {steps}], got {v!r}")
            out[id(params[int(k)])] = int(v)
        return out

    @staticmethod
    def _check_types(name: str, i: int, group: dict, saved: dict) -> None:
        """Each saved hyperparameter must be of the kind this optimizer holds under that name (a
        number, a flag, a tuple of numbers): an edited or foreign checkpoint fails here, naming the
        key, not later as a TypeError inside the update's arithmetic."""
        def number(x):
            return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))

        for k, v in saved.items():
            if k not in group or k in ("params", "_scalars"):
                continue
            mine = group[k]
            if isinstance(mine, bool):
                ok, want = isinstance(v, bool), "true or false"
            elif number(mine):
                ok, want = number(v), "a number"
            elif isinstance(mine, tuple) and all(number(x) for x in mine):
                ok = isinstance(v, (list, tuple)) and len(v) == len(mine) and all(number(x) for x in v)
                want = f"a list of {len(mine)} numbers"
            else:
                continue  # a value of the user's own (a group's "name", ...): loaded as saved
            if not ok:
                raise ValueError(f"{name}: group {i}: hyperparameter {k!r} is {v!r} in the checkpoint; "
                                 f"expected {want}")

    def _check_same_structure(self, name: str, i: int, group: dict, new: dict) -> None:
        """A checkpoint may change a group's numbers (lr, betas, ...: runtime scalars of the compiled
        update) but not what the update computes: its flags (amsgrad, nesterov, maximize, ...) and which
        terms it has (weight decay on or off, momentum or none). A compiled step would keep computing
        the old update, so such a checkpoint is refused; build the optimizer with its options. ``new``:
        the checkpoint's hyperparameters of the group (tuples as tuples)."""
        for k, v in group.items():
            if isinstance(v, bool) and k in new and new[k] != v:
                raise ValueError(f"{name}: group {i}: option {k!r} is {new[k]} in the checkpoint, {v} here; "
                                 f"build the optimizer with the checkpoint's options")
        before, after = set(self.scalars(group, 1)), set(self.scalars({**group, **new}, 1))
        if before != after:
            raise ValueError(f"{name}: group {i}: the checkpoint's hyperparameters change the update's terms "
                             f"({sorted(before ^ after)}); build the optimizer with the checkpoint's options")

    @staticmethod
    def descent_grad(p, g, s: dict, group: dict):
        """The gradient an update follows, as torch's optimizers form it: negated under ``maximize``,
        plus the coupled L2 term ``weight_decay * p`` (not for decoupled decay, which is AdamW's)."""
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0 and not group.get("decoupled_weight_decay", False):
            g = g + p * s["weight_decay"]
        return g

    # eager-PyTorch habits: an error naming the lazy way (frontend/eager.py) ---------------------------
    def zero_grad(self, set_to_none: bool = True) -> NoReturn:
        """torch's ``opt.zero_grad()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`. No gradient
        is kept between steps here: ``train.compile_step`` computes them afresh on every call (and averages
        ``accumulate`` calls' gradients when asked), so there is nothing to zero.

        Args:
            set_to_none: accepted for torch's signature.
        """
        raise eager_only(f"{type(self).__name__}.zero_grad", "luminal keeps no gradients between steps, so there "
                         "is nothing to zero: " + TRAIN_STEP + " (accumulate=k averages k calls' gradients)")

    def step(self, closure=None) -> NoReturn:
        """torch's ``opt.step()``; raises :class:`~luminal.frontend.eager.EagerOnlyError`. The update is
        graph ops compiled into the train step (``train.compile_step(loss, optimizer)``), which applies
        it on every call.

        Args:
            closure: accepted for torch's signature.
        """
        raise eager_only(f"{type(self).__name__}.step", "the update is part of the compiled train step: "
                         + TRAIN_STEP)

    # what subclasses write --------------------------------------------------------------------
    def scalars(self, group: dict, t: int) -> dict[str, float]:
        """Every number the update of ``group`` reads at step ``t``: hyperparameters and host-computed
        values (bias corrections). They reach the graph as 0-d runtime inputs, so changing
        ``group["lr"]`` never recompiles. Each optimizer implements it.

        Args:
            group: the param group.
            t: the step, 1-based.

        Returns:
            A dict name -> float, the keys ``update`` reads from ``s``.
        """
        raise NotImplementedError

    def update(self, p, g, state: dict, s: dict, group: dict):
        """The update of one parameter, as graph ops (torch's ``_single_tensor_*`` algorithm). Each
        optimizer implements it.

        Args:
            p: the parameter's tensor.
            g: its gradient.
            state: its state tensors by name (``state_names``).
            s: the scalar tensors, with the keys of ``scalars``.
            group: the param group (a dict), for choices fixed when the graph is built.

        Returns:
            ``(new_p, new_state)``: the updated parameter and state tensors.
        """
        raise NotImplementedError

    def __repr__(self):
        hp = {k: v for k, v in self.defaults.items()}
        return f"{type(self).__name__}({hp})"
