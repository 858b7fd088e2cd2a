"""Claims of docs/softmax.md, docs/activations.md and docs/broadcasting.md that no other test
states on its own. Each test names the equations it checks; reference values are computed
here independently (plain NumPy formulas, explicit index sums), except for the worked
examples, whose printed 4-decimal numbers are the claim being checked.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr
from tinygrad_rnn.ops import stable_sigmoid

F = tr.functional


def _leaf(a: np.ndarray) -> tr.Tensor:
    return tr.Tensor(np.asarray(a, dtype=np.float64), requires_grad=True)


def _grad(fn, x: np.ndarray, upstream: np.ndarray | None = None) -> np.ndarray:
    """d <upstream, fn(x)> / dx (upstream defaults to 1 for a scalar)."""
    t = _leaf(x)
    y = fn(t)
    y.backward(upstream)
    return t.grad


def _softmax_ref(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


rows = st.integers(1, 4).flatmap(lambda n: st.integers(2, 5).flatmap(
    lambda c: hnp.arrays(np.float64, (n, c), elements=st.floats(-4, 4))))


# ----------------------------------------------------------------------------- softmax.md
@given(z=hnp.arrays(np.float64, st.integers(1, 6), elements=st.floats(-5, 5)),
       c=st.sampled_from([-1000.0, -3.5, 0.0, 2.0, 700.0, 1000.0]))
def test_softmax_is_unchanged_by_adding_a_constant(z: np.ndarray, c: float) -> None:
    """(SM1), (SM2), (SM3): softmax(z + c) = softmax(z), and the max-shifted form is the definition."""
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        shifted = F.softmax(tr.Tensor(z + c)).array
        plain = np.exp(z) / np.exp(z).sum()  # |z| <= 5: the unshifted formula is safe here
    np.testing.assert_allclose(F.softmax(tr.Tensor(z)).array, plain, rtol=1e-13, atol=1e-16)
    # z + c rounds differently from z, so compare at the size of that rounding
    np.testing.assert_allclose(shifted, plain, rtol=0, atol=1e-12 * max(1.0, abs(c)))


def test_three_class_worked_example() -> None:
    """Section 5 of docs/softmax.md: z = (2.0, 1.0, 0.1), target class 0, to 4 decimals."""
    z = np.array([2.0, 1.0, 0.1])
    p_ref = np.exp(z) / np.exp(z).sum()
    logits = _leaf(z)
    p = F.softmax(logits).array
    loss = F.cross_entropy(logits, np.array(0))
    loss.backward()
    np.testing.assert_allclose(p, p_ref, rtol=1e-14)
    np.testing.assert_allclose(loss.item(), -np.log(p_ref[0]), rtol=1e-14)
    np.testing.assert_allclose(logits.grad, p_ref - [1.0, 0.0, 0.0], rtol=1e-13, atol=1e-16)
    # the numbers printed on the page
    doc = 5e-5
    np.testing.assert_allclose(np.exp(z - 2.0), [1.0, 0.3679, 0.1496], atol=doc)
    np.testing.assert_allclose(np.exp(z - 2.0).sum(), 1.5174, atol=doc)
    np.testing.assert_allclose(p, [0.6590, 0.2424, 0.0986], atol=doc)
    np.testing.assert_allclose(F.log_softmax(tr.Tensor(z)).array, [-0.4170, -1.4170, -2.3170],
                               atol=doc)
    np.testing.assert_allclose(loss.item(), 0.4170, atol=doc)
    np.testing.assert_allclose(logits.grad, [-0.3410, 0.2424, 0.0986], atol=doc)
    np.testing.assert_allclose(tr.explicit_jacobians.softmax(p),
                               [[0.2247, -0.1598, -0.0650], [-0.1598, 0.1837, -0.0239],
                                [-0.0650, -0.0239, 0.0889]], atol=doc)


@given(z=rows, seed=st.integers(0, 2**31 - 1))
def test_cross_entropy_gradient_equals_the_jacobian_chain(z: np.ndarray, seed: int) -> None:
    """(SM10), (SM11): dl/dz = p - e_y = J_logsoftmax^T (-e_y) = J_softmax^T (-e_y / p_y)."""
    n, c = z.shape
    y = np.random.default_rng(seed).integers(0, c, size=n)
    onehot = np.eye(c)[y]
    grad = _grad(lambda t: F.cross_entropy(t, y, reduction="sum"), z)
    p = _softmax_ref(z)
    np.testing.assert_allclose(grad, p - onehot, rtol=1e-12, atol=1e-14)
    j_log = tr.explicit_jacobians.log_softmax(np.log(p))  # (n, c, c)
    np.testing.assert_allclose(np.einsum("nij,ni->nj", j_log, -onehot), p - onehot,
                               rtol=1e-12, atol=1e-14)
    j_soft = tr.explicit_jacobians.softmax(p)
    dp = -onehot / p[np.arange(n), y][:, None]
    np.testing.assert_allclose(np.einsum("nij,ni->nj", j_soft, dp), p - onehot,
                               rtol=1e-10, atol=1e-12)
    # the gradient of each row sums to 0 and lies in [-1, 1]
    np.testing.assert_allclose(grad.sum(axis=1), 0.0, atol=1e-14)
    assert np.all(np.abs(grad) <= 1.0)
    mean = _grad(lambda t: F.cross_entropy(t, y), z)  # 'mean': divided by N
    np.testing.assert_allclose(mean, (p - onehot) / n, rtol=1e-12, atol=1e-14)


@given(z=rows, eps=st.floats(0.0, 1.0), seed=st.integers(0, 2**31 - 1))
def test_label_smoothing_gradient_is_p_minus_the_smoothed_target(z: np.ndarray, eps: float,
                                                                 seed: int) -> None:
    """(SM12): with q = (1 - eps) e_y + eps / C, loss -sum q log p and gradient p - q."""
    n, c = z.shape
    y = np.random.default_rng(seed).integers(0, c, size=n)
    q = (1 - eps) * np.eye(c)[y] + eps / c
    p = _softmax_ref(z)
    logits = _leaf(z)
    loss = F.cross_entropy(logits, y, reduction="sum", label_smoothing=eps)
    loss.backward()
    np.testing.assert_allclose(loss.item(), -(q * np.log(p)).sum(), rtol=1e-12)
    np.testing.assert_allclose(logits.grad, p - q, rtol=1e-12, atol=1e-14)
    # the probability-target form with q given explicitly is the same loss
    soft = F.cross_entropy(tr.Tensor(z), q, reduction="sum")
    np.testing.assert_allclose(soft.item(), loss.item(), rtol=1e-12)


def test_label_smoothing_and_weight_examples_of_the_page() -> None:
    """Section 6 of docs/softmax.md, to 4 decimals."""
    z, y, doc = np.array([2.0, 1.0, 0.1]), np.array(0), 5e-5
    logits = _leaf(z)
    loss = F.cross_entropy(logits, y, label_smoothing=0.1)
    loss.backward()
    np.testing.assert_allclose(loss.item(), 0.5137, atol=doc)
    np.testing.assert_allclose(logits.grad, [-0.2743, 0.2091, 0.0652], atol=doc)
    w = np.array([2.0, 1.0, 0.5])
    summed = _grad(lambda t: F.cross_entropy(t, y, weight=w, reduction="sum"), z)
    np.testing.assert_allclose(summed, [-0.6820, 0.4849, 0.1971], atol=doc)
    mean = _grad(lambda t: F.cross_entropy(t, y, weight=w), z)  # one row: w_y cancels
    np.testing.assert_allclose(mean, [-0.3410, 0.2424, 0.0986], atol=doc)


@given(z=rows, eps=st.sampled_from([0.0, 0.1, 0.35]), seed=st.integers(0, 2**31 - 1))
def test_weighted_smoothed_gradient_and_mean_denominator(z: np.ndarray, eps: float,
                                                         seed: int) -> None:
    """(SM13), (SM14): the general row gradient with class weights and smoothing; 'mean'
    divides by the sum of w_y over the rows that are not ignored, which get exactly 0."""
    n, c = z.shape
    rng = np.random.default_rng(seed)
    y = rng.integers(0, c, size=n)
    ignored = rng.random(n) < 0.3
    target = np.where(ignored, -100, y)
    w = rng.uniform(0.2, 2.0, size=c)
    p = _softmax_ref(z)
    coef = (1 - eps) * w[y] + eps / c * w.sum()
    expected = coef[:, None] * p - (1 - eps) * w[y][:, None] * np.eye(c)[y] - eps / c * w
    expected[ignored] = 0.0
    denom = w[y][~ignored].sum()
    grad = _grad(lambda t: F.cross_entropy(t, target, weight=w, label_smoothing=eps), z)
    if denom > 0:
        np.testing.assert_allclose(grad, expected / denom, rtol=1e-11, atol=1e-14)
    else:
        assert np.all(grad == 0.0)
    assert np.all(grad[ignored] == 0.0)  # exactly, not approximately


# ----------------------------------------------------------------------------- activations.md
def test_activation_derivative_bounds() -> None:
    """(AC3), (AC4): tanh' = 1 - tanh^2 peaks at 1 and sigmoid' = s (1 - s) at 1/4, both at
    x = 0; at |x| = 3 tanh' is already below 0.01."""
    x = np.linspace(-8.0, 8.0, 1601)  # contains 0 exactly
    dtanh = _grad(F.tanh, x, np.ones_like(x))
    dsig = _grad(F.sigmoid, x, np.ones_like(x))
    assert dtanh.max() == 1.0 and x[dtanh.argmax()] == 0.0
    assert dsig.max() == 0.25 and x[dsig.argmax()] == 0.0
    assert np.all(dtanh > 0) and np.all(dsig > 0)
    np.testing.assert_allclose(_grad(F.tanh, np.array([3.0, -3.0]), np.ones(2)),
                               1 - np.tanh(3.0) ** 2, rtol=1e-15)
    assert 1 - np.tanh(3.0) ** 2 < 0.01


