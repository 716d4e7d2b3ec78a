"""Ctrl-C held back until a group of writes is complete: an update is applied entirely or not at all.

Python raises KeyboardInterrupt between any two bytecodes of the main thread. A train step writes
the parameters, the optimizer's moments and its step count in several places (in place by generated
code, copied back by the compiled program's runner, counted by the step runner), and a load writes
tensor after tensor: an interrupt landing between two of those writes leaves some values at step
k + 1 and others at k, and saving after catching the KeyboardInterrupt (the notebook habit) writes
that mixed state to disk. Inside :class:`interrupts_deferred` a SIGINT is recorded instead, and
raised as KeyboardInterrupt when the block ends, after its writes.

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


class interrupts_deferred:
    """``with interrupts_deferred(): ...``: a Ctrl-C (SIGINT) during the block is raised as
    KeyboardInterrupt when the block ends (also when it ends by an exception, which becomes the
    interrupt's ``__context__``). A block blocks Ctrl-C for as long as it runs, so it should hold the
    writes and what must happen with them, not a long wait before them."""

    __slots__ = ("_previous", "_received")

    def __enter__(self):
        self._previous = None
        self._received = False
        if _signal.getsignal(SIGINT) is signal.default_int_handler and \
                threading.current_thread() is threading.main_thread():
            self._previous = _signal.signal(SIGINT, self._record)
        return self

    def _record(self, signum, frame):
        self._received = True

    def __exit__(self, *exc):
        if self._previous is not None:
            _signal.signal(SIGINT, self._previous)
            self._previous = None
            if self._received:
                raise KeyboardInterrupt
        return False
