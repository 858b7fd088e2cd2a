"""Explicit Jacobians (tr.explicit_jacobians) against the ops' hand-written VJPs, reverse-mode
Jacobians (tr.jacobian) and central differences, all in float64.

For an op y = f(x) along the last axis, ``tr.explicit_jacobians.<op>(y)`` is J with
J[..., i, j] = dy_i / dx_j, and backward must return J^T v for an upstream gradient v.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr

F = tr.functional
EPS = 1e-6  # central-difference step (float64)
# Central differences in float64: truncation O(eps^2) ~ 1e-12 and round-off ~ u |f| / eps
# ~ 1e-10 absolute, so entries near 0 are compared with this absolute floor.
FD_ATOL = 1e-9

# op name -> (functional op, explicit Jacobian, input range kept away from kinks/saturation)
OPS: dict[str, tuple[Callable, Callable, float]] = {
    "softmax": (F.softmax, tr.explicit_jacobians.softmax, 5.0),
    "log_softmax": (F.log_softmax, tr.explicit_jacobians.log_softmax, 5.0),
    "tanh": (F.tanh, tr.explicit_jacobians.tanh, 3.0),
    "sigmoid": (F.sigmoid, tr.explicit_jacobians.sigmoid, 6.0),
    "relu": (F.relu, tr.explicit_jacobians.relu, 3.0),
}


def _values(bound: float, relu: bool) -> st.SearchStrategy:
    floats = st.floats(-bound, bound, allow_nan=False, allow_infinity=False)
    if relu:  # stay 0.05 away from the kink at 0
        floats = floats.filter(lambda v: abs(v) >= 0.05)
    return floats


@st.composite
def op_inputs(draw: st.DrawFn, name: str, batched: bool = True) -> np.ndarray:
    """float64 input of shape (n,) or (b, n) or (b1, b2, n)."""
    _, _, bound = OPS[name]
    n = draw(st.integers(1, 6))
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if batched else ()
    return draw(hnp.arrays(np.float64, lead + (n,), elements=_values(bound, name == "relu")))


def jt_v(jac: np.ndarray, v: np.ndarray) -> np.ndarray:
    """J^T v over the last axis: (J^T v)_j = sum_i J_ij v_i."""
    return np.einsum("...ij,...i->...j", jac, v)


def fd_jacobian(fn: Callable[..., tr.Tensor], inputs: tuple, k: int) -> np.ndarray:
    """Central-difference Jacobian of fn's output with respect to input k, shape
    out.shape + inputs[k].shape."""
    arrays = [np.array(a, dtype=np.float64) for a in inputs]
    with tr.no_grad():
        out_shape = fn(*(tr.Tensor(a) for a in arrays)).shape
    x = arrays[k]
    jac = np.zeros(out_shape + x.shape)
    for idx in np.ndindex(*x.shape):
        orig = x[idx]
        x[idx] = orig + EPS
        with tr.no_grad():
            plus = fn(*(tr.Tensor(a) for a in arrays)).array.copy()
        x[idx] = orig - EPS
        with tr.no_grad():
            minus = fn(*(tr.Tensor(a) for a in arrays)).array.copy()
        x[idx] = orig
        jac[(...,) + idx] = (plus - minus) / (2 * EPS)
    return jac


# ----------------------------------------------------------------------------- VJP = J^T v
def _check_vjp(name: str, x: np.ndarray, seed: int) -> None:
    op, jac_fn, _ = OPS[name]
    v = np.random.default_rng(seed).normal(size=x.shape)
    xt = tr.Tensor(x, requires_grad=True)
    y = op(xt)
    y.backward(v)
    np.testing.assert_allclose(xt.grad, jt_v(jac_fn(y), v), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(OPS))
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_vjp_equals_jacobian_transpose_times_v(name: str, data: st.DataObject,
                                               seed: int) -> None:
    _check_vjp(name, data.draw(op_inputs(name)), seed)


@pytest.mark.parametrize("x", [np.array([0.0]), np.array([3.0, 3.0, 3.0]),
                               np.array([[-5.0, 5.0], [1e-3, -1e-3]])])
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "tanh", "sigmoid"])
def test_vjp_equals_jacobian_transpose_times_v_fixed_cases(name: str, x: np.ndarray) -> None:
    _check_vjp(name, x, seed=0)


def test_jacobian_accepts_tensor_and_array() -> None:
    y = F.softmax(tr.Tensor(np.array([0.1, 0.7, -0.3])))
    np.testing.assert_array_equal(tr.explicit_jacobians.softmax(y),
                                  tr.explicit_jacobians.softmax(y.array))


# ----------------------------------------------------------------------------- softmax J
@given(x=op_inputs("softmax"))
@example(x=np.array([0.0, 0.0]))
@example(x=np.array([5.0, -5.0, 0.0]))
def test_softmax_jacobian_symmetric_and_rows_sum_to_zero(x: np.ndarray) -> None:
    jac = tr.explicit_jacobians.softmax(F.softmax(tr.Tensor(x)))
    np.testing.assert_array_equal(jac, np.swapaxes(jac, -1, -2))
    np.testing.assert_allclose(jac.sum(axis=-1), 0.0, atol=1e-15)
    np.testing.assert_allclose(jac.sum(axis=-2), 0.0, atol=1e-15)


@given(x=op_inputs("softmax"), c=st.floats(-50, 50))
def test_softmax_jacobian_unchanged_by_constant_shift(x: np.ndarray, c: float) -> None:
    jac = tr.explicit_jacobians.softmax(F.softmax(tr.Tensor(x)))
    shifted = tr.explicit_jacobians.softmax(F.softmax(tr.Tensor(x + c)))
    # x + c is rounded to ~|c| * 1.1e-16, which moves softmax by about as much
    np.testing.assert_allclose(shifted, jac, rtol=0, atol=1e-12)


@given(x=op_inputs("log_softmax"))
def test_log_softmax_jacobian_rows_sum_to_zero(x: np.ndarray) -> None:
    """log_softmax(x + c 1) = log_softmax(x), so J 1 = 0: each row sums to 0."""
    jac = tr.explicit_jacobians.log_softmax(F.log_softmax(tr.Tensor(x)))
    np.testing.assert_allclose(jac.sum(axis=-1), 0.0, atol=1e-14)


# ----------------------------------------------------------------------------- derivatives
def _fd_elementwise(op: Callable, x: np.ndarray) -> np.ndarray:
    with tr.no_grad():
        plus = op(tr.Tensor(x + EPS)).array
        minus = op(tr.Tensor(x - EPS)).array
    return (plus - minus) / (2 * EPS)


@given(x=op_inputs("tanh"))
@example(x=np.array([0.0, 3.0, -3.0]))
def test_tanh_derivative_is_one_minus_tanh_squared(x: np.ndarray) -> None:
    xt = tr.Tensor(x, requires_grad=True)
    y = F.tanh(xt)
    y.backward(np.ones_like(x))
    np.testing.assert_allclose(y.array, np.tanh(x), rtol=1e-15, atol=0)
    np.testing.assert_array_equal(xt.grad, 1.0 - y.array ** 2)
    np.testing.assert_array_equal(np.diagonal(tr.explicit_jacobians.tanh(y), axis1=-2, axis2=-1),
                                  1.0 - y.array ** 2)
    np.testing.assert_allclose(xt.grad, _fd_elementwise(F.tanh, x), rtol=1e-6, atol=FD_ATOL)


@given(x=op_inputs("sigmoid"))
@example(x=np.array([0.0, 6.0, -6.0]))
def test_sigmoid_derivative_is_sigmoid_times_one_minus_sigmoid(x: np.ndarray) -> None:
    xt = tr.Tensor(x, requires_grad=True)
    y = F.sigmoid(xt)
    y.backward(np.ones_like(x))
    np.testing.assert_allclose(y.array, 1.0 / (1.0 + np.exp(-x)), rtol=1e-15, atol=0)
    np.testing.assert_allclose(xt.grad, y.array * (1.0 - y.array), rtol=1e-15, atol=0)
    with tr.no_grad():
        y_neg = F.sigmoid(tr.Tensor(-x)).array
    # s'(x) = s(x) s(-x). y (1 - y) inherits y's absolute rounding error (~1e-16) in 1 - y,
    # so in the tail (x = 6: 1 - y = 2.5e-3) it agrees to a few ulps of 1, not of s'(x).
    np.testing.assert_allclose(xt.grad, y.array * y_neg, rtol=1e-14,
                               atol=2 * np.finfo(np.float64).eps)
    np.testing.assert_array_equal(np.diagonal(tr.explicit_jacobians.sigmoid(y), axis1=-2, axis2=-1),
                                  y.array * (1.0 - y.array))
    np.testing.assert_allclose(xt.grad, _fd_elementwise(F.sigmoid, x), rtol=1e-6,
                               atol=FD_ATOL)


def test_relu_jacobian_is_indicator_of_positive_input() -> None:
    x = np.array([-2.0, -0.1, 0.0, 0.1, 2.0])
    jac = tr.explicit_jacobians.relu(F.relu(tr.Tensor(x)))
    np.testing.assert_array_equal(jac, np.diag([0.0, 0.0, 0.0, 1.0, 1.0]))


# ----------------------------------------------------------------------------- three ways
@pytest.mark.parametrize("name", sorted(OPS))
@given(data=st.data())
def test_explicit_jacobian_equals_reverse_mode_and_finite_differences(
        name: str, data: st.DataObject) -> None:
    op, jac_fn, _ = OPS[name]
    x = data.draw(op_inputs(name, batched=False))  # (n,)
    explicit = jac_fn(op(tr.Tensor(x)))
    reverse = tr.jacobian(op, x)
    assert reverse.shape == explicit.shape == x.shape * 2
    np.testing.assert_allclose(reverse, explicit, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fd_jacobian(op, (x,), 0), explicit, rtol=1e-6, atol=FD_ATOL)


@pytest.mark.parametrize("name", sorted(OPS))
def test_batched_explicit_jacobian_is_the_diagonal_block_of_reverse_mode(name: str) -> None:
    op, jac_fn, bound = OPS[name]
    x = np.random.default_rng(4).uniform(0.1, bound, size=(3, 4))
    x[:, ::2] *= -1  # both signs, still away from relu's kink
    explicit = jac_fn(op(tr.Tensor(x)))  # (3, 4, 4)
    full = tr.jacobian(op, x)  # (3, 4, 3, 4): rows are independent
    assert full.shape == (3, 4, 3, 4)
    for b in range(3):
        for c in range(3):
            block = full[b, :, c, :]
            if b == c:
                np.testing.assert_allclose(block, explicit[b], rtol=1e-13, atol=1e-15)
            else:
                np.testing.assert_array_equal(block, 0.0)


# ----------------------------------------------------------------------------- tr.jacobian
def test_jacobian_with_multiple_inputs_matches_finite_differences() -> None:
    rng = np.random.default_rng(5)
    av, bv, cv = rng.normal(size=(2, 3)), rng.normal(size=(3, 2)), rng.normal(size=2)

    def fn(a: tr.Tensor, b: tr.Tensor, c: tr.Tensor) -> tr.Tensor:
        return (a @ b + c).tanh()

    ja, jb, jc = tr.jacobian(fn, (av, bv, cv))
    assert ja.shape == (2, 2, 2, 3) and jb.shape == (2, 2, 3, 2) and jc.shape == (2, 2, 2)
    for k, jac in enumerate((ja, jb, jc)):
        np.testing.assert_allclose(jac, fd_jacobian(fn, (av, bv, cv), k), rtol=1e-6,
                                   atol=FD_ATOL)


def test_jacobian_of_elementwise_product_is_diagonal() -> None:
    a, b = np.array([1.0, -2.0, 3.0]), np.array([0.5, 4.0, -1.0])
    ja, jb = tr.jacobian(lambda x, y: x * y, [a, b])
    np.testing.assert_array_equal(ja, np.diag(b))
    np.testing.assert_array_equal(jb, np.diag(a))


def test_jacobian_of_scalar_output_and_unused_input() -> None:
    x, unused = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 1.0])
    jx, ju = tr.jacobian(lambda a, b: (a * a).sum(), (x, unused))
    assert jx.shape == (2, 2) and ju.shape == (2,)
    np.testing.assert_array_equal(jx, 2 * x)
    np.testing.assert_array_equal(ju, 0.0)
    const = tr.jacobian(lambda a: tr.Tensor(np.ones(3)), x)  # output without a graph
    assert const.shape == (3, 2, 2)
    np.testing.assert_array_equal(const, 0.0)


def test_jacobian_leaves_callers_tensors_untouched() -> None:
    a = tr.Tensor(np.array([0.5, -1.0]), requires_grad=True)
    a.grad = np.array([7.0, 8.0])
    b = tr.Tensor(np.array([2.0, 3.0]))
    a_data, b_data = a.array.copy(), b.array.copy()
    ja, jb = tr.jacobian(lambda x, y: (x * y).exp(), (a, b))
    np.testing.assert_allclose(ja, np.diag(b_data * np.exp(a_data * b_data)), rtol=1e-15)
    np.testing.assert_allclose(jb, np.diag(a_data * np.exp(a_data * b_data)), rtol=1e-15)
    np.testing.assert_array_equal(a.grad, [7.0, 8.0])
    np.testing.assert_array_equal(a.array, a_data)
    np.testing.assert_array_equal(b.array, b_data)
    assert a.requires_grad and a.is_leaf
    assert not b.requires_grad and b.grad is None


def test_jacobian_requires_fn_to_return_a_tensor() -> None:
    with pytest.raises(TypeError, match="must return a Tensor"):
        tr.jacobian(lambda x: x.array * 2, np.ones(2))


def test_jacobian_rows_are_reverse_mode_gradients() -> None:
    """tr.jacobian(fn, x) row i is the gradient of output element i: check one row with a
    plain backward of a one-hot upstream gradient."""
    x = np.array([0.3, -0.2, 0.9])

    def fn(t: tr.Tensor) -> tr.Tensor:
        return F.log_softmax(t * t)

    full = tr.jacobian(fn, x)
    xt = tr.Tensor(x, requires_grad=True)
    onehot = np.array([0.0, 1.0, 0.0])
    fn(xt).backward(onehot)
    np.testing.assert_array_equal(full[1], xt.grad)


@pytest.mark.parametrize("name", sorted(OPS))
def test_explicit_jacobians_refuse_a_0d_input(name: str) -> None:
    """Regression: a 0-d input gave "tuple index out of range"."""
    _, jac_fn, _ = OPS[name]
    for y in (np.float64(0.5), np.array(0.5), tr.Tensor(np.array(0.5))):
        with pytest.raises(ValueError, match=rf"jacobians\.{name}: y is 0-d.*reshape\(1\)"):
            jac_fn(y)
    assert jac_fn(np.array([0.5])).shape == (1, 1)


def test_jacobian_leaves_captured_parameters_grad_alone() -> None:
    """The backward passes of tr.jacobian reach the parameters fn captures too; their .grad
    is given back afterwards."""
    m = tr.nn.Linear(3, 2, dtype=np.float64, generator=0)
    m.bias.grad = np.array([1.0, 2.0])
    bias_grad = m.bias.grad
    jac = tr.jacobian(lambda t: m(t), np.array([0.1, 0.2, 0.3]))
    np.testing.assert_array_equal(jac, m.weight.array)
    assert m.weight.grad is None and m.bias.grad is bias_grad
    np.testing.assert_array_equal(bias_grad, [1.0, 2.0])


# ----------------------------------------------------------------------------- layer_norm J
@st.composite
def _layer_norm_rows(draw: st.DrawFn) -> np.ndarray:
    """float64 rows (..., n) whose entries are pairwise >= 0.1 apart (variance well above
    0), n in 1..6."""
    n = draw(st.integers(1, 6))
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    rows = []
    for _ in range(int(np.prod(lead, dtype=int))):
        ranks = np.array(draw(st.permutations(range(n))), dtype=np.float64)
        jitter = draw(hnp.arrays(np.float64, (n,), elements=st.floats(0.0, 0.05)))
        rows.append((ranks * 0.15 + jitter) * draw(st.floats(0.5, 4.0)) + draw(
            st.floats(-3.0, 3.0)))
    return np.stack(rows).reshape(lead + (n,))


@given(x=_layer_norm_rows(), eps=st.sampled_from([1e-5, 0.1, 1.0]),
       affine=st.booleans(), seed=st.integers(0, 2**31 - 1))
@example(x=np.array([2.0]), eps=1e-5, affine=False, seed=0)
@example(x=np.array([[0.0, 1.0], [5.0, -5.0]]), eps=1e-5, affine=True, seed=1)
def test_layer_norm_vjp_equals_jacobian_transpose_times_v(x: np.ndarray, eps: float,
                                                          affine: bool, seed: int) -> None:
    """LayerNorm.backward(g) == J^T g with J = diag(w) (I - 11^T/M - x_hat x_hat^T/M) / sigma
    (docs/layernorm.md (LN7), (LN9)), and J matches central differences."""
    rng = np.random.default_rng(seed)
    n = x.shape[-1]
    weight = rng.uniform(0.5, 2.0, size=n) * rng.choice([-1.0, 1.0], size=n) if affine else None
    v = rng.normal(size=x.shape)
    xt = tr.Tensor(x, requires_grad=True)
    wt = None if weight is None else tr.Tensor(weight)
    y = tr.nn.functional.layer_norm(xt, (n,), wt, None, eps)
    y.backward(v)
    jac = tr.explicit_jacobians.layer_norm(x, eps, weight)
    np.testing.assert_allclose(xt.grad, jt_v(jac, v), rtol=1e-10, atol=1e-10)

    def fn(t: tr.Tensor) -> tr.Tensor:
        return tr.nn.functional.layer_norm(t, (n,), wt, None, eps)

    flat = x.reshape(-1, n)
    for row in flat[:2]:
        fd = fd_jacobian(fn, (row,), 0)
        np.testing.assert_allclose(tr.explicit_jacobians.layer_norm(row, eps, weight), fd,
                                   rtol=1e-6, atol=1e-7 / np.sqrt(eps))


@given(x=_layer_norm_rows())
def test_layer_norm_jacobian_symmetric_and_kills_constant_rows(x: np.ndarray) -> None:
    """Without weight J is symmetric and J 1 = 0 (adding a constant to a row changes
    nothing); J x_hat = (eps / (var + eps)) x_hat / sigma, which is ~0 for small eps."""
    eps = 1e-5
    jac = tr.explicit_jacobians.layer_norm(x, eps)
    np.testing.assert_allclose(jac, np.swapaxes(jac, -1, -2), rtol=0, atol=1e-12)
    scale = np.abs(jac).max()
    np.testing.assert_allclose(jac.sum(axis=-1), 0.0, atol=1e-13 * max(1.0, scale))
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    x_hat = (x - mu) / np.sqrt(var + eps)
    expected = eps / (var + eps) * x_hat / np.sqrt(var + eps)
    np.testing.assert_allclose(jt_v(jac, x_hat), expected, rtol=1e-8, atol=1e-10 * scale)


def test_layer_norm_jacobian_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"jacobians\.layer_norm: x is 0-d"):
        tr.explicit_jacobians.layer_norm(np.array(0.5))
    with pytest.raises(ValueError, match=r"jacobians\.layer_norm: weight must have shape \(3,\)"):
        tr.explicit_jacobians.layer_norm(np.ones((2, 3)), 1e-5, np.ones(2))
