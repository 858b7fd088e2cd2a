"""Benchmark one training step of LSTM, GRU and Elman layers against torch.nn.

One step is: forward of a one-layer recurrent network over T steps (batch N, input size
D = H), a linear readout to C = 64 classes at every step, the mean cross entropy over all
T * N predictions, and backward (no optimizer update). Contestants, for every cell and H:

* ``fused``      ours, ``engine='fused'`` (the default: hand-derived BPTT kernels)
* ``autograd``   ours, ``engine='autograd'`` (cells composed of primitive ops)
* ``GEMM floor`` not a training step: the matrix products the fused step does, and nothing
  else, run with NumPy alone (see "The GEMM floor" below); kind ``floor``
* ``torch.nn.X`` torch.nn.LSTM / GRU / RNN with the same weights (when torch is installed)
* ``torch LSTMCell loop`` a Python loop over torch.nn.LSTMCell (LSTM only): the reference
  for the autograd engine, which is a Python loop over primitive ops too.
* ``torch composed loop`` (LSTM only; kind ``torch-composed``): the equations (L1)-(L6)
  composed of torch's primitive ops as our autograd engine runs them (one input GEMM, per
  step the recurrent ``linear``, a split into the gates, three sigmoids, two tanh, the cell
  and output products): the same graph under torch's engine, which saves only what each of
  its ops' backward needs. The issue states the autograd memory goal against it.

The GEMM floor
--------------
How close can a NumPy step come to torch? The fused step's matrix products run in the same
BLAS whatever the code around them does, so their time alone is a floor for the step:
``fused / floor`` (column ``x floor``) is the price of everything else (the elementwise
passes, Python, allocations), and the floor row's ``x torch.nn`` is the best ratio to torch
that a step doing these GEMMs with NumPy can reach. :class:`GemmFloor` runs, with G gate
blocks (LSTM 4, GRU 3, Elman 1), T steps, batch N, D = H, C classes, in float32:

1. the input projection of all T steps: one (T*N, D) x (D, G*H) GEMM, W_ih taken as the
   transposed view of its (G*H, D) array (as the kernels do);
2. T recurrent GEMMs in column form: W_hh (G*H, H) x h_{t-1}^T (H, N) into one (G*H, N)
   buffer, h_{t-1} a different (N, H) slice of a (T + 1, N, H) state array at every step;
3. the readout forward: (T*N, H) x W^T (H, C), W the (C, H) weight of Linear(H, C);
4. the readout backward: d(out) = dlogits (T*N, C) x W (C, H) and
   dW^T = out^T (H, T*N) x dlogits (T*N, C);
5. T backward recurrent GEMMs: da_t (N, G*H) x W_hh (G*H, H), each da_t a slice of one
   (T, N, G*H) gradient array, into one (N, H) buffer;
6. dW_ih = da^T (G*H, T*N) x x (T*N, D) and dW_hh = da^T (G*H, T*N) x h_prev (T*N, H), one
   GEMM each over the stacked T*N rows. A fused backward may split these two sums into
   blocks of steps and add the blocks' products (so as to hold no (T, N, G*H) gradient
   array); the floor does each in one GEMM, the same arithmetic in the fewest calls.

There is no dx GEMM: the input is data that needs no gradient, so the fused step skips it
too. Every operand has the shape and memory order (row-major, or a transposed view) of the
matching operand in the fused step (tests/test_benchmarks_smoke.py records the products of
both and compares them, the sums over stacked rows by their totals), and every output goes into a buffer allocated once when the floor
is built: the floor holds no allocation, no page faults and no elementwise work, so it is a
lower bound even where a kernel allocates its output (the fused input projection and weight
gradients do). The floor is measured on device cpu only (``--no-floor`` leaves it out) and
is not a training step, so it takes no part in the first-step loss check.

Usage::

    python benchmarks/recurrent.py                 # full run (10-20 min on 2 cores, by load)
    python benchmarks/recurrent.py --quick         # H in {64, 256}, T = 32, memory at T = 64
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

Targets (:data:`TARGETS`, the goals of issue 22) are checked only on rows measured at the
settings they are set for: the CPU time goals on device cpu at T = 64, N = 32 and 1 thread
(against torch.nn, against the LSTMCell loop, and against the GEMM floor at every H >= 256),
the memory goals at H = 256, T = 512, N = 32, the GPU goal on device cuda at H = 1024,
N = 256, T = 64 (the fused LSTM step at most 2x torch's cuDNN LSTM). Any other row of those
contestants says "no target at these settings", so a ``--quick`` run or the stand-in device
(not a GPU timing) gets no verdict.
When the first-step losses of a cell and H disagree, every row of that group says LOSS
MISMATCH instead, with the losses. A verdict compares the unrounded ratio and prints it with
3 decimals, or more where 3 would put the printed number on the other side of the limit.
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
from tinygrad_rnn.malloc_tuning import keep_freed_memory  # noqa: E402
from tinygrad_rnn.tensor import Tensor  # noqa: E402

__all__ = [
    "Config", "Contestant", "CELLS", "Target", "TARGETS", "LOSS_RTOL", "make_data",
    "reference_weights", "contestants", "run_timing", "losses_agree", "run_memory_alloc",
    "run_memory_rss", "ratio_text", "timing_rows", "memory_rows", "format_table", "report",
    "main",
]


class CellSpec(NamedTuple):
    """A recurrent cell: the display name, our module class, torch.nn's class name, and the
    number of gate blocks G of its weights (G*H rows)."""

    label: str
    ours: type
    torch_name: str
    gates: int


CELLS: dict[str, CellSpec] = {
    "lstm": CellSpec("LSTM", LSTM, "LSTM", 4),
    "gru": CellSpec("GRU", GRU, "GRU", 3),
    "rnn": CellSpec("Elman", RNN, "RNN", 1),
}

#: The name and kind of the GEMM-floor contestant (not a training step).
FLOOR = "GEMM floor"
FLOOR_KIND = "floor"
COMPOSED = "torch composed loop"

@dataclass(frozen=True)
class Target:
    """A goal for one contestant, with the run conditions it is defined for.

    ``what`` is ``"time"`` (the median paired wall-time ratio) or ``"memory"`` (the ratio of
    peak memory of one step). The goal is about the contestant of ``kind`` (``fused`` or
    ``autograd``) in ``cell`` at H = ``hidden`` (None: every H; with ``min_hidden``, every
    H >= ``min_hidden``), which meets it when its ratio to the contestant named
    ``reference`` (a torch contestant, or :data:`FLOOR`) is at most ``limit``. It is checked only on
    a row measured under all its conditions: on ``device``, at T = ``seq_len``, N =
    ``batch`` and with ``threads`` BLAS/torch threads (None: not a condition, as on a GPU, or
    in the memory child, which always runs 1 thread). A row of that contestant and H
    measured under other conditions says "no target at these settings" instead of PASS or
    MISS.
    """

    what: str
    kind: str
    cell: str
    reference: str
    limit: float
    device: str
    seq_len: int
    batch: int
    hidden: int | None
    threads: int | None
    min_hidden: int | None = None

    def concerns(self, what: str, kind: str, cell: str, hidden: int) -> bool:
        """True if this goal is about this measurement of this contestant at this H."""
        return ((what, kind, cell) == (self.what, self.kind, self.cell)
                and self.hidden in (None, hidden)
                and (self.min_hidden is None or hidden >= self.min_hidden))

    def holds_at(self, device: str, seq_len: int, batch: int, threads: int | None) -> bool:
        """True if a row measured under these conditions is checked against this goal."""
        return (device == self.device and seq_len == self.seq_len and batch == self.batch
                and (self.threads is None or threads == self.threads))

    def goal(self) -> str:
        """The goal in the report's words, e.g. ``<= 0.90x torch.nn.GRU``."""
        return f"<= {self.limit:.2f}x {self.reference}"

    def conditions(self) -> str:
        """The conditions in the report's words, e.g. ``device cpu, H=256, T=64, N=32, 1
        thread``."""
        if self.hidden is not None:
            size = f"H={self.hidden}"
        else:
            size = "every H" if self.min_hidden is None else f"H>={self.min_hidden}"
        parts = [f"device {self.device}", size, f"T={self.seq_len}", f"N={self.batch}"]
        if self.threads is not None:
            parts.append(f"{self.threads} thread(s)")
        return ", ".join(parts)


