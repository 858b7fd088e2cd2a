"""Tests of tr.testing: each strategy produces what it promises, and each checker passes
correct ops (built-in and user-defined) and fails deliberately broken ones, naming the check
that failed."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import testing as tt
from tinygrad_rnn.testing import (
    CheckFailure, CheckOptions, arrays, broadcastable_shapes, check_function, check_jacobian,
    check_module, check_op, gradient_property, padded_sequences, recurrent_weights,
    shape_pairs, tensors, token_ids,
)


def t64(a, requires_grad=True):
    return tr.Tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


# ============================================================================= strategies
@given(arrays())
def test_arrays_defaults(a):
    assert isinstance(a, np.ndarray) and a.dtype == np.float64
    assert 1 <= a.ndim <= 3 and all(1 <= s <= 4 for s in a.shape)
    assert np.all(np.isfinite(a)) and np.all((a >= -1) & (a <= 1))


@given(arrays((2, 5), min_value=-3.0, max_value=0.5, min_magnitude=0.25))
def test_arrays_fixed_shape_bounds_and_margin(a):
    assert a.shape == (2, 5)
    assert np.all((a >= -3.0) & (a <= 0.5)) and np.all(np.abs(a) >= 0.25)


@given(arrays(min_dims=0, max_dims=2, min_side=0, max_side=3))
def test_arrays_dims_and_sides(a):
    assert 0 <= a.ndim <= 2 and all(0 <= s <= 3 for s in a.shape)


@given(arrays(3, dtype=np.float32, min_value=-0.1, max_value=0.3))
def test_arrays_float32_bounds_rounded_inward(a):
    assert a.dtype == np.float32 and a.shape == (3,)
    assert np.all((a.astype(np.float64) >= -0.1) & (a.astype(np.float64) <= 0.3))


def test_arrays_float32_bounds_never_exceeded_regression():
    # regression: float32(0.3) > 0.3, and under NEP 50 `float32(0.3) > 0.3` is False (the
    # Python float is rounded to float32 first), so the bound was not stepped inward
    top = find(arrays((1,), dtype=np.float32, min_value=-0.1, max_value=0.3),
               lambda a: a[0] > 0.29)
    bottom = find(arrays((1,), dtype=np.float32, min_value=-0.1, max_value=0.3),
                  lambda a: a[0] < -0.09)
    assert 0.29 < float(top[0]) <= 0.3 and -0.1 <= float(bottom[0]) < -0.09


@given(arrays((4,), dtype=np.int64, min_value=-2.5, max_value=7, min_magnitude=1))
def test_arrays_integer(a):
    assert a.dtype == np.int64 and np.all((a >= -2) & (a <= 7)) and np.all(a != 0)


@given(arrays((6,), unique=True, min_value=-1, max_value=1))
def test_arrays_unique(a):
    assert len(np.unique(a)) == 6


def test_arrays_invalid_bounds():
    with pytest.raises(ValueError):
        arrays(min_value=1.0, max_value=0.0).example()
    with pytest.raises(ValueError):
        arrays(min_value=-0.5, max_value=0.5, min_magnitude=1.0).example()


@given(tensors((3, 2), min_value=-2, max_value=2))
def test_tensors_are_float64_leaves_requiring_grad(x):
    assert isinstance(x, tr.Tensor) and x.requires_grad and x.is_leaf
    assert x.shape == (3, 2) and x.dtype == np.float64 and np.all(np.abs(x.array) <= 2)


@given(tensors(dtype=np.int64, min_value=0, max_value=5),
       tensors((2,), requires_grad=False))
def test_tensors_integer_and_constant(ids, c):
    assert ids.dtype == np.int64 and not ids.requires_grad
    assert not c.requires_grad and c.dtype == np.float64


@given(broadcastable_shapes(3))
def test_broadcastable_shapes_broadcast(s):
    assert len(s.input_shapes) == 3
    assert np.broadcast_shapes(*s.input_shapes) == s.result_shape
    assert all(len(shape) <= 3 and all(0 <= d <= 4 for d in shape) for shape in s.input_shapes)


def test_broadcastable_shapes_include_empty_sides():
    found = find(broadcastable_shapes(), lambda s: 0 in s.result_shape)
    assert 0 in found.result_shape


@given(shape_pairs(), st.data())
def test_shape_pairs_give_addable_arrays(pair, data):
    a_shape, b_shape = pair
    a = data.draw(arrays(a_shape))
    b = data.draw(arrays(b_shape))
    out = (tr.Tensor(a) + tr.Tensor(b)).array
    assert out.shape == np.broadcast_shapes(a_shape, b_shape)
    np.testing.assert_array_equal(out, a + b)


def _radius(w):
    return float(np.max(np.abs(np.linalg.eigvals(w))))


@given(recurrent_weights(st.integers(1, 6), st.integers(1, 4), spectral_radius=(0.5, 1.2)))
def test_recurrent_weights_orthogonal(w):
    h = w.weight_hh.shape[1]
    assert w.weight_hh.shape == (h, h) and w.weight_ih.shape[0] == h
    assert 1 <= w.weight_ih.shape[1] <= 4
    assert w.weight_hh.dtype == np.float64 and w.bias_ih.shape == w.bias_hh.shape == (h,)
    assert 0.5 <= w.spectral_radius <= 1.2
    assert _radius(w.weight_hh) == pytest.approx(w.spectral_radius, rel=1e-9)
    # orthogonal times r: every singular value is r (well-conditioned)
    sv = np.linalg.svd(w.weight_hh, compute_uv=False)
    np.testing.assert_allclose(sv, w.spectral_radius, rtol=1e-9)
    assert np.all(np.abs(w.bias_ih) <= 0.1) and np.all(np.abs(w.bias_hh) <= 0.1)


@given(recurrent_weights(3, 2, spectral_radius=(0.9, 1.1), num_gates=4, kind="rescaled",
                         bias=False))
def test_recurrent_weights_gated_rescaled(w):
    assert w.weight_hh.shape == (12, 3) and w.weight_ih.shape == (12, 2)
    assert w.bias_ih is None and w.bias_hh is None
    for g in range(4):
        block = w.weight_hh[3 * g:3 * (g + 1)]
        assert _radius(block) == pytest.approx(w.spectral_radius, rel=1e-9)
    assert 0.9 <= w.spectral_radius <= 1.1


@given(recurrent_weights(4, spectral_radius=0.7, dtype=np.float32))
def test_recurrent_weights_fixed_radius_float32(w):
    assert w.spectral_radius == 0.7 and w.weight_hh.dtype == np.float32
    assert w.weight_ih.shape == (4, 4)
    assert _radius(w.weight_hh.astype(np.float64)) == pytest.approx(0.7, rel=1e-5)


def test_recurrent_weights_invalid_arguments():
    with pytest.raises(ValueError):
        recurrent_weights(3, spectral_radius=(1.0, 0.5))
    with pytest.raises(ValueError):
        recurrent_weights(3, kind="fancy")


@given(padded_sequences(max_batch=4, max_time=6, input_size=st.integers(1, 3)))
def test_padded_sequences_time_major(batch):
    x, lengths, batch_first = batch
    t, n, d = x.shape
    assert not batch_first and 1 <= t <= 6 and 1 <= n <= 4 and 1 <= d <= 3
    assert lengths.shape == (n,) and lengths.dtype == np.int64
    assert np.all((lengths >= 0) & (lengths <= t))
    mask = batch.mask  # (T, N)
    assert mask.shape == (t, n) and np.array_equal(mask.sum(axis=0), lengths)
    assert np.all(np.abs(x[mask]) <= 1)
    if (~mask).any():  # junk uniform in [-1e6, 1e6]: far outside the data range
        assert np.max(np.abs(x[~mask])) > 1


@given(padded_sequences(max_batch=3, max_time=5, input_size=2, batch_first=True,
                        enforce_sorted=True, min_length=1, junk="nan"))
def test_padded_sequences_batch_first_sorted_nan(batch):
    x, lengths, batch_first = batch
    n, t, d = x.shape
    assert batch_first and d == 2 and np.all((lengths >= 1) & (lengths <= t))
    assert np.all(np.diff(lengths) <= 0)
    for i in range(n):
        assert np.all(np.isfinite(x[i, :lengths[i]]))
        assert np.all(np.isnan(x[i, lengths[i]:]))
    assert batch.mask.shape == (n, t)


def test_padded_sequences_include_empty_sequences():
    found = find(padded_sequences(), lambda b: np.any(b.lengths == 0))
    assert np.any(found.lengths == 0)


def test_padded_sequences_invalid_arguments():
    with pytest.raises(ValueError):
        padded_sequences(min_length=3, min_time=2)
    with pytest.raises(ValueError):
        padded_sequences(junk="zeros")


@given(token_ids(9, (3, 4)))
def test_token_ids_valid(ids):
    assert ids.shape == (3, 4) and ids.dtype == np.int64
    assert np.all((ids >= 0) & (ids < 9))


@given(token_ids(5, allow_invalid=True, max_dims=3))
def test_token_ids_allow_invalid_shapes(ids):
    assert 1 <= ids.ndim <= 3 and ids.dtype == np.int64


def test_token_ids_allow_invalid_can_produce_invalid_ids():
    found = find(token_ids(5, allow_invalid=True), lambda a: np.any((a < 0) | (a >= 5)))
    assert np.any((found < 0) | (found >= 5))


@given(token_ids(6, require_invalid=True))
def test_token_ids_require_invalid(ids):
    assert np.any((ids < 0) | (ids >= 6))


@given(token_ids(4, (5,)), st.data())
def test_token_ids_feed_an_embedding(ids, data):
    w = data.draw(tensors((4, 3)))
    out = tr.functional.embedding(tr.Tensor(ids), w)
    np.testing.assert_array_equal(out.array, w.array[ids])


def test_token_ids_invalid_range_is_clipped_to_the_dtype():
    """Regression: invalid ids beyond what int8 holds raised an OverflowError."""
    seen = set()

    @settings(max_examples=200, database=None)
    @given(token_ids(100, dtype=np.int8, allow_invalid=True))
    def draw(ids):
        assert ids.dtype == np.int8
        seen.update(ids.ravel().tolist())

    draw()
    assert min(seen) >= -102 and max(seen) <= 127
    assert min(seen) < 0 and max(seen) >= 100               # both invalid ranges drawn
    found = find(token_ids(250, dtype=np.uint8, require_invalid=True), lambda a: True)
    assert np.any((found >= 250) & (found <= 255))
    with pytest.raises(ValueError, match="no invalid id to draw"):
        token_ids(256, dtype=np.uint8, allow_invalid=True)
    with pytest.raises(ValueError, match="largest uint8 is 255"):
        token_ids(300, dtype=np.uint8)
    for bad in (2.0, True):
        with pytest.raises(TypeError, match="vocab_size must be an integer"):
            token_ids(bad)


# ============================================================================= test ops
class Tanh64(tr.Function):
    """A user-defined tanh, correct."""

    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        return grad_out * (1 - y * y)


class WrongFormula(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        return grad_out * (1 - y)  # should be 1 - y^2


class WrongShape(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        return (grad_out * (1 - y * y)).sum(axis=0)  # dropped an axis


class MutatesUpstream(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        grad_out *= 1 - y * y  # right values, but written into grad_out
        return grad_out


_noise = np.random.default_rng(12345)


class NonDeterministic(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        # relative noise 1e-9: far below gradcheck's tolerance, so only determinism sees it
        return grad_out * (1 - y * y) * (1 + 1e-9 * _noise.standard_normal(grad_out.shape))


class WrongDtype(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        return (grad_out * (1 - y * y)).astype(np.float32)


class NotLinear(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        return grad_out * (1 - y * y) + 1e-12  # nonzero gradient for a zero grad_out


class MutatesInput(tr.Function):
    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        x, y = ctx.saved_arrays
        x[...] = 0.0  # scribbles over its input
        return grad_out * (1 - y * y)


class DowncastsOutput(tr.Function):
    @staticmethod
    def forward(ctx, x):
        y = np.tanh(x).astype(np.float32)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        return (grad_out * (1 - y * y)).astype(np.float64)


class ScaledSoftsign(tr.Function):
    """A correct two-input user op with a keyword constant: y = a * x / (1 + |x|) * c."""

    @staticmethod
    def forward(ctx, x, a, c=1.0):
        s = 1 + np.abs(x)
        ctx.save_for_backward(x, a)
        ctx.c = c
        return a * x / s * c

    @staticmethod
    def backward(ctx, grad_out):
        x, a = ctx.saved_arrays
        s = 1 + np.abs(x)
        dx = grad_out * a * ctx.c / (s * s)
        da = grad_out * x / s * ctx.c  # broadcast shape; the engine reduces it
        return dx, da


class SplitHalvesOk(tr.Function):
    @staticmethod
    def forward(ctx, x):
        n = x.shape[-1] // 2
        ctx.n = n
        ctx.save_for_backward(x)
        return x[..., :n] * 2, np.sin(x[..., n:])

    @staticmethod
    def backward(ctx, g1, g2):
        (x,) = ctx.saved_arrays
        return np.concatenate([2 * g1, g2 * np.cos(x[..., ctx.n:])], axis=-1)


BROKEN = [
    (WrongFormula, "gradcheck"),
    (WrongShape, "gradient shape"),
    (MutatesUpstream, "upstream gradient not mutated"),
    (NonDeterministic, "deterministic"),
    (WrongDtype, "gradient dtype"),
    (NotLinear, "zero upstream gives zero gradient"),
    (MutatesInput, "inputs not mutated"),
    (DowncastsOutput, "output dtype"),
]


class StandIn:
    """A tiny module-like object: only named_parameters() and __call__, no tr.nn needed.
    Computes op(op(x) @ W^T + b) with a pluggable op, so a broken op acts both on the
    module's input and on a value that depends on the parameters."""

    def __init__(self, op=Tanh64, dtype=np.float32, seed=0):
        rng = np.random.default_rng(seed)
        self.op = op
        self.weight = tr.Tensor((0.5 * rng.standard_normal((3, 4))).astype(dtype),
                                requires_grad=True)
        self.bias = tr.Tensor((0.1 * rng.standard_normal(3)).astype(dtype), requires_grad=True)

    def named_parameters(self):
        return [("weight", self.weight), ("bias", self.bias)]

    def __call__(self, x):
        return self.op.apply(self.op.apply(x) @ self.weight.T + self.bias)


