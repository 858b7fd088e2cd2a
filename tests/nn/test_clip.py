"""Gradient clipping and norms (tinygrad_rnn.nn.utils): the returned total norm against its
definition, the clipping guarantee, norm types, non-finite norms, skipped parameters,
float32, and torch.nn.utils as an oracle; clip_grad_value_; parameters <-> vector."""
from __future__ import annotations

import math
import re
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr
from tinygrad_rnn.nn.utils import (
    clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm, grad_norm,
    parameters_to_vector, vector_to_parameters,
)

shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
moderate = st.floats(-10, 10).map(lambda x: 0.0 if abs(x) < 1e-6 else x)


@st.composite
def params_with_grads(draw: Callable, dtype: Any = np.float64) -> list[tr.Tensor]:
    """1 to 4 parameters of random shapes (0-d and empty ones included) with gradients of
    moderate size (|g| in {0} or [1e-6, 10]: torch and the plain NumPy references square the
    entries, which underflows for tiny ones); some have no gradient (None)."""
    out = []
    for shape in draw(st.lists(shapes, min_size=1, max_size=4)):
        p = tr.tensor(np.zeros(shape, dtype=dtype), requires_grad=True)
        if draw(st.booleans()) or not out:
            p.grad = draw(hnp.arrays(np.float64, shape, elements=moderate)).astype(dtype)
        out.append(p)
    return out


def grads_of(params: list[tr.Tensor]) -> list[np.ndarray]:
    return [p.grad.array for p in params if p.grad is not None]  # the raw arrays


def flat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.ravel(a).astype(np.float64) for a in arrays] or [np.zeros(0)])


def copies(params: list[tr.Tensor]) -> list[Any]:
    return [None if p.grad is None else p.grad.array.copy() for p in params]


def with_grad(grad: Any) -> tr.Tensor:
    p = tr.tensor(np.zeros_like(grad), requires_grad=True)
    p.grad = np.array(grad)
    return p


@given(params=params_with_grads(), max_norm=st.floats(1e-3, 100.0))
@example(params=[tr.Tensor(np.zeros(3), requires_grad=True)], max_norm=1.0)  # grad None only
@example(params=[with_grad(np.array(1.3e-188))], max_norm=1.0)  # g * g underflowed to 0
def test_clip_grad_norm_l2(params: list[tr.Tensor], max_norm: float) -> None:
    before = copies(params)
    expected = math.hypot(*flat(grads_of(params)))  # sqrt(sum ||g||^2), scaled, no underflow
    total = clip_grad_norm_(params, max_norm)
    assert isinstance(total, tr.Tensor) and total.shape == ()
    assert total.item() == pytest.approx(expected, rel=1e-12, abs=1e-300)
    after = np.linalg.norm(flat(grads_of(params)))
    assert after <= max_norm * (1 + 1e-6)
    coef = max_norm / (expected + 1e-6)
    for p, g0 in zip(params, before):
        if g0 is None:
            assert p.grad is None  # skipped, not created
        elif coef >= 1:
            np.testing.assert_array_equal(p.grad, g0)  # below max_norm: untouched
        else:
            np.testing.assert_allclose(p.grad, g0 * coef, rtol=1e-14)  # same direction


@pytest.mark.parametrize("norm_type", [1.0, 3.0, 0.5, math.inf, "inf"])
@given(params=params_with_grads())
def test_clip_grad_norm_other_norms(params: list[tr.Tensor], norm_type: Any) -> None:
    v = flat(grads_of(params))
    p = float(norm_type)
    if math.isinf(p):
        expected = float(np.max(np.abs(v))) if v.size else 0.0
    else:
        expected = float(np.sum(np.abs(v) ** p) ** (1 / p))
    max_norm = 0.5
    total = clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert total.item() == pytest.approx(expected, rel=1e-12, abs=1e-300)
    assert grad_norm(params, norm_type) <= max_norm * (1 + 1e-6)


