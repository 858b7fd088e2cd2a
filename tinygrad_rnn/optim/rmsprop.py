"""RMSprop: divide the gradient by a running root mean square of recent gradients."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import get_array_module
from ..tensor import Tensor
from .. import _validate
from .optimizer import (
    Optimizer, ParamsT, check_nonneg, check_torch_flags, lerp_,
    new_step_counter,
)

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    r"""RMSprop (torch.optim.RMSprop's update rule, defaults and state).

    Math
    ----
    At step t with gradient g_t (``-dL/dtheta`` when ``maximize``), learning rate gamma,
    smoothing constant alpha, weight decay lambda and momentum mu::

        g_t <- g_t + lambda * theta                         (if weight_decay != 0)
        v_t = alpha * v_{t-1} + (1 - alpha) * g_t^2         (v_0 = 0)
        centered:  gbar_t = alpha * gbar_{t-1} + (1 - alpha) * g_t,
                   s_t = sqrt(v_t - gbar_t^2) + eps
        otherwise: s_t = sqrt(v_t) + eps
        momentum:  b_t = mu * b_{t-1} + g_t / s_t,   theta <- theta - gamma * b_t
        otherwise:                                   theta <- theta - gamma * g_t / s_t

    eps is added outside the square root, as in torch. Each quantity is computed in torch's
    order of operations: ``v_t = alpha v_{t-1} + ((1 - alpha) g_t) g_t``, ``gbar_t =
    lerp(gbar_{t-1}, g_t, 1 - alpha)``, ``v_t - gbar_t^2`` rounded once (as torch's fused
    ``addcmul``), and without momentum ``theta <- theta + (-gamma g_t) / s_t``, so that
    extreme gradients overflow where torch's do (see Notes).

    Parameters
    ----------
    params : iterable of Tensor or of dict
        Tensors to optimize or parameter groups (see :class:`Optimizer`).
    lr : float
        Learning rate gamma >= 0 (default 1e-2).
    alpha : float
        Smoothing constant >= 0 (default 0.99).
    eps : float
        >= 0 (default 1e-8).
    weight_decay : float
        lambda >= 0 (default 0).
    momentum : float
        mu >= 0 (default 0).
    centered : bool
        Normalize by an estimate of the gradient's variance instead of its second moment.
    maximize : bool
        Maximize the objective instead of minimizing it.
    capturable, foreach, differentiable
        torch's implementation switches (positional, as in torch): ``foreach`` is
        accepted without effect, the others only at their defaults (see
        ``check_torch_flags`` in :mod:`tinygrad_rnn.optim.optimizer`).

    State
    -----
    ``step``, ``square_avg`` (v_t), ``momentum_buffer`` (b_t, when momentum > 0) and
    ``grad_avg`` (gbar_t, when centered).

    Notes
    -----
    In the centered variant v_t - gbar_t^2 >= 0 holds exactly, but rounding can make it a
    tiny negative number after many steps with a nearly constant gradient; it is clamped at
    0 here (torch would take the square root of a negative number and produce NaN). This is
    the one deliberate difference from torch; inf and nan pass through the clamp unchanged.

    With a float32 gradient of 1e30, v_t is inf and gbar_t^2 = 1e56 overflows too: torch
    forms v_t - gbar_t^2 in one rounding (inf), so s_t = inf and the parameter does not
    move. Computing gbar_t^2 on its own gave inf - inf = nan and a nan parameter; here the
    difference is inf wherever v_t is inf and gbar_t is finite, as in torch.

    References
    ----------
    T. Tieleman and G. Hinton, Lecture 6.5 of "Neural Networks for Machine Learning", 2012.
    A. Graves, "Generating Sequences With Recurrent Neural Networks", 2013 (centered form).
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        check_torch_flags("RMSprop", foreach=foreach, capturable=capturable,
                           differentiable=differentiable)
        defaults = {
            "lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
            "centered": centered, "weight_decay": weight_decay, "maximize": maximize,
        }
        super().__init__(params, defaults)

    _state_buffers = ("square_avg", "momentum_buffer", "grad_avg")
    _required_state = ("step", "square_avg")
    _nonneg_state = ("square_avg",)

    def _check_group(self, group: dict[str, Any], where: str) -> None:
        super()._check_group(group, where)
        group["eps"] = check_nonneg(where, "epsilon value", "eps", group["eps"])
        group["momentum"] = check_nonneg(where, "momentum value", "momentum",
                                          group["momentum"])
        group["weight_decay"] = check_nonneg(where, "weight_decay value", "weight_decay",
                                              group["weight_decay"])
        group["alpha"] = check_nonneg(where, "alpha value", "alpha", group["alpha"])
        group["centered"] = _validate.flag(group["centered"], "centered", where)
        group["maximize"] = _validate.flag(group["maximize"], "maximize", where)

    def _update(self, p: Tensor, grad: Any, state: dict[str, Any],
                group: dict[str, Any]) -> None:
        xp = get_array_module(p._data)
        lr = float(group["lr"])
        alpha = float(group["alpha"])
        eps = float(group["eps"])
        weight_decay = float(group["weight_decay"])
        momentum = float(group["momentum"])
        if len(state) == 0:
            state["step"] = new_step_counter()
            state["square_avg"] = xp.zeros_like(p._data)
            if momentum > 0:
                state["momentum_buffer"] = xp.zeros_like(p._data)
            if group["centered"]:
                state["grad_avg"] = xp.zeros_like(p._data)

        state["step"] += 1
        g = -grad if group["maximize"] else grad              # never modified in place
        if weight_decay != 0:
            g = g + weight_decay * p._data

        square_avg = state["square_avg"]
        square_avg *= alpha                                   # v_t = alpha v_{t-1}
        work = xp.multiply(g, 1.0 - alpha, out=xp.empty_like(p._data))  # + ((1 - alpha) g_t) g_t
        work *= g
        square_avg += work
        if group["centered"]:
            if "grad_avg" not in state:  # switched on after the state was made
                state["grad_avg"] = xp.zeros_like(p._data)
            grad_avg = state["grad_avg"]
            lerp_(grad_avg, g, 1.0 - alpha)                  # gbar_t
            xp.multiply(grad_avg, grad_avg, out=work)
            # torch rounds v_t - gbar_t^2 once (a fused multiply-add), so where v_t is inf
            # and gbar_t is finite the difference is inf even when gbar_t^2 alone overflows:
            # the inf - inf here is replaced by v_t (no warning for it)
            with np.errstate(invalid="ignore"):
                xp.subtract(square_avg, work, out=work)       # v_t - gbar_t^2
            xp.copyto(work, square_avg, where=xp.isnan(work) & xp.isfinite(grad_avg))
            xp.maximum(work, 0, out=work)                     # see Notes
            xp.sqrt(work, out=work)
        else:
            xp.sqrt(square_avg, out=work)
        work += eps                                           # s_t

        if momentum > 0:
            if "momentum_buffer" not in state:  # switched on after the state was made
                state["momentum_buffer"] = xp.zeros_like(p._data)
            buf = state["momentum_buffer"]
            buf *= momentum                                   # b_t = mu b_{t-1} + g_t / s_t
            xp.divide(g, work, out=work)
            buf += work
            p.add_(buf, alpha=-lr)
        else:
            xp.divide(g * (-lr), work, out=work)              # (-gamma g_t) / s_t
            p.add_(work)
