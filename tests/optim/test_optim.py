"""Optimizers: update rules against hand computations in plain NumPy and against torch.optim,
state dicts (round trip, snapshot semantics, torch's layout, through tinygrad_rnn.io),
dtype preservation, version counters, parameter groups and hyperparameter validation.

Every run feeds the same parameters and the same gradient sequence to both sides. Some
gradients are ``None`` on some steps, so skipping (and per-parameter step counters) is
compared too. Comparisons are float64, to 1e-12.
"""
from __future__ import annotations

import copy
import os
import re
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop

CLASSES: dict[str, type] = {
    "SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop, "Adagrad": Adagrad,
}
SHAPES = [(3,), (2, 4), (), (1, 3, 2)]  # a 0-d parameter included
TOL = dict(rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- harness
def set_raw_grad(p: tr.Tensor, value: Any) -> None:
    """Put ``value`` where the optimizers read the gradient, past the checks of the ``.grad``
    setter (where ``.grad`` is a Tensor property, the raw array lives in ``p._grad``), so
    that the optimizers' own checks are tested."""
    if hasattr(p, "_grad"):
        p._grad = value
    else:
        p.grad = value


def make_problem(seed: int, n_steps: int = 6, with_none: bool = True) -> tuple[list, list]:
    """Initial parameter values and a gradient sequence (lists of float64 arrays).
    With ``with_none``, parameter 0 has no gradient at step 1 and parameter 2 none at steps
    3 and 4 (they must be skipped, and their step counters must not advance)."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s) for s in SHAPES]
    grads: list[list[Any]] = [[rng.standard_normal(s) for s in SHAPES] for _ in range(n_steps)]
    if with_none and n_steps > 4:
        grads[1][0] = None
        grads[3][2] = None
        grads[4][2] = None
    return init, grads


def group_spec(params: list, groups: list | None) -> Any:
    """``params`` as given to an optimizer: a plain list, or groups ``[(indices, overrides)]``."""
    if groups is None:
        return params
    return [{"params": [params[i] for i in idx], **overrides} for idx, overrides in groups]


def make_ours(name: str, kwargs: dict, init: list, groups: list | None = None,
              dtype: Any = np.float64) -> tuple[list[tr.Tensor], Optimizer]:
    params = [tr.tensor(np.asarray(a, dtype=dtype), requires_grad=True) for a in init]
    return params, CLASSES[name](group_spec(params, groups), **kwargs)


def feed(params: list[tr.Tensor], opt: Optimizer, grads_seq: list[list]) -> None:
    for grads in grads_seq:
        for p, g in zip(params, grads):
            p.grad = None if g is None else np.array(g, dtype=p.dtype)
        opt.step()


def run_ours(name: str, kwargs: dict, init: list, grads_seq: list, groups: list | None = None,
             dtype: Any = np.float64) -> list[np.ndarray]:
    params, opt = make_ours(name, kwargs, init, groups, dtype)
    feed(params, opt, grads_seq)
    return [p.numpy().copy() for p in params]


def make_torch(name: str, kwargs: dict, init: list, groups: list | None = None) -> tuple:
    torch = pytest.importorskip("torch")
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in init]
    return params, getattr(torch.optim, name)(group_spec(params, groups), **kwargs)


def feed_torch(params: list, opt: Any, grads_seq: list[list]) -> None:
    import torch

    for grads in grads_seq:
        for p, g in zip(params, grads):
            p.grad = None if g is None else torch.tensor(g, dtype=torch.float64)
        opt.step()


def run_torch(name: str, kwargs: dict, init: list, grads_seq: list,
              groups: list | None = None) -> list[np.ndarray]:
    params, opt = make_torch(name, kwargs, init, groups)
    feed_torch(params, opt, grads_seq)
    return [p.detach().numpy().copy() for p in params]


def assert_params_close(ours: list, theirs: list, **tol: float) -> None:
    tol = tol or TOL
    for k, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(a, b, err_msg=f"parameter {k}", **tol)


# ----------------------------------------------------------------------------- torch oracle
CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("SGD", dict(lr=0.1, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.8, weight_decay=0.05, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.5, weight_decay=0.2, maximize=True)),
    ("SGD", dict()),  # torch's defaults
    ("Adam", dict()),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, maximize=True)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.6), eps=1e-3, weight_decay=0.05, amsgrad=True,
                  maximize=True)),  # beta1 < 0.5: the other branch of the interpolation
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("AdamW", dict()),
    ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("RMSprop", dict()),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.5, eps=1e-3, maximize=True)),
    ("Adagrad", dict()),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05)),
    ("Adagrad", dict(lr=0.1, weight_decay=0.1, initial_accumulator_value=0.2)),
    ("Adagrad", dict(lr=0.1, eps=1e-3, maximize=True, lr_decay=0.01)),
]


def case_id(case: tuple) -> str:
    name, kwargs = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items())


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_torch(case: tuple, seed: int) -> None:
    name, kwargs = case
    init, grads = make_problem(seed)
    assert_params_close(run_ours(name, kwargs, init, grads),
                        run_torch(name, kwargs, init, grads))


GROUP_CASES = [
    ("SGD", dict(lr=0.1, momentum=0.9),
     [((0, 2), {"lr": 0.02}), ((1, 3), {"momentum": 0.5, "nesterov": True})]),
    ("Adam", dict(lr=0.01), [((0,), {"lr": 0.1, "amsgrad": True}), ((1, 2, 3), {})]),
    ("AdamW", dict(lr=0.01), [((3, 0), {"weight_decay": 0.5}), ((1, 2), {"lr": 0.001})]),
    ("RMSprop", dict(lr=0.01), [((0, 1), {"centered": True}), ((2, 3), {"momentum": 0.3})]),
    ("Adagrad", dict(lr=0.1), [((0, 1, 2), {"lr_decay": 0.1}), ((3,), {"lr": 0.5})]),
]


@pytest.mark.parametrize("name,kwargs,groups", GROUP_CASES, ids=[c[0] for c in GROUP_CASES])
def test_param_groups_match_torch(name: str, kwargs: dict, groups: list) -> None:
    init, grads = make_problem(3)
    assert_params_close(run_ours(name, kwargs, init, grads, groups),
                        run_torch(name, kwargs, init, grads, groups))


@st.composite
def optimizer_configs(draw: Callable) -> tuple[str, dict]:
    """An optimizer name and random (valid) hyperparameters."""
    name = draw(st.sampled_from(sorted(CLASSES)))
    lr = draw(st.floats(1e-3, 0.5))
    wd = draw(st.sampled_from([0.0, draw(st.floats(1e-3, 0.3))]))
    maximize = draw(st.booleans())
    if name == "SGD":
        momentum = draw(st.sampled_from([0.0, draw(st.floats(0.05, 0.99))]))
        nesterov = momentum > 0 and draw(st.booleans())
        dampening = 0.0 if nesterov else draw(st.sampled_from([0.0, 0.4]))
        return name, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=wd,
                          nesterov=nesterov, maximize=maximize)
    if name in ("Adam", "AdamW"):
        betas = (draw(st.floats(0.0, 0.99)), draw(st.floats(0.0, 0.999)))
        return name, dict(lr=lr, betas=betas, eps=draw(st.sampled_from([1e-8, 1e-3])),
                          weight_decay=wd, amsgrad=draw(st.booleans()), maximize=maximize)
    if name == "RMSprop":
        return name, dict(lr=lr, alpha=draw(st.floats(0.1, 0.999)), weight_decay=wd,
                          momentum=draw(st.sampled_from([0.0, 0.9])),
                          centered=draw(st.booleans()), maximize=maximize)
    return name, dict(lr=lr, lr_decay=draw(st.sampled_from([0.0, 0.1])), weight_decay=wd,
                      initial_accumulator_value=draw(st.sampled_from([0.0, 0.5])),
                      maximize=maximize)


@given(config=optimizer_configs(), seed=st.integers(0, 2**16))
def test_random_hyperparameters_match_torch(config: tuple, seed: int) -> None:
    name, kwargs = config
    init, grads = make_problem(seed, n_steps=5)
    assert_params_close(run_ours(name, kwargs, init, grads),
                        run_torch(name, kwargs, init, grads))


# ----------------------------------------------------------------------------- by hand
def sgd_by_hand(init: list, grads_seq: list, lr: float, momentum: float = 0.0,
                dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                maximize: bool = False) -> list:
    """SGD written out as on the slides: v <- mu v + (1 - tau) g (v = g the first time),
    theta <- theta - lr * v (or lr * (g + mu v) with Nesterov)."""
    theta = [a.copy() for a in init]
    velocity: list[Any] = [None] * len(init)
    for grads in grads_seq:
        for i, g in enumerate(grads):
            if g is None:
                continue
            d = -g if maximize else g
            d = d + weight_decay * theta[i]
            if momentum:
                if velocity[i] is None:
                    velocity[i] = d
                else:
                    velocity[i] = momentum * velocity[i] + (1 - dampening) * d
                d = d + momentum * velocity[i] if nesterov else velocity[i]
            theta[i] = theta[i] - lr * d
    return theta


def adam_by_hand(init: list, grads_seq: list, lr: float, beta1: float, beta2: float,
                 eps: float, weight_decay: float = 0.0, amsgrad: bool = False,
                 decoupled: bool = False, maximize: bool = False) -> list:
    """Adam as in Kingma and Ba, with bias-corrected moments m_hat, v_hat."""
    theta = [a.copy() for a in init]
    m = [np.zeros_like(a) for a in init]
    v = [np.zeros_like(a) for a in init]
    v_max = [np.zeros_like(a) for a in init]
    t = [0] * len(init)
    for grads in grads_seq:
        for i, g in enumerate(grads):
            if g is None:
                continue
            t[i] += 1
            g = -g if maximize else g
            if decoupled:
                theta[i] = theta[i] - lr * weight_decay * theta[i]
            else:
                g = g + weight_decay * theta[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g ** 2
            v_max[i] = np.maximum(v_max[i], v[i])
            m_hat = m[i] / (1 - beta1 ** t[i])
            v_hat = (v_max[i] if amsgrad else v[i]) / (1 - beta2 ** t[i])
            theta[i] = theta[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return theta


def rmsprop_by_hand(init: list, grads_seq: list, lr: float, alpha: float, eps: float,
                    momentum: float = 0.0, centered: bool = False) -> list:
    theta = [a.copy() for a in init]
    sq = [np.zeros_like(a) for a in init]
    mean = [np.zeros_like(a) for a in init]
    buf = [np.zeros_like(a) for a in init]
    for grads in grads_seq:
        for i, g in enumerate(grads):
            if g is None:
                continue
            sq[i] = alpha * sq[i] + (1 - alpha) * g ** 2
            mean[i] = alpha * mean[i] + (1 - alpha) * g
            rms = np.sqrt(sq[i] - mean[i] ** 2) if centered else np.sqrt(sq[i])
            step = g / (rms + eps)
            if momentum:
                buf[i] = momentum * buf[i] + step
                step = buf[i]
            theta[i] = theta[i] - lr * step
    return theta


def adagrad_by_hand(init: list, grads_seq: list, lr: float, lr_decay: float, eps: float,
                    initial: float) -> list:
    theta = [a.copy() for a in init]
    total = [np.full_like(a, initial) for a in init]
    t = [0] * len(init)
    for grads in grads_seq:
        for i, g in enumerate(grads):
            if g is None:
                continue
            t[i] += 1
            total[i] = total[i] + g ** 2
            rate = lr / (1 + (t[i] - 1) * lr_decay)
            theta[i] = theta[i] - rate * g / (np.sqrt(total[i]) + eps)
    return theta


@given(lr=st.floats(1e-3, 0.5), momentum=st.floats(0.0, 0.99), dampening=st.floats(0, 0.9),
       weight_decay=st.sampled_from([0.0, 0.1]), nesterov=st.booleans(),
       maximize=st.booleans(), seed=st.integers(0, 2**16))
def test_sgd_matches_hand_computation(lr: float, momentum: float, dampening: float,
                                      weight_decay: float, nesterov: bool, maximize: bool,
                                      seed: int) -> None:
    if nesterov:
        momentum, dampening = max(momentum, 0.1), 0.0
    kwargs = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                  nesterov=nesterov, maximize=maximize)
    init, grads = make_problem(seed)
    assert_params_close(run_ours("SGD", kwargs, init, grads),
                        sgd_by_hand(init, grads, **kwargs))


def test_sgd_plain_rule_is_theta_minus_lr_grad() -> None:
    """The lectures' rule theta <- theta - lr * grad, written out for one step."""
    theta0, g = np.array([0.5, -1.0, 2.0]), np.array([0.1, 0.2, -0.3])
    w = tr.tensor(theta0.copy(), requires_grad=True)
    w.grad = g.copy()
    SGD([w], lr=0.5).step()
    np.testing.assert_array_equal(w.numpy(), theta0 - 0.5 * g)


@given(lr=st.floats(1e-3, 0.1), beta1=st.floats(0.0, 0.99), beta2=st.floats(0.0, 0.999),
       eps=st.sampled_from([1e-8, 1e-4]), weight_decay=st.sampled_from([0.0, 0.1]),
       amsgrad=st.booleans(), decoupled=st.booleans(), maximize=st.booleans(),
       seed=st.integers(0, 2**16))
def test_adam_matches_hand_computation(lr: float, beta1: float, beta2: float, eps: float,
                                       weight_decay: float, amsgrad: bool, decoupled: bool,
                                       maximize: bool, seed: int) -> None:
    init, grads = make_problem(seed)
    name = "AdamW" if decoupled else "Adam"
    ours = run_ours(name, dict(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay,
                               amsgrad=amsgrad, maximize=maximize), init, grads)
    hand = adam_by_hand(init, grads, lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled,
                        maximize)
    assert_params_close(ours, hand)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_matches_hand_computation(momentum: float, centered: bool) -> None:
    init, grads = make_problem(5)
    ours = run_ours("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, momentum=momentum,
                                    centered=centered), init, grads)
    assert_params_close(ours, rmsprop_by_hand(init, grads, 0.01, 0.9, 1e-6, momentum,
                                              centered))


