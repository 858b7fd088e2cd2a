"""Keep the documentation honest: README.md and every docs/*.md page.

(a) Every ```python block runs. The blocks of one file run in order in one fresh namespace
    (a tutorial builds on its earlier blocks), with the working directory a temporary folder
    per file and MPLBACKEND=Agg; each block is its own test, so a failure names the file and
    the block, and its traceback shows the Markdown file's own line numbers.
(b) Every ``tests/....py::test_name`` reference (with a class: ``path::Class::test``) names a
    test that exists: found with :mod:`ast` (parametrized tests count by function name), or
    for tests generated at import time (``globals()[...] = ...``) as a module attribute.
(c) Every relative link and image points to an existing file, and an ``#anchor`` into a
    Markdown file to one of its headings (GitHub's heading ids).
(d) Every ``tinygrad_rnn/....py::name`` reference ("Implemented by") names a function,
    class (``Class.method`` too) or module-level name that exists in that file.
Also: every "Tested by:" / "Implemented by:" paragraph gives at least one such reference,
every repository path a page mentions exists, and docs/index.md links to every page.
"""
from __future__ import annotations

import ast
import importlib
import re
import sys
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from tinygrad_rnn.notebooks import Block, code_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

#: the pages of the documentation, in docs/index.md's reading order
PAGES = ("tutorial_1_tensors", "tutorial_2_first_rnn", "tutorial_3_bptt_by_hand",
         "tutorial_4_vanishing", "tutorial_5_attention", "tutorial_6_check_your_op",
         "engine", "activations", "softmax", "broadcasting", "gradcheck", "recurrent",
         "vanishing", "truncation", "attention", "performance", "devices", "layernorm")


