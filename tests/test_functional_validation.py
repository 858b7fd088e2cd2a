"""Argument validation of tinygrad_rnn.functional: every refused argument raises an error that
names the function and the argument (and the fix where there is one), and every valid
spelling (NumPy scalars, 0-d arrays, 0/1 flags, host data) is still accepted.

Each refusal here was accepted silently or failed with a bare Python error before: a float
or string ignore_index ignored nothing; label_smoothing / p given as a string failed inside
a comparison; training="no" applied dropout; F.linear(list, W) raised AttributeError and
mixed dtypes were computed in float64; a None fill value filled NaN. The acceptance cases
are guards: the checks must not refuse what was (and is, in torch) valid.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import functional as F

X = np.random.default_rng(0).normal(size=(4, 3))
T = np.array([0, 1, 2, 1])


def _x() -> tr.Tensor:
    return tr.Tensor(X)


def _raises(kind: type, call: Callable[[], Any], *parts: str) -> str:
    """Run ``call``, expect ``kind``; every one of ``parts`` must be in the message."""
    with pytest.raises(kind) as info:
        call()
    msg = str(info.value)
    for part in parts:
        assert part in msg, (part, msg)
    return msg


# ------------------------------------------------------------------------------ numbers
def _unit_interval_ok(value: Any) -> bool:
    """Whether ``value`` is a real number in [0, 1], as the checks define it."""
    if isinstance(value, np.ndarray):
        if value.ndim != 0:
            return False
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer,
                                                                      np.floating)):
        return False
    return 0.0 <= float(value) <= 1.0


HYPER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1),
    st.floats(0, 1).map(np.float32), st.floats(0, 1).map(np.array), st.integers(-2, 3),
    st.booleans(), st.none(), st.text(max_size=3), st.just([0.5]),
)


@given(p=HYPER)
@example(p="0.5")
@example(p=float("nan"))
@example(p=True)
@example(p=np.array(0.25))
@example(p=np.float32(0.5))
@example(p=1)
def test_dropout_p_is_a_real_number_in_the_unit_interval(p: Any) -> None:
    if _unit_interval_ok(p):
        out = F.dropout(_x(), p, generator=0)
        assert out.shape == X.shape
        return
    kind = ValueError if isinstance(p, float) or isinstance(p, int) and not isinstance(
        p, bool) else TypeError
    _raises(kind, lambda: F.dropout(_x(), p), "dropout", "p")


@given(eps=HYPER)
@example(eps="0.1")
@example(eps=None)
@example(eps=float("nan"))
@example(eps=True)
@example(eps=np.array(0.1))
def test_label_smoothing_is_a_real_number_in_the_unit_interval(eps: Any) -> None:
    if _unit_interval_ok(eps):
        got = F.cross_entropy(_x(), T, label_smoothing=eps).item()
        ref = F.cross_entropy(_x(), T, label_smoothing=float(np.asarray(eps))).item()
        assert got == ref
        return
    kind = ValueError if isinstance(eps, float) or isinstance(eps, int) and not isinstance(
        eps, bool) else TypeError
    _raises(kind, lambda: F.cross_entropy(_x(), T, label_smoothing=eps), "cross_entropy",
            "label_smoothing")
    q = np.full(X.shape, 1 / 3)  # the probability form checks it too
    _raises(kind, lambda: F.cross_entropy(_x(), q, label_smoothing=eps), "label_smoothing")


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("bad", [1.5, 1.0, "1", None, True, np.float64(1.0)])
def test_ignore_index_must_be_an_int(name: str, bad: Any) -> None:
    """ignore_index=1.5 used to be accepted and match no target (nothing ignored)."""
    _raises(TypeError, lambda: getattr(F, name)(_x(), T, ignore_index=bad), name,
            "ignore_index", "must be an int")


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("good", [np.int64(1), np.array(1), np.int32(1)])
def test_ignore_index_accepts_numpy_integers(name: str, good: Any) -> None:
    fn = getattr(F, name)
    assert fn(_x(), T, ignore_index=good).item() == fn(_x(), T, ignore_index=1).item()


# ------------------------------------------------------------------------------ flags
@pytest.mark.parametrize("bad", ["no", "False", None, 2, 0.0, 1.0, [True]])
def test_dropout_training_must_be_a_bool(bad: Any) -> None:
    """training="no" used to be truthy and apply dropout."""
    _raises(TypeError, lambda: F.dropout(_x(), 0.5, training=bad), "dropout", "training")


@pytest.mark.parametrize("flag", [False, np.bool_(False), 0])
def test_dropout_training_off_is_the_identity(flag: Any) -> None:
    x = _x()
    assert F.dropout(x, 0.5, training=flag) is x


@pytest.mark.parametrize("flag", [True, np.bool_(True), 1])
def test_dropout_training_on_drops(flag: Any) -> None:
    out = F.dropout(_x(), 0.5, training=flag, generator=0)
    ref = F.dropout(_x(), 0.5, training=True, generator=0)
    np.testing.assert_array_equal(out.array, ref.array)


def test_dropout_generator_and_host_input() -> None:
    _raises(TypeError, lambda: F.dropout(_x(), 0.5, generator=True), "dropout", "generator")
    _raises(TypeError, lambda: F.dropout(_x(), 0.5, generator="seed"), "dropout", "generator")
    out = F.dropout([1.0, 2.0, 3.0], 0.0)  # a list is wrapped, as the other functions do
    np.testing.assert_array_equal(out.array, [1.0, 2.0, 3.0])


# ------------------------------------------------------------------------------ reductions
# (refused reductions are covered in test_errors.py; a NumPy string stays valid)
LOSSES = {
    "cross_entropy": lambda r: F.cross_entropy(_x(), T, reduction=r),
    "nll_loss": lambda r: F.nll_loss(_x(), T, reduction=r),
    "mse_loss": lambda r: F.mse_loss(_x(), X, reduction=r),
    "binary_cross_entropy_with_logits":
        lambda r: F.binary_cross_entropy_with_logits(_x(), np.abs(X) / 4, reduction=r),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_reduction_accepts_numpy_strings(name: str) -> None:
    assert LOSSES[name](np.str_("sum")).item() == LOSSES[name]("sum").item()


def test_class_weight_that_holds_no_numbers() -> None:
    _raises(TypeError, lambda: F.cross_entropy(_x(), T, weight="abc"), "cross_entropy",
            "weight")


# ------------------------------------------------------------------------------ linear
W = np.random.default_rng(1).normal(size=(2, 3))


def test_linear_takes_host_input_like_the_other_functions() -> None:
    """F.linear(list, W) used to raise AttributeError: 'list' object has no attribute
    'shape'. A list takes the weight's dtype."""
    out = F.linear(X.tolist(), tr.Tensor(W))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.array, X @ W.T, rtol=1e-15)


