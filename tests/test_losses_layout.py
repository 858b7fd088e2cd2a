"""cross_entropy and nll_loss in torch's layout: input (N, C, d1, ..., dk) with class ids
(N, d1, ..., dk) or class probabilities of the input's shape, and the unbatched (C,) input
with a 0-d target.

* values and gradients equal torch's in float64 (1e-12) for every reduction, with class
  weights, ignore_index and label smoothing (torch tests skip when torch is absent);
* float64 central-difference gradient checks (tr.gradcheck) of the same layouts;
* torch's edge cases: a 'mean' whose counted weights sum to 0 (NaN or inf, NaN gradients on
  the counted rows, exactly 0 on the ignored ones) and a 'mean' over an empty batch (NaN);
  the one documented difference, a batch whose targets are all ignored, gives 0.0;
* shape errors: a target whose shape does not fit raises exactly where torch raises, and
  the message names the function, both shapes and torch's layout; a time-major (T, N, V)
  input with a (T, N) target is told how to flatten;
* the plain path: without class weights, smoothing or ignored targets F.cross_entropy runs
  PlainCrossEntropy (backward p - e_y, (SM10)), whose loss and gradient have exactly the
  bits of the general CrossEntropy (float32 and float64, every layout and reduction).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr
from torch_oracle import requires_torch
from tinygrad_rnn import functional as F

TOL = 1e-12
REDUCTIONS = st.sampled_from(["none", "mean", "sum"])


def _torch() -> Any:
    return pytest.importorskip("torch")


# ------------------------------------------------------------------------------ strategies
@st.composite
def class_shapes(draw: Any, min_side: int = 0) -> tuple:
    """(input shape, target shape) in torch's layout: (C,) with (), or (N, C, d1..dk) with
    (N, d1..dk) for k = 0..3; N and the d's may be 0 when ``min_side`` is 0."""
    c = draw(st.integers(1, 4))
    k = draw(st.integers(-1, 3))
    if k < 0:
        return (c,), ()
    n = draw(st.integers(min_side, 3))
    spatial = tuple(draw(st.integers(min_side, 3)) for _ in range(k))
    return (n, c) + spatial, (n,) + spatial


@st.composite
def hard_cases(draw: Any, min_side: int = 0) -> dict:
    """Logits, class ids (some equal to ignore_index), optional weights (0 among them, so
    the counted weights may sum to 0), a reduction and a label smoothing."""
    x_shape, t_shape = draw(class_shapes(min_side))
    c = x_shape[0] if len(x_shape) == 1 else x_shape[1]
    x = draw(hnp.arrays(np.float64, x_shape, elements=st.floats(-4, 4)))
    ids = draw(hnp.arrays(np.int64, t_shape, elements=st.integers(0, c - 1)))
    ignore_index = draw(st.sampled_from([-100, -1]) | st.integers(0, c - 1))
    ignored = draw(hnp.arrays(np.bool_, t_shape))
    weight = draw(st.none() | hnp.arrays(
        np.float64, (c,), elements=st.sampled_from([0.0, 0.25, 1.0, 2.0]) | st.floats(0.2, 2)))
    return {"x": x, "target": np.where(ignored, ignore_index, ids).astype(np.int64),
            "weight": weight, "ignore_index": ignore_index, "reduction": draw(REDUCTIONS),
            "label_smoothing": draw(st.sampled_from([0.0, 0.1, 1.0]) | st.floats(0, 1))}


@st.composite
def soft_cases(draw: Any) -> dict:
    x_shape, _ = draw(class_shapes())
    c = x_shape[0] if len(x_shape) == 1 else x_shape[1]
    return {"x": draw(hnp.arrays(np.float64, x_shape, elements=st.floats(-4, 4))),
            "target": draw(hnp.arrays(np.float64, x_shape, elements=st.floats(0, 1))),
            "weight": draw(st.none() | hnp.arrays(np.float64, (c,), elements=st.floats(0.2, 2))),
            "reduction": draw(REDUCTIONS),
            "label_smoothing": draw(st.sampled_from([0.0, 0.1]) | st.floats(0, 1))}


# The F13 report: counted weights summing to 0 (torch: NaN, NaN gradients on counted rows).
F13 = {"x": np.random.default_rng(0).normal(size=(4, 2)), "target": np.array([0, 1, 0, 1]),
       "weight": np.array([1.0, 0.0]), "ignore_index": 0, "reduction": "mean",
       "label_smoothing": 0.1}
