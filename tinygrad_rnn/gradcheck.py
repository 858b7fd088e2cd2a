"""Gradient checking by central differences, in float64.

The derivation behind every choice here (step size, tolerances, float64, directional checks)
is in ``docs/gradcheck.md``; equation numbers below refer to that page.

Why float64: a central difference (f(x + eps) - f(x - eps)) / (2 eps) has truncation error
O(eps^2) and round-off error about u |f| / eps (u the unit round-off), eq. (3). In float64
(u = 1.1e-16) eps = 1e-6 makes both about 1e-10 |f|; in float32 (u = 6e-8) the round-off
alone is about 0.06 |f| at that eps, and the best eps (about u^(1/3) = 4e-3) still leaves
errors near 1e-5 |f|, so float32 inputs are refused. Check float32 code by comparing its result
with the float64 result instead.

Two modes:

* ``mode='full'``: the whole Jacobian, column by column by finite differences (two
  evaluations per input element) and row by row by reverse mode (one backward per output
  element); every entry compared.
* ``mode='directional'``: for large inputs, random unit directions u (over all inputs at once)
  and a random output weighting v: the numeric (v^T f(x + eps u) - v^T f(x - eps u)) / (2 eps)
  against the analytic sum_k <dL/dx_k, u_k> with L = v^T f. Costs two evaluations and one
  backward per direction. On a failure, the failing direction is re-tried one input at a time
  to name the input whose gradient is wrong.

An entry passes when ``|analytic - numeric| <= atol + rtol * |numeric|`` (eq. 6).

Devices: the inputs may live on any device. ``fn`` and the backward passes run there (the
perturbations are written into the device arrays, random directions are drawn on the host
and copied over); outputs and gradients are then copied to the host explicitly, so the
comparison and the report are the same NumPy code on every device.

Outputs may be a Tensor or a (nested) tuple/list of Tensors; ``None`` entries and integer or
boolean outputs (indices, masks) carry no gradient and are skipped. Checked inputs and
floating-point outputs must be at least as precise as float64 (float64, or the platform's
extended ``longdouble``): finite differences of a float32 output are as meaningless as of a
float32 input.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence, overload

import numpy as np

from .backend import get_array_module, is_float_dtype, to_device
from .engine import no_grad, node_inputs
from .tensor import Tensor

__all__ = ["gradcheck", "GradcheckError", "GradcheckReport"]

_MODES = ("full", "directional")


class GradcheckError(AssertionError):
    """Raised by :func:`gradcheck` on a mismatch; ``.report`` holds the details."""

    def __init__(self, message: str, report: "GradcheckReport") -> None:
        super().__init__(message)
        self.report = report


@dataclass
class GradcheckReport:
    """Result of a check: the worst entry and the maximal errors.

    Attributes
    ----------
    passed : bool
        True when every compared entry (or direction) is within tolerance.
    mode : str
        ``'full'`` or ``'directional'``.
    max_abs_error : float
        Largest ``|analytic - numeric|`` over all compared entries (or directions).
    max_rel_error : float
        Largest ``|analytic - numeric| / |numeric|`` over the entries whose ``|numeric|``
        exceeds ``atol`` (a relative error is meaningless for near-zero derivatives).
    input_index : int
        Full mode: index (into ``inputs``) of the input of the worst entry, the one closest
        to (or furthest past) its tolerance. Directional mode: the input a failing direction
        was traced to, -1 when every direction passed.
    output_index : int
        Index of the output tensor (in the flattened outputs) of the worst entry; -1 in
        directional mode.
    element : tuple
        Multi-index of the worst entry inside that input (full mode); ``()`` otherwise.
    output_element : tuple
        Multi-index of the worst entry inside that output (full mode); ``()`` otherwise.
    analytic, numeric : float
        The worst entry's reverse-mode and finite-difference values (in directional mode the
        two values of v^T J u for the worst direction).
    entries : int
        Number of Jacobian entries (full) or directions (directional) compared.
    direction : int
        Directional mode: index of the worst direction; -1 in full mode.
    label : str
        Human-readable name of ``input_index`` (``'input 1'``, or a parameter name when the
        check was run by :func:`tinygrad_rnn.testing.check_module`).
    """

    passed: bool
    mode: str
    max_abs_error: float
    max_rel_error: float
    input_index: int = -1
    output_index: int = -1
    element: tuple = ()
    analytic: float = 0.0
    numeric: float = 0.0
    entries: int = 0
    direction: int = -1
    label: str = ""
    output_element: tuple = ()

    @property
    def abs_error(self) -> float:
        """``|analytic - numeric|`` of the worst entry."""
        return abs(self.analytic - self.numeric)

    @property
    def rel_error(self) -> float:
        """``|analytic - numeric| / |numeric|`` of the worst entry (inf when numeric is 0)."""
        if self.numeric == 0:
            return 0.0 if self.abs_error == 0 else float("inf")
        return self.abs_error / abs(self.numeric)


# ----------------------------------------------------------------------------- helpers
def host_copy(a: Any, dtype: Any = None) -> np.ndarray:
    """A NumPy copy of a backend array in ``dtype`` (by default its own): device arrays are
    copied to the host explicitly. The checks here and in :mod:`tinygrad_rnn.testing`
    compare host copies, so they run on every device."""
    return np.array(to_device(a, "cpu"), dtype=dtype, copy=True)


def flatten_outputs(out: Any) -> list:
    """The Tensors in ``out`` (a Tensor or a nested tuple/list of them), depth first.

    ``None`` entries are dropped; anything else that is not a Tensor raises ``TypeError``.
    """
    flat: list = []
    stack = [out]
    while stack:
        item = stack.pop()
        if item is None:
            continue
        if isinstance(item, Tensor):
            flat.append(item)
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        else:
            raise TypeError(
                f"gradcheck: fn must return a Tensor or a (nested) tuple/list of Tensors, "
                f"got an element of type {type(item).__name__}"
            )
    return flat


def graph_tensors(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor whose ``.grad`` a backward pass from ``outputs`` may write: the leaves
    that require a gradient (inputs, and parameters that ``fn`` captures) and the
    intermediate tensors that called ``retain_grad()``. An iterative walk of the graph
    (unrolled recurrences are deeper than Python's recursion limit)."""
    found: dict[int, Tensor] = {}
    stack = []
    for o in outputs:
        if o.grad_fn is None:
            if o.requires_grad:
                found[id(o)] = o
        else:
            stack.append(o.grad_fn)
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen or node.released:  # a freed node keeps no inputs
            continue
        seen.add(id(node))
        for ref in (node.out_retain or {}).values():
            t = ref()
            if t is not None:
                found[id(t)] = t
        for t in node_inputs(node):
            if t.grad_fn is not None:
                stack.append(t.grad_fn)
            elif t.requires_grad:
                found[id(t)] = t
    return list(found.values())


