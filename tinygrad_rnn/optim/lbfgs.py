"""L-BFGS: a quasi-Newton method that re-evaluates the loss through a closure.

The algorithm and its order of operations are torch.optim.LBFGS's (itself after Schmidt's
minFunc), so that float64 trajectories agree with torch's to rounding; the code is written
for this package on raw backend arrays: every parameter's values and gradients are handled
as one flat vector (the parameters in order, each flattened in C order).
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from ..backend import device_of, get_array_module, to_device
from ..engine import enable_grad, no_grad
from ..tensor import Tensor
from .lr_scheduler import whole_number
from .optimizer import Optimizer, ParamsT, check_nonneg, grad_array, state_array

__all__ = ["LBFGS"]

#: The curvature pairs (s, y) with ``y . s`` at or below this are skipped (as torch does),
#: so the inverse-Hessian estimate stays positive definite.
CURVATURE_EPS = 1e-10


def _host(value: Any) -> Any:
    """A 0-d result (a dot product, a max) as a host NumPy scalar of its dtype: an explicit
    read from a device, since every decision of L-BFGS is taken on the host (as in torch)."""
    if get_array_module(value) is not np:
        value = to_device(value, "cpu")
    return np.asarray(value)[()]


def _cubic_minimizer(x1: Any, f1: Any, g1: Any, x2: Any, f2: Any, g2: Any,
                     bounds: tuple[Any, Any] | None = None) -> Any:
    r"""The minimizer of the cubic that interpolates ``f`` and its slope ``g`` at ``x1`` and
    ``x2``, clipped to ``bounds`` (default: the interval between the two points).

    Math
    ----
    Nocedal and Wright, Numerical Optimization (2006), eq. (3.59)::

        d1 = g1 + g2 - 3 (f1 - f2) / (x1 - x2)
        d2 = sqrt(d1^2 - g1 g2)
        x* = x2 - (x2 - x1) (g2 + d2 - d1) / (g2 - g1 + 2 d2)      (x1 <= x2; mirrored else)

    When ``d1^2 - g1 g2 < 0`` the cubic has no minimizer: the midpoint of the bounds.
    """
    if bounds is None:
        low, high = (x1, x2) if x1 <= x2 else (x2, x1)
    else:
        low, high = bounds
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    discriminant = d1 ** 2 - g1 * g2
    if not discriminant >= 0:
        return (low + high) / 2.0
    d2 = np.sqrt(discriminant)
    if x1 <= x2:
        x_min = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x_min = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x_min, low), high)


class _Point:
    """One trial step of the line search: step length ``t``, loss ``f``, flat gradient ``g``
    and directional derivative ``gtd = g . d``."""

    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t: Any, f: float, g: Any, gtd: Any) -> None:
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate: Callable[[Any], tuple[float, Any]], t: Any, d: Any, f: float,
                  g: Any, gtd: Any, c1: float = 1e-4, c2: float = 0.9,
                  tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple[float, Any, Any, int]:
    r"""A line search for a step ``t`` along ``d`` that satisfies the strong Wolfe conditions.

    Math
    ----
    With phi(t) = loss(x + t d) and phi'(t) = grad(x + t d) . d::

        phi(t) <= phi(0) + c1 t phi'(0)          (sufficient decrease)
        |phi'(t)| <= -c2 phi'(0)                 (curvature)

    Phase 1 (bracketing) grows ``t`` by cubic extrapolation until an interval is known to
    hold an acceptable step; phase 2 (zoom) shrinks it by cubic interpolation, safeguarded
    so that each trial keeps 10% of the interval from its ends (Nocedal and Wright,
    Algorithms 3.5 and 3.6).

    Parameters
    ----------
    evaluate : callable
        ``evaluate(t) -> (loss, flat_grad)`` at ``x + t d`` (the parameters are restored
        afterwards).
    t, d, f, g, gtd
        The first trial step, the direction, and the loss, flat gradient and ``g . d`` at
        ``t = 0``.
    max_ls : int
        The most evaluations.

    Returns
    -------
    (loss, flat_grad, t, evaluations)
    """
    d_norm = _host(abs(d).max())
    start = _Point(0, f, g.copy(), gtd)
    f_new, g_new = evaluate(t)
    evaluations = 1
    new = _Point(t, f_new, g_new, _host(g_new.dot(d)))
    prev = start
    found = False
    bracket: list[_Point] = []
    iteration = 0
    # phase 1: find an interval that holds a point satisfying the conditions
    while iteration < max_ls:
        if new.f > f + c1 * new.t * gtd or (iteration > 1 and new.f >= prev.f):
            bracket = [prev, _Point(new.t, new.f, new.g.copy(), new.gtd)]
            break
        if abs(new.gtd) <= -c2 * gtd:
            bracket, found = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, _Point(new.t, new.f, new.g.copy(), new.gtd)]
            break
        # extrapolate: somewhere in [t + 0.01 (t - t_prev), 10 t]
        bounds = (new.t + 0.01 * (new.t - prev.t), new.t * 10)
        t_next = _cubic_minimizer(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                                  bounds=bounds)
        prev = _Point(new.t, new.f, new.g.copy(), new.gtd)
        f_new, g_new = evaluate(t_next)
        evaluations += 1
        new = _Point(t_next, f_new, g_new, _host(g_new.dot(d)))
        iteration += 1
    if iteration == max_ls:
        bracket = [_Point(0, f, g, None), _Point(new.t, new.f, new.g, None)]

    # phase 2: zoom into the bracket; low is the end with the lower loss
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while not found and iteration < max_ls:
        ends = (bracket[0].t, bracket[1].t)
        if abs(ends[1] - ends[0]) * d_norm < tolerance_change:
            break
        t = _cubic_minimizer(bracket[0].t, bracket[0].f, bracket[0].gtd,
                             bracket[1].t, bracket[1].f, bracket[1].gtd)
        # safeguard: a trial too close to an end of the bracket (or outside it) twice in a
        # row is moved to 10% of the bracket from the nearer end
        top, bottom = max(ends), min(ends)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            if stalled or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        f_new, g_new = evaluate(t)
        evaluations += 1
        gtd_new = _host(g_new.dot(d))
        iteration += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket[low].f:
            bracket[high] = _Point(t, f_new, g_new.copy(), gtd_new)
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                found = True
            elif gtd_new * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]       # the new low end replaces the old one
            bracket[low] = _Point(t, f_new, g_new.copy(), gtd_new)
    best = bracket[low]
    return best.f, best.g, best.t, evaluations


class LBFGS(Optimizer):
    r"""L-BFGS with an optional strong Wolfe line search (torch.optim.LBFGS's algorithm,
    arguments, defaults and state).

    Math
    ----
    With the flat parameter vector x, gradient g_k and the last m curvature pairs
    ``s_i = x_{i+1} - x_i``, ``y_i = g_{i+1} - g_i`` (pairs with ``y . s <= 1e-10`` are
    skipped), the direction ``d_k = -H_k g_k`` comes from the two-loop recursion (Nocedal
    and Wright, Algorithm 7.4)::

        q = -g_k
        for i = k-1 .. k-m:  a_i = rho_i s_i . q;   q <- q - a_i y_i        (rho_i = 1/(y_i . s_i))
        r = gamma q,  gamma = (s . y) / (y . y) of the newest pair
        for i = k-m .. k-1:  b_i = rho_i y_i . r;   r <- r + (a_i - b_i) s_i
        d_k = r

    and ``x <- x + t d_k`` with ``t = lr`` (at the very first iteration
    ``t = min(1, 1 / ||g||_1) lr``), or ``t`` from a strong Wolfe line search.

    One ``step(closure)`` runs up to ``max_iter`` such iterations and ``max_eval`` closure
    calls, and stops early when ``max |g| <= tolerance_grad``, when ``g . d >
    -tolerance_change``, when ``max |t d| <= tolerance_change`` or when the loss changes by
    less than ``tolerance_change``. The history persists across steps.

    Parameters
    ----------
    params : iterable of Tensor
        One parameter group only (as in torch); all parameters on one device with one
        floating-point dtype.
    lr : float
        Step length (>= 0; default 1).
    max_iter : int
        Most iterations per ``step()`` (>= 1; default 20).
    max_eval : int, optional
        Most closure evaluations per ``step()`` (>= 1); default ``max_iter * 5 // 4``.
    tolerance_grad : float
        Stop when the largest gradient entry is at most this (default 1e-7).
    tolerance_change : float
        Stop when the step or the loss changes by less than this (default 1e-9).
    history_size : int
        Number of curvature pairs kept (>= 1; default 100).
    line_search_fn : None or 'strong_wolfe'
        The line search (default None: a fixed step ``lr``).

    State
    -----
    Kept for the first parameter, as torch keeps it: ``func_evals`` and ``n_iter`` (totals),
    ``d`` (last direction), ``t`` (last step), ``old_dirs``, ``old_stps`` (lists of the
    y and s vectors), ``ro`` (the rho_i), ``H_diag`` (gamma), ``prev_flat_grad``,
    ``prev_loss`` and ``al`` (the a_i of the last recursion). Vectors are flat, of length
    the number of parameter entries.

    Raises
    ------
    TypeError
        A count that is not an int, a tolerance that is not a real number, a
        ``line_search_fn`` that is not None or a str; ``step()`` without a closure.
    ValueError
        More than one parameter group, parameters of different dtypes or devices or of an
        integer dtype, a negative ``lr`` or tolerance, a count below 1, an unknown
        ``line_search_fn``.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> w = tr.tensor(np.array([3.0, -2.0]), requires_grad=True)
    >>> opt = LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 1.0) * (w - 1.0)).sum()
    ...     loss.backward()
    ...     return loss
    >>> float(opt.step(closure))      # the loss before the step
    13.0
    >>> np.round(w.numpy(), 6)
    array([1., 1.])

    References
    ----------
    J. Nocedal and S. J. Wright, Numerical Optimization, 2nd ed., Springer 2006
    (Algorithms 3.5, 3.6 and 7.4). D. C. Liu and J. Nocedal, "On the limited memory BFGS
    method for large scale optimization", Math. Programming 45 (1989).
    """

    def __init__(self, params: ParamsT, lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        max_iter = whole_number("LBFGS", "max_iter", max_iter, 1)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr, "max_iter": max_iter, "max_eval": max_eval,
            "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
            "history_size": history_size, "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        self._params: list[Tensor] = self.param_groups[0]["params"]
        first = self._params[0]
        for k, p in enumerate(self._params):
            if p.dtype != first.dtype or p.device != first.device:
                raise ValueError(
                    f"LBFGS: all parameters must have one dtype and one device (they are "
                    f"handled as one flat vector); parameter 0 is {first.dtype} on "
                    f"{first.device}, parameter {k} is {p.dtype} on {p.device}"
                )
            if np.dtype(p.dtype).kind != "f":
                raise ValueError(f"LBFGS: parameter {k} has dtype {p.dtype}; L-BFGS "
                                 f"optimizes floating-point parameters only")
        self._numel = sum(int(np.prod(p.shape)) for p in self._params)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add the one parameter group (at construction); a second one is refused, as L-BFGS
        treats all parameters as one vector with one set of options (torch's rule)."""
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter "
                             "groups): it keeps one parameter group")
        super().add_param_group(param_group)

    def _check_group(self, group: dict[str, Any], where: str) -> None:
        super()._check_group(group, where)
        group["max_iter"] = whole_number(where, "max_iter", group["max_iter"], 1)
        group["max_eval"] = whole_number(where, "max_eval", group["max_eval"], 1)
        group["history_size"] = whole_number(where, "history_size", group["history_size"],
                                              1)
        group["tolerance_grad"] = check_nonneg(where, "tolerance_grad", "tolerance_grad",
                                                group["tolerance_grad"])
        group["tolerance_change"] = check_nonneg(where, "tolerance_change",
                                                  "tolerance_change",
                                                  group["tolerance_change"])
        search = group["line_search_fn"]
        if search is not None and not isinstance(search, str):
            raise TypeError(f"{where}: line_search_fn must be None or 'strong_wolfe', got "
                            f"{type(search).__name__} {search!r}")
        if search not in (None, "strong_wolfe"):
            raise ValueError(f"{where}: line_search_fn must be None or 'strong_wolfe' (the "
                             f"only line search), got {search!r}")

    # ---------------------------------------------------------------- flat vectors
    def _flat_grad(self) -> Any:
        """All gradients as one new flat vector (zeros for a parameter without one)."""
        xp = get_array_module(self._params[0]._data)
        parts = []
        for k, p in enumerate(self._params):
            grad = grad_array(p)
            if grad is None:
                parts.append(xp.zeros(int(np.prod(p.shape)), dtype=p.dtype))
                continue
            if tuple(grad.shape) != p.shape or grad.dtype != p.dtype \
                    or type(grad) is not type(p._data):
                raise ValueError(
                    f"LBFGS.step: parameter {k} (shape {p.shape}, dtype {p.dtype} on "
                    f"{p.device}) has a gradient of shape {tuple(grad.shape)}, dtype "
                    f"{grad.dtype} on {device_of(grad)}"
                )
            parts.append(grad.reshape(-1))
        return xp.concatenate(parts)

    def _add_to_params(self, step: Any, direction: Any) -> None:
        """``x <- x + step * direction``, parameter by parameter, in place."""
        offset = 0
        for p in self._params:
            n = int(np.prod(p.shape))
            p.add_(direction[offset:offset + n].reshape(p.shape), alpha=step)
            offset += n

    def _copy_params(self) -> list[Any]:
        return [p._data.copy() for p in self._params]

    def _set_params(self, values: list[Any]) -> None:
        for p, value in zip(self._params, values):
            p.copy_(value)

    def _loss(self, closure: Callable[[], Any]) -> tuple[Any, float]:
        """Run the closure with gradients enabled: (what it returned, the loss as a float)."""
        with enable_grad():
            value = closure()
        try:
            return value, float(value)
        except (TypeError, ValueError) as err:
            raise TypeError(
                f"LBFGS.step: the closure must return the loss (a one-element Tensor or a "
                f"number), got {type(value).__name__} {value!r}"
            ) from err

    # ---------------------------------------------------------------- the step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Run up to ``max_iter`` L-BFGS iterations.

        Parameters
        ----------
        closure : callable
            Required: zeroes the gradients, computes the loss, calls ``backward()`` and
            returns the loss. It is called with gradients enabled, once or more.

        Returns
        -------
        The closure's first return value (the loss before this step), as torch returns.
        """
        if closure is None or not callable(closure):
            raise TypeError(
                f"LBFGS.step: closure is required (a function that zeroes the gradients, "
                f"computes the loss, calls backward() and returns it: L-BFGS evaluates the "
                f"loss several times per step), got {closure!r}"
            )
        group = self.param_groups[0]
        self._check_group(group, "LBFGS.step")
        with no_grad():
            return self._step(closure, group)

    def _step(self, closure: Callable[[], Any], group: dict[str, Any]) -> Any:
        lr = group["lr"]
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad = group["tolerance_grad"]
        tolerance_change = group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first_loss, loss = self._loss(closure)
        evaluations = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if _host(abs(flat_grad).max()) <= tolerance_grad:
            return first_loss                    # already at a stationary point

        # the previous call's direction, step and history (None before the first iteration)
        d: Any = state.get("d")
        t: Any = state.get("t")
        old_dirs: Any = state.get("old_dirs")
        old_stps: Any = state.get("old_stps")
        ro: Any = state.get("ro")
        H_diag: Any = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        iteration = 0
        while iteration < max_iter:
            iteration += 1
            state["n_iter"] += 1

            # ---- the direction d = -H g (two-loop recursion)
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1
            else:
                y = flat_grad - prev_flat_grad       # y_{k-1} = g_k - g_{k-1}
                s = d * float(t)                     # s_{k-1} = x_k - x_{k-1}
                ys = _host(y.dot(s))
                if ys > CURVATURE_EPS:
                    if len(old_dirs) == history_size:
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / _host(y.dot(y))    # gamma = (s . y) / (y . y)
                count = len(old_dirs)
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                q = -flat_grad
                for i in range(count - 1, -1, -1):
                    al[i] = _host(old_stps[i].dot(q)) * ro[i]
                    q += float(-al[i]) * old_dirs[i]
                d = r = q * float(H_diag)
                for i in range(count):
                    be_i = _host(old_dirs[i].dot(r)) * ro[i]
                    r += float(al[i] - be_i) * old_stps[i]

            prev_flat_grad = flat_grad.copy()
            prev_loss = loss

            # ---- the step length
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / _host(abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = _host(flat_grad.dot(d))            # directional derivative
            if gtd > -tolerance_change:
                break                                # not a descent direction

            used = 0
            if group["line_search_fn"] == "strong_wolfe":
                start = self._copy_params()

                def evaluate(trial: Any) -> tuple[float, Any]:
                    self._add_to_params(float(trial), d)
                    value = self._loss(closure)[1]
                    grad = self._flat_grad()
                    self._set_params(start)
                    return value, grad

                loss, flat_grad, t, used = _strong_wolfe(
                    evaluate, t, d, loss, flat_grad, gtd, max_ls=max_eval - evaluations)
                self._add_to_params(float(t), d)
                done = _host(abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_to_params(float(t), d)
                done = False
                if iteration != max_iter:       # re-evaluate, unless this was the last one
                    loss = self._loss(closure)[1]
                    flat_grad = self._flat_grad()
                    done = _host(abs(flat_grad).max()) <= tolerance_grad
                    used = 1
            evaluations += used
            state["func_evals"] += used

            # ---- stopping rules
            if iteration == max_iter or evaluations >= max_eval or done:
                break
            if _host(abs(d * float(t)).max()) <= tolerance_change:
                break                                # the step is too small
            if abs(loss - prev_loss) < tolerance_change:
                break                                # the loss no longer changes

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        self._opt_called = True
        return first_loss

    # ---------------------------------------------------------------- checkpoints
    _VECTORS = ("d", "prev_flat_grad")
    _VECTOR_LISTS = ("old_dirs", "old_stps")
    _SCALAR_LISTS = ("ro", "al")

    def _load_param_state(self, where: str, index: Any, entries: Any, p: Tensor,
                          group: dict[str, Any]) -> dict[str, Any]:
        """The L-BFGS state (ours or torch's, with torch tensors converted or not): flat
        vectors of the parameters' total size, copied to the parameters' device and dtype;
        scalars as host numbers."""
        at = f"{where}: parameter {index}"
        if not isinstance(entries, dict):
            raise TypeError(f"{at}: its state must be a dict, got {type(entries).__name__}")
        first = self._params[0]
        xp_device, dtype = first.device, first.dtype
        loaded: dict[str, Any] = {}
        for name, value in entries.items():
            if name in self._VECTORS:
                loaded[name] = None if value is None else self._load_vector(
                    f"{at}: state entry {name!r}", value, xp_device, dtype)
            elif name in self._VECTOR_LISTS or name in self._SCALAR_LISTS:
                if not isinstance(value, (list, tuple)):
                    raise TypeError(f"{at}: state entry {name!r} must be a list, got "
                                    f"{type(value).__name__}")
                if name in self._VECTOR_LISTS:
                    loaded[name] = [self._load_vector(f"{at}: state entry {name}[{i}]", v,
                                                      xp_device, dtype)
                                    for i, v in enumerate(value)]
                else:
                    loaded[name] = [None if v is None else _load_number(
                        f"{at}: state entry {name}[{i}]", v) for i, v in enumerate(value)]
            elif name in ("func_evals", "n_iter"):
                number = _load_number(f"{at}: state entry {name!r}", value)
                if not (number >= 0 and float(number).is_integer()):
                    raise ValueError(f"{at}: state entry {name!r} must be a whole number "
                                     f">= 0, got {value!r}")
                loaded[name] = int(number)
            elif name in ("t", "H_diag", "prev_loss"):
                loaded[name] = None if value is None else _load_number(
                    f"{at}: state entry {name!r}", value)
            else:
                loaded[name] = value                 # an entry no update reads
        lengths = {len(loaded.get(name, [])) for name in ("old_dirs", "old_stps", "ro")}
        if len(lengths) > 1:
            raise ValueError(f"{at}: old_dirs, old_stps and ro must have one length, got "
                             f"{sorted(lengths)}")
        if loaded.get("n_iter", 0) > 0:
            missing = [name for name in ("d", "t", "old_dirs", "old_stps", "ro", "H_diag",
                                         "prev_flat_grad", "prev_loss") if name not in loaded]
            if missing:
                raise ValueError(f"{at}: the state has no {missing[0]!r} entry (L-BFGS keeps "
                                 f"d, t, old_dirs, old_stps, ro, H_diag, prev_flat_grad and "
                                 f"prev_loss after a step); the state dict is incomplete or "
                                 f"was made by another optimizer")
        return loaded

    def _load_vector(self, at: str, value: Any, device: str, dtype: Any) -> Any:
        array = state_array(value)
        if array is None:
            raise TypeError(f"{at} must be a flat array of {self._numel} entries, got "
                            f"{type(value).__name__}")
        if tuple(array.shape) != (self._numel,):
            raise ValueError(f"{at} has shape {tuple(array.shape)}, but the parameters have "
                             f"{self._numel} entries in all; the state dict was made for "
                             f"other parameters")
        moved = to_device(array, device)
        return moved.astype(dtype, copy=moved is array or moved is value)


def _load_number(at: str, value: Any) -> Any:
    """A scalar state entry (a number, a NumPy scalar, a one-element array or Tensor) as a
    host number: a NumPy scalar keeps its dtype, a Python number stays one."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{at} must be a number, got {value!r}")
    if isinstance(value, numbers.Real):
        return value
    array = state_array(value)
    if array is None or int(np.prod(array.shape)) != 1 or np.dtype(array.dtype).kind not in "iuf":
        raise TypeError(f"{at} must be a number, got {type(value).__name__} {value!r}")
    return to_device(array, "cpu").reshape(())[()]
