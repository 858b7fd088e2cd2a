"""Sweeps (tinygrad_rnn/sweep.py, tinygrad_rnn/experiments.py): a small grid runs locally
(in process and on a process pool), a second invocation runs nothing new, a failing point is
retried once and reported, a Dask LocalCluster gives the same result per point, seeds depend
on the point and not its order, and bad configs are errors naming the file and the key.
Every point trains for a few updates only."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from tinygrad_rnn import cli, experiments, runs, sweep
from tinygrad_rnn.sweep import SweepError, load_config, run_sweep

ROOT = Path(__file__).resolve().parents[1]
TINY = {"steps": 3, "hidden": 4, "batch": 4, "n_test": 16}


def small(**grid) -> dict:
    return {"experiment": "adding", "seed": 3, "seeds": 2, "fixed": dict(TINY),
            "grid": grid or {"cell": ["lstm", "rnn"]}}


def results_by_point(out: Path) -> dict[str, dict]:
    with open(out / "results.csv", newline="") as fh:
        return {row["point"]: row for row in csv.DictReader(fh)}


def test_a_four_point_sweep_runs_on_a_pool_and_a_second_run_does_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    report = run_sweep(small(), tmp_path, workers=2, progress=False)
    names = ["cell=lstm__rep=0", "cell=lstm__rep=1", "cell=rnn__rep=0", "cell=rnn__rep=1"]
    assert [p.name for p in report.points] == names
    assert sorted(report.ran) == names and not report.skipped and not report.failed
    rows = results_by_point(tmp_path)
    assert list(rows) == names
    for p in report.points:
        folder = tmp_path / "points" / p.name
        manifest = runs.read_manifest(folder)
        assert manifest["status"] == "finished" and manifest["seed"] == p.seed
        assert manifest["config"]["params"] == p.params
        assert len(runs.read_metrics(folder)["step"]) == TINY["steps"]
        saved = json.loads((folder / sweep.RESULT).read_text())
        assert float(rows[p.name]["test_mse"]) == saved["results"]["test_mse"]
        assert rows[p.name]["status"] == "finished" and rows[p.name]["attempts"] == "1"
    assert (tmp_path / "summary.png").is_file() is False  # no numeric x varied: no figure
    out = capsys.readouterr().out
    assert "test_mse over 2 seed(s) per point" in out and "4 ran, 0 skipped" in out

    again = run_sweep(small(), tmp_path, workers=2, progress=False)
    assert again.ran == [] and again.skipped == names and not again.failed
    assert results_by_point(tmp_path) == {n: {**r, "attempts": "0"} for n, r in rows.items()}
    assert "0 ran, 4 skipped" in capsys.readouterr().out


def test_added_grid_values_run_only_the_new_points_with_unchanged_seeds(
        tmp_path: Path) -> None:
    first = run_sweep(small(T=[5, 6]), tmp_path, workers=1, progress=False, echo=False)
    more = run_sweep({**small(T=[7, 5, 6]), "seeds": 3}, tmp_path, workers=1,
                     progress=False, echo=False)
    assert sorted(more.skipped) == sorted(first.ran)
    assert sorted(more.ran) == sorted(["T=7__rep=0", "T=7__rep=1", "T=7__rep=2",
                                       "T=5__rep=2", "T=6__rep=2"])
    seeds = {p.name: p.seed for p in first.points}
    assert all(seeds[p.name] == p.seed for p in more.points if p.name in seeds)
    assert len({p.seed for p in more.points}) == len(more.points)
    other = sweep.points(load_config({**small(T=[5, 6]), "seed": 4}))
    assert not {p.seed for p in other} & set(seeds.values())


def test_a_failing_point_is_retried_once_and_reported(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    # T = 1 is refused by adding_problem (T >= 2): that point fails on every attempt
    report = run_sweep(small(T=[1, 5]), tmp_path, workers=1, progress=False)
    bad = ["T=1__rep=0", "T=1__rep=1"]
    assert sorted(report.failed) == bad and sorted(report.retried) == bad
    assert sorted(report.ran) == ["T=5__rep=0", "T=5__rep=1"]
    assert "adding_problem: T must be at least 2, got 1" in report.failed[bad[0]]
    rows = results_by_point(tmp_path)
    assert rows[bad[0]]["status"] == "failed" and rows[bad[0]]["attempts"] == "2"
    assert "T must be at least 2" in rows[bad[0]]["error"]
    manifest = runs.read_manifest(tmp_path / "points" / bad[0])
    assert manifest["status"] == "failed" and manifest["error"]["type"] == "ValueError"
    err = capsys.readouterr().err
    assert "failed (attempt 1, retrying it)" in err and "failed (attempt 2, giving up)" in err
    assert "2 point(s) failed twice" in err
    # the command says so with exit status 1; the finished points are not run again
    config = tmp_path / "fail_sweep.toml"
    config.write_text('experiment = "adding"\nseed = 3\nseeds = 2\n[fixed]\nsteps = 3\n'
                      'hidden = 4\nbatch = 4\nn_test = 16\n[grid]\nT = [1, 5]\n')
    assert cli.main(["sweep", str(config), "--out", str(tmp_path), "--workers", "1",
                     "--no-progress"]) == 1
    assert "0 ran, 2 skipped (finished before), 2 retried, 2 failed" in capsys.readouterr().out


def test_a_point_that_fails_once_succeeds_on_its_retry(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    tries: dict[int, int] = {}

    def flaky(params: dict, seed: int, run) -> dict:
        tries[params["x"]] = tries.get(params["x"], 0) + 1
        if params["x"] == 2 and tries[2] == 1:
            raise OSError("the network file system hiccuped")
        run.log(float(params["x"]), grad_norm=1.0, clipped_norm=1.0, lr=0.1)
        return {"value": params["x"] * 10.0}

    monkeypatch.setitem(experiments.EXPERIMENTS, "flaky", experiments.Experiment(
        "flaky", flaky, defaults={"x": 0}, metric="value", x="x"))
    report = run_sweep({"experiment": "flaky", "grid": {"x": [1, 2, 3]}}, tmp_path,
                       workers=1, progress=False, echo=False)
    assert report.retried == ["x=2__rep=0"] and not report.failed
    assert tries == {1: 1, 2: 2, 3: 1}
    rows = results_by_point(tmp_path)
    assert [rows[n]["value"] for n in rows] == ["10.0", "20.0", "30.0"]
    assert rows["x=2__rep=0"]["attempts"] == "2"
    assert Path(report.figure).is_file()


def test_the_same_sweep_on_a_dask_local_cluster_gives_identical_results(
        tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    config = small(cell=["lstm", "gru"])
    local = run_sweep(config, tmp_path / "local", workers=1, progress=False, echo=False)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        remote = run_sweep(config, tmp_path / "dask", scheduler=cluster.scheduler_address,
                           progress=False, echo=False)
        hosts = {runs.read_manifest(tmp_path / "dask" / "points" / n)["environment"]["pid"]
                 for n in remote.ran}
    assert sorted(remote.ran) == sorted(local.ran) and len(remote.ran) == 4
    assert len(hosts) >= 1 and not hosts & {runs.environment()["pid"]}  # not this process
    a, b = results_by_point(tmp_path / "local"), results_by_point(tmp_path / "dask")
    for name in a:
        for column in ("seed", "test_mse", "final_loss"):
            assert a[name][column] == b[name][column], (name, column)
        np.testing.assert_array_equal(
            runs.read_metrics(tmp_path / "local" / "points" / name)["loss"],
            runs.read_metrics(tmp_path / "dask" / "points" / name)["loss"])


def test_scheduler_without_dask_names_the_extra(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    with pytest.raises(SweepError, match=r'pip install "tinygrad_rnn\[sweep\]"'):
        run_sweep(small(), tmp_path, scheduler="tcp://127.0.0.1:8786", echo=False)
    config = tmp_path / "s_sweep.toml"
    config.write_text('experiment = "adding"\n[grid]\nT = [5]\n')
    code = cli.main(["sweep", str(config), "--out", str(tmp_path / "o"), "--scheduler",
                     "tcp://127.0.0.1:8786"])
    assert code == 2
    assert 'tinygrad-rnn sweep: error:' in capsys.readouterr().err


BAD_CONFIGS = [
    ('experiment = "adder"\n[grid]\nT = [5]\n', "experiment = 'adder' is not a registered"),
    ('experiment = "adding"\nsed = 1\n[grid]\nT = [5]\n', "unknown key 'sed'"),
    ('experiment = "adding"\n[grid]\nsize = [5]\n', "unknown key grid.size: experiment "
                                                     "'adding' has no parameter 'size'"),
    ('experiment = "adding"\n[fixed]\nhiden = 4\n[grid]\nT = [5]\n', "unknown key fixed.hiden"),
    ('experiment = "adding"\n[grid]\nT = []\n', "grid.T is an empty list"),
    ('experiment = "adding"\n[fixed]\nT = 5\n', "the grid is empty"),
    ('experiment = "adding"\n[grid]\nT = [5, 2.5]\n', "grid.T[1] = 2.5 is a float; parameter "
                                                       "'T' of experiment 'adding' takes an int"),
    ('experiment = "adding"\n[grid]\nT = 5\n', "grid.T must be a list of values"),
    ('experiment = "adding"\n[grid]\ncell = ["lstm", "transformer"]\n',
     "grid.cell[1] = 'transformer' is not one of"),
    ('experiment = "adding"\n[fixed]\nlr = "fast"\n[grid]\nT = [5]\n',
     "fixed.lr = 'fast' is a string; parameter 'lr' of experiment 'adding' takes a float"),
    ('experiment = "adding"\nseeds = 0\n[grid]\nT = [5]\n', "seeds must be >= 1"),
    ('experiment = "adding"\nseed = 1.5\n[grid]\nT = [5]\n', "seed must be an int"),
    ('experiment = "adding"\n[random]\nsamples = 2\nlr = { normal = [0, 1] }\n',
     "random.lr must be a table with one of"),
    ('experiment = "adding"\n[random]\nsamples = 2\nT = { uniform = [5, 9] }\n',
     "random.T.uniform draws floats, but parameter 'T' takes an int; use int_uniform"),
    ('experiment = "adding"\n[random]\nsamples = 2\nlr = { log_uniform = [0.0, 1.0] }\n',
     "random.lr.log_uniform needs low > 0"),
    ('experiment = "adding"\n[random]\nlr = { uniform = [0.1, 1.0] }\n',
     "missing key random.samples"),
    ('experiment = "adding"\n[random]\nsamples = 2.0\nlr = { uniform = [0.1, 1.0] }\n',
     "random.samples must be an int, got 2.0"),
    ('experiment = "adding"\n[fixed]\nT = 5\n[grid]\nT = [5, 6]\n',
     "'T' is both in [fixed] and in [grid]"),
    ('experiment = "adding"\n[grid]\nT = [5]\n[summary]\nx = "time"\n',
     "unknown key summary.time"),
    ('experiment = "adding"\n[grid\nT = [5]\n', "not valid TOML"),
]


@pytest.mark.parametrize("text,message", BAD_CONFIGS)
def test_bad_configs_are_errors_naming_the_file_and_the_key(tmp_path: Path, text: str,
                                                            message: str) -> None:
    path = tmp_path / "bad_sweep.toml"
    path.write_text(text)
    with pytest.raises(SweepError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_python_3_10_without_tomli_names_the_package(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "a_sweep.toml"
    path.write_text('experiment = "adding"\n[grid]\nT = [5]\n')
    monkeypatch.setattr(sys, "version_info", (3, 10, 14, "final", 0))
    monkeypatch.setitem(sys.modules, "tomli", None)  # not installed
    with pytest.raises(SweepError, match=r"on Python 3\.10 needs tomli: pip install tomli"):
        load_config(path)


def test_bad_config_through_the_command_exits_2(tmp_path: Path,
                                                capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bad_sweep.toml"
    path.write_text('experiment = "adding"\n[grid]\nT = []\n')
    assert cli.main(["sweep", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"tinygrad-rnn sweep: error: {path}: grid.T is an empty list" in err
    assert cli.main(["sweep", str(tmp_path / "missing.toml"), "--out", "o"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_random_samples_are_reproducible_and_within_their_ranges() -> None:
    config = {"experiment": "adding", "seed": 1, "fixed": dict(TINY),
              "grid": {"cell": ["gru"]},
              "random": {"samples": 5, "lr": {"log_uniform": [1e-3, 1e-1]},
                         "T": {"int_uniform": [5, 9]}, "clip": {"choice": [0.5, 1.0]}}}
    a, b = sweep.points(load_config(config)), sweep.points(load_config(config))
    assert [(p.name, p.params, p.seed) for p in a] == [(p.name, p.params, p.seed) for p in b]
    assert [p.name for p in a] == [f"cell=gru__sample={i}__rep=0" for i in range(5)]
    assert all(1e-3 <= p.params["lr"] <= 1e-1 and 5 <= p.params["T"] <= 9
               and p.params["clip"] in (0.5, 1.0) for p in a)
    assert len({p.params["lr"] for p in a}) == 5
    more = sweep.points(load_config({**config, "random": {**config["random"], "samples": 7}}))
    assert [p.params for p in more[:5]] == [p.params for p in a]  # sample i stays sample i


def test_a_folder_of_another_sweep_is_refused(tmp_path: Path) -> None:
    run_sweep(small(T=[5]), tmp_path, workers=1, progress=False, echo=False)
    changed = small(T=[5])
    changed["fixed"] = {**TINY, "lr": 0.5}
    with pytest.raises(SweepError, match="holds a finished run of other settings"):
        run_sweep(changed, tmp_path, workers=1, progress=False, echo=False)


@pytest.mark.parametrize("name,fixed,metric", [
    ("copy", {"delay": 2, "length": 2, "num_symbols": 3, "steps": 2, "hidden": 4,
              "batch": 4, "n_test": 8}, "copy_accuracy"),
    ("vanishing", {"T": 12, "hidden": 6, "batch": 4}, "decay_rate"),
    ("char_lm", {"hidden": 8, "emb": 4, "bptt": 8, "batch": 4, "max_chars": 2000,
                 "n_eval": 100}, "test_ppl"),
])
def test_every_registered_experiment_runs_a_point(tmp_path: Path, name: str, fixed: dict,
                                                  metric: str) -> None:
    cell = "rnn" if name != "char_lm" else "gru"
    report = run_sweep({"experiment": name, "fixed": fixed, "grid": {"cell": [cell]}},
                       tmp_path, workers=1, progress=False, echo=False)
    assert not report.failed, report.failed
    row = report.rows[0]
    assert np.isfinite(row[metric])
    assert runs.read_manifest(tmp_path / "points" / f"cell={cell}__rep=0")["status"] == \
        "finished"
    if name == "vanishing":
        (_, table), = runs.read_state_norms(tmp_path / "points" / "cell=rnn__rep=0").values()
        assert table.shape == (1, 12) and row["horizon"] >= 1


def test_rho_for_a_gated_cell_is_an_error_not_ignored(tmp_path: Path) -> None:
    report = run_sweep({"experiment": "vanishing", "fixed": {"T": 6, "hidden": 4, "batch": 2},
                        "grid": {"cell": ["gru"], "rho": [0.5]}}, tmp_path, workers=1,
                       progress=False, echo=False)
    (error,) = report.failed.values()
    assert "rho=0.5 sets the spectral radius of an Elman RNN's W_hh" in error


def test_the_committed_sweep_configs_load() -> None:
    configs = sorted((ROOT / "sweeps").glob("*_sweep.toml"))
    assert {p.name for p in configs} >= {"adding_small_sweep.toml", "adding_full_sweep.toml"}
    for path in configs:
        cfg = load_config(path)
        assert sweep.points(cfg)
    full = load_config(ROOT / "sweeps" / "adding_full_sweep.toml")
    assert full.seeds == 3 and set(full.grid) == {"cell", "T"}
    assert set(full.grid["cell"]) == {"lstm", "gru", "rnn"}
    assert len(sweep.points(full)) == 3 * len(full.grid["T"]) * 3