@pytest.mark.parametrize("x_dtype, w_dtype, b_dtype, culprit", [
    (np.float32, np.float64, None, "input"),
    (np.int64, np.float64, None, "input"),
    (np.float64, np.float64, np.float32, "bias"),
    (np.float64, np.int64, None, "input"),
])
def test_linear_refuses_mixed_dtypes(x_dtype: type, w_dtype: type, b_dtype: Any,
                                     culprit: str) -> None:
    """NumPy computed these silently in the promoted dtype; torch refuses them."""
    x, w = tr.Tensor(X.astype(x_dtype)), tr.Tensor(W.astype(w_dtype))
    b = None if b_dtype is None else tr.Tensor(np.zeros(2, dtype=b_dtype))
    _raises(TypeError, lambda: F.linear(x, w, b), "linear", culprit, str(np.dtype(w_dtype)),
            ".to(np.")


@pytest.mark.parametrize("x_shape, w_shape, b_shape, what", [
    ((4, 3), (2, 3, 1), None, "or 1-D (in_features,)"),
    ((), (2, 3), None, "in_features = 3"),
    ((4, 5), (2, 3), None, "in_features = 3"),
    ((4, 3), (2, 3), (5,), "bias of shape (5,)"),
    ((4, 3), (2, 3), (3, 4, 2), "bias of shape (3, 4, 2)"),
    ((4, 3), (3,), (), "takes no bias"),
])
def test_linear_shape_errors_name_the_shapes(x_shape: tuple, w_shape: tuple, b_shape: Any,
                                             what: str) -> None:
    x, w = tr.Tensor(np.zeros(x_shape)), tr.Tensor(np.zeros(w_shape))
    b = None if b_shape is None else tr.Tensor(np.zeros(b_shape))
    _raises(ValueError, lambda: F.linear(x, w, b), "linear", what, str(w_shape))


