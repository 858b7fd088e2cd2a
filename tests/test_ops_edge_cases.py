"""Regression tests for op edge cases found by a bug hunt: each test fails on the code before
its fix. Gradients are checked with ``tr.gradcheck`` in float64; torch, where it is
installed, is an oracle for values and dtypes only (``pytest.importorskip``).

1. binary_cross_entropy_with_logits refuses weight / pos_weight larger than the input.
2. Div's gradient for b is computed without b^2 (no float32 over- or underflow).
3. softmax / log_softmax refuse masks that are not boolean, with a hint that fits the
   mask's dtype (integer: a 0/1 keep mask, mask.astype(bool); float: additive, additive == 0).
4. clip of an integer tensor with float bounds computes in float32 (bounds not truncated).
5. min is a reduction of its own: right for unsigned ints, INT64_MIN and bool.
6. float16 mean over more than 65,504 elements; the float32 division unchanged bit for bit;
   float32 sums and means over a long batch axis accurate (pairwise), float64 ones NumPy's.
7. embedding checks padding_idx at call time.
8. transpose / permute never wrap an out-of-range axis.
9. add_ refuses a float alpha on an integer tensor.
10. arange with float arguments is float32 (torch's default dtype), int64 otherwise.
11. error messages name the op, shapes and dtypes (axes, cat, in-place ops on integers);
    reductions take NumPy integer axes and NumPy bools for keepdims, and refuse bool or float
    axes and keepdims other than a bool, 0 or 1.
12. an out-of-range index in ``x[index] = v`` names the op, the index, the axis and the
    shape, as ``x[index]`` does (the device half is in tests/device/test_api.py).
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr
from tinygrad_rnn import functional as F
from tinygrad_rnn.ops.base import pairwise_sum

BCE = "binary_cross_entropy_with_logits"


def leaf(values: Any, dtype: Any = np.float64) -> tr.Tensor:
    return tr.Tensor(np.asarray(values, dtype=dtype), requires_grad=True)


def assert_names(message: str, *parts: Any) -> None:
    for part in parts:
        assert str(part) in message, f"{part!r} missing from error message: {message!r}"


# ------------------------------------------------------------------ 1. BCE weight shapes
@pytest.mark.parametrize("name", ["weight", "pos_weight"])
@pytest.mark.parametrize("x_shape, w_shape", [((3,), (2, 3)), ((2, 3), (4, 3)),
                                               ((2, 3), (2,)), ((3,), (1, 3))])
def test_bce_refuses_weights_that_do_not_broadcast_to_the_input(name: str, x_shape: tuple,
                                                                w_shape: tuple) -> None:
    """A (2, 3) weight on a (3,) input used to widen the loss to (2, 3), with 'mean'
    dividing by 6 forward and by 3 backward; now it is refused, as torch refuses it."""
    x = leaf(np.zeros(x_shape))
    with pytest.raises(ValueError) as info:
        F.binary_cross_entropy_with_logits(x, np.zeros(x_shape), **{name: np.ones(w_shape)})
    assert_names(str(info.value), BCE, name, w_shape, x_shape)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_broadcast_weights_gradcheck(reduction: str) -> None:
    rng = np.random.default_rng(0)
    x, t = leaf(rng.standard_normal((2, 3))), leaf(rng.random((2, 3)))
    weight, pos_weight = rng.random(3) + 0.5, rng.random((1, 3)) + 0.5

    def fn(x: tr.Tensor, t: tr.Tensor) -> tr.Tensor:
        return F.binary_cross_entropy_with_logits(x, t, weight=weight, pos_weight=pos_weight,
                                                  reduction=reduction)

    assert fn(x, t).shape == ((2, 3) if reduction == "none" else ())
    tr.gradcheck(fn, [x, t], mode="full")


# ------------------------------------------------------------------ 2. Div gradient
@pytest.mark.parametrize("a, b", [(1e-30, 1e-23), (1e20, 1e20), (3e-20, 2e-20),
                                  (-2e19, 4e19)])
def test_div_gradient_for_tiny_and_huge_divisors_in_float32(a: float, b: float) -> None:
    """dL/db = -a / b^2 where b^2 itself over- or underflows float32 (it gave -inf or -0)."""
    ta, tb = leaf([a], np.float32), leaf([b], np.float32)
    (ta / tb).sum().backward()
    a32, b32 = float(np.float32(a)), float(np.float32(b))
    expected = -a32 / b32 / b32
    assert tb.grad.dtype == np.float32 and np.isfinite(tb.grad[0]) and tb.grad[0] != 0.0
    np.testing.assert_allclose(tb.grad, [expected], rtol=1e-6)
    np.testing.assert_allclose(ta.grad, [1.0 / b32], rtol=1e-6)


def test_div_gradient_for_a_tiny_divisor_in_float64() -> None:
    """The same in float64, where b^2 underflows for |b| < 1e-162."""
    ta, tb = leaf([1e-300]), leaf([1e-170])
    (ta / tb).sum().backward()
    np.testing.assert_allclose(tb.grad, [-1e40], rtol=1e-14)


def test_div_gradcheck_with_broadcasting() -> None:
    rng = np.random.default_rng(1)
    a, b = leaf(rng.standard_normal((2, 3))), leaf(rng.random(3) + 0.5)
    tr.gradcheck(lambda a, b: a / b, [a, b], mode="full")


# ------------------------------------------------------------------ 3. boolean masks
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("mask", [np.array([0.0, 0.0, -np.inf]), np.array([1, 1, 0]),
                                  [1.0, 0.0, 1.0]])
def test_softmax_masks_must_be_boolean(op: str, mask: Any) -> None:
    """An additive float mask (0 keep, -inf drop) was cast to bool: inverted silently."""
    x = tr.Tensor(np.array([1.0, 2.0, 3.0]))
    dtype = np.asarray(mask).dtype
    for call in (lambda: getattr(F, op)(x, mask=mask), lambda: getattr(x, op)(mask=mask)):
        with pytest.raises(TypeError) as info:
            call()
        assert str(info.value).startswith(op)
        assert_names(str(info.value), dtype, (3,))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8])
def test_integer_mask_hint_reads_it_as_a_keep_mask(op: str, dtype: Any) -> None:
    """The error for a 0/1 integer keep mask used to offer only the additive-mask hint
    "(additive == 0)", which applied to a keep mask inverts it silently. Its hint now says
    nonzero means "takes part" and points to mask.astype(bool), which gives the intended
    result."""
    x = tr.Tensor(np.array([[1.0, 2.0, 3.0]]))
    keep = np.array([[1, 1, 0]], dtype=dtype)
    with pytest.raises(TypeError) as info:
        getattr(F, op)(x, axis=-1, mask=keep)
    message = str(info.value)
    assert_names(message, op, np.dtype(dtype), "mask.astype(bool)", "mask != 0",
                 "nonzero = takes part")
    assert "additive" not in message
    expected = getattr(F, op)(x, axis=-1, mask=np.array([[True, True, False]])).array
    np.testing.assert_array_equal(getattr(F, op)(x, axis=-1, mask=keep.astype(bool)).array,
                                  expected)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_mask_hint_covers_additive_and_keep_masks(op: str, dtype: Any) -> None:
    """A float mask may be additive (0 / -inf) or a 0/1 keep mask; the hint names both."""
    x = tr.Tensor(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError) as info:
        getattr(F, op)(x, mask=np.array([0.0, 0.0, -np.inf], dtype=dtype))
    assert_names(str(info.value), op, np.dtype(dtype), "(additive == 0)",
                 "0/1 float keep mask", "(mask != 0)")


def test_boolean_masks_still_work_as_lists_and_arrays() -> None:
    x = tr.Tensor(np.array([1.0, 2.0, 3.0]))
    for mask in ([True, True, False], np.array([True, True, False])):
        y = F.softmax(x, mask=mask).array
        np.testing.assert_allclose(y, [np.exp(-1) / (1 + np.exp(-1)), 1 / (1 + np.exp(-1)), 0])
        assert F.log_softmax(x, mask=mask).array[2] == -np.inf


def test_where_and_masked_fill_errors_name_the_mask_shape() -> None:
    x = tr.Tensor(np.ones((2, 3)))
    with pytest.raises(TypeError) as info:
        tr.where(np.ones((2, 3)), x, x)
    assert_names(str(info.value), "where", "float64", (2, 3))
    with pytest.raises(TypeError) as info:
        F.masked_fill(x, np.ones(3, dtype=np.int32), 0.0)
    assert_names(str(info.value), "masked_fill", "int32", (3,), (2, 3))


# ------------------------------------------------------------------ 4. clip dtypes
def test_clip_of_integer_tensor_with_float_bounds_is_float32() -> None:
    x = tr.Tensor(np.array([0, 1, 2, 3]))
    for y in (x.clip(0.5, 2.5), x.clamp(0.5, 2.5), F.clip(x, 0.5, 2.5)):
        assert y.dtype == np.float32
        np.testing.assert_array_equal(y.array, [0.5, 1.0, 2.0, 2.5])
    assert x.clip(min=0.5).dtype == np.float32 and x.clip(max=np.float64(1.5)).dtype == np.float32


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_clip_of_integer_tensor_with_integer_bounds_keeps_its_dtype(dtype: Any) -> None:
    y = tr.Tensor(np.array([0, 1, 2, 3], dtype=dtype)).clip(1, np.int64(2))
    assert y.dtype == dtype
    np.testing.assert_array_equal(y.array, [1, 1, 2, 2])


def test_clip_of_bool_tensor_follows_torch() -> None:
    b = tr.Tensor(np.array([True, False]))
    assert b.clip(0, 1).dtype == np.int64 and b.clip(0.5).dtype == np.float32
    np.testing.assert_array_equal(b.clip(0.5).array, [1.0, 0.5])


def test_clip_dtypes_match_torch() -> None:
    torch = pytest.importorskip("torch")
    for data, lo, hi in (([0, 1, 2, 3], 0.5, 2.5), ([0, 1, 2, 3], 1, 2), ([True, False], 0, 1),
                         ([True, False], 0.5, None)):
        ours = tr.Tensor(np.array(data)).clip(lo, hi)
        theirs = torch.tensor(data).clamp(lo, hi)
        assert str(theirs.dtype).replace("torch.", "") == str(ours.dtype)
        np.testing.assert_array_equal(ours.array, theirs.numpy())


def test_clip_integer_bound_outside_the_dtype_is_an_error() -> None:
    x = tr.Tensor(np.array([0, 5], dtype=np.uint8))
    with pytest.raises(ValueError) as info:
        x.clip(-1, 300)
    assert_names(str(info.value), "clip", "-1", "uint8", "[0, 255]")


def test_clip_bound_must_be_a_number() -> None:
    with pytest.raises(TypeError) as info:
        tr.Tensor(np.ones(3)).clip(np.zeros(3))
    assert_names(str(info.value), "clip", "min")


def test_inplace_clip_of_integer_tensor() -> None:
    x = tr.Tensor(np.array([0, 1, 2, 3]))
    with pytest.raises(TypeError) as info:
        x.clip_(0.5, 2.5)
    assert_names(str(info.value), "clip_", "int64", "float32", (4,))
    np.testing.assert_array_equal(x.array, [0, 1, 2, 3])  # nothing half-written
    x.clip_(1, 2)
    np.testing.assert_array_equal(x.array, [1, 1, 2, 2])
    with pytest.raises(ValueError, match="clip_: at least one"):
        x.clip_()


def test_clip_gradcheck_and_inclusive_bounds() -> None:
    x = leaf([-1.3, -0.4, 0.2, 0.9, 1.7])
    tr.gradcheck(lambda x: x.clip(-0.5, 1.0), [x], mode="full")


# ------------------------------------------------------------------ 5. min
INT_DTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


@pytest.mark.parametrize("dtype", INT_DTYPES + [np.bool_])
@given(data=st.data())
def test_min_of_integer_and_bool_tensors_matches_numpy(dtype: Any, data: Any) -> None:
    """-max(-x) gave 5 for uint8 [0, 5], wrapped INT64_MIN and raised for bool."""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    x = data.draw(hnp.arrays(dtype, shape))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    keepdims = data.draw(st.booleans())
    y = tr.Tensor(x).min(axis=axis, keepdims=keepdims)
    expected = np.min(x, axis=axis, keepdims=keepdims)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y.array, expected)


def test_min_extremes() -> None:
    lowest = np.iinfo(np.int64).min
    assert tr.Tensor(np.array([0, 5], dtype=np.uint8)).min().item() == 0
    assert tr.Tensor(np.array([lowest, 0])).min().item() == lowest
    assert tr.Tensor(np.array([True, False])).min().item() is False
    assert tr.Tensor(np.array([-np.inf, 0.0])).min().item() == -np.inf


def test_min_shares_ties_like_max() -> None:
    x = leaf([[1.0, 3.0, 1.0], [2.0, 0.0, 5.0]])
    x.min(axis=1).backward(np.array([1.0, 6.0]))
    np.testing.assert_array_equal(x.grad, [[0.5, 0.0, 0.5], [0.0, 6.0, 0.0]])
    assert x.min(axis=1).grad_fn.name == "Min"


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, True), (-1, False),
                                            ((0, 2), False)])
def test_min_gradcheck(axis: Any, keepdims: bool) -> None:
    x = leaf(np.random.default_rng(2).permutation(24).reshape(2, 3, 4) * 0.1)
    tr.gradcheck(lambda x: x.min(axis=axis, keepdims=keepdims), [x], mode="full")


def test_min_over_an_empty_axis_raises() -> None:
    with pytest.raises(ValueError) as info:
        tr.Tensor(np.ones((0, 3))).min(axis=0)
    assert_names(str(info.value), "min", (0, 3))


# ------------------------------------------------------------------ 6. mean
def test_float16_mean_over_more_than_65504_elements() -> None:
    """The count 70,000 was cast to float16 (inf), so the mean was 0; a float16 sum of
    70,000 ones overflows too, so float16 is summed in float32, as torch does."""
    small = tr.Tensor(np.full(70000, 1e-3, np.float16))
    assert small.mean().dtype == np.float16
    np.testing.assert_allclose(small.mean().item(), float(np.float16(1e-3)), rtol=1e-3)
    ones = tr.Tensor(np.ones((2, 70000), np.float16))
    np.testing.assert_array_equal(ones.mean(axis=1).array, [1.0, 1.0])
    assert ones.mean().item() == 1.0


def test_float16_mean_gradient_over_many_elements() -> None:
    x = tr.Tensor(np.ones(70000, np.float16), requires_grad=True)
    x.mean().backward(np.float16(2.0))
    assert x.grad.dtype == np.float16
    np.testing.assert_array_equal(x.grad, np.full(70000, np.float16(2.0 / 70000)))


@given(data=st.data())
def test_float32_mean_is_unchanged_bit_for_bit(data: Any) -> None:
    """Dividing in float64 and rounding back gives exactly the float32 division by the
    count (double rounding is harmless for a division), so the division did not change
    float32 means. (The sum divided is the float32 sum, pairwise: see the next tests.)"""
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=40))
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(
        -1e6, 1e6, width=32, allow_nan=False, allow_subnormal=False)))
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    axes = tuple(range(x.ndim)) if axis is None else (axis % x.ndim,)
    n = int(np.prod([x.shape[a] for a in axes]))
    old = pairwise_sum(x, axes) / np.float32(n)  # the division before the fix
    np.testing.assert_array_equal(tr.Tensor(x).mean(axis=axis).array, old)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_float32_sum_and_mean_over_a_long_batch_axis_stay_accurate(reduce: str) -> None:
    """Over axis 0 of a (200000, 7) float32 tensor NumPy adds row after row: relative error
    about 1e-5 (torch: 1e-7). Tensor.sum and Tensor.mean add pairwise."""
    x = np.random.default_rng(0).standard_normal((200_000, 7)).astype(np.float32)
    exact = x.astype(np.float64).sum(axis=0)
    if reduce == "mean":
        exact = exact / x.shape[0]
    out = getattr(tr.Tensor(x), reduce)(axis=0).array
    assert out.dtype == np.float32
    err = np.linalg.norm(out.astype(np.float64) - exact) / np.linalg.norm(exact)
    assert err < 1e-6, f"{reduce}: relative error {err:.2e}"


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("axis", [0, 1, (0, 1), None])
def test_float64_sum_and_mean_are_numpys_bit_for_bit(reduce: str, axis: Any) -> None:
    x = np.random.default_rng(1).standard_normal((3000, 40))
    expected = getattr(np, reduce)(x, axis=axis)
    np.testing.assert_array_equal(getattr(tr.Tensor(x), reduce)(axis=axis).array, expected)


def test_mean_over_nothing_is_nan_and_gradient_empty() -> None:
    x = leaf(np.zeros((0, 3)))
    y = x.mean(axis=0)
    assert np.all(np.isnan(y.array))
    y.backward(np.ones(3))
    assert x.grad.shape == (0, 3)


def test_losses_divide_float16_gradients_by_large_counts() -> None:
    """mse_loss and BCE divided by the count cast to float16 as well (gradient 0). Both
    scale the upstream gradient first, g / n = 1 / 70000 rounded to float16, and then
    multiply by 2 (diff 1) or 0.5 (sigmoid(0) - 0), exactly."""
    n = 70000
    g_over_n = np.float16(1.0 / n)
    a = tr.Tensor(np.full(n, 1.0, np.float16), requires_grad=True)
    F.mse_loss(a, np.zeros(n, np.float16)).backward()
    np.testing.assert_array_equal(a.grad, np.full(n, np.float16(2) * g_over_n))
    x = tr.Tensor(np.zeros(n, np.float16), requires_grad=True)
    F.binary_cross_entropy_with_logits(x, np.zeros(n, np.float16)).backward()
    np.testing.assert_array_equal(x.grad, np.full(n, np.float16(0.5) * g_over_n))
    assert g_over_n != 0


# ------------------------------------------------------------------ 7. padding_idx
@pytest.mark.parametrize("padding_idx", [-10, -6, 5, 7])
def test_embedding_padding_idx_out_of_range(padding_idx: int) -> None:
    """-10 wrapped onto row 0 (silently zeroing its gradient); 7 failed in backward."""
    w = leaf(np.ones((5, 2)))
    with pytest.raises(ValueError) as info:
        F.embedding(np.array([0, 1]), w, padding_idx=padding_idx)
    assert_names(str(info.value), "embedding", f"padding_idx {padding_idx}", "5")


@pytest.mark.parametrize("padding_idx", [1.0, True, "1"])
def test_embedding_padding_idx_must_be_an_integer(padding_idx: Any) -> None:
    with pytest.raises(TypeError) as info:
        F.embedding(np.array([0, 1]), leaf(np.ones((5, 2))), padding_idx=padding_idx)
    assert_names(str(info.value), "embedding", "padding_idx")


@pytest.mark.parametrize("padding_idx, row", [(-5, 0), (-1, 4), (np.int32(4), 4), (0, 0)])
def test_embedding_padding_idx_in_range_zeroes_its_row(padding_idx: Any, row: int) -> None:
    w = leaf(np.ones((5, 2)))
    F.embedding(np.array([0, 4, 4, 1]), w, padding_idx=padding_idx).sum().backward()
    expected = np.array([[1.0], [1.0], [0.0], [0.0], [2.0]]) * np.ones(2)
    expected[row] = 0.0
    np.testing.assert_array_equal(w.grad, expected)


# ------------------------------------------------------------------ 8. transpose axes
@pytest.mark.parametrize("axes, bad", [((0, 5), 5), ((1, -3), -3), ((2, 0), 2)])
def test_transpose_axis_out_of_range_names_the_axis_given(axes: tuple, bad: int) -> None:
    """Each spelling's error starts with the name the caller used."""
    x = tr.Tensor(np.zeros((2, 3)))
    for op, call in (("transpose", lambda: x.transpose(*axes)),
                     ("transpose", lambda: x.transpose(axes)),
                     ("permute", lambda: x.permute(axes)),
                     ("permute", lambda: x.permute(*axes))):
        with pytest.raises(IndexError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{op}: "), msg
        assert_names(msg, f"axis {bad}", (2, 3))


def test_transpose_repeated_axis_names_the_axes_given() -> None:
    with pytest.raises(ValueError) as info:
        tr.Tensor(np.zeros((2, 3))).permute(1, -1)
    assert str(info.value).startswith("permute: ")
    assert_names(str(info.value), (1, -1), (2, 3))
    with pytest.raises(ValueError) as info:
        tr.Tensor(np.zeros((2, 3))).transpose((1, -1))
    assert str(info.value).startswith("transpose: ")


def test_permute_errors_name_permute_not_transpose() -> None:
    """Regression: permute's errors said 'transpose', an op the caller never called."""
    x = tr.zeros((2, 3, 4))
    with pytest.raises(ValueError) as info:
        x.permute(0, 1)
    assert str(info.value) == ("permute: axes (0, 1) are not a permutation of the 3 "
                               "dimensions of a tensor of shape (2, 3, 4) (give 3 axes)")
    with pytest.raises(TypeError, match=re.escape("permute: axes must be integers, got "
                                                  "(0, 1.0, 2)")):
        x.permute(0, 1.0, 2)
    assert x.permute(2, 0, 1).shape == (4, 2, 3)


def test_transpose_of_two_axes_swaps_them_as_torch() -> None:
    """Two integers swap (torch's transpose), also on a 2-D tensor where NumPy would read
    (0, 1) as the identity; a tuple or every axis is a permutation (NumPy's transpose)."""
    x = leaf(np.arange(24.0).reshape(2, 3, 4))
    assert x.transpose(0, 2).shape == (4, 3, 2) and x.transpose(-1, 0).shape == (4, 3, 2)
    np.testing.assert_array_equal(x.transpose(0, 2).array, np.swapaxes(x.array, 0, 2))
    np.testing.assert_array_equal(x.transpose(1, 1).array, x.array)   # an axis with itself
    m = leaf(np.arange(6.0).reshape(2, 3))
    for swapped in (m.transpose(0, 1), m.transpose(1, 0), m.swapaxes(0, 1), m.T):
        np.testing.assert_array_equal(swapped.array, m.array.T)
    assert x.transpose((0, 1, 2)).shape == (2, 3, 4) and x.transpose(2, 0, 1).shape == (4, 2, 3)
    with pytest.raises(TypeError, match="transpose: axes must be integers"):
        x.transpose(0, 1.0)
    tr.gradcheck(lambda x: x.transpose(0, 2), [x], mode="full")
    torch = pytest.importorskip("torch")
    t = torch.arange(24.0).reshape(2, 3, 4)
    for dims in [(0, 2), (1, 2), (-1, 0), (1, 1)]:
        np.testing.assert_array_equal(x.transpose(*dims).array, t.transpose(*dims).numpy())


def test_transpose_negative_axes_and_zero_d() -> None:
    x = leaf(np.arange(6.0).reshape(1, 2, 3))
    assert x.transpose(-1, 0, -2).shape == (3, 1, 2)
    assert tr.Tensor(1.0).transpose().shape == ()
    with pytest.raises(ValueError, match="transpose"):
        tr.Tensor(1.0).transpose(0)
    tr.gradcheck(lambda x: x.permute(-1, 0, -2), [x], mode="full")


# ------------------------------------------------------------------ 9. add_ alpha
def test_add_inplace_float_alpha_on_integer_tensor_is_an_error() -> None:
    """alpha=0.5 was cast to the tensor's integers (0): the add did nothing."""
    x = tr.Tensor(np.array([1, 2]))
    with pytest.raises(TypeError) as info:
        x.add_(tr.Tensor(np.array([2, 2])), alpha=0.5)
    assert_names(str(info.value), "add_", "alpha", "int64")
    np.testing.assert_array_equal(x.array, [1, 2])
    x.add_(tr.Tensor(np.array([2, 2])), alpha=3)
    x.add_(1)
    np.testing.assert_array_equal(x.array, [8, 9])
    y = tr.Tensor(np.array([1.0, 2.0]))
    y.add_(np.array([2.0, 2.0]), alpha=0.5)
    np.testing.assert_array_equal(y.array, [2.0, 3.0])


# ------------------------------------------------------------------ 10. arange
@pytest.mark.parametrize("args, dtype", [((0.0, 1.0, 0.25), np.float32), ((3,), np.int64),
                                         ((1, 4), np.int64), ((0, 3, 1.0), np.float32),
                                         ((np.float64(2.5),), np.float32),
                                         ((np.int32(1), 5, 2), np.int64)])
def test_arange_dtype_follows_torch(args: tuple, dtype: Any) -> None:
    y = tr.arange(*args)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y.array, np.arange(*args, dtype=np.float64).astype(dtype))