def _x(seed=0, shape=(2, 3)):
    rng = np.random.default_rng(seed)
    return t64(rng.uniform(-1.5, 1.5, shape))


def _module_input(seed=0):
    return _x(seed, (2, 4))


# ============================================================================= passing
@given(tensors(min_value=-2, max_value=2, max_side=3))
def test_check_function_passes_builtin_tanh(x):
    report = check_function(lambda t: t.tanh(), x)
    assert report.passed and report.gradcheck.passed and report.gradcheck.mode == "full"
    names = {r.name for r in report.results}
    for name in ("gradient shape", "gradient dtype", "upstream gradient not mutated",
                 "zero upstream gives zero gradient", "deterministic", "inputs not mutated"):
        assert name in names


@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**31))
def test_check_function_and_check_op_pass_builtin_matmul(n, k, m, seed):
    rng = np.random.default_rng(seed)
    a, b = t64(rng.standard_normal((n, k))), t64(rng.standard_normal((k, m)))
    assert check_function(lambda x, y: x @ y, a, b).passed
    assert check_op(tr.ops.MatMul, a, b).passed


@given(tensors((2, 3), min_value=-2, max_value=2))
def test_check_op_passes_builtin_tanh_softmax_and_user_tanh(x):
    assert check_op(tr.ops.Tanh, x).passed
    assert check_op(tr.ops.Softmax, x, axis=-1, mask=None).passed
    assert check_op(Tanh64, x).passed
    assert check_function(lambda t: Tanh64.apply(t), x).passed