def _cpu_time(kind: str, cell: str, reference: str, limit: float, hidden: int | None,
              min_hidden: int | None = None) -> Target:
    """A step-time goal of the CPU benchmark: T = 64, N = 32, 1 thread."""
    return Target("time", kind, cell, reference, limit, "cpu", 64, 32, hidden, 1, min_hidden)


def _cpu_memory(kind: str, cell: str, reference: str, limit: float) -> Target:
    """A peak-memory goal of one step at H = 256, T = 512, N = 32 (the memory child always
    runs 1 thread, so threads is no condition)."""
    return Target("memory", kind, cell, reference, limit, "cpu", 512, 32, 256, None)


#: Every goal of the benchmark: the goals of issue 22. On the CPU (T = 64, N = 32, 1
#: thread): the fused LSTM <= 1.3x torch.nn.LSTM at H = 64 and <= 1.0x at H = 256 and
#: 1024, the fused GRU <= 0.9x and the fused Elman <= 0.8x torch.nn at H = 256; every fused
#: step within 1.25x of its own GEMM floor at every H >= 256; the autograd LSTM <= 1.3x the
#: torch.nn.LSTMCell loop at H = 64 and 256. Peak memory of one step at H = 256, T = 512:
#: the fused LSTM <= 0.6x torch.nn.LSTM, the fused GRU and Elman <= 0.8x torch.nn, the
#: autograd LSTM <= 1.5x torch running the same composed equations (the issue's reference)
#: and, stricter, <= 1.5x the LSTMCell loop. On a GPU: the fused LSTM step at H = 1024,
#: N = 256 (T = 64) at least half as fast as torch's cuDNN LSTM.
TARGETS: tuple[Target, ...] = (
    _cpu_time("fused", "lstm", "torch.nn.LSTM", 1.3, 64),
    _cpu_time("fused", "lstm", "torch.nn.LSTM", 1.0, 256),
    _cpu_time("fused", "lstm", "torch.nn.LSTM", 1.0, 1024),
    _cpu_time("fused", "gru", "torch.nn.GRU", 0.9, 256),
    _cpu_time("fused", "rnn", "torch.nn.RNN", 0.8, 256),
    *(_cpu_time("fused", cell, FLOOR, 1.25, None, min_hidden=256) for cell in CELLS),
    _cpu_time("autograd", "lstm", "torch LSTMCell loop", 1.3, 64),
    _cpu_time("autograd", "lstm", "torch LSTMCell loop", 1.3, 256),
    _cpu_memory("fused", "lstm", "torch.nn.LSTM", 0.6),
    _cpu_memory("fused", "gru", "torch.nn.GRU", 0.8),
    _cpu_memory("fused", "rnn", "torch.nn.RNN", 0.8),
    _cpu_memory("autograd", "lstm", COMPOSED, 1.5),
    _cpu_memory("autograd", "lstm", "torch LSTMCell loop", 1.5),
    Target("time", "fused", "lstm", "torch.nn.LSTM", 2.0, "cuda", 64, 256, 1024, None),
)

