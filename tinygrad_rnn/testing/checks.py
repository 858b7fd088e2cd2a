"""Checkers: is the gradient of your op, function, module or Jacobian right?

(Over 700 lines for a reason: the four checkers share one contract run, one report and
one way of copying a caller's objects, which would otherwise cross module boundaries.)

Each returns a :class:`CheckReport`, or raises :class:`CheckFailure` (an ``AssertionError``)
naming every check that failed. They need NumPy only (no hypothesis); the property-based
wrapper :func:`~tinygrad_rnn.testing.gradient_property` is in :mod:`.strategies`.

:func:`check_function`
    float64 :func:`~tinygrad_rnn.gradcheck` (full for small inputs, directional for large)
    plus the VJP contract every built-in op obeys: gradient shape and dtype equal the
    input's, zero upstream gradient gives a zero gradient, inputs and upstream gradients are
    never mutated, forward and backward are deterministic.
:func:`check_op`
    The same for a :class:`~tinygrad_rnn.Function` subclass, with the contract checked on
    the raw ``forward``/``backward`` arrays (before the engine reduces or casts anything).
:func:`check_module`
    Gradients with respect to the inputs *and every parameter* of a module-like object
    (anything with ``named_parameters()``), on float64 copies of its parameters.
:func:`check_jacobian`
    ``backward(g) == J^T g`` for a hand-written Jacobian, and ``J u`` against finite
    differences.

The checkers run on the device of their inputs (a module's parameters stay on theirs): the
upstream gradients and directions are drawn on the host and copied there, and outputs and
gradients are copied back to the host explicitly for the comparisons
(:func:`~tinygrad_rnn.gradcheck.host_copy`). On the stand-in device (``device='standin'``,
:mod:`.cupy_emulator`) a NumPy call on device data fails, so checking an op there also shows
that it never hands device data to NumPy.

Every check runs in float64: finite differences in float32 are meaningless
(``docs/gradcheck.md`` derives why). Test float32 code by comparing it with the float64 result.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..backend import get_array_module, is_float_dtype, result_float_dtype, to_device
from ..engine import no_grad
from ..gradcheck import (
    GradcheckReport, check_leaves, check_settings, checked_inputs, flatten_outputs,
    grads_preserved, host_copy,
)
from ..ops.base import Context, Function, sum_to_shape
from ..tensor import Tensor

__all__ = [
    "check_function", "check_op", "check_module", "check_jacobian",
    "CheckOptions", "CheckReport", "CheckResult", "CheckFailure",
]

# ============================================================================= checkers
@dataclass(frozen=True)
class CheckOptions:
    """Settings shared by the checkers.

    Attributes
    ----------
    eps, atol, rtol : float
        Passed to the gradient check (central differences; an entry passes when
        ``|analytic - numeric| <= atol + rtol |numeric|``).
    mode : {'auto', 'full', 'directional'}
        ``'auto'``: full Jacobian when the checked inputs and the outputs each have at most
        ``max_full_size`` elements in total, else ``n_directions`` random directions.
    max_full_size : int
    n_directions : int
    seed : int
        Seed of the random upstream gradients and directions (every check is reproducible).
    check_determinism : bool
        Run forward and backward with the first call's upstream gradient twice more (right
        after the zero-upstream call, and back to back) and require results equal to the
        first call's (relative difference at most 1e-12 of the largest magnitude): the
        forward outputs of all four calls, the zero-upstream one included, and the
        gradients of the three with the same upstream gradient. Catches randomness and
        results that depend on how many calls came before (in forward, every period from
        2 to 4; what exactly is caught: ``_run_contract``). Turn it off for code that is
        random on purpose.
    raise_exception : bool
        Raise :class:`CheckFailure` when a check fails (default), else return the report.
    """

    eps: float = 1e-6
    atol: float = 1e-5
    rtol: float = 1e-3
    mode: str = "auto"
    max_full_size: int = 64
    n_directions: int = 8
    seed: int = 0
    check_determinism: bool = True
    raise_exception: bool = True

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "full", "directional"):
            raise ValueError(f"CheckOptions: mode must be 'auto', 'full' or 'directional', "
                             f"got {self.mode!r}")
        check_settings("CheckOptions", self.eps, self.atol, self.rtol, self.n_directions)
        size = self.max_full_size
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 0:
            raise ValueError(f"CheckOptions: max_full_size must be a non-negative integer, "
                             f"got {type(size).__name__} {size!r}")


@dataclass
class CheckResult:
    """One named check: passed or not, and why."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class CheckReport:
    """What a checker found: one :class:`CheckResult` per contract item, and the gradient
    check's own :class:`~tinygrad_rnn.GradcheckReport` (None when it could not run)."""

    target: str
    results: list = field(default_factory=list)
    gradcheck: GradcheckReport | None = None

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failures(self) -> list:
        return [r for r in self.results if not r.passed]

    def __getitem__(self, name: str) -> CheckResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"{self.target}: {'passed' if self.passed else 'FAILED'}"]
        for r in self.results:
            mark = "ok  " if r.passed else "FAIL"
            lines.append(f"  [{mark}] {r.name}" + (f": {r.detail}" if r.detail else ""))
        return "\n".join(lines)


class CheckFailure(AssertionError):
    """Raised by the checkers; the message lists every failed check, ``.report`` has all."""

    def __init__(self, report: CheckReport) -> None:
        failed = report.failures
        body = "\n".join(f"  - {r.name}: {r.detail}" for r in failed)
        super().__init__(f"{report.target} failed {len(failed)} of {len(report.results)} "
                         f"checks:\n{body}\n\nFull report:\n{report}")
        self.report = report


