"""Benchmark one training step of LSTM, GRU and Elman layers against torch.nn.

One step is: forward of a one-layer recurrent network over T steps (batch N, input size
D = H), a linear readout to C = 64 classes at every step, the mean cross entropy over all
T * N predictions, and backward (no optimizer update). Contestants, for every cell and H:

* ``fused``      ours, ``engine='fused'`` (the default: hand-derived BPTT kernels)
* ``autograd``   ours, ``engine='autograd'`` (cells composed of primitive ops)
* ``torch.nn.X`` torch.nn.LSTM / GRU / RNN with the same weights (when torch is installed)
* ``torch LSTMCell loop`` a Python loop over torch.nn.LSTMCell (LSTM only): the reference
  for the autograd engine, which is a Python loop over primitive ops too.

Usage::

    python benchmarks/recurrent.py                 # full run (10-20 min on 2 cores, by load)
    python benchmarks/recurrent.py --quick         # H in {64, 256}, T = 32, few repetitions
    python benchmarks/recurrent.py --cells lstm --hidden 256 --threads 1 --reps 9
    python benchmarks/recurrent.py --markdown --out table.md
    python benchmarks/recurrent.py --device cuda   # CuPy + torch on CUDA, when available
    python benchmarks/recurrent.py --device cuda --cells lstm --hidden 1024 --batch 256
    python benchmarks/recurrent.py --device standin --quick  # the device path, on the CPU

How it measures (docs/performance.md has the details): contestants run in the same
process, interleaved (repetition r runs each once, in an order rotated by r); the table
shows median times and the median of the *paired* per-repetition ratios to torch.nn. BLAS
thread counts are read from the environment when NumPy and torch are imported, so each
``--threads`` setting runs in its own child process started with OPENBLAS_NUM_THREADS,
OMP_NUM_THREADS and MKL_NUM_THREADS set (and ``torch.set_num_threads``). Peak memory of one
step is measured at T in {64, 512}: allocator level (tracemalloc for ours, the torch
profiler's allocation events for torch) in one child process, and, as a cross-check, the
resident-set growth of a fresh child process per contestant.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

# NumPy is imported here, after a parent process has set the BLAS thread variables of the
# child this module runs in (see run_children).
import numpy as np  # noqa: E402

from benchmarks import _harness as hz  # noqa: E402
from tinygrad_rnn.functional import cross_entropy  # noqa: E402
from tinygrad_rnn.nn.layers import Linear  # noqa: E402
from tinygrad_rnn.nn.recurrent import GRU, LSTM, RNN  # noqa: E402
from tinygrad_rnn.tensor import Tensor  # noqa: E402

__all__ = [
    "Config", "Contestant", "CELLS", "TIME_TARGETS", "MEMORY_TARGET", "make_data",
    "reference_weights", "contestants", "run_timing", "run_memory_alloc", "run_memory_rss",
    "timing_rows", "memory_rows", "format_table", "report", "main",
]


class CellSpec(NamedTuple):
    """A recurrent cell: the display name, our module class, torch.nn's class name."""

    label: str
    ours: type
    torch_name: str


CELLS: dict[str, CellSpec] = {
    "lstm": CellSpec("LSTM", LSTM, "LSTM"),
    "gru": CellSpec("GRU", GRU, "GRU"),
    "rnn": CellSpec("Elman", RNN, "RNN"),
}

#: (cell, H) -> the largest acceptable median paired ratio fused / torch.nn at 1 thread.
TIME_TARGETS: dict[tuple[str, int], float] = {
    ("lstm", 64): 1.0, ("lstm", 256): 0.9, ("lstm", 1024): 0.9,
    ("gru", 256): 0.9, ("rnn", 256): 0.8,
}
#: The autograd engine against the Python loop over torch.nn.LSTMCell, 1 thread, every H.
AUTOGRAD_TARGET = 1.0
#: Peak memory of the fused LSTM step against torch.nn.LSTM at this T.
MEMORY_TARGET = (512, 0.6)

CLASSES = 64
ENGINES = ("fused", "autograd")


