"""The demos run end to end and reproduce what they claim (quick mode, fixed seed), and the
training demos' --device flag: a tiny configuration gives the same numbers on the stand-in
device as on the CPU, and a device that cannot be used is a clear error (exit status 2).
The command lines: a bad number or --out folder is argparse's usage error (exit status 2,
nothing run), --steps 1 is a working smoke test, and --help shows a whole paragraph of
description and help text for every option."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, str(ROOT / "demos" / script), *args], env=env,
                          capture_output=True, text=True, timeout=600)


def test_vanishing_gradients_quick_reproduces_its_claims(tmp_path: Path) -> None:
    proc = _run("vanishing_gradients.py", "--quick", "--out", str(tmp_path), "--seed", "0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    # every tanh RNN stays under the Pascanu et al. bound
    tanh_rows = [line for line in out.splitlines() if line.startswith("tanh rho=")]
    assert len(tanh_rows) == 5 and all(line.rstrip().endswith("holds") for line in tanh_rows)
    # for rho < 1 the fitted decay rate is below rho (geometric decay)
    for line in tanh_rows:
        rho, _, rate = (float(v) for v in line.split()[2:5])
        if rho < 1:
            assert rate < rho
    lstm = float(re.search(r"LSTM\s+test MSE ([0-9.]+)", out).group(1))
    elman = float(re.search(r"Elman tanh\s+test MSE ([0-9.]+)", out).group(1))
    assert lstm < 0.02, out
    assert elman > 0.12, out  # near the 1/6 of always predicting 1
    for name in ("norms_vs_distance.png", "norms_vs_distance.svg", "spectral_sweep.png",
                 "adding_learning_curves.png", "heatmap_lstm.png", "heatmap_elman.png"):
        assert (tmp_path / name).stat().st_size > 1000


def test_quickstart_runs() -> None:
    proc = _run("quickstart.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "passed=True" in proc.stdout


def test_char_lm_runs_and_prints_one_table(tmp_path: Path) -> None:
    # a small configuration (one epoch over 30,000 characters) of the quick run
    proc = _run("char_lm.py", "--quick", "--epochs", "1", "--max-chars", "30000", "--out",
                str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = re.compile(r"^(\S+).*?\s([0-9.]+)\s+[0-9.]+\s+[0-9,]+\s+[0-9.]+$")
    rows = {}
    for line in proc.stdout.splitlines():
        m = row.match(line)
        if m:
            rows[m.group(1)] = float(m.group(2))
    assert set(rows) == {"unigram", "bigram", "trigram", "feed-forward", "Elman", "GRU", "LSTM",
                         "TCN", "Transformer"}
    assert rows["unigram"] > rows["bigram"] > rows["trigram"]  # the lectures' ordering
    assert all(1.0 < v < 110 for v in rows.values())  # below uniform over the vocabulary
    assert "temperature 0.5:" in proc.stdout and "temperature 1.0:" in proc.stdout
    assert (tmp_path / "perplexity_curves.png").stat().st_size > 1000


def test_string_reversal_quick_reproduces_bahdanau_comparison(tmp_path: Path) -> None:
    proc = _run("string_reversal.py", "--quick", "--out", str(tmp_path), "--seed", "0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    plain = float(re.search(r"exact match \(3-10 letters\), no attention: ([0-9.]+)", out)
                  .group(1))
    attn = float(re.search(r"exact match \(3-10 letters\), attention: ([0-9.]+)", out).group(1))
    assert attn >= 0.99, out  # the demo's stated target
    assert plain < attn, out
    # without attention accuracy falls with length; with attention it stays high
    rows = re.findall(r"^\s+(\d+)-(\d+)\s+([0-9.]+)\s+([0-9.]+)$", out, re.M)
    no_attn = [float(r[2]) for r in rows]
    assert len(rows) >= 4 and no_attn[0] > no_attn[-1] + 0.3, out
    assert min(float(r[3]) for r in rows) >= 0.98, out
    assert any(p.suffix == ".png" for p in tmp_path.iterdir())


def test_sequence_models_quick_reproduces_the_robust_claims(tmp_path: Path) -> None:
    """The claims of the three kinds of sequence model that do not depend on timing or luck:
    a recurrent state has one size at every position while the key/value cache grows by
    exactly 2 L d numbers per token; at initialisation the attention path to a distant input
    is as strong as to a near one while the Elman path has vanished; a causal convolution's
    gradient is exactly 0 beyond its receptive field R, so beyond R it recalls at chance."""
    import json

    proc = _run("sequence_models.py", "--quick", "--out", str(tmp_path), "--seed", "0")
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads((tmp_path / "sequence_models.json").read_text())
    # every number is finite and positive where it is a time
    train = res["training"]
    for kind, times in train["us_per_token"].items():
        assert len(times) == len(train["T"]) and all(0 < t < np.inf for t in times), kind
    counts = list(train["parameters"].values())
    assert max(counts) <= 1.15 * min(counts), train["parameters"]   # matched sizes
    # generation memory: constant for the recurrent states, linear for the cache
    gen = res["generation"]
    for kind in ("Elman", "LSTM", "conv"):
        sizes = gen[kind]["bytes"]
        assert len(set(sizes[-len(sizes) // 2:])) == 1, kind   # the conv window fills first
    assert len(set(gen["Elman"]["bytes"])) == 1 and len(set(gen["LSTM"]["bytes"])) == 1
    cache = np.array(gen["Transformer"]["bytes"])
    per_token = 2 * 1 * 48 * 4          # 2 L d float32 numbers, L = 1 block, d = 48
    positions = np.arange(2, cache.size + 2)        # the prompt is position 0
    np.testing.assert_array_equal(cache, per_token * positions)
    assert all(np.isfinite(gen[k]["seconds"]).all() for k in gen)
    # gradient paths, indexed by distance d from the loss
    task = res["task"]
    paths = {k: np.array(v) for k, v in task["paths"].items()}
    assert all(np.isfinite(p).all() for p in paths.values())
    far = len(paths["Elman, initial"]) - 1
    attention = paths["Transformer, initial"]
    assert attention[1:].min() > 0.1 * attention[1]     # no decay with distance
    elman = paths["Elman, initial"]
    assert elman[far] < 1e-3 * elman[1]                  # geometric decay
    R = task["conv_receptive_field"]
    assert R < far + 1
    for stage in ("initial", "trained"):
        conv = paths[f"conv, {stage}"]
        assert (conv[:R] > 0).all() and not conv[R:].any(), stage
    # beyond the receptive field the key cannot reach the prediction: chance (0.2)
    longest = task["accuracy"]["conv"][-1]
    assert task["T"][-1] > R and longest < 0.3, task["accuracy"]
    for name in ("training_time.png", "generation.png", "gradient_paths_initial.png",
                 "gradient_paths_trained.png", "recall_accuracy.png"):
        assert (tmp_path / name).stat().st_size > 1000


# ----------------------------------------------------------------------------- --device
def _load_demo(name: str) -> ModuleType:
    """Import tinygrad_rnn/demos/<name>.py as a module (its main() is not run)."""
    path = ROOT / "tinygrad_rnn" / "demos" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_test_demo_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_vanishing(args: Any) -> None:
    args.T, args.hidden, args.steps, args.batch, args.val_every = 12, 8, 6, 8, 3


def _tiny_string_reversal(args: Any) -> None:
    args.cfg.update(n_train=300, n_test=40, n_long=10, emb=8, hidden=12, batch=16)


def _tiny_char_lm(args: Any) -> None:
    args.hidden, args.ffnn_steps, args.n_eval, args.val_every = 16, 5, 300, 5


# demo -> (command-line options of a small run, the sizes then shrunk further, what the
# device appears in when the demo prints it)
TINY: dict[str, tuple[list[str], Callable[[Any], None], str]] = {
    "vanishing_gradients": (["--quick"], _tiny_vanishing, "device {}"),
    "string_reversal": (["--quick", "--steps", "6"], _tiny_string_reversal, "models on {}"),
    "char_lm": (["--quick", "--epochs", "1", "--max-chars", "6000"], _tiny_char_lm,
                "neural models on {}"),
}


def _tiny_run(name: str, device: str, out: Path, monkeypatch: pytest.MonkeyPatch
              ) -> tuple[dict, set[str]]:
    """The demo's run() in its tiny configuration on ``device``: the numbers it returns and
    the devices the parameters were on at every optimizer update."""
    options, shrink, _ = TINY[name]
    demo = _load_demo(name)
    args = demo.parse_args([*options, "--seed", "0", "--out", str(out), "--device", device])
    shrink(args)
    seen: set[str] = set()
    step = tr.optim.Optimizer.step

    def spy(self: Any, *a: Any, **k: Any) -> Any:
        seen.update(p.device for g in self.param_groups for p in g["params"])
        return step(self, *a, **k)

    monkeypatch.setattr(tr.optim.Optimizer, "step", spy)
    try:
        return demo.run(args), seen
    finally:
        monkeypatch.setattr(tr.optim.Optimizer, "step", step)


def _assert_identical(got: Any, want: Any, where: str = "result") -> None:
    """``got`` equals ``want`` exactly, recursing through dicts, lists and tuples (NaN equals
    NaN; arrays must match in shape and every bit of value)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), where
        for key in want:
            _assert_identical(got[key], want[key], f"{where}[{key!r}]")
    elif isinstance(want, (list, tuple)) and not all(
            isinstance(v, (int, float, np.number)) for v in want):
        assert type(got) is type(want) and len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want)):
            _assert_identical(g, w, f"{where}[{k}]")
    elif isinstance(want, str):
        assert got == want, where
    else:
        assert type(got) is type(want), f"{where}: {type(got)} vs {type(want)}"
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=where,
                                      strict=True)