# names of the contract items, in the order they are reported
FORWARD = "forward runs"
OUTPUT_DTYPE = "output dtype"
BACKWARD = "backward runs"
GRAD_SHAPE = "gradient shape"
GRAD_DTYPE = "gradient dtype"
INPUTS_UNCHANGED = "inputs not mutated"
UPSTREAM_UNCHANGED = "upstream gradient not mutated"
ZERO_UPSTREAM = "zero upstream gives zero gradient"
DETERMINISTIC = "deterministic"
GRADCHECK = "gradcheck"
ORIGINAL_UNCHANGED = "caller's objects untouched"

_ORDER = [FORWARD, OUTPUT_DTYPE, BACKWARD, GRAD_SHAPE, GRAD_DTYPE, INPUTS_UNCHANGED,
          UPSTREAM_UNCHANGED, ZERO_UPSTREAM, DETERMINISTIC, GRADCHECK, ORIGINAL_UNCHANGED]


def _is_array_of(a: Any, xp: Any) -> bool:
    """True when ``a`` is an array of the array module ``xp`` (not a scalar or a list)."""
    return isinstance(a, np.ndarray) if xp is np else get_array_module(a) is xp


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


@dataclass
class _Run:
    """One forward + backward with given upstream gradients, and what went wrong in it."""

    outputs: list = field(default_factory=list)     # host copies of the float outputs
    upstream: list = field(default_factory=list)    # the upstream gradients, as given
    grads: dict = field(default_factory=dict)       # checked arg index -> host gradient
    problems: dict = field(default_factory=dict)    # check name -> list of details
    completed: bool = False

    def fail(self, name: str, detail: str) -> None:
        self.problems.setdefault(name, []).append(detail)


def _classify_backward_error(exc: BaseException) -> str:
    """Which contract item an exception raised during backward points to."""
    text = str(exc)
    if "read-only" in text:
        return UPSTREAM_UNCHANGED
    if "sum_to_shape" in text or "gradient of shape" in text or "gradients for" in text:
        return GRAD_SHAPE
    if "gradient for input" in text and "dtype" in text:
        return GRAD_DTYPE
    return BACKWARD


def _check_upstream(run: _Run, given: list, copies: list) -> None:
    for i, (g, c) in enumerate(zip(given, copies)):
        if not _same(host_copy(g), c):
            run.fail(UPSTREAM_UNCHANGED,
                     f"backward wrote into the upstream gradient of output {i} (it must treat "
                     f"grad_out as read-only: it may be shared with other ops)")


def _check_inputs(run: _Run, arrays: dict, snaps: dict, labels: dict, when: str) -> None:
    for k, snap in snaps.items():
        if not _same(host_copy(arrays[k]), snap):
            run.fail(INPUTS_UNCHANGED, f"{labels.get(k, f'input {k}')} was modified in place "
                                       f"during {when}")


def _check_output_dtypes(run: _Run, dtypes: list) -> None:
    for i, dt in enumerate(dtypes):
        if is_float_dtype(dt) and np.dtype(dt) != np.float64:
            run.fail(OUTPUT_DTYPE, f"output {i} has dtype {dt} although every checked input "
                                   f"is float64 (no silent downcasts)")


# ----------------------------------------------------------------------------- tensor level
@dataclass
class _Problem:
    """A function of leaves: ``fn(*args)`` where ``make_args()`` returns fresh arguments for
    one run (the leaves at ``diff`` reset to their original values, ``.grad`` cleared)."""

    fn: Callable[..., Any]
    make_args: Callable[[], list]
    diff: list
    labels: dict


def _array_of(x: Any) -> Any:
    """The array of a Tensor or an array argument (on any device); None for anything else."""
    if isinstance(x, Tensor):
        return x._data
    if isinstance(x, np.ndarray) or get_array_module(x) is not np:
        return x
    return None


def _tensor_run(problem: _Problem, upstream: Callable[[list], list]) -> _Run:
    run = _Run()
    args = problem.make_args()
    arrays = {k: _array_of(a) for k, a in enumerate(args) if _array_of(a) is not None}
    snaps = {k: host_copy(a) for k, a in arrays.items()}
    try:
        outs = [o for o in flatten_outputs(problem.fn(*args)) if is_float_dtype(o.dtype)]
    except Exception as exc:  # noqa: BLE001 - reported, not swallowed
        run.fail(FORWARD, _describe(exc))
        return run
    _check_output_dtypes(run, [o.dtype for o in outs])
    run.outputs = [host_copy(o._data) for o in outs]
    current = {k: _array_of(args[k]) for k in arrays}
    _check_inputs(run, current, snaps, problem.labels, "forward")
    # backward is judged against the inputs as forward left them, so that a write made
    # during forward is not blamed on backward too
    snaps = {k: host_copy(a) for k, a in current.items()}
    # drawn on the host, copied to each output's device (the same object on the CPU), so a
    # backward that writes into its upstream gradient is caught on every device
    gs = [to_device(g, o.device) for o, g in zip(outs, upstream([o.shape for o in outs]))]
    run.upstream = [host_copy(g) for g in gs]
    # tensors fn captures (module parameters) get their .grad back after the run
    with grads_preserved(outs):
        try:
            for o, g in zip(outs, gs):
                if o.requires_grad:
                    o.backward(g, retain_graph=True)
        except Exception as exc:  # noqa: BLE001
            run.fail(_classify_backward_error(exc), f"backward raised {_describe(exc)}")
            return run
        for k in problem.diff:
            leaf = args[k]
            g = leaf._grad
            label = problem.labels.get(k, f"input {k}")
            if g is None:
                run.grads[k] = np.zeros(leaf.shape)
                continue
            if tuple(g.shape) != leaf.shape:
                run.fail(GRAD_SHAPE, f"{label}: gradient shape {tuple(g.shape)} != "
                                     f"{leaf.shape}")
            if g.dtype != leaf.dtype:
                run.fail(GRAD_DTYPE, f"{label}: gradient dtype {g.dtype} != {leaf.dtype}")
            run.grads[k] = host_copy(g)
    _check_upstream(run, gs, run.upstream)
    _check_inputs(run, {k: _array_of(args[k]) for k in arrays}, snaps, problem.labels,
                  "backward")
    run.completed = True
    return run