@dataclass
class Config:
    """Everything a run (and each of its child processes) needs to know."""

    cells: list[str] = field(default_factory=lambda: ["lstm", "gru", "rnn"])
    hidden: list[int] = field(default_factory=lambda: [64, 256, 1024])
    threads: list[int] = field(default_factory=lambda: [1, 2])
    reps: int | None = None
    seq_len: int = 64
    batch: int = 32
    classes: int = CLASSES
    engines: list[str] = field(default_factory=lambda: list(ENGINES))
    mem_seq_lens: list[int] = field(default_factory=lambda: [64, 512])
    mem_hidden: int = 256
    memory: bool = True
    rss: bool = True
    torch: bool = True
    quick: bool = False
    device: str = "cpu"
    seed: int = 0

    def reps_for(self, hidden: int) -> int:
        """Timed repetitions at this H: ``--reps`` if given, else fewer for larger H."""
        if self.reps is not None:
            return self.reps
        if self.quick:
            return 7 if hidden <= 64 else 5 if hidden <= 256 else 2
        return 31 if hidden <= 64 else 15 if hidden <= 256 else 5

    def reps_at(self, hidden: int, threads: int | None) -> int:
        """:meth:`reps_for`, with fewer repetitions at H > 256 with several threads."""
        reps = self.reps_for(hidden)
        if self.reps is None and hidden > 256 and (threads or 1) > 1:
            reps = max(2, reps - 2)
        return reps


class Contestant(NamedTuple):
    """One way of running the step: a display name, a kind (``fused``, ``autograd``,
    ``torch``, ``torch-cell``) and a factory that builds the model and returns ``step()``,
    a function running one training step and returning the loss."""

    name: str
    kind: str
    factory: Callable[[], Callable[[], float]]


