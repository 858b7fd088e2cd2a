"""Run folders: what a training run did, on disk, in files a person (or a plot) can read later.

A run folder holds

``manifest.json``
    who ran what, where: the command line, the config, the seed, the versions of Python,
    tinygrad_rnn, NumPy, matplotlib and tqdm, NumPy's BLAS, the thread settings, the device,
    the git revision of the source checkout (when there is one), the start and end times and
    the exit status. It is written when the run starts (``"status": "running"``) and
    rewritten at the end (``"finished"``, or ``"failed"`` with the error), each time
    atomically (a temporary file renamed over the old one), so a reader never sees half a
    manifest, and a run that was killed stays ``"running"``.
``metrics.csv``
    one row per optimizer update: the step, the loss, the validation loss (when one was
    computed at that step), the global gradient norm before and after clipping, the
    learning rate, the seconds since the start and, when a
    :class:`~tinygrad_rnn.monitor.GradientMonitor` watches the model, ||dL/dh_t|| at the
    first and the last step of the first recurrent layer (``dh_first``, ``dh_last``).
``state_norms.csv``
    with a monitor: the whole per-step vector ||dL/dh_t|| (and ||dL/dc_t|| for an LSTM) of
    every recurrent module, layer and direction, for every update: columns step, module,
    layer, direction, kind, t0 and the norms from time step t0 on, separated by spaces
    (enough for the heatmap of ``tinygrad-rnn plot``). A step's rows are written before its
    row of metrics.csv; norms of a step that a killed run did not finish read as NaN.

Atomic rows
-----------
Each row is written with a single ``os.write`` of the whole line, newline included, to a
descriptor opened with ``O_APPEND``, and a process killed at any moment (SIGKILL included)
leaves the files with whole rows only. One write is not enough for that by itself: Linux
copies a write into the page cache one page at a time and, when the process is killed,
stops between two pages, so a row that crosses a 4096-byte boundary of the file can be cut
(measured here: 1 in 30 kills of a writer of 3000-byte rows left half a row). Hence two rules:
a row is at most ``MAX_ROW`` (512) bytes, and a row after which less than ``MAX_ROW`` bytes
would be left in its 4096-byte block is padded with spaces to the end of the block, so that
no row ever crosses a block boundary (at most 1/8 of the file is padding). A long per-step
vector of ``state_norms.csv`` is split over several rows, each starting at its time step
``t0``. A write that has returned is in the kernel's page cache even if the process dies
right after. :func:`read_metrics` and :func:`read_state_norms` therefore read every line
strictly and raise on a malformed one instead of skipping it.

fsync policy (``fsync=``): ``"close"`` (the default) calls ``os.fsync`` when the file is
closed, so a finished run's rows are on the disk; ``"row"`` after every row (slow on some
file systems, but then a power cut loses at most the row being written); ``"never"`` leaves it
to the operating system. None of them matters for a killed process, only for a machine that
goes down.

An existing run is never overwritten by accident: a folder that already holds a
``manifest.json`` or ``metrics.csv`` is an error unless ``if_exists="overwrite"`` (start
again: the run's files are removed, nothing else in the folder) or ``"append"`` (continue it:
rows go on from the last step written).

TensorBoard: ``tensorboard=True`` also writes event files into ``RUN_DIR/tensorboard``
through ``tensorboardX`` or, when that is missing, ``torch.utils.tensorboard``; with neither
installed it is an ImportError that says what to install. It is never switched on by itself.

Usage::

    with tr.runs.RunWriter("runs/adding", config={"T": 50}, seed=0) as run:
        tr.training.fit(step, 200, opt, run_dir=run)
    tr.runs.read_metrics("runs/adding")        # {'step': array([1, 2, ...]), 'loss': ...}

``tr.training.fit(..., run_dir="runs/x")`` with a path makes (and closes) the writer itself.
``tinygrad-rnn plot RUN_DIR`` redraws the figures from these files alone
(:func:`tinygrad_rnn.run_figures.plot_run`).
"""
from __future__ import annotations

import contextlib
import datetime
import importlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

__all__ = ["RunWriter", "read_manifest", "read_metrics", "read_state_norms", "find_runs",
           "child", "slug", "open_run", "MANIFEST", "METRICS", "STATE_NORMS",
           "environment"]