def test_user_op_with_broadcast_gradient_and_constant():
    x = _x(1, (3, 4))
    a = t64(np.array([0.5, -1.0, 2.0, 0.3]))  # (4,) broadcast against (3, 4)
    report = check_op(ScaledSoftsign, x, a, c=1.5)
    assert report.passed
    assert check_function(lambda x, a: ScaledSoftsign.apply(x, a, c=1.5), x, a).passed


def test_user_op_with_two_outputs():
    x = _x(2, (2, 4))
    assert check_op(SplitHalvesOk, x).passed
    assert check_function(lambda t: SplitHalvesOk.apply(t), x).passed


def test_check_op_builtins_with_constants_scalars_and_two_outputs():
    rng = np.random.default_rng(9)
    w = t64(rng.standard_normal((5, 3)))
    assert check_op(tr.ops.Embedding, w, ids=np.array([[1, 1], [4, 0]])).passed
    assert check_op(tr.ops.Mul, w, 2.5).passed  # a Python scalar input, as apply takes it
    report = check_op(tr.ops.Split, w, sizes=[1, 2], axis=1)
    assert report.passed and report.gradcheck.entries == 15 * 15


def test_check_function_with_constant_inputs():
    w = t64(np.random.default_rng(3).standard_normal((5, 3)))
    ids = tr.Tensor(np.array([[0, 4], [2, 2]]))  # int64 constant
    report = check_function(lambda ids, w: tr.functional.embedding(ids, w).tanh(), ids, w)
    assert report.passed


