"""Ctrl-C held back until a group of writes is complete: an update is applied entirely or not at all.

Python raises KeyboardInterrupt between any two bytecodes of the main thread. A train step writes
the parameters, the optimizer's moments and its step count in several places (in place by generated
code, copied back by the compiled program's runner, counted by the step runner), and a load writes
tensor after tensor: an interrupt landing between two of those writes leaves some values at step
k + 1 and others at k, and saving after catching the KeyboardInterrupt (the notebook habit) writes
that mixed state to disk. Inside :class:`interrupts_deferred` a SIGINT is recorded instead, and
raised as KeyboardInterrupt when the block ends, after its writes. A stretch of a block that writes
nothing but may take seconds (a new binding's code generation at a step's first call) is marked
:class:`interruptible`: a Ctrl-C there acts at once, so the user is never left waiting on a compile.

One mechanism for every such block (``TrainStep.__call__``, ``load_state_dict`` of modules,
optimizers, steps and scalers, ``load_checkpoint``): blocks nest, the outermost one raising. It
changes nothing off the main thread (where Python never raises KeyboardInterrupt) or when the
program has its own SIGINT handler (a handler that does not raise cannot cut a block short; one that
does is the program's choice to keep).
"""

from __future__ import annotations

# signal's C module: ``signal.signal`` and ``getsignal`` wrap it in enum conversions that cost more than
# all the rest (measured: a block 46 us with them, 4 us without; a train step pays it on every call)
import _signal
import signal
import threading

SIGINT = int(signal.SIGINT)
_depth = 0  # deferred blocks open on the main thread (nested ones included), for ``interruptible``
_installed: list = []  # the block whose recording handler is installed (at most one: the outermost)


class interrupts_deferred:
    """``with interrupts_deferred(): ...``: a Ctrl-C (SIGINT) during the block is raised as
    KeyboardInterrupt when the block ends (also when it ends by an exception, which becomes the
    interrupt's ``__context__``). A block blocks Ctrl-C for as long as it runs, so it should hold the
    writes and what must happen with them, not a long wait before them."""

    __slots__ = ("_previous", "_received")

    def __enter__(self):
        global _depth
        self._previous = None
        self._received = False
        if threading.current_thread() is threading.main_thread():
            # the recording handler first (and, at exit, restored last): a Ctrl-C meanwhile is recorded,
            # never raised with the bookkeeping half done (a stale ``_installed`` or ``_depth``)
            if _signal.getsignal(SIGINT) is signal.default_int_handler:
                self._previous = _signal.signal(SIGINT, self._record)
                _installed.append(self)
            _depth += 1
        return self

    def _record(self, signum, frame):
        self._received = True

    def __exit__(self, *exc):
        global _depth
        if threading.current_thread() is threading.main_thread():
            _depth -= 1
        if self._previous is not None:
            _installed.remove(self)
            previous, self._previous = self._previous, None
            _signal.signal(SIGINT, previous)
            if self._received:
                raise KeyboardInterrupt
        return False


class interruptible:
    """``with interruptible(): ...`` inside a deferred block: a stretch that writes nothing anyone
    sees (the code generation of a program's new binding at its first call, which can take seconds),
    where a Ctrl-C acts at once, as outside any block, instead of waiting for the block's end. Only
    when the block is alone (not nested in a user's own block, which asked for all of it or none)
    and nothing was recorded yet; anywhere else it changes nothing. So a long first step stays
    interruptible, and the writes after the stretch still come whole."""

    __slots__ = ("_block",)

    def __enter__(self):
        self._block = None
        if _depth == 1 and _installed and not _installed[0]._received and \
                threading.current_thread() is threading.main_thread():
            self._block = _installed[0]
            _signal.signal(SIGINT, signal.default_int_handler)
        return self

    def __exit__(self, *exc):
        if self._block is not None:
            _signal.signal(SIGINT, self._block._record)
            self._block = None
        return False
