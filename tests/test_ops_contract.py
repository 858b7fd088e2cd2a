"""The backward contract of every registered op, on hypothesis-generated inputs.

``test_contract_<op>`` (see ``tinygrad_rnn/testing/registry.py``) checks on each example:

* ``check_contract``, in float64: first the public ``tr.testing.check_function`` (the
  checker users run on their own ops: outputs stay float64, every gradient has its input's
  shape and dtype, a zero upstream gradient gives exactly zero gradients, the inputs and the
  upstream gradients are never mutated, repeated runs agree, and a directional gradient
  check); then what the built-in ops promise beyond it: the constants are never mutated;
  ``.grad`` never shares memory with an upstream gradient, an input or another ``.grad``;
  the VJP is linear, vjp(a g1 + b g2) = a vjp(g1) + b vjp(g2) to 1e-12 relative; and two
  backward passes are bitwise equal.
* ``check_float32``: run in float32, outputs and gradients are float32 and agree with the
  float64 run to about 1e-4 relative (float32 is never gradchecked, see gradcheck.py).
* ``check_layouts``: transposed, strided and reversed views of the inputs (and of the
  upstream gradients) give the same outputs and gradients as contiguous arrays.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.testing import check_function
from tinygrad_rnn.testing.registry import (
    BY_NAME, REGISTRY, Case, OpInfo, cast_case, gradient_fn, random_upstream, run_forward,
    run_vjp,
)

SEEDS = st.integers(0, 2**32 - 1)
LINEARITY_RTOL = 1e-12
# below the smallest normal float64 (2.2e-308) results are rounded to multiples of 5e-324:
# differences under this floor are that rounding, not a nonlinear VJP
SUBNORMAL_FLOOR = 1e-300
# linearity coefficients: 0 or magnitudes in [0.1, 2] (tiny coefficients only test how
# subnormal numbers round)
COEFFICIENTS = st.just(0.0) | st.floats(0.1, 2.0) | st.floats(-2.0, -0.1)
FLOAT32_RTOL = 1e-4
# float32 errors are measured relative to max(1, max|float64 result|): an O(1) computation
# whose exact result cancels to 0 still carries float32 round-off (1 - 0.9 - 0.1 is 2.8e-9
# in float32: cross entropy with one class and label smoothing), and float32 flushes
# magnitudes below 1e-38 (and constants like 1e-200) to 0
FLOAT32_FLOOR = 1.0
LAYOUT_RTOL = 1e-12  # a different memory layout may change the summation order (rounding)


def _max_abs(arrays: Any) -> float:
    values = [float(np.max(np.abs(a))) for a in arrays if np.size(a)]
    return max(values, default=0.0)


def _assert_close(actual: Any, expected: Any, rtol: float, what: str,
                  floor: float = 1e-300) -> None:
    """Elementwise |actual - expected| <= rtol * (|expected| + max(max|expected|, floor)):
    relative to the array's scale, so entries that cancel to near 0 are judged on that
    scale; ``floor`` treats arrays whose entries are all below it as 0."""
    assert np.shape(actual) == np.shape(expected), (what, np.shape(actual), np.shape(expected))
    actual64 = np.asarray(actual, dtype=np.float64)
    expected64 = np.asarray(expected, dtype=np.float64)
    atol = rtol * max(_max_abs([expected64[np.isfinite(expected64)]]), floor)
    np.testing.assert_allclose(actual64, expected64, rtol=rtol, atol=atol, err_msg=what)


# ------------------------------------------------------------------------------ float64
def check_contract(op: OpInfo, case: Case, seed: int, alpha: float, beta: float) -> None:
    # the public contract check, as users run it on their own ops (its gradient check is
    # full for small inputs, so an empty input whose output is NaN, as the mean over
    # nothing, compares no entry; one direction otherwise: test_ops_gradients.py does the
    # full float64 checks). gradient_fn holds the elements whose gradient an op defines to
    # be 0 (embedding's padding_idx rows) constant.
    leaves = [tr.Tensor(a, requires_grad=True) for a in case.inputs]
    check_function(gradient_fn(op, case), *leaves, max_full_size=8, n_directions=1,
                   seed=seed)

    rng = np.random.default_rng(seed)
    consts_before = copy.deepcopy(case.consts)
    g1 = random_upstream(op, case, seed)
    g2 = [np.array(rng.standard_normal(g.shape), dtype=g.dtype) for g in g1]

    # no aliasing between gradients, upstream gradients and inputs
    leaves, outputs = run_forward(op, case)
    for k, (out, g) in enumerate(zip(outputs, g1)):
        out.backward(g, retain_graph=k < len(outputs) - 1)
    grads = [leaf.grad for leaf in leaves]
    for k, (leaf, grad) in enumerate(zip(leaves, grads)):
        assert grad is not None, f"{op.name}: input {k} received no gradient"
        others = list(g1) + [x.array for x in leaves] + grads[:k] + grads[k + 1:]
        for other in others:
            assert not np.shares_memory(grad, other), f"{op.name}: .grad {k} is aliased"

    # the constants (masks, targets, indices, class weights) are never written to
    for key, value in consts_before.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(case.consts[key], value, err_msg=key)

    # determinism: a second graph and backward pass give bitwise the same results
    outs_a, grads_a = run_vjp(op, case, g1)
    outs_b, grads_b = run_vjp(op, case, g1)
    for a, b in zip(outs_a + grads_a, outs_b + grads_b):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(grads_a, grads):
        np.testing.assert_array_equal(a, b)

    # linearity of the VJP in the upstream gradient. The scale includes the upstream
    # gradients: where a VJP sums terms that cancel (a broadcast input, a softmax row) its
    # round-off is relative to the terms (~ |J| |g|, and |J| <= 27 * 12 here), not to the
    # small sum
    mixed = [np.asarray(alpha * a + beta * b) for a, b in zip(g1, g2)]
    _, grads_mixed = run_vjp(op, case, mixed)
    _, grads_2 = run_vjp(op, case, g2)
    upstream_scale = abs(alpha) * _max_abs(g1) + abs(beta) * _max_abs(g2)
    for k, (gm, ga, gb) in enumerate(zip(grads_mixed, grads_a, grads_2)):
        expected = alpha * ga + beta * gb
        scale = abs(alpha) * _max_abs([ga]) + abs(beta) * _max_abs([gb]) + upstream_scale
        err = _max_abs([gm - expected])
        assert err <= LINEARITY_RTOL * scale + SUBNORMAL_FLOOR, (op.name, k, err, scale)


# ------------------------------------------------------------------------------ float32
def check_float32(op: OpInfo, case: Case, seed: int) -> None:
    case32 = cast_case(case, np.float32)
    g32 = random_upstream(op, case32, seed)
    outs32, grads32 = run_vjp(op, case32, g32)
    # the float64 reference sees the same inputs and upstream gradients, widened exactly
    case64 = cast_case(case32, np.float64)
    g64 = [g.astype(np.float64) for g in g32]
    outs64, grads64 = run_vjp(op, case64, g64)
    for k, (o32, o64) in enumerate(zip(outs32, outs64)):
        assert o32.dtype == np.float32, (op.name, k, o32.dtype)
        _assert_close(o32, o64, FLOAT32_RTOL, f"{op.name}: output {k}", FLOAT32_FLOOR)
    for k, (x, d32, d64) in enumerate(zip(case32.inputs, grads32, grads64)):
        assert d32.dtype == np.float32 and d32.shape == x.shape, (op.name, k, d32.dtype)
        _assert_close(d32, d64, FLOAT32_RTOL, f"{op.name}: gradient {k}", FLOAT32_FLOOR)


# ------------------------------------------------------------------------------ layouts
def relayout(array: np.ndarray, how: str) -> np.ndarray:
    """A view with the same values that is not C-contiguous (when it has more than one
    element): 'transposed' (Fortran order; falls back to 'strided' where that is also C
    order), 'strided' (every other element of a larger buffer) or 'reversed' (negative
    strides)."""
    if how == "transposed":
        view = np.asfortranarray(array)
        if view.flags.c_contiguous:
            return relayout(array, "strided")
    elif how == "strided":
        buffer = np.zeros(array.shape + (2,), dtype=array.dtype)
        buffer[..., 0] = array
        view = buffer[..., 0]
    else:
        view = np.flip(np.flip(array).copy())
    np.testing.assert_array_equal(view, array)
    assert array.size <= 1 or not view.flags.c_contiguous, (how, array.shape)
    return view


def check_layouts(op: OpInfo, case: Case, seed: int, hows: list) -> None:
    upstream = random_upstream(op, case, seed)
    outs, grads = run_vjp(op, case, upstream)
    views = [relayout(a, hows[k % len(hows)]) for k, a in enumerate(case.inputs)]
    g_views = [relayout(g, hows[0]) for g in upstream]
    outs_v, grads_v = run_vjp(op, case, g_views, layouts=views)
    for k, (a, b) in enumerate(zip(outs_v, outs)):
        _assert_close(a, b, LAYOUT_RTOL, f"{op.name}: output {k}")
    for k, (a, b) in enumerate(zip(grads_v, grads)):
        _assert_close(a, b, LAYOUT_RTOL, f"{op.name}: gradient {k}")


LAYOUTS = st.sampled_from(["transposed", "strided", "reversed"])


def _make_test(op: OpInfo) -> Any:
    def test(case: Case, seed: int, alpha: float, beta: float, hows: list) -> None:
        check_contract(op, case, seed, alpha, beta)
        check_float32(op, case, seed)
        check_layouts(op, case, seed, hows)

    test.__name__ = test.__qualname__ = f"test_contract_{op.name}"
    test.__doc__ = (f"Backward contract of {op.name}: float64, float32 against float64, "
                    f"non-contiguous layouts.")
    for case in op.examples:
        test = example(case=case, seed=0, alpha=1.5, beta=-0.5, hows=["strided"])(test)
    hows = st.lists(LAYOUTS, min_size=1, max_size=3)
    return given(case=op.cases, seed=SEEDS, alpha=COEFFICIENTS, beta=COEFFICIENTS,
                 hows=hows)(test)


# one hypothesis test per op runs all three checks on each example: generating the
# examples costs more than checking them
for _op in REGISTRY:
    globals()[f"test_contract_{_op.name}"] = _make_test(_op)
del _op


# ------------------------------------------------------------------------------ float32 cast
@given(case=BY_NAME["clone"].cases, seed=SEEDS)
def test_cast_to_float32_vjp(case: Case, seed: int) -> None:
    """Cast float64 -> float32: the output is the rounded input, and the VJP is the
    upstream gradient widened back to float64 exactly (a cast is the identity map)."""
    x = case.inputs[0]
    leaf = tr.Tensor(x, requires_grad=True)
    y = leaf.astype(np.float32)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y.array, x.astype(np.float32))
    g = np.array(np.random.default_rng(seed).standard_normal(y.shape), dtype=np.float32)
    g_before = g.copy()
    y.backward(g)
    assert leaf.grad.dtype == np.float64 and leaf.grad.shape == x.shape
    np.testing.assert_array_equal(leaf.grad, g.astype(np.float64))
    np.testing.assert_array_equal(g, g_before)
    assert not np.shares_memory(leaf.grad, g)
