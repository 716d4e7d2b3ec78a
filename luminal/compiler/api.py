"""``lm.compile(outputs, backend=...)``: a callable that runs the graph on named numpy inputs."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Generic, TypeVar, overload

import numpy as np

from luminal.compiler.memory import plan_memory
from luminal.compiler.pipeline import compile_graph
from luminal.core.backend import backend_names, get_backend
from luminal.core.errors import op_error, user_frame, where
from luminal.core.symbolic import evaluate, free_vars_in, nonnegative, shape_str, view_vars
from luminal.core.walk import postorder
from luminal.frontend.binding import as_is, bind, convert
from luminal.frontend.checks import got
from luminal.frontend.graph import INDEX_OPS
from luminal.frontend.state import State
from luminal.frontend.tensor import GraphTensor


def _dims_used(nodes, outputs) -> set[str]:
    """Every symbolic dim name the computation of ``nodes`` (and reading ``outputs``) depends on."""
    used = set().union(*(view_vars(t.layout) for t in outputs))
    for n in nodes:
        used |= free_vars_in((n.shape, getattr(n.arg, "scalar", n.arg)))
        for _, v in n.srcs:
            used |= view_vars(v)
    return used


def _dim_checks(nodes, outputs, graph) -> dict:
    """{dim expression: (what has it: an op name, or a message; its shape)} for every symbolic dim of
    the program (``nodes``, ``outputs``) that some binding could make negative (``L-2``: not ``S`` or
    ``2*B+1``), the graph's requirements on the views it reads (``unfold`` over a symbolic dim) and on
    the nodes it computes (``max`` over one, an int index into one: ``graph.node_requirements``, whose
    entries may name the error to raise).
    Checked once per binding, so that such a binding is an error naming the dim, not a failure deep in a
    backend or a silently empty result. Each distinct shape tuple is looked at once (the nodes keep
    them alive, so their ids stay theirs)."""
    out: dict = {}
    shapes: set = set()

    def look(shape, op):
        shapes.add(id(shape))
        for d in shape:
            if type(d) is not int and d not in out and not nonnegative(d):
                out[d] = (op, shape)

    for n in nodes:
        if id(n.shape) not in shapes:
            look(n.shape, n.op)
        for _, v in n.srcs:
            if id(v.shape) not in shapes:
                look(v.shape, n.op)
    for t in outputs:
        look(t.shape, "output")
    for n in nodes:
        for need, what, *error in graph.node_requirements.get(n.id, ()):
            out.setdefault(need, (what, None, *error))
    reqs = graph.requirements
    if reqs:  # (node id, two dims of a view of it) -> requirement
        views = [(s, v.shape) for n in nodes for s, v in n.srcs] + [(t.node, t.shape) for t in outputs]
        for node, shape in views:
            for d in shape:
                for e in shape:
                    need = reqs.get((node.id, d, e))
                    if need is not None and need[0] not in out:
                        out[need[0]] = (need[1], None)
    return out


# Signatures a compiled callable remembers (``Compiled._signatures``); past this the oldest is dropped.
# A program whose symbolic dims take many values (a growing sequence) stays bounded; each entry is a few
# small tuples and dicts.
MAX_SIGNATURES = 256


class _Seen:
    """A call's signature (``Compiled.__call__``) whose binding passed every check, and what its calls reuse: the
    inputs that ``convert`` redoes on every call (their values matter: an int64 array's range, a
    bfloat16 rounding, a copy of a strided array), the dim binding, and the shapes of the random draws
    and of the outputs (checked against the program's at the signature's first call)."""

    __slots__ = ("redo", "env", "draws", "wants", "plain")

    def __init__(self, redo, env, draws, wants, plain=False):
        self.redo, self.env, self.draws, self.wants = redo, env, draws, wants
        # nothing to do around the program's call but the call: no input to convert, no random draw, no
        # state to hand in or update to write back, no guard (``Compiled.__call__`` then calls the
        # backend's program directly: about a microsecond of a few-microsecond call)
        self.plain = plain


Result = TypeVar("Result", covariant=True)  # what a call returns: an array, or a tuple of them


class Compiled(Generic[Result]):
    """A compiled graph. Call it with inputs as keyword arguments; get one array per output: a bare
    array when ``compile`` was given a single GraphTensor, a tuple (of one array too) when it was given
    a sequence, so ``(y,) = lm.compile([y])(...)`` and ``a, b = lm.compile([a, b])(...)`` read alike
    (``Compiled[np.ndarray]`` and ``Compiled[tuple[np.ndarray, ...]]`` to a type checker: ``compile``'s
    overloads say which).
    Safe to call from several threads: calls run one at a time. Every input is checked, and every symbolic
    dim bound, before any work is done. States the graph reads are taken from their ``.data``;
    ``updates`` (the graph's own ``assign``s plus those given to ``compile``) are written back into
    the States after the run, all reads having seen the values from before it."""

    def __init__(self, outputs, backend: str, updates=None, *, search=0, seed=0, budget=None, _guards=True,
                 single: bool = False):
        self.graph = g = outputs[0].graph
        self.backend = backend
        impl = get_backend(backend)
        self.updates = list({**g.updates, **(updates or {})}.items()) if _guards else []
        every = outputs + [t for _, t in self.updates]
        self._n_out = len(outputs)
        self._single = single  # compile(t) of one tensor: the array itself; compile([...]): a tuple
        self._out_shapes = [t.shape for t in outputs]
        if impl.level == "graph":
            self.runner, self._report = impl.interpret([(t.node, t.layout) for t in every], g.constants), None
            order = self.runner.order
            program_nodes = lambda: order  # noqa: E731
            inputs = [n for n in order if n.op == "Input"]
            self._dims = _dims_used(order, outputs)
            self._nodes = len(order)
        else:
            ups = [(_state_name(g, st), t.node, t.layout) for st, t in self.updates]
            timer = None
            if search and impl.can_time():
                timer = lambda kg: impl.time(kg, plan_memory(kg))  # noqa: E731
            kg, plan, self._report, live = compile_graph(g, [(t.node, t.layout) for t in outputs], ups,
                                                          search=search, seed=seed, budget=budget, timer=timer,
                                                          on_miss=lambda: impl.expect_code(len(g.nodes)))
            program_nodes = live.nodes
            leaves = [*g.inputs.values(), *g.states_nodes(), *g.random.values()]
            inputs = sorted((n for n in leaves if live.reads(n)), key=lambda n: n.id)
            self.runner = _Reporting(impl.program(kg, plan, search=search), self._report)
            self.runner.noted()
            self._dims = set(kg.dims)  # the program's, the outputs' views included
            self._nodes = self._report.nodes_before
        self._program_nodes, self._every = program_nodes, every  # () -> the nodes the program reads
        self._checks: dict | None = None  # ``_dim_checks``, made on the first call (a pass over the nodes)
        self._checked: set = set()  # bindings that passed them
        self._signatures: dict = {}  # a call's signature -> _Seen, for calls whose inputs passed every check
        self._user = [n for n in inputs if n.arg in g.inputs]
        self._states = [(n.arg, g.states[n.arg]) for n in inputs if n.arg in g.states]
        # a program that keeps States on a device takes the States themselves, and returns None for an
        # update it applied there (``core/backend.py``)
        self._takes_states = bool(getattr(getattr(self.runner, "program", None), "takes_states", False))
        self._random = [n for n in inputs if n.arg in g.random]
        self._guard = _Guard(g, {n.arg for n in inputs}, every, backend) if _guards and g.guards else None
        # Calls from several threads run one at a time: a backend's program keeps its buffers between
        # calls (allocated once per binding), states are read and written back around a run, and the
        # graph's generator draws the random inputs. An uncontended acquire costs well under a
        # microsecond (bench/call_overhead.py measures it), against several microseconds per call.
        self._lock = threading.Lock()
        # A program without symbolic dims whose call needs nothing but the program's call (``_Seen.plain``)
        # may offer ``run_exact``: a call of the same arrays' names, shapes, dtypes and contiguity
        # (which it checks itself, returning None otherwise) without the signature's look-up. Set at
        # the first such call.
        self._exact = None
    def report(self, show: bool = True, code: bool = False):
        """What the compiler did (see ``compile/report.py``); printed unless ``show=False``.

        Args:
            show: print it.
            code: also print the generated code of a backend that generates code (each kernel's IR,
                the shape its lowering chose among which alternatives, and what its compiler
                reported, such as a GPU kernel's registers and spills).
        """
        from luminal.compiler.report import Report

        r = self._report or Report(self._nodes, self._nodes, {}, {}, [], [], None, {})
        if show:
            note = "" if self._report else "\n  (backend 'reference' interprets the graph op by op: nothing compiled)"
            print(f"{r}{note}")
            describe = getattr(getattr(self.runner, "program", None), "describe", None)
            if code and describe is not None:
                print(describe())
        return r

    def prepare(self, **shapes) -> None:
        """Generate the program's code now for inputs of the given shapes, so that the first call with
        them runs at once and ``report()`` counts the work (a backend that generates code per binding of
        the symbolic dims does it at the first call of each binding otherwise).

        Args:
            **shapes: every input's shape, by name (a tuple of ints, or an array of that shape).
        """
        arrays = {}
        for name, shape in shapes.items():
            node = self.graph.inputs.get(name)
            if node is None:
                raise ValueError(f"prepare: {name!r} is not an input of the graph (inputs: {self.input_names})")
            shape = np.shape(shape) if isinstance(shape, np.ndarray) else shape
            if not isinstance(shape, (tuple, list)) or not all(isinstance(n, (int, np.integer)) and n >= 0
                                                              for n in shape):
                raise ValueError(f"prepare: the shape of {name!r} must be a tuple of non-negative ints, got {shape!r}")
            arrays[name] = np.zeros(tuple(int(n) for n in shape), node.dtype.np)
        _, seen = self._bind(arrays, None)
        prepare = getattr(self.runner, "prepare", None)
        if prepare is None:  # (the reference backend interprets the graph: nothing to generate)
            return
        with self._lock:
            prepare(seen.env)
            if self._guard is not None and self._guard.program is not None:
                self._guard.program.prepare(seen.env)

    def layouts(self) -> list:
        """The layouts the backend timed on this machine for the program's bindings (the cpu backend's
        ``CpuProgram.layouts``), which a checkpoint keeps so that a resumed run lays them out alike;
        [] for a backend that times none."""
        layouts = getattr(getattr(self.runner, "program", None), "layouts", None)
        return layouts() if layouts is not None else []

    def prepare_layouts(self, entries: list):
        """Check :meth:`layouts`' ``entries`` (ValueError) and return ``apply()``, which lays the program's
        bindings out so from their next call; a backend that times no layouts has nothing to apply."""
        prepare = getattr(getattr(self.runner, "program", None), "prepare_layouts", None)
        return prepare(entries) if prepare is not None else (lambda: None)

    @property
    def input_names(self) -> list[str]:
        return [n.arg for n in self._user]

    def __call__(self, /, *args, **inputs) -> Result:  # positional-only self: an input may be named "self"
        if args:
            raise TypeError(f"compiled graph: give inputs by name ({', '.join(self.input_names) or 'none'}), "
                            f"got {len(args)} positional argument(s)")
        results: Any
        try:
            exact = self._exact
            if exact is not None:
                lock = self._lock
                lock.acquire()  # (not ``with``: its __enter__/__exit__ look-ups cost 80 ns of a 3 us call)
                try:
                    results = exact(inputs)
                finally:
                    lock.release()
                if results is not None:
                    return results[0] if self._single else tuple(results[:self._n_out])
            # The call's signature: what every check of its inputs depends on, when all of them are plain
            # numpy arrays: per keyword, in the order given, (name, shape, dtype, C-contiguous). None when
            # some value is anything else (a Python number or list, a numpy scalar, an ndarray subclass):
            # such a call is bound anew. (In line: every call takes this path, and a function call costs
            # 80 ns of a 3 us call.)
            sig: Any = []
            for k, v in inputs.items():
                if type(v) is not np.ndarray:
                    sig = None
                    break
                sig.append((k, v.shape, v.dtype, v.flags.c_contiguous))
            else:
                sig = tuple(sig)
            seen = self._signatures.get(sig)  # (a None signature is never stored: it finds nothing)
            if seen is None:  # a new signature: every check, as ``bind`` and ``_dim_checks`` make them
                try:
                    arrays, seen = self._bind(inputs, sig)
                except (ValueError, TypeError) as e:
                    raise _called_at(e) from e.__cause__
                with self._lock:  # one run at a time: the program's buffers, the states and the rng are shared
                    if sig is not None:  # under the lock: the oldest is dropped while no one else adds
                        if len(self._signatures) >= MAX_SIGNATURES:
                            del self._signatures[next(iter(self._signatures))]
                        self._signatures[sig] = seen
                    results = self._run(arrays, seen, True)
            else:  # the same names, shapes, dtypes and contiguity as a call that passed every check
                # ``inputs`` (a dict of this call's own) becomes the arrays the program is handed: it has
                # the names ``bind`` read (every name given is a graph input, or ``bind`` refuses the call)
                try:
                    for n, node in seen.redo:
                        inputs[n] = convert(n, inputs[n], node)
                except (ValueError, TypeError) as e:
                    raise _called_at(e) from e.__cause__
                lock = self._lock
                lock.acquire()  # (not ``with``: its __enter__/__exit__ look-ups cost 80 ns of a 3 us call)
                try:
                    runner = self.runner
                    if seen.plain and seen.env is runner._env:  # (the report has this binding already)
                        results = runner.program(inputs, seen.env)
                        if not self._dims:
                            self._exact = getattr(runner.program, "run_exact", None)
                    else:
                        results = self._run(inputs, seen, False)
                finally:
                    lock.release()
            # (``results`` is Any, not cast to Result: ``typing.cast`` is a call, 70 ns of a 3 us call)
            return results[0] if self._single else tuple(results[:self._n_out])
        except IndexError as e:  # (a run's index out of range: say which op and line made it)
            if getattr(e, "luminal_op", None) is not None:  # a guard's: it names its op already
                raise
            located = self._index_error(inputs)
            if located is None:
                raise
            raise located from e

    def _index_error(self, inputs: dict) -> IndexError | None:
        """After a run failed with an IndexError: the error naming the op or layer whose gather or
        scatter_add read an index out of range, and the user's line that made it (``Graph.index_ops``),
        found by evaluating those ops' indices (the reference interpreter, on this call's inputs and
        states); None when none is out of range here (the run's own error stands). (An int index past a
        symbolic dim's size never gets this far: its requirement is checked before any work.)"""
        g = self.graph
        nodes = [n for n in self._program_nodes() if n.id in g.index_ops] if g.index_ops else []
        if not nodes:
            return None
        try:
            given = {k: v for k, v in inputs.items() if k in g.inputs}
            arrays, env = bind(g, [g.inputs[k] for k in given], given)
        except Exception:  # noqa: BLE001 - (the run's own error stands)
            return None
        for name, s in self._states:
            arrays[name] = s.data
        interpret = get_backend("reference").interpret
        for n in nodes:  # (in graph order: an index computed by an earlier gather is evaluated after it)
            made, origin, *given_by = g.index_ops[n.id]
            # the user's indices when the primitive's is made from them (wrapped, combined: Graph.index_ops)
            indices = given_by[0] if given_by else [(n.srcs[1], n.srcs[0][1].shape[n.arg], False, None)]
            try:
                values = interpret([src for src, *_ in indices], g.constants)(arrays, env)
            except Exception:  # noqa: BLE001 - (an index drawn at random, or read through a gather that failed)
                continue
            for idx, (_, n_dim, wraps, dim) in zip(values, indices):
                size = evaluate(n_dim, env)
                out = (idx < (-size if wraps else 0)) | (idx >= size)
                if out.any():
                    inner = "" if made == INDEX_OPS[n.op] else f"its {INDEX_OPS[n.op]}, "
                    of = "a dim" if dim is None else f"dim {dim}"
                    return op_error(IndexError, made, f"index {idx[out].flat[0]} is out of range for {of} of size "
                                    f"{size} ({inner}made at {where(origin)})")
        return None

    def _run(self, arrays: dict, seen: _Seen, check: bool) -> list:
        """Run the program on ``arrays`` (the inputs by name) with the states and the random draws added,
        and write the updates back into the states; the results (outputs first). ``check``: compare the
        outputs' shapes with the binding's (a new signature's first call: a backend returns the same
        shapes for every call of a binding). Called under the lock."""
        env = seen.env
        for name, s in self._states:
            arrays[name] = s if self._takes_states else s.data
        rng = self.graph.rng
        saved = drawn = rng.bit_generator.state if seen.draws else None  # (a refused call draws nothing either)
        try:
            for name, shape in seen.draws:
                arrays[name] = rng.random(shape, dtype="float32")
            if saved is not None:
                drawn = rng.bit_generator.state
            if self._guard is not None:
                self._guard(arrays, env)
            results = self.runner(arrays, env)
        except BaseException:
            # the next call's dropout masks are those it would have drawn; unless another program of the
            # graph (on another thread: each has its own lock) drew since, whose draws must stand
            if saved is not None and rng.bit_generator.state == drawn:
                rng.bit_generator.state = saved
            raise
        if check:
            for i, (o, want) in enumerate(zip(results[:self._n_out], seen.wants, strict=True)):
                if o.shape != want:
                    raise RuntimeError(f"backend {self.backend!r} returned shape {o.shape} for output {i}, "
                                       f"expected {shape_str(self._out_shapes[i])} = {want}")
        if self.updates:
            for (s, _), value in zip(self.updates, results[self._n_out:], strict=True):
                if value is not None:
                    np.copyto(s.data, value)
        return results

    def _bind(self, inputs: dict, sig) -> tuple[dict, _Seen]:
        """Check a call's inputs and bind the symbolic dims (``bind``), then check the binding against
        the program's dims (``_dim_checks``, once per binding); the arrays, and what later calls of
        the same signature ``sig`` reuse (a ``_Seen``; remembered by the caller, under the lock)."""
        given = [self.graph.inputs[k] for k in inputs if k in self.graph.inputs]
        extra = [n for n in given if n not in self._user]  # unread, but may bind dims
        needed = self._user + extra
        arrays, env = bind(self.graph, needed, inputs)
        unbound = sorted(self._dims - env.keys())
        if unbound:
            raise ValueError(f"symbolic dim(s) {unbound} are used by the graph but no input's shape "
                             f"determines them")
        key = tuple(sorted(env.items()))
        if key not in self._checked:
            if self._checks is None:
                self._checks = _dim_checks(self._program_nodes(), self._every, self.graph)
            for d, (what, shape, *error) in self._checks.items():
                if free_vars_in(d) <= env.keys() and evaluate(d, env) < 0:
                    bound = ", ".join(f"{k}={v}" for k, v in key)
                    if error:  # (an index or an empty extremum, as torch's IndexError: the op says it all)
                        raise error[0](f"{what}, with {bound}")
                    where = what if shape is None else f"a shape {shape_str(shape)} in the program ({what})"
                    raise ValueError(f"symbolic dim {d} is {evaluate(d, env)} with {bound}: {where}")
            self._checked.add(key)
        # an input handed on as it is only if ``convert`` returned it itself and says no number in it matters
        redo = [(n.arg, n) for n in needed if not (arrays[n.arg] is inputs[n.arg] and as_is(inputs[n.arg], n))]
        draws = [(n.arg, tuple(evaluate(d, env) for d in n.shape)) for n in self._random]
        wants = [tuple(evaluate(d, env) for d in shape) for shape in self._out_shapes]
        plain = not redo and not draws and not self._states and self._guard is None and not self.updates \
            and isinstance(self.runner, _Reporting)
        return arrays, _Seen(redo, env, draws, wants, plain)

    def __repr__(self):
        # nn modules record the train/eval mode they were called in (``graph.nn_modes``): fixed at build time
        modes = sorted(getattr(self.graph, "nn_modes", {}))
        mode = "" if not modes else ", mode=" + ("'mixed'" if len(modes) > 1 else "'train'" if modes[0] else "'eval'")
        return f"Compiled(backend={self.backend!r}, inputs={self.input_names}{mode})"


def _called_at(e: Exception) -> Exception:
    """A data error of a call (an input's shape, dtype or values) with the user's line that made the
    call: where the mistake is, not where the program was compiled."""
    if e.args and isinstance(e.args[0], str) and "\n  called at " not in e.args[0]:
        e.args = (f"{e.args[0]}\n  called at {where(user_frame())}", *e.args[1:])
    return e


@overload
def compile(outputs: GraphTensor, backend: str = "cpu", updates: dict | None = None, *,  # noqa: A001
            search: int = 0, seed: int = 0, budget=None, shapes: dict | None = None) -> Compiled[np.ndarray]: ...


@overload
def compile(outputs: Sequence[GraphTensor], backend: str = "cpu", updates: dict | None = None, *,  # noqa: A001
            search: int = 0, seed: int = 0, budget=None,
            shapes: dict | None = None) -> Compiled[tuple[np.ndarray, ...]]: ...


def compile(outputs, backend: str = "cpu", updates=None, *, search: int = 0, seed: int = 0,  # noqa: A001
            budget=None, shapes: dict | None = None) -> Compiled:
    """Compile ``outputs`` (a GraphTensor or a sequence of them, from one graph) for ``backend``.

    The result is called with the inputs by name. Given a single GraphTensor it returns that
    output's array; given a sequence (a list of one included) it returns a tuple of arrays, one per
    output, in order.

    ``updates``: ``{State: GraphTensor}`` written back after every run, in addition to the graph's
    own ``assign``s (see ``frontend/state.py``). ``search=N`` times up to N alternative programs the
    e-graph holds on this machine and keeps the fastest (default: the cost model's choice alone), and
    lets the backend time up to N of its own alternatives on each new binding's first call (the cpu
    backend's threads, vector width and layouts; ``report(code=True)`` shows what it timed);
    ``seed`` makes that search reproducible; ``budget`` (``luminal.compiler.egraph.Budget``) bounds
    the rewrite search. ``shapes`` (``{input name: shape}``): generate the code for inputs of these
    shapes now (``Compiled.prepare``), so the compile's time includes it and the first call only runs."""
    single = isinstance(outputs, GraphTensor)
    if single:
        outputs = [outputs]
    if isinstance(outputs, (str, bytes, State)) or not hasattr(outputs, "__iter__"):
        raise op_error(TypeError, "compile", f"expected a GraphTensor or a non-empty sequence of GraphTensors, "
                       f"got {got(outputs)}")
    outputs = list(outputs)
    if not outputs:
        raise op_error(TypeError, "compile", "expected a GraphTensor or a non-empty sequence of GraphTensors, "
                       "got an empty sequence")
    for i, t in enumerate(outputs):
        if not isinstance(t, GraphTensor):
            raise op_error(TypeError, "compile", f"output {i} must be a GraphTensor, got {got(t)}")
    if any(t.graph is not outputs[0].graph for t in outputs):
        raise ValueError("compile: all outputs must come from the same graph")
    if not isinstance(backend, str) or backend not in backend_names():
        raise ValueError(f"compile: unknown backend {backend!r}; available: {backend_names()}")
    if updates is not None and not isinstance(updates, dict):
        raise op_error(TypeError, "compile", f"updates must be a dict {{State: GraphTensor}}, got {got(updates)}")
    for st, t in (updates or {}).items():
        if not isinstance(st, State):
            raise op_error(TypeError, "compile", f"updates: a key must be a State (an nn.Parameter or nn.Buffer), "
                           f"got {got(st)}")
        if not isinstance(t, GraphTensor) or t.graph is not outputs[0].graph:
            raise ValueError(f"compile: the update for {st.describe()} is not a tensor of the outputs' graph")
        if tuple(t.shape) != tuple(st.shape):
            raise ValueError(f"compile: the update for {st.describe()} has shape {shape_str(t.shape)}")
    from luminal.frontend.ops import cast

    if not isinstance(search, int) or search < 0:
        raise ValueError(f"compile: search must be a non-negative int, got {search!r}")
    from luminal.compiler.egraph.budget import Budget

    if budget is not None and not isinstance(budget, Budget):  # a dict would fail deep in optimize
        raise TypeError(f"compile: budget must be a luminal.compiler.egraph.Budget (e.g. Budget(seconds=1)), "
                        f"got {type(budget).__name__}")
    if shapes is not None and not isinstance(shapes, dict):
        raise TypeError(f"compile: shapes must be a dict of input name -> shape, got {type(shapes).__name__}")
    compiled = Compiled(outputs, backend, {st: cast(t, st.dtype) for st, t in (updates or {}).items()},
                        search=search, seed=seed, budget=budget, single=single)
    if shapes:
        compiled.prepare(**shapes)
    return compiled


def _state_name(graph, st) -> str:
    node = graph.state_node(st)
    if node is None:  # updated but never read: give it a node so it has a name
        node = graph.state(st).node
    return node.arg


class _Guard:
    """The graph's guards (``Graph.guard``) whose inputs a program reads anyway, compiled as a small
    program of their own that runs before it on the same arrays (a guard reading an input the program
    does not read is left out: an eval program of a training graph needs no labels). It raises the
    first failed guard's error; the main program has not run and no state has changed.

    It runs on every call, not once per input signature: what it checks is the numbers in the inputs
    (class labels in range), which a call with the same shapes and dtypes may change, in a new array or
    in place. So its steady cost is kept down instead: the program evaluates only the ``failed`` flags
    (for a cross-entropy label check, two small kernels, about a quarter of the flags and the values
    together); the ``value`` each message shows is computed, on the same arrays, only when a flag is set,
    by a second program compiled at the first failure (an error path, where its compile does not matter,
    and a compile of the guarded program pays for the flags alone). A guard ``of`` a tensor is left out
    too when the program does not compute that tensor (``computed``: the nodes ``outputs`` depend on)."""

    def __init__(self, graph, reads: set, outputs, backend: str):
        computed = None
        if any(gd[4] is not None for gd in graph.guards):
            computed = {n.id for n in postorder([t.node for t in outputs], lambda n: [s for s, _ in n.srcs])}
        self.guards = [gd for gd in graph.guards if _inputs_read(gd[:2]) <= reads
                       and (gd[4] is None or gd[4].node.id in computed)]
        self.backend = backend
        flags = [failed for failed, *_ in self.guards]
        self.program = Compiled(flags, backend, _guards=False).runner if flags else None
        self._values = None  # the values' program, compiled at the first failed guard

    def __call__(self, arrays, env):
        if self.program is None:
            return
        failed = self.program(arrays, env)
        if not any(map(bool, failed)):
            return
        if self._values is None:
            self._values = Compiled([value for _, value, *_ in self.guards], self.backend, _guards=False).runner
        values = self._values(arrays, env)
        for (_, _, error, message, _), bad, value in zip(self.guards, failed, values, strict=True):
            if bool(bad):
                err = error(message.replace("{value}", str(value.item())))
                err.luminal_op = (None, message, ())  # (it names its op: ``Compiled`` passes it on as it is)
                raise err


def _inputs_read(tensors) -> set:
    """Names of the Input leaves (user inputs, states, random draws) that ``tensors`` depend on."""
    nodes = postorder([t.node for t in tensors], lambda n: [s for s, _ in n.srcs])
    return {n.arg for n in nodes if n.op == "Input"}


class _Reporting:
    """A backend's program that tells the report each new binding (its memory plan's sizes). Every call
    of a remembered signature hands on the one ``env`` dict its first call made (``_Seen.env``), which no
    one changes: when it is the dict of the call before, the comparison is skipped."""

    def __init__(self, program, report):
        self.program, self.report = program, report
        self._env = None

    def __call__(self, arrays, env):
        results = self.program(arrays, env)
        if env is not self._env:
            if self.report.memory.get("binding") != env:
                self.report.bind(env)
            self.noted()
            self._env = env
        return results

    def prepare(self, env: dict) -> None:
        """Lay the program out for ``env`` now, where the backend generates code per binding."""
        prepare = getattr(self.program, "prepare", None)
        if prepare is not None:
            prepare(env)
            self.noted()

    def noted(self) -> None:
        """Hand the backend's code generation numbers to the report."""
        codegen = getattr(self.program, "codegen", None)
        if codegen is not None:
            self.report.generated(codegen)
