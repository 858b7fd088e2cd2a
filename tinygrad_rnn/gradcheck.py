"""Gradient checking by central differences, in float64.

Why float64: a central difference (f(x + eps) - f(x - eps)) / (2 eps) has truncation error
O(eps^2) and round-off error about u |f| / eps (u the unit round-off). In float64
(u = 1.1e-16) eps = 1e-6 gives both near 1e-10..1e-12; in float32 (u = 6e-8) the round-off
alone is about 0.06 |f| at that eps, and no eps makes both small, so float32 inputs are
refused. Check float32 code by comparing its result with the float64 result instead.

Two modes:

* ``mode='full'``: the whole Jacobian, column by column by finite differences (two
  evaluations per input element) and row by row by reverse mode; every entry compared.
* ``mode='directional'``: for large inputs, random unit directions u (over all inputs at once)
  and random output weights v: the numeric (v^T f(x + eps u) - v^T f(x - eps u)) / (2 eps)
  against the analytic sum_k <dL/dx_k, u_k> with L = v^T f. Costs two evaluations and one
  backward per direction.

An entry passes when ``|analytic - numeric| <= atol + rtol * |numeric|``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .backend import get_array_module
from .engine import no_grad
from .tensor import Tensor

__all__ = ["gradcheck", "GradcheckError", "GradcheckReport"]


class GradcheckError(AssertionError):
    """Raised by :func:`gradcheck` on a mismatch; ``.report`` holds the details."""

    def __init__(self, message: str, report: "GradcheckReport") -> None:
        super().__init__(message)
        self.report = report


@dataclass
class GradcheckReport:
    """Result of a check: the worst entry and the maximal errors."""

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


def _outputs(fn: Callable, args: Sequence[Any]) -> tuple:
    out = fn(*args)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"gradcheck: fn must return Tensors, got {type(o).__name__}")
    return tuple(outs)


def _prepare(inputs: Any) -> tuple[list, list[int]]:
    seq = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    args, diff = [], []
    for k, x in enumerate(seq):
        if isinstance(x, Tensor) and x.requires_grad:
            if x.dtype != np.float64:
                raise TypeError(
                    f"gradcheck: input {k} has dtype {x.dtype}; finite differences need "
                    f"float64 (in float32 the round-off of a central difference at eps=1e-6 is "
                    f"about 6% of |f|, so the check would be meaningless). Convert with "
                    f".double(), and check float32 code against the float64 result instead."
                )
            args.append(Tensor(x.data.copy(), requires_grad=True))
            diff.append(k)
        else:
            args.append(x)
    if not diff:
        raise ValueError("gradcheck: no input requires a gradient")
    return args, diff


def gradcheck(fn: Callable[..., Any], inputs: Any, eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, mode: str = "full", n_directions: int = 8,
              seed: int = 0, raise_exception: bool = True) -> bool | GradcheckReport:
    """Compare the gradients of ``fn`` at ``inputs`` with central differences.

    Parameters
    ----------
    fn : callable
        Takes the inputs, returns a Tensor or a tuple of Tensors.
    inputs : Tensor or sequence
        Tensors with ``requires_grad=True`` (float64) are checked; anything else is passed
        through unchanged. The inputs are copied: the caller's tensors are never touched.
    eps, atol, rtol : float
        Step and tolerances: an entry passes when |a - n| <= atol + rtol |n|.
    mode : 'full' or 'directional'
    raise_exception : bool
        On failure raise :class:`GradcheckError` naming the input, element, output, analytic
        and numeric values and both errors; otherwise return the report.

    Returns
    -------
    True when every entry passes (or the report when ``raise_exception=False``).
    """
    if mode not in ("full", "directional"):
        raise ValueError(f"gradcheck: mode must be 'full' or 'directional', got {mode!r}")
    args, diff = _prepare(inputs)
    if mode == "full":
        report = _check_full(fn, args, diff, eps, atol, rtol)
    else:
        report = _check_directional(fn, args, diff, eps, atol, rtol, n_directions, seed)
    if not report.passed:
        if raise_exception:
            where = (f"input {report.input_index}, element {report.element}, output "
                     f"{report.output_index}" if mode == "full" else
                     f"direction {report.element}")
            raise GradcheckError(
                f"gradcheck failed ({mode}) at {where}: analytic {report.analytic:.10g}, "
                f"numeric {report.numeric:.10g}, abs error "
                f"{abs(report.analytic - report.numeric):.3g}, rel error "
                f"{abs(report.analytic - report.numeric) / max(abs(report.numeric), 1e-300):.3g} "
                f"(atol {atol}, rtol {rtol}; max abs error over all entries "
                f"{report.max_abs_error:.3g})",
                report,
            )
        return report
    return True if raise_exception else report


def _numeric_outputs(fn: Callable, args: list) -> list:
    with no_grad():
        return [o.data.astype(np.float64, copy=True) for o in _outputs(fn, args)]


def _check_full(fn: Callable, args: list, diff: list[int], eps: float, atol: float,
                rtol: float) -> GradcheckReport:
    outs = _outputs(fn, args)
    analytic = []  # per output: per input: (out.size, in.size)
    for o in outs:
        per_in = [np.zeros((o.size, args[k].size)) for k in diff]
        if o.requires_grad:
            xp = get_array_module(o.data)
            for i in range(o.size):
                for k in diff:
                    args[k].grad = None
                onehot = xp.zeros(o.size, dtype=o.dtype)
                onehot[i] = 1
                o.backward(onehot.reshape(o.shape), retain_graph=True)
                for j, k in enumerate(diff):
                    if args[k].grad is not None:
                        per_in[j][i] = np.asarray(args[k].grad, dtype=np.float64).ravel()
        analytic.append(per_in)

    worst = GradcheckReport(True, "full", 0.0, 0.0)
    worst_excess = -np.inf
    for j, k in enumerate(diff):
        x = args[k].data
        flat = x.reshape(-1)  # a view: perturb in place, restore after
        for e in range(x.size):
            orig = flat[e]
            flat[e] = orig + eps
            plus = _numeric_outputs(fn, args)
            flat[e] = orig - eps
            minus = _numeric_outputs(fn, args)
            flat[e] = orig
            for oi, (p, m) in enumerate(zip(plus, minus)):
                num = ((p - m) / (2 * eps)).ravel()
                ana = analytic[oi][j][:, e]
                err = np.abs(ana - num)
                rel = err / np.maximum(np.abs(num), 1e-300)
                worst.entries += num.size
                if num.size:
                    worst.max_abs_error = max(worst.max_abs_error, float(err.max()))
                    worst.max_rel_error = max(worst.max_rel_error,
                                              float(np.where(err > 0, rel, 0).max()))
                    excess = err - (atol + rtol * np.abs(num))
                    i = int(np.argmax(excess))
                    if excess[i] > worst_excess:
                        worst_excess = float(excess[i])
                        worst.input_index, worst.output_index = k, oi
                        worst.element = tuple(int(v) for v in np.unravel_index(e, x.shape))
                        worst.analytic, worst.numeric = float(ana[i]), float(num[i])
    worst.passed = worst_excess <= 0
    return worst


def _check_directional(fn: Callable, args: list, diff: list[int], eps: float, atol: float,
                       rtol: float, n_directions: int, seed: int) -> GradcheckReport:
    rng = np.random.default_rng(seed)
    outs = _outputs(fn, args)
    vs = [rng.standard_normal(o.shape) for o in outs]
    report = GradcheckReport(True, "directional", 0.0, 0.0)
    worst_excess = -np.inf
    for d in range(n_directions):
        us = [rng.standard_normal(args[k].shape) for k in diff]
        norm = np.sqrt(sum(float((u * u).sum()) for u in us)) or 1.0
        us = [u / norm for u in us]
        # analytic: v^T J u = sum_k <dL/dx_k, u_k> with L = sum_o <v_o, out_o>
        for k in diff:
            args[k].grad = None
        outs = _outputs(fn, args)
        loss = None
        for o, v in zip(outs, vs):
            if o.requires_grad:
                term = (o * Tensor(v)).sum()
                loss = term if loss is None else loss + term
        analytic = 0.0
        if loss is not None:
            loss.backward()
            analytic = sum(float((args[k].grad * u).sum()) for k, u in zip(diff, us)
                           if args[k].grad is not None)
        saved = [args[k].data.copy() for k in diff]
        for k, u in zip(diff, us):
            args[k].data[...] += eps * u
        plus = _numeric_outputs(fn, args)
        for k, u, s in zip(diff, us, saved):
            args[k].data[...] = s - eps * u
        minus = _numeric_outputs(fn, args)
        for k, s in zip(diff, saved):
            args[k].data[...] = s
        numeric = sum(float((v * (p - m)).sum()) for v, p, m in zip(vs, plus, minus)) / (2 * eps)
        err = abs(analytic - numeric)
        report.entries += 1
        report.max_abs_error = max(report.max_abs_error, err)
        report.max_rel_error = max(report.max_rel_error, err / max(abs(numeric), 1e-300))
        excess = err - (atol + rtol * abs(numeric))
        if excess > worst_excess:
            worst_excess = excess
            report.element, report.analytic, report.numeric = (d,), analytic, numeric
    report.passed = worst_excess <= 0
    return report
