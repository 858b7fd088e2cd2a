"""Optimizers against torch.optim with extreme gradients, step by step.

Gradients of 1e19, 3e19, 1e30, 3.4e38, inf, nan, subnormals and mixed signs, in float32 and
float64, for every optimizer and its options. torch runs its single-tensor path
(``foreach=False``). After every step the parameters and every state buffer must have the
same finite / +inf / -inf / nan pattern as torch's, and the same values to the dtype's
rounding (rtol 1e-6 in float32, 1e-12 in float64; an absolute slack of a few subnormal
spacings, because torch's CPU kernels fuse some multiply-adds and a subnormal result then
differs by a spacing or two, which is a large relative difference).

The results agree only if every operation happens in torch's order: ``((1 - beta2) g) g``
and not ``(1 - beta2) (g g)`` (g g overflows float32 from |g| = 1.8e19, the other form
only from 5.8e20), ``(-step_size m) / denom`` and not ``-step_size (m / denom)``, and so on.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.optim import SGD, Adagrad, Adam, AdamW, RMSprop

torch = pytest.importorskip("torch")

CLASSES: dict[str, type] = {
    "SGD": SGD, "Adam": Adam, "AdamW": AdamW, "RMSprop": RMSprop, "Adagrad": Adagrad,
}
TORCH_DTYPE = {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}
RTOL = {np.dtype(np.float32): 1e-6, np.dtype(np.float64): 1e-12}

INF, NAN = float("inf"), float("nan")
TINY32 = float(np.finfo(np.float32).smallest_subnormal)  # 1.4e-45
EXTREMES = [1e19, 3e19, 1e30, 3.4e38, INF, NAN, TINY32, 1e-40, 1e-30, 0.0]

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.5, momentum=0.5, nesterov=True, weight_decay=0.5)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("Adam", dict(lr=0.02, betas=(0.3, 0.6), eps=1e-3, weight_decay=0.05, amsgrad=True)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("Adam", dict(lr=1.0, betas=(0.99, 0.9999), eps=0.0)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True, maximize=True)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, alpha=0.5, eps=1e-3, centered=True, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, eps=1e-3, initial_accumulator_value=0.2, maximize=True)),
]
INIT = [0.5, -1.5, 2.0, -0.25, 0.0, 1.0]


def config_id(config: tuple) -> str:
    name, kwargs = config
    return name + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items())


def patterns(a: np.ndarray) -> np.ndarray:
    """Each element's class: 0 finite, 1 +inf, 2 -inf, 3 nan."""
    return np.select([np.isposinf(a), np.isneginf(a), np.isnan(a)], [1, 2, 3], 0)


def assert_same(ours: Any, theirs: Any, scale: np.ndarray, dtype: np.dtype,
                what: str) -> None:
    """Same finite/+inf/-inf/nan pattern as torch's, and the same values to rounding:
    |ours - theirs| <= rtol * (|theirs| + scale) + a few subnormal spacings, where ``scale``
    is the largest finite magnitude this quantity has had so far (a value that cancels down
    from 1e18 carries rounding errors of the size of 1e18's, whichever way it is rounded)."""
    ours = np.asarray(ours)
    assert ours.dtype == theirs.dtype, f"{what}: dtype {ours.dtype} != torch's {theirs.dtype}"
    np.testing.assert_array_equal(patterns(ours), patterns(theirs),
                                  err_msg=f"{what}: finite/inf/nan pattern differs from torch's "
                                          f"(ours {ours}, torch {theirs})")
    both = np.isfinite(theirs)
    with np.errstate(over="ignore"):        # float64 differences near 1.8e308
        slack = (RTOL[dtype] * np.abs(theirs[both].astype(np.float64))
                 + RTOL[dtype] * scale[both] + 4 * float(np.finfo(dtype).smallest_subnormal))
        error = np.abs(ours[both].astype(np.float64) - theirs[both])
    bad = error > slack
    assert not bad.any(), (f"{what}: differs from torch's beyond rounding at "
                           f"{np.flatnonzero(both)[bad]}: ours {ours}, torch {theirs} "
                           f"(scale {scale})")


def as_numpy(value: Any) -> np.ndarray:
    return value.detach().numpy().copy() if hasattr(value, "detach") else np.asarray(value)


