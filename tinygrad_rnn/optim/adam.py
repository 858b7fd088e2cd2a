"""Adam and AdamW: adaptive moment estimation, with L2 or decoupled weight decay."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..backend import get_array_module
from ..tensor import Tensor
from .. import _validate
from .optimizer import (
    Optimizer, ParamsT, check_nonneg, check_torch_flags, check_unit_interval,
    lerp_,
    new_step_counter,
)

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    r"""Adam (torch.optim.Adam's update rule, defaults and state).

    Math
    ----
    At step t (counted per parameter, from 1) with gradient g_t (``-dL/dtheta`` when
    ``maximize``), learning rate gamma, decay rates beta1, beta2 and weight decay lambda::

        g_t <- g_t + lambda * theta                     (L2 penalty, if weight_decay != 0)
        theta <- theta - gamma * lambda * theta         (instead, if decoupled_weight_decay)
        m_t = beta1 * m_{t-1} + (1 - beta1) * g_t       (first moment, m_0 = 0)
        v_t = beta2 * v_{t-1} + (1 - beta2) * g_t^2     (second moment, v_0 = 0)
        v_t^max = max(v_{t-1}^max, v_t)                 (amsgrad only; then v_t^max replaces
                                                          v_t below)
        m_hat = m_t / (1 - beta1^t),   v_hat = v_t / (1 - beta2^t)
        theta <- theta - gamma * m_hat / (sqrt(v_hat) + eps)

    It is computed as torch computes it, in the same order of operations (so overflow and
    underflow happen where they happen in torch, see Notes): ``m_t = lerp(m_{t-1}, g_t,
    1 - beta1)``, ``v_t = beta2 v_{t-1} + ((1 - beta2) g_t) g_t``, ``step_size = lr / (1 -
    beta1^t)``, ``denom = sqrt(v_t) / sqrt(1 - beta2^t) + eps`` (eps is added after the bias
    correction of v) and ``theta <- theta + (-step_size m_t) / denom``.

    Parameters
    ----------
    params : iterable of Tensor or of dict
        Tensors to optimize or parameter groups (see :class:`Optimizer`).
    lr : float
        Learning rate gamma >= 0 (default 1e-3).
    betas : (float, float)
        beta1, beta2 in [0, 1) (default (0.9, 0.999)).
    eps : float
        Added to the denominator for numerical stability, >= 0 (default 1e-8).
    weight_decay : float
        lambda >= 0 (default 0).
    amsgrad : bool
        Use the running maximum of v_t (Reddi et al., 2018).
    maximize : bool
        Maximize the objective instead of minimizing it.
    decoupled_weight_decay : bool
        Decay the weights directly (AdamW) instead of adding lambda theta to the gradient.
    foreach, capturable, differentiable, fused
        torch's implementation switches, keyword only: ``foreach`` is accepted without
        effect, the others only at their defaults (see ``check_torch_flags`` in
        :mod:`tinygrad_rnn.optim.optimizer`).

    State
    -----
    ``step`` (a 0-d float32 host array, as torch keeps it), ``exp_avg`` (m_t),
    ``exp_avg_sq`` (v_t), and ``max_exp_avg_sq`` with amsgrad.

    Notes
    -----
    The order matters at the edges of the floating-point range: in float32, ``g_t g_t``
    overflows from |g_t| = 1.8e19, but ``((1 - beta2) g_t) g_t`` (torch's ``addcmul_``) only
    from about 5.8e20 with beta2 = 0.999; squaring first made v_t inf after one gradient of
    3e19, and the parameter then never moved again. Likewise ``-step_size m_t`` is formed
    before the division, as in torch's ``addcdiv_``. See :mod:`tinygrad_rnn.optim.optimizer`
    for the one rounding where torch's CPU kernels differ (fused multiply-adds).

    References
    ----------
    D. P. Kingma and J. Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015.
    S. J. Reddi, S. Kale and S. Kumar, "On the Convergence of Adam and Beyond", ICLR 2018.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        check_torch_flags(type(self).__name__, foreach=foreach, fused=fused,
                           capturable=capturable, differentiable=differentiable)
        defaults = {
            "lr": lr, "betas": _pair(type(self).__name__, betas), "eps": eps,
            "weight_decay": weight_decay, "amsgrad": amsgrad, "maximize": maximize,
            "decoupled_weight_decay": decoupled_weight_decay,
        }
        super().__init__(params, defaults)

    _state_buffers = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    _required_state = ("step", "exp_avg", "exp_avg_sq")
    _nonneg_state = ("exp_avg_sq", "max_exp_avg_sq")

    def _check_group(self, group: dict[str, Any], where: str) -> None:
        super()._check_group(group, where)
        group["eps"] = check_nonneg(where, "epsilon value", "eps", group["eps"])
        betas = _pair(where, group["betas"])
        group["betas"] = (
            check_unit_interval(where, "beta parameter at index 0", "betas[0]", betas[0]),
            check_unit_interval(where, "beta parameter at index 1", "betas[1]", betas[1]),
        )
        group["weight_decay"] = check_nonneg(where, "weight_decay value", "weight_decay",
                                              group["weight_decay"])
        for flag in ("amsgrad", "maximize", "decoupled_weight_decay"):
            group[flag] = _validate.flag(group[flag], flag, where)

    def _update(self, p: Tensor, grad: Any, state: dict[str, Any],
                group: dict[str, Any]) -> None:
        xp = get_array_module(p._data)
        if len(state) == 0:
            state["step"] = new_step_counter()
            state["exp_avg"] = xp.zeros_like(p._data)
            state["exp_avg_sq"] = xp.zeros_like(p._data)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = xp.zeros_like(p._data)
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps = float(group["eps"])
        weight_decay = float(group["weight_decay"])
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

        # exercise: adam_step begin
        state["step"] += 1
        t = float(state["step"])
        g = -grad if group["maximize"] else grad              # never modified in place
        if weight_decay != 0:
            if group["decoupled_weight_decay"]:
                p.mul_(1.0 - lr * weight_decay)               # theta <- theta - gamma lambda theta
            else:
                g = g + weight_decay * p._data                 # g_t <- g_t + lambda theta

        lerp_(exp_avg, g, 1.0 - beta1)                       # m_t
        exp_avg_sq *= beta2                                   # v_t = beta2 v_{t-1}
        work = xp.multiply(g, 1.0 - beta2, out=xp.empty_like(p._data))  # + ((1 - beta2) g_t) g_t
        work *= g
        exp_avg_sq += work

        bias_correction1 = 1.0 - beta1 ** t
        bias_correction2 = 1.0 - beta2 ** t
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2 ** 0.5
        if group["amsgrad"]:
            if "max_exp_avg_sq" not in state:  # switched on after the state was made
                state["max_exp_avg_sq"] = xp.zeros_like(p._data)
            v_max = state["max_exp_avg_sq"]
            xp.maximum(v_max, exp_avg_sq, out=v_max)
            xp.sqrt(v_max, out=work)
        else:
            xp.sqrt(exp_avg_sq, out=work)
        work /= bias_correction2_sqrt                         # denom = sqrt(v_t) / sqrt(bc2)
        work += eps                                           #         + eps
        xp.divide(exp_avg * (-step_size), work, out=work)     # (-step_size m_t) / denom
        p.add_(work)
        # exercise: end


def _pair(where: str, betas: Any) -> tuple[Any, Any]:
    """``betas`` as a tuple of two values (a tuple, a list or a NumPy array of two); a
    TypeError naming ``where`` for anything else (``betas=0.9``), a ValueError for another
    count. The values themselves are checked by ``_check_group``."""
    if isinstance(betas, np.ndarray):
        betas = betas.tolist() if betas.ndim == 1 else betas
    if not isinstance(betas, (tuple, list)):
        raise TypeError(f"{where}: betas must be a pair of real numbers (beta1, beta2), got "
                        f"{type(betas).__name__} {betas!r}")
    if len(betas) != 2:
        raise ValueError(f"{where}: Invalid betas: {tuple(betas)} (expected two values, "
                         f"beta1 and beta2)")
    return (betas[0], betas[1])


class AdamW(Adam):
    r"""AdamW: Adam with decoupled weight decay (torch.optim.AdamW).

    Math
    ----
    The weights decay directly, outside the moment estimates (lambda is not added to g_t)::

        theta <- theta - gamma * lambda * theta
        m_t, v_t, m_hat, v_hat as in :class:`Adam`
        theta <- theta - gamma * m_hat / (sqrt(v_hat) + eps)

    Parameters
    ----------
    params, lr, betas, eps, amsgrad, maximize
        As in :class:`Adam`.
    weight_decay : float
        Decoupled weight decay lambda >= 0 (default 1e-2).

    References
    ----------
    I. Loshchilov and F. Hutter, "Decoupled Weight Decay Regularization", ICLR 2019.
    """

    def __init__(self, params: ParamsT, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for group in self.param_groups:   # AdamW always decouples, whatever was saved
            group["decoupled_weight_decay"] = True
