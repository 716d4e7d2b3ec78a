"""``interrupts_deferred``: a real SIGINT inside the block is raised as KeyboardInterrupt when the
block ends (once, at the outermost of nested blocks); off the main thread, or under a handler of the
program's own, the block changes nothing."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from luminal.core.interrupts import interrupts_deferred


def _ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)


def test_the_interrupt_comes_after_the_block():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            _ctrl_c()
            done.append("after the signal")
    assert done == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_interrupt_no_exception():
    with interrupts_deferred():
        x = 1
    assert x == 1 and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_blocks_raise_once_at_the_outermost():
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            with interrupts_deferred():
                _ctrl_c()
                _ctrl_c()
            done.append("inner block ended without raising")
    assert done == ["inner block ended without raising"]


def test_a_handler_of_the_programs_own_is_left_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    try:
        with interrupts_deferred():
            _ctrl_c()
            assert seen == [signal.SIGINT]  # the program's handler ran at once
    finally:
        signal.signal(signal.SIGINT, previous)


def test_off_the_main_thread_nothing_changes():
    handlers = []

    def run():
        with interrupts_deferred():
            handlers.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert handlers == [signal.default_int_handler]


def test_an_interruptible_stretch_acts_at_once_and_the_block_defers_again_after_it():
    from luminal.core.interrupts import interruptible

    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            with interruptible():
                _ctrl_c()
                done.append("went on after the signal")
    assert done == []  # raised inside the stretch, at once
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            with interruptible():
                pass
            _ctrl_c()
            done.append("after the stretch: deferred again")
    assert done == ["after the stretch: deferred again"]


def test_an_interruptible_stretch_inside_a_users_block_stays_deferred():
    """A user's own block asked for all of it or none: a stretch nested in it changes nothing."""
    from luminal.core.interrupts import interruptible

    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            with interrupts_deferred():
                with interruptible():
                    _ctrl_c()
                    done.append("the stretch went on")
            done.append("the outer block went on")
    assert done == ["the stretch went on", "the outer block went on"]