#: First-step losses agree when they differ by at most this, relative (plus 1e-5 absolute).
LOSS_RTOL = 1e-4

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
    floor: bool = True
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
    ``torch``, ``torch-cell``, or ``floor`` for the GEMM floor) and a factory that builds
    the model and returns ``step()``, a function running one training step and returning
    the loss (the floor's returns None: it computes no loss)."""

    name: str
    kind: str
    factory: Callable[[], Callable[[], float | None]]


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
                  seed: int, device: str) -> Callable[[], Callable[[], float | None]]:
    def build() -> Callable[[], float | None]:
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


#: How a torch contestant runs the LSTM: torch.nn's layer, a loop over torch.nn.LSTMCell, or a
#: loop over the equations composed of torch's primitive ops (what our autograd engine runs)
TORCH_LOOPS = ("layer", "cell", "composed")


def _torch_factory(torch: Any, cell: str, loop: str, x: np.ndarray, y: np.ndarray,
                   classes: int, seed: int,
                   device: str) -> Callable[[], Callable[[], float | None]]:
    if loop not in TORCH_LOOPS:
        raise ValueError(f"_torch_factory: loop must be one of {TORCH_LOOPS}, got {loop!r}")

    def build() -> Callable[[], float | None]:
        T, N, H = x.shape
        rnn_state, lin_state = reference_weights(cell, H, classes, seed)
        as_t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in rnn_state.items()}
        if loop != "layer":
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
        linear = torch.nn.functional.linear

        def composed() -> Any:
            # the equations (L1)-(L6) with torch's primitive ops, as engine='autograd' runs
            # them: the input projection of all steps in one GEMM, then per step the
            # recurrent projection, the gate split, three sigmoids, two tanh, (L4) and (L6)
            xw = linear(xt, model.weight_ih, model.bias_ih)      # (T, N, 4H)
            h = torch.zeros(N, H, device=where)
            c = torch.zeros(N, H, device=where)
            outs = []
            for t in range(T):
                a = xw[t] + linear(h, model.weight_hh, model.bias_hh)
                i, f, g, o = a.split(H, dim=1)
                c = f.sigmoid() * c + i.sigmoid() * g.tanh()
                h = o.sigmoid() * c.tanh()
                outs.append(h)
            return torch.stack(outs)

        def step() -> float:
            model.zero_grad()
            readout.zero_grad()
            if loop == "cell":
                h = torch.zeros(N, H, device=where)
                c = torch.zeros(N, H, device=where)
                outs = []
                for t in range(T):
                    h, c = model(xt[t], (h, c))
                    outs.append(h)
                out = torch.stack(outs)                          # (T, N, H)
            elif loop == "composed":
                out = composed()
            else:
                out, _ = model(xt)
            loss = ce(readout(out).reshape(T * N, classes), yt)
            loss.backward()
            return float(loss.item())

        return step

    return build