def test_arange_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    for args in ((0.0, 1.0, 0.25), (3,), (0.0, 1.0, 0.1), (2, 9, 3), (-1.0, 2.0, 0.3)):
        ours, theirs = tr.arange(*args), torch.arange(*args)
        assert str(theirs.dtype).replace("torch.", "") == str(ours.dtype)
        np.testing.assert_array_equal(ours.array, theirs.numpy())


def test_arange_explicit_dtype_and_bad_arguments() -> None:
    assert tr.arange(0.0, 1.0, 0.5, dtype=np.float64).dtype == np.float64
    assert tr.arange(3, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="arange: step"):
        tr.arange(0, 3, 0)
    with pytest.raises(TypeError, match="arange"):
        tr.arange(True)
    with pytest.raises(TypeError, match="arange"):
        tr.arange()


def test_float64_zero_d_tensor_with_float32_tensor_stays_float64() -> None:
    """Tensors of two float dtypes still combine as NumPy says (docs/engine.md section 10)."""
    assert (tr.ones(3) * tr.Tensor(np.float64(2.0))).dtype == np.float64


# ------------------------------------------------------------------ 11. error messages
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduction_axis_errors_name_the_shape(op: str) -> None:
    x = tr.Tensor(np.ones((2, 3)))
    for axis in (2, -3, (0, 5)):
        with pytest.raises(IndexError) as info:
            getattr(x, op)(axis=axis)
        assert str(info.value).startswith(op)
        assert_names(str(info.value), (2, 3))


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis, plain", [
    (np.int64(1), 1), (np.int32(-1), -1), (np.uint8(0), 0), ((np.int64(0), np.int32(2)), (0, 2)),
    ([np.int64(2), 0], (0, 2)), (np.array(1), 1)])