@contextmanager
def grads_preserved(outputs: Sequence[Tensor]) -> Iterator[None]:
    """On leaving the block (normally or by an exception), give every tensor of
    :func:`graph_tensors` back the ``.grad`` it had on entering: the backward passes a
    check runs inside the block leave no trace. Read the gradients you need inside the
    block. Restoring the reference is enough: the engine never writes into an existing
    ``.grad`` array, it replaces it."""
    saved = [(t, t.grad) for t in graph_tensors(outputs)]
    try:
        yield
    finally:
        for t, g in saved:
            t.grad = g


def _below_float64(dtype: Any) -> bool:
    """True for float dtypes less precise than float64 (float16, float32)."""
    return np.finfo(dtype).eps > np.finfo(np.float64).eps


def _float_outputs(fn: Callable, args: Sequence[Any]) -> list:
    """Run ``fn`` and return its floating-point outputs (those that can carry a gradient)."""
    outs = [o for o in flatten_outputs(fn(*args)) if is_float_dtype(o.dtype)]
    for i, o in enumerate(outs):
        if _below_float64(o.dtype):
            raise TypeError(
                f"gradcheck: floating-point output {i} has dtype {o.dtype} although every "
                f"checked input is float64; finite differences of a {o.dtype} output are "
                f"swamped by its round-off, so the check would be meaningless. Make fn keep "
                f"float64 (an op must not change the dtype of its inputs)."
            )
    return outs