def test_check_function_large_input_uses_directional():
    x = t64(np.random.default_rng(4).uniform(-1, 1, (10, 10)))
    report = check_function(lambda t: (t @ t).tanh(), x)
    assert report.passed and report.gradcheck.mode == "directional"
    assert report.gradcheck.entries == 8


def test_check_module_passes_and_leaves_original_untouched():
    m = StandIn()
    m.weight.grad = np.ones((3, 4), dtype=np.float32)
    grad_obj, w_before, b_before = m.weight.grad, m.weight.array.copy(), m.bias.array.copy()
    x = _module_input()
    report = check_module(m, x)
    assert report.passed
    labels = {report.gradcheck.label}
    assert labels <= {"input 0", "parameter 'weight'", "parameter 'bias'"}
    assert m.weight.dtype == np.float32 and m.bias.dtype == np.float32
    assert np.array_equal(m.weight.array, w_before) and np.array_equal(m.bias.array, b_before)
    assert m.weight.grad is grad_obj and np.all(grad_obj == 1) and m.bias.grad is None
    assert x.grad is None


def test_check_module_checks_parameters_when_inputs_are_constant():
    m = StandIn(dtype=np.float64)
    assert check_module(m, _x(5, (2, 4)).detach()).passed


# ============================================================================= failing
@pytest.mark.parametrize("op, check_name", BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_check_function_fails_broken(op, check_name):
    with pytest.raises(CheckFailure) as info:
        check_function(lambda t: op.apply(t), _x())
    assert isinstance(info.value, AssertionError)
    failed = [r.name for r in info.value.report.failures]
    assert any(name.startswith(check_name) for name in failed), failed
    assert check_name in str(info.value)


@pytest.mark.parametrize("op, check_name", BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_check_op_fails_broken(op, check_name):
    with pytest.raises(CheckFailure) as info:
        check_op(op, _x())
    failed = [r.name for r in info.value.report.failures]
    assert any(name.startswith(check_name) for name in failed), failed


@pytest.mark.parametrize("op, check_name", BROKEN, ids=[b[0].__name__ for b in BROKEN])
def test_check_module_fails_broken(op, check_name):
    m = StandIn(op=op)
    with pytest.raises(CheckFailure) as info:
        check_module(m, _module_input())
    failed = [r.name for r in info.value.report.failures]
    assert any(name.startswith(check_name) for name in failed), failed
    assert m.weight.dtype == np.float32  # the original is still untouched


def test_failure_message_lists_failed_checks_and_report():
    with pytest.raises(CheckFailure) as info:
        check_op(WrongFormula, _x())
    msg = str(info.value)
    assert "check_op(WrongFormula) failed 1 of" in msg
    assert "gradcheck (full): wrong gradient at input 0, element" in msg
    assert "[ok  ] gradient shape" in msg


def test_raise_exception_false_returns_report():
    report = check_function(lambda t: WrongFormula.apply(t), _x(), raise_exception=False)
    assert not report.passed and [r.name for r in report.failures] == ["gradcheck (full)"]
    assert report.gradcheck is not None and not report.gradcheck.passed
    assert report["deterministic"].passed
    report = check_op(MutatesUpstream, _x(), options=CheckOptions(raise_exception=False))
    assert not report["upstream gradient not mutated"].passed


def test_mutating_upstream_inside_a_graph_is_caught():
    # below a sum, grad_out is a read-only broadcast view: the write raises
    report = check_function(lambda t: MutatesUpstream.apply(t).sum(), _x(),
                            raise_exception=False)
    assert not report["upstream gradient not mutated"].passed


def test_nondeterministic_forward_is_caught():
    rng = np.random.default_rng(0)
    report = check_function(lambda t: t * rng.standard_normal(), _x(), raise_exception=False)
    assert not report["deterministic"].passed
    assert "differs between the identical forward calls 1 and 3" in \
        report["deterministic"].detail


def test_directional_mode_catches_broken_backward():
    x = _x(6, (12, 12))
    report = check_function(lambda t: WrongFormula.apply(t), x, raise_exception=False)
    assert report.gradcheck.mode == "directional"
    assert not report.passed and report.failures[0].name == "gradcheck (directional)"
    assert "traced to input 0" in report.failures[0].detail


def test_check_module_names_the_broken_parameter():
    class BadBiasAdd(tr.Function):
        @staticmethod
        def forward(ctx, z, b):
            return z + b

        @staticmethod
        def backward(ctx, grad_out):
            return grad_out, 2 * grad_out  # the bias gradient is doubled

    class BadBias(StandIn):
        def __call__(self, x):
            return BadBiasAdd.apply(x @ self.weight.T, self.bias).tanh()

    report = check_module(BadBias(), _module_input(), raise_exception=False)
    assert not report.passed and report.gradcheck.label == "parameter 'bias'"
    assert "parameter 'bias'" in report.failures[0].detail


def test_check_module_without_deepcopy():
    class NoCopy(StandIn):
        def __deepcopy__(self, memo):
            raise RuntimeError("cannot copy")

    m = NoCopy(dtype=np.float64)
    m.bias.grad = np.full(3, 5.0)
    w_before = m.weight.array.copy()
    assert check_module(m, _module_input()).passed
    assert np.array_equal(m.weight.array, w_before) and m.weight.grad is None
    assert np.all(m.bias.grad == 5.0)
    with pytest.raises(TypeError, match="float64"):
        check_module(NoCopy(dtype=np.float32), _module_input())


def test_check_module_with_shared_parameters_counts_them_once():
    class Tied(StandIn):
        def named_parameters(self):
            return [("weight", self.weight), ("bias", self.bias), ("tied", self.weight)]

    report = check_module(Tied(), _module_input())
    assert report.passed
    # full Jacobian: (x: 8 + weight: 12 + bias: 3) input elements x 6 output elements
    assert report.gradcheck.entries == (8 + 12 + 3) * 6


def test_check_module_detects_a_copy_that_shares_parameters():
    # named_parameters bound to the original object: a deep copy would report the
    # original's tensors, so converting them would modify the caller's module
    m = StandIn(dtype=np.float32)
    m.named_parameters = lambda: [("weight", m.weight), ("bias", m.bias)]
    with pytest.raises(TypeError, match="float64"):
        check_module(m, _module_input())
    assert m.weight.dtype == np.float32
    m64 = StandIn(dtype=np.float64)
    m64.named_parameters = lambda: [("weight", m64.weight), ("bias", m64.bias)]
    before = m64.weight.array.copy()
    assert check_module(m64, _module_input()).passed
    assert np.array_equal(m64.weight.array, before) and m64.weight.grad is None


# ============================================================================= caller's tensors
@pytest.mark.parametrize("mode", ["full", "directional"])
def test_check_function_leaves_captured_parameters_grad_alone(mode):
    """Regression: the check's many backward passes left junk in the .grad of every
    parameter fn captures; an optimizer step after a check used it."""
    m = tr.nn.Linear(3, 2, dtype=np.float64, generator=0)
    m.bias.grad = np.full(2, 5.0)
    bias_grad = m.bias.grad
    report = check_function(lambda t: m(t).tanh(), _x(), mode=mode)
    assert report.passed
    assert m.weight.grad is None and m.bias.grad is bias_grad and np.all(bias_grad == 5.0)
    # also when the check fails
    report = check_function(lambda t: WrongFormula.apply(m(t)), _x(), mode=mode,
                            raise_exception=False)
    assert not report.passed and m.weight.grad is None and m.bias.grad is bias_grad


def test_check_module_leaves_tensors_outside_its_parameters_alone():
    """A module checked in place (no deep copy) that also uses a tensor it does not list in
    named_parameters: that tensor's .grad is left as it was."""
    class NoCopyWithScale(StandIn):
        def __init__(self):
            super().__init__(dtype=np.float64)
            self.scale = t64([1.5, 0.5, 2.0])                  # not listed as a parameter

        def __deepcopy__(self, memo):
            raise RuntimeError("cannot copy")

        def __call__(self, x):
            return super().__call__(x) * self.scale

    m = NoCopyWithScale()
    assert check_module(m, _module_input()).passed
    assert m.scale.grad is None and m.weight.grad is None and m.bias.grad is None


def test_check_function_blames_a_forward_mutation_on_forward_only():
    """Regression: a write made during forward was reported for backward too."""
    def fn(t, c):
        c += 1.0                                               # forward writes the constant
        return t * tr.Tensor(c.copy())

    c = np.ones((2, 3))
    report = check_function(fn, _x(), c, raise_exception=False)
    assert report["inputs not mutated"].detail == "input 1 was modified in place during forward"
    assert np.all(c == 1.0)                                    # the caller's array: a copy ran


class MaskWriter(tr.Function):
    """x * mask whose backward writes into the keyword constant ``mask``."""

    @staticmethod
    def forward(ctx, x, mask=None):
        ctx.mask = mask
        return x * mask

    @staticmethod
    def backward(ctx, grad_out):
        out = grad_out * ctx.mask
        ctx.mask += 1.0
        return out


def test_check_op_copies_and_watches_keyword_array_constants():
    """Regression: keyword array constants (masks) were neither copied nor checked: a
    backward that wrote into mask= changed the caller's array, and the failure was blamed
    on randomness."""
    mask = np.ones((2, 3))
    report = check_op(MaskWriter, _x(), options=CheckOptions(raise_exception=False), mask=mask)
    assert np.all(mask == 1.0)
    assert report["inputs not mutated"].detail == \
        "keyword constant 'mask' was modified in place during backward"
    assert report["deterministic"].passed
    assert report["caller's objects untouched"].passed
    # a correct op with a mask passes
    assert check_op(tr.ops.Softmax, _x(), axis=-1, mask=np.array([True, False, True])).passed


class CountingOp(tr.Function):
    """2x whose backward is off by 1% on every ``period``-th call (a result that depends on
    how many calls came before)."""

    calls = 0
    period = 2

    @staticmethod
    def forward(ctx, x):
        CountingOp.calls += 1
        ctx.wrong = CountingOp.calls % CountingOp.period == 1
        return 2 * x

    @staticmethod
    def backward(ctx, grad_out):
        return 2 * grad_out * (1.01 if ctx.wrong else 1.0)


@pytest.mark.parametrize("period", [2, 3])
def test_check_op_catches_a_backward_that_depends_on_call_order(period, monkeypatch):
    """Regression: the determinism check compared calls 1 and 3 only, so a backward wrong on
    every other call passed every check."""
    monkeypatch.setattr(CountingOp, "calls", 0)
    monkeypatch.setattr(CountingOp, "period", period)
    report = check_op(CountingOp, _x(), options=CheckOptions(raise_exception=False))
    assert not report.passed and not report["deterministic"].passed
    assert "differs between the identical backward calls" in report["deterministic"].detail


class ForwardCountingOp(tr.Function):
    """2x whose forward is off by 1% on calls 2, 2 + period, 2 + 2 * period, ...: call 2 is
    the zero-upstream call, and for a period of 3 or more calls 1, 3 and 4 all agree."""

    calls = 0
    period = 2

    @staticmethod
    def forward(ctx, x):
        ForwardCountingOp.calls += 1
        wrong = ForwardCountingOp.calls % ForwardCountingOp.period == 2 % ForwardCountingOp.period
        return 2 * x * (1.01 if wrong else 1.0)

    @staticmethod
    def backward(ctx, grad_out):
        return 2 * grad_out


@pytest.mark.parametrize("period", [2, 3, 4])
def test_check_op_catches_a_forward_that_depends_on_call_order(period, monkeypatch):
    """Regression: the outputs of the zero-upstream call 2 were never compared, so a forward
    wrong on calls 2, 5, 8, ... (period 3) passed the determinism check."""
    monkeypatch.setattr(ForwardCountingOp, "calls", 0)
    monkeypatch.setattr(ForwardCountingOp, "period", period)
    report = check_op(ForwardCountingOp, _x(), options=CheckOptions(raise_exception=False))
    assert not report["deterministic"].passed
    assert "output 0 differs between the forward calls 1 and 2, which have the same " \
        "inputs" in report["deterministic"].detail


@pytest.mark.parametrize("period", [2, 3])
def test_check_function_catches_a_forward_that_depends_on_call_order(period):
    calls = [0]

    def fn(x):
        calls[0] += 1
        return x * (3.0 if calls[0] % period == 2 % period else 2.0)

    report = tt.check_function(fn, _x(), raise_exception=False)
    assert not report["deterministic"].passed
    assert "output 0 differs between the forward calls 1 and 2" in \
        report["deterministic"].detail


def test_forward_of_the_zero_upstream_call_is_compared_only_with_determinism_on():
    """Code that is random on purpose turns the determinism check off; its zero-upstream
    call is then not compared either."""
    calls = [0]

    def fn(x):
        calls[0] += 1
        return x * (3.0 if calls[0] == 2 else 2.0)

    report = tt.check_function(fn, _x(), check_determinism=False, raise_exception=False)
    assert "deterministic" not in [r.name for r in report.results]
    assert report.passed, report


def test_check_options_refuse_bad_settings():
    for kwargs, message in (({"atol": -1.0}, "atol must be non-negative"),
                            ({"rtol": np.nan}, "rtol must be non-negative"),
                            ({"n_directions": 2.5}, "n_directions must be an integer"),
                            ({"max_full_size": -1}, "max_full_size must be a non-negative")):
        with pytest.raises((ValueError, TypeError), match=f"CheckOptions: {message}"):
            CheckOptions(**kwargs)


# ============================================================================= refusals
@pytest.mark.parametrize("checker", ["function", "op", "module_input"])
def test_checkers_refuse_float32(checker):
    x = tr.Tensor(np.ones((2, 4), np.float32), requires_grad=True)
    with pytest.raises(TypeError, match="float64"):
        if checker == "function":
            check_function(lambda t: t.tanh(), x)
        elif checker == "op":
            check_op(tr.ops.Tanh, x)
        else:
            check_module(StandIn(), x)


def test_checkers_need_something_to_differentiate():
    with pytest.raises(ValueError):
        check_function(lambda t: t.tanh(), t64([1.0], requires_grad=False))
    with pytest.raises(TypeError):
        check_op(lambda t: t, t64([1.0]))
    with pytest.raises(ValueError):
        CheckOptions(mode="quick")


# ============================================================================= jacobians
@given(arrays((2, 4), min_value=-2, max_value=2))
def test_check_jacobian_builtin_jacobians(x):
    assert check_jacobian(tr.ops.Tanh, tr.explicit_jacobians.tanh, x).passed
    assert check_jacobian(tr.ops.Sigmoid, tr.explicit_jacobians.sigmoid, x).passed
    assert check_jacobian(lambda t: t.softmax(axis=-1), tr.explicit_jacobians.softmax, x).passed
    assert check_jacobian(lambda t: t.log_softmax(axis=-1), tr.explicit_jacobians.log_softmax,
                          x).passed
    assert check_jacobian(Tanh64, tr.explicit_jacobians.tanh, x).passed  # a user-defined op


@pytest.mark.parametrize("op", [WrongFormula, WrongShape, WrongDtype])
def test_check_jacobian_fails_broken_backward(op):
    x = np.array([[0.4, -0.9, 1.3], [0.2, 0.6, -1.1]])
    with pytest.raises(CheckFailure) as info:
        check_jacobian(op, tr.explicit_jacobians.tanh, x)
    assert [r.name for r in info.value.report.failures] == ["backward(g) == J^T g"]


def test_check_jacobian_full_form_at_input():
    a = np.random.default_rng(7).standard_normal((3, 4))
    x = np.array([0.3, -0.2, 0.8, 0.1])
    report = check_jacobian(lambda t: (tr.Tensor(a) @ t).tanh(),
                            lambda x: (1 - np.tanh(a @ x) ** 2)[:, None] * a, x, at="input")
    assert report.passed and "full form (3, 4)" in report["jacobian shape"].detail


def test_check_jacobian_fails_wrong_jacobian():
    x = np.random.default_rng(8).standard_normal((2, 5))

    def transposed(y):  # log_softmax's Jacobian I - 1 p^T is not symmetric
        return np.swapaxes(tr.explicit_jacobians.log_softmax(y), -1, -2)

    with pytest.raises(CheckFailure) as info:
        check_jacobian(lambda t: t.log_softmax(axis=-1), transposed, x)
    failed = [r.name for r in info.value.report.failures]
    assert failed == ["backward(g) == J^T g", "J u == finite difference"]


def test_check_jacobian_catches_consistently_wrong_pair():
    # backward uses the same wrong Jacobian diag(1 - y) as jacobian_fn: only the
    # finite-difference comparison can tell
    x = np.array([[0.4, -0.9, 1.3]])
    report = check_jacobian(WrongFormula, lambda y: (1 - y)[..., :, None] * np.eye(3), x,
                            raise_exception=False)
    assert report["backward(g) == J^T g"].passed
    assert not report["J u == finite difference"].passed


class NaNAtColumn2(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_arrays
        out = grad_out * (1 - y * y)
        out[..., 2] = np.nan
        return out


class AllNaN(Tanh64):
    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * np.nan


def test_check_jacobian_reports_the_nan_element():
    """Regression: a partly-NaN backward was reported at a correct element, and an all-NaN
    one crashed with "All-NaN slice encountered" even with raise_exception=False."""
    x = np.random.default_rng(0).standard_normal((2, 4))
    report = check_jacobian(NaNAtColumn2, tr.explicit_jacobians.tanh, x, raise_exception=False,
                            check_numeric=False)
    assert "at element (0, 2): backward nan" in report["backward(g) == J^T g"].detail
    report = check_jacobian(AllNaN, tr.explicit_jacobians.tanh, x, raise_exception=False)
    assert "at element (0, 0): backward nan" in report["backward(g) == J^T g"].detail

    def nan_jacobian(y):
        jac = tr.explicit_jacobians.tanh(y)
        jac[1, 3, 3] = np.nan
        return jac

    report = check_jacobian(tr.ops.Tanh, nan_jacobian, x, raise_exception=False)
    assert "at element (1, 3)" in report["backward(g) == J^T g"].detail
    assert "output element (1, 3): J u nan" in report["J u == finite difference"].detail


def test_check_jacobian_leaves_captured_parameters_grad_alone():
    m = tr.nn.Linear(3, 3, dtype=np.float64, generator=0)
    x = np.random.default_rng(1).standard_normal((2, 3))
    assert check_jacobian(lambda t: m(t).tanh(),
                          lambda v: (1 - np.tanh(v @ m.weight.array.T + m.bias.array) ** 2)[
                              ..., :, None] * m.weight.array, x, at="input").passed
    assert m.weight.grad is None and m.bias.grad is None


def test_check_jacobian_wrong_shape():
    report = check_jacobian(tr.ops.Tanh, lambda y: np.eye(2), np.zeros((2, 3)),
                            raise_exception=False)
    assert not report.passed and not report["jacobian shape"].passed


def test_check_jacobian_refuses_float32():
    with pytest.raises(TypeError, match="float64"):
        check_jacobian(tr.ops.Tanh, tr.explicit_jacobians.tanh, np.zeros(3, np.float32))


# ============================================================================= given-style
@gradient_property(tensors((2, 3), min_value=-2, max_value=2),
                   tensors((3,), min_value=-1, max_value=1))
def test_gradient_property_user_op(x, a):
    return ScaledSoftsign.apply(x, a, c=0.5)


def test_gradient_property_fails_broken_op():
    @settings(max_examples=3, database=None)
    @gradient_property(tensors((2, 2), min_value=-1, max_value=1))
    def test_broken(x):
        return WrongFormula.apply(x)

    assert test_broken.__name__ == "test_broken"
    with pytest.raises(CheckFailure):
        test_broken()


def test_gradient_property_needs_strategies():
    with pytest.raises(TypeError):
        gradient_property()


def test_module_exports():
    assert tr.testing is tt
    for name in tt.__all__:
        assert hasattr(tt, name)


def test_importing_the_testing_package_needs_no_hypothesis():
    """The checkers, the registry and the stand-in need NumPy only (the CLI's gradcheck runs
    in a plain install); hypothesis is imported when a strategy is first used."""
    import subprocess
    import sys

    code = ("import sys, tinygrad_rnn.testing as t\n"
            "print('hypothesis' in sys.modules)\n"
            "t.tensors\n"
            "print('hypothesis' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "True"]


def test_both_sources_of_randomness_offer_every_choice_of_a_domain():
    """The registry's samplers are written once against Draw; the CLI runs them on
    NumpyDraw and the tests on HypothesisDraw, so each must implement every choice."""
    from tinygrad_rnn.testing.registry import REGISTRY, Draw, NumpyDraw
    from tinygrad_rnn.testing.strategies import HypothesisDraw

    choices = {name for name in vars(Draw) if not name.startswith("_")}
    assert {"integers", "side", "shape", "reals", "basic_index"} <= choices
    for source in (NumpyDraw, HypothesisDraw):
        missing = sorted(n for n in choices if getattr(source, n) is getattr(Draw, n))
        assert not missing, (source.__name__, missing)
    rng = np.random.default_rng(0)
    for op in REGISTRY:  # float64 arrays from NumPy draws too, 0-d ones included
        case = op.draw(rng)
        assert all(isinstance(a, np.ndarray) and a.dtype == np.float64 for a in case.inputs)