def test_adagrad_matches_hand_computation() -> None:
    init, grads = make_problem(6)
    ours = run_ours("Adagrad", dict(lr=0.1, lr_decay=0.05, eps=1e-6,
                                    initial_accumulator_value=0.3), init, grads)
    assert_params_close(ours, adagrad_by_hand(init, grads, 0.1, 0.05, 1e-6, 0.3))


def test_adam_first_step_moves_every_coordinate_by_lr() -> None:
    """With eps negligible, Adam's first step is -lr * sign(g) in every coordinate."""
    w = tr.tensor(np.zeros(4), requires_grad=True)
    w.grad = np.array([3.0, -0.01, 250.0, -7.0])
    Adam([w], lr=0.1, eps=1e-12).step()
    np.testing.assert_allclose(w.numpy(), -0.1 * np.sign(w.grad), rtol=1e-9)


# ----------------------------------------------------------------------------- contract
ALL_CONFIGS = [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1, nesterov=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1)),
]
CONFIG_IDS = [c[0] for c in ALL_CONFIGS]


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_grad_none_is_skipped(name: str, kwargs: dict) -> None:
    """A parameter without a gradient is not touched and (except Adagrad, which creates its
    state eagerly as torch does) gets no state."""
    init, grads = make_problem(2)
    for step in grads:
        step[1] = None
    params, opt = make_ours(name, kwargs, init)
    feed(params, opt, grads)
    np.testing.assert_array_equal(params[1].numpy(), init[1])
    assert params[1].grad is None
    if name == "Adagrad":
        assert float(opt.state[params[1]]["step"]) == 0
    else:
        assert params[1] not in opt.state
    assert not np.array_equal(params[0].numpy(), init[0])


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_step_does_not_modify_grad(name: str, kwargs: dict) -> None:
    init, grads = make_problem(4, with_none=False)
    params, opt = make_ours(name, dict(kwargs, maximize=True), init)
    for step in grads[:3]:
        held = []
        for p, g in zip(params, step):
            p.grad = g.copy()
            held.append(p.grad)
        opt.step()
        for p, g, arr in zip(params, step, held):
            assert p.grad is arr
            np.testing.assert_array_equal(p.grad, g)


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_float32_stays_float32(name: str, kwargs: dict) -> None:
    """float32 parameters and state stay float32, even with NumPy float64 hyperparameters
    (NEP 50 would promote float32 arrays combined with np.float64 scalars), and follow the
    float64 run to float32 accuracy."""
    init, grads = make_problem(7)
    init32 = [a.astype(np.float32) for a in init]
    kwargs64 = {k: (np.float64(v) if isinstance(v, float) else v) for k, v in kwargs.items()}
    params, opt = make_ours(name, kwargs64, init32, dtype=np.float32)
    feed(params, opt, grads)
    for p in params:
        assert p.dtype == np.float32 and p.numpy().dtype == np.float32
        assert p.grad.dtype == np.float32
    for state in opt.state.values():
        for key, value in state.items():
            if key != "step":
                assert value.dtype == np.float32, key
    ref = run_ours(name, kwargs, [a.astype(np.float64) for a in init32], grads)
    assert_params_close([p.numpy() for p in params], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_step_bumps_version_counter(name: str, kwargs: dict) -> None:
    """A graph that saved a parameter before step() refuses to backpropagate after it."""
    w = tr.tensor(np.array([0.5, -0.25, 1.5]), requires_grad=True)
    x = tr.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    loss = (w * x).sum()  # Mul saves w's array for x's gradient (as torch does)
    opt = CLASSES[name]([w], **kwargs)
    w.grad = np.array([1.0, -1.0, 0.5])
    opt.step()
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_update_is_in_place(name: str, kwargs: dict) -> None:
    """As in torch, the parameter's array is updated in place: a detached view sees it."""
    w = tr.tensor(np.array([0.5, -0.25, 1.5]), requires_grad=True)
    array, view = w.numpy(), w.detach()
    opt = CLASSES[name]([w], **kwargs)
    w.grad = np.array([1.0, -1.0, 0.5])
    opt.step()
    assert np.shares_memory(w.numpy(), array)
    np.testing.assert_array_equal(array, w.numpy())
    np.testing.assert_array_equal(view.numpy(), w.numpy())
    assert not np.array_equal(w.numpy(), [0.5, -0.25, 1.5])


def test_step_with_real_backward_and_closure() -> None:
    """A closure is evaluated with gradients enabled (even inside no_grad) and its loss is
    returned; the update then uses the gradient the backward pass produced."""
    w = tr.tensor(np.array([1.0, -2.0]), requires_grad=True)
    opt = SGD([w], lr=0.25)

    def closure() -> tr.Tensor:
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with tr.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 5.0
    np.testing.assert_array_equal(w.numpy(), [0.5, -1.0])  # w - 0.25 * 2w


def test_zero_grad() -> None:
    a = tr.tensor(np.ones(3), requires_grad=True)
    b = tr.tensor(np.ones(2), requires_grad=True)
    opt = SGD([a, b], lr=0.1)
    a.grad = np.array([1.0, 2.0, 3.0])
    held = a.grad
    opt.zero_grad(set_to_none=False)
    assert a.grad is held
    np.testing.assert_array_equal(held, 0.0)
    assert b.grad is None
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_gradient_shape_or_dtype_mismatch_raises() -> None:
    w = tr.tensor(np.ones(3), requires_grad=True)
    opt = Adam([w])
    set_raw_grad(w, np.ones(4))
    with pytest.raises(ValueError, match=r"shape \(3,\).*\(4,\)"):
        opt.step()
    set_raw_grad(w, np.ones(3, dtype=np.float32))
    with pytest.raises(ValueError, match="float32"):
        opt.step()


@pytest.mark.parametrize("name", sorted(CLASSES))
@pytest.mark.parametrize("make_grad,type_name", [
    (lambda: tr.tensor(np.ones(3)), "tinygrad_rnn.tensor.Tensor"),
    (lambda: [1.0, 1.0, 1.0], "builtins.list"),
    (lambda: np.float64(1.0), "numpy.float64"),
    (lambda: np.ma.array(np.ones(3)), "numpy.ma.MaskedArray"),
], ids=["Tensor", "list", "numpy-scalar", "masked-array"])
def test_a_gradient_that_is_not_a_raw_array_raises_naming_its_type(
        name: str, make_grad: Callable, type_name: str) -> None:
    """A Tensor assigned to p.grad (a torch habit) used to give an error listing two
    identical shapes and dtypes; a list gave an AttributeError."""
    first = tr.tensor(np.zeros(2), requires_grad=True)     # a good gradient, listed first
    w = tr.tensor(np.zeros(3), requires_grad=True)
    opt = CLASSES[name]([{"params": [first]}, {"params": [w]}], lr=0.1)
    states_before = [{k: np.copy(v) for k, v in opt.state[q].items()} for q in (first, w)]
    first.grad = np.ones(2)
    set_raw_grad(w, make_grad())
    with pytest.raises(TypeError, match=(
            rf"^{name}\.step: parameter 0 of param group 1, of shape \(3,\), dtype float64 "
            rf"on cpu, has a gradient of type {re.escape(type_name)}; assign p\.grad a Tensor "
            rf"or an array")):
        opt.step()
    # checked before anything moved: neither parameter nor any state changed
    np.testing.assert_array_equal(first.numpy(), np.zeros(2))
    np.testing.assert_array_equal(w.numpy(), np.zeros(3))
    for q, before in zip((first, w), states_before):
        assert set(opt.state[q]) == set(before)
        for k, v in opt.state[q].items():
            np.testing.assert_array_equal(v, before[k])


def test_adamw_is_adam_with_decoupled_weight_decay() -> None:
    init, grads = make_problem(8)
    kwargs = dict(lr=0.01, weight_decay=0.2, amsgrad=True)
    np.testing.assert_array_equal(
        np.concatenate([a.ravel() for a in run_ours("AdamW", kwargs, init, grads)]),
        np.concatenate([a.ravel() for a in run_ours(
            "Adam", dict(kwargs, decoupled_weight_decay=True), init, grads)]),
    )
    coupled = run_ours("Adam", kwargs, init, grads)
    assert not np.allclose(coupled[0], run_ours("AdamW", kwargs, init, grads)[0])


def test_defaults_mirror_torch() -> None:
    w = tr.tensor(np.ones(2), requires_grad=True)
    assert SGD([w]).defaults == dict(lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                                     nesterov=False, maximize=False)
    assert Adam([w]).defaults == dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                                      amsgrad=False, maximize=False,
                                      decoupled_weight_decay=False)
    assert AdamW([w]).defaults["weight_decay"] == 1e-2
    assert AdamW([w]).defaults["decoupled_weight_decay"] is True
    assert RMSprop([w]).defaults == dict(lr=1e-2, momentum=0, alpha=0.99, eps=1e-8,
                                         centered=False, weight_decay=0, maximize=False)
    assert Adagrad([w]).defaults == dict(lr=1e-2, lr_decay=0, eps=1e-10, weight_decay=0,
                                         initial_accumulator_value=0, maximize=False)


