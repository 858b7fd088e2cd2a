"""The Tensor API contract (core issue, item 2): construction and the dtype policy, scalars
that never promote float32, gradient accumulation, properties and conversions, operator
sugar, NumPy-named methods, the top-level split/stack/cat/where, and repr."""
from __future__ import annotations

import operator
import re
import warnings
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr


def leaf(values: Any, dtype: Any = np.float64) -> tr.Tensor:
    return tr.Tensor(np.asarray(values, dtype=dtype), requires_grad=True)


# ----------------------------------------------------------------------------- construction
@pytest.mark.parametrize("data, dtype", [
    (1.5, np.float32),
    ([1.0, 2.5], np.float32),
    ([[1.0], [2.0]], np.float32),
    (3, np.int64),
    ([1, 2, 3], np.int64),
    (True, np.bool_),
    (np.array([1.0, 2.0]), np.float64),
    (np.array([1.0, 2.0], dtype=np.float32), np.float32),
    (np.array([1, 2], dtype=np.int32), np.int32),
    (np.float64(2.5), np.float64),
    (np.float32(2.5), np.float32),
])
def test_dtype_policy_on_construction(data: Any, dtype: type) -> None:
    x = tr.Tensor(data)
    assert x.dtype == dtype
    np.testing.assert_array_equal(x.numpy(), np.asarray(data))
    assert not x.requires_grad and x.grad is None and x.is_leaf


@pytest.mark.parametrize("data, dtype", [
    ([np.float64(1), np.float64(2)], np.float64),
    ([np.zeros(2)], np.float64),
    ([1.0, np.float64(2)], np.float64),
    ((1.5, np.float64(2)), np.float64),
    ([[1.0], [np.float64(2)]], np.float64),
    ([np.zeros(2, np.float32), np.zeros(2)], np.float64),
    ([tr.tensor(np.zeros(2))], np.float64),
    ([np.float32(1), 2.0], np.float32),
    ([np.float32(1), 2], np.float32),
    ([np.int64(1), np.float32(2)], np.float32),
    ([np.float16(1), 2.5], np.float32),
    ([np.int32(1), 2.5], np.float32),
    ([tr.tensor([1.0, 2.0])], np.float32),
    ([np.float16(1), np.float16(2)], np.float16),
    ([np.int64(3), 4], np.int64),
    ([[1.0, 2.0], [3.0, 4.0]], np.float32),
])
def test_lists_follow_torch_python_numbers_float32_numpy_float64_kept(data: Any,
                                                                      dtype: type) -> None:
    """A list of Python floats is float32, but NumPy float64 inside a list (scalars, arrays,
    float64 tensors) stays float64, as in torch; float64 made only by NumPy's promotion of
    narrower entries (float32 with an int, float16 with a Python float) is float32, as in
    torch. Before, every float64 list result became float32."""
    x = tr.tensor(data)
    assert x.dtype == dtype
    np.testing.assert_array_equal(x.numpy(), np.asarray(data, dtype=np.float64))
    torch = pytest.importorskip("torch")
    as_torch = [t.numpy() if isinstance(t, tr.Tensor) else t for t in data]
    with warnings.catch_warnings():  # torch warns that a list of arrays is slow
        warnings.simplefilter("ignore", UserWarning)
        assert str(torch.tensor(as_torch).dtype) == f"torch.{np.dtype(dtype)}"


def test_dtype_argument_converts_and_data_is_copied() -> None:
    src = np.array([1.0, 2.0])
    x = tr.Tensor(src, dtype=np.float32)
    assert x.dtype == np.float32
    y = tr.Tensor(src, requires_grad=True)
    src[0] = 100.0
    assert y.array[0] == 1.0 and not np.shares_memory(y.array, src)
    z = tr.Tensor(y)  # from a tensor: a copy of its data, a new leaf
    assert not np.shares_memory(z.array, y.array) and z.dtype == np.float64
    assert tr.tensor([1.0], requires_grad=True, dtype=np.float64).dtype == np.float64


def test_integer_tensors_allowed_without_grad() -> None:
    ids = tr.Tensor([0, 2, 1])
    assert ids.dtype == np.int64 and not ids.requires_grad
    with pytest.raises(TypeError, match="int64"):
        tr.Tensor([0, 2, 1], requires_grad=True)
    assert (ids + 1).dtype == np.int64  # an int scalar keeps integer tensors integer


def test_requires_grad_flag_and_setter() -> None:
    x = tr.Tensor([1.0, 2.0])
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad
    y = leaf([1.0]) * 2.0
    with pytest.raises(RuntimeError, match="detach"):
        y.requires_grad_(False)