def test_stable_sigmoid_matches_both_textbook_forms_without_overflow() -> None:
    """(AC5): exp(-|x|) never overflows; each branch equals the definition where the
    definition can be evaluated, and the tails keep their tiny values."""
    x = np.linspace(-30.0, 30.0, 6001)
    s = stable_sigmoid(x)
    np.testing.assert_allclose(s, 1 / (1 + np.exp(-x)), rtol=1e-14)
    np.testing.assert_allclose(s, np.exp(x) / (1 + np.exp(x)), rtol=1e-14)
    # sigma(-x) = 1 - sigma(x): the sum is 1 up to the rounding of numbers near 1 (a few
    # units of eps = 2.2e-16; 1 - s itself would lose the relative accuracy of the tail)
    np.testing.assert_allclose(stable_sigmoid(-x) + s, 1.0, rtol=0,
                               atol=2 * np.finfo(np.float64).eps)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        tails = stable_sigmoid(np.array([-1000.0, -40.0, 40.0, 1000.0]))
        grad = _grad(F.sigmoid, np.array([-1000.0, 1000.0]), np.ones(2))
    assert tails[0] == 0.0 and tails[3] == 1.0
    np.testing.assert_allclose(tails[1], np.exp(-40.0), rtol=1e-15)  # not rounded to 0
    assert np.all(grad == 0.0)
    # the naive form overflows (a RuntimeWarning, an error under errstate)
    with np.errstate(over="raise"), pytest.raises(FloatingPointError):
        1 / (1 + np.exp(np.array([1000.0])))


