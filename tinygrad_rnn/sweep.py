"""Sweeps: a grid (and random samples) of one registered experiment, one run folder per
point, on a local process pool or a Dask cluster (``tinygrad-rnn sweep CONFIG.toml --out
DIR``).

The config (TOML)::

    experiment = "adding"      # a name of tinygrad_rnn.experiments.EXPERIMENTS
    seed = 0                   # the sweep's seed: every point's seed derives from it
    seeds = 3                  # repetitions of each point (rep = 0, 1, 2), default 1
    workers = 2                # optional: local worker processes (--workers wins)
    scheduler = "tcp://host:8786"   # optional: run on this Dask cluster (--scheduler wins)

    [fixed]                    # settings every point shares
    steps = 300
    hidden = 32

    [grid]                     # every combination of these
    cell = ["lstm", "gru", "rnn"]
    T = [20, 50, 100]

    [random]                   # optional: samples drawn per grid point
    samples = 4
    lr = { log_uniform = [1e-3, 1e-1] }     # also uniform, int_uniform (inclusive), choice

    [summary]                  # optional: what the table and the figure show
    metric = "test_mse"        # defaults: the experiment's metric, x and line
    x = "T"
    line = "cell"

Points. Every combination of the grid values, times every random sample, times each rep, is
a point. Its name lists its values (``cell=lstm__T=20__rep=0``, ``sample=3`` for a random
sample), its run folder is ``DIR/points/NAME``, and its seed is drawn from
``numpy.random.SeedSequence`` with the config's seed and a hash of the point's values as
entropy: it depends on what the point is, never on the order in which points are listed or
run, so adding a grid value or a rep leaves every other point's seed (and result) as it
was. The random samples are drawn the same way, sample i from its own seed sequence.

Resuming. A point whose run folder says ``finished`` with the same parameters and seed is
skipped: run the same command again after an interruption, or after adding grid values,
and only the missing points run. A point that fails is retried once at the end of the
invocation; if it fails again it is reported (its folder's manifest holds the error) and the
command exits 1. A run folder holding a finished point with other parameters is an error
(another sweep's folder), never silently reused.

Where the points run. ``workers=1`` runs them one after another in this process; more
workers start that many fresh Python processes (spawned, each with one BLAS thread unless
the thread variables are already set); ``scheduler=ADDRESS`` (or a ``distributed.Client``)
submits them to a Dask cluster, which needs ``pip install "tinygrad_rnn[sweep]"``. The
workers write the run folders themselves, so ``DIR`` must be on a file system they share
(a laptop's disk for a local cluster, NFS or similar for a real one).

Results. ``DIR/results.csv`` has one row per point (its values, seed, status, attempts,
seconds and results); :func:`summary_table` averages the metric over reps and
``DIR/summary.png`` plots it against ``x``, one line per ``line`` value, with the spread of
the reps.

Why one module of about 780 lines: the config, its points, the local and Dask runners,
resumption and the summary all read the one config record defined here; the experiments a
sweep runs live in :mod:`tinygrad_rnn.experiments`.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import itertools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from .experiments import EXPERIMENTS, Experiment
from .runs import MANIFEST, RunWriter, write_json_atomic, read_manifest, slug

__all__ = ["SweepError", "SweepConfig", "SweepReport", "Point", "load_config", "points",
           "run_point", "run_sweep", "summary_table", "plot_summary", "RESULT"]

RESULT = "result.json"
TOP_KEYS = ("experiment", "seed", "seeds", "workers", "scheduler", "fixed", "grid", "random",
            "summary")
DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform", "choice")
SWEEP_EXTRA = 'pip install "tinygrad_rnn[sweep]"'
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


class SweepError(ValueError):
    """A sweep that cannot run as given: a bad config (the message names the file and the
    key), a missing optional dependency, a folder that holds another sweep."""


# ----------------------------------------------------------------------------- config
@dataclass
class SweepConfig:
    """A checked sweep config (see the module docstring for the TOML)."""

    experiment: Experiment
    seed: int = 0
    seeds: int = 1
    workers: int | None = None
    scheduler: str | None = None
    fixed: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    random: dict = field(default_factory=dict)
    samples: int = 0
    summary: dict = field(default_factory=dict)
    source: str = "<dict>"


def _read_toml(path: Path) -> dict:
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"  # 3.10: the same, from PyPI
    try:
        tomllib: Any = importlib.import_module(name)
    except ImportError:
        raise SweepError(f"{path}: reading TOML on Python "
                         f"{sys.version_info[0]}.{sys.version_info[1]} needs tomli: "
                         f"pip install tomli (Python 3.11 and later have tomllib)") from None
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise SweepError(f"sweep config {path} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        raise SweepError(f"{path}: not valid TOML: {err}") from None


def _kind(value: Any) -> str:
    return {bool: "a bool", int: "an int", float: "a float", str: "a string"}.get(
        type(value), f"a {type(value).__name__}")


def _check_value(src: str, key: str, value: Any, exp: Experiment, name: str) -> Any:
    """``value`` for parameter ``name`` of ``exp``, in the default's type (an int for a
    float parameter becomes a float); a SweepError naming ``src`` and ``key`` otherwise."""
    default = exp.defaults[name]
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if ok:
            value = float(value)
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise SweepError(f"{src}: {key} = {value!r} is {_kind(value)}; parameter {name!r} "
                         f"of experiment {exp.name!r} takes {_kind(default)} (default "
                         f"{default!r})")
    allowed = exp.choices.get(name)
    if allowed is not None and value not in allowed:
        raise SweepError(f"{src}: {key} = {value!r} is not one of {list(allowed)} (the "
                         f"values parameter {name!r} of experiment {exp.name!r} allows)")
    return value


def _check_param(src: str, section: str, name: str, exp: Experiment) -> None:
    if name not in exp.defaults:
        raise SweepError(f"{src}: unknown key {section}.{name}: experiment {exp.name!r} has "
                         f"no parameter {name!r}; its parameters are "
                         f"{sorted(exp.defaults)}")


def _count(src: str, key: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SweepError(f"{src}: {key} must be an int, got {value!r} ({_kind(value)})")
    if value < least:
        raise SweepError(f"{src}: {key} must be >= {least}, got {value}")
    return value


def _table(src: str, key: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise SweepError(f"{src}: {key} must be a table ([{key}] with name = value lines), "
                         f"got {_kind(value)}")
    return value


def _check_distribution(src: str, key: str, spec: Any, exp: Experiment, name: str) -> dict:
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        raise SweepError(f"{src}: {key} must be a table with one of {list(DISTRIBUTIONS)}, "
                         f"e.g. {name} = {{ uniform = [0.5, 1.5] }}, got {spec!r}")
    (kind, args), = spec.items()
    where = f"{key}.{kind}"
    if not isinstance(args, list) or not args:
        raise SweepError(f"{src}: {where} must be a non-empty list, got {args!r}")
    if kind == "choice":
        return {"choice": [_check_value(src, f"{where}[{i}]", v, exp, name)
                           for i, v in enumerate(args)]}
    if len(args) != 2:
        raise SweepError(f"{src}: {where} must be [low, high], got {args!r}")
    default = exp.defaults[name]
    wants_int = kind == "int_uniform"
    if wants_int != (isinstance(default, int) and not isinstance(default, bool)) or \
            isinstance(default, (bool, str)):
        raise SweepError(f"{src}: {where} draws {'ints' if wants_int else 'floats'}, but "
                         f"parameter {name!r} takes {_kind(default)}"
                         + ("; use int_uniform" if isinstance(default, int) and not wants_int
                            and not isinstance(default, bool) else "")
                         + ("; use choice" if isinstance(default, (bool, str)) else ""))
    low, high = (_check_value(src, f"{where}[{i}]", v, exp, name) for i, v in enumerate(args))
    if not low < high:
        raise SweepError(f"{src}: {where} needs low < high, got {args!r}")
    if kind == "log_uniform" and low <= 0:
        raise SweepError(f"{src}: {where} needs low > 0 (a log scale), got {args!r}")
    return {kind: [low, high]}


def load_config(config: str | os.PathLike | Mapping) -> SweepConfig:
    """Read and check a sweep config: a TOML file's path, or the same content as a dict.
    Every problem is a :class:`SweepError` naming the file and the key."""
    if isinstance(config, Mapping):
        src, raw = "<dict>", dict(config)
    elif isinstance(config, (str, os.PathLike)):
        src = os.fspath(config)
        raw = _read_toml(Path(config))
    else:
        raise TypeError(f"load_config: config must be a TOML file's path or a dict, got "
                        f"{type(config).__name__}")
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise SweepError(f"{src}: unknown key {unknown[0]!r}; a sweep config has "
                         f"{list(TOP_KEYS)}")
    if "experiment" not in raw:
        raise SweepError(f"{src}: missing key 'experiment' (one of "
                         f"{sorted(EXPERIMENTS)})")
    name = raw["experiment"]
    if not isinstance(name, str) or name not in EXPERIMENTS:
        raise SweepError(f"{src}: experiment = {name!r} is not a registered experiment; "
                         f"known: {sorted(EXPERIMENTS)}")
    exp = EXPERIMENTS[name]
    cfg = SweepConfig(experiment=exp, source=src)
    cfg.seed = _count(src, "seed", raw.get("seed", 0), 0)
    cfg.seeds = _count(src, "seeds", raw.get("seeds", 1), 1)
    if raw.get("workers") is not None:
        cfg.workers = _count(src, "workers", raw["workers"], 1)
    if raw.get("scheduler") is not None:
        if not isinstance(raw["scheduler"], str) or not raw["scheduler"]:
            raise SweepError(f"{src}: scheduler must be a Dask scheduler address such as "
                             f"'tcp://127.0.0.1:8786', got {raw['scheduler']!r}")
        cfg.scheduler = raw["scheduler"]
    for pname, value in _table(src, "fixed", raw.get("fixed", {})).items():
        _check_param(src, "fixed", pname, exp)
        cfg.fixed[pname] = _check_value(src, f"fixed.{pname}", value, exp, pname)
    for pname, values in _table(src, "grid", raw.get("grid", {})).items():
        _check_param(src, "grid", pname, exp)
        key = f"grid.{pname}"
        if pname in cfg.fixed:
            raise SweepError(f"{src}: {pname!r} is both in [fixed] and in [grid]; keep one")
        if not isinstance(values, list):
            raise SweepError(f"{src}: {key} must be a list of values, e.g. {pname} = "
                             f"[{exp.defaults[pname]!r}], got {values!r}")
        if not values:
            raise SweepError(f"{src}: {key} is an empty list: the grid would have no points")
        checked = [_check_value(src, f"{key}[{i}]", v, exp, pname)
                   for i, v in enumerate(values)]
        if len(set(map(repr, checked))) != len(checked):
            raise SweepError(f"{src}: {key} lists a value twice: {values!r}")
        cfg.grid[pname] = checked
    random = dict(_table(src, "random", raw.get("random", {})))
    if random:
        if "samples" not in random:
            raise SweepError(f"{src}: missing key random.samples: [random] needs samples = N, "
                             f"how many draws to make for each grid point")
        cfg.samples = _count(src, "random.samples", random.pop("samples"), 1)
        for pname, spec in random.items():
            _check_param(src, "random", pname, exp)
            if pname in cfg.fixed or pname in cfg.grid:
                raise SweepError(f"{src}: {pname!r} is in [random] and in "
                                 f"[{'fixed' if pname in cfg.fixed else 'grid'}]; keep one")
            cfg.random[pname] = _check_distribution(src, f"random.{pname}", spec, exp, pname)
        if not cfg.random:
            raise SweepError(f"{src}: [random] has samples but no parameter to draw")
    if not cfg.grid and not cfg.random:
        raise SweepError(f"{src}: the grid is empty: give [grid] at least one parameter with "
                         f"a list of values (or [random] parameters to draw)")
    summary = _table(src, "summary", raw.get("summary", {}))
    for key, value in summary.items():
        if key not in ("metric", "x", "line"):
            raise SweepError(f"{src}: unknown key summary.{key}; [summary] has metric, x "
                             f"and line")
        if not isinstance(value, str):
            raise SweepError(f"{src}: summary.{key} must be a string, got {value!r}")
        if key != "metric":
            _check_param(src, "summary", value, exp)
    cfg.summary = {"metric": exp.metric, "x": exp.x, "line": exp.line, **summary}
    return cfg


# ----------------------------------------------------------------------------- points
@dataclass(frozen=True)
class Point:
    """One run of a sweep: its name (and run folder name), the values that set it apart,
    every parameter, and its seed."""

    name: str
    key: dict
    params: dict
    seed: int


def _hash_words(text: str) -> list[int]:
    """Four 32-bit words of the SHA-256 of ``text``: entropy for a SeedSequence."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4)]