@pytest.mark.parametrize("w_shape, b_shape", [((2, 3), (2,)), ((2, 3), ()), ((2, 3), (4, 2)),
                                              ((3,), None)])
def test_linear_accepts_what_torch_accepts(w_shape: tuple, b_shape: Any) -> None:
    """Bias shapes that broadcast to the output, and torch's 1-D weight (y = x w + b)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(4, 3)), rng.normal(size=w_shape)
    b = None if b_shape is None else rng.normal(size=b_shape)
    ours = F.linear(tr.Tensor(x), tr.Tensor(w), None if b is None else tr.Tensor(b))
    theirs = torch.nn.functional.linear(
        torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b))
    np.testing.assert_allclose(ours.array, theirs.numpy(), rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------ embedding
@pytest.mark.parametrize("ids", [np.array([0.0, 1.0]), np.array([True, False]), [0.5]])
def test_embedding_ids_must_be_integers(ids: Any) -> None:
    _raises(TypeError, lambda: F.embedding(ids, tr.Tensor(W)), "embedding", "input",
            "integer ids", "astype(np.int64)")


# ------------------------------------------------------------------------------ axes
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("bad", [1.5, "1", True, None])
def test_softmax_axis_must_be_an_int(name: str, bad: Any) -> None:
    if bad is None:  # None means the default axis
        assert getattr(F, name)(_x(), axis=bad).shape == X.shape
        return
    _raises(TypeError, lambda: getattr(F, name)(_x(), axis=bad), name, "axis", "int")
    _raises(TypeError, lambda: getattr(F, name)(_x(), dim=bad), name, "dim", "int")


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_axis_numpy_int_and_both_given(name: str) -> None:
    fn = getattr(F, name)
    np.testing.assert_array_equal(fn(_x(), axis=np.int64(0)).array, fn(_x(), axis=0).array)
    _raises(TypeError, lambda: fn(_x(), 0, dim=0), name, "axis or dim")


# ------------------------------------------------------------------------------ masked_fill
MASK = X > 0


@pytest.mark.parametrize("bad", [None, "a", np.ones(3), [1.0]])
def test_masked_fill_value_must_be_one_number(bad: Any) -> None:
    """None used to fill NaN, and a (3,) array was broadcast in silently."""
    _raises(TypeError, lambda: F.masked_fill(_x(), MASK, bad), "masked_fill", "value")


def test_masked_fill_value_that_needs_a_gradient_is_refused() -> None:
    v = tr.Tensor(np.array(2.0), requires_grad=True)
    _raises(TypeError, lambda: F.masked_fill(_x(), MASK, v), "masked_fill", "tr.where")


@pytest.mark.parametrize("value", [-math.inf, math.nan, np.float32(2), np.array(2.0), 2,
                                   tr.Tensor(np.array(2.0))])
def test_masked_fill_accepts_real_scalars(value: Any) -> None:
    out = F.masked_fill(_x(), MASK, value).array
    fill = float(np.asarray(value.array if isinstance(value, tr.Tensor) else value))
    np.testing.assert_array_equal(out, np.where(MASK, fill, X))
