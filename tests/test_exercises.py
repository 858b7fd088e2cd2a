"""Exercise mode (tinygrad_rnn/exercises.py, docs/exercises.md): the markers, the student copy,
and the grades.

The grades are real runs of ``check``: each task in its own Python process on a copy made by
``make``. To keep the file fast, one test grades every task (on the reference package) and
the others grade a few tasks each.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from pathlib import Path

import pytest

from tinygrad_rnn import cli
from tinygrad_rnn import exercises as ex
from tinygrad_rnn.exercise_checks import PROPERTIES

ROOT = Path(__file__).resolve().parents[1]

STUBBED = ("tanh_backward", "lstm_step_backward", "additive_attention_backward")
UNTOUCHED = ("sigmoid_backward", "rnn_step_backward", "clip_grad_norm")


def package_digest(folder: Path) -> dict:
    """sha256 of every file of the package (bytecode caches aside)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def region_body(region: ex.Region, folder: Path = ex.PACKAGE_DIR) -> str:
    """The text between a region's two markers in the package at ``folder``."""
    return ex.region_text(region.name, folder)


def replace_region(copy: Path, name: str, body: str) -> None:
    """Write ``body`` between the markers of region ``name`` in the copy at ``copy``."""
    ex.replace_region(copy / ex.PACKAGE, name, body)