# ----------------------------------------------------------------------------- scalars
BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
}
SCALARS: list[Any] = [2.5, 3, np.float64(2.5), np.float32(2.5), np.int64(3), True]


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: type(s).__name__)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_scalar_never_promotes_float32(op: str, scalar: Any) -> None:
    xv = np.array([0.5, -1.25, 2.0], dtype=np.float32)
    fn = BINARY[op]
    s32 = np.float32(scalar)
    for reflected in (False, True):
        x = leaf(xv, np.float32)
        y = fn(scalar, x) if reflected else fn(x, scalar)
        expected = fn(s32, xv) if reflected else fn(xv, s32)
        assert y.dtype == np.float32, (op, reflected)
        np.testing.assert_allclose(y.array, expected, rtol=1e-7)
        y.sum().backward()
        assert x.grad.dtype == np.float32


@pytest.mark.parametrize("exponent", [2.0, 2, np.float64(0.5), np.float32(3.0)],
                         ids=lambda s: type(s).__name__)
def test_pow_by_scalar_keeps_float32(exponent: Any) -> None:
    x = leaf([0.5, 1.5, 4.0], np.float32)
    y = x ** exponent
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.array, np.array([0.5, 1.5, 4.0], np.float32) ** np.float32(
        exponent), rtol=1e-6)
    y.sum().backward()
    assert x.grad.dtype == np.float32
    with pytest.raises(TypeError):  # a tensor exponent (and so 2 ** x) is not supported
        2.0 ** x


# integer and boolean tensors with scalars: torch's categories (bool < integer < float); a
# scalar of a higher category gives that category's default dtype, never NumPy's float64
INT_CASES = [
    # (tensor data, expression, expected dtype, expected values)
    ([1, 2, 3], lambda a: a * 0.5, np.float32, [0.5, 1.0, 1.5]),
    ([1, 2, 3], lambda a: 0.5 * a, np.float32, [0.5, 1.0, 1.5]),
    ([1, 2, 3], lambda a: a - np.float64(0.5), np.float32, [0.5, 1.5, 2.5]),
    ([1, 2, 3], lambda a: a * np.array(0.5), np.float32, [0.5, 1.0, 1.5]),
    ([1, 2, 3], lambda a: a / 2, np.float32, [0.5, 1.0, 1.5]),
    ([1, 2, 3], lambda a: 3 / a, np.float32, [3.0, 1.5, 1.0]),
    ([1, 2, 3], lambda a: a / a, np.float32, [1.0, 1.0, 1.0]),
    ([1, 2, 3], lambda a: a + 1, np.int64, [2, 3, 4]),
    ([1, 2, 3], lambda a: a * np.int32(2), np.int64, [2, 4, 6]),
    ([1, 2, 3], lambda a: a ** 2, np.int64, [1, 4, 9]),
    ([1, 4, 9], lambda a: a ** 0.5, np.float32, [1.0, 2.0, 3.0]),
    ([1, 4, 9], lambda a: a ** np.float64(0.5), np.float32, [1.0, 2.0, 3.0]),
    ([True, False], lambda a: a * 2, np.int64, [2, 0]),
    ([True, False], lambda a: a + 1, np.int64, [2, 1]),
    ([True, False], lambda a: a * 0.5, np.float32, [0.5, 0.0]),
    ([True, False], lambda a: a ** 2, np.int64, [1, 0]),
    ([True, False], lambda a: a * True, np.bool_, [True, False]),
]


@pytest.mark.parametrize("data, fn, dtype, expected", INT_CASES)
def test_integer_and_bool_tensors_with_scalars_follow_torch(data: Any, fn: Callable, dtype: Any,
                                                            expected: Any) -> None:
    out = fn(tr.Tensor(data))
    assert out.dtype == dtype and not out.requires_grad
    np.testing.assert_array_equal(out.array, np.asarray(expected, dtype=dtype))


FLOAT_MATH = {  # ops whose math is floating: integer input computes in float32, as torch
    "exp": (lambda t: t.exp(), np.exp),
    "log": (lambda t: t.log(), np.log),
    "sqrt": (lambda t: t.sqrt(), np.sqrt),
    "tanh": (lambda t: t.tanh(), np.tanh),
    "sigmoid": (lambda t: t.sigmoid(), lambda v: 1 / (1 + np.exp(-v))),
    "mean": (lambda t: t.mean(), np.mean),
    "softmax": (lambda t: t.softmax(), lambda v: np.exp(v) / np.exp(v).sum()),
    "div": (lambda t: t / t, lambda v: v / v),
}


@pytest.mark.parametrize("name", sorted(FLOAT_MATH))
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_float_math_on_integer_tensors_is_float32(name: str, dtype: Any) -> None:
    data = np.array([1, 2, 3]).astype(dtype) if dtype is not np.bool_ else np.array([True, True])
    fn, reference = FLOAT_MATH[name]
    out = fn(tr.Tensor(data))
    assert out.dtype == np.float32, (name, dtype)
    np.testing.assert_allclose(out.array, reference(data.astype(np.float32)), rtol=1e-6)


