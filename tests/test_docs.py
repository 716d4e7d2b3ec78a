"""The README and the architecture doc name files of this repository; each must exist, so the docs
cannot silently point at code that moved (or, as once, at a file outside the repository)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "docs/architecture.md"]
TOP = ("luminal/", "tests/", "bench/", "examples/", "docs/", "../")


def _paths(text: str) -> list[str]:
    """Backticked tokens that are paths: at a top-level folder (or ``..``), or any ``a/b`` of plain
    names (read as inside ``luminal/``, where a short path like ``compiler/pipeline.py`` would be)."""
    tokens = re.findall(r"`([^`\s]+)`", text)
    return sorted({t for t in tokens if t.startswith(TOP) or re.fullmatch(r"[\w.-]+(/[\w.-]+)+/?", t)})


def _exists(p: str) -> bool:
    return not p.startswith("../") and ((ROOT / p).exists() or (ROOT / "luminal" / p).exists())


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc):
    text = (ROOT / doc).read_text()
    paths = _paths(text)
    assert paths, f"{doc} names no paths: the pattern is wrong"
    missing = [p for p in paths if not _exists(p)]
    assert not missing, f"{doc} names paths that are not in the repository: {missing}"


def test_the_readme_links_the_architecture_doc():
    assert "docs/architecture.md" in (ROOT / "README.md").read_text()