class GemmFloor:
    """The matrix products of one fused training step, with NumPy alone: the step's "GEMM
    floor" (the module docstring lists them, numbered (1)-(6)).

    Built for one cell (G gate blocks) and size; :meth:`step` runs the products, in
    ``dtype``, on operands filled once with N(0, 0.1^2) numbers (the values do not change a
    GEMM's time; these stay clear of subnormals), writing every result into a buffer
    allocated here. The operands have the fused step's shapes and memory orders: row-major
    arrays, or transposed views (``.T``) where the kernel multiplies by one.
    """

    def __init__(self, cell: str, seq_len: int, batch: int, input_size: int, hidden: int,
                 classes: int, seed: int = 0, dtype: Any = np.float32) -> None:
        if cell not in CELLS:
            raise ValueError(f"GemmFloor: unknown cell {cell!r}; choose from {sorted(CELLS)}")
        T, N, D, H, C = seq_len, batch, input_size, hidden, classes
        GH = CELLS[cell].gates * H
        self.sizes = (T, N, D, H, C)
        rng = np.random.default_rng(seed)

        def data(*shape: int) -> np.ndarray:
            return (0.1 * rng.standard_normal(shape)).astype(dtype)

        def buffer(*shape: int) -> np.ndarray:
            return np.zeros(shape, dtype=dtype)        # written (and its pages touched) once

        self.x = data(T * N, D)                  # the inputs, stacked time-major
        self.weight_ih = data(GH, D)
        self.weight_hh = data(GH, H)
        self.h_states = data(T + 1, N, H)        # h_0 .. h_T, as the kernels keep them
        self.weight_out = data(C, H)             # Linear(H, C).weight
        self.dlogits = data(T * N, C)
        self.da = data(T, N, GH)                 # gate pre-activation gradients
        self.gates = buffer(T * N, GH)
        self.rec = buffer(GH, N)
        self.logits = buffer(T * N, C)
        self.dout = buffer(T * N, H)
        self.dweight_out_t = buffer(H, C)
        self.dh = buffer(N, H)
        self.dweight_ih = buffer(GH, D)
        self.dweight_hh = buffer(GH, H)

    def step(self) -> None:
        """Run the floor's GEMMs once, in the order the fused step runs them."""
        T, N, D, H, C = self.sizes
        matmul = np.matmul
        matmul(self.x, self.weight_ih.T, out=self.gates)              # (1) input projection
        for t in range(T):                                            # (2) recurrent
            matmul(self.weight_hh, self.h_states[t].T, out=self.rec)
        out = self.h_states[1:].reshape(T * N, H)                     # the outputs h_1 .. h_T
        matmul(out, self.weight_out.T, out=self.logits)               # (3) readout
        matmul(self.dlogits, self.weight_out, out=self.dout)          # (4) d(out)
        matmul(out.T, self.dlogits, out=self.dweight_out_t)           # (4) dW^T
        for t in reversed(range(T)):                                  # (5) recurrent, back
            matmul(self.da[t], self.weight_hh, out=self.dh)
        da = self.da.reshape(T * N, -1)
        matmul(da.T, self.x, out=self.dweight_ih)                     # (6) dW_ih
        matmul(da.T, self.h_states[:T].reshape(T * N, H), out=self.dweight_hh)  # (6) dW_hh


def _floor_factory(cell: str, seq_len: int, batch: int, hidden: int, classes: int,
                   seed: int) -> Callable[[], Callable[[], float | None]]:
    def build() -> Callable[[], float | None]:
        floor = GemmFloor(cell, seq_len, batch, hidden, hidden, classes, seed)

        def step() -> None:
            floor.step()

        return step

    return build


def contestants(cell: str, hidden: int, seq_len: int, cfg: Config,
                torch: Any = None) -> list[Contestant]:
    """The contestants for one cell and size, in table order (ours first, then the GEMM
    floor on device cpu when ``cfg.floor``, then torch's)."""
    if cell not in CELLS:
        raise ValueError(f"unknown cell {cell!r}; choose from {sorted(CELLS)}")
    x, y = make_data(seq_len, cfg.batch, hidden, cfg.classes, cfg.seed)
    out = [Contestant(engine, engine,
                      _ours_factory(cell, engine, x, y, cfg.classes, cfg.seed, cfg.device))
           for engine in cfg.engines]
    if cfg.floor and cfg.device == "cpu":
        out.append(Contestant(FLOOR, FLOOR_KIND, _floor_factory(
            cell, seq_len, cfg.batch, hidden, cfg.classes, cfg.seed)))
    if torch is not None:
        tname = f"torch.nn.{CELLS[cell].torch_name}"
        out.append(Contestant(tname, "torch", _torch_factory(
            torch, cell, "layer", x, y, cfg.classes, cfg.seed, cfg.device)))
        if cell == "lstm":
            out.append(Contestant("torch LSTMCell loop", "torch-cell", _torch_factory(
                torch, cell, "cell", x, y, cfg.classes, cfg.seed, cfg.device)))
            out.append(Contestant(COMPOSED, "torch-composed", _torch_factory(
                torch, cell, "composed", x, y, cfg.classes, cfg.seed, cfg.device)))
    return out