EMPTY = {"x": np.zeros((0, 3)), "target": np.zeros(0, dtype=np.int64), "weight": None,
         "ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0}
EMPTY_SPATIAL = {"x": np.zeros((2, 3, 0)), "target": np.zeros((2, 0), dtype=np.int64),
                 "weight": None, "ignore_index": -100, "reduction": "mean",
                 "label_smoothing": 0.2}
SPATIAL = {"x": np.linspace(-2, 2, 2 * 3 * 2 * 2).reshape(2, 3, 2, 2),
           "target": np.array([[[0, 2], [1, -100]], [[2, 2], [0, 1]]]),
           "weight": np.array([0.5, 1.0, 2.0]), "ignore_index": -100, "reduction": "none",
           "label_smoothing": 0.3}
UNBATCHED = {"x": np.array([0.5, -1.0, 2.0]), "target": np.array(2), "weight": None,
             "ignore_index": -100, "reduction": "mean", "label_smoothing": 0.1}


# ------------------------------------------------------------------------------ helpers
def _upstream(shape: tuple, seed: int = 0) -> np.ndarray:
    return np.asarray(np.random.default_rng(seed).normal(size=shape))


def _ours(name: str, case: dict, g_seed: int = 0) -> tuple:
    """(loss, dL/dx[, dL/dtarget]) of our loss under a random upstream gradient."""
    kw = {k: v for k, v in case.items() if k not in ("x", "target")}
    x = tr.Tensor(case["x"], requires_grad=True)
    target = case["target"]
    if target.dtype.kind == "f":
        target = tr.Tensor(target, requires_grad=True)
    if name == "nll_loss":
        kw.pop("label_smoothing", None)
    loss = getattr(F, name)(x, target, **kw)
    loss.backward(_upstream(loss.shape, g_seed))
    grads = (x.grad,) + ((target.grad,) if isinstance(target, tr.Tensor) else ())
    return (loss.array,) + grads


def _theirs(name: str, case: dict, g_seed: int = 0) -> tuple:
    torch = _torch()
    kw = {k: v for k, v in case.items() if k not in ("x", "target", "weight")}
    if case.get("weight") is not None:
        kw["weight"] = torch.from_numpy(case["weight"])
    x = torch.tensor(case["x"], requires_grad=True)
    target = torch.from_numpy(np.array(case["target"]))
    soft = target.is_floating_point()
    if soft:
        target.requires_grad_(True)
    if name == "nll_loss":
        kw.pop("label_smoothing", None)
    loss = getattr(torch.nn.functional, name)(x, target, **kw)
    loss.backward(torch.from_numpy(_upstream(tuple(loss.shape), g_seed)))
    grads = (x.grad.numpy(),) + ((target.grad.numpy(),) if soft else ())
    return (loss.detach().numpy(),) + grads


def _all_ignored_mean(case: dict) -> bool:
    """The one documented difference: rows exist and all are ignored, 'mean' -> 0.0."""
    t = case["target"]
    return (case["reduction"] == "mean" and t.dtype.kind in "iu" and t.size > 0
            and bool(np.all(t == case["ignore_index"])))


def _assert_matches_torch(name: str, case: dict) -> None:
    ours, theirs = _ours(name, case), _theirs(name, case)
    if _all_ignored_mean(case):
        assert np.isnan(theirs[0]) and ours[0] == 0.0
        assert np.all(ours[1] == 0.0)
        return
    labels = ("loss", "d input", "d target")
    for label, a, b in zip(labels, ours, theirs):
        assert a.shape == b.shape, (name, label, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL, equal_nan=True,
                                   err_msg=f"{name}: {label}")


# ------------------------------------------------------------------------------ torch parity
@requires_torch
@given(case=hard_cases())
@example(case=F13)
@example(case=EMPTY)
@example(case=EMPTY_SPATIAL)
@example(case=SPATIAL)
@example(case=UNBATCHED)
@example(case={**F13, "label_smoothing": 0.0})
@example(case={**F13, "reduction": "sum"})
def test_cross_entropy_class_ids_match_torch(case: dict) -> None:
    _assert_matches_torch("cross_entropy", case)


@requires_torch
@given(case=hard_cases())
@example(case=F13)
@example(case=EMPTY)
@example(case=SPATIAL)
@example(case=UNBATCHED)
def test_nll_loss_matches_torch(case: dict) -> None:
    case = {**case, "x": -np.abs(case["x"])}  # log-probabilities are <= 0
    _assert_matches_torch("nll_loss", case)


@requires_torch
@given(case=soft_cases())
@example(case={"x": np.zeros((0, 3)), "target": np.zeros((0, 3)), "weight": None,
               "reduction": "mean", "label_smoothing": 0.0})
@example(case={"x": np.array([1.0, -2.0, 0.5]), "target": np.array([0.2, 0.5, 0.3]),
               "weight": np.array([1.0, 2.0, 0.5]), "reduction": "mean",
               "label_smoothing": 0.25})
def test_cross_entropy_probabilities_match_torch(case: dict) -> None:
    _assert_matches_torch("cross_entropy", case)


def test_probability_target_given_as_a_list_is_read_as_probabilities() -> None:
    x = np.array([[1.0, -2.0, 0.5], [0.0, 0.3, -0.1]])
    q = np.array([[0.2, 0.5, 0.3], [1.0, 0.0, 0.0]])
    from_list = F.cross_entropy(tr.Tensor(x), q.tolist()).item()
    assert from_list == F.cross_entropy(tr.Tensor(x), q).item()


# ------------------------------------------------------------------------------ edge cases
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_zero_weight_sum_gives_torchs_nan_and_zero_gradient_on_ignored_rows(name: str) -> None:
    """F13: the ignored rows get exactly 0 gradient (the CrossEntropy docstring's promise),
    the counted ones torch's NaN; the loss is NaN as in torch (it was inf with smoothing)."""
    case = F13 if name == "cross_entropy" else {**F13, "label_smoothing": 0.0}
    loss, grad = _ours(name, case)[:2]
    assert np.isnan(loss)
    ignored = case["target"] == case["ignore_index"]
    np.testing.assert_array_equal(grad[ignored], 0.0)
    assert np.all(np.isnan(grad[~ignored][:, 1]))


@pytest.mark.parametrize("soft", [False, True])
def test_empty_batch_mean_is_nan_as_in_torch(soft: bool) -> None:
    x = tr.Tensor(np.zeros((0, 3)), requires_grad=True)
    target = np.zeros((0, 3)) if soft else np.zeros(0, dtype=np.int64)
    loss = F.cross_entropy(x, target)
    assert loss.shape == () and np.isnan(loss.item())
    loss.backward()
    assert x.grad.shape == (0, 3)
    assert np.isnan(F.nll_loss(tr.Tensor(np.zeros((0, 3))), np.zeros(0, np.int64)).item())


def test_all_ignored_mean_stays_zero() -> None:
    """The documented difference from torch is kept: rows exist, all are ignored -> 0.0."""
    x = tr.Tensor(np.array([[0.3, -1.0], [2.0, 0.1]]), requires_grad=True)
    loss = F.cross_entropy(x, np.array([-100, -100]), label_smoothing=0.2)
    assert loss.item() == 0.0
    loss.backward()
    np.testing.assert_array_equal(x.grad, 0.0)


# ------------------------------------------------------------------------------ gradcheck
@given(case=hard_cases(min_side=1))
@example(case=SPATIAL)
@example(case=UNBATCHED)
@example(case={**UNBATCHED, "target": np.array([2])})  # (1,) target of a (C,) input
def test_cross_entropy_and_nll_gradcheck(case: dict) -> None:
    kw = {k: v for k, v in case.items() if k not in ("x", "target")}
    if kw["weight"] is not None:  # weights summing to 0 give NaN: covered against torch
        kw["weight"] = np.where(kw["weight"] == 0, 0.5, kw["weight"])
    target = case["target"]
    x = tr.Tensor(case["x"], requires_grad=True)
    tr.gradcheck(lambda z: F.cross_entropy(z, target, **kw), [x], atol=1e-7, rtol=1e-6)
    kw.pop("label_smoothing")
    logp = tr.Tensor(-np.abs(case["x"]) - 0.1, requires_grad=True)
    tr.gradcheck(lambda z: F.nll_loss(z, target, **kw), [logp], atol=1e-7, rtol=1e-6)


@given(case=soft_cases())
def test_cross_entropy_probabilities_gradcheck(case: dict) -> None:
    kw = {k: v for k, v in case.items() if k not in ("x", "target")}
    x = tr.Tensor(case["x"], requires_grad=True)
    q = tr.Tensor(case["target"], requires_grad=True)
    tr.gradcheck(lambda z, p: F.cross_entropy(z, p, **kw), [x, q], atol=1e-7, rtol=1e-6)


# ------------------------------------------------------------------------------ shape errors
@st.composite
def any_shapes(draw: Any) -> tuple:
    x_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=4)))
    t_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=4)))
    return x_shape, t_shape