@pytest.mark.parametrize("other", [np.int64, np.int32, np.bool_])
def test_integer_tensor_beside_a_float_tensor_takes_its_dtype(other: Any) -> None:
    for dtype in (np.float32, np.float64):
        x = leaf([0.5, -1.5], dtype)
        k = tr.Tensor(np.array([2, 1]).astype(other))
        for y in (x * k, k * x, x + k, x - k, k / x, tr.cat([x, k])):
            assert y.dtype == dtype
        (x * k).sum().backward()
        assert x.grad.dtype == dtype
        np.testing.assert_array_equal(x.grad, np.array([2, 1]).astype(other).astype(dtype))


def test_integer_ops_that_keep_integers_integer() -> None:
    a = tr.Tensor([1, -2, 3])
    for out in (a + a, a * a, a.sum(), a.max(), a.relu(), a.abs(), a @ a, a[1:],
                a.reshape(3, 1), -a):
        assert out.dtype == np.int64


def test_int32_tensor_keeps_int32_with_an_int_scalar() -> None:
    a = tr.Tensor(np.array([1, 2], dtype=np.int32))
    assert (a + 7).dtype == np.int32 and (a * np.int64(2)).dtype == np.int32


def test_integer_tensor_to_negative_integer_power_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"int64.*-1.*float\(\)"):
        tr.Tensor([1, 2]) ** -1
    np.testing.assert_allclose((tr.Tensor([1, 2]).float() ** -1).array, [1.0, 0.5])


def test_zero_dim_host_array_counts_as_a_scalar() -> None:
    # NumPy 2 alone promotes float32 with a float64 0-d array to float64
    x = leaf([0.5, 2.0], np.float32)
    y = x * np.array(3.0) + np.array(1.0)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.array, np.array([2.5, 7.0], np.float32))
    y.sum().backward()
    assert x.grad.dtype == np.float32 and np.all(x.grad == 3.0)


def test_scalar_keeps_float64_tensor_float64() -> None:
    x = leaf([0.1, 0.2])
    assert (x * np.float32(2.0)).dtype == np.float64
    assert (1.0 - x).dtype == np.float64
    assert (x ** np.float32(2.0)).dtype == np.float64


# the fast path of scalar lifting (all tensor inputs float) against the general one
FLOAT_DTYPES = [np.float16, np.float32, np.float64]
REAL_SCALARS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(-(2 ** 70), 2 ** 70),
    st.booleans(),
    st.floats(allow_nan=True, width=64).map(np.float64),
    st.floats(allow_nan=True, width=32).map(np.float32),
    st.floats(allow_nan=True, width=16).map(np.float16),
    st.integers(-128, 127).map(np.int8),
    st.integers(0, 255).map(np.uint8),
    st.integers(-(2 ** 63), 2 ** 63 - 1).map(np.int64),
    st.integers(0, 2 ** 64 - 1).map(np.uint64),
    st.booleans().map(np.bool_),
)


@given(dtypes=st.lists(st.sampled_from(FLOAT_DTYPES), min_size=1, max_size=2),
       scalars=st.lists(REAL_SCALARS, min_size=1, max_size=2), order=st.randoms())
def test_fast_scalar_lifting_matches_the_general_rule(dtypes: list, scalars: list,
                                                       order: Any) -> None:
    """_apply lifts the scalars of an op on float tensors through a fast path; it must give
    exactly the tensors (dtypes and values) of the general rule, lift_inputs."""
    from tinygrad_rnn.ops import Add
    from tinygrad_rnn.dtypes import lift_inputs, lift_scalars_beside_floats

    tensors = [tr.Tensor(np.array([1.5, -2.0], dtype=d)) for d in dtypes]
    inputs = tensors + scalars
    order.shuffle(inputs)
    inputs = tuple(inputs)
    with np.errstate(over="ignore"):  # 65520.0 is inf in float16, on both paths
        fast = lift_scalars_beside_floats(inputs)
        general = lift_inputs(Add, inputs)
    assert fast is not None and len(fast) == len(general) == len(inputs)
    for x, a, b in zip(inputs, fast, general):
        if isinstance(x, tr.Tensor):
            assert a is x and b is x
        else:
            assert a.dtype == b.dtype == np.result_type(*dtypes), (x, a.dtype, b.dtype)
            assert a.shape == b.shape == ()
            np.testing.assert_array_equal(a.array, b.array)


@pytest.mark.parametrize("inputs", [
    (np.array([1, 2]), 2.0),                       # an integer tensor: promotion rules
    (np.array([True, False]), 1),
    (np.array([1.0], np.float32), np.array(2.0)),  # a 0-d array: general path
    (np.array([1.0], np.float32), 1j),             # complex is no real scalar
    (np.array([1.0], np.float32), [1.0, 2.0]),
], ids=["int-tensor", "bool-tensor", "0d-array", "complex", "list"])
def test_fast_scalar_lifting_leaves_other_cases_to_the_general_rule(inputs: tuple) -> None:
    from tinygrad_rnn.dtypes import lift_scalars_beside_floats

    data, other = inputs
    assert lift_scalars_beside_floats((tr.Tensor(data), other)) is None
    assert lift_scalars_beside_floats((1.0, 2.0)) is None  # no tensor at all


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("scalar", [2.0, 3, True, np.float64(0.1), np.int64(7),
                                    np.uint8(200), np.bool_(True), 1000],
                         ids=lambda s: f"{type(s).__name__}({s})")
