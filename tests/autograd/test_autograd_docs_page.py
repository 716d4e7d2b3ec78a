"""docs/autograd.md's python blocks run in order, as a reader would paste them
(tests/test_docs_site.py's reading of the blocks)."""

from __future__ import annotations

from pathlib import Path

from test_docs_site import _python_blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "autograd.md"


def test_autograd_page_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "docs_autograd"}
    blocks = _python_blocks(PAGE.read_text())
    assert len(blocks) >= 2
    for line, code in blocks:
        exec(compile("\n" * (line - 1) + code, "docs/autograd.md", "exec"), namespace)  # noqa: S102