# ----------------------------------------------------------------------------- groups
def test_param_groups_use_their_own_lr_and_defaults() -> None:
    a = tr.tensor(np.array([1.0, 1.0]), requires_grad=True)
    b = tr.tensor(np.array([1.0]), requires_grad=True)
    opt = SGD([{"params": [a], "lr": 0.5}, {"params": b}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.5, 0.1]
    assert opt.param_groups[1]["params"] == [b]
    assert all(g["momentum"] == 0.9 for g in opt.param_groups)
    a.grad, b.grad = np.array([1.0, 2.0]), np.array([4.0])
    opt.step()
    np.testing.assert_array_equal(a.numpy(), [1.0 - 0.5, 1.0 - 1.0])
    np.testing.assert_array_equal(b.numpy(), [1.0 - 0.4])


def test_add_param_group() -> None:
    a = tr.tensor(np.ones(2), requires_grad=True)
    b = tr.tensor(np.ones(3), requires_grad=True)
    opt = Adagrad([a], lr=0.1)
    opt.add_param_group({"params": [b], "lr": 0.2})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr_decay"] == 0
    b.grad = np.ones(3)
    opt.step()  # Adagrad creates the state of a late parameter on its first step
    assert float(opt.state[b]["step"]) == 1
    np.testing.assert_allclose(b.numpy(), 1.0 - 0.2 * 1.0 / (1.0 + 1e-10), rtol=1e-15)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_param_group_errors() -> None:
    a = tr.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(TypeError, match="single Tensor"):
        SGD(a, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(TypeError, match="set"):
        SGD({a}, lr=0.1)
    with pytest.raises(TypeError, match="ndarray"):
        SGD([np.ones(2)], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([a * 2.0], lr=0.1)
    with pytest.raises(ValueError, match="more than once"):
        SGD([a, a], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [a]}, {"params": [a]}], lr=0.1)


INVALID = [
    (SGD, dict(lr=-0.1), "learning rate: -0.1"),
    (SGD, dict(lr=float("nan")), "learning rate: nan"),
    (SGD, dict(momentum=-0.5), "momentum value: -0.5"),
    (SGD, dict(weight_decay=-1e-4), "weight_decay value: -0.0001"),
    (SGD, dict(nesterov=True), "momentum=0"),
    (SGD, dict(nesterov=True, momentum=0.9, dampening=0.1), "dampening=0.1"),
    (Adam, dict(lr=-1.0), "learning rate: -1.0"),
    (Adam, dict(betas=(1.0, 0.999)), "index 0: 1.0"),
    (Adam, dict(betas=(0.9, -0.1)), "index 1: -0.1"),
    (Adam, dict(betas=(0.9, 0.999, 0.5)), "two values"),
    (Adam, dict(eps=-1e-8), "epsilon value: -1e-08"),
    (Adam, dict(weight_decay=-0.1), "weight_decay value: -0.1"),
    (AdamW, dict(weight_decay=-0.01), "weight_decay value: -0.01"),
    (AdamW, dict(betas=(0.9, 1.5)), "index 1: 1.5"),
    (RMSprop, dict(alpha=-0.5), "alpha value: -0.5"),
    (RMSprop, dict(momentum=-0.9), "momentum value: -0.9"),
    (RMSprop, dict(eps=-1.0), "epsilon value: -1.0"),
    (Adagrad, dict(lr_decay=-0.1), "lr_decay value: -0.1"),
    (Adagrad, dict(initial_accumulator_value=-1.0), "initial_accumulator_value value: -1.0"),
    (Adagrad, dict(eps=-1e-10), "epsilon value: -1e-10"),
]


@pytest.mark.parametrize("cls,kwargs,message", INVALID,
                         ids=[f"{c.__name__}-{m}" for c, _, m in INVALID])
def test_invalid_hyperparameters_raise(cls: type, kwargs: dict, message: str) -> None:
    w = tr.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cls([w], **kwargs)


def test_invalid_group_override_raises() -> None:
    """A bad value in a parameter group is refused too (torch checks only the defaults)."""
    w = tr.tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="learning rate: -0.5"):
        SGD([{"params": [w], "lr": -0.5}], lr=0.1)
    with pytest.raises(ValueError, match="index 1: 1.0"):
        Adam([{"params": [w], "betas": (0.9, 1.0)}])