# ----------------------------------------------------------------------------- raw op level
def _raw_inputs(inputs: Sequence[Any]) -> tuple[list, list, Any]:
    """Arrays exactly as ``Function.apply`` would hand them to ``forward``, which of them
    need a gradient, and the array module of the tensor inputs (scalars go to their device,
    arrays stay where they are)."""
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    fdt = result_float_dtype(*(x.dtype for x in tensors))
    xp = get_array_module(tensors[0]._data) if tensors else np
    arrays, needs = [], []
    for x in inputs:
        if isinstance(x, Tensor):
            arrays.append(x._data)
            needs.append(x.requires_grad)
        elif isinstance(x, (bool, int, float, np.generic)):
            arrays.append(xp.asarray(x, dtype=fdt))
            needs.append(False)
        else:
            arrays.append(get_array_module(x).asarray(x))
            needs.append(False)
    return arrays, needs, xp


def _raw_run(op: type[Function], inputs: Sequence[Any], constants: dict, labels: dict,
             upstream: Callable[[list], list]) -> _Run:
    run = _Run()
    originals, needs, xp = _raw_inputs(inputs)
    arrays = [get_array_module(a).array(a, copy=True) for a in originals]
    # keyword constants are copied too (a mask the op writes into must not be the caller's)
    # and watched like the inputs
    consts = {name: _copy_arg(v) for name, v in constants.items()}
    watched: dict = dict(enumerate(arrays))
    labels = dict(labels)
    for name, v in consts.items():
        if _array_of(v) is not None:
            watched[name] = _array_of(v)
            labels[name] = f"keyword constant {name!r}"
    snaps = {k: host_copy(a) for k, a in watched.items()}
    ctx = Context(op)
    ctx.needs_input_grad = tuple(needs)
    try:
        raw = op.forward(ctx, *arrays, **consts)
    except Exception as exc:  # noqa: BLE001
        run.fail(FORWARD, _describe(exc))
        return run
    outs = list(raw) if isinstance(raw, tuple) else [raw]
    for i, o in enumerate(outs):
        if not _is_array_of(o, xp):
            run.fail(FORWARD, f"{op.__name__}.forward returned {type(o).__name__} as output "
                              f"{i}; it must return arrays of its inputs' array module "
                              f"({xp.__name__})")
            return run
    float_idx = [i for i, o in enumerate(outs) if is_float_dtype(o.dtype)]
    _check_output_dtypes(run, [outs[i].dtype for i in float_idx])
    run.outputs = [host_copy(o) for o in (outs[i] for i in float_idx)]
    _check_inputs(run, watched, snaps, labels, "forward")
    snaps = {k: host_copy(a) for k, a in watched.items()}  # backward is judged from here
    # drawn on the host, copied to the inputs' device (the same object on the CPU)
    gs_float = [xp.asarray(g) for g in upstream([outs[i].shape for i in float_idx])]
    run.upstream = [host_copy(g) for g in gs_float]
    gs = [xp.zeros(o.shape, dtype=o.dtype) for o in outs]  # what the engine sends unused ones
    for i, g in zip(float_idx, gs_float):
        gs[i] = g
    try:
        grads = op.backward(ctx, *gs)
    except Exception as exc:  # noqa: BLE001
        run.fail(_classify_backward_error(exc), f"backward raised {_describe(exc)}")
        return run
    _check_upstream(run, gs_float, run.upstream)
    _check_inputs(run, watched, snaps, labels, "backward")
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) != len(arrays):
        run.fail(GRAD_SHAPE, f"{op.__name__}.backward returned {len(grads)} gradients for "
                             f"{len(arrays)} inputs")
        return run
    for k, need in enumerate(needs):
        if not need:
            continue
        g, label = grads[k], labels.get(k, f"input {k}")
        if g is None:
            run.grads[k] = np.zeros(arrays[k].shape)
            continue
        if get_array_module(g) is not xp:
            run.fail(BACKWARD, f"{label}: {op.__name__}.backward returned a gradient of "
                               f"type {type(g).__name__} for an input of type "
                               f"{type(arrays[k]).__name__} (another device)")
            continue
        if not _is_array_of(g, xp):
            g = xp.asarray(g)
        if g.dtype != arrays[k].dtype:
            run.fail(GRAD_DTYPE, f"{label}: {op.__name__}.backward returned a {g.dtype} "
                                 f"gradient for a {arrays[k].dtype} input")
        try:
            g = sum_to_shape(g, arrays[k].shape)  # the engine allows broadcast-shaped grads
        except ValueError:
            run.fail(GRAD_SHAPE, f"{label}: {op.__name__}.backward returned a gradient of "
                                 f"shape {g.shape}, which is neither the input's shape "
                                 f"{arrays[k].shape} nor broadcast from it")
            continue
        run.grads[k] = host_copy(g).astype(np.float64)
    run.completed = True
    return run