def point_seed(sweep_seed: int, key: Mapping) -> int:
    """The seed of the point with values ``key``: from a SeedSequence of the sweep's seed
    and a hash of the key (sorted JSON), so it depends on the point, not on its place."""
    text = json.dumps(dict(key), sort_keys=True)
    seq = np.random.SeedSequence([sweep_seed, *_hash_words(text)])
    return int(seq.generate_state(1, dtype=np.uint32)[0])


def _draw(spec: dict, rng: np.random.Generator) -> Any:
    (kind, args), = spec.items()
    if kind == "choice":
        return args[int(rng.integers(len(args)))]
    low, high = args
    if kind == "int_uniform":
        return int(rng.integers(low, high + 1))
    if kind == "log_uniform":
        return float(np.exp(rng.uniform(np.log(low), np.log(high))))
    return float(rng.uniform(low, high))


def _name(key: Mapping) -> str:
    parts = []
    for k, v in key.items():
        if k.startswith("random."):
            continue  # a sample is named by its index; its values are in the params
        text = f"{v:.6g}" if isinstance(v, float) else str(v)
        parts.append(f"{k}={text}")
    return slug("__".join(parts))


def points(cfg: SweepConfig) -> list[Point]:
    """Every point of the sweep, in a fixed order (grid in the config's order, then sample,
    then rep); see the module docstring for names and seeds."""
    exp = cfg.experiment
    base = {**exp.defaults, **cfg.fixed}
    samples: list[dict] = [{}]
    if cfg.random:
        samples = []
        for i in range(cfg.samples):
            words = _hash_words(json.dumps({"random_sample": i}))
            rng = np.random.default_rng(np.random.SeedSequence([cfg.seed, *words]))
            samples.append({"sample": i, **{f"random.{n}": _draw(spec, rng)
                                            for n, spec in cfg.random.items()}})
    out = []
    names = list(cfg.grid)
    for combo in itertools.product(*(cfg.grid[n] for n in names)):
        for sample in samples:
            for rep in range(cfg.seeds):
                key = {**dict(zip(names, combo)), **sample, "rep": rep}
                drawn = {k[len("random."):]: v for k, v in sample.items()
                         if k.startswith("random.")}
                params = {**base, **dict(zip(names, combo)), **drawn}
                out.append(Point(_name(key), key, params, point_seed(cfg.seed, key)))
    return out