def _import_torch(cfg: Config, threads: int | None) -> Any:
    if not cfg.torch:
        return None
    try:
        import torch
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
    contestant computes the same function from the same weights (the GEMM floor computes
    no loss and is left out of the comparison; its record's loss is None). Returns one
    record per contestant with the per-repetition times, the run's conditions (device, T,
    N, threads) and ``loss_ok``: whether every training step of this cell and H reached the
    same first-step loss (see :func:`losses_agree`), the same flag for the whole group.
    """
    records = []
    sync = _cuda_sync(torch) if cfg.device == "cuda" else None
    for cell in cfg.cells:
        for hidden in cfg.hidden:
            built: list[tuple[Contestant, Callable[[], float | None]]] = []
            losses: dict[str, float | None] = {}
            for c in contestants(cell, hidden, cfg.seq_len, cfg, torch):
                try:
                    step = c.factory()
                    loss = step()                                # the warm-up step
                    if c.kind != FLOOR_KIND:
                        losses[c.name] = loss
                except Exception as exc:  # on a GPU: report it and time the others
                    if cfg.device != "cuda":
                        raise
                    _log(f"  {c.name} failed on {cfg.device}: {type(exc).__name__}: {exc}")
                    continue
                built.append((c, step))
            if not built:
                _log(f"  {CELLS[cell].label} H={hidden}: every contestant failed; no row")
                continue
            reps = cfg.reps_at(hidden, threads)
            times = hz.interleaved([(c.name, step) for c, step in built], reps=reps,
                                   warmup=0, sync=sync)
            agree = losses_agree([v for v in losses.values() if v is not None])
            for c, _ in built:
                rec = dict(device=cfg.device, threads=threads, cell=cell, hidden=hidden,
                           seq_len=cfg.seq_len, batch=cfg.batch, contestant=c.name,
                           kind=c.kind, wall_ms=times[c.name].wall_ms,
                           cpu_ms=times[c.name].cpu_ms, faults=times[c.name].faults,
                           loss=losses.get(c.name), loss_ok=agree)
                records.append(rec)
            if log is not None:
                summary = ", ".join(f"{c.name} {hz.median(times[c.name].wall_ms):.1f}"
                                    for c, _ in built)
                where = f"device {cfg.device}" if threads is None else f"{threads} thread(s)"
                log(f"  [{where}] {CELLS[cell].label} H={hidden} "
                    f"({reps} reps): {summary} ms")
    return records


def losses_agree(losses: Sequence[float]) -> bool:
    """True if every two of ``losses`` differ by at most ``LOSS_RTOL`` relative to the smaller
    in magnitude (plus 1e-5 absolute); False if any is NaN. Compared pairwise, so that no
    contestant is taken as the right one."""
    return all(abs(a - b) <= LOSS_RTOL * min(abs(a), abs(b)) + 1e-5
               for a in losses for b in losses)


def _cuda_sync(torch: Any) -> Callable[[], None]:
    import cupy as cp

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
    warm-up step, is measured over one step, and is dropped before the next is built.
    A ``--quick`` run leaves the torch composed loop out of this table: the profiler's own
    record of its thousands of ops took this process from 483 to 874 MB of resident memory
    at T = 64 (measured; the profiles of one process add up), which a quick run, held under
    500 MB, cannot afford."""
    records = []
    for cell in cfg.cells:
        for T in cfg.mem_seq_lens:
            for c in contestants(cell, cfg.mem_hidden, T, cfg, torch):
                if c.kind == FLOOR_KIND:                         # not a training step
                    continue
                if cfg.quick and c.kind == "torch-composed":
                    continue
                step = c.factory()
                step()                                           # warm-up
                peak: int | None
                if c.kind in ENGINES:
                    peak = hz.peak_tracemalloc(step)
                    method = "tracemalloc"
                else:
                    peak = hz.peak_torch_alloc(torch, step)
                    method = "torch.profiler"
                del step
                records.append(dict(device=cfg.device, cell=cell, hidden=cfg.mem_hidden,
                                    seq_len=T, batch=cfg.batch, contestant=c.name,
                                    kind=c.kind, method="alloc", detail=method, bytes=peak))
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
    np._core.multiarray._set_madvise_hugepage(False)  # type: ignore[attr-defined]
    match = [c for c in contestants(cell, cfg.mem_hidden, seq_len, cfg, torch)
             if c.name == name and c.kind != FLOOR_KIND]
    if not match:
        raise ValueError(f"no contestant {name!r} for cell {cell!r}")
    c = match[0]
    step = c.factory()
    step()
    peak = hz.peak_rss_delta(step)
    return dict(device=cfg.device, cell=cell, hidden=cfg.mem_hidden, seq_len=seq_len,
                batch=cfg.batch, contestant=c.name, kind=c.kind, method="rss",
                detail="VmHWM - VmRSS", bytes=peak)


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def _torch_name(cell: str) -> str:
    return f"torch.nn.{CELLS[cell].torch_name}"