def test_scalar_ops_on_float_tensors_keep_dtype_and_values(dtype: Any, scalar: Any) -> None:
    """x * s, s - x and x / s through the public operators: the tensor's dtype, and the
    values NumPy gives with the scalar cast to that dtype first."""
    data = np.array([0.5, -1.25, 3.0], dtype)
    x = tr.Tensor(data, requires_grad=True)
    s = np.asarray(scalar, dtype)
    for got, want in ((x * scalar, data * s), (scalar - x, s - data), (x / scalar, data / s)):
        assert got.dtype == dtype and got.requires_grad
        np.testing.assert_array_equal(got.array, want)


@pytest.mark.parametrize("dtype, scalar, expr", [
    (np.uint8, 300, lambda a, s: a + s),
    (np.uint8, -1, lambda a, s: a * s),
    (np.uint8, np.int64(256), lambda a, s: s - a),   # was wrapped around silently
    (np.int8, 128, lambda a, s: a - s),
    (np.int32, 2 ** 40, lambda a, s: a + s),
    (np.int64, 2 ** 70, lambda a, s: a * s),
    (np.bool_, 2 ** 64, lambda a, s: a + s),         # bool with an int: int64, too small
    (np.uint8, np.array(300), lambda a, s: a + s),   # a 0-d array counts as a scalar
])
def test_integer_scalar_outside_the_tensors_dtype_is_a_clear_error(dtype: Any, scalar: Any,
                                                                    expr: Callable) -> None:
    """Regression: NumPy's bare "Python integer 300 out of bounds for uint8" named no op,
    and a NumPy integer scalar was cast to uint8, wrapping around silently (torch wraps
    both). We refuse."""
    a = tr.Tensor(np.array([1, 0]).astype(dtype))
    with pytest.raises(ValueError) as info:
        expr(a, scalar)
    msg = str(info.value)
    shown = scalar[()] if isinstance(scalar, np.ndarray) else scalar
    assert f"the integer scalar {shown!r} is outside the range of " in msg, msg
    assert f"(shape (2,) dtype {np.dtype(dtype)})" in msg and "wrap around" in msg
    assert msg.split(":")[0] in ("Add", "Sub", "Mul")


def test_integer_scalars_at_the_edges_of_the_range_are_accepted() -> None:
    a = tr.Tensor(np.array([0, 1], np.uint8))
    assert (a + 255).dtype == np.uint8 and (a * 0).dtype == np.uint8
    np.testing.assert_array_equal((a + np.uint8(254)).array, [254, 255])
    b = tr.Tensor(np.array([5], np.int8))
    assert (b + -128).dtype == np.int8 and (b + -128).array.tolist() == [-123]
    assert (b + 0.5).dtype == np.float32  # a float scalar still computes in float32


def test_integer_scalar_takes_the_promoted_dtype_of_the_integer_tensors() -> None:
    """Regression: the scalar took the first integer tensor's dtype (int8), so 1000 beside
    an int8 and an int64 tensor raised although the result is int64."""
    i8, i64 = tr.Tensor(np.array(1, np.int8)), tr.Tensor(np.array(2, np.int64))
    for parts in ([i8, i64, 1000], [1000, i8, i64], [i64, i8, np.int32(1000)]):
        out = tr.stack(parts)
        assert out.dtype == np.int64
        np.testing.assert_array_equal(sorted(out.array.tolist()), [1, 2, 1000])
    u8 = tr.Tensor(np.array(1, np.uint8))
    assert tr.stack([u8, i8, 200]).dtype == np.int16  # uint8 with int8 is int16
    with pytest.raises(ValueError, match=r"-1 is outside the range of uint8"):
        tr.stack([u8, tr.Tensor(np.array(True)), -1])


# fill_ and zero_ keep the tensor's dtype: they do not promote, they take any value that the
# dtype holds exactly (the old tree's and torch's result) and refuse one it would change
FILL_ACCEPTED = [
    (np.bool_, 0), (np.bool_, 1), (np.bool_, True), (np.bool_, False), (np.bool_, 1.0),
    (np.bool_, np.int64(0)), (np.uint8, 255), (np.uint8, 0), (np.int8, -128),
    (np.int8, np.int64(127)), (np.int64, 2.0), (np.int64, True), (np.int32, np.float32(3)),
    (np.int64, -(2 ** 63)), (np.float32, 0.1), (np.float32, 3), (np.float32, True),
    (np.float64, np.float16(0.5)), (np.float16, 1 / 3), (np.float32, float("nan")),
    (np.float64, -float("inf")), (np.float32, np.array(2.5)), (np.int32, np.array(4)),
]