# ----------------------------------------------------------------------------- state dicts
def test_state_dict_layout() -> None:
    init, grads = make_problem(9)
    params, opt = make_ours("Adam", dict(lr=0.01, amsgrad=True), init,
                            groups=[((2, 0), {"lr": 0.1}), ((1, 3), {})])
    feed(params, opt, grads[:2])
    sd = opt.state_dict()
    assert set(sd) == {"state", "param_groups"}
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2, 3]]
    assert sd["param_groups"][0]["lr"] == 0.1 and sd["param_groups"][1]["lr"] == 0.01
    # state is keyed by the index of the parameter in the groups' order: params[2] is 0
    assert set(sd["state"]) == {0, 1, 2, 3}
    st0 = sd["state"][0]
    assert set(st0) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert st0["step"].shape == () and st0["step"].dtype == np.float32
    assert float(st0["step"]) == 2.0
    assert float(sd["state"][1]["step"]) == 1.0  # params[0] had no gradient at step 1
    np.testing.assert_array_equal(st0["exp_avg"], opt.state[params[2]]["exp_avg"])


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS + [("SGD", dict(lr=0.1))],
                         ids=CONFIG_IDS + ["SGD-plain"])
def test_state_dict_round_trip_continues_identically(name: str, kwargs: dict) -> None:
    init, grads = make_problem(10, n_steps=8)
    groups = [((0, 3), {"lr": kwargs["lr"] / 2}), ((1, 2), {})]
    params, opt = make_ours(name, kwargs, init, groups)
    feed(params, opt, grads[:4])
    sd = opt.state_dict()
    frozen = copy.deepcopy(sd)

    # a fresh optimizer with other hyperparameters takes everything from the state dict
    params2, opt2 = make_ours(name, dict(kwargs, lr=123.0), [p.numpy() for p in params], groups)
    opt2.load_state_dict(sd)
    assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]
    feed(params, opt, grads[4:])
    feed(params2, opt2, grads[4:])
    for p, q in zip(params, params2):
        np.testing.assert_array_equal(p.numpy(), q.numpy())

    # the state dict was a snapshot: training on changed neither it nor the loaded copy
    assert_state_dicts_equal(sd, frozen)


