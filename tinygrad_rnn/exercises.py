"""Exercise mode: a student copy of the package from the same source, graded by the gradient
checks (``tinygrad-rnn exercises list|make|check``; docs/exercises.md is the instructors'
page).

Markers
-------
A region of the reference source that a student writes is marked with two plain comments::

    # exercise: tanh_backward begin
    (y,) = ctx.saved_arrays
    return g * (1 - y * y)  # (AC3)
    # exercise: end

They change nothing (comments), need nothing, and keep the reference and the exercise from
drifting apart. A region is a whole function body or a run of whole statements inside one
(checked with :mod:`ast`); the begin marker sits at the indentation of its first statement.
Region names are unique across the package.

Tasks
-----
:data:`TASKS` lists each task: its title, the docs page, section and equations to derive, the
regions it covers, and the checks that grade it: entries of the gradient-check suite
(``tinygrad-rnn gradcheck``, the op registry's seeded examples) and property functions of
:mod:`tinygrad_rnn.exercise_checks` (raw-array central differences and properties).

make
----
:func:`make` copies the package (and, from a source checkout, docs/) into a folder and
replaces every region of the chosen tasks by ``raise NotImplementedError(...)`` naming the
task, the equations and how it is graded. The markers stay, so a solution goes between them.
The reference package is only read.

check
-----
:func:`check` grades each task in its own Python process with ``PYTHONPATH`` set to the copy,
so the copy's ``tinygrad_rnn`` is the one imported, under a time limit per task. The grading
code itself (this module and :mod:`tinygrad_rnn.exercise_checks`) is loaded from the
installation that runs ``check``, so editing a copy's checks changes no grade. Every example
comes from a NumPy generator seeded by (seed, task, check, example): two runs give the same
grades, and the same JSON.

Why one module of about 800 lines: the three commands of exercise mode (``list``, ``make``,
``check``) share the marker scanner and the task table; the checks that grade a task live in
:mod:`tinygrad_rnn.exercise_checks`.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tokenize
import traceback
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

__all__ = [
    "Task", "Check", "Region", "MarkerError", "MakeReport", "TaskResult", "TASKS", "BY_NAME",
    "PACKAGE_DIR", "find_regions", "region_text", "replace_region", "stub_message",
    "stub_source", "make", "check", "grade_task", "format_scoreboard", "format_list",
    "add_parser", "run_cli",
]

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name  # 'tinygrad_rnn'
MANIFEST = "exercises.json"  # written by make into OUT: the tasks handed out
RESULT_TAG = "@@tinygrad-rnn-exercise-result@@"
DEFAULT_TIMEOUT = 120.0

_BEGIN = re.compile(r"^(?P<indent>[ \t]*)# exercise: (?P<name>[a-z][a-z0-9_]*) begin\s*$")
_END = re.compile(r"^[ \t]*# exercise:(?: (?P<name>[a-z][a-z0-9_]*))? end\s*$")
_ANY = re.compile(r"#\s*exercise\s*:")


# ===================================================================== the task table
@dataclass(frozen=True)
class Check:
    """One check of a task.

    ``kind`` is ``'suite'`` (an entry of the gradient-check suite, ``target`` its name, as
    ``tinygrad-rnn gradcheck --ops TARGET`` runs it) or ``'property'`` (``target`` names a
    ``prop_*`` function of :mod:`tinygrad_rnn.exercise_checks`); ``examples`` seeded
    examples are run, stopping at the first failure.
    """

    kind: str
    target: str
    examples: int = 5

    @property
    def label(self) -> str:
        return (f"gradcheck {self.target}" if self.kind == "suite"
                else f"property {self.target}")


@dataclass(frozen=True)
class Task:
    """A task: what to derive (``page``, ``section``, ``equations``), where it goes
    (``regions``, marker names in the package) and how it is graded (``checks``).
    ``needs`` names tasks whose code these checks run through (a stub there fails here
    too)."""

    name: str
    title: str
    page: str
    section: str
    equations: tuple
    regions: tuple
    checks: tuple
    needs: tuple = ()

    @property
    def equation_text(self) -> str:
        return ", ".join(f"({e})" for e in self.equations)

    @property
    def where(self) -> str:
        """What to read: "(AC3) in docs/activations.md, section '2. tanh'", or for a task
        derived in a docstring "the Math section of Adam's docstring in tinygrad_rnn/...".
        """
        eqs = f"{self.equation_text} in " if self.equations else ""
        if not self.page.endswith(".md"):
            return f"{eqs}{self.section} in {self.page}"
        return f"{eqs}{self.page}, section '{self.section}'"


def _suite(*names: str, examples: int = 5) -> tuple:
    return tuple(Check("suite", n, examples) for n in names)


def _props(*names: str, examples: int = 5) -> tuple:
    return tuple(Check("property", n, examples) for n in names)


_OPS = ("topological_order",)  # an op's gradient check runs through the engine

TASKS: tuple[Task, ...] = (
    # elementwise ops and activations
    Task("tanh_backward", "tanh: the backward from the saved output", "docs/activations.md",
         "2. tanh", ("AC3",), ("tanh_backward",), _suite("tanh"), _OPS),
    Task("sigmoid_backward", "sigmoid: the backward from the saved output",
         "docs/activations.md", "3. Sigmoid, and its branch-free stable form", ("AC4",),
         ("sigmoid_backward",), _suite("sigmoid"), _OPS),
    Task("relu_backward", "ReLU: the backward", "docs/activations.md", "4. ReLU", ("AC7",),
         ("relu_backward",), _suite("relu"), _OPS),
    Task("exp_backward", "exp: the backward from the saved output", "docs/activations.md",
         "1. Elementwise ops have diagonal Jacobians", ("AC2",), ("exp_backward",),
         _suite("exp"), _OPS),
    Task("log_backward", "log: the backward", "docs/activations.md",
         "1. Elementwise ops have diagonal Jacobians", ("AC2",), ("log_backward",),
         _suite("log"), _OPS),
    # softmax family
    Task("softmax_backward", "softmax: the VJP without the Jacobian matrix",
         "docs/softmax.md", "2. The softmax Jacobian", ("SM4", "SM5"),
         ("softmax_backward",), _suite("softmax"), _OPS),
    Task("log_softmax_backward", "log-softmax: the VJP", "docs/softmax.md",
         "3. Log-softmax in the log-sum-exp form", ("SM7", "SM8"),
         ("log_softmax_backward",), _suite("log_softmax"), _OPS),
    Task("cross_entropy_backward", "cross entropy of logits: p - onehot(y)",
         "docs/softmax.md", "4. Cross entropy: the gradient $\\hat{y} - y$", ("SM9", "SM10"),
         ("cross_entropy_backward",), _suite("cross_entropy_plain"), _OPS),
    # matrix products and broadcasting
    Task("matmul_backward", "matmul: G B^T and A^T G, vectors and batches",
         "docs/broadcasting.md", "1. The matrix product, from indices",
         ("BC2", "BC3", "BC4", "BC5"), ("matmul_backward",), _suite("matmul", "linear"),
         _OPS),
    Task("sum_to_shape", "sum_to_shape: the gradient of broadcasting",
         "docs/broadcasting.md", "4. Broadcasting is a copy; its gradient is a sum",
         ("BC7", "BC8"), ("sum_to_shape",),
         _props("sum_to_shape", examples=20) + _suite("add", "mul", "broadcast_to"), _OPS),
    # the engine
    Task("topological_order", "the engine's topological order, without recursion",
         "docs/engine.md", "3. Topological order, without recursion", ("3",),
         ("topological_order",),
         _props("diamond_graphs", examples=10) + _props("deep_chain", examples=1)),
    # recurrent cells, one step
    Task("rnn_step_backward", "one Elman step backward", "docs/recurrent.md",
         "3. The Elman RNN", ("E4", "E5", "E6", "E7"), ("rnn_step_backward",),
         _props("rnn_step", examples=8)),
    Task("gru_step_backward", "one GRU step backward", "docs/recurrent.md", "4. The GRU",
         ("G6", "G7", "G8", "G9", "G10", "G11"), ("gru_step_backward",),
         _props("gru_step", examples=8)),
    Task("lstm_step_backward", "one LSTM step backward", "docs/recurrent.md", "5. The LSTM",
         ("L8", "L9", "L10", "L11", "L12", "L13"), ("lstm_step_backward",),
         _props("lstm_step", examples=8)),
    # through time
    Task("bptt_loop", "the BPTT loop: the loss at t plus what step t+1 sent back",
         "docs/recurrent.md", "2. Backpropagation through time", ("B3", "E3", "G5", "L7"),
         ("bptt_loop_elman", "bptt_loop_gru", "bptt_loop_lstm"),
         _props("elman_loop", "gru_loop", "lstm_loop", examples=4),
         ("rnn_step_backward", "gru_step_backward", "lstm_step_backward")),
    Task("truncated_bptt", "truncated BPTT: the windows of TBPTT(k1, k2)",
         "docs/truncation.md", "3. The windows", ("TB3", "TB4"), ("truncation_windows",),
         _props("truncation_windows", examples=30) + _props("truncated_gradient", examples=4),
         _OPS),
    Task("clip_grad_norm", "gradient clipping: scale by min(1, max_norm / (norm + 1e-6))",
         "tinygrad_rnn/nn/utils/__init__.py", "the Math section of clip_grad_norm_'s docstring",
         (), ("clip_grad_norm",), _props("clip_grad_norm", examples=20)),
    # attention
    Task("additive_attention_backward", "additive (Bahdanau) scores backward",
         "docs/attention.md", "3. The four scores and their derivatives", ("A7",),
         ("additive_scores_backward",), _props("additive_scores", examples=6)),
    Task("scaled_dot_attention_backward",
         "scaled dot-product attention backward: scores, masked softmax, weighted sum",
         "docs/attention.md", "4. The softmax over keys, with masks",
         ("A5", "A9", "A10", "A11"),
         ("scaled_dot_scores_backward", "masked_softmax_backward", "weighted_sum_backward"),
         _props("scaled_dot_scores", "masked_softmax", "weighted_sum", "scaled_dot_attention",
                examples=6)),
    # training
    Task("adam_step", "Adam's step: bias-corrected moments", "tinygrad_rnn/optim/adam.py",
         "the Math section of Adam's docstring", (), ("adam_step",),
         _props("adam_step", examples=10)),
)

BY_NAME: dict[str, Task] = {t.name: t for t in TASKS}
assert len(BY_NAME) == len(TASKS), "task names must be unique"


# ======================================================================== markers
class MarkerError(ValueError):
    """A malformed marker: ``path:line`` and what is wrong."""


@dataclass(frozen=True)
class Region:
    """One marked region: ``path`` relative to the package folder, ``begin``/``end`` the
    1-based lines of its two markers, ``indent`` the begin marker's indentation."""

    name: str
    path: str
    begin: int
    end: int
    indent: str