@pytest.mark.parametrize("dtype, value", FILL_ACCEPTED,
                         ids=lambda v: v.__name__ if isinstance(v, type) else repr(v))
def test_fill_writes_any_value_the_dtype_holds_exactly(dtype: Any, value: Any) -> None:
    x = tr.Tensor(np.array([1, 0, 1]).astype(dtype))
    version = x._version.value
    assert x.fill_(value) is x
    # the start-of-day fill_ was this NumPy assignment
    want = np.zeros(3, dtype)
    want[...] = value
    assert x.dtype == dtype and x._version.value == version + 1
    np.testing.assert_array_equal(x.array, want)
    torch = pytest.importorskip("torch")
    ref = torch.from_numpy(np.array([1, 0, 1]).astype(dtype)).fill_(
        value.item() if isinstance(value, np.ndarray) else value)
    np.testing.assert_array_equal(x.array, ref.numpy())


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int32, np.int64,
                                   np.float16, np.float32, np.float64])
def test_zero_works_on_every_dtype(dtype: Any) -> None:
    """Regression: zero_() on a boolean tensor raised a TypeError (fill_ promoted 0 to
    int64 and refused to write int64 into bool)."""
    x = tr.Tensor(np.array([1, 1]).astype(dtype))
    assert x.zero_() is x and x.dtype == dtype
    np.testing.assert_array_equal(x.array, np.zeros(2, dtype))
    zero_d = tr.Tensor(np.array(1).astype(dtype))
    assert zero_d.zero_().array.shape == () and not zero_d.array.any()


@pytest.mark.parametrize("dtype, value, holds", [
    (np.int64, 2.5, "only the integers from -9223372036854775808 to 9223372036854775807"),
    (np.int32, float("nan"), "only the integers from -2147483648 to 2147483647"),
    (np.int32, float("inf"), "only the integers from -2147483648 to 2147483647"),
    (np.int64, 2 ** 63, "only the integers from -9223372036854775808 to "),
    (np.uint8, 300, "only the integers from 0 to 255"),
    (np.uint8, -1, "only the integers from 0 to 255"),
    (np.uint8, np.int64(256), "only the integers from 0 to 255"),
    (np.int8, np.float32(0.5), "only the integers from -128 to 127"),
    (np.bool_, 2, "only 0, 1, True and False"),
    (np.bool_, -1, "only 0, 1, True and False"),
    (np.bool_, 0.5, "only 0, 1, True and False"),
    (np.bool_, float("nan"), "only 0, 1, True and False"),
])
def test_fill_refuses_a_value_the_dtype_would_change(dtype: Any, value: Any,
                                                     holds: str) -> None:
    x = tr.Tensor(np.array([1, 0]).astype(dtype))
    with pytest.raises(ValueError) as info:
        x.fill_(value)
    msg = str(info.value)
    assert msg.startswith(f"fill_: a tensor of dtype {np.dtype(dtype)} (shape (2,)) holds "
                          f"{holds}"), msg
    assert f"the value {value!r} would change" in msg
    np.testing.assert_array_equal(x.array, np.array([1, 0]).astype(dtype))  # nothing written


@pytest.mark.parametrize("value, error, text", [
    ("1", TypeError, "fill_: the value must be a real number, got '1' (str)"),
    (1j, TypeError, "fill_: the value must be a real number, got 1j (complex)"),
    (None, TypeError, "fill_: the value must be a real number, got None (NoneType)"),
    (np.array([1.0, 2.0]), ValueError, "fill_: the value must be a single number (a scalar "
                                       "or a 0-d tensor), got an array of shape (2,)"),
])
def test_fill_refuses_a_value_that_is_no_single_real_number(value: Any, error: type,
                                                            text: str) -> None:
    x = tr.Tensor(np.array([1.0, 0.0]))
    with pytest.raises(error) as info:
        x.fill_(value)
    assert str(info.value).startswith(text), str(info.value)
    np.testing.assert_array_equal(x.array, [1.0, 0.0])


def test_fill_takes_a_0d_tensor() -> None:
    x = tr.Tensor(np.array([1, 2], np.int32))
    x.fill_(tr.Tensor(np.array(7, np.int64)))
    assert x.dtype == np.int32 and x.array.tolist() == [7, 7]


@pytest.mark.parametrize("scalar", [0.5, np.float64(0.5), np.float32(0.5), 1],
                         ids=lambda s: type(s).__name__)
def test_comparisons_give_boolean_tensors_without_grad(scalar: Any) -> None:
    x = leaf([0.25, 0.5, 0.75], np.float32)
    for fn in (operator.lt, operator.le, operator.gt, operator.ge):
        out = fn(x, scalar)
        want = fn(np.array([0.25, 0.5, 0.75], np.float32), np.float32(scalar))
        assert out.dtype == np.bool_ and not out.requires_grad and out.grad_fn is None
        np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(x.eq(0.5).numpy(), [False, True, False])
    np.testing.assert_array_equal(x.ne(0.5).numpy(), [True, False, True])