def refuse_low_precision(where: str, k: int, x: Tensor, exactly_float64: bool = False) -> None:
    """A TypeError when input ``k`` of the check ``where`` has a float dtype less precise
    than float64 (the message says why finite differences there are meaningless), or, with
    ``exactly_float64``, any dtype but float64 (the checkers of :mod:`tinygrad_rnn.testing`
    compare gradient dtypes with float64 runs)."""
    if _below_float64(x.dtype):
        u = float(np.finfo(x.dtype).eps) / 2  # unit round-off of the input's dtype
        raise TypeError(
            f"{where}: input {k} has dtype {x.dtype}; finite differences need float64. In "
            f"{x.dtype} (unit round-off u = {u:.2g}) the round-off error of a central "
            f"difference at eps=1e-6 is about u/eps = {u / 1e-6:.2g} |f|, and even the best "
            f"step (eps ~ u^(1/3) = {u ** (1 / 3):.2g}) leaves errors near u^(2/3) = "
            f"{u ** (2 / 3):.2g} |f|, so the check would be meaningless. Convert with "
            f".double(), and check {x.dtype} code against the float64 result instead."
        )
    if exactly_float64 and x.dtype != np.float64:
        raise TypeError(f"{where}: input {k} has dtype {x.dtype}; this check runs in float64 "
                        f"exactly. Convert with .double().")


def checked_inputs(inputs: Sequence[Any], where: str, exactly_float64: bool = False) -> list:
    """The positions of the Tensors in ``inputs`` that require a gradient (the ones a check
    perturbs), each refused by :func:`refuse_low_precision` when its dtype cannot be
    checked; a ValueError when there is none."""
    diff = []
    for k, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad:
            refuse_low_precision(where, k, x, exactly_float64)
            diff.append(k)
    if not diff:
        raise ValueError(f"{where}: no input requires a gradient (nothing to check)")
    return diff


def _prepare(inputs: Any) -> tuple[list, list[int]]:
    """Copy the inputs that require a gradient into fresh float64 leaves."""
    seq = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    diff = checked_inputs(seq, "gradcheck")
    args = list(seq)
    for k in diff:
        xp = get_array_module(seq[k]._data)
        args[k] = Tensor(xp.array(seq[k]._data, copy=True, order="C"), requires_grad=True)
    return args, diff


def _check_settings(mode: str, eps: Any, atol: Any, rtol: Any, n_directions: Any) -> None:
    if mode not in _MODES:
        raise ValueError(f"gradcheck: mode must be 'full' or 'directional', got {mode!r}")
    check_settings("gradcheck", eps, atol, rtol, n_directions)


def check_settings(where: str, eps: Any, atol: Any, rtol: Any, n_directions: Any) -> None:
    """Refuse numeric settings that would make a check meaningless, naming ``where`` (the
    caller) and the offending value: a step ``eps`` that is not a positive number, negative
    or NaN tolerances (no entry could pass, or every one would), a number of directions
    that is not a positive integer."""
    _positive_number(where, "eps", eps, allow_zero=False)
    _positive_number(where, "atol", atol, allow_zero=True)
    _positive_number(where, "rtol", rtol, allow_zero=True)
    if isinstance(n_directions, bool) or not isinstance(n_directions, (int, np.integer)):
        raise TypeError(f"{where}: n_directions must be an integer, got "
                        f"{type(n_directions).__name__} {n_directions!r}")
    if n_directions < 1:
        raise ValueError(f"{where}: n_directions must be at least 1, got {n_directions}")


def _check_call(where: str, fn: Any, seed: Any, raise_exception: Any) -> None:
    """``fn`` callable, ``seed`` an integer (a seed for numpy.random.default_rng), and
    ``raise_exception`` a bool (``'no'`` would be truthy); errors name ``where``."""
    if not callable(fn):
        raise TypeError(f"{where}: fn must be a callable returning a Tensor, got "
                        f"{type(fn).__name__}")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{where}: seed must be an integer, got {type(seed).__name__} "
                        f"{seed!r}")
    if not isinstance(raise_exception, (bool, np.bool_)):
        raise TypeError(f"{where}: raise_exception must be True or False, got "
                        f"{type(raise_exception).__name__} {raise_exception!r}")


def _positive_number(where: str, name: str, value: Any, allow_zero: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: {name} must be a real number, got "
                        f"{type(value).__name__} {value!r}")
    ok = value >= 0 if allow_zero else value > 0  # False for NaN
    if not ok:
        bound = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{where}: {name} must be {bound}, got {value}")


# ----------------------------------------------------------------------------- public entry
# for type checkers: True (or an exception) by default, the report with raise_exception=False
@overload
def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = ..., atol: float = ...,
              rtol: float = ..., mode: str = ..., n_directions: int = ..., seed: int = ...,
              raise_exception: Literal[True] = ...) -> bool: ...
@overload
def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = ..., atol: float = ...,
              rtol: float = ..., mode: str = ..., n_directions: int = ..., seed: int = ...,
              *, raise_exception: Literal[False]) -> GradcheckReport: ...