# --------------------------------------------------------------------------------------------
# the step, ours and torch's
# --------------------------------------------------------------------------------------------
def make_data(seq_len: int, batch: int, hidden: int, classes: int,
              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs x (T, N, H) float32 from N(0, 1) and targets y (T * N,) int64."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((seq_len, batch, hidden)).astype(np.float32)
    y = rng.integers(0, classes, size=seq_len * batch).astype(np.int64)
    return x, y


def _ours_modules(cell: str, hidden: int, classes: int, engine: str, seed: int) -> tuple:
    model = CELLS[cell].ours(hidden, hidden, engine=engine, generator=seed)
    readout = Linear(hidden, classes, generator=seed + 1)
    return model, readout


def reference_weights(cell: str, hidden: int, classes: int,
                      seed: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The state dicts (recurrent layer, readout) every contestant starts from: ours, from
    ``seed``, with torch.nn's keys."""
    model, readout = _ours_modules(cell, hidden, classes, "fused", seed)
    return dict(model.state_dict()), dict(readout.state_dict())


def _ours_factory(cell: str, engine: str, x: np.ndarray, y: np.ndarray, classes: int,
                  seed: int, device: str) -> Callable[[], Callable[[], float]]:
    def build() -> Callable[[], float]:
        T, N, H = x.shape
        model, readout = _ours_modules(cell, H, classes, engine, seed)
        model.to(device)
        readout.to(device)
        xt = Tensor(x, device=device)
        ys = Tensor(y, device=device)

        def step() -> float:
            model.zero_grad()
            readout.zero_grad()
            out, _ = model(xt)                                   # (T, N, H)
            logits = readout(out).reshape(T * N, classes)        # (T*N, C)
            loss = cross_entropy(logits, ys)
            loss.backward()
            return float(loss.item())

        return step

    return build


def _torch_factory(torch: Any, cell: str, cell_loop: bool, x: np.ndarray, y: np.ndarray,
                   classes: int, seed: int, device: str) -> Callable[[], Callable[[], float]]:
    def build() -> Callable[[], float]:
        T, N, H = x.shape
        rnn_state, lin_state = reference_weights(cell, H, classes, seed)
        as_t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rnn_state.items()}
        if cell_loop:
            model = torch.nn.LSTMCell(H, H)
            model.load_state_dict({k[:-3]: v for k, v in as_t.items()})  # drop "_l0"
        else:
            model = getattr(torch.nn, CELLS[cell].torch_name)(H, H)
            model.load_state_dict(as_t)
        readout = torch.nn.Linear(H, classes)
        readout.load_state_dict({k: torch.from_numpy(v) for k, v in lin_state.items()})
        where = "cuda" if device == "cuda" else "cpu"  # the stand-in races torch on the CPU
        model.to(where)
        readout.to(where)
        xt = torch.from_numpy(x).to(where)
        yt = torch.from_numpy(y).to(where)
        ce = torch.nn.functional.cross_entropy

        def step() -> float:
            model.zero_grad()
            readout.zero_grad()
            if cell_loop:
                h = torch.zeros(N, H, device=where)
                c = torch.zeros(N, H, device=where)
                outs = []
                for t in range(T):
                    h, c = model(xt[t], (h, c))
                    outs.append(h)
                out = torch.stack(outs)                          # (T, N, H)
            else:
                out, _ = model(xt)
            loss = ce(readout(out).reshape(T * N, classes), yt)
            loss.backward()
            return float(loss.item())

        return step

    return build


def contestants(cell: str, hidden: int, seq_len: int, cfg: Config,
                torch: Any = None) -> list[Contestant]:
    """The contestants for one cell and size, in table order (ours first)."""
    if cell not in CELLS:
        raise ValueError(f"unknown cell {cell!r}; choose from {sorted(CELLS)}")
    x, y = make_data(seq_len, cfg.batch, hidden, cfg.classes, cfg.seed)
    out = [Contestant(engine, engine,
                      _ours_factory(cell, engine, x, y, cfg.classes, cfg.seed, cfg.device))
           for engine in cfg.engines]
    if torch is not None:
        tname = f"torch.nn.{CELLS[cell].torch_name}"
        out.append(Contestant(tname, "torch", _torch_factory(
            torch, cell, False, x, y, cfg.classes, cfg.seed, cfg.device)))
        if cell == "lstm":
            out.append(Contestant("torch LSTMCell loop", "torch-cell", _torch_factory(
                torch, cell, True, x, y, cfg.classes, cfg.seed, cfg.device)))
    return out


def _import_torch(cfg: Config, threads: int | None) -> Any:
    if not cfg.torch:
        return None
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return None
    if threads is not None:
        torch.set_num_threads(threads)
    return torch


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# measurements (each runs inside one process; the parent starts them)
# --------------------------------------------------------------------------------------------
def run_timing(cfg: Config, threads: int | None = None, torch: Any = None,
               log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Time every contestant for every cell and H of ``cfg`` in this process.

    ``threads`` is only recorded (the BLAS threads were fixed when NumPy was imported).
    Each contestant first runs one untimed step (warm-up), whose losses are compared: every
    contestant computes the same function from the same weights. Returns one record per
    contestant with the per-repetition times.
    """
    records = []
    sync = _cuda_sync(torch) if cfg.device == "cuda" else None
    for cell in cfg.cells:
        for hidden in cfg.hidden:
            built, losses = [], {}
            for c in contestants(cell, hidden, cfg.seq_len, cfg, torch):
                try:
                    step = c.factory()
                    losses[c.name] = step()                      # the warm-up step
                except Exception as exc:  # on a GPU: report it and time the others
                    if cfg.device != "cuda":
                        raise
                    _log(f"  {c.name} failed on {cfg.device}: {type(exc).__name__}: {exc}")
                    continue
                built.append((c, step))
            reps = cfg.reps_at(hidden, threads)
            times = hz.interleaved([(c.name, step) for c, step in built], reps=reps,
                                   warmup=0, sync=sync)
            ref = next(iter(losses.values()))
            for c, _ in built:
                rec = dict(threads=threads, cell=cell, hidden=hidden, seq_len=cfg.seq_len,
                           batch=cfg.batch, contestant=c.name, kind=c.kind,
                           wall_ms=times[c.name].wall_ms, cpu_ms=times[c.name].cpu_ms,
                           faults=times[c.name].faults,
                           loss=losses[c.name],
                           loss_ok=bool(abs(losses[c.name] - ref) <= 1e-4 * abs(ref) + 1e-5))
                records.append(rec)
            if log is not None:
                summary = ", ".join(f"{c.name} {hz.median(times[c.name].wall_ms):.1f}"
                                    for c, _ in built)
                log(f"  [{threads} thread(s)] {CELLS[cell].label} H={hidden} "
                    f"({reps} reps): {summary} ms")
    return records


def _cuda_sync(torch: Any) -> Callable[[], None]:
    import cupy as cp  # type: ignore[import-not-found]

    def sync() -> None:
        cp.cuda.Device().synchronize()
        if torch is not None:
            torch.cuda.synchronize()

    return sync


def run_memory_alloc(cfg: Config, torch: Any = None,
                     log: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Allocator-level peak memory of one step for every cell, T in ``cfg.mem_seq_lens``
    and contestant, at H = ``cfg.mem_hidden``, in this process: tracemalloc for ours, the
    torch profiler's allocation events for torch. Each contestant is built, runs one
    warm-up step, is measured over one step, and is dropped before the next is built."""
    records = []
    for cell in cfg.cells:
        for T in cfg.mem_seq_lens:
            for c in contestants(cell, cfg.mem_hidden, T, cfg, torch):
                step = c.factory()
                step()                                           # warm-up
                if c.kind in ENGINES:
                    peak = hz.peak_tracemalloc(step)
                    method = "tracemalloc"
                else:
                    peak = hz.peak_torch_alloc(torch, step)
                    method = "torch.profiler"
                del step
                records.append(dict(cell=cell, hidden=cfg.mem_hidden, seq_len=T,
                                    contestant=c.name, kind=c.kind, method="alloc",
                                    detail=method, bytes=peak))
                if log is not None and peak is not None:
                    log(f"  memory {CELLS[cell].label} T={T} {c.name}: "
                        f"{peak / 2**20:.1f} MiB ({method})")
    return records


def run_memory_rss(cfg: Config, cell: str, seq_len: int, name: str,
                   torch: Any = None) -> dict[str, Any]:
    """Resident-set growth of one step of one contestant (meant for a fresh process started
    with :func:`benchmarks._harness.rss_env`): build, one warm-up step, then reset the
    high-water mark and measure one more step. NumPy's transparent-huge-page hint is
    switched off so both libraries get memory from the kernel in 4 KiB pages."""
    np._core.multiarray._set_madvise_hugepage(False)
    match = [c for c in contestants(cell, cfg.mem_hidden, seq_len, cfg, torch)
             if c.name == name]
    if not match:
        raise ValueError(f"no contestant {name!r} for cell {cell!r}")
    c = match[0]
    step = c.factory()
    step()
    peak = hz.peak_rss_delta(step)
    return dict(cell=cell, hidden=cfg.mem_hidden, seq_len=seq_len, contestant=c.name,
                kind=c.kind, method="rss", detail="VmHWM - VmRSS", bytes=peak)


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def _torch_name(cell: str) -> str:
    return f"torch.nn.{CELLS[cell].torch_name}"


def _check(ratio: float | None, limit: float) -> str:
    if ratio is None:
        return "n/a (no reference)"
    return f"{'PASS' if ratio <= limit else 'MISS'} ({ratio:.2f}x)"


def timing_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One table row per timing record: medians, the median paired ratio to torch.nn of the
    same cell, H and thread count, and the target with PASS/MISS where one applies."""
    groups: dict[tuple, dict[str, dict]] = {}
    for r in records:
        groups.setdefault((r["threads"], r["cell"], r["hidden"]), {})[r["contestant"]] = r
    rows = []
    for (threads, cell, hidden), members in groups.items():
        ref = members.get(_torch_name(cell))
        loop = members.get("torch LSTMCell loop")
        for name, r in members.items():
            ratio = hz.paired_ratio(r["wall_ms"], ref["wall_ms"]) if ref else None
            cpu_ratio = hz.paired_ratio(r["cpu_ms"], ref["cpu_ms"]) if ref else None
            target, check = "", ""
            one_thread = threads in (1, None)
            if r["kind"] == "fused" and (cell, hidden) in TIME_TARGETS and one_thread:
                limit = TIME_TARGETS[(cell, hidden)]
                target = f"<= {limit:.2f}x {_torch_name(cell)}"
                check = _check(ratio, limit)
            elif r["kind"] == "autograd" and cell == "lstm" and one_thread:
                target = f"<= {AUTOGRAD_TARGET:.2f}x LSTMCell loop"
                vs_loop = hz.paired_ratio(r["wall_ms"], loop["wall_ms"]) if loop else None
                check = _check(vs_loop, AUTOGRAD_TARGET)
            if not r.get("loss_ok", True):
                check = (check + " " if check else "") + "LOSS MISMATCH"
            rows.append({
                "threads": "-" if threads is None else str(threads),
                "cell": CELLS[cell].label, "H": str(hidden), "contestant": name,
                "ms": f"{hz.median(r['wall_ms']):.2f}",
                "cpu ms": f"{hz.median(r['cpu_ms']):.2f}",
                "faults": f"{hz.median(r.get('faults') or [0]):.0f}",
                "reps": str(len(r["wall_ms"])),
                "x torch.nn": "-" if ratio is None else f"{ratio:.2f}x",
                "cpu x torch.nn": "-" if cpu_ratio is None else f"{cpu_ratio:.2f}x",
                "target": target, "check": check,
            })
    return rows


def memory_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per (cell, T, contestant): the allocator-level and resident-set peaks in MiB,
    each with its ratio to torch.nn, and the memory target on the fused LSTM."""
    table: dict[tuple, dict[str, dict]] = {}
    order: list[tuple] = []
    for r in records:
        key = (r["cell"], r["hidden"], r["seq_len"], r["contestant"])
        if key not in table:
            table[key] = {}
            order.append(key)
        table[key][r["method"]] = r
    rows = []
    for key in order:
        cell, hidden, T, name = key
        ref = table.get((cell, hidden, T, _torch_name(cell)), {})
        row = {"cell": CELLS[cell].label, "H": str(hidden), "T": str(T), "contestant": name}
        ratios = {}
        for method, label in (("alloc", "alloc"), ("rss", "RSS")):
            mine = table[key].get(method, {}).get("bytes")
            theirs = ref.get(method, {}).get("bytes")
            row[f"{label} MiB"] = "-" if mine is None else f"{mine / 2**20:.1f}"
            ratio = mine / theirs if mine is not None and theirs else None
            ratios[method] = ratio
            row[f"{label} x torch.nn"] = "-" if ratio is None else f"{ratio:.2f}x"
        row["target"], row["check"] = "", ""
        kind = next(iter(table[key].values()))["kind"]
        if cell == "lstm" and kind == "fused" and T == MEMORY_TARGET[0]:
            limit = MEMORY_TARGET[1]
            row["target"] = f"<= {limit:.2f}x torch.nn.LSTM (alloc)"
            ratio = ratios["alloc"] if ratios["alloc"] is not None else ratios["rss"]
            row["check"] = _check(ratio, limit)
        rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, str]], markdown: bool = False) -> str:
    """Rows (dicts with the same keys) as an aligned text table or a Markdown table."""
    if not rows:
        return "(no rows)"
    cols = list(rows[0])
    width = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    numeric = {c for c in cols if all(_is_number(r[c]) for r in rows)}

    def fmt(c: str, v: str) -> str:
        return v.rjust(width[c]) if c in numeric else v.ljust(width[c])

    if markdown:
        lines = ["| " + " | ".join(fmt(c, c) for c in cols) + " |",
                 "|" + "|".join(("-" * (width[c] + 1)) + (":" if c in numeric else "-")
                                for c in cols) + "|"]
        lines += ["| " + " | ".join(fmt(c, r[c]) for c in cols) + " |" for r in rows]
    else:
        lines = ["  ".join(fmt(c, c) for c in cols).rstrip(),
                 "  ".join("-" * width[c] for c in cols)]
        lines += ["  ".join(fmt(c, r[c]) for c in cols).rstrip() for r in rows]
    return "\n".join(lines)


