"""Share of argument-check lines in the kernel, op and attention modules (issue 15, part 3).

Run from the repository root::

    python benchmarks/check_share.py                  # the default module list
    python benchmarks/check_share.py PATH ...         # any other files
    python benchmarks/check_share.py --root DIR       # the default list of another checkout
                                                      # (e.g. `git worktree` of an old commit)

What counts, measured with :mod:`ast` and :mod:`tokenize` (no import of the package):

* a *code line* is a physical line that holds a token other than a comment, and that is not
  part of a docstring;
* a *check line* is a code line inside one of
  - an ``if`` statement whose body raises (the test and the raising body; an ``else`` that
    does not raise is not counted),
  - an ``assert``,
  - a statement that is a call (or an assignment from a call) to a check helper: a function
    whose name starts with ``check``/``_check``/``validate``/``_validate``/``require``, one
    of the scalar validators listed in :data:`VALIDATORS`, or any function reached through a
    check module (``_checks.f(...)``, ``_validate.f(...)``),
  - the definition of a check helper (a function named as above), whole.

Modules whose whole purpose is checking (``_checks.py``, ``_validate.py``) are listed on their
own lines below the total and not added to it: the question is how much of the *math*
modules' code is checking.
"""
from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "tinygrad_rnn"

#: Kernel, op and attention modules (the math), measured by default.
DEFAULT = [
    "bptt/_common.py", "bptt/_layout.py", "bptt/elman.py", "bptt/gru.py", "bptt/lstm.py",
    "ops/activations.py", "ops/base.py", "ops/elementwise.py", "ops/linalg.py",
    "ops/losses.py", "ops/normalization.py", "ops/reductions.py", "ops/selection.py",
    "ops/shape.py", "ops/attention.py",
    "nn/attention.py", "nn/_masks.py", "nn/layers.py", "nn/recurrent.py", "nn/cells.py",
]
#: Modules that are checks by design (reported separately when present).
CHECK_MODULES = ["bptt/_checks.py", "nn/_checks.py", "_validate.py"]

#: Scalar validators that predate the naming rule (the copies issue 15 replaces).
VALIDATORS = {
    "_size", "_flag", "_integer", "_finite", "_float_dtype", "check_input_dtype",
    "_positive_int", "_check_count", "_check_int", "keepdims_flag", "_positive_number",
    "positive_int", "flag", "finite_real", "nonnegative_int", "host_lengths", "float_dtype",
    "boolean", "probability", "_probability", "integer", "size",
}
CHECK_NAME = re.compile(r"^_?(check|validate|require)")
CHECK_MODULE_NAMES = {"_checks", "checks", "_validate", "validate"}


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def _code_lines(source: str, tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER, tokenize.ENCODING}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines - _docstring_lines(tree)


def _span(node: ast.AST) -> set[int]:
    return set(range(node.lineno, node.end_lineno + 1))


def _is_check_name(name: str) -> bool:
    return bool(CHECK_NAME.match(name)) or name in VALIDATORS


def _is_check_call(node: ast.AST) -> bool:
    if isinstance(node, ast.Await):
        node = node.value
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    if isinstance(f, ast.Name):
        return _is_check_name(f.id)
    if isinstance(f, ast.Attribute):
        base = f.value
        if isinstance(base, ast.Name) and base.id in CHECK_MODULE_NAMES:
            return True
        return _is_check_name(f.attr)
    return False


def _raises(body: list[ast.stmt]) -> bool:
    return any(isinstance(s, ast.Raise) for s in body)


def check_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_check_name(node.name):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines.update(range(start, node.end_lineno + 1))
        elif isinstance(node, ast.If) and _raises(node.body):
            lines.update(range(node.lineno, node.body[-1].end_lineno + 1))
        elif isinstance(node, ast.Assert):
            lines.update(_span(node))
        elif isinstance(node, ast.Expr) and _is_check_call(node.value):
            lines.update(_span(node))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None \
                and _is_check_call(node.value):
            lines.update(_span(node))
    return lines


def measure(path: Path) -> tuple[int, int]:
    source = path.read_text()
    tree = ast.parse(source)
    code = _code_lines(source, tree)
    return len(code), len(code & check_lines(tree))


def _row(name: str, code: int, checks: int) -> str:
    share = f"{100 * checks / code:5.1f}%" if code else "    -"
    return f"{name:<32} {code:6d} {checks:7d} {share:>7}"


def main(argv: list[str]) -> int:
    global PKG
    if argv[:1] == ["--root"]:
        PKG = Path(argv[1]).resolve() / "tinygrad_rnn"
        argv = argv[2:]
    paths = [Path(a) for a in argv] if argv else [PKG / p for p in DEFAULT]
    print(f"{'module':<32} {'code':>6} {'checks':>7} {'share':>7}")
    total_code = total_checks = 0
    for path in paths:
        if not path.exists():
            continue
        code, checks = measure(path)
        total_code += code
        total_checks += checks
        print(_row(str(path.relative_to(PKG) if path.is_relative_to(PKG) else path),
                   code, checks))
    print(_row("total (math modules)", total_code, total_checks))
    if not argv:
        present = [PKG / p for p in CHECK_MODULES if (PKG / p).exists()]
        if present:
            print("check modules (not in the total):")
            for path in present:
                print(_row(str(path.relative_to(PKG)), *measure(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