@overload
def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = ..., atol: float = ...,
              rtol: float = ..., mode: str = ..., n_directions: int = ..., seed: int = ...,
              raise_exception: bool = ...) -> bool | GradcheckReport: ...


def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, mode: str = "full", n_directions: int = 8,
              seed: int = 0, raise_exception: bool = True) -> bool | GradcheckReport:
    """Compare the gradients of ``fn`` at ``inputs`` with central differences.

    Parameters
    ----------
    fn : callable
        Takes the inputs (in order), returns a Tensor or a (nested) tuple/list of Tensors.
    inputs : Tensor or sequence
        Tensors with ``requires_grad=True`` are checked and must be float64 (lower precision
        raises ``TypeError`` explaining why; ``longdouble`` is accepted too); anything else
        (constants, integer tensors, NumPy arrays) is passed through unchanged. The checked
        tensors are copied: the caller's tensors and their ``.grad`` are never touched.
        Tensors that ``fn`` captures (a module's parameters) get the backward passes'
        gradients too; their ``.grad`` is restored after every backward pass, also when the
        check fails or raises, so an optimizer step after a check sees the old gradients.
    eps : float
        Finite-difference step; 1e-6 is near the optimum u^(1/3) for float64.
    atol, rtol : float
        An entry passes when ``|analytic - numeric| <= atol + rtol * |numeric|``; both
        non-negative.
    mode : {'full', 'directional'}
        ``'full'`` compares every Jacobian entry (2 evaluations per input element, 1 backward
        per output element); ``'directional'`` compares ``n_directions`` random projections
        v^T J u (2 evaluations and 1 backward each), for large inputs.
    n_directions : int
        Number of random directions in directional mode (a positive integer).
    seed : int
        Seed of the random directions and output weights (directional mode).
    raise_exception : bool
        On failure raise :class:`GradcheckError` naming the input, element, output, analytic
        and numeric values and both errors; otherwise return the report.

    Returns
    -------
    bool or GradcheckReport
        ``True`` when every entry passes and ``raise_exception`` is True; the
        :class:`GradcheckReport` when ``raise_exception`` is False (pass or fail).

    Raises
    ------
    GradcheckError
        (a subclass of ``AssertionError``) when a gradient is wrong and ``raise_exception``.
    TypeError
        When a checked input or a floating-point output is less precise than float64.
    ValueError
        When no input requires a gradient, for an unknown ``mode``, a non-positive ``eps``,
        a negative ``atol`` or ``rtol``, or ``n_directions`` below 1 (``TypeError`` when it
        is not an integer).

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> x = tr.Tensor(np.array([0.3, -1.2]), requires_grad=True)
    >>> tr.gradcheck(lambda t: (t * t).tanh(), x)
    True
    """
    _check_settings(mode, eps, atol, rtol, n_directions)
    _check_call("gradcheck", fn, seed, raise_exception)
    args, diff = _prepare(inputs)
    labels = {k: f"input {k}" for k in diff}
    return check_leaves(fn, args, diff, labels, eps=eps, atol=atol, rtol=rtol, mode=mode,
                        n_directions=n_directions, seed=seed, raise_exception=raise_exception)


@overload
def check_leaves(fn: Callable[..., Any], args: list, diff: list[int], labels: dict,
                 eps: float = ..., atol: float = ..., rtol: float = ..., mode: str = ...,
                 n_directions: int = ..., seed: int = ...,
                 raise_exception: Literal[True] = ...) -> bool: ...
@overload
def check_leaves(fn: Callable[..., Any], args: list, diff: list[int], labels: dict,
                 eps: float = ..., atol: float = ..., rtol: float = ..., mode: str = ...,
                 n_directions: int = ..., seed: int = ...,
                 *, raise_exception: Literal[False]) -> GradcheckReport: ...
@overload
def check_leaves(fn: Callable[..., Any], args: list, diff: list[int], labels: dict,
                 eps: float = ..., atol: float = ..., rtol: float = ..., mode: str = ...,
                 n_directions: int = ..., seed: int = ...,
                 raise_exception: bool = ...) -> bool | GradcheckReport: ...