# ----------------------------------------------------------------------------- orchestration
def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal up to 1e-12 of the largest magnitude (determinism, allowing for BLAS paths)."""
    if a.shape != b.shape:
        return False
    if a.size == 0:
        return True
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return False
    a, b = np.where(nan_a, 0, a), np.where(nan_b, 0, b)
    scale = max(1.0, float(np.max(np.abs(a))))
    return float(np.max(np.abs(a - b))) <= 1e-12 * scale


def _compare_runs(first: _Run, second: _Run, labels: dict, calls: str,
                  same_upstream: bool = True) -> list:
    """What differs between two runs on the same inputs; ``calls`` names them in the
    messages (``'calls 1 and 3'``). The gradients are compared too when the runs had the same
    upstream gradients (``same_upstream``); otherwise only the forward outputs are, and only
    when the second run's forward completed (a forward that raised is reported as such)."""
    hint = ("randomness such as dropout (seed it, or call .eval()), or state kept from an "
            "earlier call")
    if same_upstream and not second.completed:
        return [f"of the identical {calls}, the second did not complete"]
    if FORWARD in second.problems:
        return []
    if len(first.outputs) != len(second.outputs):
        return [f"the number of outputs changed between the forward {calls}, which have the "
                f"same inputs"]
    problems = []
    for i, (a, b) in enumerate(zip(first.outputs, second.outputs)):
        if not _close(a, b):
            what = "identical forward" if same_upstream else "forward"
            problems.append(f"output {i} differs between the {what} {calls}"
                            + ("" if same_upstream else ", which have the same inputs")
                            + f" ({hint}?)")
    if not same_upstream:
        return problems
    for k, a in first.grads.items():
        b = second.grads.get(k)
        if b is None or not _close(a, b):
            problems.append(f"the gradient of {labels.get(k, f'input {k}')} differs between "
                            f"the identical backward {calls} ({hint}?)")
    return problems


def _record_runs(report: CheckReport, runs: list, names: list, completed: bool) -> None:
    """One result per contract item; when the first run stopped early (forward or backward
    raised), the items it never reached are left out rather than reported as passed."""
    for name in names:
        details = list(dict.fromkeys(d for run in runs for d in run.problems.get(name, [])))
        if details:
            report.results.append(CheckResult(name, False, "; ".join(details)))
        elif completed or name == FORWARD:
            report.results.append(CheckResult(name, True))


def _run_contract(report: CheckReport, runner: Callable[[Callable], _Run], labels: dict,
                  opts: CheckOptions) -> _Run | None:
    """Forward/backward with a random upstream gradient (call 1), a zero one (call 2), then,
    for the determinism check, the random one twice more (calls 3 and 4), and record the
    contract items. Returns the first run, or None when it did not complete.

    Every call runs forward on the same inputs, so the determinism check compares the
    forward outputs of calls 2, 3 and 4 with those of call 1, and the gradients of calls 3
    and 4 (the same upstream gradient) with those of call 1. What that catches of a result
    that depends on how many calls came before it (a counter, a cache, state left by the
    previous call):

    * in forward: any such dependence that shows within calls 1 to 4, which is every
      period from 2 to 4 (a period p repeats call 1's result first at call p + 1, so the
      calls between differ from it somewhere); a longer period, or a change that starts
      after call 4, is not seen;
    * in backward alone: a change on call 3 or 4, so every period 2 and every change that
      reaches call 3 or 4; a backward that differs only on call 2 (say on calls 2, 5, 8,
      ...) is not seen, since the zero upstream gradient of call 2 gives zero whatever
      backward's state (the gradient check may still catch it)."""
    rng = np.random.default_rng(opts.seed)
    first = runner(lambda shapes: [rng.standard_normal(s) for s in shapes])
    runs = [first]
    repeats: list = []
    if first.completed:
        zero = runner(lambda shapes: [np.zeros(s) for s in shapes])
        runs.append(zero)
        if zero.completed:
            for k, g in zero.grads.items():
                if not np.all(g == 0):
                    what = "has NaN" if np.isnan(g).any() else f"max |g| {np.abs(g).max():.3g}"
                    zero.fail(ZERO_UPSTREAM,
                              f"{labels.get(k, f'input {k}')}: gradient {what} for an "
                              f"all-zero upstream gradient (a VJP must be linear in grad_out)")
        if opts.check_determinism:
            repeats.append(_compare_runs(first, zero, labels, "calls 1 and 2",
                                         same_upstream=False))

            def same_upstream(shapes: list) -> list:
                if [tuple(s) for s in shapes] != [g.shape for g in first.upstream]:
                    return [np.zeros(s) for s in shapes]  # shapes changed: reported below
                return [g.copy() for g in first.upstream]

            third = runner(same_upstream)
            repeats.append(_compare_runs(first, third, labels, "calls 1 and 3"))
            if third.completed:
                fourth = runner(same_upstream)
                repeats.append(_compare_runs(first, fourth, labels, "calls 1 and 4"))
                runs.append(fourth)
            runs.append(third)
    _record_runs(report, runs, _ORDER[:8], first.completed)
    if repeats:
        problems = [p for pair in repeats for p in pair]
        report.results.append(CheckResult(DETERMINISTIC, not problems, "; ".join(problems)))
    return first if first.completed else None


def _choose_mode(opts: CheckOptions, n_in: int, n_out: int) -> str:
    if opts.mode != "auto":
        return opts.mode
    small = n_in <= opts.max_full_size and n_out <= opts.max_full_size
    return "full" if small else "directional"


