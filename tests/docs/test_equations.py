"""Every numbered equation of docs/ has a code line that computes it and a test that checks
it, and grep finds both.

A docs page numbers a displayed equation with ``\\tag{SM10}`` (or ``\\text{(LN1)}`` at the end
of the display, as docs/layernorm.md does). For each such equation (X):

* **code**: some comment in the package (``tinygrad_rnn/``) cites ``(X)``, on the line that
  computes it (``# (SM10) (p - e_y) s``): ``grep -rn "(SM10)" tinygrad_rnn`` lands there;
* **test**: some test function in ``tests/`` cites ``(X)`` in its name, docstring, comments
  or code, or the "Tested by:" paragraph of the page that cites ``(X)`` names a test that is
  defined under that literal name (``def test_...``), so grep finds it too.

The few equations with nothing to compute are listed in :data:`NOTHING_TO_COMPUTE`, each with
its reason. The test also checks that a page defines each label once, that every label cited
in a package comment is an equation of some page (or a module's own, see
tests/docs/test_equation_labels.py), and that every test a page cites is defined under its
own name (no generated names: ``grep -rn "def test_x" tests`` must find it).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
LABEL = re.compile(r"\(([A-Z]{1,3}\d+'?)\)")
# the label of a displayed equation: \tag{X}, or \text{(X)} at the end of a $$ display
DEFINED = re.compile(r"\\tag\{([A-Z]{1,3}\d+'?)\}|\\text\{\(([A-Z]{1,3}\d+'?)\)\}\s*\$\$")
TESTED_BY = re.compile(r"^Tested by:", re.M)
TEST_REF = re.compile(r"(?<![\w/])(tests/[\w/.-]+?\.py)::([A-Za-z_]\w*)")

# Equations that define a name or state a fact used by the lines that compute, with nothing
# to compute themselves. Each still has its derivation on its page.
NOTHING_TO_COMPUTE = {
    "SM11": "the chain through the softmax Jacobian, which the fused cross entropy avoids on "
            "purpose; the test computes it to show it equals (SM10)",
    "R1": "the lecture form of the GRU: the package computes PyTorch's form (G1)-(G4); the "
          "test runs the lecture form itself",
    "R2": "the weight relabelling between the two GRU forms: a statement about weights",
    "TB5": "a bound on the window lengths that follows from (TB3)",
    "VG12": "the closed form of (VG11) for a geometric sequence of norms",
}

# A page may restate another page's equation under the same label (a tutorial quoting the
# reference page); the restatement is not a second equation.
RESTATED = {
    ("tutorial_3_bptt_by_hand.md", "L7"): "recurrent.md",
}


# ----------------------------------------------------------------------------- parsing
def _pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def page_equations(text: str) -> list[tuple[str, int]]:
    """[(label, line number)] of the equations a page numbers, in order."""
    found = []
    for match in DEFINED.finditer(text):
        label = match.group(1) or match.group(2)
        found.append((label, text.count("\n", 0, match.start()) + 1))
    return found


@lru_cache(maxsize=None)
def equations() -> dict[str, str]:
    """label -> the page that defines it (restatements left out)."""
    out: dict[str, str] = {}
    for page in _pages():
        for label, _ in page_equations(page.read_text(encoding="utf-8")):
            if (page.name, label) not in RESTATED:
                out.setdefault(label, page.name)
    return out


def comment_labels(source: str) -> set[str]:
    """The labels cited in the ``#`` comments of a Python source."""
    labels = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            labels.update(LABEL.findall(token.string))
    return labels


@lru_cache(maxsize=None)
def code_citations() -> dict[str, list[str]]:
    """label -> the package files whose comments cite it."""
    out: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tinygrad_rnn").rglob("*.py")):
        for label in comment_labels(path.read_text(encoding="utf-8")):
            out.setdefault(label, []).append(path.relative_to(ROOT).as_posix())
    return out