def _statements(tree: ast.AST) -> list:
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def _check_region(path: str, tree: ast.AST, region: Region) -> None:
    """The region holds whole statements, inside one function, at the marker's indent."""
    lo, hi = region.begin + 1, region.end - 1
    inside = []
    for node in _statements(tree):
        start = node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.decorator_list:
            start = node.decorator_list[0].lineno
        end = node.end_lineno or start
        if lo <= start and end <= hi:
            inside.append(node)
        elif start < lo and end >= hi:
            continue  # encloses the region (the function, a loop around it)
        elif start <= hi and end >= lo:
            raise MarkerError(f"{path}:{region.begin}: region {region.name!r} cuts the "
                              f"statement of lines {start}-{end} in two: a region holds "
                              f"whole statements")
    if not inside:
        raise MarkerError(f"{path}:{region.begin}: region {region.name!r} holds no statement")
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
             and n.body[0].lineno <= lo and (n.end_lineno or 0) >= hi]
    if not funcs:
        raise MarkerError(f"{path}:{region.begin}: region {region.name!r} is not inside a "
                          f"function body")
    first = min(inside, key=lambda n: n.lineno)
    if first.col_offset != len(region.indent):
        raise MarkerError(f"{path}:{region.begin}: the begin marker of {region.name!r} is "
                          f"indented {len(region.indent)} columns, its first statement "
                          f"{first.col_offset}")