@pytest.mark.parametrize("name", sorted(TINY))
def test_training_demo_gives_the_cpu_numbers_on_the_standin_device(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tiny run on the stand-in device trains there (every update sees parameters on
    'standin') and reports exactly the CPU's numbers: the stand-in computes with NumPy, and
    every random draw is made on the host from the same seeds."""
    cpu, cpu_devices = _tiny_run(name, "cpu", tmp_path / "cpu", monkeypatch)
    cpu_out = capsys.readouterr().out
    dev, dev_devices = _tiny_run(name, "standin", tmp_path / "standin", monkeypatch)
    dev_out = capsys.readouterr().out
    assert cpu_devices == {"cpu"} and dev_devices == {"standin"}
    where = TINY[name][2]
    assert where.format("cpu") in cpu_out and where.format("standin") in dev_out
    _assert_identical(dev, cpu)
    figures = sorted(p.name for p in (tmp_path / "cpu").iterdir())
    assert figures and sorted(p.name for p in (tmp_path / "standin").iterdir()) == figures


def test_identity_check_sees_a_difference() -> None:
    """The comparison above fails on one differing bit, a NaN against a number, or a
    float32 against the same value in float64."""
    base = {"a": [1.0, 2.0], "b": {"c": (np.zeros(3), "x")}, "d": float("nan")}
    for other in ({"a": [1.0, np.nextafter(2.0, 3.0)], "b": base["b"], "d": base["d"]},
                  {"a": base["a"], "b": base["b"], "d": 0.0},
                  {"a": base["a"], "b": {"c": (np.zeros(3, np.float32), "x")},
                   "d": base["d"]}):
        with pytest.raises(AssertionError):
            _assert_identical(other, base)
    _assert_identical({"a": [1.0, 2.0], "b": {"c": (np.zeros(3), "x")}, "d": float("nan")},
                      base)


@pytest.mark.parametrize("name", ["quickstart", *sorted(TINY)])
def test_cuda_without_cupy_exits_2_naming_cupy(name: str, tmp_path: Path) -> None:
    """--device cuda where CuPy cannot be imported (made so by replacing the backend's
    import, so the test means the same on a machine with CuPy): the library's message, exit
    status 2, no traceback, nothing run."""
    code = ("import runpy, sys\n"
            "import tinygrad_rnn.backend as backend\n"
            "backend._try_cupy = lambda: None\n"
            f"sys.argv = [{name!r}, '--device', 'cuda']\n"
            f"runpy.run_path({str(ROOT / 'demos' / (name + '.py'))!r}, run_name='__main__')\n")
    env = dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"{name}: error: device 'cuda' needs CuPy" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


# ----------------------------------------------------------------------- command lines
DEMOS = ["quickstart", "vanishing_gradients", "string_reversal", "char_lm", "sequence_models"]

# demo -> (options, what argparse's message must say): each must end the demo in parse
# with exit status 2, before any work is done
BAD_OPTIONS: list[tuple[str, list[str], str]] = [
    ("string_reversal", ["--steps", "0"], "argument --steps: must be >= 1, got 0"),
    ("string_reversal", ["--steps", "-5"], "argument --steps: must be >= 1, got -5"),
    ("string_reversal", ["--steps", "1.5"],
     "argument --steps: expected a whole number >= 1, got '1.5'"),
    ("char_lm", ["--epochs", "0"], "argument --epochs: must be >= 1, got 0"),
    ("char_lm", ["--max-chars", "0"], "argument --max-chars: must be >= 1000, got 0"),
    ("char_lm", ["--max-chars", "999"], "argument --max-chars: must be >= 1000, got 999"),
    *[(name, ["--seed", "-1"], "argument --seed: must be >= 0, got -1") for name in DEMOS],
    *[(name, ["--seed", "x"], "argument --seed: expected a whole number >= 0, got 'x'")
      for name in DEMOS],
]


@pytest.mark.parametrize("name,options,message", BAD_OPTIONS)
def test_bad_numbers_are_usage_errors(name: str, options: list[str], message: str,
                                      capsys: pytest.CaptureFixture) -> None:
    demo = _load_demo(name)
    with pytest.raises(SystemExit) as exc:
        demo.main(options)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert f"error: {message}" in err and "usage:" in err and out == ""


@pytest.mark.parametrize("name", ["vanishing_gradients", "string_reversal", "char_lm",
                                  "sequence_models"])
def test_out_must_be_a_folder_we_can_create(name: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    demo = _load_demo(name)
    for out in (blocker, blocker / "figures", ""):
        with pytest.raises(SystemExit) as exc:
            demo.main(["--out", str(out)])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "error: argument --out:" in err
        assert (f"{str(blocker)!r} exists and is not a folder" in err if out
                else "empty path" in err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]
    # a folder that does not exist yet is fine (run() creates it)
    assert demo.parse_args(["--out", str(tmp_path / "new" / "dir")]).out == str(
        tmp_path / "new" / "dir")


def test_max_chars_is_used_as_given() -> None:
    demo = _load_demo("char_lm")
    assert demo.parse_args(["--quick", "--max-chars", "1000"]).max_chars == 1000
    assert demo.parse_args(["--quick"]).max_chars == 300_000
    assert demo.parse_args([]).max_chars is None          # the full run: the whole corpus


def test_string_reversal_runs_with_one_step(tmp_path: Path) -> None:
    """Regression: --steps 1 made the learning-rate schedule's step size 0 (a crash)."""
    proc = _run("string_reversal.py", "--quick", "--steps", "1", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert re.search(r"^no attention\s+\(input\): 1 updates", proc.stdout, re.M)
    assert re.search(r"^attention\s+\(bahdanau\): 1 updates", proc.stdout, re.M)
    assert (tmp_path / "learning_curves.png").stat().st_size > 1000


@pytest.mark.parametrize("name", DEMOS)
def test_help_has_a_whole_description_and_help_for_every_option(
        name: str, capsys: pytest.CaptureFixture) -> None:
    demo = _load_demo(name)
    with pytest.raises(SystemExit) as exc:
        demo.main(["--help"])
    assert exc.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    paragraph = " ".join(demo.__doc__.split("\n\n")[0].split())
    assert paragraph.endswith(".") and len(paragraph.split()) >= 25, paragraph
    assert paragraph in shown
    for action in demo.build_parser()._actions:
        assert action.help and len(action.help.split()) >= 3, action.option_strings
    if name == "char_lm":   # regression: the description stopped at "from unigram counts to"
        assert "from unigram counts to an LSTM, compared on one test split." in shown
