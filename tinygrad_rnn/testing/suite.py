"""The gradient-check suite run by ``tinygrad-rnn gradcheck``: every op of the registry
(:mod:`.registry`), the recurrent cells and the recurrent layers, checked by float64
central differences.

The ops and their domains are the registry's, the same list the test suites check; this
module adds the cells and layers (inputs, states and every parameter) and runs the checks.
Each :class:`SuiteEntry` draws random problems from a seeded NumPy generator
(:class:`~tinygrad_rnn.testing.registry.NumpyDraw`). Every example is checked with
:func:`tinygrad_rnn.gradcheck.check_leaves` in full mode (every Jacobian entry; eps = 1e-6),
with respect to every floating-point input and, for cells and layers, every parameter;
elements whose gradient an op defines to be 0 (embedding's ``padding_idx`` rows) are held
constant (:func:`~tinygrad_rnn.testing.registry.gradient_fn`).

Why seeded NumPy draws and not hypothesis: the command must work in a plain install
(hypothesis is a test extra), it prints exactly ``--examples`` checks per entry, a failure is
reproduced by re-running with the same ``--seed`` (the examples of an entry do not depend on
which other entries run), and there is no shrinking phase to wait for. The test suite runs
the same samplers under hypothesis (``tests/test_ops_gradients.py``).

Tolerance: an entry passes when ``|analytic - numeric| <= atol + rtol |numeric|`` with
``rtol = 1e-5`` and ``atol = 1e-6 * max(1, max |f|)`` (``docs/gradcheck.md`` derives why
float64 central differences are good to about 1e-10 |f| here).
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..backend import normalize_device, to_device
from ..engine import no_grad
from ..gradcheck import check_leaves, flatten_outputs
from ..nn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from ..ops import Cast
from ..tensor import Tensor
from .registry import BY_NAME as OPS
from .registry import REGISTRY, OpInfo, gradient_fn

__all__ = [
    "EPS", "RTOL", "ATOL", "Problem", "SuiteEntry", "EntryResult", "SUITE", "BY_NAME",
    "example_rng", "check_problem", "run_entry", "run_suite", "format_table",
]

EPS = 1e-6  # central-difference step
RTOL = 1e-5
ATOL = 1e-6  # scaled by max(1, max |f|)
GAP = 0.05  # distance kept from the relu kink by the RNNCell entries


@dataclass
class Problem:
    """One example: ``fn(*inputs)`` returns a Tensor or a (nested) tuple of Tensors.

    ``inputs`` holds float64 Tensors with ``requires_grad=True`` (checked) and constants
    (passed through). ``params`` are ``(name, Tensor)`` pairs that ``fn`` reads from a
    module (float64 leaves, also checked, perturbed in place and restored).
    """

    fn: Callable[..., Any]
    inputs: tuple
    params: tuple = ()


@dataclass(frozen=True)
class SuiteEntry:
    """A named family of problems: ``sample(rng)`` draws one :class:`Problem`."""

    name: str
    group: str  # 'op', 'cell' or 'layer'
    sample: Callable[[np.random.Generator], Problem]
    what: str


@dataclass
class EntryResult:
    """The outcome of the checks of one entry."""

    name: str
    group: str
    examples: int = 0
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    passed: bool = True
    failure: str = ""
    seconds: float = 0.0
    entries: int = 0  # Jacobian entries compared over all examples


def _leaf(a: Any) -> Tensor:
    return Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _reals(rng: np.random.Generator, shape: tuple, lo: float = -3.0,
           hi: float = 3.0) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape)


# ------------------------------------------------------------------------------------- ops
def _op_entry(op: OpInfo, fn: Callable | None = None) -> SuiteEntry:
    """The registry entry ``op`` as a suite entry: a case drawn from its domain, checked
    with respect to its differentiable inputs (``fn`` replaces ``op.fn`` where the CLI
    needs another form of the same op)."""
    call = op if fn is None else OpInfo(op.name, fn, op.ref, op.sample, op.functions,
                                        op.what, op.examples, op.frozen)

    def sample(rng: np.random.Generator) -> Problem:
        case = op.draw(rng)
        return Problem(gradient_fn(call, case), tuple(_leaf(a) for a in case.inputs))

    return SuiteEntry(op.name, "op", sample, op.what)


def _astype(x: Tensor) -> Tensor:
    """The registry's exact round trip through longdouble (x86-64's 80-bit floats) on the
    CPU. Device array modules have no longdouble (CuPy's widest float is float64), so there
    the entry checks the same cast op float64 -> float64."""
    if x.device == "cpu":
        return OPS["astype"].fn(x)
    return Cast.apply(x, dtype=np.dtype(np.float64))


_CLI_FORMS = {"astype": _astype}


# ------------------------------------------------------------------------ cells and layers
def _module_problem(module: Any, fn: Callable[..., Any], inputs: tuple) -> Problem:
    return Problem(fn, inputs, tuple(module.named_parameters()))


def _rnn_cell(nonlinearity: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        n, d, h = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cell = RNNCell(d, h, nonlinearity=nonlinearity, dtype=np.float64, generator=rng)
        assert cell.bias_ih is not None and cell.bias_hh is not None  # bias=True
        for _ in range(100):  # relu: keep every pre-activation GAP away from the kink
            x, h0 = _reals(rng, (n, d), -1.0, 1.0), _reals(rng, (n, h), -1.0, 1.0)
            pre = (x @ cell.weight_ih._data.T + cell.bias_ih._data + h0 @ cell.weight_hh._data.T
                   + cell.bias_hh._data)
            if nonlinearity == "tanh" or np.abs(pre).min() >= GAP:
                break
        return _module_problem(cell, lambda a, b: cell(a, b), (_leaf(x), _leaf(h0)))

    return sample


def _gru_cell(reset: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        n, d, h = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cell = GRUCell(d, h, reset=reset, dtype=np.float64, generator=rng)
        x, h0 = _reals(rng, (n, d), -1.0, 1.0), _reals(rng, (n, h), -1.0, 1.0)
        return _module_problem(cell, lambda a, b: cell(a, b), (_leaf(x), _leaf(h0)))

    return sample


def _lstm_cell(peephole: bool = False, coupled: bool = False) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        n, d, h = 2, int(rng.integers(1, 4)), int(rng.integers(1, 4))
        cell = LSTMCell(d, h, peephole=peephole, coupled=coupled, dtype=np.float64,
                        generator=rng)
        x = _reals(rng, (n, d), -1.0, 1.0)
        h0, c0 = _reals(rng, (n, h), -1.0, 1.0), _reals(rng, (n, h), -1.0, 1.0)
        return _module_problem(cell, lambda a, b, c: cell(a, (b, c)),
                               (_leaf(x), _leaf(h0), _leaf(c0)))

    return sample


def _layer(kind: str) -> Callable:
    def sample(rng: np.random.Generator) -> Problem:
        t, n, d, h = 3, 2, int(rng.integers(1, 3)), int(rng.integers(1, 3))
        bidirectional = bool(rng.random() < 0.5)
        if kind == "rnn":
            layer: Any = RNN(d, h, bidirectional=bidirectional, dtype=np.float64,
                             generator=rng)
        elif kind == "gru":
            layer = GRU(d, h, bidirectional=bidirectional, dtype=np.float64, generator=rng,
                        reset=str(rng.choice(["after", "before"])))
        else:
            layer = LSTM(d, h, bidirectional=bidirectional, dtype=np.float64, generator=rng,
                         peephole=bool(rng.random() < 0.5), coupled=bool(rng.random() < 0.5))
        lengths = rng.integers(1, t + 1, size=n) if rng.random() < 0.5 else None
        states = 2 if bidirectional else 1
        x = _leaf(_reals(rng, (t, n, d), -1.0, 1.0))
        h0 = _leaf(_reals(rng, (states, n, h), -1.0, 1.0))
        if kind == "lstm":
            c0 = _leaf(_reals(rng, (states, n, h), -1.0, 1.0))
            return _module_problem(layer, lambda a, b, c: layer(a, (b, c), lengths=lengths),
                                   (x, h0, c0))
        return _module_problem(layer, lambda a, b: layer(a, b, lengths=lengths), (x, h0))

    return sample


# ----------------------------------------------------------------------------- the suite
SUITE: tuple[SuiteEntry, ...] = tuple(
    _op_entry(op, _CLI_FORMS.get(op.name)) for op in REGISTRY) + (
    # recurrent cells (autograd path), inputs, states and every parameter
    SuiteEntry("rnn_cell_tanh", "cell", _rnn_cell("tanh"), "RNNCell, tanh"),
    SuiteEntry("rnn_cell_relu", "cell", _rnn_cell("relu"), "RNNCell, relu, away from 0"),
    SuiteEntry("gru_cell_after", "cell", _gru_cell("after"), "GRUCell, reset after"),
    SuiteEntry("gru_cell_before", "cell", _gru_cell("before"), "GRUCell, reset before"),
    SuiteEntry("lstm_cell", "cell", _lstm_cell(), "LSTMCell"),
    SuiteEntry("lstm_cell_peephole", "cell", _lstm_cell(peephole=True),
               "LSTMCell with peepholes"),
    SuiteEntry("lstm_cell_coupled", "cell", _lstm_cell(coupled=True),
               "LSTMCell, coupled input-forget gate"),
    # recurrent layers (fused engine: the hand-derived BPTT kernels)
    SuiteEntry("rnn_layer", "layer", _layer("rnn"), "nn.RNN, T=3, maybe bidirectional/lengths"),
    SuiteEntry("gru_layer", "layer", _layer("gru"), "nn.GRU, T=3, either reset"),
    SuiteEntry("lstm_layer", "layer", _layer("lstm"), "nn.LSTM, T=3, peephole/coupled"),
)

BY_NAME: dict[str, SuiteEntry] = {entry.name: entry for entry in SUITE}
assert len(BY_NAME) == len(SUITE), "suite names must be unique"

# ----------------------------------------------------------------------------- running
def _output_scale(outputs: Sequence[Tensor]) -> float:
    """max(1, largest finite |output entry|): the scale of the round-off in f."""
    scale = 1.0
    for out in outputs:
        values = out.numpy().astype(np.float64)  # an explicit host copy from a device
        finite = values[np.isfinite(values)]
        if finite.size:
            scale = max(scale, float(np.abs(finite).max()))
    return scale


def example_rng(seed: int, name: str, k: int) -> np.random.Generator:
    """The generator of example ``k`` of entry ``name``: independent of the other entries,
    so ``--ops`` reproduces exactly the examples of a full run with the same seed."""
    return np.random.default_rng([seed, zlib.crc32(name.encode()), k])


def check_problem(problem: Problem, device: str = "cpu") -> Any:
    """Run the float64 full-mode check of one problem on ``device`` (inputs and module
    parameters are copied there; host constants such as masks and targets are copied by the
    ops themselves); returns the GradcheckReport."""
    device = normalize_device(device)
    inputs = [_leaf(x._data) if isinstance(x, Tensor) and x.requires_grad else x
              for x in problem.inputs]
    if device != "cpu":
        inputs = [Tensor(x._data, requires_grad=True, device=device)
                  if isinstance(x, Tensor) and x.requires_grad else x for x in inputs]
        for _, p in problem.params:
            p.data = to_device(p._data, device)
    n_in = len(inputs)
    args = inputs + [p for _, p in problem.params]
    diff = [k for k, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    labels = {k: f"input {k}" for k in range(n_in)}
    labels.update({n_in + j: f"parameter {name!r}" for j, (name, _) in
                   enumerate(problem.params)})

    def fn(*a: Any) -> Any:
        return problem.fn(*a[:n_in])

    with no_grad():
        scale = _output_scale(flatten_outputs(fn(*args)))
    return check_leaves(fn, args, diff, labels, eps=EPS, atol=ATOL * scale, rtol=RTOL,
                        mode="full", raise_exception=False)


def run_entry(entry: SuiteEntry, examples: int, seed: int = 0,
              device: str = "cpu") -> EntryResult:
    """Check ``examples`` random problems of ``entry`` on ``device``; stops at the first
    failure. The examples are the same on every device (drawn on the host)."""
    result = EntryResult(entry.name, entry.group)
    start = time.perf_counter()
    for k in range(examples):
        result.examples += 1
        try:
            report = check_problem(entry.sample(example_rng(seed, entry.name, k)), device)
        except Exception as exc:  # a backward that raises is a failed check, not a crash
            result.passed = False
            result.failure = f"example {k}: {type(exc).__name__}: {exc}"
            break
        result.entries += report.entries
        result.max_abs_error = max(result.max_abs_error, report.max_abs_error)
        result.max_rel_error = max(result.max_rel_error, report.max_rel_error)
        if not report.passed:
            result.passed = False
            result.failure = (
                f"example {k}: d output {report.output_index}{list(report.output_element)}"
                f" / d {report.label}{list(report.element)}: analytic {report.analytic:.10g}"
                f", numeric {report.numeric:.10g}")
            break
    result.seconds = time.perf_counter() - start
    return result


def run_suite(names: Sequence[str] | None = None, examples: int = 5, seed: int = 0,
              progress: Callable[[EntryResult], None] | None = None,
              device: str = "cpu") -> list[EntryResult]:
    """Run the entries named in ``names`` (all when None), in suite order, on ``device``."""
    entries = SUITE if names is None else [BY_NAME[name] for name in names]
    results = []
    for entry in entries:
        res = run_entry(entry, examples, seed, device)
        results.append(res)
        if progress is not None:
            progress(res)
    return results


def format_table(results: Sequence[EntryResult]) -> str:
    """A fixed-width table: op, group, examples, max abs error, max rel error, pass."""
    header = f"{'op':<22}{'group':<7}{'examples':>9}{'max abs err':>13}{'max rel err':>13}" \
             f"  pass"
    lines = [header, "-" * len(header)]
    for r in results:
        lines.append(f"{r.name:<22}{r.group:<7}{r.examples:>9}{r.max_abs_error:>13.2e}"
                     f"{r.max_rel_error:>13.2e}  {'ok' if r.passed else 'FAIL'}")
    return "\n".join(lines)