def _scan(path: str, text: str) -> list[Region]:
    """The regions of one file, checked (begin/end pairs, no nesting, whole statements)."""
    regions: list[Region] = []
    open_: tuple | None = None
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text).readline)
                if tok.type == tokenize.COMMENT}  # a marker in a string is not a marker
    for number, line in enumerate(text.splitlines(), start=1):
        if number not in comments or not _ANY.search(line):
            continue
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if open_ is not None:
                raise MarkerError(f"{path}:{number}: region {begin['name']!r} begins inside "
                                  f"region {open_[0]!r} (line {open_[1]}); regions do not nest")
            open_ = (begin["name"], number, begin["indent"])
        elif end:
            if open_ is None:
                raise MarkerError(f"{path}:{number}: '# exercise: end' without a begin")
            if end["name"] and end["name"] != open_[0]:
                raise MarkerError(f"{path}:{number}: end of {end['name']!r} closes region "
                                  f"{open_[0]!r} (line {open_[1]})")
            regions.append(Region(open_[0], path, open_[1], number, open_[2]))
            open_ = None
        elif line.lstrip().startswith("#"):
            raise MarkerError(f"{path}:{number}: malformed marker {line.strip()!r}; write "
                              f"'# exercise: NAME begin' or '# exercise: end'")
    if open_ is not None:
        raise MarkerError(f"{path}:{open_[1]}: region {open_[0]!r} has no '# exercise: end'")
    if regions:
        tree = ast.parse(text, filename=path)
        for region in regions:
            _check_region(path, tree, region)
    return regions


