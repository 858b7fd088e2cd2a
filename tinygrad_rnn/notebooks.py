"""Jupyter notebooks generated from the documentation pages; the Markdown stays the source.

Every page that docs/index.md links to (its reading order, tutorial pages included) and that
has at least one ```python block becomes ``notebooks/<page>.ipynb``:

* a Markdown cell with an "Open in Colab" badge and a note saying which page it comes from;
* a code cell that installs tinygrad_rnn when it cannot be imported (Colab, a fresh
  environment) and is a no-op otherwise, then seeds the generators as the docs test does
  (``tr.manual_seed(0)``);
* then the page itself: the prose between two Python blocks as one Markdown cell, each Python
  block as one code cell. Blocks are found exactly as tests/docs/test_docs.py finds them
  (backtick or tilde fences, any indent, info string ``python``, ``py`` or ``python3``);
  other fenced blocks (``bash``, plain text) stay inside the Markdown cells. Relative links
  are rewritten to work from notebooks/: a page that has a notebook links to that notebook,
  anything else to its file (``../docs/figures/...``).

Regenerate them after editing a page, from a source checkout (``pip install -e
".[notebooks]"`` provides nbformat, nbclient and ipykernel)::

    tinygrad-rnn notebooks --execute     # or: python -m tinygrad_rnn notebooks --execute

``--execute`` runs each notebook top to bottom in a fresh kernel (the interpreter running the
command) whose working directory is a temporary folder, ``<tmp>/tinygrad_rnn-notebooks/<page>``
(removed afterwards), as the docs test's is: a page that saves a figure with a relative path
writes it there. The outputs are stored in the notebook.

``tinygrad-rnn notebooks --check`` lists the notebooks whose cells (kinds and sources, not
outputs) differ from what the pages give, and exits 1 if any; it needs nothing beyond the
package, and tests/test_notebooks.py runs the same check.

Set :data:`REPO_URL` (and :data:`PUBLISHED_ON_PYPI` once the package is on PyPI), then
regenerate: the badge and the install cell are built from them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["REPO_URL", "BRANCH", "PUBLISHED_ON_PYPI", "REGENERATE_COMMAND", "Cell",
           "Block", "code_blocks", "notebook_pages", "page_cells", "expected_cells",
           "read_cells", "check", "write", "execute_notebook"]

# ---------------------------------------------------------------------------------------
# The one place that names where the package lives. The repository's address is not known
# yet: replace OWNER with the GitHub account, then run `tinygrad-rnn notebooks --execute`.
REPO_URL = "https://github.com/OWNER/tinygrad_rnn"
#: the branch the Colab badges open the notebooks from
BRANCH = "main"
#: True once ``pip install tinygrad_rnn`` installs this package from PyPI; until then the
#: install cell installs it from :data:`REPO_URL`
PUBLISHED_ON_PYPI = False
# ---------------------------------------------------------------------------------------

PACKAGE = "tinygrad_rnn"
NOTEBOOK_FOLDER = "notebooks"
REGENERATE_COMMAND = "tinygrad-rnn notebooks --execute"
#: the seed tests/docs/test_docs.py sets before the first block of every page
SEED = 0
#: longest time one cell may run when executing, in seconds
CELL_TIMEOUT = 600
PYTHON_LANGS = ("python", "py", "python3")


@dataclass(frozen=True)
class Cell:
    """One notebook cell: ``kind`` is ``"markdown"`` or ``"code"``."""

    kind: str
    source: str


@dataclass(frozen=True)
class Block:
    """A fenced code block: its language, source, first source line (1-based) and the
    0-based line indices of its opening and closing fences (``end`` is the number of lines
    when the block is never closed)."""

    lang: str
    source: str
    line: int
    start: int
    end: int


# ----------------------------------------------------------------------------- parsing
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


def code_blocks(text: str) -> list[Block]:
    """The fenced code blocks of a Markdown text, with the boundaries the docs test uses.

    An opening fence is three or more backticks or tildes at any indent; the block closes at
    the next fence of the same character, at least as long, with no info string. The
    opening fence's indent is removed from the block's lines.
    """
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m.group("indent"), m.group("fence")
        info = m.group("info").strip()
        lang = info.split(" ")[0].lower() if info else ""
        body = []
        j = i + 1
        while j < len(lines):
            close = FENCE.match(lines[j])
            if (close and close.group("fence")[0] == fence[0]
                    and len(close.group("fence")) >= len(fence)
                    and not close.group("info").strip()):
                break
            line = lines[j]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            j += 1
        blocks.append(Block(lang, "\n".join(body) + "\n", i + 2, i, j))
        i = j + 1
    return blocks


def python_blocks(text: str) -> list[Block]:
    """The blocks the docs test runs: those whose language is python, py or python3."""
    return [b for b in code_blocks(text) if b.lang in PYTHON_LANGS]


# ----------------------------------------------------------------------------- pages
INDEX_LINK = re.compile(r"\]\(\s*<?([\w.-]+\.md)(?:#[^)\s>]*)?>?(?:\s+\"[^\"]*\")?\s*\)")


def notebook_pages(docs: Path) -> list[Path]:
    """The pages that get a notebook, in order: the Markdown pages docs/index.md links to
    (first link wins), then any ``tutorial_*.md`` it does not link to yet; only those with
    at least one Python block."""
    index = (docs / "index.md").read_text(encoding="utf-8")
    names = list(dict.fromkeys(INDEX_LINK.findall(_without_code(index))))
    names += [p.name for p in sorted(docs.glob("tutorial_*.md")) if p.name not in names]
    pages = []
    for name in names:
        path = docs / name
        if name != "index.md" and path.is_file() and \
                python_blocks(path.read_text(encoding="utf-8")):
            pages.append(path)
    return pages


def _without_code(text: str) -> str:
    """The text with its fenced blocks removed (so links inside code are not followed)."""
    lines = text.splitlines()
    for block in reversed(code_blocks(text)):
        del lines[block.start:block.end + 1]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- links
MD_LINK = re.compile(r"(!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?)([^)\s>]+)")
REF_DEF = re.compile(r"^(\s{0,3}\[[^\]]+\]:\s*<?)(\S+?)(?=>?(?:\s|$))")
HTML_SRC = re.compile(r"(<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*\")([^\"]+)", re.I)
INLINE_CODE = re.compile(r"(`[^`\n]*`)")


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith(("//",
                                                                                      "#"))


def rewrite_links(markdown: str, page: Path, notebook_dir: Path,
                  notebooks: dict[Path, str]) -> str:
    """``markdown`` (prose of ``page``) with its relative link targets made relative to
    ``notebook_dir``; a link to a page in ``notebooks`` (resolved path -> notebook file
    name) points to that notebook instead. Targets in inline code or fenced blocks are
    left alone, as are external links and bare ``#anchors``."""
    def target(m: re.Match) -> str:
        old = m.group(2)
        if _is_external(old):
            return m.group(0)
        file_part, hash_, anchor = old.partition("#")
        dest = (page.parent / file_part).resolve()
        if dest in notebooks:
            new = notebooks[dest]
        else:
            new = Path(os.path.relpath(dest, notebook_dir.resolve())).as_posix()
        return m.group(1) + new + hash_ + anchor

    out = []
    fenced: set[int] = set()
    for block in code_blocks(markdown):
        fenced.update(range(block.start, block.end + 1))
    for k, line in enumerate(markdown.split("\n")):
        if k not in fenced:
            parts = INLINE_CODE.split(line)
            for p in range(0, len(parts), 2):  # even parts are outside inline code
                for pattern in (MD_LINK, REF_DEF, HTML_SRC):
                    parts[p] = pattern.sub(target, parts[p])
            line = "".join(parts)
        out.append(line)
    return "\n".join(out)