# ----------------------------------------------------------------------------- one point
def _finished(folder: Path, point: Point) -> dict | None:
    """The results of ``point`` when its run folder holds it finished, else None; a
    finished run of other parameters is a SweepError."""
    if not (folder / MANIFEST).is_file() or not (folder / RESULT).is_file():
        return None
    manifest = read_manifest(folder)
    if manifest.get("status") != "finished":
        return None
    saved = json.loads((folder / RESULT).read_text(encoding="utf-8"))
    if saved.get("params") != json.loads(json.dumps(point.params)) or \
            saved.get("seed") != point.seed:
        raise SweepError(f"{folder} holds a finished run of other settings (params "
                         f"{saved.get('params')}, seed {saved.get('seed')}) than this sweep's "
                         f"point (params {point.params}, seed {point.seed}): use another --out "
                         f"folder, or remove that one")
    return saved


def run_point(spec: dict) -> dict:
    """Run one point in this process: ``spec`` holds ``experiment``, ``params``, ``seed``,
    ``folder``, ``name``, ``key`` and ``command``. Writes the run folder (overwriting an
    unfinished one) and ``result.json``; returns the saved result. This is what the process
    pool and the Dask workers call, so it takes and returns plain data."""
    exp = EXPERIMENTS.get(spec["experiment"])
    if exp is None:
        raise SweepError(f"run_point: experiment {spec['experiment']!r} is not registered in "
                         f"this process (registered: {sorted(EXPERIMENTS)}); register it in "
                         f"a module the workers import")
    folder = Path(spec["folder"])
    start = time.perf_counter()
    config = {"experiment": exp.name, "point": spec["name"], "key": spec["key"],
              "params": spec["params"]}
    with RunWriter(folder, config=config, seed=spec["seed"], if_exists="overwrite",
                   command=spec["command"]) as run:
        results = exp.run(dict(spec["params"]), spec["seed"], run)
        saved = {"name": spec["name"], "key": spec["key"], "params": spec["params"],
                 "seed": spec["seed"], "results": results,
                 "seconds": round(time.perf_counter() - start, 3)}
        write_json_atomic(folder / RESULT, saved)  # before the manifest says finished
    return saved