def _python_files(package_dir: Path) -> list[Path]:
    return sorted(p for p in package_dir.rglob("*.py") if "__pycache__" not in p.parts)


def find_regions(package_dir: Path | str = PACKAGE_DIR) -> dict[str, Region]:
    """Every marked region of the package at ``package_dir``, by name; raises
    :class:`MarkerError` for a malformed marker or a name used twice."""
    package_dir = Path(package_dir)
    found: dict[str, Region] = {}
    for file in _python_files(package_dir):
        text = file.read_text(encoding="utf-8")
        if "exercise:" not in text:
            continue
        for region in _scan(file.relative_to(package_dir).as_posix(), text):
            if region.name in found:
                other = found[region.name]
                raise MarkerError(f"{region.path}:{region.begin}: region name {region.name!r} "
                                  f"is already used at {other.path}:{other.begin}")
            found[region.name] = region
    return found


def region_text(name: str, package_dir: Path | str = PACKAGE_DIR) -> str:
    """The code between the two markers of region ``name`` in the package at
    ``package_dir`` (default the installed one: the reference solution)."""
    region = find_regions(package_dir)[name]
    lines = (Path(package_dir) / region.path).read_text(encoding="utf-8").splitlines(True)
    return "".join(lines[region.begin:region.end - 1])


def replace_region(package_dir: Path | str, name: str, code: str) -> None:
    """Write ``code`` (whole lines, indented as the region) between the markers of region
    ``name`` in the package at ``package_dir``, as a student does by hand. Refuses the
    installed package itself."""
    package_dir = Path(package_dir).resolve()
    if package_dir == PACKAGE_DIR:
        raise ValueError("replace_region: refusing to edit the installed package; pass the "
                         "package folder of a copy (OUT/tinygrad_rnn)")
    region = find_regions(package_dir)[name]
    file = package_dir / region.path
    lines = file.read_text(encoding="utf-8").splitlines(True)
    lines[region.begin:region.end - 1] = [code if code.endswith("\n") else code + "\n"]
    file.write_text("".join(lines), encoding="utf-8")


# ======================================================================== make
def _checks_text(task: Task) -> str:
    return ", ".join(c.label for c in task.checks)


def stub_message(task: Task) -> str:
    """What the stub of ``task`` says: the task, what to derive, how it is graded."""
    return (f"exercise {task.name} ({task.title}): derive {task.where} and write it here; "
            f"graded by `tinygrad-rnn exercises check --tasks {task.name}` "
            f"({_checks_text(task)})")


def _stub_lines(task: Task, indent: str) -> list[str]:
    width = max(40, 99 - len(indent) - 8)
    parts = textwrap.wrap(stub_message(task), width=width, drop_whitespace=False)
    lines = [f"{indent}raise NotImplementedError("]
    lines += [f"{indent}    {json.dumps(p)}" for p in parts]
    lines[-1] += ")"
    return lines