def run_both(name: str, kwargs: dict, init: list, grads_seq: list, dtype: Any) -> None:
    """Feed the same gradients to ours and torch's (single-tensor path), comparing the
    parameter and every state entry after every step."""
    dtype = np.dtype(dtype)
    p = tr.nn.Parameter(np.array(init, dtype=dtype))
    opt = CLASSES[name]([p], **kwargs)
    tp = torch.nn.Parameter(torch.tensor(np.array(init, dtype=dtype)))
    topt = getattr(torch.optim, name)([tp], foreach=False, **kwargs)
    scales: dict[str, np.ndarray] = {}

    def check(key: str, ours: Any, theirs: Any, where: str) -> None:
        theirs = as_numpy(theirs)
        magnitude = np.where(np.isfinite(theirs), np.abs(theirs.astype(np.float64)), 0.0)
        scale = np.maximum(scales.get(key, magnitude), magnitude)
        scales[key] = scale
        assert_same(ours, theirs, scale, dtype, f"{where}: {key}")

    check("parameter", p.numpy(), tp, "initial")
    for t, grad in enumerate(grads_seq, 1):
        g = np.array(grad, dtype=dtype)
        p.grad, tp.grad = g.copy(), torch.tensor(g.copy())
        with np.errstate(all="ignore"):   # overflow is the subject here, not a warning
            opt.step()
        topt.step()
        where = f"{name}({kwargs}) {dtype} after step {t} (gradients {grads_seq[:t]})"
        check("parameter", p.numpy(), tp, where)
        theirs = topt.state[tp]
        assert set(opt.state[p]) == set(theirs), where
        for key, value in theirs.items():
            check(key, opt.state[p][key], value, where)