# ----------------------------------------------------------------------------- cells
def colab_url(name: str) -> str:
    """The address that opens ``notebooks/<name>`` in Colab from :data:`REPO_URL`."""
    repo = REPO_URL.rstrip("/").removesuffix(".git").split("github.com/", 1)[-1]
    return (f"https://colab.research.google.com/github/{repo}/blob/{BRANCH}/"
            f"{NOTEBOOK_FOLDER}/{name}")


def badge(name: str) -> str:
    """The Markdown of an "Open in Colab" badge for ``notebooks/<name>``."""
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"({colab_url(name)})")


def install_source() -> str:
    """What the install cell asks pip for: the package index's release once published, else
    the repository."""
    return PACKAGE if PUBLISHED_ON_PYPI else f'"{PACKAGE} @ git+{REPO_URL}"'


def header_cells(page: Path, name: str) -> list[Cell]:
    """The two cells every notebook starts with: the badge with a note on the source, and
    the install-if-missing cell that also seeds the generators as the docs test does."""
    note = (f"{badge(name)}\n\n"
            f"*Generated from [docs/{page.name}](../docs/{page.name}) by "
            f"`{REGENERATE_COMMAND}`: edit the page, not this notebook. The first code cell "
            f"installs {PACKAGE} when it is missing (as on Colab) and does nothing "
            f"otherwise.*")
    install = (
        f"# Install {PACKAGE} when it cannot be imported (Colab, a fresh environment);\n"
        f"# a no-op where it is installed already.\n"
        f"import importlib.util\n"
        f"\n"
        f'if importlib.util.find_spec("{PACKAGE}") is None:\n'
        f"    %pip install --quiet {install_source()}\n"
        f"\n"
        f"import {PACKAGE}\n"
        f"\n"
        f"{PACKAGE}.manual_seed({SEED})  # the seed the documentation's tests use\n"
        f'print("{PACKAGE}", {PACKAGE}.__version__)'
    )
    return [Cell("markdown", note), Cell("code", install)]