@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1e160, 1e300])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_norm_neither_underflows_nor_overflows(scale: float, norm_type: float) -> None:
    """Regression: squaring float64 gradients below ~1e-154 gave a zero norm (and above
    ~1e154 an infinite one); the norm is now computed as m * ||g / m||_p, m = max |g|."""
    base = np.array([3.0, -4.0, 12.0])
    p = with_grad(base * scale)
    want = scale * float(np.sum(np.abs(base) ** norm_type) ** (1 / norm_type))
    assert grad_norm([p], norm_type) == pytest.approx(want, rel=1e-14)
    total = clip_grad_norm_([p], max_norm=1.0, norm_type=norm_type)
    assert total.item() == pytest.approx(want, rel=1e-14)
    assert grad_norm([p], norm_type) <= 1.0


def test_clip_grad_norm_example_by_hand() -> None:
    a = tr.tensor(np.zeros(2), requires_grad=True)
    b = tr.tensor(np.zeros(1), requires_grad=True)
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])  # total norm 5
    total = clip_grad_norm_([a, b], max_norm=1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(a.grad, [3.0 / (5 + 1e-6), 0.0], rtol=1e-15)
    np.testing.assert_allclose(b.grad, [4.0 / (5 + 1e-6)], rtol=1e-15)


def test_clip_modifies_gradients_in_place() -> None:
    a = tr.tensor(np.zeros(3), requires_grad=True)
    a.grad = np.array([10.0, -10.0, 5.0])
    held = a.grad
    clip_grad_norm_(a, 1.0)  # a single Tensor is accepted
    assert a.grad is held and np.linalg.norm(held) < 1.0


def test_accepts_a_generator_and_an_empty_list() -> None:
    ps = [tr.tensor(np.zeros(2), requires_grad=True) for _ in range(2)]
    for p in ps:
        p.grad = np.array([3.0, 4.0])
    total = clip_grad_norm_((p for p in ps), 1.0)  # consumed once, both clipped
    assert total.item() == pytest.approx(math.sqrt(50.0), rel=1e-15)
    assert all(np.linalg.norm(p.grad) < 1.0 for p in ps)
    empty = clip_grad_norm_([], 1.0)
    assert empty.item() == 0.0 and empty.dtype == np.float32
    assert grad_norm([]) == 0.0


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_nonfinite_norm(bad: float, norm_type: float) -> None:
    def fresh() -> list[tr.Tensor]:
        a = tr.tensor(np.zeros(3), requires_grad=True)
        b = tr.tensor(np.zeros(2), requires_grad=True)
        a.grad, b.grad = np.array([1.0, bad, 2.0]), np.array([0.5, -0.5])
        return [a, b]

    params = fresh()
    before = copies(params)
    with pytest.raises(RuntimeError, match=f"norm of order {float(norm_type)}.*non-finite"):
        clip_grad_norm_(params, 1.0, norm_type=norm_type, error_if_nonfinite=True)
    for p, g0 in zip(params, before):
        np.testing.assert_array_equal(p.grad, g0)  # raised before touching anything

    params = fresh()
    total = clip_grad_norm_(params, 1.0, norm_type=norm_type)  # no warning, no error
    if math.isnan(bad):
        assert math.isnan(total.item())
        assert np.isnan(params[1].grad).all()  # scaled by NaN, as torch does
    else:
        assert total.item() == math.inf
        np.testing.assert_array_equal(params[1].grad, [0.0, 0.0])  # scaled by 0


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
@given(params=params_with_grads(), max_norm=st.floats(0.1, 30.0))
def test_clip_grad_norm_matches_torch(params: list[tr.Tensor], max_norm: float,
                                      norm_type: float) -> None:
    torch = pytest.importorskip("torch")
    # torch has no inf norm of an empty tensor (max over nothing); ours counts it as 0
    assume(not (math.isinf(norm_type) and any(g.size == 0 for g in grads_of(params))))
    tparams = []
    for p in params:
        t = torch.zeros(p.shape, dtype=torch.float64, requires_grad=True)
        t.grad = None if p.grad is None else torch.tensor(p.grad.numpy())
        tparams.append(t)
    total = clip_grad_norm_(params, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tparams, max_norm, norm_type=norm_type)
    assert total.item() == pytest.approx(ttotal.item(), rel=1e-12, abs=1e-300)
    for p, t in zip(params, tparams):
        assert (p.grad is None) == (t.grad is None)
        if p.grad is not None:
            np.testing.assert_allclose(p.grad, t.grad.numpy(), rtol=1e-12, atol=1e-300)


def test_nonfinite_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    g = np.array([1.0, np.inf, -2.0])
    p = tr.tensor(np.zeros(3), requires_grad=True)
    p.grad = g.copy()
    t = torch.zeros(3, dtype=torch.float64, requires_grad=True)
    t.grad = torch.tensor(g)
    assert clip_grad_norm_(p, 1.0).item() == torch.nn.utils.clip_grad_norm_(t, 1.0).item()
    np.testing.assert_array_equal(p.grad, t.grad.numpy())  # [0, nan, -0]


@given(params=params_with_grads(dtype=np.float32), max_norm=st.floats(1e-2, 10.0))
def test_float32_gradients_stay_float32(params: list[tr.Tensor], max_norm: float) -> None:
    params64 = [tr.tensor(p.array.astype(np.float64), requires_grad=True) for p in params]
    for p, q in zip(params, params64):
        q.grad = None if p.grad is None else p.grad.astype(np.float64)
    total = clip_grad_norm_(params, max_norm)
    total64 = clip_grad_norm_(params64, max_norm)
    assert total.dtype == np.float32 and total64.dtype == np.float64
    assert total.item() == pytest.approx(total64.item(), rel=1e-6)
    for p, q in zip(params, params64):
        if p.grad is not None:
            assert p.grad.dtype == np.float32
            np.testing.assert_allclose(p.grad, q.grad, rtol=1e-6, atol=1e-6)


def test_grad_norm_and_get_total_norm_do_not_clip() -> None:
    a = tr.tensor(np.zeros(2), requires_grad=True)
    b = tr.tensor(np.zeros(2), requires_grad=True)
    a.grad = np.array([6.0, 8.0])
    assert grad_norm([a, b]) == 10.0 and isinstance(grad_norm([a, b]), float)
    assert grad_norm([a, b], "inf") == 8.0
    assert get_total_norm([a.grad, tr.tensor(np.array([0.0, 0.0]))]).item() == 10.0
    assert get_total_norm(a.grad, 1).item() == 14.0
    np.testing.assert_array_equal(a.grad, [6.0, 8.0])
    clip_grads_with_norm_([a], 5.0, get_total_norm([a.grad]))
    np.testing.assert_allclose(a.grad, [6.0 * 5 / (10 + 1e-6), 8.0 * 5 / (10 + 1e-6)])


def test_argument_checks() -> None:
    a = tr.tensor(np.zeros(2), requires_grad=True)
    a.grad = np.ones(2)
    for bad in (0, -1.0, "two"):
        with pytest.raises(ValueError, match="norm_type"):
            clip_grad_norm_(a, 1.0, norm_type=bad)
    with pytest.raises(ValueError, match="max_norm: -1.0"):
        clip_grad_norm_(a, -1.0)
    with pytest.raises(ValueError, match="clip_value: -0.5"):
        clip_grad_value_(a, -0.5)
    np.testing.assert_array_equal(a.grad, [1.0, 1.0])


@pytest.mark.parametrize("call,error,message", [
    (lambda a: clip_grad_norm_(a, "a"), TypeError,
     "clip_grad_norm_: max_norm must be a real number, got str 'a'"),
    (lambda a: clip_grad_norm_(a, None), TypeError,
     "clip_grad_norm_: max_norm must be a real number, got NoneType None"),
    (lambda a: clip_grad_norm_(a, True), TypeError,
     "clip_grad_norm_: max_norm must be a real number, got bool True"),
    (lambda a: clip_grad_norm_(a, float("nan")), ValueError,
     "clip_grad_norm_: invalid max_norm: nan"),
    (lambda a: clip_grad_value_(a, "a"), TypeError,
     "clip_grad_value_: clip_value must be a real number, got str 'a'"),
    (lambda a: clip_grad_value_(a, [1.0]), TypeError,
     r"clip_grad_value_: clip_value must be a real number, got list \[1.0\]"),
    (lambda a: clip_grads_with_norm_(a, "a", 1.0), TypeError,
     "clip_grads_with_norm_: max_norm must be a real number, got str 'a'"),
    (lambda a: clip_grads_with_norm_(a, 1.0, None), TypeError,
     "clip_grads_with_norm_: total_norm must be a real number, got NoneType None"),
    (lambda a: clip_grads_with_norm_(a, 1.0, -2.0), ValueError,
     "clip_grads_with_norm_: invalid total_norm: -2.0"),
    (lambda a: clip_grads_with_norm_(a, 1.0, float("-inf")), ValueError,
     "clip_grads_with_norm_: invalid total_norm: -inf"),
    (lambda a: clip_grads_with_norm_(a, 1.0, tr.tensor(np.array(-2.0))), ValueError,
     "clip_grads_with_norm_: invalid total_norm: -2.0"),
    (lambda a: clip_grads_with_norm_(a, 1.0, np.array([2.0, 4.0])), ValueError,
     r"clip_grads_with_norm_: total_norm must be a single number \(0-d\), got an array of "
     r"shape \(2,\)"),
])
def test_bad_arguments_name_the_function_and_argument_and_leave_grads(
        call: Any, error: type, message: str) -> None:
    """Used to be: 'could not convert string to float', a float() TypeError, and, for a
    negative total_norm, every gradient silently flipped."""
    a = tr.tensor(np.zeros(2), requires_grad=True)
    a.grad = np.array([3.0, 4.0])
    with pytest.raises(error, match="^" + message):
        call([a])
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])