def test_reductions_accept_numpy_integer_axes(op: str, axis: Any, plain: Any) -> None:
    """x.sum(axis=np.int64(1)) failed with "'numpy.int64' object is not iterable"; torch,
    NumPy and the library's softmax, cat and transpose accept NumPy integers."""
    data = np.random.default_rng(0).standard_normal((4, 3, 5))
    got, want = tr.Tensor(data, requires_grad=True), tr.Tensor(data, requires_grad=True)
    y = getattr(got, op)(axis=axis)
    z = getattr(want, op)(axis=plain)
    np.testing.assert_array_equal(y.array, z.array)
    y.sum().backward()
    z.sum().backward()
    np.testing.assert_array_equal(got.grad, want.grad)
    by_dim = getattr(got, op)(dim=axis)
    if op in ("max", "min") and not isinstance(axis, (tuple, list)):
        by_dim = by_dim.values  # torch's max(dim) / min(dim): (values, indices)
    np.testing.assert_array_equal(by_dim.array, z.array)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("axis", [True, np.bool_(False), 1.0, np.float64(1.0), "1", (0, 1.5)])
def test_reductions_refuse_axes_that_are_not_integers(op: str, axis: Any) -> None:
    with pytest.raises(TypeError) as info:
        getattr(tr.Tensor(np.ones((2, 3))), op)(axis=axis)
    assert str(info.value).startswith(f"{op}: axis must be an int or a tuple of ints, got "
                                      f"{axis!r}")


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduction_keepdims_takes_python_and_numpy_bools(op: str) -> None:
    """keepdims=np.bool_(True) leaked NumPy's "'numpy.bool' object cannot be interpreted as
    an integer" (sum, mean), and max/min read keepdims='no' as True."""
    x = tr.Tensor(np.arange(6.0).reshape(2, 3))
    for keep, shape in ((np.bool_(True), (2, 1)), (np.bool_(False), (2,)), (True, (2, 1)),
                        (1, (2, 1)), (np.int64(0), (2,))):
        y = getattr(x, op)(axis=1, keepdims=keep)
        assert y.shape == shape
        np.testing.assert_array_equal(y.array, getattr(np, op)(x.array, axis=1,
                                                               keepdims=bool(keep)))
    for keep, kind in (("no", "str"), (2, "int"), (None, "NoneType"), (1.0, "float"),
                       (np.float32(1.0), "numpy.float32")):
        with pytest.raises(TypeError, match=re.escape(
                f"{op}: keepdims must be True or False, got {keep!r} ({kind})")):
            getattr(x, op)(axis=1, keepdims=keep)


