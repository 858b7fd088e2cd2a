"""Forward values of every registered op against its NumPy reference (float64, tight), and
the torch-signature ops against torch (forward and gradients, float64, 1e-10) when torch is
installed.

Where our documented semantics deviate from torch, the documented behaviour is tested
explicitly here (and the torch comparison checks that torch really differs there):

* cross_entropy / nll_loss with reduction='mean' over a non-empty batch whose every target is
  ignore_index: 0.0 with zero gradient; torch returns NaN. (An empty batch gives NaN, as in
  torch, also with probability targets.)
* softmax / log_softmax with ``mask`` (torch has no mask argument; compared with torch on
  ``masked_fill(~mask, -inf)``): a fully masked row is all 0 (softmax) or all -inf
  (log_softmax) with zero gradient, where torch gives NaN; and log_softmax ignores the
  upstream gradient at masked (-inf) outputs, where torch propagates -p * g from them.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from torch_oracle import requires_torch
from tinygrad_rnn.testing.registry import (
    BY_NAME, REGISTRY, Case, OpInfo, as_tuple, graph_functions, random_upstream, run_vjp,
)
from tinygrad_rnn import functional as F

FORWARD_RTOL = 1e-12
TORCH_RTOL = 1e-10
SEEDS = st.integers(0, 2**32 - 1)


def _assert_close(actual: Any, expected: Any, rtol: float, what: str) -> None:
    """|actual - expected| <= rtol * (|expected| + max(1, max |expected|)), NaN == NaN,
    infinities equal."""
    assert np.shape(actual) == np.shape(expected), (what, np.shape(actual), np.shape(expected))
    expected = np.asarray(expected, dtype=np.float64)
    finite = np.abs(expected[np.isfinite(expected)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=rtol,
                               atol=rtol * scale, equal_nan=True, err_msg=what)


# ------------------------------------------------------------------------------ NumPy refs
def check_forward(op: OpInfo, case: Case) -> None:
    leaves = [tr.Tensor(a, requires_grad=True) for a in case.inputs]
    outputs = as_tuple(op.fn(*leaves, **case.consts))
    with np.errstate(all="ignore"):  # the references may divide 0 / 0 on purpose (mean)
        refs = as_tuple(op.ref(*case.inputs, **case.consts))
    assert len(outputs) == len(refs), (op.name, len(outputs), len(refs))
    for k, (out, ref) in enumerate(zip(outputs, refs)):
        assert out.dtype == np.float64, (op.name, k, out.dtype)
        _assert_close(out.array, ref, FORWARD_RTOL, f"{op.name}: output {k}")
    # without recording: the same values and no graph
    with tr.no_grad():
        plain = as_tuple(op.fn(*[tr.Tensor(a) for a in case.inputs], **case.consts))
    for out, value in zip(outputs, plain):
        assert value.grad_fn is None and not value.requires_grad
        np.testing.assert_array_equal(value.array, out.array)
    assert set(op.functions) <= graph_functions(outputs)


def _make_forward_test(op: OpInfo) -> Any:
    def test(case: Case) -> None:
        check_forward(op, case)

    test.__name__ = test.__qualname__ = f"test_forward_{op.name}"
    test.__doc__ = f"Forward of {op.name} equals its NumPy reference (float64)."
    for case in op.examples:
        test = example(case=case)(test)
    return given(case=op.cases)(test)


for _op in REGISTRY:
    globals()[f"test_forward_{_op.name}"] = _make_forward_test(_op)
del _op


# ------------------------------------------------------------------------------ torch
def _torch_vjp(call: Callable, inputs: tuple, upstream: np.ndarray) -> tuple:
    """(output, input gradients) of a torch call in float64 (zeros for an input that
    received no gradient)."""
    torch = pytest.importorskip("torch")
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in inputs]
    out = call(*leaves)
    out.backward(torch.from_numpy(np.array(upstream, dtype=np.float64)))
    grads = [np.zeros(a.shape) if t.grad is None else t.grad.numpy() for a, t in
             zip(inputs, leaves)]
    return out.detach().numpy(), grads


def _t(value: Any) -> Any:
    torch = pytest.importorskip("torch")
    # np.array, not ascontiguousarray: that would turn a 0-d target into shape (1,)
    return None if value is None else torch.from_numpy(np.array(value))


def _torch_loss(name: str, consts: dict) -> Callable:
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    c = consts
    if name == "cross_entropy":
        return lambda x: tf.cross_entropy(
            x, _t(c["target"]), weight=_t(c["weight"]), ignore_index=c["ignore_index"],
            reduction=c["reduction"], label_smoothing=c["label_smoothing"])
    if name == "cross_entropy_probs":
        return lambda x, q: tf.cross_entropy(
            x, q, weight=_t(c["weight"]), reduction=c["reduction"],
            label_smoothing=c["label_smoothing"])
    if name == "nll_loss":
        return lambda x: tf.nll_loss(x, _t(c["target"]), weight=_t(c["weight"]),
                                     ignore_index=c["ignore_index"], reduction=c["reduction"])
    if name == "mse_loss":
        return lambda a, b: tf.mse_loss(a, b, reduction=c["reduction"])
    assert name == "bce_with_logits"
    return lambda x, t: tf.binary_cross_entropy_with_logits(
        x, t, weight=_t(c["weight"]), pos_weight=_t(c["pos_weight"]), reduction=c["reduction"])


def _empty_mean(name: str, case: Case) -> bool:
    """True where our documented 'mean' over all-ignored targets (0.0) differs from torch's
    NaN."""
    c = case.consts
    if c.get("reduction") != "mean":
        return False
    if name in ("cross_entropy", "nll_loss"):
        return c["target"].size > 0 and not np.any(c["target"] != c["ignore_index"])
    return False


TORCH_LOSSES = ["cross_entropy", "cross_entropy_probs", "nll_loss", "mse_loss",
                "bce_with_logits"]


def check_loss_against_torch(name: str, case: Case, seed: int) -> None:
    op = BY_NAME[name]
    upstream = random_upstream(op, case, seed)
    outs, grads = run_vjp(op, case, upstream)
    out_t, grads_t = _torch_vjp(_torch_loss(name, case.consts), case.inputs, upstream[0])
    if _empty_mean(name, case):
        # documented deviation: the mean over no target is 0.0 with zero gradient
        assert np.isnan(out_t), "torch now agrees: update the documented deviation"
        assert outs[0] == 0.0
        for grad in grads:
            assert np.all(grad == 0.0)
        return
    _assert_close(outs[0], out_t, TORCH_RTOL, f"{name}: forward")
    for k, (grad, grad_t) in enumerate(zip(grads, grads_t)):
        _assert_close(grad, grad_t, TORCH_RTOL, f"{name}: gradient {k}")


def _make_torch_loss_test(name: str) -> Any:
    def test(case: Case, seed: int) -> None:
        check_loss_against_torch(name, case, seed)

    test.__name__ = test.__qualname__ = f"test_{name}_matches_torch"
    test.__doc__ = f"{name}: forward and gradients equal torch's (float64, 1e-10)."
    for case in BY_NAME[name].examples:
        test = example(case=case, seed=0)(test)
    return requires_torch(given(case=BY_NAME[name].cases, seed=SEEDS)(test))


for _name in TORCH_LOSSES:
    globals()[f"test_{_name}_matches_torch"] = _make_torch_loss_test(_name)
del _name


def _softmax_ours(name: str, x: np.ndarray, axis: int, mask: Any,
                  upstream: np.ndarray) -> tuple:
    leaf = tr.Tensor(x, requires_grad=True)
    fn = F.softmax if name == "softmax" else F.log_softmax
    out = fn(leaf, axis=axis, mask=mask)
    out.backward(upstream)
    return out.array, leaf.grad


def check_softmax_against_torch(name: str, case: Case, seed: int) -> None:
    torch = pytest.importorskip("torch")
    (x,) = case.inputs
    axis, mask = case.consts["axis"], case.consts["mask"]
    valid = np.ones(x.shape, dtype=bool) if mask is None else np.broadcast_to(mask, x.shape)
    ax = axis if x.ndim else None
    # live: the entries of rows with at least one valid entry (elsewhere torch gives NaN)
    live = np.broadcast_to(np.any(valid, axis=ax, keepdims=True), x.shape)
    upstream = np.array(np.random.default_rng(seed).standard_normal(x.shape))
    if name == "log_softmax":
        upstream = np.where(valid, upstream, 0.0)  # see the module docstring
    out, grad = _softmax_ours(name, x, axis, mask, upstream)
    fill = torch.from_numpy(np.array(~valid))
    torch_fn = torch.softmax if name == "softmax" else torch.log_softmax
    out_t, (grad_t,) = _torch_vjp(
        lambda t: torch_fn(t.masked_fill(fill, -np.inf), axis), (x,), upstream)
    _assert_close(np.where(live, out, 0.0), np.where(live, out_t, 0.0), TORCH_RTOL,
                  f"{name}: forward")
    _assert_close(np.where(live, grad, 0.0), np.where(live, grad_t, 0.0), TORCH_RTOL,
                  f"{name}: gradient")
    # documented: masked entries are exactly 0 / -inf, fully masked rows too (torch: NaN)
    masked_value = 0.0 if name == "softmax" else -np.inf
    assert np.all(out[~valid] == masked_value)
    assert np.all(grad[~valid] == 0.0) and np.all(grad[~live] == 0.0)
    if np.any(~live):
        assert np.all(np.isnan(out_t[~live])), "torch now agrees: update the deviation"


def _make_torch_softmax_test(name: str) -> Any:
    def test(case: Case, seed: int) -> None:
        check_softmax_against_torch(name, case, seed)

    test.__name__ = test.__qualname__ = f"test_{name}_matches_torch"
    test.__doc__ = f"{name} (with and without mask): forward and gradient equal torch's."
    for case in BY_NAME[name].examples:
        test = example(case=case, seed=0)(test)
    return requires_torch(given(case=BY_NAME[name].cases, seed=SEEDS)(test))


for _name in ("softmax", "log_softmax"):
    globals()[f"test_{_name}_matches_torch"] = _make_torch_softmax_test(_name)
del _name


# ------------------------------------------------------------------------------ documented
@given(case=BY_NAME["log_softmax"].cases, seed=SEEDS)
def test_log_softmax_ignores_upstream_at_masked_entries(case: Case, seed: int) -> None:
    """Masked outputs are the constant -inf: the upstream gradient there has no effect."""
    (x,) = case.inputs
    axis, mask = case.consts["axis"], case.consts["mask"]
    valid = np.ones(x.shape, dtype=bool) if mask is None else np.broadcast_to(mask, x.shape)
    rng = np.random.default_rng(seed)
    upstream = rng.standard_normal(x.shape)
    noise = np.where(valid, 0.0, rng.standard_normal(x.shape))
    _, grad = _softmax_ours("log_softmax", x, axis, mask, upstream)
    _, grad_noisy = _softmax_ours("log_softmax", x, axis, mask, upstream + noise)
    np.testing.assert_array_equal(grad_noisy, grad)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_all_targets_ignored(name: str, reduction: str) -> None:
    """Every target is ignore_index: the loss is 0 (also for 'mean', where torch gives NaN)
    and the gradient is exactly 0."""
    x = tr.Tensor(np.array([[0.3, -1.2, 2.0], [1.0, 0.5, -0.7]]), requires_grad=True)
    target = np.array([4, 4])
    fn = F.cross_entropy if name == "cross_entropy" else F.nll_loss
    loss = fn(x, target, weight=np.array([0.5, 1.0, 2.0]), ignore_index=4,
              reduction=reduction)
    np.testing.assert_array_equal(loss.array, np.zeros(() if reduction != "none" else (2,)))
    loss.backward(np.ones(loss.shape))
    np.testing.assert_array_equal(x.grad, np.zeros((2, 3)))


def test_cross_entropy_empty_batch_mean_is_nan_as_in_torch() -> None:
    x = tr.Tensor(np.zeros((0, 3)), requires_grad=True)
    for target in (np.zeros(0, dtype=np.int64), np.zeros((0, 3))):
        x.grad = None
        loss = F.cross_entropy(x, target)
        assert loss.shape == () and np.isnan(loss.item())
        loss.backward()
        assert x.grad.shape == (0, 3)


def test_fully_masked_rows() -> None:
    """A fully masked row: softmax all 0, log_softmax all -inf, gradient 0, never NaN."""
    x = np.array([[1.0, -2.0, 0.5], [np.inf, np.nan, 3.0]])
    mask = np.array([[True, False, True], [False, False, False]])
    g = np.array([[0.3, -1.0, 2.0], [1.0, 2.0, 3.0]])
    for name, masked in (("softmax", 0.0), ("log_softmax", -np.inf)):
        out, grad = _softmax_ours(name, x, -1, mask, g)
        assert np.all(out[1] == masked) and np.all(grad[1] == 0.0)
        assert np.all(np.isfinite(out[0][mask[0]])) and np.all(np.isfinite(grad))


@pytest.mark.parametrize("fn,expected_a", [(F.maximum, [1.0, 0.5, 0.0]),
                                           (F.minimum, [0.0, 0.5, 1.0])])
def test_maximum_minimum_split_ties(fn: Callable, expected_a: list) -> None:
    """At a tie each input gets half the upstream gradient (the symmetric subgradient)."""
    a = tr.Tensor(np.array([2.0, 1.0, -1.0]), requires_grad=True)
    b = tr.Tensor(np.array([1.0, 1.0, 0.0]), requires_grad=True)
    fn(a, b).backward(np.ones(3))
    np.testing.assert_array_equal(a.grad, expected_a)
    np.testing.assert_array_equal(b.grad, 1.0 - np.array(expected_a))


def test_max_shares_ties_and_kinks() -> None:
    """max shares the gradient among tied maxima; relu and abs have derivative 0 at 0;
    clip passes the gradient at its (inclusive) bounds. Each as torch does it."""
    x = tr.Tensor(np.array([[3.0, 1.0, 3.0], [0.0, -1.0, 2.0]]), requires_grad=True)
    x.max(axis=1).backward(np.array([1.0, 6.0]))
    np.testing.assert_array_equal(x.grad, [[0.5, 0.0, 0.5], [0.0, 0.0, 6.0]])
    z = tr.Tensor(np.array([0.0, -0.0, 1.0, -1.0]), requires_grad=True)
    (F.relu(z) + z.abs() + z.clip(-1.0, 1.0)).sum().backward()
    np.testing.assert_array_equal(z.grad, [1.0, 1.0, 3.0, 0.0])


def test_embedding_padding_idx_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    ids = np.array([[0, 2, 2], [1, 2, 0]])
    w = np.random.default_rng(0).standard_normal((4, 3))
    g = np.random.default_rng(1).standard_normal((2, 3, 3))
    leaf = tr.Tensor(w, requires_grad=True)
    F.embedding(ids, leaf, padding_idx=2).backward(g)
    w_t = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.from_numpy(ids), w_t, padding_idx=2).backward(
        torch.from_numpy(g))
    np.testing.assert_array_equal(leaf.grad[2], np.zeros(3))
    np.testing.assert_allclose(leaf.grad, w_t.grad.numpy(), rtol=1e-12, atol=0)