# ----------------------------------------------------------------------------- executors
@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Thread variables set to 1 while worker processes start (they inherit the
    environment; NumPy reads it when it loads), unless the user set them."""
    unset = [v for v in THREAD_VARS if v not in os.environ]
    for v in unset:
        os.environ[v] = "1"
    try:
        yield
    finally:
        for v in unset:
            os.environ.pop(v, None)


def _outcome(future: Any) -> tuple[Any, BaseException | None]:
    """(result, None) or (None, the error) of a finished future: the point's own exception,
    or the executor's (a worker process that died, a task the cluster lost or cancelled)."""
    try:
        return future.result(), None
    except Exception as err:  # noqa: BLE001  (reported as the point's failure)
        return None, err


class _Inline:
    """Run the points one by one in this process (workers=1), each when its result is
    asked for, so the progress bar moves point by point."""

    def submit(self, spec: dict) -> dict:
        return spec

    def results(self, handles: list) -> Iterator[tuple[int, Any, BaseException | None]]:
        for i, spec in enumerate(handles):
            try:
                result, err = run_point(spec), None
            except Exception as error:  # noqa: BLE001  (reported as the point's failure)
                result, err = None, error
            yield i, result, err

    def close(self) -> None:
        pass


class _Pool:
    """A process pool of fresh (spawned) interpreters."""

    def __init__(self, workers: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.threads = _one_blas_thread()
        self.threads.__enter__()  # until close(): the workers start on the first submits
        self.pool = ProcessPoolExecutor(max_workers=workers,
                                        mp_context=multiprocessing.get_context("spawn"))

    def submit(self, spec: dict) -> Any:
        return self.pool.submit(run_point, spec)

    def results(self, handles: list) -> Iterator[tuple[int, Any, BaseException | None]]:
        from concurrent.futures import as_completed

        index = {f: i for i, f in enumerate(handles)}
        for fut in as_completed(handles):
            yield (index[fut], *_outcome(fut))

    def close(self) -> None:
        try:
            self.pool.shutdown(wait=True, cancel_futures=True)
        finally:
            self.threads.__exit__(None, None, None)


class _Dask:
    """Points as tasks of a Dask cluster (an address, or a distributed.Client)."""

    def __init__(self, scheduler: Any) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise SweepError(f"running on a Dask cluster (scheduler={scheduler!r}) needs "
                             f"dask.distributed, which is not installed: "
                             f"{SWEEP_EXTRA}") from None
        if isinstance(scheduler, Client):
            self.client, self.owned = scheduler, False
        else:
            try:
                self.client, self.owned = Client(scheduler, timeout="20s"), True
            except (OSError, TimeoutError) as err:
                raise SweepError(f"cannot reach the Dask scheduler at {scheduler!r}: "
                                 f"{err}") from None
        self.attempt = 0

    def submit(self, spec: dict) -> Any:
        # pure=False: a retry is a new task, not the cached failure of the first
        return self.client.submit(run_point, spec, pure=False)

    def results(self, handles: list) -> Iterator[tuple[int, Any, BaseException | None]]:
        from distributed import as_completed

        index = {f.key: i for i, f in enumerate(handles)}
        for fut in as_completed(handles):
            yield (index[fut.key], *_outcome(fut))

    def close(self) -> None:
        if self.owned:
            self.client.close()


# ----------------------------------------------------------------------------- the sweep
@dataclass
class SweepReport:
    """What :func:`run_sweep` did: the points, which ran now, which were finished before
    (skipped), which were retried and which failed twice (name -> error), the results
    rows (one per point, as in results.csv), the summary table and the figure's path."""

    out: Path
    points: list[Point]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    retried: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)
    table: str = ""
    figure: str | None = None
    seconds: float = 0.0


