"""Numerical robustness: the stable forms of sigmoid, softmax, log_softmax and the fused losses,
masks, where/masked_fill, and cross_entropy's ignore_index, run with floating-point errors
raised and warnings turned into errors.

Floating-point strictness
-------------------------
Every check runs inside :func:`strict_fp`: ``np.errstate(all='raise')`` (overflow, invalid
operation, divide by zero raise ``FloatingPointError``) with warnings as errors. Underflow is
the one exception and is left at NumPy's default ('ignore'): e^{-2e4} is not representable,
and rounding it to 0 is the correctly rounded result (a probability of e^{-2e4} is 0 in any
float format). An implementation that avoided underflow would have to return a wrong tiny
number instead of 0. Overflow, 0/0, inf - inf and log(0) are the failures this file hunts.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr

F = tr.functional
BOUNDS = {np.float64: 1e4, np.float32: 80.0}  # logit ranges that must stay warning-free
SUM_TOL = {np.float64: 1e-12, np.float32: 1e-6}


@contextlib.contextmanager
def strict_fp() -> Iterator[None]:
    """Raise on overflow, invalid and divide-by-zero; warnings are errors (see module doc)."""
    with np.errstate(all="raise", under="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def leaf(values: np.ndarray, dtype: type = np.float64) -> tr.Tensor:
    return tr.Tensor(np.asarray(values, dtype=dtype), requires_grad=True)


@st.composite
def logits(draw: st.DrawFn, dtype: type, min_classes: int = 1) -> np.ndarray:
    """(N, C) logits up to +-BOUNDS[dtype], with the extremes drawn often."""
    bound = BOUNDS[dtype]
    n, c = draw(st.integers(1, 4)), draw(st.integers(min_classes, 6))
    width = 64 if dtype is np.float64 else 32
    elements = st.one_of(
        st.floats(-bound, bound, width=width),
        st.sampled_from([-bound, bound, 0.0, bound / 2, -bound / 2]),
    )
    return draw(hnp.arrays(dtype, (n, c), elements=elements))


def _upstream(shape: tuple, dtype: type, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


# ----------------------------------------------------------------------------- large logits
def _run_sigmoid(x: tr.Tensor, seed: int) -> tr.Tensor:
    return F.sigmoid(x)


def _run_softmax(x: tr.Tensor, seed: int) -> tr.Tensor:
    return F.softmax(x, axis=-1)


def _run_log_softmax(x: tr.Tensor, seed: int) -> tr.Tensor:
    return F.log_softmax(x, axis=-1)


def _run_cross_entropy(x: tr.Tensor, seed: int) -> tr.Tensor:
    target = np.random.default_rng(seed).integers(0, x.shape[1], size=x.shape[0])
    return F.cross_entropy(x, target)


def _run_bce(x: tr.Tensor, seed: int) -> tr.Tensor:
    t = np.random.default_rng(seed).uniform(0, 1, size=x.shape).astype(x.dtype)
    t[..., 0] = 1.0  # hard targets too
    return F.binary_cross_entropy_with_logits(x, tr.Tensor(t))


STABLE_OPS: dict[str, Callable[[tr.Tensor, int], tr.Tensor]] = {
    "sigmoid": _run_sigmoid,
    "softmax": _run_softmax,
    "log_softmax": _run_log_softmax,
    "cross_entropy": _run_cross_entropy,
    "binary_cross_entropy_with_logits": _run_bce,
}


def _forward_backward(name: str, xv: np.ndarray, seed: int) -> tuple:
    x = leaf(xv, xv.dtype.type)
    y = STABLE_OPS[name](x, seed)
    y.backward(_upstream(y.shape, xv.dtype.type, seed + 1))
    return y.array, x.grad


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(STABLE_OPS))
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_no_floating_point_errors_and_finite_results_for_large_logits(
        name: str, dtype: type, data: st.DataObject, seed: int) -> None:
    xv = data.draw(logits(dtype))
    with strict_fp():
        y, grad = _forward_backward(name, xv, seed)
    assert y.dtype == dtype and grad.dtype == dtype and grad.shape == xv.shape
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(grad))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", sorted(STABLE_OPS))
def test_extreme_logit_rows(name: str, dtype: type) -> None:
    bound = BOUNDS[dtype]
    xv = np.array([[bound, -bound, 0.0], [-bound, -bound, -bound], [bound, bound, -bound]],
                  dtype=dtype)
    with strict_fp():
        y, grad = _forward_backward(name, xv, seed=0)
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(grad))


def test_saturated_values_are_exact() -> None:
    with strict_fp():
        s = F.sigmoid(tr.Tensor(np.array([-1e4, -40.0, 0.0, 40.0, 1e4]))).array
        p = F.softmax(tr.Tensor(np.array([1e4, -1e4, 0.0]))).array
        lp = F.log_softmax(tr.Tensor(np.array([1e4, -1e4]))).array
        loss = F.cross_entropy(tr.Tensor(np.array([[1e4, -1e4]])), np.array([1])).item()
        bce = F.binary_cross_entropy_with_logits(tr.Tensor(np.array([-1e4])),
                                                 tr.Tensor(np.array([1.0]))).item()
    np.testing.assert_array_equal(s[[0, 2, 4]], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(s[1], np.exp(-40.0) / (1 + np.exp(-40.0)), rtol=1e-15)
    np.testing.assert_allclose(s[3], 1.0 / (1 + np.exp(-40.0)), rtol=1e-15)
    np.testing.assert_array_equal(p, [1.0, 0.0, 0.0])
    np.testing.assert_array_equal(lp, [0.0, -2e4])
    assert loss == 2e4 and bce == 1e4


def _check_sums_to_one(xv: np.ndarray) -> None:
    dtype = xv.dtype.type
    with strict_fp():
        lp = F.log_softmax(tr.Tensor(xv), axis=-1).array
        p = F.softmax(tr.Tensor(xv), axis=-1).array
    assert lp.dtype == dtype and p.dtype == dtype
    np.testing.assert_allclose(np.exp(lp).sum(axis=-1), 1.0, rtol=0, atol=SUM_TOL[dtype])
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=0, atol=SUM_TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@given(data=st.data())
def test_exp_log_softmax_sums_to_one(dtype: type, data: st.DataObject) -> None:
    _check_sums_to_one(data.draw(logits(dtype)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_exp_log_softmax_sums_to_one_extreme_rows(dtype: type) -> None:
    b = BOUNDS[dtype]
    _check_sums_to_one(np.array([[b, 0.0, -b], [b, b, b], [-b, -b, b], [0.5, 0.25, 0.125]],
                                dtype=dtype))


@pytest.mark.parametrize("name", sorted(STABLE_OPS))
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_float32_results_match_float64_reference(name: str, data: st.DataObject,
                                                 seed: int) -> None:
    """float32 in gives float32 out and float32 grads, close to the float64 computation on
    the same (float32-representable) values."""
    x32 = data.draw(logits(np.float32))
    with strict_fp():
        y32, g32 = _forward_backward(name, x32, seed)
        y64, g64 = _forward_backward(name, x32.astype(np.float64), seed)
    assert y32.dtype == np.float32 and g32.dtype == np.float32
    # float32 carries ~7 digits; log-probabilities reach -160, hence the absolute part
    np.testing.assert_allclose(y32, y64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g32, g64, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- masks
@st.composite
def masked_rows(draw: st.DrawFn, allow_empty_rows: bool) -> tuple:
    """(x, mask) of shape (N, C); without allow_empty_rows every row keeps an entry."""
    n, c = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    x = draw(hnp.arrays(np.float64, (n, c), elements=st.floats(-30, 30)))
    mask = draw(hnp.arrays(np.bool_, (n, c)))
    if not allow_empty_rows:
        for i in range(n):
            if not mask[i].any():
                mask[i, draw(st.integers(0, c - 1))] = True
    return x, mask


@given(case=masked_rows(allow_empty_rows=False), seed=st.integers(0, 2**31 - 1))
def test_partially_masked_softmax_equals_softmax_over_unmasked_subset(case: tuple,
                                                                      seed: int) -> None:
    xv, mask = case
    v = _upstream(xv.shape, np.float64, seed)
    x = leaf(xv)
    with strict_fp():
        y = F.softmax(x, mask=mask)
        y.backward(v)
    for i in range(xv.shape[0]):
        keep = mask[i]
        sub = leaf(xv[i, keep])
        with strict_fp():
            ys = F.softmax(sub)
            ys.backward(v[i, keep])
        np.testing.assert_allclose(y.array[i, keep], ys.array, rtol=1e-14, atol=1e-300)
        np.testing.assert_allclose(x.grad[i, keep], sub.grad, rtol=1e-12, atol=1e-15)
        assert np.all(y.array[i, ~keep] == 0.0) and np.all(x.grad[i, ~keep] == 0.0)


@given(case=masked_rows(allow_empty_rows=False), seed=st.integers(0, 2**31 - 1))
def test_partially_masked_log_softmax_equals_log_softmax_over_unmasked_subset(
        case: tuple, seed: int) -> None:
    xv, mask = case
    v = _upstream(xv.shape, np.float64, seed)
    x = leaf(xv)
    with strict_fp():
        y = F.log_softmax(x, mask=mask)
        y.backward(v)
    for i in range(xv.shape[0]):
        keep = mask[i]
        sub = leaf(xv[i, keep])
        with strict_fp():
            ys = F.log_softmax(sub)
            ys.backward(v[i, keep])
        np.testing.assert_allclose(y.array[i, keep], ys.array, rtol=1e-14, atol=1e-14)
        np.testing.assert_allclose(x.grad[i, keep], sub.grad, rtol=1e-12, atol=1e-14)
        assert np.all(y.array[i, ~keep] == -np.inf) and np.all(x.grad[i, ~keep] == 0.0)


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
def test_fully_masked_row_gives_exact_zeros_and_zero_gradient(fn: Callable) -> None:
    xv = np.array([[1.0, 2.0, 3.0], [4.0, -5.0, 6.0], [0.5, 0.5, 9.0]])
    mask = np.array([[True, True, False], [False, False, False], [True, True, True]])
    v = np.arange(9.0).reshape(3, 3) - 4.0
    x = leaf(xv)
    with strict_fp():
        y = fn(x, mask=mask)
        y.backward(v)
    if fn is F.softmax:
        np.testing.assert_array_equal(y.array[1], [0.0, 0.0, 0.0])
    else:
        np.testing.assert_array_equal(y.array[1], [-np.inf, -np.inf, -np.inf])
    np.testing.assert_array_equal(x.grad[1], [0.0, 0.0, 0.0])
    # the other rows are bit-identical to computing them without the empty row
    keep = leaf(xv[[0, 2]])
    with strict_fp():
        y2 = fn(keep, mask=mask[[0, 2]])
        y2.backward(v[[0, 2]])
    np.testing.assert_array_equal(y.array[[0, 2]], y2.array)
    np.testing.assert_array_equal(x.grad[[0, 2]], keep.grad)


MASKED_JUNK = [np.inf, -np.inf, np.nan, 1e30, -1e30, 1e308]


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax], ids=["softmax", "log_softmax"])
@given(case=masked_rows(allow_empty_rows=True), junk=st.sampled_from(MASKED_JUNK),
       seed=st.integers(0, 2**31 - 1))
def test_masked_entries_holding_inf_nan_or_huge_change_nothing(fn: Callable, case: tuple,
                                                               junk: float, seed: int) -> None:
    xv, mask = case
    v = _upstream(xv.shape, np.float64, seed)
    clean = np.where(mask, xv, 0.0)
    dirty = np.where(mask, xv, junk)
    results = []
    for values in (clean, dirty):
        x = leaf(values)
        with strict_fp():
            y = fn(x, mask=mask)
            y.backward(v)
        results.append((y.array, x.grad))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_array_equal(results[1][1], results[0][1])
    assert not np.any(np.isnan(results[1][1]))


def test_masked_huge_logit_gives_exact_zero_gradient() -> None:
    """The JAX regression (jax#19490): x = [36, 10000], the 10000 masked out; the one valid
    entry has probability 1 whatever its value, so the gradient is exactly 0."""
    x = leaf(np.array([36.0, 10000.0]))
    with strict_fp():
        y = F.softmax(x, mask=x.array < 1000)
        y.backward(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(y.array, [1.0, 0.0])
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])


# ----------------------------------------------------------------------------- where
def test_where_gradient_of_branch_not_taken_is_exactly_zero_even_for_inf_and_nan() -> None:
    a = leaf(np.array([np.inf, np.nan, 2.0, -np.inf]))
    b = leaf(np.array([1.0, 2.0, np.nan, 4.0]))
    cond = np.array([False, False, True, False])
    g = np.array([1.0, -2.0, 3.0, 4.0])
    with strict_fp():
        out = tr.where(cond, a, b)
        out.backward(g)
    np.testing.assert_array_equal(out.array, [1.0, 2.0, 2.0, 4.0])
    np.testing.assert_array_equal(a.grad, [0.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(b.grad, [1.0, -2.0, 0.0, 4.0])


def test_where_with_nonfinite_untaken_branch_inside_a_larger_graph() -> None:
    """A downstream op multiplies the where output: the untaken inf still never appears."""
    a = leaf(np.array([np.inf, 0.5]))
    b = leaf(np.array([0.25, np.nan]))
    with strict_fp():
        out = tr.where(np.array([False, True]), a, b)
        loss = (out * out).sum()
        loss.backward()
    np.testing.assert_array_equal(a.grad, [0.0, 1.0])
    np.testing.assert_array_equal(b.grad, [0.5, 0.0])


def test_double_where_keeps_log_of_zero_out_of_the_gradient() -> None:
    """y = log(x) where x > 0 else 0: sanitize the dead branch's input with a second where,
    and no inf or 0/0 reaches the forward or the gradient."""
    x = leaf(np.array([0.0, 2.0, -1.0, 0.5]))
    positive = x.array > 0
    with strict_fp():
        safe = tr.where(positive, x, tr.Tensor(np.ones(4)))
        y = tr.where(positive, F.log(safe), tr.Tensor(np.zeros(4)))
        y.sum().backward()
    np.testing.assert_array_equal(y.array, [0.0, np.log(2.0), 0.0, np.log(0.5)])
    np.testing.assert_array_equal(x.grad, [0.0, 0.5, 0.0, 2.0])


@pytest.mark.parametrize("junk", MASKED_JUNK)
def test_masked_fill_hides_nonfinite_values_from_output_and_gradient(junk: float) -> None:
    x = leaf(np.array([[1.0, junk, 3.0], [junk, junk, -2.0]]))
    mask = ~np.isfinite(x.array) | (np.abs(x.array) > 1e6)
    with strict_fp():
        y = F.masked_fill(x, mask, -1e9)
        s = F.softmax(y, axis=-1)
        s.backward(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
        y2 = x.masked_fill(mask, 0.0)  # the method form
        y2.sum().backward()
    assert np.all(np.isfinite(s.array)) and not np.any(np.isnan(x.grad))
    np.testing.assert_array_equal(x.grad[mask], 0.0)
    np.testing.assert_array_equal(y2.array[mask], 0.0)


# ----------------------------------------------------------------------------- ignore_index
@st.composite
def ce_batches(draw: st.DrawFn, dtype: type) -> tuple:
    """(logits, target, ignore_index, ignored rows) with some rows ignored; ignored rows hold
    logits +-1e30 (finite in float32 and float64)."""
    n, c = draw(st.integers(1, 6)), draw(st.integers(2, 5))
    x = draw(hnp.arrays(dtype, (n, c), elements=st.floats(-20, 20, width=32)))
    ignore_index = draw(st.sampled_from([-100, -1, c + 3, 0]))
    valid_ids = [k for k in range(c) if k != ignore_index]
    target = np.array([draw(st.sampled_from(valid_ids)) for _ in range(n)])
    ignored = draw(hnp.arrays(np.bool_, (n,)))
    target[ignored] = ignore_index
    huge = draw(hnp.arrays(dtype, (n, c), elements=st.sampled_from([1e30, -1e30])))
    x[ignored] = huge[ignored]
    return x, target, ignore_index, ignored


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@given(case=st.data())
def test_cross_entropy_ignored_rows_get_exact_zero_gradient(dtype: type, reduction: str,
                                                            case: st.DataObject) -> None:
    xv, target, ignore_index, ignored = case.draw(ce_batches(dtype))
    x = leaf(xv, dtype)
    with strict_fp():
        loss = F.cross_entropy(x, target, ignore_index=ignore_index, reduction=reduction)
        loss.backward(np.ones(loss.shape, dtype=dtype))
    assert x.grad.dtype == dtype and np.all(np.isfinite(x.grad))
    assert np.all(x.grad[ignored] == 0.0)
    if reduction == "none":
        assert np.all(loss.array[ignored] == 0.0)
    kept = ~ignored
    if kept.any():  # the kept rows see exactly the loss over the kept rows alone
        sub = leaf(xv[kept], dtype)
        with strict_fp():
            ref = F.cross_entropy(sub, target[kept], ignore_index=ignore_index,
                                  reduction=reduction)
            ref.backward(np.ones(ref.shape, dtype=dtype))
        tol = 1e-12 if dtype is np.float64 else 1e-5
        np.testing.assert_allclose(x.grad[kept], sub.grad, rtol=tol, atol=tol)
        loss_kept = loss.array[kept] if reduction == "none" else loss.array
        np.testing.assert_allclose(loss_kept, ref.array, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_all_ignored_batch_gives_zero_loss_and_zero_gradient(dtype: type,
                                                             reduction: str) -> None:
    """Documented contract: the mean over zero rows is 0.0 with zero gradient (torch returns
    NaN there); never NaN, never a warning."""
    x = leaf(np.array([[1e30, -1e30, 0.0], [2.0, 1.0, -1e30]]), dtype)
    with strict_fp():
        loss = F.cross_entropy(x, np.array([-100, -100]), reduction=reduction,
                               weight=np.array([1.0, 2.0, 3.0]))
        loss.backward(np.ones(loss.shape, dtype=dtype))
    assert loss.dtype == dtype
    np.testing.assert_array_equal(loss.array, np.zeros(loss.shape))
    np.testing.assert_array_equal(x.grad, np.zeros((2, 3)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_ignored_rows_and_all_ignored_batch(reduction: str) -> None:
    x = leaf(np.array([[-1e30, -0.5, -2.0], [-0.1, -3.0, -1e30], [-1.0, -1.0, -1.0]]))
    with strict_fp():
        loss = F.nll_loss(x, np.array([1, -100, 2]), reduction=reduction)
        loss.backward(np.ones(loss.shape))
    np.testing.assert_array_equal(x.grad[1], [0.0, 0.0, 0.0])
    assert np.all(np.isfinite(x.grad))
    scale = 0.5 if reduction == "mean" else 1.0
    np.testing.assert_array_equal(x.grad[0], [0.0, -scale, 0.0])
    x2 = leaf(np.array([[-1.0, -2.0]]))
    with strict_fp():
        loss2 = F.nll_loss(x2, np.array([-100]), reduction=reduction)
        loss2.backward(np.ones(loss2.shape))
    np.testing.assert_array_equal(loss2.array, np.zeros(loss2.shape))
    np.testing.assert_array_equal(x2.grad, [[0.0, 0.0]])