def page_cells(text: str, rewrite: Callable[[str], str] = lambda s: s) -> list[Cell]:
    """A page as cells: the prose between Python blocks as Markdown cells (passed through
    ``rewrite``; blank ones dropped), each Python block as a code cell."""
    lines = text.splitlines()
    cells = []
    prev = 0

    def prose(upto: int) -> None:
        chunk = "\n".join(lines[prev:upto]).strip("\n")
        if chunk.strip():
            cells.append(Cell("markdown", rewrite(chunk)))

    for block in python_blocks(text):
        prose(block.start)
        cells.append(Cell("code", block.source.rstrip("\n")))
        prev = block.end + 1
    prose(len(lines))
    return cells


def notebook_name(page: Path) -> str:
    return page.stem + ".ipynb"


def expected_cells(root: Path) -> dict[str, list[Cell]]:
    """Every notebook's cells as the pages under ``root/docs`` give them, by file name, in
    reading order."""
    docs, folder = root / "docs", root / NOTEBOOK_FOLDER
    pages = notebook_pages(docs)
    names = {page.resolve(): notebook_name(page) for page in pages}
    out = {}
    for page in pages:
        name = notebook_name(page)

        def rewrite(markdown: str, page: Path = page) -> str:
            return rewrite_links(markdown, page, folder, names)

        out[name] = header_cells(page, name) + page_cells(
            page.read_text(encoding="utf-8"), rewrite)
    return out


