"""A passing run reads as a pass: no "Failing explicit example" reports attached to skips.

Hypothesis runs a test's ``@example`` cases first; when the body then skips (for example
``pytest.importorskip("torch")`` without torch), hypothesis attaches a "Failing explicit
example" report to the skip, and ``pytest -rs`` prints it in a green run. The parity tests
therefore skip before hypothesis starts (``torch_oracle.requires_torch``).
"""
from __future__ import annotations

import ast
import re
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

#: hypothesis tests with explicit examples that need torch (each once printed the report)
PARITY_TESTS = [
    "tests/test_ops_forward.py::test_cross_entropy_matches_torch",
    "tests/test_ops_forward.py::test_softmax_matches_torch",
    "tests/test_ops_forward.py::test_log_softmax_matches_torch",
    "tests/nn/test_layers.py::test_linear_matches_torch",
    "tests/test_losses_layout.py::test_cross_entropy_class_ids_match_torch",
    "tests/test_losses_layout.py::test_nll_loss_matches_torch",
    "tests/test_losses_layout.py::test_cross_entropy_probabilities_match_torch",
    "tests/test_losses_layout.py::test_target_shapes_are_refused_exactly_where_torch_refuses",
    "tests/test_views_inplace.py::test_views_and_writes_through_them_match_torch",
]


def test_parity_tests_skip_quietly_without_torch(tmp_path: Path) -> None:
    # hide torch from the child process: None in sys.modules makes `import torch` fail
    (tmp_path / "sitecustomize.py").write_text('import sys\nsys.modules["torch"] = None\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:randomly",
                           "-p", "no:cacheprovider", *PARITY_TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    # one summary line, every test skipped (the parametrized one counts twice)
    assert re.fullmatch(r"\d+ skipped in [\d.]+s", out.strip().splitlines()[-1]), out[-2000:]
    assert "could not import 'torch'" in out  # the reason, once per test
    assert "Failing explicit example" not in out, out[-4000:]


def _decorator_names(fn: ast.FunctionDef) -> set[str]:
    names = set()
    for dec in fn.decorator_list:
        node = dec.func if isinstance(dec, ast.Call) else dec
        names.add(node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", ""))
    return names


def test_no_hypothesis_test_skips_inside_its_examples() -> None:
    """Statically: a test with @example whose body calls pytest.importorskip also carries a
    skip marker that acts first (requires_torch or a skipif)."""
    offenders = []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef) or "example" not in _decorator_names(fn):
                continue
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr == "importorskip"]
            if calls and not _decorator_names(fn) & {"requires_torch", "skipif"}:
                offenders.append(f"{path.relative_to(ROOT)}::{fn.name}")
    assert not offenders, (f"hypothesis tests that skip inside their @example cases (add "
                           f"@requires_torch from tests/torch_oracle.py): {offenders}")