def stub_source(text: str, regions: Sequence[Region], task_of: dict[str, Task]) -> str:
    """``text`` with each of ``regions`` (all in this file) replaced by the stub of its task
    (``task_of`` maps a region name to its task); the markers stay."""
    lines = text.splitlines(keepends=True)
    newline = "\n"
    for region in sorted(regions, key=lambda r: r.begin, reverse=True):
        stub = [s + newline for s in _stub_lines(task_of[region.name], region.indent)]
        lines[region.begin:region.end - 1] = stub  # between the two marker lines
    return "".join(lines)


def _parse_tasks(spec: str | Sequence[str] | None) -> list[Task]:
    if spec is None:
        return list(TASKS)
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [n for n in names if n]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; the tasks are "
                         f"{', '.join(BY_NAME)} (tinygrad-rnn exercises list)")
    if not names:
        raise ValueError("no task given")
    return [BY_NAME[n] for n in dict.fromkeys(names)]


def _ignore(folder: str, names: list[str]) -> set:
    return {n for n in names if n == "__pycache__" or n.endswith((".pyc", ".pyo"))}


def _readme(tasks: Sequence[Task], regions: dict, copied_docs: bool) -> str:
    lines = [
        f"# Exercises: {len(tasks)} task(s)",
        "",
        f"This folder holds a complete copy of `{PACKAGE}` in which the code of the tasks below",
        "has been taken out. Each missing piece raises `NotImplementedError` naming its task;",
        "everything else works. Write each piece between its two markers",
        "(`# exercise: NAME begin` ... `# exercise: end`), then grade your work from this folder:",
        "",
        "```",
        f"PYTHONPATH=. python -m {PACKAGE} exercises check          # every task below",
        f"PYTHONPATH=. python -m {PACKAGE} exercises check --tasks {tasks[0].name}",
        "```",
        "",
        "Each task is graded by float64 gradient checks and property tests on fixed seeded",
        "examples; a failure names the check, the shapes, the worst entry and the equation to",
        "revisit." + ("" if copied_docs else " The docs pages are in the project's docs/ folder."),
        "",
        "| task | what | derive | regions |",
        "|---|---|---|---|",
    ]
    for t in tasks:
        where = ", ".join(f"`{PACKAGE}/{regions[r].path}`" if r in regions else r
                          for r in t.regions)
        lines.append(f"| `{t.name}` | {t.title} | {t.where} | {where} |")
    return "\n".join(lines) + "\n"


@dataclass
class MakeReport:
    """What :func:`make` wrote: the copy's folder, the tasks and the files it stubbed."""

    out: Path
    tasks: list
    files: list
    seconds: float


def make(out: Path | str, tasks: str | Sequence[str] | None = None,
         source: Path | str = PACKAGE_DIR) -> MakeReport:
    """Write a student copy into ``out``: ``out/tinygrad_rnn`` (the package at ``source``
    with the regions of ``tasks`` stubbed; default every task), ``out/docs`` (from a source
    checkout), ``out/README.md`` (the tasks) and ``out/exercises.json`` (the manifest that
    ``check`` reads). ``source`` is only read."""
    start = time.perf_counter()
    chosen = _parse_tasks(tasks)
    source, out = Path(source).resolve(), Path(out).resolve()
    target = out / PACKAGE
    if out == source or source in out.parents or out in source.parents:
        raise ValueError(f"exercises make: OUT {out} overlaps the package at {source}; "
                         f"choose a folder outside it")
    if target.exists():
        raise FileExistsError(f"exercises make: {target} exists (a student's work?); choose "
                              f"a new folder or delete it first")
    regions = find_regions(source)
    missing = [(t.name, r) for t in chosen for r in t.regions if r not in regions]
    if missing:
        raise MarkerError("exercises make: no marker in the source for " + ", ".join(
            f"region {r!r} of task {t!r}" for t, r in missing))
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, target, ignore=_ignore)
    task_of = {r: t for t in chosen for r in t.regions}
    by_file: dict[str, list[Region]] = {}
    for name in task_of:
        by_file.setdefault(regions[name].path, []).append(regions[name])
    for path, file_regions in sorted(by_file.items()):
        file = target / path
        text = stub_source(file.read_text(encoding="utf-8"), file_regions, task_of)
        ast.parse(text, filename=str(file))  # a stub always parses; this says so loudly
        file.write_text(text, encoding="utf-8")
    docs = source.parent / "docs"
    copied_docs = (docs / "index.md").is_file()
    if copied_docs:
        shutil.copytree(docs, out / "docs", dirs_exist_ok=True)
    (out / "README.md").write_text(_readme(chosen, regions, copied_docs), encoding="utf-8")
    manifest = {"tasks": [t.name for t in chosen], "files": sorted(by_file)}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return MakeReport(out, [t.name for t in chosen], sorted(by_file),
                      time.perf_counter() - start)