def check_leaves(fn: Callable[..., Any], args: list, diff: list[int], labels: dict,
                 eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
                 mode: str = "full", n_directions: int = 8, seed: int = 0,
                 raise_exception: bool = True) -> bool | GradcheckReport:
    """The check itself, on leaves the caller owns (used by :mod:`tinygrad_rnn.testing`).

    ``args[k]`` for ``k`` in ``diff`` must be float64 leaf Tensors that ``fn(*args)`` uses
    (directly or, for a module, through its parameters); they are perturbed in place and
    restored exactly. The ``.grad`` of every tensor the outputs depend on, these leaves
    included, is restored after each backward pass (:func:`grads_preserved`). ``labels[k]``
    names ``args[k]`` in messages. Most users want :func:`gradcheck`, which copies the
    inputs first.
    """
    _check_settings(mode, eps, atol, rtol, n_directions)
    for k in diff:
        refuse_low_precision("gradcheck", k, args[k])
    if mode == "full":
        report = _check_full(fn, args, diff, eps, atol, rtol)
    else:
        report = _check_directional(fn, args, diff, eps, atol, rtol, n_directions, seed)
    if report.input_index >= 0:
        report.label = labels.get(report.input_index, f"input {report.input_index}")
    if not report.passed:
        if raise_exception:
            raise GradcheckError(_failure_message(report, atol, rtol, n_directions), report)
        return report
    return True if raise_exception else report


def _failure_message(r: GradcheckReport, atol: float, rtol: float, n_directions: int) -> str:
    allowed = atol + rtol * abs(r.numeric)
    values = (
        f"analytic {r.analytic:.10g}, numeric {r.numeric:.10g}, abs error {r.abs_error:.3g}, "
        f"rel error {r.rel_error:.3g} (allowed abs error atol + rtol*|numeric| = {allowed:.3g} "
        f"with atol={atol:g}, rtol={rtol:g})"
    )
    if r.mode == "full":
        return (
            f"gradcheck failed (full) at {r.label}, element {r.element}, output "
            f"{r.output_index} element {r.output_element}: d output {r.output_index}"
            f"{list(r.output_element)} / d {r.label}{list(r.element)}: "
            f"{values}. Max abs error over all {r.entries} entries: {r.max_abs_error:.3g}."
        )
    where = f"; traced to {r.label}" if r.label else ""
    return (
        f"gradcheck failed (directional) in direction {r.direction} of {n_directions}: "
        f"v^T J u {values}{where}. Max abs error over the directions: {r.max_abs_error:.3g}."
    )


# ----------------------------------------------------------------------------- full mode
def _numeric_outputs(fn: Callable, args: list) -> list:
    with no_grad():
        return [host_copy(o._data, np.float64) for o in _float_outputs(fn, args)]


def _check_full(fn: Callable, args: list, diff: list[int], eps: float, atol: float,
                rtol: float) -> GradcheckReport:
    outs = _float_outputs(fn, args)
    # analytic[oi][j]: the (out.size, in.size) block of the Jacobian, by reverse mode
    analytic = []
    analytic_shapes = [o.shape for o in outs]
    for o in outs:
        per_in = [np.zeros((o.numel(), args[k].numel())) for k in diff]
        if o.requires_grad:
            xp = get_array_module(o._data)
            with grads_preserved([o]):
                for i in range(o.numel()):
                    for k in diff:
                        args[k].grad = None
                    onehot = xp.zeros(o.numel(), dtype=o.dtype)
                    onehot[i] = 1
                    o.backward(onehot.reshape(o.shape), retain_graph=True)
                    for j, k in enumerate(diff):
                        if args[k]._grad is not None:
                            per_in[j][i] = host_copy(args[k]._grad, np.float64).ravel()
        analytic.append(per_in)
    del outs

    worst = GradcheckReport(True, "full", 0.0, 0.0)
    worst_excess = -np.inf
    for j, k in enumerate(diff):
        x = args[k]._data
        for e in range(x.size):
            idx = np.unravel_index(e, x.shape)
            orig = x[idx].copy()
            x[idx] = orig + eps
            plus = _numeric_outputs(fn, args)
            x[idx] = orig - eps
            minus = _numeric_outputs(fn, args)
            x[idx] = orig  # restored exactly
            for oi, (p, m) in enumerate(zip(plus, minus)):
                num = ((p - m) / (2 * eps)).ravel()
                if num.size == 0:
                    continue
                ana = analytic[oi][j][:, e]
                err = np.abs(ana - num)
                worst.entries += num.size
                err = np.where(np.isnan(err), np.inf, err)  # a NaN never passes
                worst.max_abs_error = max(worst.max_abs_error, float(err.max()))
                big = np.abs(num) > atol
                if big.any():
                    rel = err[big] / np.abs(num[big])
                    worst.max_rel_error = max(worst.max_rel_error, float(rel.max()))
                excess = err - (atol + rtol * np.abs(num))
                excess = np.where(np.isnan(excess), np.inf, excess)
                i = int(np.argmax(excess))
                if excess[i] > worst_excess:
                    worst_excess = float(excess[i])
                    worst.input_index, worst.output_index = k, oi
                    worst.element = tuple(int(v) for v in idx)
                    worst.output_element = tuple(
                        int(v) for v in np.unravel_index(i, analytic_shapes[oi]))
                    worst.analytic, worst.numeric = float(ana[i]), float(num[i])
    worst.passed = bool(worst_excess <= 0)
    return worst


