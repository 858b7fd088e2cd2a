"""The ``tinygrad-rnn`` command end to end: ``main([...])`` in-process (and ``python -m
tinygrad_rnn`` once in a subprocess) for demo, gradcheck, bench and info, at small sizes.

The gradcheck tests prove the command can fail: a deliberately broken backward (an op's, a
cell's through its ops, or a fused BPTT kernel's) makes it exit 1 and mark the entry FAIL.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.testing import suite
from tinygrad_rnn import bptt, cli, ops
from tinygrad_rnn.gradcheck import flatten_outputs
from tinygrad_rnn.ops.base import Function

ROOT = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _table_rows(out: str) -> dict[str, str]:
    """entry name -> 'ok' / 'FAIL' from the printed gradcheck table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] in suite.BY_NAME:
            rows[parts[0]] = parts[-1]
    return rows


# ----------------------------------------------------------------------------- parser
def test_help_lists_every_command_with_examples(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in ("demo", "gradcheck", "bench", "info"):
        assert command in out
    assert "examples:" in out and "tinygrad-rnn gradcheck --ops" in out


@pytest.mark.parametrize("command", ["demo", "gradcheck", "bench", "info", "plot", "sweep"])
def test_subcommand_help(capsys: pytest.CaptureFixture, command: str) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0 and f"tinygrad-rnn {command}" in out


def test_version(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"tinygrad_rnn {tr.__version__}"


@pytest.mark.parametrize("argv", [["frobnicate"], ["info", "--bogus"], ["--bogus"],
                                  ["gradcheck", "--examples", "0"],
                                  ["gradcheck", "--examples", "many"],
                                  ["gradcheck", "--seed", "-1"],
                                  ["demo", "quickstart", "--seed", "x"]])
def test_bad_arguments_exit_2_with_a_message(capsys: pytest.CaptureFixture,
                                              argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "error:" in err and "usage: tinygrad-rnn" in err


def test_bare_command_prints_the_help_and_exits_0(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    assert out == run(capsys, "--help")[1]  # the same text as --help
    assert out.startswith("usage: tinygrad-rnn") and "examples:" in out


def test_bare_python_dash_m_prints_the_help_in_a_subprocess() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    proc = subprocess.run([sys.executable, "-m", "tinygrad_rnn"], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: tinygrad-rnn") and "COMMAND" in proc.stdout


# ----------------------------------------------------------------------- progress bars
class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("value, tty, expected", [
    (None, True, True), (None, False, False),      # unset: a terminal only
    ("", True, True), ("0", True, False), ("off", True, False), ("False", True, False),
    ("1", False, True), ("yes", False, True), (" ON ", False, True),
])
def test_progress_enabled_follows_the_environment_then_the_terminal(
        monkeypatch: pytest.MonkeyPatch, value: str | None, tty: bool, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv(cli.PROGRESS_ENV, raising=False)
    else:
        monkeypatch.setenv(cli.PROGRESS_ENV, value)
    assert cli.progress_enabled(stream=_Stream(tty)) is expected
    assert cli.progress_enabled(True, stream=_Stream(tty)) is False  # --no-progress wins


def test_progress_enabled_refuses_an_unknown_value_by_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cli.PROGRESS_ENV, "maybe")
    with pytest.raises(ValueError, match="TINYGRAD_RNN_PROGRESS='maybe' is not understood"):
        cli.progress_enabled(stream=_Stream(True))


def test_progress_is_off_for_a_stream_without_isatty_or_a_closed_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cli.PROGRESS_ENV, raising=False)
    assert cli.progress_enabled(stream=object()) is False

    class Closed:
        def isatty(self) -> bool:
            raise ValueError("I/O operation on closed file")

    assert cli.progress_enabled(stream=Closed()) is False


@pytest.mark.parametrize("demo", ["vanishing_gradients", "char_lm", "string_reversal"])
def test_training_demos_take_no_progress_and_pass_it_to_training(
        demo: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = ROOT / "tinygrad_rnn" / "demos" / f"{demo}.py"
    assert "--no-progress" in cli.demo_options(path)
    module = cli._load_script(path, "_test_progress_")
    assert module.parse_args(["--no-progress"]).no_progress is True
    assert module.parse_args([]).no_progress is False
    # the demo's progress bars are driven by progress_enabled(args.no_progress)
    assert "progress_enabled(args.no_progress)" in path.read_text(encoding="utf-8")


def test_demo_passes_no_progress_on_or_notes_it_is_ignored(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(cli, "_call_main",
                        lambda fn, argv, prog: calls.append(argv) or 0)
    code, _, err = run(capsys, "demo", "char_lm", "--no-progress", "--quick")
    assert code == 0 and calls[-1] == ["--quick", "--no-progress"] and err == ""
    code, _, err = run(capsys, "demo", "quickstart", "--no-progress")
    assert code == 0 and calls[-1] == []
    assert "demo 'quickstart' has no --no-progress option; ignored" in err


def test_a_demo_run_into_a_pipe_writes_no_progress_bars(tmp_path: Path) -> None:
    """Not a terminal: no carriage-return bar updates in stderr (they flooded logs)."""
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1")
    env.pop(cli.PROGRESS_ENV, None)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(ROOT / "demos" / "string_reversal.py"),
                           "--quick", "--steps", "3", "--out", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "\r" not in proc.stderr and "it/s" not in proc.stderr, proc.stderr[-500:]


# ----------------------------------------------------------------------------- info
def test_info_in_process(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "info")
    assert code == 0
    assert f"tinygrad_rnn {tr.__version__}" in out
    assert f"numpy       {np.__version__}" in out
    for name in ("matplotlib", "tqdm", "hypothesis", "torch", "cupy", "BLAS:",
                 "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", f"CPU count {os.cpu_count()}"):
        assert name in out
    assert "numpy (CPU): available" in out and "cupy (GPU):" in out
    assert f"host allocator:\n  {tr.malloc_tuning.status()}\n" in out
    assert "benchmarks/ found" in out  # running from this checkout
    assert f"demos:\n  {len(cli.available_demos())} in {ROOT / 'tinygrad_rnn' / 'demos'}" in out


def test_info_reports_missing_packages_and_installed_copy(capsys: pytest.CaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    real = cli.importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name in ("torch", "cupy") else real(name, *args)

    monkeypatch.setattr(cli.importlib.util, "find_spec", find_spec)
    monkeypatch.setattr(cli, "source_root", lambda: None)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    code, out, _ = run(capsys, "info")
    assert code == 0
    assert "torch       not installed" in out and "cupy        not installed" in out
    assert "cupy (GPU): not installed" in out
    assert "OMP_NUM_THREADS         3" in out
    assert "no (installed package)" in out


def test_python_dash_m_info_in_a_subprocess() -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    proc = subprocess.run([sys.executable, "-m", "tinygrad_rnn", "info"], cwd=str(ROOT),
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"tinygrad_rnn {tr.__version__}" in proc.stdout
    assert f"Python {sys.version.split()[0]}" in proc.stdout


# ----------------------------------------------------------------------------- demo
def test_demo_quickstart_runs(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "demo", "quickstart", "--seed", "1")
    assert code == 0, err
    assert "gradcheck (float64, central differences): passed=True" in out
    assert "softmax Jacobian" in out


def test_demo_quickstart_ignores_options_it_lacks(capsys: pytest.CaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    calls = []
    monkeypatch.setattr(cli, "_call_main",
                        lambda fn, argv, prog: calls.append((fn, argv, prog)) or 0)
    code, _, err = run(capsys, "demo", "quickstart", "--quick", "--out", str(tmp_path),
                       "--seed", "5")
    assert code == 0
    (fn, argv, prog), = calls
    assert argv == ["--seed", "5"] and prog == "tinygrad-rnn demo quickstart"
    assert Path(fn.__globals__["__file__"]) == ROOT / "tinygrad_rnn" / "demos" / "quickstart.py"
    assert "no --quick option" in err and "no --out option" in err


def test_demo_vanishing_gradients_gets_quick_out_and_seed(capsys: pytest.CaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    # the real run takes a minute or two even with --quick; here: the right main, the
    # right argv (the demo's options are read from its argparse calls)
    calls = []
    monkeypatch.setattr(cli, "_call_main",
                        lambda fn, argv, prog: calls.append((fn, argv, prog)) or 7)
    code, _, err = run(capsys, "demo", "vanishing_gradients", "--quick", "--out",
                       str(tmp_path), "--seed", "3")
    assert code == 7  # the demo's return code is the command's
    (fn, argv, _), = calls
    assert Path(fn.__globals__["__file__"]) == ROOT / "tinygrad_rnn" / "demos" / "vanishing_gradients.py"
    assert fn.__name__ == "main"
    assert argv == ["--quick", "--out", str(tmp_path), "--seed", "3"]
    assert err == ""


def test_demo_options_are_read_from_argparse_calls() -> None:
    assert cli.demo_options(ROOT / "tinygrad_rnn" / "demos" / "vanishing_gradients.py") == {
        "--quick", "--out", "--seed", "--device", "--no-progress", "--run-dir"}
    assert cli.demo_options(ROOT / "tinygrad_rnn" / "demos" / "quickstart.py") == {"--seed", "--device"}


@pytest.mark.parametrize("demo", ["vanishing_gradients", "char_lm", "string_reversal"])
def test_training_demos_take_run_dir_and_the_command_passes_it_on(
        demo: str, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    path = ROOT / "tinygrad_rnn" / "demos" / f"{demo}.py"
    module = cli._load_script(path, "_test_run_dir_")
    assert module.parse_args(["--run-dir", str(tmp_path)]).run_dir == str(tmp_path)
    assert module.parse_args([]).run_dir is None
    # each of the demo's training loops writes its own run folder inside the demo's
    assert 'run_dir=runs.child(getattr(args, "run", None), ' in path.read_text("utf-8")
    calls = []
    monkeypatch.setattr(cli, "_call_main", lambda fn, argv, prog: calls.append(argv) or 0)
    assert run(capsys, "demo", demo, "--run-dir", str(tmp_path))[0] == 0
    assert calls[-1] == ["--run-dir", str(tmp_path)]


def test_run_demo_writes_the_demos_run_folder_and_one_per_training_loop(
        capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    """What --run-dir does in every training demo: run_demo opens the demo's run folder
    as args.run, and each fit writes its own folder inside it."""
    import argparse

    from tinygrad_rnn import runs

    def demo(args: argparse.Namespace) -> None:
        for name in ("LSTM", "Elman tanh"):
            w = tr.zeros(3, requires_grad=True)
            opt = tr.optim.SGD([w], lr=0.1)
            tr.training.fit(lambda i: ((w - 1.0) ** 2).sum(), 4, opt, progress=False,
                            run_dir=runs.child(getattr(args, "run", None), name))

    args = argparse.Namespace(run_dir=str(tmp_path / "run"), seed=5, device="cpu")
    assert cli.run_demo("toy", args, demo) == 0
    manifest = runs.read_manifest(tmp_path / "run")
    assert manifest["status"] == "finished" and manifest["seed"] == 5
    assert manifest["config"]["run_dir"] == str(tmp_path / "run")
    folders = runs.find_runs(tmp_path / "run")
    assert [f.name for f in folders] == ["Elman_tanh", "LSTM"]
    assert all(len(runs.read_metrics(f)["step"]) == 4 for f in folders)
    assert run(capsys, "plot", str(tmp_path / "run"))[0] == 0
    assert (tmp_path / "run" / "figures" / "learning_curves.png").is_file()
    # the same --run-dir again: exit 2 naming the folder, and the first run is untouched
    args = argparse.Namespace(run_dir=str(tmp_path / "run"), seed=6, device="cpu")
    assert cli.run_demo("toy", args, demo) == 2
    err = capsys.readouterr().err
    assert f"toy: error: --run-dir: RunWriter: {tmp_path / 'run'} already holds a run" in err
    assert runs.read_manifest(tmp_path / "run")["seed"] == 5
    # a demo that fails leaves its run folder marked failed, with the error
    def broken(args: argparse.Namespace) -> None:
        raise RuntimeError("out of memory")

    args = argparse.Namespace(run_dir=str(tmp_path / "failed"), seed=5, device="cpu")
    with pytest.raises(RuntimeError):
        cli.run_demo("toy", args, broken)
    assert runs.read_manifest(tmp_path / "failed")["error"]["message"] == "out of memory"
    # without --run-dir nothing is written and args.run is None
    args = argparse.Namespace(run_dir=None, seed=5, device="cpu")
    assert cli.run_demo("toy", args, demo) == 0 and args.run is None


def test_demo_device_runs_the_quickstart_on_the_standin(capsys: pytest.CaptureFixture
                                                        ) -> None:
    """A real (tiny) run through the command: --device reaches the demo, whose tensors then
    live on the stand-in device; every printed number equals the CPU run's."""
    code, out, err = run(capsys, "demo", "quickstart", "--seed", "1", "--device", "standin")
    assert code == 0, err
    assert "(on standin)" in out and "passed=True" in out
    code, cpu_out, err = run(capsys, "demo", "quickstart", "--seed", "1")
    assert code == 0, err
    assert "(on cpu)" in cpu_out
    assert out.replace("(on standin)", "(on cpu)") == cpu_out


@pytest.mark.parametrize("name", ["vanishing_gradients", "string_reversal", "char_lm"])
def test_demo_device_is_passed_to_the_training_demos(capsys: pytest.CaptureFixture,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      name: str) -> None:
    calls = []
    monkeypatch.setattr(cli, "_call_main",
                        lambda fn, argv, prog: calls.append((fn, argv)) or 0)
    code, _, err = run(capsys, "demo", name, "--quick", "--device", "standin")
    assert code == 0 and err == ""
    (fn, argv), = calls
    assert argv == ["--quick", "--device", "standin"]
    args = fn.__globals__["parse_args"](argv)  # the demo's own parser accepts it
    assert args.device == "standin" and args.quick


def test_demo_device_cuda_without_cupy_exits_2(capsys: pytest.CaptureFixture,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tinygrad_rnn import backend

    monkeypatch.setattr(backend, "_try_cupy", lambda: None)
    code, out, err = run(capsys, "demo", "quickstart", "--device", "cuda")
    assert code == 2 and out == ""
    assert "quickstart: error: device 'cuda' needs CuPy" in err


def test_demo_without_a_device_option_ignores_it(capsys: pytest.CaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    folder = _fake_demos(tmp_path, {"plain": "def main(argv):\n    print('ran', argv)\n"})
    monkeypatch.setattr(cli, "demos_folder", lambda: folder)
    code, out, err = run(capsys, "demo", "plain", "--device", "standin")
    assert code == 0 and "ran []" in out
    assert "demo 'plain' has no --device option; ignored" in err


def test_unknown_demo_exits_2_and_lists_demos(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "demo", "no_such_demo")
    assert code == 2 and out == ""
    assert "unknown demo 'no_such_demo'" in err
    assert "quickstart" in err and "vanishing_gradients" in err


def test_demo_without_name_lists_demos(capsys: pytest.CaptureFixture) -> None:
    expected = sorted(p.stem for p in (ROOT / "tinygrad_rnn" / "demos").glob("*.py")
                      if not p.name.startswith("_"))
    assert {"quickstart", "vanishing_gradients"} <= set(expected)
    code, _, err = run(capsys, "demo")
    assert code == 2 and ", ".join(expected) in err
    code, out, _ = run(capsys, "demo", "--list")
    assert code == 0 and out.split() == expected


def _fake_demos(tmp_path: Path, scripts: dict[str, str]) -> Path:
    """A demos folder of the given scripts (the CLI is pointed at it by the test)."""
    (tmp_path / "demos").mkdir()
    for name, body in scripts.items():
        (tmp_path / "demos" / f"{name}.py").write_text(body)
    return tmp_path / "demos"


def test_demo_exit_codes_and_system_exit(capsys: pytest.CaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    folder = _fake_demos(tmp_path, {
        "three": "def main(argv):\n    return 3\n",
        "none": "def main(argv):\n    print('ran', argv)\n",
        "exits": "import sys\ndef main(argv):\n    sys.exit('demo gave up')\n",
        "_private": "def main(argv):\n    return 0\n",
    })
    monkeypatch.setattr(cli, "demos_folder", lambda: folder)
    assert run(capsys, "demo", "three")[0] == 3
    code, out, _ = run(capsys, "demo", "none", "--seed", "4")
    assert code == 0 and "ran []" in out  # the demo declares no --seed: not passed
    code, _, err = run(capsys, "demo", "exits")
    assert code == 1 and "demo gave up" in err
    code, _, err = run(capsys, "demo", "_private")
    assert code == 2 and "available demos: exits, none, three" in err


def test_bench_explains_a_missing_source_checkout_and_demos_need_none(
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "source_root", lambda: None)
    code, out, err = run(capsys, "bench", "--quick")
    assert code == 2 and out == ""
    assert "source repository" in err and "pip install -e ." in err
    # the demos ship inside the package: an installed copy runs them
    calls = []
    monkeypatch.setattr(cli, "_call_main", lambda fn, argv, prog: calls.append(prog) or 0)
    assert run(capsys, "demo", "quickstart")[0] == 0
    assert calls == ["tinygrad-rnn demo quickstart"]


def test_source_checkout_without_the_folder(capsys: pytest.CaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.setattr(cli, "source_root", lambda: tmp_path)
    code, _, err = run(capsys, "bench", "--quick")
    assert code == 2 and f"looked for {tmp_path / 'benchmarks'}" in err


def test_source_root_is_this_checkout() -> None:
    assert cli.source_root() == ROOT


# ----------------------------------------------------------------------------- gradcheck
def test_gradcheck_every_entry_passes(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "gradcheck", "--examples", "2", "--seed", "3")
    assert code == 0, out + err
    rows = _table_rows(out)
    assert rows == {name: "ok" for name in suite.BY_NAME}
    assert f"all {len(suite.SUITE)} passed" in out


def test_gradcheck_every_entry_passes_on_the_standin_device(capsys: pytest.CaptureFixture
                                                            ) -> None:
    """The whole suite on the stand-in device: every op, cell and layer's backward runs
    under CuPy's rules (no NumPy call on device data) and still matches central
    differences."""
    code, out, err = run(capsys, "gradcheck", "--examples", "1", "--seed", "5",
                         "--device", "standin")
    assert code == 0, out + err
    assert "on standin" in out
    assert _table_rows(out) == {name: "ok" for name in suite.BY_NAME}


def test_gradcheck_on_the_standin_catches_a_broken_backward(capsys: pytest.CaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    monkeypatch.setattr(ops.Tanh, "backward", _scaled(ops.Tanh.backward))
    code, out, _ = run(capsys, "gradcheck", "--ops", "tanh,add", "--examples", "2",
                       "--device", "standin")
    assert code == 1 and _table_rows(out) == {"tanh": "FAIL", "add": "ok"}
    assert "--device standin" in out  # the reproduce line keeps the device


def test_gradcheck_on_cuda_without_cupy_is_a_usage_error(capsys: pytest.CaptureFixture,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    from tinygrad_rnn import backend

    monkeypatch.setattr(backend, "_try_cupy", lambda: None)
    code, _, err = run(capsys, "gradcheck", "--ops", "tanh", "--device", "cuda")
    assert code == 2 and "needs CuPy" in err


def _scaled(orig: Callable, factor: float = 1.01) -> staticmethod:
    """A backward returning ``factor`` times the true gradient."""
    def backward(ctx: Any, *grad_outs: Any) -> Any:
        out = orig(ctx, *grad_outs)
        if isinstance(out, tuple):
            return tuple(None if g is None else g * factor for g in out)
        return out * factor
    return staticmethod(backward)


def test_gradcheck_exits_1_when_tanh_backward_is_broken(capsys: pytest.CaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setattr(ops.Tanh, "backward", _scaled(ops.Tanh.backward))
    code, out, _ = run(capsys, "gradcheck", "--ops", "tanh,rnn_cell_tanh,add",
                       "--examples", "3")
    assert code == 1
    assert _table_rows(out) == {"tanh": "FAIL", "rnn_cell_tanh": "FAIL", "add": "ok"}
    assert "2 of 3 FAILED" in out
    assert "tanh: example 0: d output 0" in out  # names the entry and the worst entry
    assert "reproduce with: tinygrad-rnn gradcheck --ops tanh,rnn_cell_tanh" in out


def _break_kernel(name: str) -> Callable:
    orig = getattr(bptt, name)

    def broken(*args: Any, **kwargs: Any) -> Any:
        grads = orig(*args, **kwargs)
        return grads._replace(dweight_hh=grads.dweight_hh * 1.01)
    return broken


@pytest.mark.parametrize("target, attr, entries", [
    (ops.Softmax, "backward", ["softmax"]),
    (ops.LogSoftmax, "backward", ["log_softmax"]),
    (ops.MatMul, "backward", ["matmul", "linear"]),
    (ops.CrossEntropy, "backward", ["cross_entropy"]),
    (ops.Sigmoid, "backward", ["sigmoid", "gru_cell_after", "gru_cell_before", "lstm_cell",
                               "lstm_cell_peephole", "lstm_cell_coupled"]),
    (ops.ReLU, "backward", ["relu", "rnn_cell_relu"]),
    (bptt, "rnn_backward", ["rnn_layer"]),
    (bptt, "gru_backward", ["gru_layer"]),
    (bptt, "lstm_backward", ["lstm_layer"]),
])
def test_suite_catches_a_broken_backward(monkeypatch: pytest.MonkeyPatch, target: Any,
                                         attr: str, entries: list[str]) -> None:
    if target is bptt:
        monkeypatch.setattr(bptt, attr, _break_kernel(attr))
    else:
        monkeypatch.setattr(target, attr, _scaled(getattr(target, attr)))
    for result in suite.run_suite(entries, examples=4, seed=0):
        assert not result.passed, result.name
        assert result.failure.startswith("example ")


def test_gradcheck_backward_that_raises_is_a_failure(capsys: pytest.CaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def backward(ctx: Any, grad_out: Any) -> Any:
        raise ValueError("deliberately broken")

    monkeypatch.setattr(ops.Exp, "backward", staticmethod(backward))
    code, out, _ = run(capsys, "gradcheck", "--ops", "exp", "--examples", "2")
    assert code == 1 and _table_rows(out) == {"exp": "FAIL"}
    assert "ValueError: deliberately broken" in out


def test_gradcheck_ops_groups_list_and_unknown_names(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "gradcheck", "--ops", "cell", "--examples", "1")
    assert code == 0
    assert list(_table_rows(out)) == ["rnn_cell_tanh", "rnn_cell_relu", "gru_cell_after",
                                      "gru_cell_before", "lstm_cell", "lstm_cell_peephole",
                                      "lstm_cell_coupled"]
    code, out, _ = run(capsys, "gradcheck", "--list")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(suite.BY_NAME)
    code, out, err = run(capsys, "gradcheck", "--ops", "tanh,tahn")
    assert code == 2 and out == ""
    assert "unknown op 'tahn'" in err and "gradcheck --list" in err


def test_suite_covers_every_function_in_the_package() -> None:
    """Every Function subclass defined in tinygrad_rnn appears in the recorded graph of some
    suite entry: a new primitive without a gradcheck entry fails here."""
    for info in pkgutil.walk_packages(tr.__path__, "tinygrad_rnn."):
        importlib.import_module(info.name)  # modules the package does not import itself
    defined = set()
    stack = [Function]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            stack.append(sub)
            if sub.__module__.startswith("tinygrad_rnn."):
                defined.add(sub)
    seen: set = set()
    for entry in suite.SUITE:
        for k in range(3):
            problem = entry.sample(suite.example_rng(0, entry.name, k))
            outputs = flatten_outputs(problem.fn(*problem.inputs))
            nodes = [t.grad_fn for t in outputs if t.grad_fn is not None]
            while nodes:
                node = nodes.pop()
                seen.add(node.fn)
                nodes.extend(t.grad_fn for t in tr.engine.node_inputs(node)
                             if t.grad_fn is not None)
    missing = sorted(f"{f.__module__}.{f.__name__}" for f in defined - seen)
    assert not missing, f"no gradcheck entry exercises: {missing}"
    assert {"Tanh", "FusedRecurrent", "Cast", "CrossEntropy"} <= {f.__name__ for f in seen}


def test_examples_are_reproducible_and_independent_of_the_selection() -> None:
    alone = suite.run_suite(["lstm_cell"], examples=3, seed=11)[0]
    again = suite.run_suite(["tanh", "lstm_cell"], examples=3, seed=11)[1]
    assert alone.max_abs_error == again.max_abs_error
    assert alone.entries == again.entries > 0
    other = suite.run_suite(["lstm_cell"], examples=3, seed=12)[0]
    assert other.max_abs_error != alone.max_abs_error


def test_gradcheck_command_does_not_need_hypothesis() -> None:
    """hypothesis is a test extra: the command must run in a plain install."""
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "from tinygrad_rnn.cli import main\n"
            "sys.exit(main(['gradcheck', '--ops', 'tanh,lstm_layer', '--examples', '1']))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all 2 passed" in proc.stdout


# ----------------------------------------------------------------------------- bench
TINY_BENCH = ["--cells", "rnn", "--hidden", "8", "--threads", "1", "--reps", "1",
              "--seq-len", "3", "--batch", "4", "--no-memory", "--no-torch"]


def test_bench_quick_at_toy_size_prints_the_table(capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "bench", "--quick", *TINY_BENCH)
    assert code == 0, err
    assert "Step time" in out
    # columns are separated by two or more spaces ("GEMM floor" is one contestant)
    rows = [[cell for cell in line.strip().split("  ") if cell.strip()]
            for line in out.splitlines() if line.strip().startswith("1  Elman")]
    assert [row[3].strip() for row in rows] == ["fused", "autograd", "GEMM floor"]
    assert all(float(row[4]) > 0 for row in rows)


def test_bench_passes_arguments_through(capsys: pytest.CaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(cli, "_call_main",
                        lambda fn, argv, prog: calls.append((fn, argv, prog)) or 0)
    assert run(capsys, "bench", "--quick", "--cells", "lstm", "--threads", "1")[0] == 0
    assert run(capsys, "bench", "--", "--help")[0] == 0
    assert [c[1] for c in calls] == [["--quick", "--cells", "lstm", "--threads", "1"],
                                     ["--help"]]
    assert Path(calls[0][0].__globals__["__file__"]) == ROOT / "benchmarks" / "recurrent.py"
    assert calls[0][2] == "tinygrad-rnn bench"


def test_bench_bad_flag_is_the_benchmarks_usage_error(capsys: pytest.CaptureFixture) -> None:
    code, _, err = run(capsys, "bench", "--no-such-flag")
    assert code == 2
    assert "usage: tinygrad-rnn bench" in err and "--no-such-flag" in err
