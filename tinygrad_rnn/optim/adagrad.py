"""Adagrad: per-coordinate learning rates from the sum of all past squared gradients."""
from __future__ import annotations

from typing import Any

from ..backend import get_array_module
from ..tensor import Tensor
from .. import _validate
from .optimizer import (
    Optimizer, ParamsT, check_nonneg, check_torch_flags, new_step_counter,
)

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    r"""Adagrad (torch.optim.Adagrad's update rule, defaults and state).

    Math
    ----
    At step t with gradient g_t (``-dL/dtheta`` when ``maximize``), learning rate gamma,
    learning-rate decay eta and weight decay lambda::

        g_t <- g_t + lambda * theta                     (if weight_decay != 0)
        gamma_t = gamma / (1 + (t - 1) * eta)
        G_t = G_{t-1} + g_t^2                           (G_0 = initial_accumulator_value)
        theta <- theta - gamma_t * g_t / (sqrt(G_t) + eps)

    It is computed in torch's order of operations: ``theta <- theta + (-gamma_t g_t) / (sqrt(G_t)
    + eps)`` (the product before the division, so it overflows where torch's does).

    Parameters
    ----------
    params : iterable of Tensor or of dict
        Tensors to optimize or parameter groups (see :class:`Optimizer`).
    lr : float
        Learning rate gamma >= 0 (default 1e-2).
    lr_decay : float
        eta >= 0 (default 0).
    weight_decay : float
        lambda >= 0 (default 0).
    initial_accumulator_value : float
        G_0 >= 0 (default 0).
    eps : float
        >= 0 (default 1e-10).
    maximize : bool
        Maximize the objective instead of minimizing it.
    foreach, differentiable, fused
        torch's implementation switches, keyword only: ``foreach`` is accepted without
        effect, the others only at their defaults (see ``check_torch_flags`` in
        :mod:`tinygrad_rnn.optim.optimizer`).

    State
    -----
    ``step`` and ``sum`` (G_t). As in torch, the state of every parameter is created when
    the optimizer is (step 0, sum G_0), so ``state_dict()`` lists it before the first step.

    References
    ----------
    J. Duchi, E. Hazan and Y. Singer, "Adaptive Subgradient Methods for Online Learning and
    Stochastic Optimization", JMLR 12, 2011.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        check_torch_flags("Adagrad", foreach=foreach, fused=fused,
                           differentiable=differentiable)
        defaults = {
            "lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value, "maximize": maximize,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state[p], group)

    _state_buffers = ("sum",)
    _required_state = ("step", "sum")
    _nonneg_state = ("sum",)

    def _check_group(self, group: dict[str, Any], where: str) -> None:
        super()._check_group(group, where)
        group["lr_decay"] = check_nonneg(where, "lr_decay value", "lr_decay",
                                          group["lr_decay"])
        group["weight_decay"] = check_nonneg(where, "weight_decay value", "weight_decay",
                                              group["weight_decay"])
        group["initial_accumulator_value"] = check_nonneg(
            where, "initial_accumulator_value value", "initial_accumulator_value",
            group["initial_accumulator_value"])
        group["eps"] = check_nonneg(where, "epsilon value", "eps", group["eps"])
        group["maximize"] = _validate.flag(group["maximize"], "maximize", where)

    @staticmethod
    def _init_state(p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        xp = get_array_module(p._data)
        state["step"] = new_step_counter()
        state["sum"] = xp.full(p.shape, float(group["initial_accumulator_value"]),
                               dtype=p.dtype)

    def _update(self, p: Tensor, grad: Any, state: dict[str, Any],
                group: dict[str, Any]) -> None:
        xp = get_array_module(p._data)
        if len(state) == 0:           # a parameter added later with add_param_group
            self._init_state(p, state, group)
        lr = float(group["lr"])
        lr_decay = float(group["lr_decay"])
        weight_decay = float(group["weight_decay"])
        eps = float(group["eps"])

        state["step"] += 1
        t = float(state["step"])
        g = -grad if group["maximize"] else grad              # never modified in place
        if weight_decay != 0:
            g = g + weight_decay * p._data
        clr = lr / (1 + (t - 1) * lr_decay)                   # gamma_t
        state_sum = state["sum"]
        work = xp.multiply(g, g, out=xp.empty_like(p._data))  # g_t^2 (an array even if 0-d)
        state_sum += work                                     # G_t
        xp.sqrt(state_sum, out=work)
        work += eps                                           # sqrt(G_t) + eps
        xp.divide(g * (-clr), work, out=work)                 # (-gamma_t g_t) / (...)
        p.add_(work)