def _run_gradcheck(report: CheckReport, fn: Callable, args: list, diff: list, labels: dict,
                   opts: CheckOptions, n_out: int) -> None:
    n_in = sum(args[k].numel() for k in diff)
    mode = _choose_mode(opts, n_in, n_out)
    name = f"{GRADCHECK} ({mode})"
    try:
        result = check_leaves(fn, args, diff, labels, eps=opts.eps, atol=opts.atol,
                              rtol=opts.rtol, mode=mode, n_directions=opts.n_directions,
                              seed=opts.seed, raise_exception=False)
    except Exception as exc:  # noqa: BLE001
        report.results.append(CheckResult(name, False, f"raised {_describe(exc)}"))
        return
    report.gradcheck = result
    if result.passed:
        detail = (f"{result.entries} {'entries' if mode == 'full' else 'directions'}, "
                  f"max abs error {result.max_abs_error:.2g}")
        report.results.append(CheckResult(name, True, detail))
        return
    where = (f"{result.label}, element {result.element}, output {result.output_index} "
             f"element {result.output_element}" if mode == "full" else
             f"direction {result.direction}, traced to {result.label}")
    report.results.append(CheckResult(
        name, False,
        f"wrong gradient at {where}: analytic {result.analytic:.10g}, numeric "
        f"{result.numeric:.10g}, abs error {result.abs_error:.3g}, rel error "
        f"{result.rel_error:.3g} (atol {opts.atol:g}, rtol {opts.rtol:g})"))


def _finish(report: CheckReport, opts: CheckOptions) -> CheckReport:
    if not report.passed and opts.raise_exception:
        raise CheckFailure(report)
    return report


