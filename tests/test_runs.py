"""Run folders (tinygrad_rnn/runs.py, tinygrad_rnn/run_figures.py): what fit and
train_stream write with run_dir=, that a killed writer leaves only whole rows, that an
existing run is never overwritten by accident, and that `tinygrad-rnn plot` redraws the
figures from the CSV files alone."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import cli, run_figures, runs, viz
from tinygrad_rnn.truncation import chunked
from tinygrad_rnn.data import adding_problem

F = tr.functional
ROOT = Path(__file__).resolve().parents[1]


class Regressor(tr.nn.Module):
    def __init__(self, cell: str, seed: int) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        layer = {"lstm": tr.nn.LSTM, "gru": tr.nn.GRU, "rnn": tr.nn.RNN}[cell]
        self.rnn = layer(2, 6, batch_first=True, generator=rng)
        self.out = tr.nn.Linear(6, 1, generator=rng)

    def forward(self, x: tr.Tensor) -> tr.Tensor:
        h, _ = self.rnn(x)
        return self.out(h[:, -1])


def train_small(run_dir, cell: str = "lstm", steps: int = 12, monitor: bool = True,
                clip: float | None = 0.5, fail_at: int | None = None):
    model = Regressor(cell, 0)
    opt = tr.optim.Adam(model.parameters(), lr=1e-2)
    mon = tr.monitor.GradientMonitor(model) if monitor else None
    rng = np.random.default_rng(1)
    x_val, y_val = adding_problem(8, 7, generator=rng)

    def step(i: int) -> tr.Tensor:
        if i == fail_at:
            raise RuntimeError("boom at step %d" % i)
        x, y = adding_problem(8, 7, generator=rng)
        return F.mse_loss(model(tr.tensor(x)), tr.tensor(y))

    @tr.no_grad()
    def validate() -> float:
        return F.mse_loss(model(tr.tensor(x_val)), tr.tensor(y_val)).item()

    result = tr.training.fit(step, steps, opt, clip=clip, monitor=mon, validate=validate,
                             val_every=4, progress=False, run_dir=run_dir)
    return result, mon


def test_fit_writes_manifest_metrics_and_state_norms(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    result, mon = train_small(folder)
    assert sorted(p.name for p in folder.iterdir()) == [runs.MANIFEST, runs.METRICS,
                                                        runs.STATE_NORMS]
    manifest = runs.read_manifest(folder)
    assert manifest["status"] == "finished" and manifest["error"] is None
    assert manifest["steps"] == 12 and manifest["finished"] >= manifest["started"]
    assert manifest["command"] == sys.argv
    assert manifest["config"]["loop"] == "fit" and manifest["config"]["clip"] == 0.5
    assert manifest["config"]["optimizer"] == "Adam"
    assert manifest["config"]["param_groups"][0]["lr"] == 0.01
    env = manifest["environment"]
    assert env["packages"]["numpy"] == np.__version__
    assert env["packages"]["tinygrad_rnn"] == tr.__version__
    assert set(env["threads"]) == set(runs.THREAD_ENV_VARS)
    assert "git_revision" in env and env["cpu_count"] == os.cpu_count()

    m = runs.read_metrics(folder)
    assert tuple(m) == runs.BASE_COLUMNS + runs.MONITOR_COLUMNS
    np.testing.assert_array_equal(m["step"], np.arange(1, 13))
    np.testing.assert_array_equal(m["loss"], result.losses)  # repr round-trips exactly
    pre, post = mon.global_norms()
    np.testing.assert_array_equal(m["grad_norm"], pre)
    np.testing.assert_array_equal(m["clipped_norm"], post)
    assert np.all(m["clipped_norm"] <= 0.5 + 1e-6) and np.any(m["grad_norm"] > 0.5)
    np.testing.assert_array_equal(m["lr"], 0.01)
    val = {step: v for step, v in result.val_losses}
    assert list(np.flatnonzero(~np.isnan(m["val_loss"])) + 1) == [4, 8, 12]
    np.testing.assert_array_equal(m["val_loss"][[3, 7, 11]], [val[4], val[8], val[12]])
    np.testing.assert_array_equal(m["dh_first"], mon.state_norms("rnn")[:, 0])
    np.testing.assert_array_equal(m["dh_last"], mon.state_norms("rnn")[:, -1])

    states = runs.read_state_norms(folder)
    assert list(states) == [("rnn", 0, 0, "h"), ("rnn", 0, 0, "c")]
    for (module, layer, direction, kind), (steps, table) in states.items():
        np.testing.assert_array_equal(steps, np.arange(1, 13))
        np.testing.assert_array_equal(table, mon.state_norms(module, layer, direction, kind))


def test_state_norms_keep_nan_positions(tmp_path: Path) -> None:
    """A step without data is a row of NaN in the monitor; the CSV keeps it."""
    model = Regressor("rnn", 0)
    mon = tr.monitor.GradientMonitor(model)
    opt = tr.optim.SGD(model.parameters(), lr=0.1)
    x, y = adding_problem(4, 5, generator=0)
    x_t, y_t = tr.tensor(x), tr.tensor(y)

    def step(i: int) -> tr.Tensor:
        if i == 1:  # a loss that does not reach the recurrent layer
            return (model.out.weight ** 2).sum()
        return F.mse_loss(model(x_t), y_t)

    tr.training.fit(step, 3, opt, monitor=mon, progress=False, run_dir=tmp_path / "r")
    (_, table), = runs.read_state_norms(tmp_path / "r").values()
    want = mon.state_norms()
    assert np.isnan(want[1]).all()
    np.testing.assert_array_equal(np.isnan(table), np.isnan(want))
    np.testing.assert_array_equal(table[~np.isnan(table)], want[~np.isnan(want)])


def test_without_monitor_the_norms_are_still_recorded(tmp_path: Path) -> None:
    result, _ = train_small(tmp_path / "r", monitor=False, clip=None)
    m = runs.read_metrics(tmp_path / "r")
    assert tuple(m) == runs.BASE_COLUMNS
    np.testing.assert_array_equal(m["grad_norm"], m["clipped_norm"])
    assert np.all(m["grad_norm"] > 0)
    assert not (tmp_path / "r" / runs.STATE_NORMS).exists()


def test_train_stream_writes_a_run_folder(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    model = tr.nn.GRU(3, 5, generator=rng)
    head = tr.nn.Linear(5, 1, generator=rng)
    params = list(model.parameters()) + list(head.parameters())
    opt = tr.optim.SGD(params, lr=0.05)
    x = rng.standard_normal((24, 2, 3)).astype(np.float32)
    y = rng.standard_normal((24, 2, 1)).astype(np.float32)

    def loss_fn(out, start: int, stop: int) -> tr.Tensor:
        return F.mse_loss(head(out), tr.tensor(y[start:stop]))

    result = tr.training.train_stream(model, x, loss_fn, opt, chunked(6), epochs=2,
                                      progress=False, run_dir=str(tmp_path / "s"))
    m = runs.read_metrics(tmp_path / "s")
    np.testing.assert_array_equal(m["loss"], result.losses)
    assert len(result.losses) == 8
    config = runs.read_manifest(tmp_path / "s")["config"]
    assert config["loop"] == "train_stream" and config["epochs"] == 2
    assert config["windows_per_epoch"] == 4


def test_a_run_on_the_standin_device_records_its_device_and_the_same_norms(
        tmp_path: Path) -> None:
    import tinygrad_rnn.testing  # noqa: F401  (registers the stand-in device)

    def train(device: str, folder: Path) -> None:
        model = Regressor("gru", 0).to(device)
        mon = tr.monitor.GradientMonitor(model)
        opt = tr.optim.SGD(model.parameters(), lr=0.1)

        def step(i: int) -> tr.Tensor:
            x, y = adding_problem(4, 5, generator=i)
            out = model(tr.tensor(x, device=device))
            return F.mse_loss(out, tr.tensor(y, device=device))

        tr.training.fit(step, 3, opt, clip=0.1, monitor=mon, progress=False,
                        run_dir=folder)

    train("cpu", tmp_path / "cpu")
    train("standin", tmp_path / "standin")
    assert runs.read_manifest(tmp_path / "standin")["device"] == "standin"
    assert runs.read_manifest(tmp_path / "cpu")["device"] == "cpu"
    a, b = runs.read_metrics(tmp_path / "cpu"), runs.read_metrics(tmp_path / "standin")
    for column in ("loss", "grad_norm", "clipped_norm", "dh_first", "dh_last"):
        np.testing.assert_array_equal(a[column], b[column])


def test_a_failing_run_is_marked_failed_with_its_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom at step 3"):
        train_small(tmp_path / "r", fail_at=3)
    manifest = runs.read_manifest(tmp_path / "r")
    assert manifest["status"] == "failed" and manifest["steps"] == 3
    assert manifest["error"]["type"] == "RuntimeError"
    assert manifest["error"]["message"] == "boom at step 3"
    assert "boom at step 3" in manifest["error"]["traceback"]
    assert len(runs.read_metrics(tmp_path / "r")["step"]) == 3


def test_the_manifest_says_running_while_the_run_is_on(tmp_path: Path) -> None:
    seen = []
    with runs.RunWriter(tmp_path / "r", config={"T": 5}, seed=7, device="standin") as run:
        seen.append(runs.read_manifest(tmp_path / "r"))
        run.log(0.5, grad_norm=1.0, clipped_norm=1.0, lr=0.1)
    assert seen[0]["status"] == "running" and seen[0]["finished"] is None
    done = runs.read_manifest(tmp_path / "r")
    assert done["status"] == "finished" and done["seed"] == 7
    assert done["config"] == {"T": 5} and done["device"] == "standin"


def test_an_existing_run_is_refused_unless_overwrite_or_append(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    train_small(folder, steps=3)
    with pytest.raises(FileExistsError, match=r"already holds a run .*if_exists='overwrite'"):
        train_small(folder, steps=3)
    # the refused run changed nothing
    assert len(runs.read_metrics(folder)["step"]) == 3
    with runs.RunWriter(folder, if_exists="append") as run:
        train_small(run, steps=2)
    m = runs.read_metrics(folder)
    np.testing.assert_array_equal(m["step"], [1, 2, 3, 4, 5])
    assert len(runs.read_manifest(folder)["resumed"]) == 1
    (_, table), = [v for k, v in runs.read_state_norms(folder).items() if k[3] == "h"]
    assert table.shape[0] == 5
    with runs.RunWriter(folder, if_exists="overwrite") as run:
        train_small(run, steps=2)
    np.testing.assert_array_equal(runs.read_metrics(folder)["step"], [1, 2])
    assert "resumed" not in runs.read_manifest(folder)


def test_a_folder_of_other_files_is_not_a_run(tmp_path: Path) -> None:
    (tmp_path / "figure.png").write_bytes(b"x")
    train_small(tmp_path, steps=2)
    assert (tmp_path / "figure.png").read_bytes() == b"x"


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="if_exists must be one of"):
        runs.RunWriter(tmp_path / "a", if_exists="replace")
    with pytest.raises(ValueError, match="fsync must be one of"):
        runs.RunWriter(tmp_path / "b", fsync="always")
    with pytest.raises(TypeError, match="seed must be an int"):
        runs.RunWriter(tmp_path / "c", seed=1.5)
    with pytest.raises(TypeError, match="fit: run_dir must be a folder path"):
        train_small(42)
    with runs.RunWriter(tmp_path / "d") as run:
        run.start_metrics(monitored=False)
        with pytest.raises(ValueError, match="started without a monitor"):
            run.log(0.1, state_norms={("rnn", 0, 0, "h"): np.ones(3)})
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is not a folder"):
        runs.RunWriter(tmp_path / "file")
    with pytest.raises(FileNotFoundError, match="not a run folder"):
        runs.read_manifest(tmp_path)


def test_a_torn_or_malformed_row_is_an_error_not_skipped(tmp_path: Path) -> None:
    train_small(tmp_path / "r", steps=2, monitor=False)
    path = tmp_path / "r" / runs.METRICS
    text = path.read_text()
    path.write_text(text + "3,0.5,,1.0")
    with pytest.raises(ValueError, match=r"line 4 has no line end \(a torn row\)"):
        runs.read_metrics(tmp_path / "r")
    path.write_text(text + "3,0.5,x,1,1,1,1\n")
    with pytest.raises(ValueError, match="line 4 does not parse"):
        runs.read_metrics(tmp_path / "r")


WRITER_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from tinygrad_rnn import runs
    with runs.RunWriter(sys.argv[1], fsync="never") as run:
        run.start_metrics(monitored=True)
        norms = np.linspace(0.1, 1.0, 3000)  # about 60 kB a step, over many rows
        print("ready", flush=True)
        for i in range(10 ** 7):
            run.log(0.5 + i, grad_norm=1.0 / (i + 1), clipped_norm=0.25, lr=1e-3,
                    state_norms={("rnn", 0, 0, "h"): norms * (i + 1)})
""")