# ----------------------------------------------------------------------------- directional
def _vjp_dot(fn: Callable, args: list, diff: list[int], vs: list, us: list) -> list[float]:
    """Per checked input k: the analytic <dL/dx_k, u_k> with L = sum_o <v_o, out_o>."""
    outs = _float_outputs(fn, args)
    dots = []
    with grads_preserved(outs):
        for k in diff:
            args[k].grad = None
        for o, v in zip(outs, vs):
            if o.requires_grad:
                xp = get_array_module(o._data)
                o.backward(xp.asarray(v), retain_graph=True)
        for k, u in zip(diff, us):
            g = args[k]._grad
            dots.append(0.0 if g is None else float((host_copy(g, np.float64) * u).sum()))
    return dots


def _directional_numeric(fn: Callable, args: list, diff: list[int], vs: list,
                         us: list, eps: float) -> float:
    """(v^T f(x + eps u) - v^T f(x - eps u)) / (2 eps), moving only the inputs in ``diff``."""
    saved = [args[k]._data.copy() for k in diff]
    for k, u, s in zip(diff, us, saved):
        xp = get_array_module(s)
        args[k]._data[...] = s + xp.asarray(eps * u)
    plus = _numeric_outputs(fn, args)
    for k, u, s in zip(diff, us, saved):
        xp = get_array_module(s)
        args[k]._data[...] = s - xp.asarray(eps * u)
    minus = _numeric_outputs(fn, args)
    for k, s in zip(diff, saved):
        args[k]._data[...] = s
    return sum(float((v * (p - m)).sum()) for v, p, m in zip(vs, plus, minus)) / (2 * eps)


def _check_directional(fn: Callable, args: list, diff: list[int], eps: float, atol: float,
                       rtol: float, n_directions: int, seed: int) -> GradcheckReport:
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(o.shape) for o in _float_outputs(fn, args)]
    report = GradcheckReport(True, "directional", 0.0, 0.0)
    worst_excess = -np.inf
    worst_us: list = []
    for d in range(n_directions):
        us = [rng.standard_normal(args[k].shape) for k in diff]
        norm = np.sqrt(sum(float((u * u).sum()) for u in us)) or 1.0
        us = [u / norm for u in us]
        analytic = float(sum(_vjp_dot(fn, args, diff, vs, us)))
        numeric = _directional_numeric(fn, args, diff, vs, us, eps)
        err = abs(analytic - numeric)
        if np.isnan(err):
            err = np.inf
        report.entries += 1
        report.max_abs_error = max(report.max_abs_error, err)
        if abs(numeric) > atol:
            report.max_rel_error = max(report.max_rel_error, err / abs(numeric))
        excess = err - (atol + rtol * abs(numeric))
        if np.isnan(excess):
            excess = np.inf
        if excess > worst_excess:
            worst_excess = excess
            report.direction, report.analytic, report.numeric = d, analytic, numeric
            worst_us = us
    report.passed = bool(worst_excess <= 0)
    if not report.passed:
        report.input_index = _trace_input(fn, args, diff, vs, worst_us, eps, atol, rtol)
    return report


def _trace_input(fn: Callable, args: list, diff: list[int], vs: list, us: list, eps: float,
                 atol: float, rtol: float) -> int:
    """The input whose own directional derivative is furthest out of tolerance."""
    dots = _vjp_dot(fn, args, diff, vs, us)
    best, best_excess = diff[0], -np.inf
    for j, k in enumerate(diff):
        numeric = _directional_numeric(fn, args, [k], vs, [us[j]], eps)
        excess = abs(dots[j] - numeric) - (atol + rtol * abs(numeric))
        if np.isnan(excess):
            excess = np.inf
        if excess > best_excess:
            best, best_excess = k, excess
    return best