def _is_number(v: str) -> bool:
    try:
        float(v.rstrip("x"))
        return True
    except ValueError:
        return v == "-"


def report(cfg: Config, timing: Sequence[dict], memory: Sequence[dict], info: dict,
           command: str, markdown: bool, notes: Sequence[str] = ()) -> str:
    """The whole printed report: set-up, timing table, memory table, list of targets."""
    trows = timing_rows(timing)
    mrows = memory_rows(memory)
    h = "### " if markdown else ""
    bullet = "- " if markdown else "  "
    out = [f"{h}Recurrent training step: ours against torch.nn", ""]
    out.append(f"{bullet}command: `{command}`" if markdown else f"{bullet}command: {command}")
    out.append(f"{bullet}step: T={cfg.seq_len}, N={cfg.batch}, D=H, readout to {cfg.classes}"
               f" classes + cross entropy at every step,")
    out.append(f"{bullet}  backward; float32; device {cfg.device}" if not markdown else
               f"  backward; float32; device {cfg.device}")
    for key in ("cpu", "python", "numpy", "torch", "allocator", "load"):
        if key in info:
            out.append(f"{bullet}{key}: {info[key]}")
    for note in notes:
        out.append(f"{bullet}{note}")
    out += ["", f"{h}Step time (median ms; x torch.nn = median of paired ratios)", ""]
    out.append(textwrap.fill(
        "ms: wall time; cpu ms: CPU time of the process (all its threads); faults: minor page "
        "faults per step; x torch.nn and cpu x torch.nn: median over repetitions of the "
        "paired ratio of wall and of CPU time. Targets are checked on the wall-time ratio.",
        width=100))
    out.append("")
    out.append(format_table(trows, markdown))
    if mrows:
        out += ["", f"{h}Peak memory of one step (H={cfg.mem_hidden}, 1 thread)", ""]
        out.append(format_table(mrows, markdown))
    checks = [r for r in trows + mrows if r["check"]]
    if checks:
        out += ["", f"{h}Targets", ""]
        for r in checks:
            where = f"{r['cell']} H={r['H']}" + (f" T={r['T']}" if "T" in r else "")
            what = "memory" if "T" in r else f"time, {r['threads']} thread(s)"
            out.append(f"{bullet}{r['check'].split()[0]}: {r['contestant']} {where} ({what}): "
                       f"{r['target']}, measured {' '.join(r['check'].split()[1:])}")
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# processes and the command line
# --------------------------------------------------------------------------------------------
_PROFILER_NOISE = ("USDT:", "STAGE:")
#: Environment variables that change the results; shown in the report's command when set.
_RESULT_ENV_VARS = ("OPENBLAS_CORETYPE", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                    "MALLOC_TOP_PAD_", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def _child_run(cfg: Config, mode: str, env: dict[str, str], extra: Sequence[str] = ()) -> Any:
    """Run this file as a child in ``mode`` with ``env``; return the JSON it writes."""
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--_child", mode,
               "--_config", json.dumps(asdict(cfg)), "--_result", result, *extra]
        env = dict(env, KINETO_LOG_LEVEL="5", TORCH_CPP_LOG_LEVEL="ERROR")
        proc = subprocess.Popen(cmd, env=env, cwd=str(_ROOT), stderr=subprocess.PIPE,
                                text=True)
        assert proc.stderr is not None
        for line in proc.stderr:  # forward progress, drop the torch profiler's chatter
            if not line.startswith(_PROFILER_NOISE):
                sys.stderr.write(line)
                sys.stderr.flush()
        proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"benchmark child ({mode}) failed with exit code "
                               f"{proc.returncode}")
        with open(result, encoding="utf-8") as fh:
            return json.load(fh)


