"""Tests of tr.gradcheck itself: it passes correct gradients, catches broken ones with a
message that says where and by how much, refuses float32, and never touches the caller's
tensors. The numerical claims of docs/gradcheck.md are checked here too."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn.testing import arrays, tensors


def t64(a, requires_grad=True):
    return tr.Tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ----------------------------------------------------------------------------- broken ops
class MatMulBrokenAt(tr.Function):
    """C = A @ B with dL/dB wrong by +0.5 at one element: the check must find exactly it."""

    bad_element = (1, 2)

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_arrays
        db = a.T @ g
        db[MatMulBrokenAt.bad_element] += 0.5
        return g @ b.T, db


class TanhScaled(tr.Function):
    """tanh with its backward scaled by a class attribute (1.0 is correct)."""

    scale = 1.0

    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_arrays
        return g * (1 - y * y) * TanhScaled.scale


class TanhScaledBy2(TanhScaled):
    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_arrays
        return 2 * g * (1 - y * y)


class NaNGrad(tr.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * np.nan


def random64(rng, *shape):
    return t64(rng.standard_normal(shape))


# ----------------------------------------------------------------------------- passing
@given(tensors(min_value=-2, max_value=2))
def test_passes_on_tanh_sigmoid_exp(x):
    assert tr.gradcheck(lambda t: t.tanh(), x) is True
    assert tr.gradcheck(lambda t: t.sigmoid(), x) is True
    assert tr.gradcheck(lambda t: t.exp(), x) is True


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31))
def test_passes_on_matmul(n, k, m, seed):
    rng = np.random.default_rng(seed)
    assert tr.gradcheck(lambda a, b: a @ b, [random64(rng, n, k), random64(rng, k, m)])


@given(tensors(min_dims=1, max_dims=2, min_value=-3, max_value=3))
def test_passes_on_softmax_and_log_softmax(x):
    assert tr.gradcheck(lambda t: t.softmax(axis=-1), x)
    assert tr.gradcheck(lambda t: t.log_softmax(axis=-1), x)


def test_passes_on_broadcast_bias_add():
    rng = np.random.default_rng(0)
    x, b = random64(rng, 3, 4), random64(rng, 4)  # (N, H) + (H,)
    assert tr.gradcheck(lambda x, b: (x + b).tanh(), [x, b])


# ----------------------------------------------------------------------------- failing
def test_broken_backward_message_names_input_element_values_and_errors():
    rng = np.random.default_rng(1)
    a, b = random64(rng, 2, 3), random64(rng, 3, 4)
    with pytest.raises(tr.GradcheckError) as info:
        tr.gradcheck(lambda a, b: MatMulBrokenAt.apply(a, b), [a, b])
    report = info.value.report
    assert isinstance(info.value, AssertionError)
    assert report.passed is False and report.mode == "full"
    assert report.input_index == 1 and report.element == MatMulBrokenAt.bad_element
    # the true dC/dB entry is a column of A; the analytic one is off by exactly 0.5
    assert report.analytic - report.numeric == pytest.approx(0.5, abs=1e-8)
    # dC[i, m] / dB[j, l] = A[i, j] when m == l, else 0
    i, m = report.output_element
    j, col = MatMulBrokenAt.bad_element
    expected = a.array[i, j] if m == col else 0.0
    assert report.output_index == 0 and report.numeric == pytest.approx(expected, abs=1e-8)
    msg = str(info.value)
    assert "input 1, element (1, 2)" in msg and f"output 0 element {(i, m)}" in msg
    assert f"analytic {report.analytic:.10g}" in msg and f"numeric {report.numeric:.10g}" in msg
    assert "abs error 0.5" in msg
    expected_rel = 0.5 / abs(expected) if expected else np.inf
    assert report.rel_error == pytest.approx(expected_rel, rel=1e-6)
    rel = re.search(r"rel error (\S+) \(", msg)
    assert rel is not None and float(rel.group(1)) == pytest.approx(expected_rel, rel=1e-2)


def test_tolerance_rule_is_atol_plus_rtol_times_numeric():
    x = t64([0.3, -0.8, 1.2])
    TanhScaled.scale = 1 + 1e-4  # relative error 1e-4 in every entry
    try:
        fn = lambda t: TanhScaled.apply(t)  # noqa: E731
        assert tr.gradcheck(fn, x, atol=0.0, rtol=1e-3)
        report = tr.gradcheck(fn, x, atol=0.0, rtol=1e-5, raise_exception=False)
        assert not report.passed
        assert report.max_rel_error == pytest.approx(1e-4, rel=1e-3)
    finally:
        TanhScaled.scale = 1.0


def test_nan_gradient_never_passes():
    with pytest.raises(tr.GradcheckError):
        tr.gradcheck(lambda t: NaNGrad.apply(t), t64([0.5, 1.0]))


def test_lost_gradient_is_caught():
    # detach() cuts the graph: the analytic gradient is 0, the numeric one is not
    x = t64([0.5, -0.25])
    with pytest.raises(tr.GradcheckError):
        tr.gradcheck(lambda t: t.detach().tanh() + t, x)


# ----------------------------------------------------------------------------- float32
def test_float32_input_refused_with_explanation():
    x = tr.Tensor(np.array([0.1, 0.2], dtype=np.float32), requires_grad=True)
    with pytest.raises(TypeError) as info:
        tr.gradcheck(lambda t: t.tanh(), x)
    msg = str(info.value)
    assert "float32" in msg and "float64" in msg and "round-off" in msg
    assert ".double()" in msg


def test_float16_refusal_names_float16():
    """Regression: the refusal of a float16 input explained float32's numbers."""
    x = tr.Tensor(np.array([0.1, 0.2], dtype=np.float16), requires_grad=True)
    with pytest.raises(TypeError) as info:
        tr.gradcheck(lambda t: t.tanh(), x)
    msg = str(info.value)
    assert "dtype float16" in msg and "In float16 (unit round-off u = 0.00049)" in msg
    assert "float32" not in msg