def ratio_text(ratio: float, limit: float) -> str:
    """``ratio`` as a verdict prints it: 3 decimals, or as many more as it takes for the
    printed number to lie on the same side of ``limit`` as the ratio itself. The verdict
    compares the unrounded ratio, so 0.9004 against 0.9 is a MISS printed as ``0.9004x``
    (not ``0.900x``) and 0.89996 a PASS printed as ``0.900x``."""
    digits = 3
    while (float(f"{ratio:.{digits}f}") <= limit) != (ratio <= limit) and digits < 17:
        digits += 1
    return f"{ratio:.{digits}f}x"


def _run_text(device: str, seq_len: int, batch: int, threads: int | None) -> str:
    """The conditions of a measurement in the report's words (as :meth:`Target.conditions`)."""
    parts = [f"device {device}", f"T={seq_len}", f"N={batch}"]
    if threads is not None:
        parts.append(f"{threads} thread(s)")
    return ", ".join(parts)


def _judge(goal: Target, ratio: float | None, mismatch: str | None,
           method: str = "") -> tuple[str, str, str]:
    """The verdict on one goal: (status, what the row's check shows in brackets, the rest of
    its line in the Targets section).

    ``mismatch`` names the first-step losses when the contestants of the group disagree
    (then no ratio of the group means anything); ``method`` labels a memory ratio with the
    measurement it comes from.
    """
    if mismatch is not None:
        return ("LOSS MISMATCH", mismatch,
                f"not judged: the first-step losses disagree ({mismatch})")
    if ratio is None:
        return "n/a", "no reference", f"not measured: no {goal.reference} in this run"
    shown = ratio_text(ratio, goal.limit) + (f" {method}" if method else "")
    return ("PASS" if ratio <= goal.limit else "MISS"), shown, f"measured {shown}"


class _Table(NamedTuple):
    """The rows of a table and what the report's Targets section says about them."""

    rows: list[dict[str, str]]
    lines: list[str]          # one per verdict: "PASS: ...", "MISS: ...", "LOSS MISMATCH: ..."
    checked: set[Target]      # goals that got a verdict
    unchecked: set[Target]    # goals of a contestant in the table measured at other settings


def _verdicts(about: tuple, held_at: tuple, subject: str,
              ratio_of: Callable[[Target], tuple[float | None, str]], mismatch: str | None,
              table: _Table) -> tuple[str, str]:
    """Check one row against every goal about it; return its (target, check) cells and add
    the verdicts and the goals left unchecked to ``table``.

    ``about`` is the row's (what, kind, cell, H), ``held_at`` its (device, T, N, threads);
    ``ratio_of(goal)`` gives the ratio to the goal's reference and a label of how it was
    measured. A row no goal is about gets empty cells.
    """
    goals = [t for t in TARGETS if t.concerns(*about)]
    held = [t for t in goals if t.holds_at(*held_at)]
    table.unchecked.update(t for t in goals if t not in held)
    checks = []
    for goal in held:
        ratio, method = ratio_of(goal) if mismatch is None else (None, "")
        status, shown, rest = _judge(goal, ratio, mismatch, method)
        checks.append(f"{status} ({shown})")
        table.checked.add(goal)
        table.lines.append(f"{status}: {subject}: {goal.goal()}, {rest}")
    if held:
        check = "; ".join(dict.fromkeys(checks))     # one LOSS MISMATCH for several goals
    elif mismatch is not None:
        check = f"LOSS MISMATCH ({mismatch})"
    else:
        check = "no target at these settings" if goals else ""
    return "; ".join(t.goal() for t in held), check


