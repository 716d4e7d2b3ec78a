"""The shared check of the error tables (a list of ``(build, kind, parts)``): ``build()`` raises ``kind``
and the message holds every one of ``parts`` (the op's name, the shapes, what to do)."""

from __future__ import annotations

import pytest


def raises_naming(build, kind, parts) -> BaseException:
    """Run ``build``; it must raise ``kind`` whose message contains each of ``parts``. Returns the error."""
    with pytest.raises(kind) as e:
        build()
    for part in parts:
        assert part in str(e.value), f"{part!r} not in {e.value}"
    return e.value
