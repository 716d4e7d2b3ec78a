"""The docs site (``mkdocs.yml``, ``docs/``): the Python examples of the guide pages run as written,
the paths the pages name exist, and the site, API reference included, builds with ``mkdocs build
--strict`` (every warning an error: a broken link, a docstring mkdocstrings cannot parse).

A guide page whose first line is ``<!-- runnable ... -->`` has its ```` ```python ```` blocks run in
order, in one namespace per page, from a temporary directory (or the repository root, ``AT_ROOT``). A block right after
a line ``<!-- not run: REASON -->`` is shown only (code of another library, a sketch that needs a
download). The build is skipped only when mkdocs or mkdocstrings is not installed
(``pip install -e ".[docs]"``; the test extra has them, so CI builds it)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_docs import _exists, _paths

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUNNABLE = "<!-- runnable"
NOT_RUN = re.compile(r"<!-- not run: (.+) -->")
# the guides whose examples must run (a page added to this list must carry the marker)
GUIDES = ["getting-started.md", "modules.md", "porting.md", "training.md", "report.md", "backends.md",
          "llama.md", "distributions.md", "autograd.md"]
# pages whose examples run from the repository root, as the page tells the reader to (they write no files)
AT_ROOT = {"llama.md"}


def _python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the first code line, code) of every ```python block not marked ``not run``."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            j = i + 1
            while lines[j].strip() != "```":
                j += 1
            prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            if not NOT_RUN.fullmatch(prev.strip()):
                out.append((i + 2, "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


def test_the_guides_are_marked_runnable_and_have_examples():
    for page in GUIDES:
        text = (DOCS / page).read_text()
        assert text.startswith(RUNNABLE), f"docs/{page} must start with the runnable marker"
        assert _python_blocks(text), f"docs/{page} has no python example to run"


def test_not_run_blocks_say_why():
    for page in DOCS.rglob("*.md"):
        for line in page.read_text().splitlines():
            if line.startswith("<!-- not run"):
                assert NOT_RUN.fullmatch(line.strip()), f"{page.name}: {line!r} gives no reason"


@pytest.mark.parametrize("page", GUIDES)
def test_guide_examples_run(page, tmp_path, monkeypatch):
    """Each block as a user would paste it, in order; the files a page writes go to ``tmp_path``.
    A failing block is reported at its line of the page."""
    monkeypatch.chdir(ROOT if page in AT_ROOT else tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # a page may extend it (the Llama example's folder)
    namespace: dict = {"__name__": f"docs_{page[:-3].replace('-', '_')}"}
    for line, code in _python_blocks((DOCS / page).read_text()):
        exec(compile("\n" * (line - 1) + code, f"docs/{page}", "exec"), namespace)  # noqa: S102


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_every_path_a_page_names_exists(page):
    missing = [p for p in _paths((DOCS / page).read_text()) if not _exists(p)]
    assert not missing, f"docs/{page} names paths that are not in the repository: {missing}"


def test_the_site_builds_strict(tmp_path):
    for mod in ("mkdocs", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (pip install -e '.[docs]'): the docs build is not checked")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}"
    print(f"mkdocs build --strict: {time.perf_counter() - t0:.1f} s")
    # the API reference was generated from the docstrings, not left as empty pages
    for page, names in {"luminal": ["luminal.compile", "luminal.Graph", "luminal.GraphTensor", "luminal.softmax"],
                        "nn": ["luminal.nn.Module", "luminal.nn.Linear", "luminal.nn.Parameter"],
                        "functional": ["luminal.nn.functional.layer_norm"],
                        "train": ["luminal.train.compile_step", "luminal.train.AdamW", "luminal.train.save_checkpoint"],
                        "linalg": ["luminal.linalg.vector_norm"]}.items():
        html = (tmp_path / "site" / "api" / page / "index.html").read_text()
        missing = [n for n in names if f'id="{n}"' not in html]
        assert not missing, f"api/{page}: no entry for {missing}"