def test_float32_output_refused():
    x = t64([0.1, 0.2])
    with pytest.raises(TypeError, match="output 0 has dtype float32"):
        tr.gradcheck(lambda t: t.float().tanh(), x)


def test_extended_precision_output_accepted():
    # regression: only outputs *less* precise than float64 are refused; a cast up to
    # longdouble (80-bit on x86-64, plain float64 elsewhere) loses nothing and is checkable
    x = t64([0.5, -1.0])
    assert tr.gradcheck(lambda t: (t.astype(np.longdouble) * 3).tanh(), x)
    with pytest.raises(tr.GradcheckError):
        tr.gradcheck(lambda t: TanhScaledBy2.apply(t).astype(np.longdouble), x)


def test_float32_central_differences_are_meaningless():
    # the numbers quoted in docs/gradcheck.md: in float32, eps=1e-6 gives errors of order
    # u/eps = 6e-2 relative; even the optimal eps ~ u^(1/3) leaves ~1e-5; float64 at 1e-6
    # is ~1e-10
    x = np.linspace(-1.0, 1.0, 41)

    def worst_rel_error(dtype, eps):
        xd = x.astype(dtype)
        e = dtype(eps)
        numeric = (np.exp(xd + e) - np.exp(xd - e)) / (2 * e)
        exact = np.exp(xd.astype(np.float64))
        return float(np.max(np.abs(numeric - exact) / exact))

    assert worst_rel_error(np.float32, 1e-6) > 1e-2
    assert 1e-6 < worst_rel_error(np.float32, 4e-3) < 1e-4
    assert worst_rel_error(np.float64, 1e-6) < 1e-9


# ----------------------------------------------------------------------------- error theory
def _fd_abs_error(eps):
    x = t64(np.linspace(-1.0, 1.0, 21))
    report = tr.gradcheck(lambda t: t.exp(), x, eps=eps, atol=np.inf, raise_exception=False)
    assert report.passed
    return report.max_abs_error


def test_truncation_error_is_second_order_in_eps():
    # d/dx exp at x: truncation error exp(x) eps^2 / 6, so 10x smaller eps -> 100x smaller
    e2, e3 = _fd_abs_error(1e-2), _fd_abs_error(1e-3)
    assert e2 == pytest.approx(np.exp(1.0) * 1e-4 / 6, rel=1e-2)
    assert 90 < e2 / e3 < 110


def test_roundoff_error_grows_as_eps_shrinks():
    # round-off ~ u |f| / eps: at eps = 1e-10 it dwarfs everything seen at eps = 1e-6
    assert _fd_abs_error(1e-10) > 100 * _fd_abs_error(1e-6)
    assert _fd_abs_error(1e-6) < 1e-9


# ----------------------------------------------------------------------------- directional
@given(st.integers(0, 2**31))
def test_directional_passes_correct_ops(seed):
    rng = np.random.default_rng(seed)
    w, h, x = random64(rng, 5, 5), random64(rng, 3, 5), random64(rng, 3, 4)
    u = random64(rng, 5, 4)
    fn = lambda w, u, h, x: (h @ w.T + x @ u.T).tanh()  # noqa: E731  an RNN step
    assert tr.gradcheck(fn, [w, u, h, x], mode="directional", seed=seed)


