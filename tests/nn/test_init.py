"""tr.nn.init: in-place initialisers. Exact properties where they exist (orthogonality,
spectral radius, slices), seeded statistical checks for distributions."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import nn
from tinygrad_rnn.nn import init


def param(*shape, dtype=np.float64) -> nn.Parameter:
    return nn.Parameter(np.zeros(shape, dtype=dtype))


# ------------------------------------------------------------------------- contract
@pytest.mark.parametrize("fn", [
    lambda t: init.uniform_(t, -1, 1, generator=0),
    lambda t: init.normal_(t, 0, 1, generator=0),
    lambda t: init.constant_(t, 0.5),
    init.zeros_, init.ones_, init.eye_,
    lambda t: init.xavier_uniform_(t, generator=0),
    lambda t: init.xavier_normal_(t, generator=0),
    lambda t: init.kaiming_uniform_(t, generator=0),
    lambda t: init.kaiming_normal_(t, generator=0),
    lambda t: init.orthogonal_(t, generator=0),
    lambda t: init.orthogonal_blocks_(t, 2, generator=0),
    lambda t: init.rnn_default_(t, 3, generator=0),
    lambda t: init.scale_to_spectral_radius_(init.normal_(t, generator=1), 0.9),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_in_place_keeps_identity_dtype_and_leaf(fn, dtype):
    p = param(4, 4, dtype=dtype)
    data_before = p.array
    version = p._version.value
    assert fn(p) is p  # works with grad mode on: written under no_grad
    assert p.array is data_before and p.dtype == dtype  # in place, same array
    assert p.is_leaf and p.requires_grad
    assert p._version.value > version
    assert np.all(np.isfinite(p.numpy()))


def test_works_on_plain_arrays_and_tensors():
    a = np.zeros((3, 2), dtype=np.float32)
    assert init.ones_(a) is a and np.all(a == 1)
    t = tr.Tensor(np.zeros(3))
    init.constant_(t, 2.5)
    np.testing.assert_array_equal(t.numpy(), [2.5, 2.5, 2.5])
    with pytest.raises(TypeError):
        init.zeros_([0.0, 1.0])


RANDOM_FILLS = {
    "uniform_": lambda t: init.uniform_(t, 0, 10, generator=0),
    "normal_": lambda t: init.normal_(t, generator=0),
    "xavier_uniform_": lambda t: init.xavier_uniform_(t, generator=0),
    "xavier_normal_": lambda t: init.xavier_normal_(t, generator=0),
    "kaiming_uniform_": lambda t: init.kaiming_uniform_(t, generator=0),
    "kaiming_normal_": lambda t: init.kaiming_normal_(t, generator=0),
    "orthogonal_": lambda t: init.orthogonal_(t, generator=0),
    "orthogonal_blocks_": lambda t: init.orthogonal_blocks_(t, 2, generator=0),
    "rnn_default_": lambda t: init.rnn_default_(t, 3, generator=0),
}


@pytest.mark.parametrize("name", sorted(RANDOM_FILLS))
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, bool])
@pytest.mark.parametrize("as_tensor", [False, True])
def test_random_fills_refuse_non_float_targets(name, dtype, as_tensor):
    """uniform_(np.zeros(4, np.int64), 0, 10) used to write truncated samples ([8 7 5 2]);
    normal_ mostly zeros. torch refuses integer targets of random fills too."""
    before = np.full((4, 4), 7, dtype=dtype)
    t = tr.Tensor(before.copy()) if as_tensor else before.copy()
    with pytest.raises(TypeError, match=f"{name}: random values need a floating-point tensor"
                       f", got dtype {np.dtype(dtype)}"):
        RANDOM_FILLS[name](t)
    np.testing.assert_array_equal(t.numpy() if as_tensor else t, before)  # nothing written


def test_deterministic_fills_into_integers_only_take_exact_values():
    a = np.full(3, 9, dtype=np.int64)
    init.constant_(a, 3)
    np.testing.assert_array_equal(a, [3, 3, 3])
    init.zeros_(a)
    np.testing.assert_array_equal(a, [0, 0, 0])
    e = init.eye_(np.zeros((2, 3), dtype=bool))
    np.testing.assert_array_equal(e, np.eye(2, 3, dtype=bool))
    for target, val, shown in [(np.zeros(3, np.int64), 2.5, "2.5"),
                               (np.zeros(3, np.int8), 300.0, "300.0"),
                               (np.zeros(3, np.int32), float("nan"), "nan"),
                               (np.zeros(3, bool), 2.0, "2.0")]:
        with pytest.raises(TypeError, match=f"constant_: cannot write the value {shown} into a "
                           f"tensor of dtype {target.dtype}"):
            init.constant_(target, val)
        assert not target.any()  # nothing written
    bias = tr.Tensor(np.zeros(8, dtype=np.int64))
    with pytest.raises(TypeError, match="set_forget_bias_: cannot write the value 0.5"):
        init.set_forget_bias_(bias, 2, 0.5)
    init.set_forget_bias_(bias, 2, 1.0)  # an exact value is fine
    np.testing.assert_array_equal(bias.numpy(), [0, 0, 1, 1, 0, 0, 0, 0])


@pytest.mark.parametrize("name, shape", [
    (name, shape) for name in sorted(RANDOM_FILLS)
    for shape in [(4, 0), (0, 4), (0, 0), (2, 0, 3)]
    if not (name == "orthogonal_blocks_" and len(shape) != 2)  # 2-D tensors only
])
def test_zero_element_tensors_are_returned_unchanged(name, shape):
    """kaiming_* used to raise ZeroDivisionError on (4, 0) (fan_in = 0), xavier_* on (0, 0);
    torch returns the tensor unchanged."""
    p = param(*shape)
    data_before = p.array
    assert RANDOM_FILLS[name](p) is p
    assert p.shape == shape and p.array is data_before
    a = np.zeros(shape, dtype=np.float32)
    assert RANDOM_FILLS[name](a) is a


def test_zero_element_fills_still_check_their_arguments():
    with pytest.raises(ValueError, match="kaiming_uniform_: mode must be"):
        init.kaiming_uniform_(param(3, 0), mode="fan")
    with pytest.raises(ValueError, match="unsupported nonlinearity 'swish'"):
        init.kaiming_normal_(param(0, 3), nonlinearity="swish")
    with pytest.raises(ValueError, match="xavier_normal_: fan in and fan out need"):
        init.xavier_normal_(param(0))
    with pytest.raises(TypeError, match="kaiming_uniform_: random values need"):
        init.kaiming_uniform_(np.zeros((3, 0), dtype=np.int64))


def test_seeded_and_dtype_independent():
    a, b = param(5, 6), param(5, 6, dtype=np.float32)
    init.xavier_uniform_(a, generator=3)
    init.xavier_uniform_(b, generator=3)
    np.testing.assert_array_equal(b.numpy(), a.numpy().astype(np.float32))
    tr.manual_seed(4)
    init.normal_(a)
    tr.manual_seed(4)
    init.normal_(b)
    np.testing.assert_array_equal(b.numpy(), a.numpy().astype(np.float32))


# ------------------------------------------------------------------------- distributions
def test_uniform_and_normal_moments():
    t = param(200, 100)
    init.uniform_(t, -2.0, 3.0, generator=0)
    x = t.numpy()
    assert x.min() >= -2.0 and x.max() < 3.0
    assert abs(x.mean() - 0.5) < 4 * math.sqrt(25 / 12 / x.size)
    init.normal_(t, 1.5, 0.5, generator=0)
    x = t.numpy()
    assert abs(x.mean() - 1.5) < 4 * 0.5 / math.sqrt(x.size)
    assert abs(x.std() / 0.5 - 1) < 0.02


@pytest.mark.parametrize("shape", [(200, 300), (300, 100), (64, 32, 3)])
@pytest.mark.parametrize("gain", [1.0, 5 / 3])
def test_xavier_bounds_and_variance(shape, gain):
    fan_in = shape[1] * (shape[2] if len(shape) > 2 else 1)
    fan_out = shape[0] * (shape[2] if len(shape) > 2 else 1)
    target_var = gain * gain * 2.0 / (fan_in + fan_out)
    t = param(*shape)
    init.xavier_uniform_(t, gain=gain, generator=1)
    x = t.numpy()
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    assert np.all(np.abs(x) <= bound) and np.abs(x).max() > 0.99 * bound
    # >= 6000 samples: the variance estimate is within ~3% (several standard errors)
    assert abs(x.var() / target_var - 1) < 0.04
    init.xavier_normal_(t, gain=gain, generator=2)
    x = t.numpy()
    assert abs(x.mean()) < 4 * math.sqrt(target_var / x.size)
    assert abs(x.var() / target_var - 1) < 0.06


@pytest.mark.parametrize("mode", ["fan_in", "fan_out"])
def test_kaiming_variance(mode):
    t = param(150, 120)
    fan = 120 if mode == "fan_in" else 150
    init.kaiming_normal_(t, mode=mode, nonlinearity="relu", generator=0)
    assert abs(t.numpy().var() / (2.0 / fan) - 1) < 0.04
    init.kaiming_uniform_(t, mode=mode, nonlinearity="relu", generator=0)
    bound = math.sqrt(6.0 / fan)
    assert np.abs(t.numpy()).max() <= bound
    assert abs(t.numpy().var() / (2.0 / fan) - 1) < 0.04
    with pytest.raises(ValueError, match="mode"):
        init.kaiming_normal_(t, mode="fan_avg")


def test_kaiming_uniform_sqrt5_is_linear_default_bound():
    t = param(30, 25)
    init.kaiming_uniform_(t, a=math.sqrt(5), generator=0)
    assert np.abs(t.numpy()).max() <= 1 / math.sqrt(25)
    assert np.abs(t.numpy()).max() > 0.98 / math.sqrt(25)


def test_fans_need_two_dimensions():
    with pytest.raises(ValueError, match="at least 2"):
        init.xavier_uniform_(param(5))


def test_calculate_gain():
    assert init.calculate_gain("linear") == 1.0
    assert init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("relu") == math.sqrt(2)
    assert init.calculate_gain("leaky_relu") == math.sqrt(2 / (1 + 0.01 ** 2))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="softplus"):
        init.calculate_gain("softplus")


@pytest.mark.parametrize("slope", [np.float32(0.2), np.float64(0.2), np.float16(0.2),
                                   np.int64(1), 1])
def test_leaky_relu_slope_may_be_a_numpy_number(slope):
    """calculate_gain("leaky_relu", np.float32(0.2)) said the slope "is not a number", and so
    did kaiming_uniform_(t, a=np.float32(0.1)), which passes a on."""
    want = math.sqrt(2 / (1 + float(slope) ** 2))
    assert init.calculate_gain("leaky_relu", slope) == want
    a, b = param(6, 5), param(6, 5)
    init.kaiming_uniform_(a, a=slope, generator=3)
    init.kaiming_uniform_(b, a=float(slope), generator=3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    init.kaiming_normal_(a, a=slope, generator=3)
    init.kaiming_normal_(b, a=float(slope), generator=3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    torch = pytest.importorskip("torch")
    assert want == pytest.approx(torch.nn.init.calculate_gain("leaky_relu", float(slope)),
                                 rel=1e-15)


@pytest.mark.parametrize("slope", [True, np.bool_(False), "0.2", float("nan"), np.inf,
                                   np.array([0.2])])
def test_leaky_relu_slope_must_be_a_finite_real_number(slope):
    with pytest.raises(ValueError, match=re.escape(
            f"calculate_gain: negative slope {slope!r} is not a finite number")):
        init.calculate_gain("leaky_relu", slope)


def test_gain_and_fans_match_torch():
    torch = pytest.importorskip("torch")
    for name in ["linear", "sigmoid", "tanh", "relu", "leaky_relu", "selu", "conv2d"]:
        assert init.calculate_gain(name) == pytest.approx(torch.nn.init.calculate_gain(name),
                                                          rel=1e-15)
    for shape in [(3, 4), (5, 2, 3), (2, 3, 4, 5)]:
        ours = init._calculate_fan_in_and_fan_out(param(*shape))
        theirs = torch.nn.init._calculate_fan_in_and_fan_out(torch.zeros(shape))
        assert ours == theirs


# ------------------------------------------------------------------------- orthogonal
@given(rows=st.integers(1, 12), cols=st.integers(1, 12), seed=st.integers(0, 2 ** 31 - 1),
       gain=st.sampled_from([1.0, 0.5, 5 / 3]))
def test_orthogonal_is_orthogonal(rows, cols, seed, gain):
    t = param(rows, cols)
    init.orthogonal_(t, gain=gain, generator=seed)
    w = t.numpy() / gain
    if rows >= cols:
        np.testing.assert_allclose(w.T @ w, np.eye(cols), atol=1e-12)
    else:
        np.testing.assert_allclose(w @ w.T, np.eye(rows), atol=1e-12)


def test_orthogonal_flattens_trailing_dimensions():
    t = param(6, 2, 3)
    init.orthogonal_(t, generator=0)
    w = t.numpy().reshape(6, 6)
    np.testing.assert_allclose(w.T @ w, np.eye(6), atol=1e-12)
    with pytest.raises(ValueError, match="2 dimensions"):
        init.orthogonal_(param(4))


def test_orthogonal_is_haar_distributed():
    # With the sign fix each column of Q is a normalised Gaussian column, so every entry is
    # symmetric about 0. Without it LAPACK's Householder QR makes Q[0, 0] = A00 / R00 < 0
    # always (R00 = -sign(A00) ||a_0||), which this test detects.
    n, draws = 5, 600
    rng = np.random.default_rng(0)
    firsts = np.empty(draws)
    diag_means = np.empty(draws)
    for k in range(draws):
        t = param(n, n)
        init.orthogonal_(t, generator=rng)
        firsts[k] = t.numpy()[0, 0]
        diag_means[k] = np.trace(t.numpy()) / n
    se = math.sqrt(1 / n / draws)  # Var(Q_ij) = 1/n under Haar measure
    assert abs(firsts.mean()) < 4 * se
    assert abs(diag_means.mean()) < 4 * se
    assert abs(np.mean(firsts ** 2) * n - 1) < 0.15  # second moment 1/n


def test_orthogonal_blocks():
    hidden, gates = 6, 4
    w = param(gates * hidden, hidden)
    init.orthogonal_blocks_(w, gates, generator=0)
    blocks = w.numpy().reshape(gates, hidden, hidden)
    for g in range(gates):
        np.testing.assert_allclose(blocks[g].T @ blocks[g], np.eye(hidden), atol=1e-12)
    assert not np.allclose(blocks[0], blocks[1])  # independent draws
    with pytest.raises(ValueError, match="equal blocks"):
        init.orthogonal_blocks_(param(10, 3), 4)


# ------------------------------------------------------------------------- recurrent helpers
@pytest.mark.parametrize("hidden", [1, 16, 100])
def test_rnn_default_bounds(hidden):
    t = param(4 * hidden, 50)
    init.rnn_default_(t, hidden, generator=0)
    k = 1 / math.sqrt(hidden)
    x = t.numpy()
    assert np.all(np.abs(x) <= k) and np.abs(x).max() > 0.95 * k
    with pytest.raises(ValueError, match="hidden_size"):
        init.rnn_default_(t, 0)


@pytest.mark.parametrize("order, index", [("ifgo", 1), ("ifog", 1), ("fico", 0), ("iogf", 3)])
def test_set_forget_bias_slice(order, index):
    hidden = 3
    b = param(4 * hidden)
    init.normal_(b, generator=0)
    before = b.numpy().copy()
    init.set_forget_bias_(b, hidden, 1.0, gate_order=order)
    after = b.numpy()
    f = slice(index * hidden, (index + 1) * hidden)
    np.testing.assert_array_equal(after[f], np.ones(hidden))
    rest = np.ones(4 * hidden, dtype=bool)
    rest[f] = False
    np.testing.assert_array_equal(after[rest], before[rest])


def test_set_forget_bias_errors():
    with pytest.raises(ValueError, match="expected shape"):
        init.set_forget_bias_(param(10), 3, 1.0)
    with pytest.raises(ValueError, match="'f'"):
        init.set_forget_bias_(param(12), 3, 1.0, gate_order="iugo")


def test_spectral_radius_known_matrices():
    assert init.spectral_radius(np.diag([-3.0, 2.0, 1.0])) == pytest.approx(3.0, abs=1e-14)
    theta = 0.7
    rot = 0.5 * np.array([[math.cos(theta), -math.sin(theta)],
                          [math.sin(theta), math.cos(theta)]])  # complex eigenvalues
    assert init.spectral_radius(tr.Tensor(rot)) == pytest.approx(0.5, abs=1e-14)
    jordan = np.array([[0.0, 1.0], [0.0, 0.0]])
    assert init.spectral_radius(jordan) == 0.0
    with pytest.raises(ValueError, match="spectral radius 0"):
        init.scale_to_spectral_radius_(jordan.copy(), 1.0)
    with pytest.raises(ValueError, match="square"):
        init.spectral_radius(np.zeros((2, 3)))


@given(n=st.integers(1, 10), seed=st.integers(0, 2 ** 31 - 1),
       rho=st.floats(0.05, 3.0))
def test_scale_to_spectral_radius_hits_the_target(n, seed, rho):
    w = param(n, n)
    init.normal_(w, generator=seed)
    if init.spectral_radius(w) < 1e-3:  # a (nearly) nilpotent draw: nothing to scale
        return
    init.scale_to_spectral_radius_(w, rho)
    assert abs(init.spectral_radius(w) - rho) <= 1e-10 * max(1.0, rho)


def test_scale_to_spectral_radius_float32():
    w = param(8, 8, dtype=np.float32)
    init.normal_(w, generator=0)
    init.scale_to_spectral_radius_(w, 1.1)
    assert w.dtype == np.float32
    assert abs(init.spectral_radius(w) - 1.1) < 1e-5