def _spec(cfg: SweepConfig, point: Point, out: Path) -> dict:
    return {"experiment": cfg.experiment.name, "params": point.params, "seed": point.seed,
            "folder": os.fspath(out / "points" / point.name), "name": point.name,
            "key": point.key, "command": list(sys.argv)}


def _error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def run_sweep(config: str | os.PathLike | Mapping | SweepConfig, out: str | os.PathLike,
              workers: int | None = None, scheduler: Any = None,
              progress: bool | None = None, echo: bool = True) -> SweepReport:
    """Run (or resume) the sweep ``config`` into the folder ``out``; see the module
    docstring. ``workers`` and ``scheduler`` override the config's; without either, the
    points run on as many processes as there are usable CPUs. ``progress`` follows
    :func:`tinygrad_rnn.training.progress_enabled` when None. ``echo`` prints what happens
    and the summary table. Returns a :class:`SweepReport`; points that failed twice are in
    ``report.failed`` (not raised)."""
    from .training import progress_bar

    start = time.perf_counter()
    cfg = config if isinstance(config, SweepConfig) else load_config(config)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise SweepError(f"run_sweep: workers must be an int >= 1, got {workers!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "points").mkdir(exist_ok=True)
    every = points(cfg)
    report = SweepReport(out=out, points=every)
    saved: dict[str, dict] = {}
    todo = []
    for point in every:
        done = _finished(out / "points" / point.name, point)
        if done is not None:
            saved[point.name] = done
            report.skipped.append(point.name)
        else:
            todo.append(point)
    write_json_atomic(out / "sweep.json", {
        "source": cfg.source, "experiment": cfg.experiment.name, "seed": cfg.seed,
        "seeds": cfg.seeds, "fixed": cfg.fixed, "grid": cfg.grid, "random": cfg.random,
        "samples": cfg.samples, "points": len(every)})
    scheduler = scheduler if scheduler is not None else cfg.scheduler
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1)
    workers = workers or cfg.workers or usable
    where = (f"Dask scheduler {getattr(scheduler, 'scheduler', scheduler)}"
             if scheduler is not None else
             "this process" if workers == 1 or len(todo) <= 1 else
             f"{min(workers, len(todo))} worker processes")
    if echo:
        plan = f"{len(todo)} to run on {where}" if todo else "nothing to run"
        print(f"sweep {cfg.experiment.name} ({cfg.source}): {len(every)} point"
              f"{'s' if len(every) != 1 else ''}, "
              f"{len(report.skipped)} finished before, {plan}", flush=True)
    attempts = {p.name: 0 for p in todo}
    errors: dict[str, str] = {}
    if todo:
        if scheduler is not None:
            executor: Any = _Dask(scheduler)
        elif workers == 1 or len(todo) == 1:
            executor = _Inline()
        else:
            executor = _Pool(min(workers, len(todo)))
        try:
            with progress_bar(len(todo), f"sweep {cfg.experiment.name}", progress) as bar:
                batch = todo
                for attempt in (1, 2):  # the first try, then one retry of the failures
                    if attempt == 2 and isinstance(executor, _Pool):
                        # a worker that died breaks the whole pool: retry on a fresh one
                        executor.close()
                        executor = _Pool(min(workers, len(batch)))
                    handles = [executor.submit(_spec(cfg, p, out)) for p in batch]
                    failed = []
                    for i, result, err in executor.results(handles):
                        point = batch[i]
                        attempts[point.name] = attempt
                        if err is None:
                            saved[point.name] = result
                            report.ran.append(point.name)
                            errors.pop(point.name, None)
                            bar.update(1)
                        else:
                            errors[point.name] = _error_text(err)
                            failed.append(point)
                            if attempt == 2:
                                bar.update(1)
                            if echo:
                                what = "retrying it" if attempt == 1 else "giving up"
                                print(f"point {point.name} failed (attempt {attempt}, "
                                      f"{what}): {errors[point.name]}", file=sys.stderr,
                                      flush=True)
                    if not failed:
                        break
                    if attempt == 1:
                        report.retried = [p.name for p in failed]
                    batch = failed
        finally:
            executor.close()
    report.failed = dict(errors)
    report.rows = _rows(cfg, every, saved, attempts, errors)
    _write_results(out / "results.csv", report.rows)
    report.table = summary_table(cfg, report.rows)
    report.figure = plot_summary(cfg, report.rows, out / "summary.png")
    report.seconds = time.perf_counter() - start
    if echo:
        print(report.table)
        if report.failed:
            print(f"{len(report.failed)} point(s) failed twice (their manifests hold the "
                  f"errors):", file=sys.stderr)
            for name, err in report.failed.items():
                print(f"  {name}: {err}", file=sys.stderr)
        print(f"{len(report.ran)} ran, {len(report.skipped)} skipped (finished before), "
              f"{len(report.retried)} retried, {len(report.failed)} failed; "
              f"results in {out / 'results.csv'}"
              + (f", figure {report.figure}" if report.figure else "")
              + f" ({report.seconds:.1f} s)")
    return report