# ======================================================================== grading
@dataclass
class TaskResult:
    """The grade of one task. ``failure`` is empty when it passed; ``check`` names the first
    failing check and ``equation`` the equation to revisit."""

    task: str
    passed: bool
    checks: int = 0
    check: str = ""
    failure: str = ""
    equation: str = ""
    seconds: float = 0.0
    blocked_by: list = field(default_factory=list)

    def as_json(self) -> dict:
        """Everything but the time (so two runs give identical JSON)."""
        return {"task": self.task, "passed": self.passed, "checks_passed": self.checks,
                "failed_check": self.check, "failure": self.failure,
                "revisit": self.equation, "blocked_by": self.blocked_by}


def _example_rng(seed: int, task: str, check: Check, k: int) -> Any:
    import numpy as np

    key = zlib.crc32(f"{task}/{check.kind}/{check.target}".encode())
    return np.random.default_rng([seed, key, k])


def _package_frame(exc: BaseException) -> str:
    """' (at tinygrad_rnn/ops/x.py:12)': the innermost frame inside the graded package."""
    frames = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(frames):
        parts = Path(frame.filename).parts
        if PACKAGE in parts and not frame.filename.endswith(("exercises.py",
                                                             "exercise_checks.py")):
            rel = "/".join(parts[parts.index(PACKAGE):])
            return f" (at {rel}:{frame.lineno})"
    return ""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, NotImplementedError):
        return f"NotImplementedError: {exc}"
    return f"{type(exc).__name__}: {exc}{_package_frame(exc)}"


def _run_suite_check(check_: Check, seed: int) -> tuple[bool, str]:
    """The examples of one entry of ``tinygrad-rnn gradcheck``'s suite, stopping at the first
    failure: (passed, what failed)."""
    from .tensor import Tensor
    from .testing import suite

    entry = suite.BY_NAME[check_.target]
    for k in range(check_.examples):
        problem = entry.sample(suite.example_rng(seed, entry.name, k))
        shapes = [tuple(x.shape) for x in problem.inputs if isinstance(x, Tensor)]
        try:
            report = suite.check_problem(problem)
        except Exception as exc:  # a stub, or a backward that raises
            return False, f"example {k}, inputs of shapes {shapes}: {_describe(exc)}"
        if not report.passed:
            return False, (
                f"example {k}, inputs of shapes {shapes}: worst entry d output "
                f"{report.output_index}{list(report.output_element)} / d {report.label}"
                f"{list(report.element)}: analytic {report.analytic:.10g}, numeric "
                f"{report.numeric:.10g} (abs error {abs(report.analytic - report.numeric):.3g}"
                f"; max over all entries {report.max_abs_error:.3g})")
    return True, ""


def grade_task(name: str, seed: int = 0) -> TaskResult:
    """Grade one task in this process, with whatever ``tinygrad_rnn`` is imported (the
    ``check`` command runs this in a child process on the copy)."""
    from . import exercise_checks

    task = BY_NAME[name]
    result = TaskResult(name, True)
    start = time.perf_counter()
    for check_ in task.checks:
        if check_.kind == "suite":
            ok, message = _run_suite_check(check_, seed)
            equation = ""
        else:
            prop = exercise_checks.PROPERTIES[check_.target]
            ok, message, equation = True, "", ""
            for k in range(check_.examples):
                try:
                    prop(_example_rng(seed, name, check_, k))
                except exercise_checks.PropertyFailure as exc:
                    ok, message, equation = False, f"example {k}: {exc.message}", \
                        exc.equation or ""
                    break
                except Exception as exc:
                    ok, message = False, f"example {k}: {_describe(exc)}"
                    break
        if not ok:
            result.passed, result.check, result.failure = False, check_.label, message
            result.equation = (f"({equation}) in {task.page}" if equation else task.where)
            break
        result.checks += 1
    result.seconds = time.perf_counter() - start
    return result