@lru_cache(maxsize=None)
def defined_tests() -> dict[str, dict[str, str]]:
    """test file -> {name of each literally defined test function: its source}."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        functions = {}
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.name.startswith("test"):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                functions[node.name] = "\n".join(lines[first - 1:node.end_lineno])
        out[path.relative_to(ROOT).as_posix()] = functions
    return out


@lru_cache(maxsize=None)
def citing_tests() -> dict[str, list[str]]:
    """label -> the tests (file::name) whose source cites it, or that a "Tested by:"
    paragraph citing the label names (when that test is defined under that name)."""
    out: dict[str, list[str]] = {}
    for path, functions in defined_tests().items():
        for name, source in functions.items():
            for label in set(LABEL.findall(source)):
                out.setdefault(label, []).append(f"{path}::{name}")
    for page in _pages():
        for paragraph in paragraphs_tested_by(page.read_text(encoding="utf-8")):
            named = [f"{p}::{n}" for p, n in TEST_REF.findall(paragraph)
                     if n in defined_tests().get(p, {})]
            for label in set(LABEL.findall(paragraph)):
                out.setdefault(label, []).extend(named)
    return out


def paragraphs_tested_by(text: str) -> list[str]:
    """The paragraphs that start with "Tested by:" (up to the next blank line)."""
    return [text[m.start():].split("\n\n", 1)[0] for m in TESTED_BY.finditer(text)]


# ------------------------------------------------------------------------------ checks
EQUATIONS = sorted(equations().items(), key=lambda kv: (kv[1], kv[0]))


def test_the_pages_number_equations() -> None:
    """The parser sees the equations of every numbering page (a vacuous pass otherwise)."""
    pages = set(equations().values())
    assert {"softmax.md", "attention.md", "recurrent.md", "layernorm.md"} <= pages
    assert {"SM10", "A7", "L7", "LN9", "AC3", "BC2"} <= set(equations())


@pytest.mark.parametrize("page", _pages(), ids=lambda p: p.name)
def test_each_page_defines_each_label_once(page: Path) -> None:
    labels = [label for label, _ in page_equations(page.read_text(encoding="utf-8"))]
    assert len(labels) == len(set(labels)), sorted(l for l in labels if labels.count(l) > 1)


def test_restated_equations_exist_on_their_page() -> None:
    for (page, label), home in RESTATED.items():
        assert equations().get(label) == home, (page, label)
        text = (DOCS / page).read_text(encoding="utf-8")
        assert label in [l for l, _ in page_equations(text)], (page, label)


def test_allow_list_names_real_equations() -> None:
    """The exceptions are equations that exist, each with a reason, and none of them is in
    fact cited by code (then it belongs in the general rule)."""
    for label, reason in NOTHING_TO_COMPUTE.items():
        assert label in equations() and reason.strip(), label
        assert label not in code_citations(), f"({label}) is cited in code: drop it here"


@pytest.mark.parametrize("label, page", EQUATIONS)
def test_equation_has_a_code_line(label: str, page: str) -> None:
    if label in NOTHING_TO_COMPUTE:
        return
    assert code_citations().get(label), (
        f"docs/{page} ({label}): no comment in tinygrad_rnn/ cites it; tag the line that "
        f"computes it with # ({label})")


@pytest.mark.parametrize("label, page", EQUATIONS)
def test_equation_has_a_test(label: str, page: str) -> None:
    assert citing_tests().get(label), (
        f"docs/{page} ({label}): no test cites it; name it in a test (a comment or the "
        f"docstring) or in a 'Tested by:' paragraph that cites ({label})")


def test_every_label_cited_in_code_is_an_equation() -> None:
    """A comment cites (X) only for a docs equation or the module's own label
    (tests/docs/test_equation_labels.py::LOCAL_PREFIXES)."""
    from tests.docs.test_equation_labels import LOCAL_PREFIXES
    unknown = {label: files for label, files in code_citations().items()
               if label not in equations()
               and re.match(r"[A-Z]+", label).group() not in LOCAL_PREFIXES}
    assert not unknown, unknown


def test_every_cited_test_is_defined_under_its_name() -> None:
    """Each test a page names is a literal ``def``: no generated names grep cannot find."""
    missing = []
    for page in _pages():
        for path, name in TEST_REF.findall(page.read_text(encoding="utf-8")):
            if name not in defined_tests().get(path, {}):
                missing.append(f"docs/{page.name}: {path}::{name}")
    assert not missing, "\n".join(missing)


def test_the_checks_can_fail() -> None:
    """The parsers find what they look for and miss what is not there."""
    text = "$$x \\tag{Q1}$$ and $$y \\qquad \\text{(Q2)}$$ and (Q3) in prose"
    assert page_equations(text) == [("Q1", 1), ("Q2", 1)]
    assert comment_labels("y = 1  # (Q4) here\ns = '(Q5)'\n") == {"Q4"}
    assert paragraphs_tested_by("a\n\nTested by: t (Q6)\nmore\n\nnext") == \
        ["Tested by: t (Q6)\nmore"]