@pytest.mark.parametrize("total_norm,expected", [
    (float("nan"), [np.nan, np.nan]), (float("inf"), [0.0, 0.0]),
    (np.array(float("nan")), [np.nan, np.nan])])
def test_clip_grads_with_a_non_finite_total_norm_scales_as_clip_grad_norm_does(
        total_norm: Any, expected: list) -> None:
    """NaN and inf norms are accepted (as clip_grad_norm_ with error_if_nonfinite=False,
    its default): NaN makes every gradient NaN, inf makes them 0."""
    a = tr.tensor(np.zeros(2), requires_grad=True)
    a.grad = np.array([3.0, 4.0])
    clip_grads_with_norm_([a], 1.0, total_norm)
    np.testing.assert_array_equal(a.grad, expected)
    b = tr.tensor(np.zeros(2), requires_grad=True)
    b.grad = np.array([3.0, np.nan if np.isnan(total_norm) else np.inf])
    clip_grad_norm_([b], 1.0)
    expected_b = [np.nan, np.nan] if np.isnan(total_norm) else [0.0, np.nan]
    np.testing.assert_array_equal(b.grad, expected_b)


@pytest.mark.parametrize("where,call", [
    ("clip_grad_norm_", lambda ps: clip_grad_norm_(ps, 1.0)),
    ("clip_grad_value_", lambda ps: clip_grad_value_(ps, 1.0)),
    ("grad_norm", lambda ps: grad_norm(ps)),
    ("clip_grads_with_norm_", lambda ps: clip_grads_with_norm_(ps, 1.0, 5.0))],
    ids=lambda v: v if isinstance(v, str) else "")