@pytest.mark.parametrize("join, axis", [(tr.cat, 3), (tr.cat, -3), (tr.stack, 3)])
def test_cat_and_stack_axis_errors_name_the_shapes(join: Callable, axis: int) -> None:
    with pytest.raises(IndexError) as info:
        join([tr.ones(2, 3), tr.ones(2, 3)], axis=axis)
    assert_names(str(info.value), join.__name__, f"axis {axis}", (2, 3))


INPLACE: dict[str, Callable[[tr.Tensor], Any]] = {
    "div_": lambda t: t.div_(2),
    "mul_": lambda t: t.mul_(0.5),
    "sub_": lambda t: t.sub_(0.5),
    "add_": lambda t: t.add_(np.array([0.5, 0.5])),
    "clip_": lambda t: t.clip_(0.5, 1.5),
}


@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_ops_on_integer_tensors_give_clear_errors(op: str) -> None:
    """These leaked NumPy's UFuncTypeError. (fill_ does not promote: it takes any value the
    dtype holds exactly, so ``ids.fill_(2.0)`` works and ``ids.fill_(2.5)`` is a ValueError;
    tests/test_tensor.py::test_fill_refuses_a_value_the_dtype_would_change.)"""
    x = tr.Tensor(np.array([1, 2]))
    with pytest.raises(TypeError) as info:
        INPLACE[op](x)
    assert str(info.value).startswith(op)
    assert_names(str(info.value), "int64", (2,))
    np.testing.assert_array_equal(x.array, [1, 2])


