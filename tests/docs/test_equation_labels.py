"""Every equation label a docstring or comment in the package cites points at the right place.

docs/index.md promises that each docs page numbers its equations with its own prefix. A label
in the package is either
* a citation of a docs label, e.g. (L11) of docs/recurrent.md: it must exist on some page; or
* a module-local label that the module's docstring defines at the start of a line, e.g.
  ``(LM1)  e_t = E[w_t]`` in tinygrad_rnn/lm/models.py: its prefix must not be one the docs
  use, or a reader following it lands on the wrong equation (the (R1) and (G1) collisions of
  issue #17).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABEL = re.compile(r"\(([A-Z]{1,3})(\d+)('?)\)")
TAG = re.compile(r"\\tag\{([A-Z]{1,3})(\d+)('?)\}")
# labels the docs define without \tag (docs/layernorm.md numbers its displays in the text)
TEXT_DEFINED = re.compile(r"^\s*\(([A-Z]{1,3})(\d+)('?)\)", re.M)


def _docs_labels() -> dict[str, str]:
    """label -> the docs page that defines it."""
    labels: dict[str, str] = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in TAG.finditer(text):
            labels["".join(match.groups())] = page.name
        if "\\tag{" not in text:
            for match in LABEL.finditer(text):
                labels.setdefault("".join(match.groups()), page.name)
    return labels


# module-local labels: defined in the module's own docstring, with a prefix no docs page uses
LOCAL_PREFIXES = {
    "LM": "tinygrad_rnn/lm/models.py",      # the recurrent LM, (LM1)-(LM5)
    "F": "tinygrad_rnn/lm/models.py",       # the feed-forward LM, (F1)-(F3)
    "D": "tinygrad_rnn/decoding.py",        # greedy decoding and sampling, (D1)-(D2)
    "C": "tinygrad_rnn/nn/classify.py",     # sequence classification, (C1)-(C3)
    "T": "tinygrad_rnn/nn/classify.py",     # sequence tagging, (T1)
}


def _prefix(label: str) -> str:
    return re.match(r"[A-Z]+", label).group()


def test_local_prefixes_are_not_docs_prefixes() -> None:
    docs_prefixes = {_prefix(label) for label in _docs_labels()}
    assert not set(LOCAL_PREFIXES) & docs_prefixes


def test_modules_with_local_labels_define_them_with_their_own_prefixes() -> None:
    """A line of such a module's docstring that starts with a label defines an equation; a
    docs prefix there ((R1), (G1), (S1) before issue #17) would collide with a docs page."""
    for module in sorted(set(LOCAL_PREFIXES.values())):
        text = (ROOT / module).read_text(encoding="utf-8")
        defined = {"".join(m.groups()) for m in TEXT_DEFINED.finditer(text)}
        own = {p for p, m in LOCAL_PREFIXES.items() if m == module}
        wrong = sorted(label for label in defined if _prefix(label) not in own)
        assert defined and not wrong, f"{module} defines {wrong}; its prefixes are {own}"


def test_every_label_in_the_package_is_a_docs_label_or_its_modules_own() -> None:
    docs = _docs_labels()
    problems = []
    for path in sorted((ROOT / "tinygrad_rnn").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        for match in LABEL.finditer(text):
            label = "".join(match.groups())
            if LOCAL_PREFIXES.get(_prefix(label)) == name or label in docs:
                continue
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"{name}:{line} cites ({label}), which is neither a docs label "
                            f"nor one of this module's own")
    assert not problems, "\n".join(problems)