def _child_main(args: argparse.Namespace) -> int:
    cfg = Config(**json.loads(args._config))
    threads = int(os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    torch = _import_torch(cfg, threads)
    if args._child == "time":
        info = hz.machine_info(torch)
        payload = {
            "records": run_timing(cfg, threads, torch, log=_log),
            "info": info,
            "blas_threads": hz.blas_threads(),
            "torch_threads": torch.get_num_threads() if torch is not None else None,
        }
    elif args._child == "memory-alloc":
        payload = {"records": run_memory_alloc(cfg, torch, log=_log)}
    elif args._child == "memory-rss":
        cell, seq_len, name = args._rss
        payload = {"records": [run_memory_rss(cfg, cell, int(seq_len), name, torch)]}
    else:
        raise ValueError(f"unknown child mode {args._child!r}")
    with open(args._result, "w", encoding="utf-8") as fh:
        json.dump(payload, fh)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description="Time one training step of LSTM/GRU/Elman, ours against torch.nn.")
    p.add_argument("--quick", action="store_true",
                   help="H in {64, 256}, T=32, fewer repetitions, no resident-set check")
    p.add_argument("--threads", type=int, nargs="+", help="BLAS/torch threads (default 1 2)")
    p.add_argument("--hidden", type=int, nargs="+", help="hidden sizes (default 64 256 1024)")
    p.add_argument("--cells", nargs="+", choices=sorted(CELLS), help="default: lstm gru rnn")
    p.add_argument("--reps", type=int, help="timed repetitions (default: by H)")
    p.add_argument("--device", choices=("cpu", "cuda", "standin"), default="cpu",
                   help="cuda: ours on CuPy against torch on CUDA; standin: the device code "
                        "path on the CPU (a check, not a GPU timing)")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables")
    p.add_argument("--out", help="also write the report, as Markdown, to this file")
    p.add_argument("--seq-len", type=int, help="T of the timed step (default 64; quick 32)")
    p.add_argument("--batch", type=int, default=32, help="N (default 32)")
    p.add_argument("--mem-seq-lens", type=int, nargs="+", help="T of the memory table "
                   "(default 64 512)")
    p.add_argument("--mem-hidden", type=int, default=256, help="H of the memory table")
    p.add_argument("--no-memory", action="store_true", help="skip the memory table")
    p.add_argument("--no-rss", action="store_true", help="skip the resident-set cross-check")
    p.add_argument("--no-torch", action="store_true", help="do not run torch contestants")
    p.add_argument("--_child", help=argparse.SUPPRESS)
    p.add_argument("--_config", help=argparse.SUPPRESS)
    p.add_argument("--_result", help=argparse.SUPPRESS)
    p.add_argument("--_rss", nargs=3, help=argparse.SUPPRESS)
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    """The :class:`Config` the command-line flags describe (``--quick`` sets defaults that
    explicit flags override)."""
    cfg = Config(quick=args.quick, device=args.device, batch=args.batch,
                 mem_hidden=args.mem_hidden, memory=not args.no_memory,
                 rss=not (args.no_rss or args.quick), reps=args.reps)
    if args.quick:
        cfg.hidden, cfg.seq_len = [64, 256], 32
    if args.hidden:
        cfg.hidden = args.hidden
    if args.threads:
        cfg.threads = args.threads
    if args.cells:
        cfg.cells = args.cells
    if args.seq_len:
        cfg.seq_len = args.seq_len
    if args.mem_seq_lens:
        cfg.mem_seq_lens = args.mem_seq_lens
    cfg.torch = not args.no_torch and importlib.util.find_spec("torch") is not None
    for name, values in (("--hidden", cfg.hidden), ("--threads", cfg.threads),
                         ("--mem-seq-lens", cfg.mem_seq_lens)):
        if any(v <= 0 for v in values):
            raise SystemExit(f"{name} values must be positive, got {values}")
    if cfg.reps is not None and cfg.reps < 1:
        raise SystemExit(f"--reps must be >= 1, got {cfg.reps}")
    return cfg


