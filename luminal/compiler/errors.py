"""Compiler errors name the stage that failed, so a user (or a bug report) knows where to look."""

from __future__ import annotations


class CompileError(RuntimeError):
    """A compile stage failed. ``stage`` is one of the pipeline's stage names (e.g. "egglog: run
    rulesets", "extract", "kernels"); the original exception is chained as ``__cause__``.
    egglog's Rust panics (``PanicException``, a ``BaseException``) are converted to this."""

    def __init__(self, stage: str, message: str):
        super().__init__(f"compile failed in stage {stage!r}: {message}")
        self.stage = stage