def test_a_tensor_assigned_as_grad_is_used_and_a_list_is_refused_at_assignment(
        where: str, call: Any) -> None:
    """A Tensor in p.grad (torch's habit) used to give 'return arrays must be of ArrayType';
    .grad is a Tensor now, so an assigned Tensor is the gradient, as in torch. A list is
    refused when assigned, naming .grad and the type."""
    ok = tr.tensor(np.zeros(2), requires_grad=True)
    ok.grad = np.full(2, 10.0)
    other = tr.tensor(np.zeros(2), requires_grad=True)
    other.grad = tr.tensor(np.full(2, 10.0))
    reference = [tr.tensor(np.zeros(2), requires_grad=True) for _ in range(2)]
    for r in reference:
        r.grad = np.full(2, 10.0)
    assert np.array_equal(np.asarray(call([ok, other]) or 0.0),
                          np.asarray(call(reference) or 0.0))
    np.testing.assert_array_equal(other.grad, reference[1].grad)
    bad = tr.tensor(np.zeros(2), requires_grad=True)
    with pytest.raises(TypeError, match=r"grad: assign a Tensor, an array or None, got list"):
        bad.grad = [10.0, 10.0]
    assert bad.grad is None


def test_get_total_norm_refuses_items_that_are_not_arrays() -> None:
    with pytest.raises(TypeError, match="get_total_norm: item 1 is a list"):
        get_total_norm([np.ones(2), [1.0, 2.0]])