def test_directional_detects_broken_backward_and_names_the_input():
    rng = np.random.default_rng(2)
    a, b = random64(rng, 3, 4), random64(rng, 4, 5)
    with pytest.raises(tr.GradcheckError) as info:
        tr.gradcheck(lambda a, b: TanhScaledBy2.apply(a) @ b, [a, b], mode="directional")
    report = info.value.report
    assert report.mode == "directional" and report.input_index == 0
    assert 0 <= report.direction < 8
    assert "directional" in str(info.value) and "traced to input 0" in str(info.value)


def test_directional_cost_does_not_grow_with_input_size():
    calls = {"n": 0}

    def fn(t):
        calls["n"] += 1
        return (t * t).sum()

    counts = {}
    for size in (4, 400):
        calls["n"] = 0
        tr.gradcheck(fn, t64(np.linspace(-1, 1, size)), mode="directional", n_directions=3)
        counts[size] = calls["n"]
    assert counts[4] == counts[400] == 1 + 3 * 3  # output weights + (backward, +, -) each
    calls["n"] = 0
    tr.gradcheck(fn, t64(np.linspace(-1, 1, 4)), mode="full")
    assert calls["n"] == 1 + 2 * 4  # full: two evaluations per input element


def test_directional_with_single_direction_catches_single_wrong_entry():
    rng = np.random.default_rng(3)
    a, b = random64(rng, 2, 3), random64(rng, 3, 4)
    report = tr.gradcheck(lambda a, b: MatMulBrokenAt.apply(a, b), [a, b], mode="directional",
                          n_directions=1, raise_exception=False)
    assert not report.passed and report.input_index == 1


# ----------------------------------------------------------------------------- caller safety
@pytest.mark.parametrize("mode", ["full", "directional"])
@pytest.mark.parametrize("broken", [False, True])
def test_callers_tensors_and_grads_untouched(mode, broken):
    rng = np.random.default_rng(4)
    a, b = random64(rng, 2, 3), random64(rng, 3, 4)
    a.grad = np.full((2, 3), 7.0)
    grad_obj = a.grad
    a_before, b_before = a.array.copy(), b.array.copy()
    op = MatMulBrokenAt if broken else tr.ops.MatMul
    report = tr.gradcheck(lambda x, y: op.apply(x, y), [a, b], mode=mode,
                          raise_exception=False)
    assert report.passed is (not broken)
    assert np.array_equal(a.array, a_before) and np.array_equal(b.array, b_before)
    assert a.grad is grad_obj and np.all(a.grad == 7.0)
    assert b.grad is None
    assert a.requires_grad and b.requires_grad and a.is_leaf and b.is_leaf


@pytest.mark.parametrize("mode", ["full", "directional"])
@pytest.mark.parametrize("broken", [False, True])
def test_tensors_fn_captures_keep_their_grad(mode, broken):
    """Regression: every backward pass of the check wrote into the .grad of the parameters
    fn captures, so an optimizer step after a check used junk gradients. Also when the
    check fails and raises, and for a captured non-leaf that retains its gradient."""
    m = tr.nn.Linear(3, 2, dtype=np.float64, generator=0)
    m.bias.grad = np.full(2, 5.0)
    bias_grad = m.bias.grad
    scale = t64([0.5, 2.0])
    hidden = scale * 3.0                     # a non-leaf made outside fn, retaining its grad
    hidden.retain_grad()
    x = random64(np.random.default_rng(1), 4, 3)
    op = TanhScaledBy2 if broken else TanhScaled

    def fn(t):
        return op.apply(m(t)) * hidden

    if broken:
        with pytest.raises(tr.GradcheckError):
            tr.gradcheck(fn, x, mode=mode)
    else:
        assert tr.gradcheck(fn, x, mode=mode)
    assert m.weight.grad is None and scale.grad is None and hidden.grad is None
    assert m.bias.grad is bias_grad and np.all(bias_grad == 5.0)


def test_grads_preserved_walks_deep_graphs_without_recursion():
    """The graph walk of grads_preserved is iterative: a 10,000-op chain at the default
    recursion limit."""
    from tinygrad_rnn.gradcheck import graph_tensors, grads_preserved

    w = t64([1.0])
    y = t64([0.5])
    for _ in range(10_000):
        y = y * w
    assert len(graph_tensors([y])) == 2
    with grads_preserved([y]):
        y.sum().backward()
        assert w.grad is not None
    assert w.grad is None


# ----------------------------------------------------------------------------- outputs
def test_multiple_and_nested_outputs():
    rng = np.random.default_rng(5)
    a, b = random64(rng, 2, 3), random64(rng, 3, 2)
    assert tr.gradcheck(lambda a, b: (a @ b, (a.tanh(), None)), [a, b])
    with pytest.raises(tr.GradcheckError) as info:
        tr.gradcheck(lambda a, b: (a @ b, (TanhScaledBy2.apply(a), None)), [a, b])
    assert info.value.report.output_index == 1 and info.value.report.input_index == 0