def _timing_table(records: Sequence[dict[str, Any]]) -> _Table:
    table = _Table([], [], set(), set())
    groups: dict[tuple, dict[str, dict]] = {}
    for r in records:
        key = (r["device"], r["threads"], r["seq_len"], r["batch"], r["cell"], r["hidden"])
        groups.setdefault(key, {})[r["contestant"]] = r
    for (device, threads, T, N, cell, hidden), members in groups.items():
        ref = members.get(_torch_name(cell))
        floor = members.get(FLOOR)
        mismatch = None
        if not all(r["loss_ok"] for r in members.values()):
            mismatch = ", ".join(f"{name} {r['loss']:.7g}" for name, r in members.items()
                                 if r["loss"] is not None)
        for name, r in members.items():
            ratio = hz.paired_ratio(r["wall_ms"], ref["wall_ms"]) if ref else None
            cpu_ratio = hz.paired_ratio(r["cpu_ms"], ref["cpu_ms"]) if ref else None
            floor_ratio = hz.paired_ratio(r["wall_ms"], floor["wall_ms"]) if floor else None

            def ratio_of(goal: Target, r: dict = r) -> tuple[float | None, str]:
                vs = members.get(goal.reference)
                return (hz.paired_ratio(r["wall_ms"], vs["wall_ms"]) if vs else None), ""

            subject = (f"{name} {CELLS[cell].label} H={hidden} "
                       f"(time, {_run_text(device, T, N, threads)})")
            target, check = _verdicts(("time", r["kind"], cell, hidden), (device, T, N, threads),
                                      subject, ratio_of, mismatch, table)
            table.rows.append({
                "threads": "-" if threads is None else str(threads),
                "cell": CELLS[cell].label, "H": str(hidden), "contestant": name,
                "ms": f"{hz.median(r['wall_ms']):.2f}",
                "cpu ms": f"{hz.median(r['cpu_ms']):.2f}",
                "faults": f"{hz.median(r.get('faults') or [0]):.0f}",
                "reps": str(len(r["wall_ms"])),
                "x torch.nn": "-" if ratio is None else f"{ratio:.2f}x",
                "cpu x torch.nn": "-" if cpu_ratio is None else f"{cpu_ratio:.2f}x",
                "x floor": "-" if floor_ratio is None else f"{floor_ratio:.2f}x",
                "target": target, "check": check,
            })
    return table


