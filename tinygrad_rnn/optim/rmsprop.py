"""RMSprop: divide the gradient by a running root mean square of recent gradients."""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from ..tensor import Tensor
from .optimizer import Optimizer, ParamsT, _check_nonneg, _lerp_, _new_step_counter

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

    eps is added outside the square root, as in torch.

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

    State
    -----
    ``step``, ``square_avg`` (v_t), ``momentum_buffer`` (b_t, when momentum > 0) and
    ``grad_avg`` (gbar_t, when centered).

    Notes
    -----
    In the centered variant v_t - gbar_t^2 >= 0 holds exactly, but rounding can make it a
    tiny negative number after many steps with a nearly constant gradient; it is clamped at
    0 here (torch would take the square root of a negative number and produce NaN).

    References
    ----------
    T. Tieleman and G. Hinton, Lecture 6.5 of "Neural Networks for Machine Learning", 2012.
    A. Graves, "Generating Sequences With Recurrent Neural Networks", 2013 (centered form).
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0, momentum: float = 0,
                 centered: bool = False, *, maximize: bool = False) -> None:
        defaults = {
            "lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
            "centered": centered, "weight_decay": weight_decay, "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _check_group(self, group: dict[str, Any]) -> None:
        super()._check_group(group)
        _check_nonneg("epsilon value", group["eps"])
        _check_nonneg("momentum value", group["momentum"])
        _check_nonneg("weight_decay value", group["weight_decay"])
        _check_nonneg("alpha value", group["alpha"])

    def _update(self, p: Tensor, grad: Any, state: dict[str, Any],
                group: dict[str, Any]) -> None:
        xp = get_array_module(p.data)
        lr = float(group["lr"])
        alpha = float(group["alpha"])
        eps = float(group["eps"])
        weight_decay = float(group["weight_decay"])
        momentum = float(group["momentum"])
        if len(state) == 0:
            state["step"] = _new_step_counter()
            state["square_avg"] = xp.zeros_like(p.data)
            if momentum > 0:
                state["momentum_buffer"] = xp.zeros_like(p.data)
            if group["centered"]:
                state["grad_avg"] = xp.zeros_like(p.data)

        state["step"] += 1
        g = -grad if group["maximize"] else grad              # never modified in place
        if weight_decay != 0:
            g = g + weight_decay * p.data

        square_avg = state["square_avg"]
        square_avg *= alpha                                   # v_t
        square_avg += (1.0 - alpha) * (g * g)
        if group["centered"]:
            if "grad_avg" not in state:  # switched on after the state was made
                state["grad_avg"] = xp.zeros_like(p.data)
            grad_avg = state["grad_avg"]
            _lerp_(grad_avg, g, 1.0 - alpha)                  # gbar_t
            variance = xp.maximum(square_avg - grad_avg * grad_avg, 0)   # see Notes
            s = xp.sqrt(variance)
        else:
            s = xp.sqrt(square_avg)
        s += eps                                              # s_t

        if momentum > 0:
            if "momentum_buffer" not in state:  # switched on after the state was made
                state["momentum_buffer"] = xp.zeros_like(p.data)
            buf = state["momentum_buffer"]
            buf *= momentum                                   # b_t = mu b_{t-1} + g_t / s_t
            buf += g / s
            p.add_(buf, alpha=-lr)
        else:
            p.add_(g / s, alpha=-lr)