def _rows(cfg: SweepConfig, every: list[Point], saved: dict, attempts: dict,
          errors: dict) -> list[dict]:
    rows = []
    for p in every:
        row: dict = {"point": p.name}
        row.update({k: v for k, v in p.key.items() if not k.startswith("random.")})
        row.update({f"param.{k}": v for k, v in p.params.items()})
        row["seed"] = p.seed
        if p.name in saved:
            row["status"] = "finished"
            row["attempts"] = attempts.get(p.name, 0)
            row["seconds"] = saved[p.name]["seconds"]
            row.update(saved[p.name]["results"])
        else:
            row["status"] = "failed"
            row["attempts"] = attempts.get(p.name, 0)
            row["error"] = errors.get(p.name, "")
        rows.append(row)
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    text = str(value)
    if any(c in text for c in ',"\n'):
        text = '"' + text.replace('"', '""').replace("\n", " ") + '"'
    return text


def _write_results(path: Path, rows: list[dict]) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    lines = [",".join(columns)]
    lines += [",".join(_cell(row.get(c)) for c in columns) for row in rows]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _groups(cfg: SweepConfig, rows: list[dict]) -> dict[tuple, list[float]]:
    """metric values per point without its rep: (key values...) -> [value per rep]."""
    metric = cfg.summary["metric"]
    groups: dict[tuple, list[float]] = {}
    for row in rows:
        label = tuple((k, row[k]) for k in row
                      if k in cfg.grid or k == "sample")
        value = row.get(metric)
        groups.setdefault(label, [])
        if row["status"] == "finished" and isinstance(value, (int, float)):
            groups[label].append(float(value))
    return groups