def _cuda_missing() -> str | None:
    """Why the CUDA benchmark cannot run here, or None when it can."""
    try:
        import cupy as cp  # type: ignore[import-not-found]
    except Exception as exc:
        return f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no CUDA device"
    except Exception as exc:
        return f"CuPy cannot reach a CUDA device ({type(exc).__name__}: {exc})"
    return None


def _run_device(cfg: Config, args: argparse.Namespace, command: str) -> int:
    """Time ours on ``cfg.device`` in this process: on 'cuda' against torch on CUDA, on the
    'standin' test device (a check of the device code path, not a speed claim) against torch
    on the CPU."""
    torch = _import_torch(cfg, None)
    if cfg.device == "cuda":
        why = _cuda_missing()
        if why is not None:
            print(f"--device cuda: skipped: {why}. Install CuPy with "
                  f"pip install \"tinygrad_rnn[gpu]\" on a machine with an NVIDIA GPU; run "
                  f"without --device cuda for the CPU benchmark.")
            return 0
        if torch is not None and not torch.cuda.is_available():
            _log("torch has no CUDA here: timing ours on CuPy only")
            torch = None
    records = run_timing(cfg, None, torch, log=_log)
    info = hz.machine_info(torch)
    note = ("GPU run: ours on CuPy, torch on CUDA; no memory table" if cfg.device == "cuda"
            else "stand-in device run: checks the device code path (NumPy under CuPy's rules)"
                 " against torch on the CPU; not a GPU timing; no memory table")
    text = report(cfg, records, [], info, command, args.markdown, notes=[note])
    _emit(text, cfg, records, [], info, command, args)
    return 0