def _layout_error(name: str, x_shape: tuple, t_shape: tuple) -> Exception | None:
    try:
        getattr(F, name)(tr.Tensor(np.zeros(x_shape)), np.zeros(t_shape, dtype=np.int64))
    except ValueError as err:
        return err
    return None


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@requires_torch
@given(shapes=any_shapes())
@example(shapes=((5, 3, 7), (5, 3)))
@example(shapes=((3,), (1,)))
@example(shapes=((3,), (2,)))
@example(shapes=((2, 3), ()))
@example(shapes=((2, 3), (2, 1)))
@example(shapes=((2, 3), (2, 3)))
@example(shapes=((3, 2, 2), (3, 2)))
def test_target_shapes_are_refused_exactly_where_torch_refuses(name: str,
                                                               shapes: tuple) -> None:
    """Class-id targets of zeros (valid for any C): we raise iff torch raises, and the
    message names the function, both shapes and torch's layout."""
    torch = _torch()
    x_shape, t_shape = shapes
    err = _layout_error(name, x_shape, t_shape)
    try:
        getattr(torch.nn.functional, name)(torch.zeros(x_shape, dtype=torch.float64),
                                           torch.zeros(t_shape, dtype=torch.int64))
        torch_raised = False
    except (RuntimeError, ValueError, IndexError):
        torch_raised = True
    assert (err is not None) == torch_raised, (x_shape, t_shape, err)
    if err is not None:
        msg = str(err)
        for part in (name, str(x_shape), str(t_shape), "(N, C, d1, ..., dk)"):
            assert part in msg, (part, msg)


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("x_shape", [(5, 3, 7), (3, 5, 7), (2, 4, 3, 6)])
def test_sequence_logits_with_sequence_targets_are_told_to_flatten(name: str,
                                                                   x_shape: tuple) -> None:
    """(T, N, V) logits with (T, N) targets (or batch-first (N, T, V) with (N, T)): the
    message gives the flatten fix, and the fix gives torch's numbers."""
    v = x_shape[-1]
    rng = np.random.default_rng(1)
    logits = rng.normal(size=x_shape)
    targets = rng.integers(0, v, size=x_shape[:-1])
    err = _layout_error(name, x_shape, x_shape[:-1])
    assert err is not None
    fix = f"F.{name}(logits.reshape(-1, {v}), targets.reshape(-1))"
    assert fix in str(err)
    assert f"needs a target of shape {x_shape[:1] + x_shape[2:]}" in str(err)
    flat = {"x": logits.reshape(-1, v), "target": targets.reshape(-1), "weight": None,
            "ignore_index": -100, "reduction": "mean", "label_smoothing": 0.0}
    _assert_matches_torch(name, flat)


