"""notebooks/*.ipynb: generated from the docs pages, committed in sync, and runnable.

(a) The committed notebooks have exactly the cells (kinds and sources; outputs are not
    compared) that tinygrad_rnn.notebooks makes from the pages; when they do not, the failure
    says which notebook and the command that regenerates them. Needs only the package.
(b) The converter splits a page at the same Python blocks tests/docs/test_docs.py runs,
    follows docs/index.md's reading order, starts every notebook with the badge and the
    install-if-missing cell, and rewrites relative links for notebooks/.
(c) Every committed notebook runs top to bottom in a fresh kernel (nbclient, ipykernel) whose
    working directory is a temporary folder, and writes nothing into the repository. Skipped
    when nbformat, nbclient or ipykernel is missing: `pip install -e ".[notebooks]"` (CI's
    .ci/run installs the extra, so CI runs them).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import notebooks as nbs
from tinygrad_rnn.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FOLDER = ROOT / nbs.NOTEBOOK_FOLDER
EXPECTED = nbs.expected_cells(ROOT)
HOW = f'run `{nbs.REGENERATE_COMMAND}` (after `pip install -e ".[notebooks]"`)'


def _docs_test_module():
    """tests/docs/test_docs.py, imported under the name pytest gives it."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    return importlib.import_module("docs.test_docs")


# ----------------------------------------------------------------------------- (a) in sync
def test_committed_notebooks_match_the_pages() -> None:
    problems = nbs.check(ROOT)
    assert not problems, ("notebooks/ is out of date with docs/:\n  " + "\n  ".join(problems)
                          + f"\nTo regenerate them, {HOW}, and commit notebooks/.")