def assert_state_dicts_equal(a: dict, b: dict) -> None:
    assert a["param_groups"] == b["param_groups"]
    assert set(a["state"]) == set(b["state"])
    for k in a["state"]:
        assert set(a["state"][k]) == set(b["state"][k])
        for name in a["state"][k]:
            np.testing.assert_array_equal(a["state"][k][name], b["state"][k][name])


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_state_dict_round_trip_through_io(tmp_path: Any, name: str, kwargs: dict) -> None:
    tio = pytest.importorskip("tinygrad_rnn.io")
    init, grads = make_problem(11, n_steps=8)
    params, opt = make_ours(name, kwargs, init)
    feed(params, opt, grads[:4])
    path = os.path.join(tmp_path, "opt.npz")
    tio.save(opt.state_dict(), path)
    params2, opt2 = make_ours(name, kwargs, [p.numpy() for p in params])
    opt2.load_state_dict(tio.load(path))
    assert_state_dicts_equal(opt2.state_dict(), opt.state_dict())
    feed(params, opt, grads[4:])
    feed(params2, opt2, grads[4:])
    for p, q in zip(params, params2):
        np.testing.assert_array_equal(p.numpy(), q.numpy())


@pytest.mark.parametrize("name,kwargs", ALL_CONFIGS, ids=CONFIG_IDS)
def test_state_dict_matches_torch_and_loads_torch_state(name: str, kwargs: dict) -> None:
    """Our state dict has torch's layout and values; a torch state dict loads into ours and
    both continue identically."""
    init, grads = make_problem(12, n_steps=8)
    groups = [((1, 2), {"lr": kwargs["lr"] * 2}), ((0, 3), {})]
    params, opt = make_ours(name, kwargs, init, groups)
    tparams, topt = make_torch(name, kwargs, init, groups)
    feed(params, opt, grads[:4])
    feed_torch(tparams, topt, grads[:4])
    ours, theirs = opt.state_dict(), topt.state_dict()
    assert set(ours["state"]) == set(theirs["state"])
    for k, entry in ours["state"].items():
        assert list(entry) == list(theirs["state"][k])
        for key, value in entry.items():
            np.testing.assert_allclose(value, theirs["state"][k][key].numpy(), **TOL)
    for g, tg in zip(ours["param_groups"], theirs["param_groups"]):
        for key, value in g.items():
            assert tg[key] == value, key

    params2, opt2 = make_ours(name, kwargs, [p.detach().numpy() for p in tparams], groups)
    opt2.load_state_dict(topt.state_dict())
    feed(params2, opt2, grads[4:])
    feed_torch(tparams, topt, grads[4:])
    assert_params_close([p.numpy() for p in params2], [p.detach().numpy() for p in tparams])