def test_inplace_ops_on_bool_tensor_refuse_integers() -> None:
    mask = tr.Tensor(np.array([True, False]))
    with pytest.raises(TypeError) as info:
        mask.add_(1)
    assert_names(str(info.value), "add_", "bool", (2,))
    mask.mul_(np.array([True, True]))
    np.testing.assert_array_equal(mask.array, [True, False])


def test_inplace_ops_that_fit_the_integer_dtype_still_work() -> None:
    x = tr.Tensor(np.array([1, 2], dtype=np.int32))
    x.add_(1)
    x.sub_(np.array([1, 1], dtype=np.int32))
    x.mul_(3)
    x.fill_(np.int64(4))
    assert x.dtype == np.int32
    np.testing.assert_array_equal(x.array, [4, 4])


@pytest.mark.parametrize("index, what", [
    ([0, 5], "index (array([0, 5]),) for shape (3, 4): index 5 is out of bounds for axis 0 "
             "with size 3"),
    ((slice(None), np.array([-5])), "index (slice(None, None, None), array([-5])) for shape "
                                    "(3, 4): index -5 is out of bounds for axis 1 with size 4"),
    ((0, 0, 0), "index (0, 0, 0) for shape (3, 4): too many indices"),
])
def test_setitem_out_of_range_names_the_op_index_and_shape(index: Any, what: str) -> None:
    y = tr.zeros(3, 4)
    with pytest.raises(IndexError) as info:
        y[index] = 1.0
    assert str(info.value).startswith(f"__setitem__: {what}"), str(info.value)
    assert not y.numpy().any()  # nothing was written
    with pytest.raises(IndexError) as info:
        y[index]
    assert str(info.value).startswith(f"getitem: {what}"), str(info.value)