def test_check_names_a_stale_a_missing_and_an_extra_notebook(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Docs\n\n1. [A](a.md)\n2. [B](b.md)\n", encoding="utf-8")
    (docs / "a.md").write_text("# A\n\n```python\nx = 1\n```\n\nafter\n", encoding="utf-8")
    (docs / "b.md").write_text("# B\n\n```python\ny = 2\n```\n", encoding="utf-8")
    folder = tmp_path / "notebooks"
    folder.mkdir()

    def save(name: str, cells: list[nbs.Cell]) -> None:
        data = {"cells": [{"cell_type": c.kind, "source": c.source.splitlines(True),
                           "metadata": {}} for c in cells], "metadata": {},
                "nbformat": 4, "nbformat_minor": 5}
        (folder / name).write_text(json.dumps(data), encoding="utf-8")

    expected = nbs.expected_cells(tmp_path)
    assert list(expected) == ["a.ipynb", "b.ipynb"]
    for name, cells in expected.items():
        save(name, cells)
    (folder / "README.md").write_text(nbs.index_text(tmp_path), encoding="utf-8")
    assert nbs.check(tmp_path) == []

    (docs / "a.md").write_text("# A\n\n```python\nx = 10\n```\n\nafter\n", encoding="utf-8")
    (folder / "b.ipynb").unlink()
    save("old.ipynb", expected["a.ipynb"])
    problems = nbs.check(tmp_path)
    assert any(p.startswith("notebooks/a.ipynb differs") and "cell 3 (code)" in p
               for p in problems), problems
    assert "notebooks/b.ipynb is missing" in problems
    assert any(p.startswith("notebooks/old.ipynb has no page") for p in problems)


def test_cli_check_exits_1_with_the_command_when_out_of_date(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(nbs, "check", lambda root: ["notebooks/x.ipynb is missing"])
    assert main(["notebooks", "--check"]) == 1
    out = capsys.readouterr().out
    assert "notebooks/x.ipynb is missing" in out and nbs.REGENERATE_COMMAND in out
    assert main(["notebooks", "--check", "--execute"]) == 2
    assert main(["notebooks", "--pages", "no_such_page"]) == 2
    assert "no notebook is made from no_such_page" in capsys.readouterr().err


# ----------------------------------------------------------------------------- (b) converter
@pytest.mark.parametrize("page", [ROOT / "README.md"] + sorted(DOCS.glob("*.md")),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_code_cells_are_the_blocks_the_docs_test_runs(page: Path) -> None:
    docs_test = _docs_test_module()
    theirs = [(b.lang, b.source, b.line) for b in docs_test.python_blocks(page)]
    text = page.read_text(encoding="utf-8")
    ours = [(b.lang, b.source, b.line) for b in nbs.python_blocks(text)]
    assert ours == theirs
    code = [c.source + "\n" for c in nbs.page_cells(text) if c.kind == "code"]
    assert code == [source for _, source, _ in theirs]


def test_a_page_splits_into_prose_and_code_cells() -> None:
    text = ("# T\n\nintro\n\n```python\na = 1\n```\nmiddle\n```bash\nls\n```\n"
            "  ```py\n  b = 2\n  ```\n\n~~~python\nc = 3\n~~~\n")
    cells = nbs.page_cells(text)
    assert cells == [nbs.Cell("markdown", "# T\n\nintro"), nbs.Cell("code", "a = 1"),
                     nbs.Cell("markdown", "middle\n```bash\nls\n```"),
                     nbs.Cell("code", "b = 2"), nbs.Cell("code", "c = 3")]


def test_notebooks_follow_the_reading_order_of_the_index() -> None:
    pages = nbs.notebook_pages(DOCS)
    docs_test = _docs_test_module()
    index_links = [t.split("#")[0] for t in docs_test.links((DOCS / "index.md").read_text(
        "utf-8"))]
    listed = [t for t in dict.fromkeys(index_links) if t.endswith(".md") and "/" not in t]
    with_code = [name for name in listed if docs_test.python_blocks(DOCS / name)]
    assert [p.name for p in pages][:len(with_code)] == with_code
    assert [p.name for p in pages[len(with_code):]] == sorted(
        p.name for p in pages[len(with_code):])  # tutorial pages the index lacks, if any
    for page in DOCS.glob("tutorial_*.md"):
        assert page in pages, f"{page.name} has no notebook"
    assert list(EXPECTED) == [p.stem + ".ipynb" for p in pages]


def test_every_notebook_starts_with_the_badge_and_the_install_cell() -> None:
    assert EXPECTED, "no notebooks: the pages have no Python blocks?"
    for name, cells in EXPECTED.items():
        badge, install = cells[0], cells[1]
        assert badge.kind == "markdown" and "colab-badge.svg" in badge.source
        assert nbs.colab_url(name) in badge.source and name in nbs.colab_url(name)
        assert install.kind == "code" and "%pip install" in install.source
    url = nbs.colab_url("engine.ipynb")
    repo = nbs.REPO_URL.split("github.com/")[1]
    assert url == (f"https://colab.research.google.com/github/{repo}/blob/{nbs.BRANCH}/"
                   f"notebooks/engine.ipynb")


def test_install_cell_does_nothing_when_the_package_is_importable(
        capsys: pytest.CaptureFixture) -> None:
    source = nbs.header_cells(DOCS / "engine.md", "engine.ipynb")[1].source
    magic = [line for line in source.splitlines() if "%pip" in line]
    assert len(magic) == 1 and magic[0].startswith("    ")  # only under the guard
    # the magic as the notebook would run it, failing loudly if it were reached
    python = source.replace(magic[0].strip(), "raise AssertionError('would install')")
    tr.manual_seed(123)
    exec(compile(python, "install-cell", "exec"), {"__name__": "__main__"})
    assert f"tinygrad_rnn {tr.__version__}" in capsys.readouterr().out
    assert tr.randn(3).tolist() == (tr.manual_seed(0), tr.randn(3))[1].tolist()


def test_relative_links_are_rewritten_for_the_notebook_folder(tmp_path: Path) -> None:
    docs, folder = tmp_path / "docs", tmp_path / "notebooks"
    docs.mkdir()
    page = docs / "a.md"
    text = ("See [b](b.md#sec), ![fig](figures/x.png \"t\"), [web](https://x.org/y.md),\n"
            "[top](#top), `[code](c.md)`, <img src=\"figures/y.svg\">, [src](../pkg/m.py)\n"
            "[ref]: b.md\n```text\n[in](fence.md)\n```\n")
    out = nbs.rewrite_links(text, page, folder, {(docs / "b.md").resolve(): "b.ipynb"})
    assert out == ("See [b](b.ipynb#sec), ![fig](../docs/figures/x.png \"t\"), "
                   "[web](https://x.org/y.md),\n[top](#top), `[code](c.md)`, "
                   "<img src=\"../docs/figures/y.svg\">, [src](../pkg/m.py)\n"
                   "[ref]: b.ipynb\n```text\n[in](fence.md)\n```\n")


# ----------------------------------------------------------------------------- (c) execution
def _can_execute() -> str | None:
    missing = [m for m in ("nbformat", "nbclient", "ipykernel")
               if importlib.util.find_spec(m) is None]
    return (f"{', '.join(missing)} not installed: pip install -e \".[notebooks]\""
            if missing else None)


needs_kernel = pytest.mark.skipif(_can_execute() is not None, reason=str(_can_execute()))


def _repository_files() -> set[str]:
    """Where a page's relative writes would land if the kernel ran in the wrong folder: the
    repository's top level and notebooks/ (recursively), as relative paths."""
    names = {p.name for p in ROOT.iterdir()}
    names |= {p.relative_to(ROOT).as_posix() for p in FOLDER.rglob("*")}
    return names


@needs_kernel
@pytest.mark.parametrize("name", list(EXPECTED))
def test_notebook_runs_in_a_fresh_kernel(name: str, tmp_path: Path) -> None:
    import nbformat

    path = FOLDER / name
    if not path.is_file():
        pytest.fail(f"notebooks/{name} is missing: {HOW}")
    nb = nbformat.read(str(path), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    before = _repository_files()
    nbs.execute_notebook(nb, tmp_path)  # raises CellExecutionError, naming the cell
    assert all(cell.get("execution_count") for cell in nb.cells if cell.cell_type == "code")
    install_output = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert f"tinygrad_rnn {tr.__version__}" in install_output  # no install was attempted
    new = sorted(_repository_files() - before)
    assert not new, f"notebooks/{name} wrote into the repository: {new}"


@needs_kernel
def test_a_failing_cell_fails_the_execution(tmp_path: Path) -> None:
    import nbformat
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", id="a"),
                nbformat.v4.new_code_cell("assert x == 2, 'x is not 2'", id="b")]
    with pytest.raises(CellExecutionError, match="x is not 2"):
        nbs.execute_notebook(nb, tmp_path)