def timing_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One table row per timing record: medians, the median paired ratio to torch.nn of the
    same cell, H, thread count, T, N and device, the same to the GEMM floor (``x floor``;
    "-" where the group has no floor), and the verdict on every goal of
    :data:`TARGETS` about the contestant at this H that holds at those settings (PASS/MISS
    with the ratio; ``LOSS MISMATCH`` with every loss of the group, on every row of a group
    whose contestants disagree; ``no target at these settings`` where the contestant's
    goals at this H are set at another device, T, N or thread count)."""
    return _timing_table(records).rows


def _memory_table(records: Sequence[dict[str, Any]]) -> _Table:
    table = _Table([], [], set(), set())
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in records:
        key = (r["device"], r["batch"], r["cell"], r["hidden"], r["seq_len"], r["contestant"])
        by_key.setdefault(key, {})[r["method"]] = r
    for key, methods in by_key.items():
        device, N, cell, hidden, T, name = key
        ref = by_key.get((device, N, cell, hidden, T, _torch_name(cell)), {})
        row = {"cell": CELLS[cell].label, "H": str(hidden), "T": str(T), "contestant": name}
        for method, label in (("alloc", "alloc"), ("rss", "RSS")):
            mine = methods.get(method, {}).get("bytes")
            row[f"{label} MiB"] = "-" if mine is None else f"{mine / 2**20:.1f}"
            ratio = _memory_ratio(methods, ref, method)
            row[f"{label} x torch.nn"] = "-" if ratio is None else f"{ratio:.2f}x"

        def ratio_of(goal: Target, methods: dict = methods,
                     key: tuple = key) -> tuple[float | None, str]:
            # the allocator-level ratio to the goal's reference; the resident-set one where
            # the reference's allocator-level peak is missing
            vs = by_key.get((*key[:-1], goal.reference), {})
            alloc = _memory_ratio(methods, vs, "alloc")
            if alloc is not None:
                return alloc, "alloc"
            return _memory_ratio(methods, vs, "rss"), "RSS"

        subject = (f"{name} {CELLS[cell].label} H={hidden} "
                   f"(memory, {_run_text(device, T, N, None)})")
        kind = next(iter(methods.values()))["kind"]
        row["target"], row["check"] = _verdicts(("memory", kind, cell, hidden),
                                                (device, T, N, None), subject, ratio_of,
                                                None, table)
        table.rows.append(row)
    return table


def _memory_ratio(mine: dict[str, dict], theirs: dict[str, dict], method: str) -> float | None:
    """The ratio of two contestants' peaks measured by ``method``, None where one is
    missing (or the reference's is 0)."""
    a = mine.get(method, {}).get("bytes")
    b = theirs.get(method, {}).get("bytes")
    return a / b if a is not None and b else None


def memory_rows(records: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per (cell, T, contestant): the allocator-level and resident-set peaks in MiB,
    each with its ratio to torch.nn, and the verdict on every memory goal about the
    contestant where it holds (a ratio to the goal's reference: torch.nn, or the LSTMCell
    loop for the autograd LSTM), labelled with the measurement it used (``alloc``, or
    ``RSS`` where an allocator-level peak is missing)."""
    return _memory_table(records).rows


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
    """The whole printed report: set-up, timing table, memory table, and the Targets
    section: one line per verdict, then each goal about a contestant of this run that was
    checked nowhere in it, with the settings it is defined at."""
    ttable, mtable = _timing_table(timing), _memory_table(memory)
    trows, mrows = ttable.rows, mtable.rows
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
        "paired ratio of wall and of CPU time; x floor: the same for wall time against the "
        "GEMM floor (the step's matrix products alone, with NumPy; see the benchmark's "
        "docstring). Targets are checked on the wall-time ratio.",
        width=100))
    out.append("")
    out.append(format_table(trows, markdown))
    if mrows:
        out += ["", f"{h}Peak memory of one step (H={cfg.mem_hidden}, 1 thread)", ""]
        out.append(format_table(mrows, markdown))
    lines = ttable.lines + mtable.lines
    checked = ttable.checked | mtable.checked
    lines += [f"not checked at these settings: {t.kind} {CELLS[t.cell].label} ({t.what}) "
              f"{t.goal()}, set for {t.conditions()}"
              for t in TARGETS if t in ttable.unchecked | mtable.unchecked and t not in checked]
    if lines:
        out += ["", f"{h}Targets", ""]
        out += [f"{bullet}{line}" for line in lines]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------
# processes and the command line
# --------------------------------------------------------------------------------------------
_PROFILER_NOISE = ("USDT:", "STAGE:")
#: Environment variables that change the results; shown in the report's command when set.
#: OpenBLAS: its kernel choice, the L2 cache size it blocks for, how long idle worker
#: threads wait, and its thread pinning (where the build pins threads). glibc malloc: the
#: variables and tunables that set it, and ours, which decides whether the benchmark's call
#: tunes it (tinygrad_rnn/malloc_tuning.py).
_RESULT_ENV_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_THREAD_TIMEOUT",
                    "OPENBLAS_MAIN_FREE", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                    "MALLOC_TOP_PAD_", "GLIBC_TUNABLES", "TINYGRAD_RNN_MALLOC",
                    "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
#: Thread counts. A CPU run sets those of :data:`benchmarks._harness.THREAD_ENV_VARS` in
#: each child from ``--threads`` (OpenBLAS then ignores the other two), so the command shows
#: them only for a ``--device`` run, which times in this process with the inherited ones.
_THREAD_ENV_VARS = (*hz.THREAD_ENV_VARS, "GOTO_NUM_THREADS", "OPENBLAS_DEFAULT_NUM_THREADS")


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
                   help="H in {64, 256}, T=32, memory at T=64 only, fewer repetitions, no "
                        "resident-set check")
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
                   "(default 64 512; quick 64)")
    p.add_argument("--mem-hidden", type=int, default=256, help="H of the memory table")
    p.add_argument("--no-memory", action="store_true", help="skip the memory table")
    p.add_argument("--no-rss", action="store_true", help="skip the resident-set cross-check")
    p.add_argument("--no-torch", action="store_true", help="do not run torch contestants")
    p.add_argument("--no-floor", action="store_true",
                   help="do not time the GEMM floor (the step's GEMMs alone, with NumPy)")
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
                 rss=not (args.no_rss or args.quick), reps=args.reps,
                 floor=not args.no_floor)
    if args.quick:
        # memory at T = 64 only: a quick run checks no target, and T = 512 (the autograd
        # LSTM's 790 MiB step beside torch) tripled its peak to 1.5 GB (docs/performance.md)
        cfg.hidden, cfg.seq_len, cfg.mem_seq_lens = [64, 256], 32, [64]
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
        import cupy as cp
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
    if cfg.device == "standin":  # a test double: registered by the testing package
        import tinygrad_rnn.testing  # noqa: F401
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
    note = ("GPU run: ours on CuPy, torch on CUDA; the GPU goal is checked at H=1024, "
            "N=256, T=64; no memory table" if cfg.device == "cuda"
            else "stand-in device run: checks the device code path (NumPy under CuPy's rules)"
                 " against torch on the CPU; not a GPU timing, so no target is checked; no "
                 "memory table")
    text = report(cfg, records, [], info, command, args.markdown, notes=[note])
    _emit(text, cfg, records, [], info, command, args, notes=[note])
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
    keep_freed_memory()  # freed memory stays for the next step (tinygrad_rnn/malloc_tuning.py)
    if args._child:
        return _child_main(args)
    cfg = config_from_args(args)
    shown = list(sys.argv[1:] if argv is None else argv)
    shown_vars = _RESULT_ENV_VARS + (_THREAD_ENV_VARS if cfg.device != "cpu" else ())
    env_shown = [f"{k}={os.environ[k]}" for k in shown_vars if k in os.environ]
    command = " ".join([*env_shown, "python benchmarks/recurrent.py", *shown])
    if cfg.device != "cpu":
        return _run_device(cfg, args, command)
    notes = []
    if not cfg.torch:
        notes.append("torch not installed (or --no-torch): only our numbers")
    timing: list[dict] = []
    info: dict[str, str] = {}
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