def test_a_killed_writer_leaves_only_whole_rows(tmp_path: Path) -> None:
    folder = tmp_path / "killed"
    child = subprocess.Popen([sys.executable, "-c", WRITER_CHILD, str(folder)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # kill it mid-run, after some rows
            if (folder / runs.STATE_NORMS).is_file() and \
                    (folder / runs.STATE_NORMS).stat().st_size > 3_000_000:
                break
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    manifest = runs.read_manifest(folder)
    assert manifest["status"] == "running"  # nobody finalised it
    m = runs.read_metrics(folder)  # every line parses, or this raises
    n = len(m["step"])
    assert n >= 10
    np.testing.assert_array_equal(m["step"], np.arange(1, n + 1))
    np.testing.assert_array_equal(m["loss"], 0.5 + np.arange(n))
    (steps, table), = runs.read_state_norms(folder).values()
    assert len(steps) in (n, n + 1)  # a step's state rows go out before its metrics row
    want = np.linspace(0.1, 1.0, 3000)[None, :] * (np.arange(len(steps)) + 1)[:, None]
    np.testing.assert_allclose(table[:n], want[:n], rtol=1e-15)
    if len(steps) > n:  # the step the kill interrupted: the norms written so far, then NaN
        done = ~np.isnan(table[n])
        assert not done[np.argmin(done):].any()
        np.testing.assert_allclose(table[n][done], want[n][done], rtol=1e-15)
    for name in (runs.METRICS, runs.STATE_NORMS):
        assert_no_row_crosses_a_block(folder / name)


def assert_no_row_crosses_a_block(path: Path) -> None:
    """The property that makes rows atomic (runs.py, 'Atomic rows'): every row, newline
    included, lies inside one 4096-byte block of the file."""
    data = path.read_bytes()
    start = 0
    while start < len(data):
        end = data.index(b"\n", start)  # a whole file: every row ends in a newline
        assert len(data[start:end].rstrip(b" ")) + 1 <= runs.MAX_ROW  # padding aside
        assert start // runs.BLOCK == end // runs.BLOCK, (path.name, start, end)
        start = end + 1


def test_rows_never_cross_a_block_and_long_vectors_are_split(tmp_path: Path) -> None:
    norms = np.random.default_rng(0).random(777) * 10.0 ** -np.arange(777)
    with runs.RunWriter(tmp_path / "r") as run:
        run.start_metrics(monitored=True)
        for i in range(300):
            run.log(1.0 / (i + 1), grad_norm=np.pi * i, clipped_norm=1.0, lr=1e-3,
                    state_norms={("encoder.rnn", 0, 1, "c"): norms * i})
    for name in (runs.METRICS, runs.STATE_NORMS):
        assert_no_row_crosses_a_block(tmp_path / "r" / name)
    (steps, table), = runs.read_state_norms(tmp_path / "r").values()
    np.testing.assert_array_equal(table, norms[None, :] * np.arange(300)[:, None])
    m = runs.read_metrics(tmp_path / "r")
    np.testing.assert_array_equal(m["grad_norm"], np.pi * np.arange(300))
    # appending to a file another writer left keeps the property
    with runs.RunWriter(tmp_path / "r", if_exists="append") as run:
        for i in range(50):
            run.log(0.1, grad_norm=1.0, clipped_norm=1.0, lr=1e-3,
                    state_norms={("encoder.rnn", 0, 1, "c"): norms})
    assert_no_row_crosses_a_block(tmp_path / "r" / runs.STATE_NORMS)
    assert len(runs.read_metrics(tmp_path / "r")["step"]) == 350


TRAIN_CHILD = textwrap.dedent("""
    import sys, numpy as np
    sys.path.insert(0, sys.argv[2])
    from test_runs import train_small
    result, mon = train_small(sys.argv[1], steps=10)
    np.save(sys.argv[1] + ".norms.npy", mon.state_norms("rnn"))
    np.save(sys.argv[1] + ".losses.npy", np.asarray(result.losses))
""")


def test_plot_regenerates_the_figures_from_the_csv_alone(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture) -> None:
    """The run happens in another process; `tinygrad-rnn plot` sees only its folder, and
    draws exactly the arrays the run had in memory."""
    folder = tmp_path / "run"
    subprocess.run([sys.executable, "-c", TRAIN_CHILD, str(folder),
                    str(Path(__file__).parent)], check=True, env={**os.environ,
                                                                  "MPLBACKEND": "Agg"})
    drawn = {}
    heatmap = viz.plot_state_grad_heatmap

    def spy(norms, *args, **kwargs):
        drawn["heatmap"] = np.array(norms)
        return heatmap(norms, *args, **kwargs)

    monkeypatch.setattr(viz, "plot_state_grad_heatmap", spy)
    code = cli.main(["plot", str(folder), "--out", str(tmp_path / "figs")])
    out, err = capsys.readouterr()
    assert code == 0, err
    names = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert names == ["grad_norms.png", "heatmap_run.png", "learning_curves.png", "lr.png"]
    for name in names:
        assert (tmp_path / "figs" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert name in out
    np.testing.assert_array_equal(drawn["heatmap"], np.load(str(folder) + ".norms.npy"))
    np.testing.assert_array_equal(runs.read_metrics(folder)["loss"],
                                  np.load(str(folder) + ".losses.npy"))


def test_plot_draws_a_folder_of_runs_and_explains_a_non_run(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture
                                                            ) -> None:
    with runs.open_run(tmp_path / "demo", config={"seed": 0}) as run:
        train_small(runs.child(run, "LSTM cell"), steps=3)
        train_small(runs.child(run, "Elman tanh"), cell="rnn", steps=3, monitor=False)
    assert [p.name for p in runs.find_runs(tmp_path / "demo")] == ["Elman_tanh",
                                                                   "LSTM_cell"]
    written = run_figures.plot_run(tmp_path / "demo")
    assert sorted(Path(p).name for p in written) == [
        "grad_norms.png", "heatmap_LSTM_cell.png", "learning_curves.png", "lr.png"]
    assert all(Path(p).parent == tmp_path / "demo" / "figures" for p in written)
    with runs.open_run(None) as nothing:
        assert nothing is None and runs.child(nothing, "x") is None
    code = cli.main(["plot", str(tmp_path / "empty_or_missing")])
    _, err = capsys.readouterr()
    assert code == 2 and "tinygrad-rnn plot: error:" in err and "is not a folder" in err
    (tmp_path / "empty").mkdir()
    code = cli.main(["plot", str(tmp_path / "empty")])
    _, err = capsys.readouterr()
    assert code == 2 and "no metrics.csv" in err


def test_tensorboard_event_files_when_installed(tmp_path: Path) -> None:
    try:
        runs._tensorboard_writer(tmp_path / "probe").close()
    except ImportError as err:
        assert "pip install tensorboardX" in str(err)
        pytest.skip("neither tensorboardX nor torch.utils.tensorboard is importable")
    with runs.RunWriter(tmp_path / "r", tensorboard=True) as run:
        train_small(run, steps=3)
    events = list((tmp_path / "r" / runs.TENSORBOARD).glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0


def test_manifest_is_plain_json_with_non_json_config_values(tmp_path: Path) -> None:
    config = {"rho": np.float32(0.5), "sizes": (1, 2), "arr": np.arange(3), "inf": np.inf,
              "obj": object}
    with runs.RunWriter(tmp_path / "r", config=config):
        pass
    raw = json.loads((tmp_path / "r" / runs.MANIFEST).read_text())
    assert raw["config"]["rho"] == 0.5 and raw["config"]["sizes"] == [1, 2]
    assert raw["config"]["arr"] == [0, 1, 2] and raw["config"]["inf"] == "inf"
    assert raw["config"]["obj"] == repr(object)


def test_state_norms_round_trip_exactly_any_floats(tmp_path_factory: pytest.TempPathFactory
                                                   ) -> None:
    """Any float64 values (NaN, inf, subnormals, 17-digit ones), any length: the file gives
    back exactly what was logged, whatever the splitting into rows."""
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra.numpy import arrays

    values = arrays(np.float64, st.integers(0, 200),
                    elements=st.floats(allow_nan=True, allow_infinity=True, width=64))

    @settings(max_examples=40, deadline=None)
    @given(rows=st.lists(values, min_size=1, max_size=4), loss=st.floats(width=64))
    def check(rows: list, loss: float) -> None:
        folder = tmp_path_factory.mktemp("rt")
        with runs.RunWriter(folder, if_exists="overwrite") as run:
            run.start_metrics(monitored=True)
            for row in rows:
                run.log(loss, grad_norm=1.0, clipped_norm=1.0, lr=0.1,
                        state_norms={("m", 0, 0, "h"): row})
        m = runs.read_metrics(folder)
        np.testing.assert_array_equal(m["loss"], [loss] * len(rows))
        states = runs.read_state_norms(folder)
        (steps, table), = states.values()
        np.testing.assert_array_equal(steps, np.arange(1, len(rows) + 1))
        for i, row in enumerate(rows):
            np.testing.assert_array_equal(table[i, :len(row)], row)
            assert np.isnan(table[i, len(row):]).all()
        assert_no_row_crosses_a_block(folder / runs.STATE_NORMS)

    check()
