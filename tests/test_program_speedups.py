"""The faster paths of issue 22 (benchmarks/programs.py measures them) against their
references: bit for bit where the arithmetic is the same, to float64 rounding where the
order of a sum changed.

* ``MatMul`` of a stack (..., n, k) with a matrix (k, m): computed on the stacked rows (one
  GEMM per product) instead of one product per stack entry; dL/dB sums in another order.
* ``Embedding`` backward: rank-by-rank fancy-indexed adds and add.at only for the rest,
  instead of add.at for every row: the same sums in the same order (bit for bit).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr


# ------------------------------------------------------------------------ MatMul on the rows
@settings(max_examples=40)
@given(lead=st.lists(st.integers(0, 4), min_size=1, max_size=3), k=st.integers(0, 6),
       m=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_stack_times_matrix_equals_the_per_entry_formula(lead: list[int], k: int, m: int,
                                                         seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(*lead, k))
    b = rng.normal(size=(k, m))
    g = rng.normal(size=(*lead, m))
    A, B = tr.Tensor(a, requires_grad=True), tr.Tensor(b, requires_grad=True)
    y = A @ B
    y.backward(g)
    # the reference: NumPy's matmul per stack entry, and dB as the sum of per-entry A_i^T G_i
    np.testing.assert_allclose(y.data, np.matmul(a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(A.grad.data, np.matmul(g, b.T), rtol=1e-12, atol=1e-12)
    db = (a[..., :, None] * g[..., None, :]).reshape(math.prod(lead), k, m).sum(axis=0)
    np.testing.assert_allclose(B.grad.data, db, rtol=1e-12, atol=1e-12)
    assert A.grad.shape == a.shape and B.grad.shape == b.shape


def test_stack_times_matrix_float32_matches_float64() -> None:
    rng = np.random.default_rng(1)
    a, b, g = rng.normal(size=(5, 3, 7)), rng.normal(size=(7, 4)), rng.normal(size=(5, 3, 4))
    grads = {}
    for dtype in (np.float32, np.float64):
        A = tr.Tensor(a.astype(dtype), requires_grad=True)
        B = tr.Tensor(b.astype(dtype), requires_grad=True)
        y = A @ B
        y.backward(g.astype(dtype))
        assert y.dtype == A.grad.dtype == B.grad.dtype == dtype
        grads[dtype] = (y.data, A.grad.data, B.grad.data)
    for lo, hi in zip(grads[np.float32], grads[np.float64]):
        np.testing.assert_allclose(lo, hi, rtol=1e-5, atol=1e-5)


def test_stack_times_matrix_gradcheck() -> None:
    rng = np.random.default_rng(2)
    A = tr.Tensor(rng.normal(size=(2, 3, 4)), requires_grad=True)
    B = tr.Tensor(rng.normal(size=(4, 5)), requires_grad=True)
    assert tr.gradcheck(lambda x, w: x @ w, (A, B))


# ------------------------------------------------------------------------ Embedding backward
def _add_at_reference(ids: np.ndarray, g: np.ndarray, rows: int) -> np.ndarray:
    """The scatter-add as np.add.at writes it: the previous Embedding.backward."""
    dw = np.zeros((rows, g.shape[-1]), dtype=g.dtype)
    np.add.at(dw, ids.reshape(-1), g.reshape(ids.size, g.shape[-1]))
    return dw


@settings(max_examples=80)
@given(shape=st.lists(st.integers(0, 7), min_size=1, max_size=3), vocab=st.integers(1, 9),
       width=st.integers(0, 5), dtype=st.sampled_from([np.float32, np.float64]),
       padding=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_embedding_backward_gives_add_at_bits(shape: list[int], vocab: int, width: int,
                                              dtype: type, padding: bool, seed: int) -> None:
    """Few ids and up to 343 positions: ids repeat far beyond SCATTER_RANKS, so both the
    rank-by-rank adds and the add.at of the rest run."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=shape)
    g = rng.normal(size=(*shape, width)).astype(dtype)
    g[rng.random(g.shape) < 0.1] = -0.0               # signed zeros come out as add.at's
    weight = tr.Tensor(rng.normal(size=(vocab, width)).astype(dtype), requires_grad=True)
    padding_idx = int(rng.integers(0, vocab)) if padding else None
    tr.nn.functional.embedding(ids, weight, padding_idx=padding_idx).backward(g)
    expected = _add_at_reference(ids, g, vocab)
    if padding_idx is not None:
        expected[padding_idx] = 0
    assert weight.grad.dtype == dtype
    assert weight.grad.numpy().tobytes() == expected.tobytes()


def test_scatter_add_rows_ranks_and_rest() -> None:
    """One id 10 times, one 4 times, one once, interleaved: add.at's bits, and the split
    between ranks and rest is where SCATTER_RANKS says."""
    from tinygrad_rnn.ops.selection import SCATTER_RANKS, _scatter_add_rows

    ids = np.array([2, 0, 2, 2, 5, 2, 0, 2, 2, 0, 2, 2, 0, 2, 2])
    rows = np.random.default_rng(3).normal(size=(ids.size, 4)) * 10.0 ** np.arange(ids.size)[
        :, None] % 7.0                                  # magnitudes that make order matter
    dw = np.zeros((6, 4))
    _scatter_add_rows(np, dw, ids, rows)
    assert dw.tobytes() == _add_at_reference(ids, rows, 6).tobytes()
    assert SCATTER_RANKS < 10                          # id 2 reaches the add.at part