def test_adagrad_state_exists_before_the_first_step() -> None:
    a = tr.tensor(np.ones(2), requires_grad=True)
    opt = Adagrad([a], initial_accumulator_value=0.25)
    sd = opt.state_dict()
    assert float(sd["state"][0]["step"]) == 0.0
    np.testing.assert_array_equal(sd["state"][0]["sum"], [0.25, 0.25])


def test_load_state_dict_checks_groups() -> None:
    a = tr.tensor(np.ones(2), requires_grad=True)
    b = tr.tensor(np.ones(2), requires_grad=True)
    sd = SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="has 2 parameters, the optimizer's has 1"):
        SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="parameter groups"):
        SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)


STATEFUL = [("SGD", dict(lr=0.1, momentum=0.9)), ("Adam", dict(amsgrad=True)),
            ("AdamW", {}), ("RMSprop", dict(momentum=0.5, centered=True)), ("Adagrad", {})]


@pytest.mark.parametrize("name,kwargs", STATEFUL, ids=[n for n, _ in STATEFUL])
def test_load_state_dict_refuses_state_for_parameters_in_another_order(name: str,
                                                                       kwargs: dict) -> None:
    """A state dict made for (a, b) loaded into an optimizer over (b, a) (same count, other
    shapes) used to load, and step() then failed with a bare NumPy broadcast error. Now the
    load raises, naming the parameter, both shapes and the entry, and changes nothing."""
    a = tr.tensor(np.ones((3, 4)), requires_grad=True)
    b = tr.tensor(np.ones(4), requires_grad=True)
    opt = CLASSES[name]([a, b], **kwargs)
    a.grad, b.grad = np.ones((3, 4)), np.ones(4)
    opt.step()
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.123

    a2 = tr.tensor(np.ones((3, 4)), requires_grad=True)
    b2 = tr.tensor(np.ones(4), requires_grad=True)
    opt2 = CLASSES[name]([b2, a2], **kwargs)
    b2.grad, a2.grad = np.full(4, 2.0), np.full((3, 4), 2.0)
    opt2.step()                                       # opt2 has a state of its own
    groups_before = copy.deepcopy([{k: v for k, v in g.items() if k != "params"}
                                   for g in opt2.param_groups])
    state_before = {id(p): {k: np.copy(v) for k, v in opt2.state[p].items()}
                    for p in (a2, b2)}
    with pytest.raises(ValueError, match=(
            rf"^{name}\.load_state_dict: parameter 0 has shape \(4,\) but its state entry "
            rf"'\w+' has shape \(3, 4\)")):
        opt2.load_state_dict(sd)
    assert [{k: v for k, v in g.items() if k != "params"}
            for g in opt2.param_groups] == groups_before
    assert opt2.param_groups[0]["params"][0] is b2
    for p in (a2, b2):
        assert set(opt2.state[p]) == set(state_before[id(p)])
        for k, v in opt2.state[p].items():
            np.testing.assert_array_equal(v, state_before[id(p)][k])