@given(x=hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(-6, 6)))
def test_tanh_is_a_rescaled_sigmoid(x: np.ndarray) -> None:
    """(AC6): tanh(x) = 2 sigma(2x) - 1, hence tanh'(x) = 4 sigma'(2x)."""
    np.testing.assert_allclose(F.tanh(tr.Tensor(x)).array,
                               2 * F.sigmoid(tr.Tensor(2 * x)).array - 1, atol=1e-15)
    ones = np.ones_like(x)
    np.testing.assert_allclose(_grad(F.tanh, x, ones), 4 * _grad(F.sigmoid, 2 * x, ones),
                               atol=1e-15)


def test_relu_gradient_at_the_kink_is_zero() -> None:
    """(AC7): relu'(0) is taken as 0, and the gradient is the indicator of x > 0."""
    x = np.array([-2.0, -0.0, 0.0, 1e-300, 3.0])
    grad = _grad(F.relu, x, np.array([5.0, 5.0, 5.0, 5.0, 5.0]))
    np.testing.assert_array_equal(grad, [0.0, 0.0, 0.0, 5.0, 5.0])


# ----------------------------------------------------------------------------- broadcasting.md
@given(n=st.integers(1, 4), k=st.integers(1, 4), m=st.integers(1, 4),
       seed=st.integers(0, 2**31 - 1))