@given(params=params_with_grads(), clip_value=st.floats(0.0, 12.0))
def test_clip_grad_value(params: list[tr.Tensor], clip_value: float) -> None:
    before = copies(params)
    held = [p.grad for p in params]
    assert clip_grad_value_(params, clip_value) is None
    for p, g0, arr in zip(params, before, held):
        if g0 is None:
            assert p.grad is None
        else:
            assert p.grad is arr  # in place
            np.testing.assert_array_equal(p.grad, np.clip(g0, -clip_value, clip_value))


def test_clip_grad_value_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(0).standard_normal((4, 5)) * 3
    p = tr.tensor(np.zeros((4, 5)), requires_grad=True)
    p.grad = g.copy()
    t = torch.zeros((4, 5), dtype=torch.float64, requires_grad=True)
    t.grad = torch.tensor(g)
    clip_grad_value_([p], 1.5)
    torch.nn.utils.clip_grad_value_([t], 1.5)
    np.testing.assert_array_equal(p.grad, t.grad.numpy())


def test_parameters_to_vector_and_back() -> None:
    rng = np.random.default_rng(1)
    params = [tr.tensor(rng.standard_normal(s), requires_grad=True) for s in [(2, 3), (), (4,)]]
    vec = parameters_to_vector(params)
    np.testing.assert_array_equal(vec.array, np.concatenate([p.array.ravel() for p in params]))
    (vec * tr.tensor(np.arange(11.0))).sum().backward()  # differentiable
    np.testing.assert_array_equal(params[0].grad, np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(params[2].grad, np.arange(7.0, 11.0))

    loss = (params[0] * params[0]).sum()  # saves params[0] for backward
    new = tr.tensor(np.arange(11.0) * 0.5)
    vector_to_parameters(new, params)
    np.testing.assert_array_equal(params[0].array, np.arange(6.0).reshape(2, 3) * 0.5)
    assert params[1].array == 3.0
    np.testing.assert_array_equal(parameters_to_vector(params).array, new.array)
    with pytest.raises(RuntimeError, match="modified in place"):
        loss.backward()  # the copy bumped the version counter
    with pytest.raises(ValueError, match="11 elements"):
        vector_to_parameters(tr.tensor(np.zeros(10)), params)
    with pytest.raises(TypeError, match="Tensor"):
        vector_to_parameters(np.zeros(11), params)  # type: ignore[arg-type]