# The child process: import the copy's package (PYTHONPATH), then load the grading modules
# from the installation that runs `check` under their package names, so the copy's own
# exercises.py and exercise_checks.py (a student could edit them) are never used.
_CHILD = """
import importlib.util, json, sys
import {package}
for name, path in json.loads(sys.argv[1]):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
grader = sys.modules["{package}.exercises"]
result = grader.grade_task(sys.argv[2], int(sys.argv[3]))
result.seconds = 0.0
print(grader.RESULT_TAG + json.dumps(result.as_json()), flush=True)
"""


def _child_env(root: Path) -> dict:
    env = dict(os.environ)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(root) + (os.pathsep + old if old else "")
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _grade_in_child(root: Path, name: str, seed: int, timeout: float) -> TaskResult:
    here = PACKAGE_DIR
    grader = [[f"{PACKAGE}.exercise_checks", str(here / "exercise_checks.py")],
              [f"{PACKAGE}.exercises", str(here / "exercises.py")]]
    cmd = [sys.executable, "-c", _CHILD.format(package=PACKAGE), json.dumps(grader), name,
           str(seed)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=str(root), env=_child_env(root), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return TaskResult(name, False, check="time limit",
                          failure=f"ran past the time limit of {timeout:g} s (an endless "
                                  f"loop? a cycle in a graph walk?)",
                          equation=BY_NAME[name].where, seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            data = json.loads(line[len(RESULT_TAG):])
            return TaskResult(name, data["passed"], data["checks_passed"],
                              data["failed_check"], data["failure"], data["revisit"],
                              seconds)
    tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
    return TaskResult(name, False, check="import",
                      failure=f"the grading process exited with status {proc.returncode} "
                              f"before grading (does the copy import?):\n{tail}",
                      equation=BY_NAME[name].where, seconds=seconds)


def _root_of(out: Path | str | None) -> Path:
    """The folder to put on PYTHONPATH: ``out`` (a copy), or the folder holding the
    installed package."""
    if out is None:
        return PACKAGE_DIR.parent
    root = Path(out).resolve()
    if not (root / PACKAGE / "__init__.py").is_file():
        raise FileNotFoundError(f"exercises check: {root} holds no {PACKAGE}/ package (make "
                                f"one with `tinygrad-rnn exercises make {out}`)")
    return root


def _default_tasks(root: Path) -> list[Task]:
    manifest = root / MANIFEST
    if manifest.is_file():
        return _parse_tasks(json.loads(manifest.read_text(encoding="utf-8"))["tasks"])
    return list(TASKS)


def check(out: Path | str | None = None, tasks: str | Sequence[str] | None = None,
          seed: int = 0, timeout: float = DEFAULT_TIMEOUT,
          progress: Any = None) -> list[TaskResult]:
    """Grade ``tasks`` (default: those of the copy's manifest, else all) on the copy at
    ``out`` (default: the installed package), each in a child process under ``timeout``
    seconds. ``progress(result)`` is called after each task."""
    if not timeout > 0:
        raise ValueError(f"exercises check: timeout must be a positive number of seconds, "
                         f"got {timeout!r}")
    root = _root_of(out)
    chosen = _parse_tasks(tasks) if tasks is not None else _default_tasks(root)
    results = []
    for task in chosen:
        result = _grade_in_child(root, task.name, seed, timeout)
        results.append(result)
        if progress is not None:
            progress(result)
    failed = {r.task for r in results if not r.passed}
    for r in results:
        if not r.passed:
            r.blocked_by = [n for n in BY_NAME[r.task].needs if n in failed]
    return results


def format_scoreboard(results: Sequence[TaskResult]) -> str:
    """The table ``check`` prints: task, result, time; under each failure the failing check,
    what went wrong and the equation to revisit."""
    width = max([len("task")] + [len(r.task) for r in results]) + 2
    lines = [f"{'task':<{width}}{'result':<8}{'checks':>7}{'time':>8}", "-" * (width + 23)]
    for r in results:
        lines.append(f"{r.task:<{width}}{'pass' if r.passed else 'FAIL':<8}{r.checks:>7}"
                     f"{r.seconds:>7.1f}s")
        if not r.passed:
            body = [f"failed: {r.check}"] + r.failure.splitlines() + [f"revisit: {r.equation}"]
            if r.blocked_by:
                body.append(f"needs: {', '.join(r.blocked_by)}, which fail(s) too: solve "
                            f"it first")
            for line in body:
                lines.extend(textwrap.wrap(line, 96, initial_indent="    ",
                                           subsequent_indent="      ") or [""])
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} tasks pass")
    return "\n".join(lines)


def format_list() -> str:
    """The tasks, each with its docs equations, regions and checks."""
    regions = find_regions()
    lines = []
    for t in TASKS:
        where = ", ".join(f"{regions[r].path}:{regions[r].begin}" if r in regions
                          else f"{r} (no marker!)" for r in t.regions)
        lines += [f"{t.name}: {t.title}", f"    derive: {t.where}", f"    code:   {where}",
                  f"    graded: {_checks_text(t)}"]
    return "\n".join(lines)


# ======================================================================== command line
def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``exercises`` to the ``tinygrad-rnn`` subcommands ``sub``."""
    parser = sub.add_parser(
        "exercises", help="student copies with tasks taken out, graded by gradient checks",
        description="Exercise mode for instructors (docs/exercises.md). list: the tasks and "
                    "their docs equations. make OUT: a copy of the package in OUT with the "
                    "chosen tasks' code replaced by NotImplementedError stubs. check [OUT]: "
                    "grade each task of the copy (default: the installed package) by float64 "
                    "gradient checks and properties on fixed seeds, in its own process "
                    "with a time limit; exits 1 when a task fails.",
        epilog="examples:\n  tinygrad-rnn exercises list\n"
               "  tinygrad-rnn exercises make hw1 --tasks tanh_backward,lstm_step_backward\n"
               "  tinygrad-rnn exercises check hw1 --json grades.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("list", "make", "check"), metavar="ACTION",
                        help="list, make or check")
    parser.add_argument("out", nargs="?", metavar="OUT",
                        help="the copy's folder (make: required; check: default the "
                             "installed package)")
    parser.add_argument("--tasks", metavar="T1,T2",
                        help="comma-separated task names (default: all; check: the copy's "
                             "tasks)")
    parser.add_argument("--json", metavar="FILE", help="check: write the grades as JSON")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                        help=f"check: seconds allowed per task (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="check: seed of the examples (default 0)")
    return parser


def run_cli(args: argparse.Namespace) -> int:
    """Run the parsed ``tinygrad-rnn exercises`` command; returns the exit status."""
    try:
        if args.action == "list":
            print(format_list())
            return 0
        if args.action == "make":
            if not args.out:
                print("tinygrad-rnn exercises make: error: OUT is required", file=sys.stderr)
                return 2
            report = make(args.out, args.tasks)
            print(f"wrote {report.out} with {len(report.tasks)} task(s) taken out "
                  f"({', '.join(report.tasks)}) in {len(report.files)} file(s); "
                  f"{report.seconds:.1f} s. Students read {report.out / 'README.md'}.")
            return 0
        results = check(args.out, args.tasks, seed=args.seed, timeout=args.timeout,
                        progress=lambda r: print(f"  {r.task}: {'pass' if r.passed else 'FAIL'}"
                                                 f" ({r.seconds:.1f} s)", file=sys.stderr))
    except (ValueError, FileExistsError, FileNotFoundError) as err:
        message = str(err).removeprefix(f"exercises {args.action}: ")
        print(f"tinygrad-rnn exercises {args.action}: error: {message}", file=sys.stderr)
        return 2
    print(format_scoreboard(results))
    if args.json:
        doc = {"seed": args.seed, "passed": sum(r.passed for r in results),
               "total": len(results), "tasks": [r.as_json() for r in results]}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0 if all(r.passed for r in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tinygrad_rnn.exercises ACTION ...`` (the same as the CLI subcommand)."""
    parser = argparse.ArgumentParser(prog="python -m tinygrad_rnn.exercises")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    return run_cli(parser.parse_args(["exercises", *(sys.argv[1:] if argv is None
                                                     else argv)]))


if __name__ == "__main__":
    sys.exit(main())