def test_matmul_vjps_equal_the_index_sums(n: int, k: int, m: int, seed: int) -> None:
    """(BC1), (BC2), (BC3): dA_ik = sum_j G_ij B_kj and dB_kj = sum_i G_ij A_ik, as loops."""
    rng = np.random.default_rng(seed)
    a, b, g = rng.normal(size=(n, k)), rng.normal(size=(k, m)), rng.normal(size=(n, m))
    da_loop, db_loop = np.zeros((n, k)), np.zeros((k, m))
    for i in range(n):
        for kk in range(k):
            da_loop[i, kk] = sum(g[i, j] * b[kk, j] for j in range(m))
    for kk in range(k):
        for j in range(m):
            db_loop[kk, j] = sum(g[i, j] * a[i, kk] for i in range(n))
    ta, tb = _leaf(a), _leaf(b)
    (ta @ tb).backward(g)
    np.testing.assert_allclose(ta.grad, da_loop, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(tb.grad, db_loop, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(da_loop, g @ b.T, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(db_loop, a.T @ g, rtol=1e-12, atol=1e-13)


def test_matmul_with_vectors_and_a_shared_weight() -> None:
    """(BC4), (BC5): 1-D operands, and a weight shared over batch axes gets the sum over
    them, equal to one GEMM over the stacked rows."""
    rng = np.random.default_rng(0)
    a, b, B = rng.normal(size=3), rng.normal(size=3), rng.normal(size=(3, 4))
    g = rng.normal(size=4)
    ta, tb = _leaf(a), _leaf(b)
    (ta @ tb).backward(np.array(2.0))
    np.testing.assert_allclose(ta.grad, 2.0 * b, rtol=1e-15)
    np.testing.assert_allclose(tb.grad, 2.0 * a, rtol=1e-15)
    ta, tB = _leaf(a), _leaf(B)
    (ta @ tB).backward(g)
    np.testing.assert_allclose(ta.grad, B @ g, rtol=1e-14)
    np.testing.assert_allclose(tB.grad, np.outer(a, g), rtol=1e-14)
    T, N, K, M = 5, 3, 4, 2
    x, w, gy = rng.normal(size=(T, N, K)), rng.normal(size=(K, M)), rng.normal(size=(T, N, M))
    tw = _leaf(w)
    (tr.Tensor(x) @ tw).backward(gy)
    per_step = sum(x[t].T @ gy[t] for t in range(T))
    one_gemm = x.reshape(T * N, K).T @ gy.reshape(T * N, M)
    np.testing.assert_allclose(tw.grad, per_step, rtol=1e-12)
    np.testing.assert_allclose(tw.grad, one_gemm, rtol=1e-12)


def test_broadcasting_examples_of_the_page() -> None:
    """(BC7), (BC8) with the numbers of docs/broadcasting.md."""
    z = _leaf(np.zeros((3, 2)))
    b = _leaf(np.zeros(2))
    gy = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    (z + b).backward(gy)
    assert b.grad.tolist() == [9.0, 12.0] and z.grad.tolist() == gy.tolist()
    x, y = _leaf(np.zeros((2, 1))), _leaf(np.zeros((1, 3)))
    (x + y).backward(np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    assert x.grad.tolist() == [[6.0], [15.0]] and y.grad.tolist() == [[5.0, 7.0, 9.0]]
    # the matmul example
    A, B = _leaf(np.array([[1.0, 2.0], [3.0, 4.0]])), _leaf(np.array([[1.0, 0.0, -1.0],
                                                                       [2.0, 1.0, 0.0]]))
    (A @ B).backward(np.array([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0]]))
    assert A.grad.tolist() == [[-1.0, 2.0], [1.0, 1.0]]
    assert B.grad.tolist() == [[1.0, 3.0, -1.0], [2.0, 4.0, 0.0]]
    # a broadcast product: z = x * s with s of shape (1, H): ds sums x * G over rows
    xs, s = _leaf(np.array([[1.0, 2.0], [3.0, 4.0]])), _leaf(np.array([[10.0, 20.0]]))
    (xs * s).backward(np.ones((2, 2)))
    assert s.grad.tolist() == [[4.0, 6.0]] and xs.grad.tolist() == [[10.0, 20.0]] * 2


# --------------------------------------------------------------------------------------------
# docs/attention.md (A7): the additive score's gradients, as the page writes them
# --------------------------------------------------------------------------------------------
@given(tq=st.integers(1, 3), tk=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_additive_score_gradient_is_A7(tq: int, tk: int, seed: int) -> None:
    """(A7) evaluated entry by entry in NumPy: with a_ij = W_q q_i + b + W_k k_j,
    u_ij = tanh(a_ij), s_ij = v^T u_ij and r_ij = v * (1 - u_ij^2),
    dq_i = W_q^T sum_j G_ij r_ij, dk_j = W_k^T sum_i G_ij r_ij, dv = sum_ij G_ij u_ij,
    db = sum_ij G_ij r_ij, dW_q = sum_ij G_ij r_ij q_i^T and dW_k = sum_ij G_ij r_ij k_j^T,
    against autograd through nn.attention.additive_scores (float64, 1e-12)."""
    rng = np.random.default_rng(seed)
    dq_size, dk_size, h = 2, 3, 4
    q, k = rng.normal(size=(tq, dq_size)), rng.normal(size=(tk, dk_size))
    w_q, w_k = rng.normal(size=(h, dq_size)), rng.normal(size=(h, dk_size))
    b, v = rng.normal(size=h), rng.normal(size=h)
    G = rng.normal(size=(tq, tk))                                    # dL/dS

    want = {"q": np.zeros_like(q), "k": np.zeros_like(k), "v": np.zeros(h), "b": np.zeros(h),
            "w_q": np.zeros_like(w_q), "w_k": np.zeros_like(w_k)}
    for i in range(tq):
        for j in range(tk):
            u = np.tanh(w_q @ q[i] + b + w_k @ k[j])
            r = v * (1 - u * u)
            want["q"][i] += w_q.T @ (G[i, j] * r)
            want["k"][j] += w_k.T @ (G[i, j] * r)
            want["v"] += G[i, j] * u
            want["b"] += G[i, j] * r
            want["w_q"] += G[i, j] * np.outer(r, q[i])
            want["w_k"] += G[i, j] * np.outer(r, k[j])

    proj_q = tr.nn.Linear(dq_size, h, dtype=np.float64)
    proj_k = tr.nn.Linear(dk_size, h, bias=False, dtype=np.float64)
    proj_q.load_state_dict({"weight": w_q, "bias": b})
    proj_k.load_state_dict({"weight": w_k})
    tq_, tk_, tv = _leaf(q), _leaf(k), _leaf(v)
    s = tr.nn.attention.additive_scores(tq_, tk_, proj_q, proj_k, tv)
    (s * tr.Tensor(G)).sum().backward()
    got = {"q": tq_.grad, "k": tk_.grad, "v": tv.grad, "b": proj_q.bias.grad,
           "w_q": proj_q.weight.grad, "w_k": proj_k.weight.grad}
    for name, value in want.items():
        np.testing.assert_allclose(np.asarray(got[name]), value, rtol=1e-12, atol=1e-12,
                                   err_msg=f"(A7) d{name}")


# --------------------------------------------------------------------------------------------
# float64 gradient checks the pages cite by name (grep finds them)
# --------------------------------------------------------------------------------------------
MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((2, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4))]


@given(shapes=st.sampled_from(MATMUL_SHAPES), seed=st.integers(0, 2**31 - 1))
def test_matmul_gradcheck_on_vectors_matrices_and_batches(shapes: tuple, seed: int) -> None:
    """(BC2), (BC3), (BC4), (BC5): float64 central differences of A @ B for 1-D operands,
    matrices, a weight shared by a batch and broadcast batch axes (docs/broadcasting.md)."""
    rng = np.random.default_rng(seed)
    a, b = (_leaf(rng.normal(size=shape)) for shape in shapes)
    assert tr.gradcheck(lambda x, y: x @ y, [a, b], rtol=1e-6, atol=1e-8)


@given(case=st.sampled_from([((3,), (2, 3)), ((2, 1), (2, 3)), ((1, 3), (4, 2, 3)),
                             ((), (2, 2))]), seed=st.integers(0, 2**31 - 1))
def test_broadcast_to_gradcheck(case: tuple, seed: int) -> None:
    """(BC7), (BC8): the gradient of broadcasting sums the copies, checked by float64
    central differences (new leading axes and size-1 axes)."""
    shape, target = case
    x = _leaf(np.random.default_rng(seed).normal(size=shape))
    weights = tr.Tensor(np.random.default_rng(seed + 1).normal(size=target))
    assert tr.gradcheck(lambda t: (t.broadcast_to(target) * weights).sum(), [x],
                        rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------------- layernorm.md
@given(rows=st.integers(1, 3), m=st.integers(2, 5), seed=st.integers(0, 2**31 - 1))
def test_layer_norm_is_LN1_to_LN10(rows: int, m: int, seed: int) -> None:
    """(LN1)-(LN5) in NumPy against F.layer_norm; (LN6) by central differences of mu and
    sigma; (LN8), (LN9), (LN10) in NumPy against autograd; and a float64 gradcheck of x,
    weight and bias."""
    rng = np.random.default_rng(seed)
    x, w, b, g = (rng.normal(size=shape) for shape in ((rows, m), (m,), (m,), (rows, m)))
    eps = 1e-5
    mu = x.mean(axis=1, keepdims=True)                                   # (LN1)
    v = ((x - mu) ** 2).mean(axis=1, keepdims=True)                      # (LN2)
    sigma = np.sqrt(v + eps)                                             # (LN3)
    x_hat = (x - mu) / sigma                                             # (LN4)
    y = w * x_hat + b                                                    # (LN5)
    NF = tr.nn.functional
    tx, tw, tb = _leaf(x), _leaf(w), _leaf(b)
    out = NF.layer_norm(tx, (m,), tw, tb, eps)
    np.testing.assert_allclose(out.numpy(), y, rtol=1e-12, atol=1e-12)

    def stats(row: np.ndarray) -> np.ndarray:
        return np.array([row.mean(), np.sqrt(((row - row.mean()) ** 2).mean() + eps)])
    h = 1e-6
    for j in range(m):                                                   # (LN6)
        e = np.eye(m)[j] * h
        d_mu, d_sigma = (stats(x[0] + e) - stats(x[0] - e)) / (2 * h)
        np.testing.assert_allclose(d_mu, 1.0 / m, rtol=1e-7)
        np.testing.assert_allclose(d_sigma, x_hat[0, j] / m, rtol=1e-6, atol=1e-9)

    out.backward(g)
    g_hat = g * w                                                        # (LN8)
    dx = (g_hat - g_hat.mean(axis=1, keepdims=True)
          - x_hat * (g_hat * x_hat).mean(axis=1, keepdims=True)) / sigma    # (LN9)
    np.testing.assert_allclose(tx.grad, dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(tw.grad, (g * x_hat).sum(axis=0), rtol=1e-12)   # (LN10)
    np.testing.assert_allclose(tb.grad, g.sum(axis=0), rtol=1e-12)            # (LN10)
    assert tr.gradcheck(lambda a, c, d: NF.layer_norm(a, (m,), c, d, eps),
                        [_leaf(x), _leaf(w), _leaf(b)], rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------------- softmax.md (8)
@given(n=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_binary_cross_entropy_is_SM15_and_SM16(n: int, seed: int) -> None:
    """(SM15) and (SM16) in NumPy against F.binary_cross_entropy (loss and both gradients,
    with an elementwise weight), and a float64 gradcheck away from the floors."""
    rng = np.random.default_rng(seed)
    x, t = rng.uniform(0.05, 0.95, size=n), rng.uniform(0.0, 1.0, size=n)
    w = rng.uniform(0.5, 2.0, size=n)
    tx, tt = _leaf(x), _leaf(t)
    loss = F.binary_cross_entropy(tx, tt, weight=w, reduction="sum")
    loss.backward()
    want = -np.sum(w * (t * np.log(x) + (1 - t) * np.log(1 - x)))        # (SM15)
    np.testing.assert_allclose(loss.item(), want, rtol=1e-12)
    np.testing.assert_allclose(tx.grad, w * (x - t) / (x * (1 - x)), rtol=1e-10)  # (SM16)
    np.testing.assert_allclose(tt.grad, w * (np.log(1 - x) - np.log(x)), rtol=1e-10)
    assert tr.gradcheck(lambda a, b: F.binary_cross_entropy(a, b, weight=w),
                        [_leaf(x), _leaf(t)], rtol=1e-6, atol=1e-8)
