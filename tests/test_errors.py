"""Bad input raises a clear error that names the op and everything involved (DESIGN.md engine
rule 8): both full shapes for shape mismatches, the value, its position and the size for
out-of-range ids, the dtype for wrong dtypes. Raw NumPy errors must not leak through.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr

F = tr.functional


def t(shape: tuple, requires_grad: bool = True) -> tr.Tensor:
    return tr.Tensor(np.ones(shape), requires_grad=requires_grad)


def assert_names(message: str, *parts: Any) -> None:
    for part in parts:
        assert str(part) in message, f"{part!r} missing from error message: {message!r}"


# ----------------------------------------------------------------------------- broadcasting
@st.composite
def incompatible_shapes(draw: st.DrawFn) -> tuple:
    """Two shapes that cannot broadcast: one aligned dimension has two different sizes, both
    at least 2; the others are equal or 1, and the ranks may differ."""
    ndim = draw(st.integers(1, 4))
    a = draw(st.lists(st.integers(1, 5), min_size=ndim, max_size=ndim))
    b = list(a)
    clash = draw(st.integers(0, ndim - 1))
    a[clash] = draw(st.integers(2, 5))
    b[clash] = draw(st.integers(2, 5).filter(lambda v: v != a[clash]))
    for j in range(ndim):
        if j != clash and draw(st.booleans()):
            b[j] = 1
    drop = draw(st.integers(0, clash))  # b may lose leading dimensions before the clash
    b = b[drop:]
    extra = draw(st.lists(st.integers(1, 3), max_size=2))  # or a may gain some
    a = extra + a
    if draw(st.booleans()):
        a, b = b, a
    return tuple(a), tuple(b)


BINARY_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: F.maximum(a, b),
    "minimum": lambda a, b: F.minimum(a, b),
    "where": lambda a, b: tr.where(np.array(True), a, b),
}


@pytest.mark.parametrize("op", sorted(BINARY_OPS))
@given(shapes=incompatible_shapes())
@example(shapes=((2, 3), (3, 2)))
@example(shapes=((5,), (4, 3)))  # an RNN bias of the wrong size
def test_broadcast_mismatch_names_op_and_both_shapes(op: str, shapes: tuple) -> None:
    sa, sb = shapes
    with pytest.raises(ValueError) as info:
        BINARY_OPS[op](t(sa), t(sb))
    msg = str(info.value)
    assert msg.startswith(op), msg
    assert_names(msg, sa, sb)


@given(shapes=incompatible_shapes())
def test_broadcast_mismatch_with_numpy_operand_on_either_side(shapes: tuple) -> None:
    sa, sb = shapes
    for fn in (lambda: t(sa) * np.ones(sb), lambda: np.ones(sa) * t(sb)):
        with pytest.raises(ValueError) as info:
            fn()
        assert_names(str(info.value), "mul", sa, sb)


# ----------------------------------------------------------------------------- matmul
@st.composite
def matmul_mismatches(draw: st.DrawFn) -> tuple:
    """(shape_a, shape_b) whose contracted sizes differ, or whose batch dimensions clash."""
    n, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k = draw(st.integers(1, 5))
    k2 = draw(st.integers(1, 5).filter(lambda v: v != k))
    kind = draw(st.sampled_from(["2d", "vec_left", "vec_right", "batched", "batch_clash"]))
    if kind == "2d":
        return (n, k), (k2, m)
    if kind == "vec_left":
        return (k,), (k2, m)
    if kind == "vec_right":
        return (n, k), (k2,)
    if kind == "batched":
        batch = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
        return batch + (n, k), (k2, m)
    b1 = draw(st.integers(2, 4))
    b2 = draw(st.integers(2, 4).filter(lambda v: v != b1))
    return (b1, n, k), (b2, k, m)


@given(shapes=matmul_mismatches())
@example(shapes=((2, 3, 4), (5, 4, 6)))  # regression: only the batch parts were named
def test_matmul_mismatch_names_op_and_both_full_shapes(shapes: tuple) -> None:
    sa, sb = shapes
    with pytest.raises(ValueError) as info:
        t(sa) @ t(sb)
    msg = str(info.value)
    assert msg.startswith("matmul"), msg
    assert_names(msg, sa, sb)


def test_matmul_of_zero_dimensional_operand_raises() -> None:
    with pytest.raises(ValueError) as info:
        t(()) @ t((3,))
    assert_names(str(info.value), "matmul", (), (3,))


def test_linear_mismatch_names_both_shapes() -> None:
    with pytest.raises(ValueError) as info:
        F.linear(t((2, 3)), t((4, 5)))
    assert_names(str(info.value), "linear", (2, 3), (4, 5))


# ----------------------------------------------------------------------------- cat / stack
@st.composite
def cat_mismatches(draw: st.DrawFn) -> tuple:
    """(shape_a, shape_b, axis) that differ in a dimension other than axis, or in rank."""
    ndim = draw(st.integers(1, 3))
    a = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    axis = draw(st.integers(-ndim, ndim - 1))
    b = list(a)
    others = [i for i in range(ndim) if i != axis % ndim]
    if others and draw(st.booleans()):
        i = draw(st.sampled_from(others))
        b[i] = draw(st.integers(1, 5).filter(lambda v: v != a[i]))
    else:
        b = b + [draw(st.integers(1, 3))]  # a different rank
    return tuple(a), tuple(b), axis


@given(case=cat_mismatches())
def test_cat_mismatch_names_op_and_both_shapes(case: tuple) -> None:
    sa, sb, axis = case
    with pytest.raises(ValueError) as info:
        tr.cat([t(sa), t(sb)], axis=axis)
    msg = str(info.value)
    assert msg.startswith("cat"), msg
    assert_names(msg, sa, sb)


@given(sa=st.lists(st.integers(1, 4), max_size=3).map(tuple),
       sb=st.lists(st.integers(1, 4), max_size=3).map(tuple))
def test_stack_mismatch_names_op_and_both_shapes(sa: tuple, sb: tuple) -> None:
    if sa == sb:
        tr.stack([t(sa), t(sb)])  # same shapes stack fine
        return
    with pytest.raises(ValueError) as info:
        tr.stack([t(sa), t(sa), t(sb)], axis=0)
    assert_names(str(info.value), "stack", sa, sb, "tensor 2")


def test_cat_and_stack_of_nothing_raise() -> None:
    with pytest.raises(ValueError, match="cat"):
        tr.cat([])
    with pytest.raises(ValueError, match="stack"):
        tr.stack([])


# ----------------------------------------------------------------------------- class ids
@st.composite
def bad_targets(draw: st.DrawFn) -> tuple:
    """(input shape, target, bad value, its position, C): one id outside [0, C)."""
    n, c = draw(st.integers(1, 5)), draw(st.integers(1, 6))
    extra = tuple(draw(st.lists(st.integers(1, 3), max_size=1)))  # (N, C, d1) inputs
    size = n * int(np.prod(extra))
    target = draw(st.lists(st.integers(0, c - 1), min_size=size, max_size=size))
    target = np.array(target, dtype=np.int64).reshape((n,) + extra)
    bad = draw(st.one_of(st.integers(-c - 3, -1).filter(lambda v: v != -100),
                         st.integers(c, c + 5)))
    pos = tuple(draw(st.integers(0, s - 1)) for s in target.shape)
    target.flat[np.ravel_multi_index(pos, target.shape)] = bad
    # every other entry stays valid, so the reported position must be pos
    return (n, c) + extra, target, bad, pos, c


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@given(case=bad_targets())
@example(case=((3, 4), np.array([0, 3, -1]), -1, (2,), 4))  # NumPy would wrap -1 silently
def test_target_outside_classes_raises_index_error_naming_value_position_and_c(
        loss: str, case: tuple) -> None:
    shape, target, bad, pos, c = case
    with pytest.raises(IndexError) as info:
        getattr(F, loss)(t(shape), target)
    msg = str(info.value)
    assert msg.startswith(loss), msg
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg), msg
    assert_names(msg, pos)
    assert re.search(rf"classes {c}\b", msg), msg


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_target_equal_to_ignore_index_is_not_an_error(loss: str) -> None:
    x = t((3, 4))
    getattr(F, loss)(x, np.array([0, -100, 3])).backward()
    getattr(F, loss)(x, np.array([0, 7, 3]), ignore_index=7).backward()
    with pytest.raises(IndexError):  # -100 is only special while it is the ignore_index
        getattr(F, loss)(x, np.array([0, -100, 3]), ignore_index=7)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.bool_])
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_float_target_where_ids_expected_raises_type_error_naming_dtype(loss: str,
                                                                        dtype: type) -> None:
    target = np.array([0, 1, 1], dtype=dtype)
    for given_target in (target, tr.Tensor(target)):
        with pytest.raises(TypeError) as info:
            getattr(F, loss)(t((3, 4)), given_target)
        assert_names(str(info.value), loss, np.dtype(dtype))


def test_cross_entropy_target_shape_and_weight_shape_errors() -> None:
    with pytest.raises(ValueError) as info:
        F.cross_entropy(t((3, 4)), np.array([0, 1]))
    assert_names(str(info.value), "cross_entropy", (3, 4), (2,))
    with pytest.raises(ValueError) as info:
        F.cross_entropy(t((3, 4)), np.array([0, 1, 2]), weight=np.ones(3))
    assert_names(str(info.value), "cross_entropy", "(4,)", (3,))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(t((3, 4)), np.array([0, 1, 2]), label_smoothing=1.5)


@given(v=st.integers(1, 6), n=st.integers(1, 4), m=st.integers(1, 4), data=st.data())
def test_embedding_out_of_range_id_names_id_position_and_vocabulary(
        v: int, n: int, m: int, data: st.DataObject) -> None:
    bad = data.draw(st.one_of(st.integers(-9, -1), st.integers(v, v + 20)))
    ids = data.draw(st.lists(st.integers(0, v - 1), min_size=n * m, max_size=n * m))
    ids = np.array(ids, dtype=np.int64).reshape(n, m)
    pos = (data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, m - 1)))
    ids[pos] = bad
    with pytest.raises(IndexError) as info:
        F.embedding(ids, t((v, 3)))
    msg = str(info.value)
    assert msg.startswith("embedding"), msg
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg), msg
    assert_names(msg, pos)
    assert re.search(rf"vocabulary size {v}\b", msg), msg


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_embedding_float_ids_raise_type_error_naming_dtype(dtype: type) -> None:
    ids = np.array([0, 1], dtype=dtype)
    for given_ids in (ids, tr.Tensor(ids)):
        with pytest.raises(TypeError) as info:
            F.embedding(given_ids, t((4, 3)))
        assert_names(str(info.value), "embedding", np.dtype(dtype))


def test_embedding_weight_must_be_2d() -> None:
    with pytest.raises(ValueError) as info:
        F.embedding(np.array([0]), t((4,)))
    assert_names(str(info.value), "embedding", (4,))


# ----------------------------------------------------------------------------- reductions
LOSSES_WITH_REDUCTION: dict[str, Callable[[str], Any]] = {
    "cross_entropy": lambda r: F.cross_entropy(t((2, 3)), np.array([0, 1]), reduction=r),
    "nll_loss": lambda r: F.nll_loss(t((2, 3)), np.array([0, 1]), reduction=r),
    "mse_loss": lambda r: F.mse_loss(t((2, 3)), t((2, 3)), reduction=r),
    "binary_cross_entropy_with_logits": lambda r: F.binary_cross_entropy_with_logits(
        t((2, 3)), t((2, 3)), reduction=r),
}


@pytest.mark.parametrize("loss", sorted(LOSSES_WITH_REDUCTION))
@pytest.mark.parametrize("reduction", ["avg", "Mean", "", "elementwise_mean"])
def test_unknown_reduction_names_op_value_and_choices(loss: str, reduction: str) -> None:
    with pytest.raises(ValueError) as info:
        LOSSES_WITH_REDUCTION[loss](reduction)
    assert_names(str(info.value), loss, repr(reduction), "'none'", "'mean'", "'sum'")


@pytest.mark.parametrize("loss", ["mse_loss", "binary_cross_entropy_with_logits"])
def test_elementwise_loss_shape_mismatch_names_both_shapes(loss: str) -> None:
    with pytest.raises(ValueError) as info:
        getattr(F, loss)(t((2, 3)), t((3, 2)))
    assert_names(str(info.value), loss, (2, 3), (3, 2))


# ----------------------------------------------------------------------------- split
def test_split_sizes_that_do_not_add_up() -> None:
    with pytest.raises(ValueError) as info:
        tr.split(t((5, 2)), [2, 2])
    assert_names(str(info.value), "split", [2, 2], 5, (5, 2))
    with pytest.raises(ValueError, match="split"):
        tr.split(t((5, 2)), [6, -1])
    with pytest.raises(ValueError, match="split"):
        tr.split(t((5, 2)), 0)
    with pytest.raises(ValueError, match="split"):
        tr.split(t((5, 2)), -2)


def test_split_valid_sizes_work() -> None:
    pieces = tr.split(t((5, 2)), 2)
    assert [p.shape for p in pieces] == [(2, 2), (2, 2), (1, 2)]
    pieces = tr.split(t((5, 2)), [1, 1], axis=1)
    assert [p.shape for p in pieces] == [(5, 1), (5, 1)]


# ----------------------------------------------------------------------------- reshape
@pytest.mark.parametrize("src, dst", [((2, 3), (4,)), ((2, 3), (5, -1)), ((6,), (-1, -1)),
                                      ((2, 3), (7, 1))])
def test_reshape_error_names_both_shapes(src: tuple, dst: tuple) -> None:
    with pytest.raises(ValueError) as info:
        t(src).reshape(dst)
    assert_names(str(info.value), "reshape", src, dst)


def test_transpose_with_bad_axes_names_axes_and_shape() -> None:
    with pytest.raises(ValueError) as info:
        t((2, 3)).permute(0, 0)
    assert_names(str(info.value), "permute", (0, 0), (2, 3))
    with pytest.raises(ValueError, match="transpose"):
        t((2, 3)).transpose(0, 1, 2)


def test_broadcast_to_incompatible_shape() -> None:
    with pytest.raises(ValueError) as info:
        t((2, 3)).broadcast_to((4, 3))
    assert_names(str(info.value), "broadcast_to", (2, 3), (4, 3))


# ----------------------------------------------------------------------------- axes
AXIS_OPS: dict[str, Callable[[tr.Tensor, int], Any]] = {
    "sum": lambda x, a: x.sum(axis=a),
    "mean": lambda x, a: x.mean(axis=a),
    "max": lambda x, a: x.max(axis=a),
    "softmax": lambda x, a: F.softmax(x, axis=a),
    "log_softmax": lambda x, a: F.log_softmax(x, axis=a),
    "cat": lambda x, a: tr.cat([x, x], axis=a),
    "split": lambda x, a: tr.split(x, 1, axis=a),
    "squeeze": lambda x, a: x.squeeze(a),
    "swapaxes": lambda x, a: x.swapaxes(0, a),
}


@pytest.mark.parametrize("op", sorted(AXIS_OPS))
@given(ndim=st.integers(1, 3), offset=st.integers(0, 3), negative=st.booleans())
def test_axis_out_of_range_raises_index_error_naming_op(op: str, ndim: int, offset: int,
                                                        negative: bool) -> None:
    axis = -(ndim + 1 + offset) if negative else ndim + offset
    x = t((2,) * ndim)
    with pytest.raises(IndexError) as info:
        AXIS_OPS[op](x, axis)
    msg = str(info.value)
    assert msg.startswith(op), msg
    assert_names(msg, axis)


@given(ndim=st.integers(0, 3), offset=st.integers(0, 3), negative=st.booleans())
def test_unsqueeze_and_stack_axis_out_of_range(ndim: int, offset: int, negative: bool) -> None:
    """Both insert an axis, so ndim + 1 positions are valid."""
    axis = -(ndim + 2 + offset) if negative else ndim + 1 + offset
    x = t((2,) * ndim)
    for op, fn in (("unsqueeze", lambda: x.unsqueeze(axis)),
                   ("stack", lambda: tr.stack([x, x], axis=axis))):
        with pytest.raises(IndexError) as info:
            fn()
        assert str(info.value).startswith(op)
        assert_names(str(info.value), axis)
    # the extreme valid positions work
    assert x.unsqueeze(ndim).shape == (2,) * ndim + (1,)
    assert x.unsqueeze(-(ndim + 1)).shape == (1,) + (2,) * ndim


def test_repeated_reduction_axis_raises() -> None:
    with pytest.raises(ValueError, match="mean: repeated axis"):
        t((2, 3)).mean(axis=(0, 0))
    with pytest.raises(ValueError, match="sum: repeated axis"):
        t((2, 3)).sum(axis=(1, -1))


def test_axis_and_dim_together_raise() -> None:
    with pytest.raises(TypeError, match="axis or dim"):
        t((2, 3)).sum(axis=0, dim=0)


def test_max_over_empty_axis_raises() -> None:
    with pytest.raises(ValueError) as info:
        t((0, 3)).max(axis=0)
    assert_names(str(info.value), "max", (0, 3))


# ----------------------------------------------------------------------------- masks, dtypes
def test_where_and_masked_fill_need_boolean_masks() -> None:
    with pytest.raises(TypeError) as info:
        tr.where(np.array([1, 0, 1]), t((3,)), t((3,)))
    assert_names(str(info.value), "where", "int64")
    with pytest.raises(TypeError) as info:
        F.masked_fill(t((3,)), np.array([0.0, 1.0, 0.0]), 0.0)
    assert_names(str(info.value), "masked_fill", "float64")


def test_mask_shape_errors_name_both_shapes() -> None:
    with pytest.raises(ValueError) as info:
        F.masked_fill(t((2, 3)), np.ones((4, 3), dtype=bool), 0.0)
    assert_names(str(info.value), "masked_fill", (4, 3), (2, 3))
    for fn, name in ((F.softmax, "softmax"), (F.log_softmax, "log_softmax")):
        with pytest.raises(ValueError) as info:
            fn(t((2, 3)), mask=np.ones((4, 3), dtype=bool))
        msg = str(info.value)
        assert msg.startswith(name), msg
        assert_names(msg, (4, 3), (2, 3))


def test_tensor_construction_errors() -> None:
    with pytest.raises(TypeError, match="<U"):
        tr.Tensor("abc")
    with pytest.raises(TypeError, match="int64"):
        tr.Tensor(np.arange(3), requires_grad=True)
    with pytest.raises(IndexError, match="float64"):
        t((3,))[np.array([0.5])]
    with pytest.raises(IndexError) as info:
        t((2, 3))[5]
    assert_names(str(info.value), "getitem", (2, 3))


def test_item_and_bool_of_multi_element_tensor_raise() -> None:
    with pytest.raises(ValueError) as info:
        t((2, 3)).item()
    assert_names(str(info.value), "item", (2, 3))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(t((2,)))


def test_pow_with_tensor_exponent_and_bad_clip_and_dropout() -> None:
    with pytest.raises(TypeError, match="pow"):
        t((2,)) ** t((2,))
    with pytest.raises(ValueError, match="clip"):
        F.clip(t((2,)))
    with pytest.raises(ValueError, match="dropout"):
        F.dropout(t((2,)), p=1.5)