def summary_table(cfg: SweepConfig, rows: list[dict]) -> str:
    """The metric per point averaged over its reps: mean, standard deviation (over reps),
    min, max and how many reps finished; one line per point."""
    metric = cfg.summary["metric"]
    groups = _groups(cfg, rows)
    keys = [k for k in cfg.grid] + (["sample"] if cfg.random else [])
    widths = [max(len(k), *(len(str(dict(label)[k])) for label in groups)) for k in keys]
    head = "  ".join(f"{k:>{w}}" for k, w in zip(keys, widths))
    lines = [f"{metric} over {cfg.seeds} seed(s) per point",
             f"{head}  {'mean':>10}  {'std':>9}  {'min':>10}  {'max':>10}  {'n':>3}"]
    for label, values in groups.items():
        cells = "  ".join(f"{str(dict(label)[k]):>{w}}" for k, w in zip(keys, widths))
        if values:
            v = np.asarray(values)
            std = float(v.std(ddof=1)) if v.size > 1 else float("nan")
            lines.append(f"{cells}  {v.mean():>10.4g}  {std:>9.3g}  {v.min():>10.4g}  "
                         f"{v.max():>10.4g}  {v.size:>3d}")
        else:
            lines.append(f"{cells}  {'(failed)':>10}  {'':>9}  {'':>10}  {'':>10}  {0:>3d}")
    return "\n".join(lines)