MANIFEST = "manifest.json"
METRICS = "metrics.csv"
STATE_NORMS = "state_norms.csv"
TENSORBOARD = "tensorboard"
#: the files that make a folder a run folder (and that ``if_exists="overwrite"`` removes)
RUN_FILES = (MANIFEST, METRICS, STATE_NORMS)
#: the columns of metrics.csv, in order; the dh_* columns only when a monitor is given
BASE_COLUMNS = ("step", "loss", "val_loss", "grad_norm", "clipped_norm", "lr", "elapsed_s")
MONITOR_COLUMNS = ("dh_first", "dh_last")
STATE_COLUMNS = ("step", "module", "layer", "direction", "kind", "t0", "norms")
FSYNC_POLICIES = ("close", "row", "never")
IF_EXISTS = ("error", "overwrite", "append")
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                   "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


# ----------------------------------------------------------------------------- environment
def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def _git_revision(folder: Path) -> str | None:
    """The commit of the git checkout holding ``folder`` (with ``+dirty`` when files differ
    from it), or None: no git, not a checkout, or git failed. Never raises."""
    git = shutil.which("git")
    if git is None:
        return None
    try:
        rev = subprocess.run([git, "-C", str(folder), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if rev.returncode != 0:
            return None
        dirty = subprocess.run([git, "-C", str(folder), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
        mark = "+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else ""
        return rev.stdout.strip() + mark
    except (OSError, subprocess.SubprocessError):
        return None


def _blas() -> list[dict]:
    """NumPy's BLAS: threadpoolctl's view of the loaded libraries when it is installed, else
    NumPy's build configuration. Never raises."""
    try:
        from threadpoolctl import threadpool_info

        return [{k: pool.get(k) for k in ("internal_api", "version", "num_threads",
                                          "filepath")} for pool in threadpool_info()]
    except Exception:  # noqa: BLE001  (not installed, or it failed: fall back)
        pass
    try:
        config: Any = np.show_config(mode="dicts")
        deps = config.get("Build Dependencies", {})
        return [{"internal_api": key, "version": deps.get(key, {}).get("version"),
                 "name": deps.get(key, {}).get("name")} for key in ("blas", "lapack")]
    except Exception:  # noqa: BLE001  (an older NumPy without mode='dicts')
        return []


def environment() -> dict:
    """Versions, BLAS, thread settings, host and git revision: the part of a manifest that
    describes the machine rather than the run."""
    from importlib import metadata

    # the package's version without importing the package's top (it is loaded already)
    own = getattr(sys.modules.get(__name__.rpartition(".")[0]), "__version__", None)
    packages = {"tinygrad_rnn": own, "numpy": np.__version__}
    for name in ("matplotlib", "tqdm"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "hostname": platform.node(),
        "pid": os.getpid(),
        "packages": packages,
        "blas": _blas(),
        "threads": {var: os.environ.get(var) for var in THREAD_ENV_VARS},
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "git_revision": _git_revision(Path(__file__).resolve().parent),
    }


def _jsonable(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays, paths, tuples and sets made JSON types; any
    other object becomes its repr (a config may hold a device object or a function)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # JSON has no nan/inf
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file in the same folder and a
    rename, so a reader sees the old file or the new one, never a part."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, allow_nan=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def _number(value: Any) -> str:
    """A CSV cell: '' for None, the shortest repr that reads back to the same float (nan
    and inf as 'nan', 'inf', '-inf'), an int as itself."""
    if value is None:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return repr(float(value))


# ----------------------------------------------------------------------------- writer
#: the kernel copies a write() into the page cache one page at a time and stops early
#: between two pages when the process is killed, so a row is atomic only inside one
#: 4096-byte block of the file: rows are at most MAX_ROW bytes, and a row after which less
#: than MAX_ROW bytes would be left in its block is padded with spaces up to the block's end
BLOCK = 4096
MAX_ROW = 512


class _AppendFile:
    """A CSV file opened with O_APPEND whose rows a SIGKILL cannot cut: each row goes out in
    one os.write, and never across a 4096-byte block boundary (module docstring)."""

    def __init__(self, path: Path, columns: Sequence[str], fsync: str, append: bool) -> None:
        self.path, self.columns, self.fsync = path, tuple(columns), fsync
        write_header = True
        if append and path.is_file():
            text = path.read_text(encoding="utf-8")
            header = text.split("\n", 1)[0].split(",")
            if tuple(h.strip() for h in header) != self.columns:
                raise ValueError(f"RunWriter: cannot append to {path}: its columns {header} "
                                 f"differ from this run's {list(self.columns)}; use "
                                 f"if_exists='overwrite' or another folder")
            _realign(path, text)
            write_header = False
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self.open = True
        self.offset = os.fstat(self.fd).st_size  # the only writer: its size is our offset
        if write_header:
            self._write(",".join(self.columns))

    def _write(self, line: str) -> None:
        data = line.encode("utf-8")
        if len(data) + 1 > MAX_ROW:
            raise ValueError(f"RunWriter: a row of {len(data) + 1} bytes for {self.path.name} "
                             f"is longer than {MAX_ROW}; it could not be written atomically")
        left = BLOCK - self.offset % BLOCK - len(data) - 1  # room after this row
        if left < MAX_ROW:  # fill the block: the next row starts at a block boundary
            data += b" " * left
        data += b"\n"
        written = os.write(self.fd, data)  # one write: the whole row or (on error) nothing
        if written != len(data):  # a full disk can make a write short
            raise OSError(f"RunWriter: only {written} of {len(data)} bytes of a row reached "
                          f"{self.path} (disk full?)")
        self.offset += written
        if self.fsync == "row":
            os.fsync(self.fd)

    def row(self, values: Sequence[str]) -> None:
        if any("," in v or "\n" in v for v in values):
            raise ValueError(f"RunWriter: a value for {self.path.name} holds a comma or a "
                             f"newline: {values}")
        self._write(",".join(values))

    def close(self) -> None:
        if not self.open:
            return
        try:
            if self.fsync != "never":
                os.fsync(self.fd)
        finally:
            os.close(self.fd)
            self.open = False


def _realign(path: Path, text: str) -> None:
    """Before appending to a file another writer left: pad its last row so that the next
    row starts where a whole row fits in its block (rewritten through a rename)."""
    size = len(text.encode("utf-8"))
    left = BLOCK - size % BLOCK
    if left == BLOCK or left >= MAX_ROW or not text.endswith("\n"):
        return
    padded = text[:-1] + " " * left + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".csv", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(padded)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def _chunks(prefix: Sequence[str], values: Sequence[str]) -> Iterator[list[str]]:
    """State-norm rows (prefix..., t0, 'v v v') of at most MAX_ROW bytes: a long (T,)
    vector is split over several rows, each starting at time step t0."""
    head = len(",".join(prefix)) + 12  # the prefix, ',t0,', the newline and some slack
    t0 = 0
    while t0 < len(values) or t0 == 0:
        size, t = head, t0
        while t < len(values) and size + len(values[t]) + 1 <= MAX_ROW:
            size += len(values[t]) + 1
            t += 1
        yield [*prefix, str(t0), " ".join(values[t0:t])]
        if t >= len(values):
            return
        t0 = t


class RunWriter:
    """Write a run folder: ``manifest.json``, ``metrics.csv`` and, with a monitor,
    ``state_norms.csv`` (see the module docstring for the formats and guarantees).

    Parameters
    ----------
    path : str or PathLike
        The run folder; created (with its parents) when missing.
    config : mapping, optional
        The settings of the run, stored in the manifest (values that are not JSON types are
        stored as their repr).
    seed : int, optional
        The run's seed, stored in the manifest.
    device : str, optional
        Where the model runs, stored in the manifest (default ``'cpu'``).
    if_exists : {'error', 'overwrite', 'append'}
        What to do when ``path`` already holds a run: raise ``FileExistsError`` (default),
        remove its run files and start again, or continue it (rows go on from its last step).
    fsync : {'close', 'row', 'never'}
        When rows are forced to the disk (module docstring).
    tensorboard : bool
        Also write TensorBoard event files to ``path/tensorboard``.
    command : list of str, optional
        The command line to record (default ``sys.argv``).

    Use it as a context manager: leaving the block finalises the manifest as ``finished``,
    or as ``failed`` with the error when an exception leaves it (the exception is not
    swallowed). :meth:`close` does the same by hand.
    """

    def __init__(self, path: str | os.PathLike, *, config: Mapping | None = None,
                 seed: int | None = None, device: str = "cpu", if_exists: str = "error",
                 fsync: str = "close", tensorboard: bool = False,
                 command: Sequence[str] | None = None) -> None:
        where = "RunWriter"
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise TypeError(f"{where}: path must be a folder path (str or PathLike), got "
                            f"{path!r}")
        if if_exists not in IF_EXISTS:
            raise ValueError(f"{where}: if_exists must be one of {IF_EXISTS}, got "
                             f"{if_exists!r}")
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"{where}: fsync must be one of {FSYNC_POLICIES}, got {fsync!r}")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"{where}: config must be a mapping (a dict of settings), got "
                            f"{type(config).__name__}")
        if seed is not None and (isinstance(seed, bool)
                                 or not isinstance(seed, (int, np.integer))):
            raise TypeError(f"{where}: seed must be an int or None, got {seed!r}")
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise NotADirectoryError(f"{where}: {self.path} exists and is not a folder")
        self.path.mkdir(parents=True, exist_ok=True)
        existing = [name for name in RUN_FILES if (self.path / name).exists()]
        self.appending = False
        if existing:
            if if_exists == "error":
                raise FileExistsError(
                    f"{where}: {self.path} already holds a run ({', '.join(existing)}); "
                    f"choose another folder, or pass if_exists='overwrite' to replace it or "
                    f"if_exists='append' to continue it")
            if if_exists == "overwrite":
                for name in existing:
                    (self.path / name).unlink()
                shutil.rmtree(self.path / TENSORBOARD, ignore_errors=True)
            else:
                self.appending = True
        self.fsync = fsync
        self._metrics: _AppendFile | None = None
        self._states: _AppendFile | None = None
        self._t0 = time.perf_counter()
        self._step0 = 0
        self.last_step = 0
        self.closed = False
        previous = read_manifest(self.path) if self.appending and \
            (self.path / MANIFEST).exists() else None
        if self.appending and (self.path / METRICS).exists():
            steps = read_metrics(self.path).get("step", np.zeros(0))
            self._step0 = int(steps[-1]) if len(steps) else 0
            self.last_step = self._step0
        self.manifest: dict = {
            "format": 1,
            "status": "running",
            "command": list(sys.argv if command is None else command),
            "cwd": os.getcwd(),
            "config": _jsonable(dict(config or {})),
            "seed": None if seed is None else int(seed),
            "device": str(device),
            "started": previous["started"] if previous else _now(),
            "finished": None,
            "steps": self._step0,
            "error": None,
            "environment": environment(),
        }
        if previous:
            self.manifest["resumed"] = previous.get("resumed", []) + [_now()]
        self._write_manifest()
        self._tb = _tensorboard_writer(self.path / TENSORBOARD) if tensorboard else None

    # -- rows
    def start_metrics(self, monitored: bool) -> None:
        """Open metrics.csv (and state_norms.csv when ``monitored``); the training loops call
        this once, before their first update. A second call with the same kind of columns
        continues the same files (several loops may write one run)."""
        columns = BASE_COLUMNS + (MONITOR_COLUMNS if monitored else ())
        if self._metrics is not None:
            if self._metrics.columns != columns:
                raise ValueError(f"RunWriter: {self.path / METRICS} has the columns "
                                 f"{list(self._metrics.columns)}; a loop with"
                                 f"{'' if monitored else 'out'} a monitor cannot add rows "
                                 f"with other columns: give it its own run folder "
                                 f"(tr.runs.child(run, name))")
            return
        self._metrics = _AppendFile(self.path / METRICS, columns, self.fsync,
                                    append=self.appending)
        if monitored:
            self._states = _AppendFile(self.path / STATE_NORMS, STATE_COLUMNS, self.fsync,
                                       append=self.appending)

    def log(self, loss: float, grad_norm: float | None = None,
            clipped_norm: float | None = None, lr: float | None = None,
            val_loss: float | None = None,
            state_norms: Mapping[tuple, np.ndarray] | None = None) -> int:
        """Append one update's row (and its state-norm rows); returns its step number
        (1, 2, ... continuing an appended run). ``state_norms`` maps (module, layer,
        direction, kind) to the (T,) norms of that update."""
        if self.closed:
            raise RuntimeError(f"RunWriter.log: the run in {self.path} is closed")
        if self._metrics is None:
            self.start_metrics(monitored=state_norms is not None)
        if state_norms is not None and self._states is None:
            raise ValueError(f"RunWriter.log: state_norms given, but {self.path / METRICS} was "
                             f"started without a monitor (start_metrics(monitored=False)), so "
                             f"it has no state-norm columns")
        self.last_step += 1
        step = self.last_step
        row = [_number(step), _number(loss), _number(val_loss), _number(grad_norm),
               _number(clipped_norm), _number(lr),
               f"{time.perf_counter() - self._t0:.3f}"]
        states = self._states
        if states is not None:
            first = next(iter(state_norms.values())) if state_norms else np.zeros(0)
            row += [_number(first[0]) if len(first) else "",
                    _number(first[-1]) if len(first) else ""]
            for (module, layer, direction, kind), norms in (state_norms or {}).items():
                prefix = [_number(step), str(module), str(layer), str(direction), kind]
                for cells in _chunks(prefix, [_number(v) for v in np.ravel(norms)]):
                    states.row(cells)
        metrics = self._metrics
        assert metrics is not None  # opened above
        metrics.row(row)
        if self._tb is not None:
            for name, value in (("loss", loss), ("val_loss", val_loss),
                                ("grad_norm", grad_norm), ("clipped_norm", clipped_norm),
                                ("lr", lr)):
                if value is not None:
                    self._tb.add_scalar(name, float(value), step)
        return step

    # -- manifest
    def _write_manifest(self) -> None:
        write_json_atomic(self.path / MANIFEST, self.manifest)

    def update_config(self, **values: Any) -> None:
        """Add settings to the manifest's config (written at once)."""
        self.manifest["config"].update(_jsonable(values))
        self._write_manifest()

    def close(self, error: BaseException | None = None) -> None:
        """Close the files and finalise the manifest: ``finished``, or ``failed`` with
        ``error`` (its type, message and traceback). A second call does nothing."""
        if self.closed:
            return
        self.closed = True
        try:
            for f in (self._metrics, self._states):
                if f is not None:
                    f.close()
            if self._tb is not None:
                self._tb.close()
        finally:
            self.manifest["finished"] = _now()
            self.manifest["steps"] = self.last_step
            if error is None:
                self.manifest["status"] = "finished"
            else:
                self.manifest["status"] = "failed"
                self.manifest["error"] = {
                    "type": type(error).__name__, "message": str(error),
                    "traceback": "".join(traceback.format_exception(
                        type(error), error, error.__traceback__))[-4000:]}
            self._write_manifest()

    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.close(exc)

    def __repr__(self) -> str:
        return f"RunWriter({os.fspath(self.path)!r}, status={self.manifest['status']!r})"


def slug(name: str) -> str:
    """``name`` as a folder name: letters, digits, '.', '-', '_' and '=' kept, runs of
    anything else become one '_' ("Elman tanh" -> "Elman_tanh")."""
    out, gap = [], False
    for ch in str(name):
        if ch.isalnum() or ch in ".-_=":
            out.append(ch)
            gap = False
        elif not gap:
            out.append("_")
            gap = True
    text = "".join(out).strip("_")
    return text or "run"


def child(run: RunWriter | None, name: str) -> str | None:
    """The path of a run folder ``name`` (made a folder name by :func:`slug`) inside the
    run folder ``run``, or None when ``run`` is None: a demo that trains several models
    gives each ``fit`` its own run folder under the demo's, with ``run_dir=child(run,
    "LSTM")``, and ``tinygrad-rnn plot`` draws them together."""
    if run is None:
        return None
    return os.path.join(run.path, slug(name))


@contextlib.contextmanager
def open_run(path: str | os.PathLike | None, **kwargs: Any) -> Iterator[RunWriter | None]:
    """``with open_run(args.run_dir, config=..., seed=...) as run:``: a :class:`RunWriter`
    finalised at the end of the block, or None when ``path`` is None (no run folder asked
    for), so a demo needs no second code path."""
    if path is None:
        yield None
        return
    with RunWriter(path, **kwargs) as run:
        yield run


def _tensorboard_writer(folder: Path) -> Any:
    """A SummaryWriter from tensorboardX, else from torch.utils.tensorboard (imported by
    name: both are optional and neither has to be installed)."""
    try:
        return importlib.import_module("tensorboardX").SummaryWriter(logdir=str(folder))
    except ImportError:
        pass
    try:
        module = importlib.import_module("torch.utils.tensorboard")
    except ImportError:
        raise ImportError(
            "RunWriter(tensorboard=True) needs tensorboardX (pip install tensorboardX) or "
            "torch with tensorboard (pip install torch tensorboard); the run folder's CSV "
            "files need neither") from None
    return module.SummaryWriter(log_dir=str(folder))


# ----------------------------------------------------------------------------- reading
def run_path(path: Any, where: str) -> Path:
    """``path`` as an existing run folder; a TypeError or FileNotFoundError naming ``where``
    (the calling function) otherwise."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{where}: path must be a run folder path, got {type(path).__name__}")
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{where}: {folder} is not a folder")
    return folder


def read_manifest(path: str | os.PathLike) -> dict:
    """The manifest of the run folder ``path`` as a dict."""
    file = run_path(path, "read_manifest") / MANIFEST
    if not file.is_file():
        raise FileNotFoundError(f"read_manifest: {file} is missing; {file.parent} is not a "
                                f"run folder (tr.runs.RunWriter writes one)")
    return json.loads(file.read_text(encoding="utf-8"))


def _float(cell: str) -> float:
    return float(cell) if cell else math.nan


def read_metrics(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """metrics.csv of the run folder ``path`` as one float64 array per column ('step' as
    int64); an empty cell is NaN. Every line must parse: a malformed one is a ValueError
    naming the file and line (a killed run leaves only whole rows, so nothing is skipped)."""
    file = run_path(path, "read_metrics") / METRICS
    if not file.is_file():
        raise FileNotFoundError(f"read_metrics: {file} is missing; {file.parent} holds no "
                                f"metrics (was the run given run_dir=?)")
    lines = file.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        raise ValueError(f"read_metrics: {file} line {len(lines)} has no line end (a torn "
                         f"row): {lines[-1]!r}")
    if not lines:
        raise ValueError(f"read_metrics: {file} is empty (no header)")
    columns = [c.strip() for c in lines[0].split(",")]
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        try:
            if len(cells) != len(columns):
                raise ValueError(f"{len(cells)} cells for {len(columns)} columns")
            rows.append([_float(c) for c in cells])
        except ValueError as err:
            raise ValueError(f"read_metrics: {file} line {number} does not parse ({err}): "
                             f"{line!r}") from None
    table = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(columns))
    out = {name: table[:, k] for k, name in enumerate(columns)}
    if "step" in out:
        out["step"] = out["step"].astype(np.int64)
    return out


def read_state_norms(path: str | os.PathLike) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """state_norms.csv of the run folder ``path``: (module, layer, direction, kind) ->
    (steps (k,), norms (k, T)) with rows padded by NaN to the longest; {} when the run had
    no monitor."""
    file = run_path(path, "read_state_norms") / STATE_NORMS
    if not file.is_file():
        return {}
    lines = file.read_text(encoding="utf-8").split("\n")
    if lines[-1] != "":
        raise ValueError(f"read_state_norms: {file} ends in a torn row: {lines[-1]!r}")
    grouped: dict[tuple, dict[int, list]] = {}
    for number, line in enumerate(lines[1:-1], start=2):
        cells = line.split(",")
        if len(cells) != len(STATE_COLUMNS):
            raise ValueError(f"read_state_norms: {file} line {number} has {len(cells)} cells "
                             f"for the columns {list(STATE_COLUMNS)}: {line!r}")
        step, module, layer, direction, kind, start, norms = cells
        key = (module, int(layer), int(direction), kind)
        rows = grouped.setdefault(key, {})
        values = [float(v) for v in norms.split()]
        row = rows.setdefault(int(step), [])
        t0 = int(start)
        row.extend([math.nan] * (t0 + len(values) - len(row)))
        row[t0:t0 + len(values)] = values
    out = {}
    for key, rows in grouped.items():
        width = max((len(r) for r in rows.values()), default=0)
        table = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows.values()):
            table[i, :len(r)] = r
        out[key] = (np.fromiter(rows, dtype=np.int64, count=len(rows)), table)
    return out


def find_runs(path: str | os.PathLike) -> list[Path]:
    """The run folders at ``path``: itself when it holds metrics.csv, then its direct
    subfolders that do (a demo's run folder holds one per trained model), sorted."""
    folder = run_path(path, "find_runs")
    found = [folder] if (folder / METRICS).is_file() else []
    found += sorted(p for p in folder.iterdir() if p.is_dir() and (p / METRICS).is_file())
    return found