def doc_files() -> list[Path]:
    return [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ----------------------------------------------------------------------------- parsing
# Block and code_blocks come from tinygrad_rnn/notebooks.py: one parser of fenced
# blocks for this test and for the notebooks made from the same pages, so a page's code cells
# are exactly the blocks this test runs.


def prose(text: str) -> str:
    """The text with fenced code blocks blanked out (line numbers kept)."""
    lines = text.splitlines()
    for block in code_blocks(text):
        first = block.line - 1
        for k in range(first - 1, first + block.source.count("\n") + 1):
            if 0 <= k < len(lines):
                lines[k] = ""
    return "\n".join(lines)


def without_inline_code(text: str) -> str:
    return re.sub(r"`[^`\n]*`", "", text)


def python_blocks(path: Path) -> list[Block]:
    return [b for b in code_blocks(path.read_text(encoding="utf-8"))
            if b.lang in ("python", "py", "python3")]


# ----------------------------------------------------------------------------- (a) code
BLOCK_CASES = [(path, k) for path in doc_files() for k in range(len(python_blocks(path)))]


@dataclass
class _FileRun:
    namespace: dict
    cwd: Path
    done: int = 0
    failed: int | None = None


_RUNS: dict[Path, _FileRun] = {}


def _run_block(path: Path, k: int, run: _FileRun) -> None:
    block = python_blocks(path)[k]
    # pad so that tracebacks show the Markdown file's line numbers
    code = compile("\n" * (block.line - 1) + block.source, str(path), "exec")
    try:
        exec(code, run.namespace)
    except BaseException:
        run.failed = k
        raise
    finally:
        run.done = k + 1
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")


@pytest.mark.parametrize("path, k", BLOCK_CASES,
                         ids=[f"{rel(p)}-block{k}" for p, k in BLOCK_CASES])
def test_python_block_runs(path: Path, k: int, tmp_path_factory: pytest.TempPathFactory,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = _RUNS.get(path)
    if run is None or run.done > k:  # first block of the file, or a re-run
        import tinygrad_rnn as tr

        tr.manual_seed(0)
        run = _RUNS[path] = _FileRun({"__name__": "__main__"},
                                     tmp_path_factory.mktemp(path.stem))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    if "matplotlib" in sys.modules:
        sys.modules["matplotlib"].use("Agg")
    monkeypatch.chdir(run.cwd)
    while run.done < k:  # blocks not run yet (e.g. when selected with -k)
        if run.failed is not None:
            break
        _run_block(path, run.done, run)
    if run.failed is not None:
        pytest.fail(f"{rel(path)}: block {run.failed} failed, and later blocks build on it")
    _run_block(path, k, run)


def test_block_parser_finds_python_blocks_and_their_lines() -> None:
    text = "intro\n```python\nx = 1\n```\n\n  ```py\n  y = 2\n  ```\n```bash\nls\n```\n"
    blocks = code_blocks(text)
    assert [(b.lang, b.source, b.line) for b in blocks] == [
        ("python", "x = 1\n", 3), ("py", "y = 2\n", 7), ("bash", "ls\n", 10)]
    assert "x = 1" not in prose(text) and "intro" in prose(text)


# ----------------------------------------------------------------------------- (b) tests
TEST_REF = re.compile(r"(?<![\w/])(tests/[\w/.-]+?\.py)::([A-Za-z_]\w*(?:::[A-Za-z_]\w*)?)")
CODE_REF = re.compile(r"(?<![\w/])(tinygrad_rnn/[\w/.-]+?\.py)::([A-Za-z_][\w.]*\w)")


def _references(pattern: re.Pattern) -> list[tuple[Path, str, str]]:
    found = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for m in pattern.finditer(text):
            item = (path, m.group(1), m.group(2))
            if item not in found:
                found.append(item)
    return found


TEST_REFS = _references(TEST_REF)
CODE_REFS = _references(CODE_REF)


@lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _top_level(tree: ast.Module) -> dict[str, ast.AST]:
    """Functions, classes and assigned names at module level."""
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    names[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
    return names


def _members(cls: ast.ClassDef) -> set[str]:
    out = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def _import_test_module(path: Path) -> Any:
    """Import a test file the way pytest's default (prepend) import mode names it."""
    base = path.parent
    while (base / "__init__.py").exists():
        base = base.parent
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    name = ".".join(path.relative_to(base).with_suffix("").parts)
    return importlib.import_module(name)


def missing_test(path: Path, name: str) -> str | None:
    """None when ``path::name`` names a test, else why not."""
    if not path.is_file():
        return f"{rel(path)} does not exist"
    parts = name.split("::")
    found = _top_level(_tree(path)).get(parts[0])
    if len(parts) == 2:
        if not isinstance(found, ast.ClassDef):
            return f"{rel(path)} has no class {parts[0]}"
        return None if parts[1] in _members(found) else (
            f"class {parts[0]} in {rel(path)} has no test {parts[1]}")
    if isinstance(found, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    module = _import_test_module(path)  # generated at import time?
    return None if callable(getattr(module, parts[0], None)) else (
        f"{rel(path)} defines no test {parts[0]}")



@pytest.mark.parametrize("doc, path, name", TEST_REFS,
                         ids=[f"{rel(d)}-{p}::{n}" for d, p, n in TEST_REFS])
def test_tested_by_reference_names_an_existing_test(doc: Path, path: str, name: str) -> None:
    problem = missing_test(ROOT / path, name)
    assert problem is None, f"{rel(doc)} cites {path}::{name}: {problem}"


# ----------------------------------------------------------------------------- (d) code
def missing_code(path: Path, name: str) -> str | None:
    """None when ``path::name`` (name maybe ``Class.member``) exists, else why not."""
    if not path.is_file():
        return f"{rel(path)} does not exist"
    parts = name.split(".")
    found = _top_level(_tree(path)).get(parts[0])
    if found is None:
        return f"{rel(path)} defines no {parts[0]}"
    for member in parts[1:]:
        if not isinstance(found, ast.ClassDef):
            return f"{name} in {rel(path)}: {member} is looked up on something not a class"
        if member not in _members(found):
            return f"class {found.name} in {rel(path)} has no {member}"
        found = next((n for n in found.body if getattr(n, "name", None) == member), None)
    return None


@pytest.mark.parametrize("doc, path, name", CODE_REFS,
                         ids=[f"{rel(d)}-{p}::{n}" for d, p, n in CODE_REFS])
def test_implemented_by_reference_names_existing_code(doc: Path, path: str, name: str) -> None:
    problem = missing_code(ROOT / path, name)
    assert problem is None, f"{rel(doc)} cites {path}::{name}: {problem}"


def _paragraphs_after(text: str, label: str) -> list[tuple[int, str]]:
    """(line, paragraph) for each paragraph containing ``label`` (up to a blank line)."""
    out = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if label in line:
            para = [line[line.index(label):]]
            j = i + 1
            while j < len(lines) and lines[j].strip():
                para.append(lines[j])
                j += 1
            out.append((i + 1, " ".join(para)))
    return out


@pytest.mark.parametrize("path", doc_files(), ids=rel)
def test_tested_by_and_implemented_by_give_references(path: Path) -> None:
    text = prose(path.read_text(encoding="utf-8"))
    bad = []
    for label, pattern in (("Tested by:", TEST_REF), ("Implemented by:", CODE_REF)):
        for line, para in _paragraphs_after(text, label):
            if not pattern.search(para):
                bad.append(f"line {line}: {label!r} without a path::name reference")
    assert not bad, f"{rel(path)}: " + "; ".join(bad)


def test_reference_checkers_reject_what_does_not_exist() -> None:
    here = Path(__file__)
    assert missing_test(here, "test_reference_checkers_reject_what_does_not_exist") is None
    assert missing_test(here, "test_no_such_thing") is not None
    assert missing_test(here, "missing_test::x") is not None  # not a class
    assert missing_test(ROOT / "tests" / "nope.py", "test_x") is not None
    ops = ROOT / "tinygrad_rnn" / "ops" / "activations.py"
    assert missing_code(ops, "Softmax") is None and missing_code(ops, "Tanh.backward") is None
    assert missing_code(ops, "Softmax.nope") is not None
    assert missing_code(ops, "NoSuchOp") is not None
    assert missing_code(ops, "stable_sigmoid.x") is not None
    refs = [m.groups() for m in TEST_REF.finditer(
        "Tested by: tests/a.py::test_b, tests/c/d.py::K::test_e[f64].")]
    assert refs == [("tests/a.py", "test_b"), ("tests/c/d.py", "K::test_e")]
    refs = [m.groups() for m in CODE_REF.finditer("by `tinygrad_rnn/x/y.py::Cls.meth`.")]
    assert refs == [("tinygrad_rnn/x/y.py", "Cls.meth")]


# ----------------------------------------------------------------------------- (c) links
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^[ \t]{0,3}\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t]+.*)?$", re.M)
HTML_SRC = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)\s*=\s*\"([^\"]+)\"", re.I)