def test_integer_outputs_are_skipped():
    x = t64([0.3, -0.2, 0.9])

    def fn(t):
        idx = tr.Tensor(np.argsort(t.array))  # an int64 output carries no gradient
        return t.tanh(), idx

    assert tr.gradcheck(fn, x)
    assert tr.gradcheck(fn, x, mode="directional")


def test_non_tensor_output_rejected():
    with pytest.raises(TypeError, match="must return a Tensor"):
        tr.gradcheck(lambda t: t.array, t64([1.0]))


# ----------------------------------------------------------------------------- inputs
def test_inputs_not_requiring_grad_are_passed_through():
    rng = np.random.default_rng(6)
    x = random64(rng, 2, 3)
    const_tensor = tr.Tensor(rng.standard_normal((2, 3)))  # no requires_grad
    const_array = rng.standard_normal(3)
    ids = tr.Tensor(np.array([2, 0]))  # int64
    seen = []

    def fn(x, c, arr, ids, scale, nothing):
        seen.append((c, arr, ids, scale, nothing))
        return (x * c + tr.Tensor(arr)).tanh()[tr.Tensor(np.arange(2)), ids] * scale

    assert tr.gradcheck(fn, [x, const_tensor, const_array, ids, 0.5, None])
    for c, arr, i, scale, nothing in seen:
        assert c is const_tensor and arr is const_array and i is ids
        assert scale == 0.5 and nothing is None


def test_single_tensor_input_need_not_be_wrapped():
    assert tr.gradcheck(lambda t: t * t, t64([1.5, -0.5]))


def test_no_input_requiring_grad_is_an_error():
    with pytest.raises(ValueError, match="no input requires a gradient"):
        tr.gradcheck(lambda t: t * 2, t64([1.0], requires_grad=False))


def test_bad_mode_and_eps_are_errors():
    with pytest.raises(ValueError, match="mode"):
        tr.gradcheck(lambda t: t, t64([1.0]), mode="sideways")
    with pytest.raises(ValueError, match="eps"):
        tr.gradcheck(lambda t: t, t64([1.0]), eps=0.0)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"atol": -1.0}, ValueError, "atol must be non-negative, got -1"),
    ({"rtol": -1e-3}, ValueError, "rtol must be non-negative, got -0.001"),
    ({"atol": np.nan}, ValueError, "atol must be non-negative, got nan"),
    ({"atol": "1e-5"}, TypeError, "atol must be a real number, got str"),
    ({"n_directions": 2.5, "mode": "directional"}, TypeError,
     "n_directions must be an integer, got float 2.5"),
    ({"n_directions": True, "mode": "directional"}, TypeError,
     "n_directions must be an integer, got bool"),
    ({"n_directions": 0, "mode": "directional"}, ValueError,
     "n_directions must be at least 1, got 0"),
])
def test_bad_tolerances_and_directions_are_errors(kwargs, error, message):
    """Regression: a negative atol was accepted and then failed every entry confusingly;
    n_directions=2.5 gave a bare TypeError from range()."""
    with pytest.raises(error, match=re.escape(f"gradcheck: {message}")):
        tr.gradcheck(lambda t: t * t, t64([1.0, 2.0]), **kwargs)
    assert tr.gradcheck(lambda t: t * t, t64([1.0, 2.0]), atol=0.0, rtol=1e-6)  # 0 is fine


# ----------------------------------------------------------------------------- reports
def test_raise_exception_false_returns_report():
    x = t64([0.2, -0.4, 0.6])
    ok = tr.gradcheck(lambda t: t.tanh(), x, raise_exception=False)
    assert isinstance(ok, tr.GradcheckReport) and ok.passed
    assert ok.entries == 9 and ok.max_abs_error < 1e-9 and ok.label == "input 0"
    bad = tr.gradcheck(lambda t: TanhScaledBy2.apply(t), x, raise_exception=False)
    assert isinstance(bad, tr.GradcheckReport) and not bad.passed
    assert bad.label == "input 0" and bad.analytic == pytest.approx(2 * bad.numeric, rel=1e-6)
    dbad = tr.gradcheck(lambda t: TanhScaledBy2.apply(t), x, mode="directional",
                        raise_exception=False)
    assert not dbad.passed and dbad.entries == 8


@given(arrays((3,), min_value=0.5, max_value=2.0))
def test_report_errors_are_consistent(a):
    report = tr.gradcheck(lambda t: t.log(), t64(a), raise_exception=False)
    assert report.passed
    assert report.max_abs_error >= report.abs_error
    assert report.max_abs_error <= 1e-5 + 1e-3 * np.max(1 / a)