def test_equality_operators_are_elementwise_and_tensors_still_hash_by_identity() -> None:
    a, b = tr.Tensor([1.0, 2.0]), tr.Tensor([1.0, 3.0])
    eq, ne = a == b, a != b
    assert isinstance(eq, tr.Tensor) and eq.dtype == np.bool_
    np.testing.assert_array_equal(eq.numpy(), [True, False])
    np.testing.assert_array_equal(ne.numpy(), [False, True])
    np.testing.assert_array_equal((a == 1).numpy(), [True, False])
    assert len({a, b}) == 2 and {a: 1}[a] == 1
    assert (a == None) is False and (a != None) is True  # noqa: E711  (as torch)


# ----------------------------------------------------------------------------- grad
def test_grad_accumulates_across_backward_calls_and_zero_grad() -> None:
    x = leaf([1.0, 2.0])
    (x * 3.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, [5.0, 7.0])
    x.zero_grad()
    assert x.grad is None
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_grad_is_a_fresh_array_of_input_shape_and_dtype() -> None:
    x = leaf(np.ones((2, 3), dtype=np.float32), np.float32)
    y = x * 1.0
    g = np.ones((2, 3), dtype=np.float32)
    y.backward(g)
    assert isinstance(x.grad, tr.Tensor) and not x.grad.requires_grad  # torch's .grad
    assert isinstance(x.grad.array, np.ndarray) and x.grad.is_leaf
    assert x.grad.shape == (2, 3) and x.grad.dtype == np.float32
    assert not np.shares_memory(x.grad, g)


# ----------------------------------------------------------------------------- properties
def test_shape_dtype_ndim_size_T_len_iter() -> None:
    x = tr.Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tuple)
    assert x.dtype == np.float64 and x.ndim == 3 and x.numel() == 24 and len(x) == 2
    assert x.size() == (2, 3, 4) and x.size(1) == 3 and x.dim() == 3
    assert x.T.shape == (4, 3, 2)
    np.testing.assert_array_equal(x.T.numpy(), x.numpy().T)
    rows = list(x)
    assert len(rows) == 2 and rows[1].shape == (3, 4)
    with pytest.raises(TypeError):
        len(tr.Tensor(1.0))
    assert x.device == "cpu"


def test_numpy_item_tolist() -> None:
    x = tr.Tensor(np.array([[1.5, 2.5]]))
    assert isinstance(x.numpy(), np.ndarray) and np.shares_memory(x.numpy(), x.array)
    assert x.tolist() == [[1.5, 2.5]]
    one = tr.Tensor(np.array([[4.25]]))
    assert one.item() == 4.25 and isinstance(one.item(), float)
    assert isinstance(tr.Tensor(3).item(), int)


@pytest.mark.parametrize("device", ["cpu", "standin"])
def test_float_and_int_of_a_one_element_tensor(device: str) -> None:
    """float(t) and int(t), documented as explicit host reads, did not exist (TypeError
    "float() argument must be ... not 'Tensor'"). They read the one element as item() does,
    on any device; int() truncates toward zero, as Python's int(2.7) and torch's int(t)."""
    assert float(tr.tensor([[2.5]], device=device)) == 2.5
    assert isinstance(float(tr.tensor(3, device=device)), float)
    assert float(tr.tensor(True, device=device)) == 1.0
    assert int(tr.tensor(np.float64(-2.7), device=device)) == -2
    assert int(tr.tensor([7], device=device)) == 7
    assert isinstance(int(tr.tensor([7.0], device=device)), int)
    with pytest.raises(ValueError, match="cannot convert float NaN to integer"):
        int(tr.tensor(np.nan, device=device))


@pytest.mark.parametrize("convert, name", [(float, "float()"), (int, "int()"),
                                           (lambda t: t.item(), "item()")])
@pytest.mark.parametrize("shape", [(2,), (0,), (1, 3)])
def test_python_scalar_of_a_tensor_of_several_elements_is_a_clear_error(convert: Callable,
                                                                        name: str,
                                                                        shape: tuple) -> None:
    x = tr.zeros(*shape)
    n = int(np.prod(shape))
    with pytest.raises(ValueError, match=re.escape(
            f"{name}: only one-element tensors can be converted to Python scalars; got a "
            f"tensor of shape {shape} with {n} elements")):
        convert(x)


def test_detach_shares_data_and_drops_graph() -> None:
    x = leaf([1.0, 2.0])
    y = x * 2.0
    d = y.detach()
    assert np.shares_memory(d.array, y.array)
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    assert y.grad_fn is not None and y.grad_fn.name == "Mul"


def test_clone_is_a_differentiable_copy() -> None:
    x = leaf([1.0, 2.0])
    c = x.clone()
    assert not np.shares_memory(c.array, x.array) and c.grad_fn is not None
    (c * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 3.0])