@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_time_major_shapes_that_fit_torchs_layout_keep_torchs_meaning(name: str) -> None:
    """(T, N, V) with N == V and a (T, N) target fits torch's layout (C = N on axis 1): it
    is accepted and computed as torch computes it, not reinterpreted."""
    rng = np.random.default_rng(2)
    case = {"x": rng.normal(size=(4, 3, 3)), "target": rng.integers(0, 3, size=(4, 3)),
            "weight": None, "ignore_index": -100, "reduction": "none", "label_smoothing": 0.0}
    _assert_matches_torch(name, case)


@pytest.mark.parametrize("t_shape, hint", [
    ((2, 1), "targets.reshape((2,))"),
    ((2, 3), "targets.argmax(1)"),
])
def test_other_mismatches_suggest_their_fix(t_shape: tuple, hint: str) -> None:
    err = _layout_error("cross_entropy", (2, 3), t_shape)
    assert err is not None and hint in str(err)


def test_unbatched_input_takes_a_0d_or_a_1_element_target() -> None:
    """(C,) pairs with a 0-d target, and, as in torch, with a (1,) one (loss shape ())."""
    err = _layout_error("nll_loss", (3,), (2,))
    assert err is not None and "needs a 0-d target" in str(err)
    logp = tr.Tensor(np.array([-1.0, -2.0, -0.5]))
    for target in (np.array(1), np.array([1])):
        loss = F.nll_loss(logp, target, reduction="none")
        assert loss.shape == () and math.isclose(loss.item(), 2.0)