def mixed_signs(value: float, n: int = len(INIT)) -> list:
    """``value`` with alternating signs, and a plain value in the middle."""
    out = [value if k % 2 == 0 else -value for k in range(n)]
    out[n // 2] = 0.75
    return out


# ----------------------------------------------------------------------------- regressions
def test_adam_second_moment_of_3e19_stays_finite_as_in_torch() -> None:
    """v = (1 - beta2) g^2 = 9e35 is a float32 number, but g g = 9e38 is not: squaring
    first made v inf, and the parameter never moved again (0.5 forever; torch: 0.4399)."""
    p = tr.nn.Parameter(np.array([0.5], np.float32))
    opt = tr.optim.Adam([p], lr=0.01)
    p.grad = np.array([3e19], np.float32)
    opt.step()
    assert np.isfinite(opt.state[p]["exp_avg_sq"]).all()
    for _ in range(2000):
        p.grad = np.array([1.0], np.float32)
        opt.step()
    np.testing.assert_allclose(p.numpy(), [0.43994504], rtol=1e-6)
    run_both("Adam", dict(lr=0.01), [0.5], [[3e19]] + [[1.0]] * 50, np.float32)


def test_centered_rmsprop_gradient_of_1e30_leaves_the_parameter_as_torch_does() -> None:
    """v = inf and gbar^2 = 1e56 (inf in float32): inf - inf made the parameter nan; torch
    computes v - gbar^2 in one rounding (inf) and the parameter stays 0.5."""
    p = tr.nn.Parameter(np.array([0.5], np.float32))
    opt = tr.optim.RMSprop([p], centered=True)
    p.grad = np.array([1e30], np.float32)
    with np.errstate(all="ignore"):
        opt.step()
    np.testing.assert_array_equal(p.numpy(), np.array([0.5], np.float32))
    run_both("RMSprop", dict(centered=True), [0.5], [[1e30], [1.0], [-2.0]], np.float32)


# ----------------------------------------------------------------------------- parametrized
@pytest.mark.parametrize("config", CONFIGS, ids=[config_id(c) for c in CONFIGS])
@pytest.mark.parametrize("value", EXTREMES, ids=[repr(v) for v in EXTREMES])
def test_one_extreme_gradient_then_ordinary_ones(config: tuple, value: float) -> None:
    name, kwargs = config
    grads = [mixed_signs(value), [1.0, -2.0, 0.5, 3.0, -1.0, 0.25], mixed_signs(0.5)]
    run_both(name, kwargs, INIT, grads, np.float32)


@pytest.mark.parametrize("config", CONFIGS, ids=[config_id(c) for c in CONFIGS])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_extreme_at_once_for_several_steps(config: tuple, dtype: Any) -> None:
    """Each coordinate gets its own extreme value at every step (signs flipping), so
    overflow, inf - inf and subnormal underflow all happen in one run."""
    name, kwargs = config
    values = [1e19, -3e19, 1e30, -3.4e38, TINY32, -1e-40]
    if np.dtype(dtype) == np.float64:
        values = [1e154, -3e154, 1e200, -1.7e308, 5e-324, -1e-310]
    grads = [[v * (-1) ** t for v in values] for t in range(4)]
    run_both(name, kwargs, INIT, grads, dtype)


@pytest.mark.parametrize("config", CONFIGS, ids=[config_id(c) for c in CONFIGS])
def test_float64_thresholds(config: tuple) -> None:
    """The same orders of operations matter in float64, at 1e154 and beyond."""
    name, kwargs = config
    grads = [mixed_signs(3e154), mixed_signs(1e200), [1.0, -2.0, 0.5, 3.0, -1.0, 0.25]]
    run_both(name, kwargs, INIT, grads, np.float64)


# ----------------------------------------------------------------------------- hypothesis
BIG32 = float(np.float32(1e25))
ELEMENT = st.one_of(
    st.sampled_from([1e19, -1e19, 3e19, -3e19, 1e30, -1e30, 3.4e38, -3.4e38, INF, -INF, NAN,
                     TINY32, -TINY32, 1e-40, 0.0, -0.0]),
    st.floats(-10.0, 10.0, width=32),
    st.floats(-BIG32, BIG32, width=32),
)


@st.composite
def configs(draw: Any) -> tuple:
    """A random optimizer with random options (hyperparameters in ordinary ranges)."""
    name = draw(st.sampled_from(sorted(CLASSES)))
    lr = draw(st.sampled_from([1e-3, 0.01, 0.1, 1.0]))
    wd = draw(st.sampled_from([0.0, 0.01, 0.5]))
    maximize = draw(st.booleans())
    if name == "SGD":
        momentum = draw(st.sampled_from([0.0, 0.5, 0.9]))
        nesterov = momentum > 0 and draw(st.booleans())
        dampening = 0.0 if nesterov else draw(st.sampled_from([0.0, 0.3]))
        kwargs = dict(momentum=momentum, dampening=dampening, nesterov=nesterov)
    elif name in ("Adam", "AdamW"):
        kwargs = dict(betas=draw(st.sampled_from([(0.9, 0.999), (0.3, 0.6), (0.0, 0.5)])),
                      eps=draw(st.sampled_from([1e-8, 1e-3])), amsgrad=draw(st.booleans()))
    elif name == "RMSprop":
        kwargs = dict(alpha=draw(st.sampled_from([0.99, 0.9, 0.5])),
                      momentum=draw(st.sampled_from([0.0, 0.9])), centered=draw(st.booleans()),
                      eps=draw(st.sampled_from([1e-8, 1e-3])))
    else:
        kwargs = dict(lr_decay=draw(st.sampled_from([0.0, 0.1])),
                      initial_accumulator_value=draw(st.sampled_from([0.0, 0.5])))
    return name, dict(lr=lr, weight_decay=wd, maximize=maximize, **kwargs)


@given(config=configs(),
       grads=st.lists(st.lists(ELEMENT, min_size=4, max_size=4), min_size=1, max_size=5))
@example(config=("Adam", dict(lr=0.01)), grads=[[3e19, -3e19, 1.0, 0.0]])
@example(config=("RMSprop", dict(lr=0.01, centered=True)), grads=[[1e30, -1e30, 1.0, 0.0]])
@example(config=("RMSprop", dict(lr=0.01, centered=True, momentum=0.9)),
         grads=[[3.4e38, -3.4e38, 1.0, 0.0], [-3.4e38, 3.4e38, 1.0, 0.0]])
@example(config=("Adagrad", dict(lr=1.0)), grads=[[3.4e38, 1e30, 3e19, 1.0]])
def test_random_extreme_gradients_match_torch(config: tuple, grads: list) -> None:
    name, kwargs = config
    run_both(name, kwargs, INIT[:4], grads, np.float32)