def test_astype_float_double_are_differentiable() -> None:
    x = leaf([1.0, 2.0], np.float32)
    assert x.astype(np.float32) is x
    y = x.double()
    assert y.dtype == np.float64
    (y * np.float64(0.1)).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, [0.1, 0.1], rtol=1e-7)
    z = leaf([1.0])
    assert z.float().dtype == np.float32
    ids = tr.Tensor([1, 2]).astype(np.float32)
    assert ids.dtype == np.float32 and not ids.requires_grad


# ----------------------------------------------------------------------------- sugar
def test_operator_sugar_values_and_gradients() -> None:
    av, bv = np.array([[1.0, -2.0], [3.0, 0.5]]), np.array([[0.5, 4.0], [-1.0, 2.0]])
    a, b = leaf(av), leaf(bv)
    out = (-a + b) * a - b / a + (a @ b)
    np.testing.assert_allclose(out.array, (-av + bv) * av - bv / av + av @ bv, rtol=1e-15)
    out.sum().backward()
    ones = np.ones((2, 2))
    # d/da: -a + (-a + b) + b / a^2 + G b^T ; d/db: a - 1 / a + a^T G
    np.testing.assert_allclose(a.grad, -av + (-av + bv) + bv / av ** 2 + ones @ bv.T,
                               rtol=1e-14)
    np.testing.assert_allclose(b.grad, av - 1 / av + av.T @ ones, rtol=1e-14)


def test_reflected_matmul_and_numpy_operands() -> None:
    w = leaf(np.eye(2) * 2.0)
    m = np.array([[1.0, 2.0]])
    out = m @ w  # ndarray @ Tensor goes to Tensor.__rmatmul__
    assert isinstance(out, tr.Tensor)
    np.testing.assert_array_equal(out.array, [[2.0, 4.0]])
    out.sum().backward()
    np.testing.assert_array_equal(w.grad, [[1.0, 1.0], [2.0, 2.0]])
    assert isinstance(np.ones(2) + w[0], tr.Tensor)


def test_indexing_values_and_gradient_accumulation() -> None:
    x = leaf(np.arange(6.0).reshape(2, 3))
    picked = x[np.array([0, 0, 1]), np.array([1, 1, 2])]  # repeated index accumulates
    np.testing.assert_array_equal(picked.array, [1.0, 1.0, 5.0])
    (picked.sum() + x[1, :2].sum() + x[tr.Tensor([1])].sum()).backward()
    np.testing.assert_array_equal(x.grad, [[0.0, 2.0, 0.0], [2.0, 2.0, 2.0]])


@pytest.mark.parametrize("name, ref", [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("abs", np.abs),
    ("tanh", np.tanh), ("relu", lambda v: np.maximum(v, 0)),
    ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
])
def test_unary_methods_match_numpy(name: str, ref: Callable) -> None:
    xv = np.array([0.3, 1.7, 2.2]) if name in ("log", "sqrt") else np.array([-1.3, 0.4, 2.2])
    y = getattr(leaf(xv), name)()
    np.testing.assert_allclose(y.array, ref(xv), rtol=1e-15)


def test_reduction_methods_axis_keepdims_dim() -> None:
    xv = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    x = tr.Tensor(xv)
    np.testing.assert_array_equal(x.sum().array, xv.sum())
    np.testing.assert_array_equal(x.sum(axis=0).array, xv.sum(axis=0))
    np.testing.assert_array_equal(x.sum(dim=1, keepdims=True).array, xv.sum(1, keepdims=True))
    np.testing.assert_array_equal(x.mean(axis=(0, 1)).array, xv.mean())
    np.testing.assert_array_equal(x.max(axis=1).array, [5.0, 6.0])
    np.testing.assert_array_equal(x.min(axis=0).array, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.maximum(3.0).array, np.maximum(xv, 3.0))
    np.testing.assert_array_equal(x.minimum(3.0).array, np.minimum(xv, 3.0))
    np.testing.assert_array_equal(x.clip(2.0, 5.0).array, np.clip(xv, 2.0, 5.0))
    np.testing.assert_array_equal(x.clamp(max=2.0).array, np.clip(xv, None, 2.0))
    np.testing.assert_allclose(x.softmax(axis=0).array.sum(axis=0), 1.0, rtol=1e-15)
    np.testing.assert_allclose(np.exp(x.log_softmax().array).sum(axis=1), 1.0, rtol=1e-15)