def plot_summary(cfg: SweepConfig, rows: list[dict], path: str | os.PathLike) -> str | None:
    """``metric`` against ``x`` (a grid parameter), one line per value of ``line`` (and of
    any other grid parameter), the mean over reps with a band from the smallest to the
    largest rep and each rep as a dot. None (no figure) when ``x`` is not varied in the
    grid or has one value."""
    from . import viz

    x, line, metric = cfg.summary["x"], cfg.summary["line"], cfg.summary["metric"]
    if x not in cfg.grid or len(cfg.grid[x]) < 2 or not isinstance(cfg.grid[x][0],
                                                                    (int, float)):
        return None
    series: dict[str, dict[float, list[float]]] = {}
    for label, values in _groups(cfg, rows).items():
        d = dict(label)
        others = sorted((kv for kv in d.items() if kv[0] != x), key=lambda kv: kv[0] != line)
        name = ", ".join(f"{k}={v}" for k, v in others) or metric  # the line's value first
        series.setdefault(name, {}).setdefault(float(d[x]), []).extend(values)
    plt = viz.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    positive = True
    for k, (name, by_x) in enumerate(series.items()):
        xs = sorted(v for v in by_x if by_x[v])
        if not xs:
            continue
        color = colors[k % len(colors)]
        mean = [np.mean(by_x[v]) for v in xs]
        lo = [np.min(by_x[v]) for v in xs]
        hi = [np.max(by_x[v]) for v in xs]
        ax.plot(xs, mean, "o-", color=color, label=name, lw=1.6)
        ax.fill_between(xs, lo, hi, color=color, alpha=0.15, lw=0)
        for v in xs:
            ax.plot([v] * len(by_x[v]), by_x[v], ".", color=color, alpha=0.5, ms=4)
        positive &= min(lo) > 0
    if cfg.experiment.name == "adding" and metric == "test_mse":
        ax.axhline(1 / 6, color="0.4", ls=":", lw=1, label="predict 1 (1/6)")
    if positive:
        ax.set_yscale("log")
    ax.set(xlabel=x, ylabel=metric,
           title=f"{cfg.experiment.name}: {metric} against {x}\nmean over {cfg.seeds} "
                 f"seed(s); band: smallest to largest, dots: each seed")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    written = viz.save_figure(fig, path)
    plt.close(fig)
    return written
