"""Smoke tests of benchmarks/recurrent.py at toy sizes (T=3, H=8, one repetition).

They check that the benchmark's functions run and produce the table rows, that every
contestant computes the same loss from the same weights, and the timing and memory helpers'
logic. They assert nothing about speed.
"""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from benchmarks import _harness as hz
from benchmarks import recurrent as bench

LABELS = {"lstm": "LSTM", "gru": "GRU", "rnn": "Elman"}


def tiny(**overrides: object) -> bench.Config:
    base = dict(cells=["lstm", "gru", "rnn"], hidden=[8], threads=[1], reps=1, seq_len=3,
                batch=4, mem_seq_lens=[3], mem_hidden=8)
    base.update(overrides)
    return bench.Config(**base)  # type: ignore[arg-type]


def _by_cell(records: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in records:
        out.setdefault(r["cell"], {})[r["contestant"]] = r
    return out


# ------------------------------------------------------------------------------ timing rows
def test_timing_without_torch_gives_our_rows_only() -> None:
    records = bench.run_timing(tiny(torch=False), threads=1, torch=None)
    rows = bench.timing_rows(records)
    assert [(r["cell"], r["contestant"]) for r in rows] == [
        (LABELS[c], e) for c in ("lstm", "gru", "rnn") for e in ("fused", "autograd")]
    for r in rows:
        assert float(r["ms"]) > 0 and float(r["cpu ms"]) >= 0
        assert r["reps"] == "1" and r["x torch.nn"] == "-" and r["H"] == "8"
    for cell, members in _by_cell(records).items():
        fused, auto = members["fused"]["loss"], members["autograd"]["loss"]
        assert np.isfinite(fused) and fused > 0
        assert abs(fused - auto) <= 1e-5 * abs(fused), (cell, fused, auto)
    text = bench.format_table(rows, markdown=True).splitlines()
    assert len(text) == 2 + len(rows)
    assert all(line.startswith("|") and line.endswith("|") for line in text)


def test_timing_against_torch_same_loss_and_rows() -> None:
    torch = pytest.importorskip("torch")
    records = bench.run_timing(tiny(), threads=1, torch=torch)
    cells = _by_cell(records)
    assert set(cells["lstm"]) == {"fused", "autograd", "torch.nn.LSTM", "torch LSTMCell loop"}
    assert set(cells["gru"]) == {"fused", "autograd", "torch.nn.GRU"}
    assert set(cells["rnn"]) == {"fused", "autograd", "torch.nn.RNN"}
    for cell, members in cells.items():
        ref = members[f"torch.nn.{bench.CELLS[cell].torch_name}"]["loss"]
        for name, r in members.items():
            assert abs(r["loss"] - ref) <= 1e-5 * abs(ref), (cell, name, r["loss"], ref)
            assert r["loss_ok"]
    rows = bench.timing_rows(records)
    assert len(rows) == 10
    for r in rows:
        if r["contestant"].startswith("torch.nn."):
            assert r["x torch.nn"] == "1.00x" and r["cpu x torch.nn"] == "1.00x"
        else:
            assert r["x torch.nn"].endswith("x") and float(r["x torch.nn"][:-1]) >= 0
    auto_lstm = [r for r in rows if r["cell"] == "LSTM" and r["contestant"] == "autograd"][0]
    assert "LSTMCell loop" in auto_lstm["target"]
    assert auto_lstm["check"].split()[0] in ("PASS", "MISS")


def test_time_target_check_logic() -> None:
    def rec(name: str, kind: str, ms: list[float]) -> dict:
        return dict(threads=1, cell="gru", hidden=256, seq_len=64, batch=32, contestant=name,
                    kind=kind, wall_ms=ms, cpu_ms=ms, loss=1.0, loss_ok=True)

    torch_ms = [10.0, 20.0, 10.0]
    fast = bench.timing_rows([rec("fused", "fused", [8.0, 17.0, 9.0]),
                              rec("torch.nn.GRU", "torch", torch_ms)])
    assert fast[0]["target"] == "<= 0.90x torch.nn.GRU"
    assert fast[0]["check"] == "PASS (0.85x)"      # paired ratios 0.8, 0.85, 0.9
    slow = bench.timing_rows([rec("fused", "fused", [9.5, 19.0, 9.1]),
                              rec("torch.nn.GRU", "torch", torch_ms)])
    assert slow[0]["check"] == "MISS (0.95x)"


# ------------------------------------------------------------------------------ memory rows
def test_memory_alloc_rows_and_growth_with_T() -> None:
    torch = pytest.importorskip("torch")
    records = bench.run_memory_alloc(tiny(cells=["lstm"], mem_seq_lens=[3, 24]), torch)
    assert len(records) == 8
    peaks = {(r["contestant"], r["seq_len"]): r["bytes"] for r in records}
    for (name, T), peak in peaks.items():
        assert peak is not None and peak > 0, (name, T)
    for name in ("fused", "autograd", "torch.nn.LSTM"):
        assert peaks[(name, 24)] > peaks[(name, 3)], name   # the graph grows with T
    rows = bench.memory_rows(records)
    assert [(r["T"], r["contestant"]) for r in rows] == [
        (str(T), n) for T in (3, 24)
        for n in ("fused", "autograd", "torch.nn.LSTM", "torch LSTMCell loop")]
    for r in rows:
        assert float(r["alloc MiB"]) >= 0 and r["RSS MiB"] == "-"
        if r["contestant"] == "torch.nn.LSTM":
            assert r["alloc x torch.nn"] == "1.00x"


def test_memory_target_check_logic() -> None:
    def rec(name: str, kind: str, mib: float) -> dict:
        return dict(cell="lstm", hidden=256, seq_len=512, contestant=name, kind=kind,
                    method="alloc", detail="", bytes=int(mib * 2**20))

    rows = bench.memory_rows([rec("fused", "fused", 50.0), rec("torch.nn.LSTM", "torch", 100)])
    assert rows[0]["check"] == "PASS (0.50x)" and "0.60x" in rows[0]["target"]
    rows = bench.memory_rows([rec("fused", "fused", 70.0), rec("torch.nn.LSTM", "torch", 100)])
    assert rows[0]["check"] == "MISS (0.70x)"


def test_peak_tracemalloc_sees_numpy_buffers() -> None:
    n = 2_000_000

    def alloc() -> None:
        a = np.ones(n, dtype=np.float32)
        del a

    assert hz.peak_tracemalloc(alloc) >= 4 * n


# ------------------------------------------------------------------------------ harness
def test_interleaved_rotates_the_order() -> None:
    calls: list[str] = []
    steps = [(name, (lambda name=name: calls.append(name))) for name in "abc"]
    times = hz.interleaved(steps, reps=3, warmup=1)
    assert calls == list("abc" + "abc" + "bca" + "cab")
    for name in "abc":
        assert len(times[name].wall_ms) == 3 and min(times[name].wall_ms) >= 0
        assert len(times[name].cpu_ms) == 3 and len(times[name].faults) == 3
        assert min(times[name].faults) >= 0


def test_median_and_paired_ratio() -> None:
    assert hz.median([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert hz.paired_ratio([2.0, 4.0, 9.0], [1.0, 2.0, 3.0]) == 2.0
    with pytest.raises(ValueError):
        hz.paired_ratio([1.0], [1.0, 2.0])


def test_thread_env_sets_every_variable() -> None:
    env = hz.thread_env(3, base={"PATH": "/bin"})
    assert env["PATH"] == "/bin"
    assert all(env[v] == "3" for v in hz.THREAD_ENV_VARS)


# ------------------------------------------------------------------------------ command line
@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed")
def test_cuda_without_cupy_exits_cleanly(capsys: pytest.CaptureFixture) -> None:
    assert bench.main(["--device", "cuda"]) == 0
    assert "skipped" in capsys.readouterr().out


def test_device_path_on_the_standin(capsys) -> None:
    """The --device code path (ours moved with Module.to, inputs made on the device) runs
    end to end on the stand-in device, and every contestant reaches the same loss."""
    rc = bench.main(["--device", "standin", "--cells", "lstm", "gru", "--hidden", "8",
                     "--seq-len", "3", "--batch", "4", "--reps", "1", "--markdown"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "stand-in device run" in text
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|")]
    ours = {(r[1], r[3]) for r in rows if len(r) > 3}
    assert {("LSTM", "fused"), ("LSTM", "autograd"), ("GRU", "fused"), ("GRU", "autograd")} \
        <= ours
    assert "LOSS MISMATCH" not in text


def test_command_line_end_to_end_without_torch(tmp_path, capsys) -> None:
    out = tmp_path / "table.md"
    rc = bench.main(["--cells", "rnn", "--hidden", "8", "--seq-len", "3", "--batch", "4",
                     "--reps", "1", "--threads", "1", "--mem-seq-lens", "3", "--mem-hidden",
                     "8", "--no-rss", "--no-torch", "--markdown", "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    assert text == capsys.readouterr().out.replace(f"wrote {out}\n", "")
    assert "only our numbers" in text
    assert ("BLAS reports 1" in text) or ("BLAS reports None" in text)
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines()
             if line.startswith("|")]
    time_rows = [c for c in cells if c[:3] == ["1", "Elman", "8"]]
    memory_rows = [c for c in cells if c[:3] == ["Elman", "8", "3"]]
    assert [c[3] for c in time_rows] == ["fused", "autograd"]
    assert [c[3] for c in memory_rows] == ["fused", "autograd"]


def test_gpu_check_script_stops_at_once_without_a_gpu(tmp_path) -> None:
    """benchmarks/gpu_check.sh, the one command for the GPU half of the checks, refuses to
    start (exit 1, saying what is missing, no output folder) where 'cuda' is unusable."""
    import subprocess
    import sys
    from pathlib import Path

    from tinygrad_rnn import backend

    if backend.cuda_is_available():
        pytest.skip("a GPU is usable here: the script would run the full GPU check")
    root = Path(__file__).resolve().parents[1]
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "PYTHONPATH": str(root)}
    out = tmp_path / "report"
    run = subprocess.run(["bash", str(root / "benchmarks" / "gpu_check.sh"), str(out)],
                         cwd=root, env=env, capture_output=True, text=True)
    assert run.returncode == 1
    assert "gpu_check: device 'cuda'" in run.stderr
    assert ("needs CuPy" in run.stderr) or ("no CUDA GPU is usable" in run.stderr)
    assert not out.exists()


# ------------------------------------------------------------------ host allocator benchmark
def test_host_allocator_benchmark_runs_both_settings() -> None:
    """benchmarks/host_allocator.py at toy sizes: one child per setting, the same loss in
    both (checked by the benchmark itself), one row per setting with the tuned/default
    ratio; the tuned child must report that it tuned malloc (glibc only)."""
    import platform
    import sys

    from benchmarks import host_allocator as ha

    if not (sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"):
        pytest.skip("the allocator setting exists on Linux with glibc only")
    args = ha._parser().parse_args(["--cells", "gru", "--hidden", "8", "--seq-len", "3",
                                    "--batch", "2", "--steps", "2", "--warmup", "1",
                                    "--rounds", "1"])
    rows = ha.run(args)
    assert [(r["cell"], r["H"], r["allocator"]) for r in rows] == [
        ("GRU", "8", "tuned"), ("GRU", "8", "default")]
    assert rows[1]["x default"] == "1.00x" and rows[0]["x default"].endswith("x")
    assert all(float(r["ms"]) > 0 and r["rounds"] == "1" for r in rows)
    table = ha.format_table(rows, markdown=True).splitlines()
    assert len(table) == 4 and all(line.startswith("|") for line in table)


def test_host_allocator_child_env_isolates_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks import host_allocator as ha

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1")
    monkeypatch.setenv("TINYGRAD_RNN_MALLOC", "default")
    tuned, default = ha.child_env("tuned", 1), ha.child_env("default", 1)
    assert "MALLOC_TRIM_THRESHOLD_" not in tuned and "TINYGRAD_RNN_MALLOC" not in tuned
    assert default["TINYGRAD_RNN_MALLOC"] == "default"
    assert tuned["OPENBLAS_NUM_THREADS"] == "1" == default["OPENBLAS_NUM_THREADS"]