def index_text(root: Path) -> str:
    """notebooks/README.md: the notebooks in reading order, each with its page and badge."""
    intro = ["Each documentation page with code, as a Jupyter notebook with its outputs. "
             "They are generated from docs/ (the Markdown is the source) by "
             f"`{REGENERATE_COMMAND}`; do not edit them by hand. The first code cell "
             f"installs {PACKAGE} when it is missing, so each one also runs on Colab.",
             "The test suite (tests/test_notebooks.py) checks that they match the pages, "
             "and executes each one in a fresh kernel when nbformat, nbclient and ipykernel "
             "are installed: `pip install -e \".[test,notebooks]\"`, as CI's .ci/run does. "
             "With README's `pip install -e \".[test]\"` the execution tests skip."]
    lines = ["# Notebooks", ""]
    for paragraph in intro:
        lines += textwrap.wrap(paragraph, width=96, break_on_hyphens=False) + [""]
    lines += ["| notebook | page | |", "|---|---|---|"]
    for name in expected_cells(root):
        page = name.removesuffix(".ipynb") + ".md"
        lines.append(f"| [{name}]({name}) | [docs/{page}](../docs/{page}) | {badge(name)} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- checking
def read_cells(path: Path) -> list[Cell]:
    """The kinds and sources of a notebook's cells, read as plain JSON (no nbformat)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    cells = []
    for cell in data.get("cells", []):
        source = cell.get("source", "")
        cells.append(Cell(cell.get("cell_type", ""),
                          "".join(source) if isinstance(source, list) else source))
    return cells


def check(root: Path) -> list[str]:
    """What is out of date under ``root/notebooks``: one line per missing, stale or extra
    notebook (cell kinds and sources compared; outputs are not). Empty when all is current.
    """
    folder = root / NOTEBOOK_FOLDER
    problems = []
    expected = expected_cells(root)
    for name, cells in expected.items():
        path = folder / name
        if not path.is_file():
            problems.append(f"{NOTEBOOK_FOLDER}/{name} is missing")
            continue
        have = read_cells(path)
        if have != cells:
            problems.append(f"{NOTEBOOK_FOLDER}/{name} differs from docs/"
                            f"{name.removesuffix('.ipynb')}.md ({_first_difference(have, cells)})")
    extra = sorted(p.name for p in folder.glob("*.ipynb") if p.name not in expected)
    problems += [f"{NOTEBOOK_FOLDER}/{name} has no page in docs/index.md's reading order"
                 for name in extra]
    readme = folder / "README.md"
    if not readme.is_file() or readme.read_text(encoding="utf-8") != index_text(root):
        problems.append(f"{NOTEBOOK_FOLDER}/README.md is missing or out of date")
    return problems


def _first_difference(have: Sequence[Cell], want: Sequence[Cell]) -> str:
    for k, (a, b) in enumerate(zip(have, want, strict=False)):
        if a != b:
            return f"cell {k}: {a.kind} cell where the page gives a {b.kind} cell" \
                if a.kind != b.kind else f"cell {k} ({b.kind}) has other source"
    return f"{len(have)} cells where the page gives {len(want)}"


# ----------------------------------------------------------------------------- writing
def _notebook(cells: Sequence[Cell], page: str) -> Any:
    import nbformat

    nb = nbformat.v4.new_notebook()
    for k, cell in enumerate(cells):
        make = nbformat.v4.new_code_cell if cell.kind == "code" else \
            nbformat.v4.new_markdown_cell
        nb.cells.append(make(source=cell.source, id=f"cell-{k:03d}"))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata[PACKAGE] = {"source": f"docs/{page}", "regenerate": REGENERATE_COMMAND}
    return nb


def _kernel_manager(spec_dir: Path) -> Any:
    """A kernel manager that starts ipykernel in this very interpreter (whatever "python3"
    kernels the user has registered elsewhere)."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    name = "tinygrad-rnn-python"
    (spec_dir / name).mkdir(parents=True, exist_ok=True)
    spec = {"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                     "--IPKernelApp.log_level=ERROR"],
            "display_name": "Python 3", "language": "python"}
    (spec_dir / name / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    specs = KernelSpecManager(kernel_dirs=[str(spec_dir)], ensure_native_kernel=False)
    return KernelManager(kernel_name=name, kernel_spec_manager=specs)


def execute_notebook(nb: Any, cwd: Path, timeout: int = CELL_TIMEOUT) -> Any:
    """Run ``nb`` top to bottom in a fresh kernel whose working directory is ``cwd``; the
    outputs are stored in ``nb`` (returned). Figures are captured inline. The kernel's spec
    and IPython's profile live in a temporary folder of their own, so ``cwd`` holds only
    what the cells write. Raises nbclient's CellExecutionError, naming the cell, on an
    error."""
    from nbclient import NotebookClient

    env = dict(os.environ)
    env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    env.setdefault("PYTHONHASHSEED", "0")
    # without ipywidgets, tqdm.auto warns that it falls back to text bars: not the page's
    env["PYTHONWARNINGS"] = ",".join(filter(None, [env.get("PYTHONWARNINGS"),
                                                   "ignore:IProgress not found"]))
    with tempfile.TemporaryDirectory(prefix=f"{PACKAGE}-kernel-") as private:
        env["IPYTHONDIR"] = str(Path(private) / "ipython")
        client = NotebookClient(nb, timeout=timeout, km=_kernel_manager(Path(private)),
                                record_timing=False, allow_errors=False,
                                resources={"metadata": {"path": str(cwd)}})
        client.execute(cleanup_kc=True, env=env, cwd=str(cwd))  # then shuts the kernel down
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def write(root: Path, execute: bool = False, only: Sequence[str] | None = None,
          log: Callable[[str], None] = print) -> dict[str, float]:
    """Write ``root/notebooks/*.ipynb`` (and its README.md) from the pages; with
    ``execute``, run each in a fresh kernel in its own temporary folder first so the
    outputs are stored. ``only`` limits the notebooks written (names without .ipynb).
    Removes notebooks no page gives any more. Returns the seconds each execution took."""
    import nbformat

    folder = root / NOTEBOOK_FOLDER
    folder.mkdir(exist_ok=True)
    expected = expected_cells(root)
    timings = {}
    for name, cells in expected.items():
        if only and name.removesuffix(".ipynb") not in only:
            continue
        nb = _notebook(cells, name.removesuffix(".ipynb") + ".md")
        if execute:
            # a fixed folder under the temporary directory, so that paths a page prints
            # are the same from one run to the next
            scratch = Path(tempfile.gettempdir()) / f"{PACKAGE}-notebooks" / name[:-6]
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            start = time.perf_counter()
            try:
                execute_notebook(nb, scratch)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            timings[name] = time.perf_counter() - start
            log(f"{NOTEBOOK_FOLDER}/{name}: executed in {timings[name]:.1f} s")
        else:
            log(f"{NOTEBOOK_FOLDER}/{name}: written (no outputs)")
        nbformat.validate(nb)
        tmp_path = folder / f".{name}.tmp"
        nbformat.write(nb, str(tmp_path))
        os.replace(tmp_path, folder / name)
    if not only:
        for stale in folder.glob("*.ipynb"):
            if stale.name not in expected:
                stale.unlink()
                log(f"{NOTEBOOK_FOLDER}/{stale.name}: removed (no page gives it)")
    (folder / "README.md").write_text(index_text(root), encoding="utf-8")
    return timings