# ------------------------------------------------------------------------------ plain path
@st.composite
def plain_cases(draw: Any) -> dict:
    """Logits of a float dtype, in-range class ids (none ignored), a reduction and an
    upstream gradient: the cases F.cross_entropy sends to PlainCrossEntropy."""
    x_shape, t_shape = draw(class_shapes())
    c = x_shape[0] if len(x_shape) == 1 else x_shape[1]
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    x = draw(hnp.arrays(dtype, x_shape, elements=st.floats(-30, 30, width=32)))
    ids = draw(hnp.arrays(np.int64, t_shape, elements=st.integers(0, c - 1)))
    reduction = draw(REDUCTIONS)
    g_shape = t_shape if reduction == "none" else ()
    g = draw(hnp.arrays(dtype, g_shape, elements=st.floats(-3, 3, width=32)))
    return {"x": x, "target": ids, "reduction": reduction, "g": g}


def _loss_and_grad(fn: Any, case: dict) -> tuple:
    x = tr.Tensor(case["x"], requires_grad=True)
    loss = fn(x)
    loss.backward(case["g"])
    return loss.array, x.grad.array, loss.grad_fn.name


def _bits(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a``'s values in C order (NaN payloads and signed zeros included)."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


@given(case=plain_cases())
@example(case={"x": np.zeros((0, 3)), "target": np.zeros(0, dtype=np.int64),
               "reduction": "mean", "g": np.array(1.0)})                     # empty: NaN
@example(case={"x": np.array([2.0, 1.0, 0.1]), "target": np.array(0), "reduction": "mean",
               "g": np.array(1.0)})                                          # docs' example
def test_plain_cross_entropy_equals_the_general_op_bit_for_bit(case: dict) -> None:
    """PlainCrossEntropy (what F.cross_entropy runs without weights, smoothing or ignored
    rows) gives exactly the bits of the general CrossEntropy, loss and gradient, in float32
    and float64, for every layout and reduction."""
    target, reduction = case["target"], case["reduction"]
    with np.errstate(invalid="ignore"):
        plain = _loss_and_grad(lambda x: F.cross_entropy(x, target, reduction=reduction),
                               case)
        general = _loss_and_grad(
            lambda x: tr.ops.CrossEntropy.apply(x, target=target, reduction=reduction), case)
    assert plain[2] == "PlainCrossEntropy" and general[2] == "CrossEntropy"
    for a, b in zip(plain[:2], general[:2]):
        assert a.dtype == b.dtype == case["x"].dtype and a.shape == b.shape
        np.testing.assert_array_equal(_bits(a), _bits(b))


@pytest.mark.parametrize("options, plain", [
    ({}, True),
    ({"label_smoothing": 0}, True),
    ({"label_smoothing": np.float32(0.0)}, True),
    ({"weight": np.ones(3)}, False),                  # weights: the general op, even all 1
    ({"label_smoothing": 0.1}, False),
    ({"ignore_index": 2}, False),                     # a target equals ignore_index
    ({"ignore_index": 1}, True),                      # no target equals it
    ({"label_smoothing": False}, False),              # a bool: the general op refuses it
])
def test_cross_entropy_chooses_the_plain_op_only_for_the_textbook_loss(options: dict,
                                                                        plain: bool) -> None:
    x = tr.Tensor(np.array([[2.0, 1.0, 0.1], [0.3, -2.0, 5.0]]), requires_grad=True)
    target = np.array([0, 2])
    if isinstance(options.get("label_smoothing"), bool):
        with pytest.raises(TypeError, match="cross_entropy: label_smoothing"):
            F.cross_entropy(x, target, **options)
        return
    loss = F.cross_entropy(x, target, **options)
    want = "PlainCrossEntropy" if plain else "CrossEntropy"
    assert loss.grad_fn.name == want


def test_plain_cross_entropy_backward_is_p_minus_onehot() -> None:
    """(SM9) and (SM10) read off the op: each row's loss is -z_y + log sum_j exp(z_j), and
    with 'sum' and upstream 1 the gradient is softmax(z) - e_y."""
    rng = np.random.default_rng(5)
    z = rng.normal(size=(4, 5))
    y = np.array([0, 4, 2, 2])
    x = tr.Tensor(z, requires_grad=True)
    rows = tr.ops.PlainCrossEntropy.apply(x, target=y, reduction="none")
    want = -z[np.arange(4), y] + np.log(np.exp(z).sum(axis=1))            # (SM9)
    np.testing.assert_allclose(rows.array, want, rtol=1e-14)
    tr.ops.PlainCrossEntropy.apply(x, target=y, reduction="sum").backward()
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(x.grad.array, p - np.eye(5)[y], rtol=0, atol=1e-15)  # (SM10)