def test_weighted_mean_divides_by_any_weight_sum_as_torch() -> None:
    """'mean' divides by the counted rows' weight sum whatever its sign (torch); a zero sum
    over counted rows gives a non-finite loss, not a silent 0; only all-ignored gives 0."""
    z = np.array([[2.0, 1.0, 0.1], [0.3, -2.0, 5.0]])
    y = np.array([0, 1])
    w = np.array([-1.0, 0.5, 1.0])              # weight sum over the targets: -0.5
    zt = tr.Tensor(z, requires_grad=True)
    loss = F.cross_entropy(zt, y, weight=w)
    loss.backward()
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    rows = -w[y] * logp[np.arange(2), y]
    np.testing.assert_allclose(loss.item(), rows.sum() / w[y].sum(), rtol=1e-13)
    tr.gradcheck(lambda t: F.cross_entropy(t, y, weight=w), [tr.Tensor(z, requires_grad=True)])
    tr.gradcheck(lambda t: F.nll_loss(t, y, weight=w), [tr.Tensor(logp, requires_grad=True)])
    np.testing.assert_allclose(F.nll_loss(tr.Tensor(logp), y, weight=w).item(),
                               rows.sum() / w[y].sum(), rtol=1e-13)
    with np.errstate(divide="ignore", invalid="ignore"):
        zero_sum = F.cross_entropy(tr.Tensor(z), np.array([0, 0]), weight=np.array([0., 1, 1]))
    assert not np.isfinite(zero_sum.item())
    assert F.cross_entropy(tr.Tensor(z), np.array([-100, -100])).item() == 0.0
    torch = pytest.importorskip("torch")
    tz = torch.tensor(z, requires_grad=True)
    torch.nn.functional.cross_entropy(tz, torch.tensor(y), weight=torch.tensor(w)).backward()
    np.testing.assert_allclose(zt.grad, tz.grad.numpy(), rtol=1e-12, atol=1e-15)