def _emit(text: str, cfg: Config, timing: Sequence[dict], memory: Sequence[dict],
          info: dict, command: str, args: argparse.Namespace,
          notes: Sequence[str] = ()) -> None:
    print(text, end="", flush=True)
    if args.out:
        md = text if args.markdown else report(cfg, timing, memory, info, command, True,
                                               notes)
        Path(args.out).write_text(md, encoding="utf-8")
        print(f"wrote {args.out}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse flags, run the children, print (and write) the report."""
    args = _parser().parse_args(argv)
    if args._child:
        return _child_main(args)
    cfg = config_from_args(args)
    shown = list(sys.argv[1:] if argv is None else argv)
    env_shown = [f"{k}={os.environ[k]}" for k in _RESULT_ENV_VARS if k in os.environ]
    command = " ".join([*env_shown, "python benchmarks/recurrent.py", *shown])
    if cfg.device != "cpu":
        return _run_device(cfg, args, command)
    notes = []
    if not cfg.torch:
        notes.append("torch not installed (or --no-torch): only our numbers")
    timing, info = [], {}
    for n in cfg.threads:
        _log(f"timing with {n} thread(s) ...")
        out = _child_run(cfg, "time", hz.thread_env(n))
        timing += out["records"]
        info = info or out["info"]
        notes.append(f"{n} thread(s): BLAS reports {out['blas_threads']}, torch "
                     f"{out['torch_threads']}")
    memory: list[dict] = []
    if cfg.memory:
        _log("peak memory, allocator level ...")
        memory += _child_run(cfg, "memory-alloc", hz.thread_env(1))["records"]
        if cfg.rss and hz.rss_supported():
            _log("peak memory, resident set (one fresh process per contestant) ...")
            names = sorted({(r["cell"], r["seq_len"], r["contestant"]) for r in memory},
                           key=lambda k: (cfg.cells.index(k[0]), k[1]))
            for cell, T, name in names:
                env = hz.rss_env(hz.thread_env(1))
                memory += _child_run(cfg, "memory-rss", env, ["--_rss", cell, str(T), name])[
                    "records"]
    info["load"] = info.get("load", "?") + f" (start) / {hz.machine_info()['load']} (end)"
    text = report(cfg, timing, memory, info, command, args.markdown, notes)
    _emit(text, cfg, timing, memory, info, command, args, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
