"""Stochastic gradient descent, with optional (Nesterov) momentum and weight decay."""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from ..tensor import Tensor
from .. import _validate
from .optimizer import (
    Optimizer, ParamsT, check_finite, check_nonneg, check_torch_flags,
)

__all__ = ["SGD"]


class SGD(Optimizer):
    r"""Stochastic gradient descent (torch.optim.SGD's update rule and defaults).

    Math
    ----
    The plain rule of the lectures, with learning rate ``lr`` (eta)::

        theta <- theta - lr * grad

    With all options, at step t with gradient g_t = dL/dtheta (``-dL/dtheta`` when
    ``maximize``), weight decay lambda, momentum mu and dampening tau::

        g_t <- g_t + lambda * theta                       (if weight_decay != 0)
        b_1 = g_1;   b_t = mu * b_{t-1} + (1 - tau) * g_t (if momentum != 0)
        d_t = g_t + mu * b_t     (nesterov)    or    d_t = b_t    (classical momentum)
        theta <- theta - lr * d_t

    The first momentum buffer is the gradient itself (no dampening at t = 1), as in torch.
    Without momentum, d_t = g_t.

    Parameters
    ----------
    params : iterable of Tensor or of dict
        Tensors to optimize or parameter groups (see :class:`Optimizer`).
    lr : float
        Learning rate, >= 0 (default 1e-3, torch's default).
    momentum : float
        Momentum factor mu >= 0 (default 0: no momentum).
    dampening : float
        Dampening tau of the momentum (default 0).
    weight_decay : float
        L2 penalty lambda >= 0 added to the gradient (default 0).
    nesterov : bool
        Nesterov momentum; needs ``momentum > 0`` and ``dampening == 0``.
    maximize : bool
        Maximize the objective (ascend the gradient) instead of minimizing it.
    foreach, differentiable, fused
        torch's implementation switches, keyword only: ``foreach`` is accepted without
        effect, the others only at their defaults (see ``check_torch_flags`` in
        :mod:`tinygrad_rnn.optim.optimizer`).

    State
    -----
    ``momentum_buffer`` (b_t), only when ``momentum != 0``.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> w = tr.tensor(np.array([1.0, -2.0]), requires_grad=True)
    >>> opt = SGD([w], lr=0.1)
    >>> (w * w).sum().backward()          # grad = 2 w
    >>> opt.step()
    >>> w.numpy()
    array([ 0.8, -1.6])
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3, momentum: float = 0,
                 dampening: float = 0, weight_decay: float = 0, nesterov: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_torch_flags("SGD", foreach=foreach, fused=fused,
                           differentiable=differentiable)
        defaults = {
            "lr": lr, "momentum": momentum, "dampening": dampening,
            "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
        }
        super().__init__(params, defaults)

    _state_buffers = ("momentum_buffer",)
    _nullable_state = ("momentum_buffer",)

    def _check_group(self, group: dict[str, Any], where: str) -> None:
        super()._check_group(group, where)
        group["momentum"] = check_nonneg(where, "momentum value", "momentum",
                                          group["momentum"])
        group["dampening"] = check_finite(where, "dampening value", "dampening",
                                           group["dampening"])
        group["weight_decay"] = check_nonneg(where, "weight_decay value", "weight_decay",
                                              group["weight_decay"])
        group["nesterov"] = _validate.flag(group["nesterov"], "nesterov", where)
        group["maximize"] = _validate.flag(group["maximize"], "maximize", where)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(
                f"{where}: Nesterov momentum requires a momentum > 0 and zero dampening, "
                f"got momentum={group['momentum']}, dampening={group['dampening']}"
            )

    def _update(self, p: Tensor, grad: Any, state: dict[str, Any],
                group: dict[str, Any]) -> None:
        xp = get_array_module(p._data)
        lr = float(group["lr"])
        momentum = float(group["momentum"])
        dampening = float(group["dampening"])
        weight_decay = float(group["weight_decay"])

        g = -grad if group["maximize"] else grad              # never modified in place
        if weight_decay != 0:
            g = g + weight_decay * p._data
        if momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = xp.array(g, copy=True)                  # b_1 = g_1
                state["momentum_buffer"] = buf
            else:
                buf *= momentum                               # b_t = mu b_{t-1}
                buf += (1.0 - dampening) * g                  #       + (1 - tau) g_t
            g = g + momentum * buf if group["nesterov"] else buf
        p.add_(g, alpha=-lr)                                  # theta <- theta - lr d_t