# ------------------------------------------------------------------------ plain cross entropy
def _plain_cross_entropy_reference(x: np.ndarray, y: np.ndarray, reduction: str,
                                   grad_out: np.ndarray) -> tuple:
    """The loss and dL/dx as PlainCrossEntropy computed them before issue 22: the full
    log-softmax array, and (p - onehot(y)) s with a one-hot array (2-D x: rows, classes)."""
    from tinygrad_rnn.ops.losses import _log_softmax_last

    logp, p = _log_softmax_last(x)
    nll = -np.take_along_axis(logp, y[:, None], axis=-1)[:, 0]
    rows = np.asarray(y.size, dtype=x.dtype)
    loss = {"none": nll, "sum": nll.sum(), "mean": nll.sum() / rows}[reduction]
    s = grad_out / rows if reduction == "mean" else grad_out
    s = np.broadcast_to(s, y.shape)[:, None]
    e_y = np.arange(p.shape[-1]) == y[:, None]
    return loss, p * s - np.where(e_y, s, np.zeros((), dtype=p.dtype))


@settings(max_examples=60)
@given(rows=st.integers(1, 9), classes=st.integers(1, 12),
       reduction=st.sampled_from(["mean", "sum", "none"]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2**32 - 1))
def test_plain_cross_entropy_gives_the_previous_bits(rows: int, classes: int, reduction: str,
                                                      dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.normal(size=(rows, classes)) * 3).astype(dtype)
    y = rng.integers(0, classes, size=rows)
    grad_out = (rng.normal(size=rows) if reduction == "none" else rng.normal(size=())).astype(
        dtype)
    X = tr.Tensor(x, requires_grad=True)
    loss = tr.nn.functional.cross_entropy(X, tr.tensor(y), reduction=reduction)
    loss.backward(tr.tensor(grad_out))
    ref_loss, ref_grad = _plain_cross_entropy_reference(x, y, reduction, grad_out)
    assert loss.dtype == X.grad.dtype == dtype
    assert loss.numpy().tobytes() == np.asarray(ref_loss, dtype=dtype).tobytes()
    assert X.grad.numpy().tobytes() == ref_grad.tobytes()


def test_plain_cross_entropy_with_extra_axes_matches_the_two_dimensional_case() -> None:
    """(N, C, d) input: the classes axis moves last and back; the same numbers as the rows
    taken one by one in 2-D."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 5, 4))
    y = rng.integers(0, 5, size=(3, 4))
    X = tr.Tensor(x, requires_grad=True)
    tr.nn.functional.cross_entropy(X, tr.tensor(y), reduction="sum").backward()
    x2 = np.moveaxis(x, 1, -1).reshape(12, 5)
    X2 = tr.Tensor(x2, requires_grad=True)
    tr.nn.functional.cross_entropy(X2, tr.tensor(y.reshape(12)), reduction="sum").backward()
    np.testing.assert_array_equal(np.moveaxis(X.grad.numpy(), 1, -1).reshape(12, 5),
                                  X2.grad.numpy())


# ------------------------------------------------------------------------ gradient norm
@settings(max_examples=40)
@given(sizes=st.lists(st.integers(1, 50), min_size=1, max_size=4),
       scale=st.sampled_from([1e-30, 1e-3, 1.0, 1e3, 1e30]), seed=st.integers(0, 2**32 - 1))
def test_float32_two_norm_equals_the_rescaled_float64_norm(sizes: list[int], scale: float,
                                                           seed: int) -> None:
    """The one-pass 2-norm of float32 gradients against the rescaled float64 path (which
    float64 arrays still take), over magnitudes from 1e-30 to 1e30."""
    from tinygrad_rnn.nn.utils import _total_norm_float64

    rng = np.random.default_rng(seed)
    arrays = [(rng.normal(size=n) * scale).astype(np.float32) for n in sizes]
    fast = _total_norm_float64(arrays, 2.0, np)
    reference = _total_norm_float64([a.astype(np.float64) for a in arrays], 2.0, np)
    assert fast.dtype == np.float64 and fast.shape == ()
    np.testing.assert_allclose(fast, reference, rtol=1e-14, atol=0)


def test_float32_two_norm_inf_nan_and_zeros() -> None:
    from tinygrad_rnn.nn.utils import _total_norm_float64

    ones = np.ones(3, np.float32)
    assert _total_norm_float64([ones, np.zeros(4, np.float32)], 2.0, np) == np.sqrt(3.0)
    assert _total_norm_float64([np.zeros(2, np.float32)], 2.0, np) == 0.0
    assert _total_norm_float64([ones, np.array([-np.inf], np.float32)], 2.0, np) == np.inf
    assert np.isnan(_total_norm_float64([np.array([np.inf, np.nan], np.float32)], 2.0, np))
    big = np.full(4, 3e38, np.float32)          # squares overflow float32, not float64
    np.testing.assert_allclose(_total_norm_float64([big], 2.0, np), 6e38, rtol=1e-7)


def test_clip_grad_norm_float32_matches_float64_clipping() -> None:
    rng = np.random.default_rng(5)
    grads = [rng.normal(size=s) * 10 for s in ((30, 4), (7,), (3, 3))]
    out = {}
    for dtype in (np.float32, np.float64):
        params = [tr.Tensor(np.zeros(g.shape, dtype), requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = tr.tensor(g.astype(dtype))
        norm = tr.nn.utils.clip_grad_norm_(params, 1.0)
        out[dtype] = (norm.item(), [p.grad.numpy() for p in params])
    assert out[np.float32][0] == pytest.approx(out[np.float64][0], rel=1e-6)
    for lo, hi in zip(out[np.float32][1], out[np.float64][1]):
        np.testing.assert_allclose(lo, hi, rtol=1e-6, atol=1e-7)
    total = np.sqrt(sum(np.sum(h ** 2) for h in out[np.float64][1]))
    assert total == pytest.approx(1.0, rel=1e-5)