def links(text: str) -> list[str]:
    body = without_inline_code(prose(text))
    return (LINK.findall(body) + REF_DEF.findall(body) + HTML_SRC.findall(body))


def github_slug(heading: str) -> str:
    """GitHub's id of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = github_slug(m.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


LINK_CASES = [(path, target) for path in doc_files()
              for target in dict.fromkeys(links(path.read_text(encoding="utf-8")))
              if not _is_external(target)]


@pytest.mark.parametrize("doc, target", LINK_CASES,
                         ids=[f"{rel(d)}->{t}" for d, t in LINK_CASES])
def test_relative_link_points_to_an_existing_file(doc: Path, target: str) -> None:
    file_part, _, anchor = target.partition("#")
    file_part = file_part.split("?")[0]
    dest = (doc.parent / file_part).resolve() if file_part else doc
    assert dest.exists(), f"{rel(doc)} links to {target}, but {dest} does not exist"
    assert dest == ROOT or ROOT in dest.parents, f"{rel(doc)} links outside the repository"
    if anchor and dest.suffix == ".md":
        assert anchor in anchors(dest), (
            f"{rel(doc)} links to {target}, but {rel(dest)} has no heading with id "
            f"{anchor!r} (ids: {sorted(anchors(dest))})")


def test_link_parsing_and_slugs() -> None:
    text = ("See [a](docs/a.md), ![fig](img/x.png \"t\"), [b](https://x.org), [c](#top),\n"
            "`[not](a link)`, <img src=\"y.svg\">\n\n[ref]: other.md\n```\n[x](in_code.md)\n"
            "```\n")
    assert links(text) == ["docs/a.md", "img/x.png", "https://x.org", "#top", "other.md",
                           "y.svg"]
    assert github_slug("4. The GRU") == "4-the-gru"
    assert github_slug("6. Directional checks: $v^\\top J u$") == "6-directional-checks-vtop-j-u"
    assert github_slug("sum_to_shape: the gradient of broadcasting") == \
        "sum_to_shape-the-gradient-of-broadcasting"


# ----------------------------------------------------------------------------- paths, index
PATH_MENTION = re.compile(
    r"(?<![\w/.-])((?:tinygrad_rnn|tests|demos|benchmarks|docs)/[\w/.-]*\w\.(?:py|md|png|svg))")


@pytest.mark.parametrize("path", doc_files(), ids=rel)
def test_every_repository_path_mentioned_exists(path: Path) -> None:
    text = prose(path.read_text(encoding="utf-8"))
    missing = sorted({p for p in PATH_MENTION.findall(text) if not (ROOT / p).exists()
                      and not (path.parent / p).exists()})
    assert not missing, f"{rel(path)} mentions paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_page_exists_and_is_linked_from_the_index(page: str) -> None:
    assert (DOCS / f"{page}.md").is_file(), f"docs/{page}.md is missing"
    index_links = [t.split("#")[0] for t in links((DOCS / "index.md").read_text("utf-8"))]
    assert f"{page}.md" in index_links, f"docs/index.md does not link to {page}.md"


def test_index_links_every_page_in_reading_order() -> None:
    index_links = [t.split("#")[0] for t in links((DOCS / "index.md").read_text("utf-8"))]
    pages = [t[:-3] for t in dict.fromkeys(index_links) if t.endswith(".md") and "/" not in t]
    unlisted = sorted(p.stem for p in DOCS.glob("*.md") if p.stem != "index"
                      and p.stem not in pages)
    assert not unlisted, f"docs/index.md does not link to: {unlisted}"
    order = [p for p in pages if p in PAGES]
    assert order == [p for p in PAGES if p in order], order


def test_all_checks_saw_something() -> None:
    """The parsers must find the references the pages are known to have, or every
    parametrized test above would pass vacuously."""
    assert len(BLOCK_CASES) >= 3 and len(TEST_REFS) >= 20 and len(CODE_REFS) >= 10
    assert LINK_CASES
    for page in ("README.md", "docs/engine.md", "docs/softmax.md"):
        assert any(rel(d) == page for d, _ in BLOCK_CASES), page
    for page in ("docs/engine.md", "docs/softmax.md", "docs/activations.md",
                 "docs/broadcasting.md"):
        assert any(rel(d) == page for d, _, _ in TEST_REFS), page
        assert any(rel(d) == page for d, _, _ in CODE_REFS), page


def test_reference_definitions_on_consecutive_lines_are_all_found() -> None:
    """Regression: the pattern's trailing whitespace once matched the newline and swallowed
    the next definition, so every second one of a block went unchecked."""
    block = "[a]: one.md\n[b]: two.md \"title\"\n  [c]: <three.md>\n[d]:four.md\n"
    assert REF_DEF.findall(block) == ["one.md", "two.md", "three.md", "four.md"]