def by_task(results: list) -> dict:
    return {r.task: r for r in results}


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A student copy with STUBBED taken out."""
    out = tmp_path_factory.mktemp("exercises") / "hw"
    ex.make(out, list(STUBBED))
    return out


# ------------------------------------------------------------------------------ markers
def test_markers_are_well_formed_and_every_task_has_its_regions() -> None:
    regions = ex.find_regions()  # raises on a begin without end, a reused name, a cut
    wanted = {r: t.name for t in ex.TASKS for r in t.regions}
    missing = sorted(set(wanted) - set(regions))
    assert not missing, f"markers deleted from the source: {missing} (tasks " \
                        f"{sorted({wanted[r] for r in missing})})"
    orphans = sorted(set(regions) - set(wanted))
    assert not orphans, f"marked regions that no task covers: {orphans}"
    for region in regions.values():  # every region is code, not only comments
        assert any(line.strip() and not line.strip().startswith("#")
                   for line in region_body(region).splitlines()), region


def test_every_task_names_docs_equations_and_checks_that_exist() -> None:
    from tinygrad_rnn.testing import suite

    for task in ex.TASKS:
        page = ROOT / task.page
        assert page.is_file(), (task.name, task.page)
        text = page.read_text(encoding="utf-8")
        if task.page.endswith(".md"):
            for eq in task.equations:
                assert f"\\tag{{{eq}}}" in text, f"{task.name}: ({eq}) is not on {task.page}"
            if task.section:
                assert re.search(rf"^#+ {re.escape(task.section)}\s*$", text, re.M), \
                    f"{task.name}: no section {task.section!r} on {task.page}"
        for c in task.checks:
            assert c.examples >= 1
            if c.kind == "suite":
                assert c.target in suite.BY_NAME, (task.name, c.target)
            else:
                assert c.kind == "property" and c.target in PROPERTIES, (task.name, c.target)
        assert all(n in ex.BY_NAME for n in task.needs), task.name


@pytest.mark.parametrize("text, error", [
    ("def f():\n    # exercise: a begin\n    return 1\n", "has no '# exercise: end'"),
    ("def f():\n    return 1\n    # exercise: end\n", "without a begin"),
    ("def f():\n    # exercise: a begin\n    # exercise: b begin\n    x = 1\n"
     "    # exercise: end\n    # exercise: end\n", "regions do not nest"),
    ("def f(x):\n    # exercise: a begin\n    if x:\n        y = 1\n"
     "    # exercise: end\n        y = 2\n    return y\n", "cuts the statement"),
    ("# exercise: a begin\nX = 1\n# exercise: end\n", "not inside a function body"),
    ("def f():\n        # exercise: a begin\n    return 1\n    # exercise: end\n",
     "indented 8 columns"),
    ("def f():\n    # exercise: a begin\n    # only a comment\n    # exercise: end\n"
     "    return 1\n", "holds no statement"),
    ("def f():\n    # exercise: a begin\n    return 1\n    # exercise: b end\n",
     "closes region 'a'"),
    ("def f():\n    # exercise: A-1 begin\n    return 1\n", "malformed marker"),
])
def test_malformed_markers_are_refused(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "m.py").write_text(text)
    with pytest.raises(ex.MarkerError, match=re.escape(error)):
        ex.find_regions(tmp_path)


def test_a_region_name_is_used_once_and_a_marker_in_a_string_is_no_marker(
        tmp_path: Path) -> None:
    body = "def f():\n    s = '''\n    # exercise: a begin\n    '''\n    # exercise: a begin\n" \
           "    return s\n    # exercise: end\n"
    (tmp_path / "one.py").write_text(body)
    assert list(ex.find_regions(tmp_path)) == ["a"]
    (tmp_path / "two.py").write_text(body)
    with pytest.raises(ex.MarkerError, match="already used at one.py:5"):
        ex.find_regions(tmp_path)


# --------------------------------------------------------------------------------- make
def test_make_writes_a_parsing_copy_without_solutions_and_never_touches_the_package(
        tmp_path: Path) -> None:
    before = package_digest(ex.PACKAGE_DIR)
    report = ex.make(tmp_path / "all")
    assert package_digest(ex.PACKAGE_DIR) == before
    assert report.tasks == [t.name for t in ex.TASKS]
    pkg = tmp_path / "all" / ex.PACKAGE
    regions = ex.find_regions()
    copied = ex.find_regions(pkg)  # the markers stay in the copy
    assert set(copied) == set(regions)
    for name, region in regions.items():
        stub = region_body(copied[name], pkg)
        task = next(t for t in ex.TASKS if name in t.regions)
        assert stub.lstrip().startswith("raise NotImplementedError(")
        assert ast.literal_eval(stub.strip()[len("raise NotImplementedError"):]) == \
            ex.stub_message(task)
        assert max(len(line) for line in stub.splitlines()) <= 100
        assert region_body(region).strip() not in (pkg / region.path).read_text()
    for file in report.files:
        ast.parse((pkg / file).read_text())
    manifest = json.loads((tmp_path / "all" / ex.MANIFEST).read_text())
    assert manifest["tasks"] == report.tasks
    readme = (tmp_path / "all" / "README.md").read_text()
    assert all(f"`{t.name}`" in readme for t in ex.TASKS)
    assert (tmp_path / "all" / "docs" / "index.md").is_file()


def test_make_refuses_unknown_tasks_an_existing_copy_and_the_package_itself(
        tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown task.*tanh_backward"):
        ex.make(tmp_path / "a", "tanh_backwards")
    ex.make(tmp_path / "b", "relu_backward")
    with pytest.raises(FileExistsError, match="a student's work"):
        ex.make(tmp_path / "b", "relu_backward")
    with pytest.raises(ValueError, match="overlaps the package"):
        ex.make(ex.PACKAGE_DIR / "out", "relu_backward")
    with pytest.raises(ValueError, match="refusing to edit the installed package"):
        ex.replace_region(ex.PACKAGE_DIR, "relu_backward", "        return g\n")
    with pytest.raises(ValueError, match="timeout must be a positive"):
        ex.check(tmp_path / "b", timeout=0)


# ------------------------------------------------------------------------------- grading
def test_the_reference_passes_every_task() -> None:
    results = ex.check(None, [t.name for t in ex.TASKS])
    failed = {r.task: r.failure for r in results if not r.passed}
    assert not failed
    assert all(r.checks == len(ex.BY_NAME[r.task].checks) for r in results)


def test_a_fresh_copy_fails_the_chosen_tasks_with_the_stub_and_passes_the_others(
        copy: Path) -> None:
    results = by_task(ex.check(copy, STUBBED + UNTOUCHED))
    for name in STUBBED:
        r = results[name]
        assert not r.passed
        assert f"NotImplementedError: exercise {name} (" in r.failure
        assert ex.BY_NAME[name].equation_text in r.failure  # the stub says what to derive
        assert r.equation == ex.BY_NAME[name].where
    for name in UNTOUCHED:
        assert results[name].passed, results[name].failure
    # without --tasks, check grades the tasks of the copy's manifest
    assert [r.task for r in ex.check(copy, timeout=60)] == list(STUBBED)


def test_a_task_solved_with_the_reference_code_passes_exactly_that_task(
        tmp_path: Path) -> None:
    out = tmp_path / "hw"
    ex.make(out, ["tanh_backward", "bptt_loop"])
    regions = ex.find_regions()
    for name in ex.BY_NAME["bptt_loop"].regions:
        replace_region(out, name, region_body(regions[name]))
    results = by_task(ex.check(out, ["tanh_backward", "bptt_loop"]))
    assert results["bptt_loop"].passed, results["bptt_loop"].failure
    assert not results["tanh_backward"].passed


def test_a_plausible_wrong_solution_fails_naming_the_worst_entry_and_the_equation(
        tmp_path: Path) -> None:
    out = tmp_path / "hw"
    ex.make(out, ["tanh_backward", "lstm_step_backward"])
    # tanh' taken as 1 - x^2 on the input instead of 1 - y^2 on the saved output
    replace_region(out, "tanh_backward",
                   "        (y,) = ctx.saved_arrays\n"
                   "        x = get_array_module(y).arctanh(y)\n"
                   "        return g * (1 - x ** 2)\n")
    # the reference LSTM step with the forget gate's derivative f (1 - f) left out
    lstm = region_body(ex.find_regions()["lstm_step_backward"])
    wrong = lstm.replace("da_f = dc * c.c_prev * f_t * (1 - f_t)", "da_f = dc * c.c_prev")
    assert wrong != lstm
    replace_region(out, "lstm_step_backward", wrong)
    results = by_task(ex.check(out, ["tanh_backward", "lstm_step_backward"]))
    tanh = results["tanh_backward"]
    assert not tanh.passed and tanh.check == "gradcheck tanh"
    assert "worst entry" in tanh.failure and "analytic" in tanh.failure
    assert "(AC3)" in tanh.equation
    lstm_result = results["lstm_step_backward"]
    assert not lstm_result.passed and "worst entry" in lstm_result.failure
    assert "(gate f, unit" in lstm_result.failure  # the wrong gate, by name
    assert re.search(r"\(L1[0-3]\)", lstm_result.equation), lstm_result.equation


def test_grading_is_deterministic_and_the_cli_writes_the_json(
        copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tasks = "tanh_backward,sigmoid_backward,gru_step_backward"
    docs = []
    for k in range(2):
        target = tmp_path / f"grades{k}.json"
        code = cli.main(["exercises", "check", str(copy), "--tasks", tasks,
                         "--json", str(target)])
        assert code == 1  # tanh_backward is stubbed in the copy
        docs.append(target.read_text())
    assert docs[0] == docs[1]
    doc = json.loads(docs[0])
    assert (doc["passed"], doc["total"]) == (2, 3)
    out = capsys.readouterr().out
    assert "FAIL" in out and "2/3 tasks pass" in out and "revisit: (AC3)" in out


def test_a_task_that_never_returns_is_stopped_by_the_time_limit(tmp_path: Path) -> None:
    out = tmp_path / "hw"
    ex.make(out, ["relu_backward"])
    replace_region(out, "relu_backward", "        while True:\n            pass\n")
    (result,) = ex.check(out, ["relu_backward"], timeout=4)
    assert not result.passed and result.check == "time limit"
    assert "time limit of 4 s" in result.failure


def test_a_copy_that_does_not_import_fails_with_the_error_and_its_line(tmp_path: Path) -> None:
    out = tmp_path / "hw"
    ex.make(out, ["exp_backward"])
    replace_region(out, "exp_backward", "        return g * y)\n")
    (result,) = ex.check(out, ["exp_backward"])
    assert not result.passed and result.check == "import"
    assert "SyntaxError" in result.failure and "elementwise.py" in result.failure


def test_a_copy_with_every_task_taken_out_still_imports_and_runs_forward(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "all"
    ex.make(out)
    code = ("import numpy as np, tinygrad_rnn as tr\n"
            "lstm = tr.nn.LSTM(3, 4)\n"
            "y, _ = lstm(tr.Tensor(np.ones((5, 2, 3), dtype=np.float32)))\n"
            "assert tr.__file__.startswith(%r), tr.__file__\n"
            "try:\n"
            "    y.tanh().sum().backward()\n"
            "except NotImplementedError as e:\n"
            "    print(e)\n") % str(out)
    proc = subprocess.run([sys.executable, "-c", code], cwd=out, capture_output=True,
                          text=True, env=ex._child_env(out), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("exercise ")  # the first missing piece says its name


def test_list_names_every_task_with_its_equations_and_code(
        capsys: pytest.CaptureFixture) -> None:
    assert cli.main(["exercises", "list"]) == 0
    out = capsys.readouterr().out
    regions = ex.find_regions()
    for task in ex.TASKS:
        assert f"{task.name}: {task.title}" in out
        assert task.where in out
        for name in task.regions:
            assert f"{regions[name].path}:{regions[name].begin}" in out
    assert "no marker" not in out