def _name_of(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or \
        type(obj).__name__


def _copy_arg(x: Any) -> Any:
    """A fresh copy of a Tensor (keeping requires_grad and device) or array; anything else
    as is."""
    if isinstance(x, Tensor):
        xp = get_array_module(x._data)
        return Tensor(xp.array(x._data, copy=True, order="C"), requires_grad=x.requires_grad)
    if _array_of(x) is not None:
        return x.copy()
    return x


def _snapshot_caller(objs: Sequence[Any]) -> list:
    """(object, copy of its values, its .grad, copy of the .grad) for each Tensor, and
    (array, copy, None, None) for each array, of ``objs``; anything else is not watched."""
    snaps = []
    for x in objs:
        if isinstance(x, Tensor):
            grad = None if x._grad is None else host_copy(x._grad)
            snaps.append((x, host_copy(x._data), x._grad, grad))
        elif _array_of(x) is not None:
            snaps.append((x, host_copy(x), None, None))
    return snaps


def _caller_untouched(report: CheckReport, snaps: list, what: str) -> None:
    problems = []
    for obj, data, grad_ref, grad in snaps:
        if not isinstance(obj, Tensor):
            if not _same(host_copy(obj), data):
                problems.append(f"the values of a {what} changed")
            continue
        if not _same(host_copy(obj._data), data):
            problems.append(f"the values of a {what} changed")
        if obj._grad is not grad_ref or (grad is not None and
                                        not _same(host_copy(obj._grad), grad)):
            problems.append(f"the .grad of a {what} changed")
    report.results.append(CheckResult(ORIGINAL_UNCHANGED, not problems,
                                      "; ".join(dict.fromkeys(problems))))


# ----------------------------------------------------------------------------- public checkers
def check_function(fn: Callable[..., Any], *inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
                   rtol: float = 1e-3, mode: str = "auto", max_full_size: int = 64,
                   n_directions: int = 8, seed: int = 0, check_determinism: bool = True,
                   raise_exception: bool = True) -> CheckReport:
    """Check the gradients of ``fn(*inputs)`` the way every built-in op is checked.

    Runs, on copies of the inputs:

    1. forward and backward with a random upstream gradient: the forward must return
       Tensors, floating-point outputs must stay float64; backward must run; every
       gradient has its input's shape and dtype; neither the inputs nor the upstream
       gradients are modified in place;
    2. backward with an all-zero upstream gradient: every gradient must be exactly zero
       (a VJP is linear in ``grad_out``);
    3. the first run twice more, once after the zero run and once right after that:
       outputs and gradients must equal the first run's (determinism, and no dependence
       on earlier calls);
    4. a float64 :func:`~tinygrad_rnn.gradcheck`: ``'full'`` when the inputs and outputs
       are small (``max_full_size`` elements each), else ``'directional'``.

    Tensors that ``fn`` captures (a module's parameters) are used as they are; the
    ``.grad`` of each is restored after every backward pass, so a check leaves no junk
    gradients behind.

    Parameters
    ----------
    fn : callable
        Takes the inputs, returns a Tensor or a (nested) tuple of Tensors.
    *inputs
        Tensors with ``requires_grad=True`` are differentiated and must be float64; all other
        arguments (integer tensors, arrays, numbers) are passed through as constants.
    eps, atol, rtol, mode, max_full_size, n_directions, seed, check_determinism
        See :class:`CheckOptions`.
    raise_exception : bool
        Raise :class:`CheckFailure` (an ``AssertionError``) naming every failed check
        (default); otherwise return the report.

    Returns
    -------
    CheckReport
        ``report.passed``, ``report.failures``, ``report['gradient dtype']``, and the
        gradient check's report in ``report.gradcheck``.

    Raises
    ------
    CheckFailure
        When a check fails and ``raise_exception`` is True.
    TypeError
        When a differentiated input is not float64.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> w = tr.Tensor(np.array([[0.5, -0.3], [0.2, 0.8]]), requires_grad=True)
    >>> h = tr.Tensor(np.array([[0.1, -0.4]]), requires_grad=True)
    >>> report = check_function(lambda w, h: (h @ w.T).tanh(), w, h)
    >>> report.passed, report.gradcheck.mode
    (True, 'full')
    """
    opts = CheckOptions(eps=eps, atol=atol, rtol=rtol, mode=mode, max_full_size=max_full_size,
                        n_directions=n_directions, seed=seed,
                        check_determinism=check_determinism, raise_exception=raise_exception)
    target = f"check_function({_name_of(fn)})"
    diff = checked_inputs(inputs, "check_function", exactly_float64=True)
    caller = _snapshot_caller(inputs)
    labels = {k: f"input {k}" for k in range(len(inputs))}
    problem = _Problem(fn, lambda: [_copy_arg(x) for x in inputs], diff, labels)
    report = CheckReport(target)
    first = _run_contract(report, lambda up: _tensor_run(problem, up), labels, opts)
    if first is not None:
        _run_gradcheck(report, fn, problem.make_args(), diff, labels, opts,
                       sum(o.size for o in first.outputs))
    _caller_untouched(report, caller, "caller's input")
    return _finish(report, opts)


def check_op(op: type[Function], *inputs: Any, options: CheckOptions | None = None,
             **constants: Any) -> CheckReport:
    """Check a :class:`~tinygrad_rnn.Function` subclass: its raw VJP contract and gradients.

    The contract of :func:`check_function` is checked on the raw arrays, calling
    ``op.forward`` and ``op.backward`` directly: backward must return one gradient (or
    ``None``) per input, of the input's dtype, and of the input's shape or a shape the input
    broadcasts to (the engine's ``sum_to_shape`` reduces those); it must not write into
    ``grad_out``, the inputs or array-valued keyword constants (a mask); a zero ``grad_out``
    gives zero gradients; repeated runs agree. Then ``op.apply(*inputs, **constants)`` is
    gradient-checked in float64. Every run gets its own copies of the inputs and of the
    array constants, so the caller's arrays are never written.

    Parameters
    ----------
    op : type
        The Function subclass.
    *inputs
        The op's tensor inputs, as for ``op.apply``; those with ``requires_grad=True`` are
        differentiated and must be float64.
    options : CheckOptions, optional
        Tolerances, mode, seed, ``raise_exception`` (kept apart from ``**constants`` so that
        an op may have a constant named ``eps``).
    **constants
        Keyword constants of ``op.forward`` (``axis=-1``, ...).

    Returns
    -------
    CheckReport

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> x = tr.Tensor(np.array([[0.3, -1.0, 2.0]]), requires_grad=True)
    >>> check_op(tr.ops.Softmax, x, axis=-1, mask=None).passed
    True
    """
    opts = options if options is not None else CheckOptions()
    if not (isinstance(op, type) and issubclass(op, Function)):
        raise TypeError(f"check_op: expected a tinygrad_rnn.Function subclass, got {op!r}")
    target = f"check_op({op.__name__})"
    diff = checked_inputs(inputs, "check_op", exactly_float64=True)
    caller = _snapshot_caller(list(inputs) + list(constants.values()))
    labels = {k: f"input {k}" for k in range(len(inputs))}
    report = CheckReport(target)
    first = _run_contract(report, lambda up: _raw_run(op, inputs, constants, labels, up),
                          labels, opts)
    if first is not None:
        args = [_copy_arg(x) for x in inputs]
        consts = {name: _copy_arg(v) for name, v in constants.items()}
        _run_gradcheck(report, lambda *xs: op.apply(*xs, **consts), args, diff, labels,
                       opts, sum(o.size for o in first.outputs))
    _caller_untouched(report, caller, "caller's input or keyword constant")
    return _finish(report, opts)


def _unique_parameters(module: Any) -> list:
    """The tensors of ``module.named_parameters()``, each once, in order of first listing."""
    out, seen = [], set()
    for _, p in module.named_parameters():
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def _module_copy(module: Any, params: list) -> tuple[Any, list, bool]:
    """A deep copy of ``module`` with float64 copies of its parameters, and whether a copy
    was possible; falls back to the module itself when its parameters are float64."""
    try:
        clone = copy.deepcopy(module)
        cparams = _unique_parameters(clone)
        shared = len(cparams) != len(params) or any(
            c is p or get_array_module(c._data).shares_memory(c._data, p._data)
            for c, p in zip(cparams, params))
        if shared:
            raise TypeError("deepcopy shares parameters with the original")
    except Exception as exc:  # noqa: BLE001
        if all(p.dtype == np.float64 for p in params):
            return module, params, False
        raise TypeError(
            f"check_module: cannot deep-copy {type(module).__name__} ({_describe(exc)}) to "
            f"check it on float64 copies of its parameters; make its parameters float64 "
            f"yourself, then it is checked in place (values and ._grad are restored)."
        ) from exc
    for c in cparams:
        if is_float_dtype(c.dtype):
            xp = get_array_module(c._data)
            c.data = xp.array(c._data, dtype=np.float64, order="C", copy=True)
    return clone, cparams, True


def check_module(module: Any, *inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
                 rtol: float = 1e-3, mode: str = "auto", max_full_size: int = 64,
                 n_directions: int = 8, seed: int = 0, check_determinism: bool = True,
                 raise_exception: bool = True) -> CheckReport:
    """Check the gradients of a module with respect to its inputs and every parameter.

    ``module`` is anything callable as ``module(*inputs)`` with a ``named_parameters()``
    method returning ``(name, Tensor)`` pairs (a :class:`tinygrad_rnn.nn.Module`, or your
    own class). The module is deep-copied and the copy's floating-point parameters are
    converted to float64, so a float32 model can be checked and the original is never
    touched (values, dtypes and ``.grad`` stay as they were). When the module cannot be
    deep-copied, its parameters must already be float64: it is then checked in place and
    every value and ``.grad`` is restored afterwards. Float buffers that are not parameters
    are not converted: keep them float64 or non-float.

    The checks are those of :func:`check_function`, with every parameter that requires a
    gradient treated as an extra input (named ``parameter 'name'`` in messages). Dropout
    or other randomness must be off (``module.eval()``) or seeded inside ``forward``,
    otherwise the determinism check fails.

    Parameters
    ----------
    module : module-like
    *inputs
        Passed to ``module``; Tensors with ``requires_grad=True`` are also checked and must
        be float64, everything else is passed through.
    eps, atol, rtol, mode, max_full_size, n_directions, seed, check_determinism,
    raise_exception
        As in :func:`check_function`.

    Returns
    -------
    CheckReport

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> class Affine:
    ...     def __init__(self):
    ...         self.weight = tr.Tensor(np.array([[1.0, 2.0], [0.5, -1.0]], np.float32),
    ...                                 requires_grad=True)
    ...     def named_parameters(self):
    ...         return [("weight", self.weight)]
    ...     def __call__(self, x):
    ...         return (x @ self.weight.T).tanh()
    >>> m = Affine()
    >>> x = tr.Tensor(np.array([[0.2, -0.1]]))  # a constant input
    >>> check_module(m, x).passed, m.weight.dtype  # checked in float64, original untouched
    (True, dtype('float32'))
    """
    opts = CheckOptions(eps=eps, atol=atol, rtol=rtol, mode=mode, max_full_size=max_full_size,
                        n_directions=n_directions, seed=seed,
                        check_determinism=check_determinism, raise_exception=raise_exception)
    named = []
    seen: set = set()
    for pair in module.named_parameters():
        name, p = pair
        if not isinstance(p, Tensor):
            raise TypeError(f"check_module: named_parameters() gave {type(p).__name__} for "
                            f"{name!r}; expected (name, Tensor) pairs")
        if id(p) not in seen:
            seen.add(id(p))
            named.append((name, p))
    target = f"check_module({type(module).__name__})"
    input_diff = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if input_diff:
        checked_inputs(inputs, "check_module", exactly_float64=True)
    originals = [p for _, p in named]
    caller = _snapshot_caller(list(inputs) + originals)
    clone, cparams, copied = _module_copy(module, originals)

    n_in = len(inputs)
    labels = {k: f"input {k}" for k in range(n_in)}
    diff = list(input_diff)
    for j, (name, p) in enumerate(named):
        if cparams[j].requires_grad and is_float_dtype(cparams[j].dtype):
            labels[n_in + j] = f"parameter {name!r}"
            diff.append(n_in + j)
    if not diff:
        raise ValueError("check_module: neither an input nor a parameter requires a gradient")
    start = [c._data.copy() for c in cparams]
    saved_grads = [c.grad for c in cparams]

    def make_args() -> list:
        for c, s in zip(cparams, start):
            c._data[...] = s  # in place: the module keeps seeing the same arrays
            c.grad = None
        return [_copy_arg(x) for x in inputs] + list(cparams)

    def fn(*args: Any) -> Any:
        return clone(*args[:n_in])

    report = CheckReport(target)
    problem = _Problem(fn, make_args, diff, labels)
    try:
        first = _run_contract(report, lambda up: _tensor_run(problem, up), labels, opts)
        if first is not None:
            _run_gradcheck(report, fn, make_args(), diff, labels, opts,
                           sum(o.size for o in first.outputs))
    finally:
        if not copied:  # checked in place: restore values and gradients
            for c, s, g in zip(cparams, start, saved_grads):
                c._data[...] = s
                c.grad = g
    _caller_untouched(report, caller, "caller's input or module parameter")
    return _finish(report, opts)


def _worst_element(got: np.ndarray, want: np.ndarray, atol: float,
                   rtol: float) -> tuple[tuple | None, float]:
    """The multi-index of the element of ``got`` furthest out of ``atol + rtol |want|``
    (None when every element is within it) and the largest ``|got - want|``. A NaN on
    either side counts as an infinite error: it never passes, and it is the element
    reported."""
    if got.size == 0:
        return None, 0.0
    err = np.abs(got - want)
    excess = err - (atol + rtol * np.abs(want))
    err = np.where(np.isnan(err), np.inf, err)
    excess = np.where(np.isnan(excess), np.inf, excess)
    k = int(np.argmax(excess))
    if not excess.flat[k] > 0:
        return None, float(err.max())
    return tuple(int(v) for v in np.unravel_index(k, got.shape)), float(err.max())


def check_jacobian(fn_or_op: Any, jacobian_fn: Callable[[np.ndarray], Any], x: Any, *,
                   at: str = "output", n_vectors: int = 4, seed: int = 0, atol: float = 1e-10,
                   rtol: float = 1e-8, check_numeric: bool = True, eps: float = 1e-6,
                   numeric_atol: float = 1e-5, numeric_rtol: float = 1e-3,
                   raise_exception: bool = True) -> CheckReport:
    """Check a hand-written Jacobian against a backward pass: ``backward(g) == J^T g``.

    Parameters
    ----------
    fn_or_op : Function subclass or callable
        ``y = fn_or_op.apply(x)`` or ``y = fn_or_op(x)``, one Tensor in, one Tensor out.
    jacobian_fn : callable
        Returns the Jacobian as an array, either the full ``y.shape + x.shape`` array
        (``J[i..., j...] = dy_i / dx_j``) or, for a map acting on the last axis independently
        per row (softmax, elementwise ops), the batched ``(..., n_out, n_in)`` form of
        :mod:`tinygrad_rnn.explicit_jacobians`.
    x : Tensor or ndarray
        The point; float64.
    at : {'output', 'input'}
        Call ``jacobian_fn(y)`` (the convention of :mod:`tinygrad_rnn.explicit_jacobians`, whose
        Jacobians are written in the op's output) or ``jacobian_fn(x)``.
    n_vectors : int
        Number of random upstream gradients g (and directions u).
    atol, rtol : float
        Tolerance of ``backward(g)`` against ``J^T g``: both are exact formulas, so only
        round-off separates them.
    check_numeric : bool
        Also compare ``J u`` with the central difference ``(f(x + eps u) - f(x - eps u)) /
        (2 eps)`` (tolerances ``numeric_atol``, ``numeric_rtol``): a Jacobian and a backward
        that are wrong in the same way still fail.
    raise_exception : bool

    Returns
    -------
    CheckReport

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> x = np.array([[0.5, -1.0, 2.0], [0.1, 0.2, -0.3]])
    >>> check_jacobian(tr.ops.Tanh, tr.explicit_jacobians.tanh, x).passed
    True
    """
    if at not in ("output", "input"):
        raise ValueError(f"check_jacobian: at must be 'output' or 'input', got {at!r}")
    x_arr = x._data if isinstance(x, Tensor) else get_array_module(x).asarray(x)
    xp = get_array_module(x_arr)
    if x_arr.dtype != np.float64:
        raise TypeError(f"check_jacobian: x has dtype {x_arr.dtype}; use float64 (round-off "
                        f"in lower precision would hide or fake a mismatch)")
    if isinstance(fn_or_op, type) and issubclass(fn_or_op, Function):
        fn = fn_or_op.apply
    else:
        fn = fn_or_op
    report = CheckReport(f"check_jacobian({_name_of(fn_or_op)}, {_name_of(jacobian_fn)})")
    opts = CheckOptions(raise_exception=raise_exception)
    leaf = Tensor(x_arr, requires_grad=True)  # a copy, on x's device
    y = fn(leaf)
    if not isinstance(y, Tensor):
        raise TypeError(f"check_jacobian: fn must return one Tensor, got {type(y).__name__}")
    # the Jacobian is built on x's device (from a copy), then compared on the host
    point = (y._data if at == "output" else x_arr).copy()
    jac = host_copy(jacobian_fn(point)).astype(np.float64)
    y_arr = host_copy(y._data)
    xs, ys = tuple(x_arr.shape), tuple(y_arr.shape)
    if jac.shape == ys + xs:
        form = "full"
    elif x_arr.ndim >= 1 and y_arr.ndim >= 1 and xs[:-1] == ys[:-1] and \
            jac.shape == ys + (xs[-1],):
        form = "batched"
    else:
        report.results.append(CheckResult(
            "jacobian shape", False,
            f"got {jac.shape}; expected y.shape + x.shape = {ys + xs}" +
            (f" or the batched {ys + (xs[-1],)}" if x_arr.ndim and y_arr.ndim else "")))
        return _finish(report, opts)
    report.results.append(CheckResult("jacobian shape", True, f"{form} form {jac.shape}"))

    def jt_g(g: np.ndarray) -> np.ndarray:
        if form == "full":
            return np.tensordot(g, jac, axes=(list(range(g.ndim)), list(range(g.ndim))))
        return np.einsum("...i,...ij->...j", g, jac)

    def j_u(u: np.ndarray) -> np.ndarray:
        if form == "full":
            return np.tensordot(jac, u, axes=(list(range(len(ys), jac.ndim)),
                                              list(range(u.ndim))))
        return np.einsum("...ij,...j->...i", jac, u)

    rng = np.random.default_rng(seed)
    worst, problem = 0.0, ""
    with grads_preserved([y]):  # tensors fn captures get their .grad back
        for _ in range(n_vectors):
            g = rng.standard_normal(ys)
            leaf.grad = None
            try:
                if y.requires_grad:
                    y.backward(g.copy(), retain_graph=True)
            except Exception as exc:  # noqa: BLE001 - reported as the failure
                problem = f"backward raised {_describe(exc)}"
                break
            got = np.zeros(xs) if leaf._grad is None else host_copy(leaf._grad)
            want = jt_g(g)
            i, err = _worst_element(got, want, atol, rtol)
            if i is not None:
                worst = max(worst, err)
                problem = (f"backward(g) != J^T g at element {i}: backward {got[i]:.12g}, "
                           f"J^T g {want[i]:.12g}")
            elif got.size:
                worst = max(worst, err)
    report.results.append(CheckResult("backward(g) == J^T g", not problem,
                                      problem or f"max abs difference {worst:.2g}"))
    if check_numeric:
        worst, problem = 0.0, ""
        for _ in range(n_vectors):
            u = rng.standard_normal(xs)
            with no_grad():
                step = xp.asarray(eps * u)  # the same array on the CPU
                plus = host_copy(fn(Tensor(x_arr + step))._data)
                minus = host_copy(fn(Tensor(x_arr - step))._data)
            numeric = (plus - minus) / (2 * eps)
            want = j_u(u)
            i, err = _worst_element(want, numeric, numeric_atol, numeric_rtol)
            if i is not None:
                problem = (f"J u != finite difference at output element {i}: J u "
                           f"{want[i]:.10g}, numeric {numeric[i]:.10g}")
            if want.size:
                worst = max(worst, err)
        report.results.append(CheckResult("J u == finite difference", not problem,
                                          problem or f"max abs difference {worst:.2g}"))
    return _finish(report, opts)