def test_shape_methods() -> None:
    x = leaf(np.arange(6.0))
    assert x.reshape(2, 3).shape == (2, 3) and x.reshape((3, 2)).shape == (3, 2)
    assert x.view(-1, 2).shape == (3, 2)
    y = x.reshape(1, 2, 3)
    assert y.flatten().shape == (6,)
    assert y.transpose(2, 0, 1).shape == (3, 1, 2) and y.permute((1, 2, 0)).shape == (2, 3, 1)
    assert y.swapaxes(0, 2).shape == (3, 2, 1)
    assert y.squeeze().shape == (2, 3) and y.squeeze(0).shape == (2, 3)
    assert y.squeeze(1).shape == (1, 2, 3)  # not of size 1: unchanged
    assert tr.Tensor(1.0).squeeze(0).shape == () and tr.Tensor(1.0).squeeze(-1).shape == ()
    assert y.unsqueeze(-1).shape == (1, 2, 3, 1) and y.unsqueeze(1).shape == (1, 1, 2, 3)
    assert x[:2].broadcast_to((3, 2)).shape == (3, 2)
    assert x[:2].expand((2, 2)).shape == (2, 2)
    z = y.transpose(2, 0, 1).reshape(6)
    z.backward(np.arange(6.0))
    np.testing.assert_array_equal(x.grad, [0.0, 2.0, 4.0, 1.0, 3.0, 5.0])


# ----------------------------------------------------------------------------- top level
def test_split_stack_cat_where_top_level() -> None:
    x = leaf(np.arange(5.0))
    a, b = tr.split(x, [2, 3])
    np.testing.assert_array_equal(a.array, [0.0, 1.0])
    s = tr.stack([a, a * 2.0], axis=1)  # (2, 2)
    assert s.shape == (2, 2)
    c = tr.cat([b, a], dim=0)  # regression: dim= used to raise "give axis or dim, not both"
    np.testing.assert_array_equal(c.array, [2.0, 3.0, 4.0, 0.0, 1.0])
    assert tr.concatenate is tr.cat
    w = tr.where(c > 1.5, c, tr.zeros_like(c))
    np.testing.assert_array_equal(w.array, [2.0, 3.0, 4.0, 0.0, 0.0])
    (s.sum() + (w * np.arange(5.0)).sum()).backward()
    # a gets 1 + 2 from the stack; b gets 0, 1, 2 from where; a's where entries are masked out
    np.testing.assert_array_equal(x.grad, [3.0, 3.0, 0.0, 1.0, 2.0])
    pieces = tr.split(x, 2)
    assert [p.shape for p in pieces] == [(2,), (2,), (1,)]


@given(n=st.integers(1, 8), size=st.integers(1, 8))
def test_split_by_size_covers_the_axis(n: int, size: int) -> None:
    x = tr.Tensor(np.arange(float(n)))
    pieces = tr.split(x, size)
    assert all(p.shape[0] == size for p in pieces[:-1]) and 1 <= pieces[-1].shape[0] <= size
    np.testing.assert_array_equal(tr.cat(list(pieces)).array, x.array)


def test_creation_helpers() -> None:
    assert tr.zeros(2, 3).shape == (2, 3) and tr.zeros((2, 3)).dtype == np.float32
    assert tr.ones(2, dtype=np.float64).dtype == np.float64
    np.testing.assert_array_equal(tr.full((2,), 7.0).array, [7.0, 7.0])
    x = leaf([1.0, 2.0])
    assert tr.zeros_like(x).dtype == np.float64 and not tr.zeros_like(x).requires_grad
    assert tr.ones_like(x, requires_grad=True).requires_grad
    np.testing.assert_array_equal(tr.arange(3).array, [0, 1, 2])
    r1, r2 = tr.randn(2, 3, generator=7), tr.randn(2, 3, generator=7)
    np.testing.assert_array_equal(r1.array, r2.array)
    assert r1.dtype == np.float32
    u = tr.rand(100, generator=1)
    assert np.all((u.array >= 0) & (u.array < 1))


# ----------------------------------------------------------------------------- repr
def test_repr_is_readable() -> None:
    x = tr.Tensor(np.array([1.0, 2.5]))
    assert repr(x) == "Tensor([1. , 2.5], dtype=float64)"
    r = repr(leaf([1.0]))
    assert "requires_grad=True" in r and "float64" in r
    y = leaf(np.ones((2, 2))) * 2.0
    assert "grad_fn=Mul" in repr(y) and "[[2., 2.]," in repr(y)
    assert "dtype=float32" in repr(tr.Tensor([0.5]))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_full_reductions_give_0d_arrays_not_numpy_scalars(reduce: str) -> None:
    """NumPy's full reductions return NumPy scalars; a tensor always holds an array, so
    .numpy() is an ndarray (tr.save, np.shares_memory and friends expect one) and in-place
    ops work on the 0-d result."""
    x = leaf([1.0, -2.0, 4.0])
    y = getattr(x, reduce)()
    assert type(y.array) is np.ndarray and y.shape == ()
    assert type(y.numpy()) is np.ndarray and y.numpy().shape == ()
    y.backward()
    assert type(x.grad.array) is np.ndarray
    with tr.no_grad():
        z = getattr(x.detach(), reduce)()
        before = z.item()
        z.add_(1.0)
    assert z.item() == before + 1.0