@pytest.mark.parametrize("shape,saved_shape", [((4,), (1, 4)), ((), (1,)), ((2, 3), (3,))])
def test_load_state_dict_refuses_broadcastable_state_shapes(shape: tuple,
                                                            saved_shape: tuple) -> None:
    """Shapes that broadcast against the parameter are refused too (they would have failed
    inside step() or silently changed the state's shape)."""
    p = tr.tensor(np.ones(shape), requires_grad=True)
    opt = Adam([p], lr=0.1)
    sd = {"state": {0: {"step": np.float32(3), "exp_avg": np.full(saved_shape, 0.5),
                        "exp_avg_sq": np.full(saved_shape, 0.25)}},
          "param_groups": opt.state_dict()["param_groups"]}
    with pytest.raises(ValueError, match=(rf"parameter 0 has shape {re_shape(shape)} but its "
                                          rf"state entry 'exp_avg' has shape "
                                          rf"{re_shape(saved_shape)}")):
        opt.load_state_dict(sd)
    assert not opt.state[p]


def re_shape(shape: tuple) -> str:
    """A shape as a regular expression that matches its repr."""
    return repr(shape).replace("(", r"\(").replace(")", r"\)")


def test_load_state_dict_fills_and_checks_hyperparameters() -> None:
    a = tr.tensor(np.ones(2), requires_grad=True)
    sd = Adam([a], lr=0.5).state_dict()
    del sd["param_groups"][0]["amsgrad"]  # as from an older version
    opt = Adam([a], lr=0.1, amsgrad=True)
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["amsgrad"] is True and opt.param_groups[0]["lr"] == 0.5
    sd["param_groups"][0]["betas"] = (0.9, 1.5)
    with pytest.raises(ValueError, match="index 1: 1.5"):
        opt.load_state_dict(sd)


def test_load_state_dict_casts_to_parameter_dtype() -> None:
    """State saved from a float64 run loads into float32 parameters as float32 copies."""
    init, grads = make_problem(13)
    params, opt = make_ours("RMSprop", dict(momentum=0.5, centered=True), init)
    feed(params, opt, grads[:3])
    sd = opt.state_dict()
    params32, opt32 = make_ours("RMSprop", {}, [p.numpy() for p in params], dtype=np.float32)
    opt32.load_state_dict(sd)
    for p in params32:
        for key, value in opt32.state[p].items():
            assert value.dtype == np.float32, key
            if key != "step":
                index = next(i for i, q in enumerate(params32) if q is p)
                assert value is not sd["state"][index][key]


def test_repr_lists_groups() -> None:
    w = tr.tensor(np.ones(2), requires_grad=True)
    text = repr(Adam([w], lr=0.5))
    assert text.startswith("Adam (") and "Parameter Group 0" in text and "lr: 0.5" in text
