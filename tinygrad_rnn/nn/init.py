"""Weight initialisation, in place, with the names of ``torch.nn.init``.

Every function writes into a :class:`~tinygrad_rnn.Tensor` (usually a
:class:`~tinygrad_rnn.nn.Parameter`) or a raw array under ``no_grad``, keeps its dtype, and
returns it. Random values are drawn in float64 from ``generator`` (a seed, a
``numpy.random.Generator``, or ``None`` for the default generator that ``tr.manual_seed``
resets) and then cast, so a float32 and a float64 model built from the same seed hold the same
numbers up to rounding.

Targets: the random fills (uniform, normal, Xavier, Kaiming, orthogonal, ``rnn_default_``)
need a floating-point target and raise a TypeError naming the function and the dtype for an
integer or boolean one (their samples would be truncated). The deterministic fills write into
any dtype, but only values it holds exactly (``constant_(t, 3)`` into int64 is fine, 2.5 is a
TypeError). A tensor with no elements is returned unchanged by every fill (after the
arguments are checked), as in torch.

Devices: the target may live on any device (a Parameter after ``Module.to``, or a raw device
array). Random values are drawn on the host from the NumPy generator and copied to the
target's device explicitly (``xp.asarray``), so a seed gives the same values on every device;
:func:`orthogonal_` and :func:`orthogonal_blocks_` also run their QR factorisation on the
host, for the same reason. Deterministic fills (:func:`constant_`, :func:`eye_`,
:func:`set_forget_bias_`, :func:`scale_to_spectral_radius_`) work on the device directly.
:func:`spectral_radius` copies the matrix to the host explicitly: the matrix is small, and a
general (non-symmetric) eigenvalue solver is not in every CuPy release.

Fans follow torch: for a weight of shape ``(out, in, *k)``, ``fan_in = in * prod(k)`` and
``fan_out = out * prod(k)``; a Linear weight ``(out_features, in_features)`` has
``fan_in = in_features``.

Recurrent-network helpers: :func:`orthogonal_blocks_` (one orthogonal block per gate of a
stacked ``(G*H, H)`` recurrent weight), :func:`rnn_default_` (torch's default for recurrent
layers), :func:`set_forget_bias_`, and :func:`spectral_radius` /
:func:`scale_to_spectral_radius_` for vanishing/exploding-gradient experiments.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ..backend import get_array_module, is_float_dtype, to_device
from ..engine import no_grad
from ..random import get_generator
from ..dtypes import array_of
from ..tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
    "orthogonal_blocks_", "rnn_default_", "set_forget_bias_", "spectral_radius",
    "scale_to_spectral_radius_",
]


# ------------------------------------------------------------------------- helpers
def _shape(t: Any, fn: str = "init") -> tuple:
    """The shape of a fill target (a Tensor or an array on any device)."""
    if not (isinstance(t, (Tensor, np.ndarray)) or get_array_module(t) is not np):
        raise TypeError(f"{fn}: expected a Tensor or an array, got {type(t).__name__}")
    return tuple(t.shape)


def _random_target(t: Any, fn: str) -> tuple:
    """The shape of the target of a random fill, refusing a non-floating-point target: the
    samples would be truncated (U(0, 10) into int64 gives integers, N(0, 1) mostly zeros).
    torch refuses too."""
    shape = _shape(t, fn)
    dtype = _raw(t).dtype
    if not is_float_dtype(dtype):
        raise TypeError(
            f"{fn}: random values need a floating-point tensor, got dtype {dtype} (they would "
            f"be truncated); convert the tensor to a float dtype first"
        )
    return shape


def _write(t: Any, values: Any, fn: str) -> Any:
    """Copy ``values`` (any float array of t's shape) into ``t`` in place, in t's dtype.

    Into an integer or boolean target only values that the cast keeps exactly are written
    (``constant_(t, 3)``, ``eye_``); any other value is a TypeError naming ``fn``, the value
    and the dtype, and nothing is written.
    """
    _shape(t, fn)
    raw = _raw(t)
    xp = get_array_module(raw)
    values = xp.asarray(values)
    if not is_float_dtype(raw.dtype):
        with np.errstate(invalid="ignore", over="ignore"):
            cast = values.astype(raw.dtype)
        lost = cast != values
        if bool(lost.any()):
            first = values[lost].ravel()[0]
            raise TypeError(
                f"{fn}: cannot write the value {float(first)!r} into a tensor of dtype "
                f"{raw.dtype} without changing it (truncation or overflow)"
            )
        values = cast  # exact: write the target's own dtype (an in-place copy_ refuses floats)
    if isinstance(t, Tensor):
        with no_grad():
            t.copy_(values)  # casts to t's dtype, bumps the version counter
    else:
        raw[...] = values
    return t


def _real(value: Any, name: str, fn: str, finite: bool = True) -> float:
    """``value`` as a float: a TypeError naming ``fn`` and ``name`` unless it is a real
    number (Python or NumPy, or a 0-d array of one; not a bool, a string or a complex), a
    ValueError when ``finite`` and it is inf or nan."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    number = float(value)
    if finite and not math.isfinite(number):
        raise ValueError(f"{fn}: {name} must be a finite number, got {value!r}")
    return number


def _count(value: Any, name: str, fn: str) -> int:
    """``value`` as a positive int (Python or NumPy; not a bool or a float), errors naming
    ``fn`` and ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r} "
                        f"({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{fn}: {name} must be positive, got {value}")
    return int(value)


def _matrix64(w: Any, fn: str) -> Any:
    """A float64 copy of a matrix of real numbers, with errors naming ``fn`` for strings,
    objects and complex values (NumPy would fail, or drop the imaginary part)."""
    return _float64_copy(array_of(w, fn, "w"))


def _raw(t: Any) -> Any:
    """The array of a Tensor, or the array itself."""
    return t._data if isinstance(t, Tensor) else t


def _float64_copy(t: Any) -> Any:
    """The values of a Tensor or array(-like) as a float64 copy on the same device."""
    a = _raw(t)
    if get_array_module(a) is np:
        return np.array(a, dtype=np.float64, copy=True)
    return a.astype(np.float64, copy=True)


def _fans(shape: tuple, fn: str) -> tuple[int, int]:
    if len(shape) < 2:
        raise ValueError(
            f"{fn}: fan in and fan out need a tensor with at least 2 dimensions, got shape "
            f"{shape}"
        )
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _calculate_fan_in_and_fan_out(t: Any) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight, as torch computes them."""
    return _fans(_shape(t), "fan computation")


# ------------------------------------------------------------------------- gains
def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (torch's values).

    ``linear``/``identity``/``conv*``/``sigmoid``: 1; ``tanh``: 5/3; ``relu``: sqrt(2);
    ``leaky_relu``: sqrt(2 / (1 + slope^2)) with slope ``param`` (default 0.01; a finite
    real number, Python or NumPy, never a bool); ``selu``: 3/4.
    """
    linear = ("linear", "identity", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
              "conv_transpose2d", "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Real) and not isinstance(param, (bool, np.bool_)) \
                and math.isfinite(param):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative slope {param!r} is not a finite "
                             f"number (param of leaky_relu must be a real number)")
        return math.sqrt(2.0 / (1.0 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


# ------------------------------------------------------------------------- basic fills
def _uniform(t: Any, a: float, b: float, generator: Any, fn: str) -> Any:
    """U(a, b) samples into ``t``; errors name the public function ``fn``."""
    a, b = _real(a, "a", fn), _real(b, "b", fn)
    if not a <= b:
        raise ValueError(f"{fn}: need a <= b, got a={a}, b={b}")
    shape = _random_target(t, fn)
    rng = get_generator(generator)
    return _write(t, rng.uniform(a, b, size=shape), fn)


def _normal(t: Any, mean: float, std: float, generator: Any, fn: str) -> Any:
    """N(mean, std^2) samples into ``t``; errors name the public function ``fn``."""
    mean, std = _real(mean, "mean", fn), _real(std, "std", fn)
    if std < 0:
        raise ValueError(f"{fn}: std must be >= 0, got {std}")
    shape = _random_target(t, fn)
    rng = get_generator(generator)
    return _write(t, mean + std * rng.standard_normal(shape), fn)


def uniform_(t: Any, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Any:
    """Fill with samples of U(a, b) (a floating-point target only, as for every random
    fill: an integer target is a TypeError)."""
    return _uniform(t, a, b, generator, "uniform_")


def normal_(t: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    """Fill with samples of N(mean, std^2) (a floating-point target only)."""
    return _normal(t, mean, std, generator, "normal_")


def _constant(t: Any, val: float, fn: str) -> Any:
    val = _real(val, "val", fn, finite=False)  # inf and nan are values a float can hold
    xp = get_array_module(_raw(t))
    return _write(t, xp.full(_shape(t, fn), val, dtype=np.float64), fn)


def constant_(t: Any, val: float) -> Any:
    """Fill with ``val``. An integer or boolean target takes only a value it holds exactly
    (``constant_(t, 3)``); 2.5 or an overflowing value is a TypeError, never truncated."""
    return _constant(t, val, "constant_")


def zeros_(t: Any) -> Any:
    """Fill with 0."""
    return _constant(t, 0.0, "zeros_")


def ones_(t: Any) -> Any:
    """Fill with 1."""
    return _constant(t, 1.0, "ones_")


def eye_(t: Any) -> Any:
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    shape = _shape(t, "eye_")
    if len(shape) != 2:
        raise ValueError(f"eye_: expected a 2-D tensor, got shape {shape}")
    return _write(t, get_array_module(_raw(t)).eye(shape[0], shape[1]), "eye_")


# ------------------------------------------------------------------------- scaled by fans
# A tensor with no elements has a zero fan (fan_in + fan_out is 0 for shape (0, 0)), and no
# value to write: the fan-scaled fills return it unchanged, as torch does (after checking
# their arguments, so a bad mode or dtype is still an error).
def xavier_uniform_(t: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """Glorot/Xavier uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)), which
    gives variance gain^2 * 2 / (fan_in + fan_out). A zero-element tensor is returned
    unchanged.

    References: Glorot and Bengio (2010), Understanding the difficulty of training deep
    feedforward neural networks.
    """
    fn = "xavier_uniform_"
    shape = _random_target(t, fn)
    fan_in, fan_out = _fans(shape, fn)
    if 0 in shape:
        return t
    bound = _real(gain, "gain", fn) * math.sqrt(6.0 / (fan_in + fan_out))
    return _uniform(t, -bound, bound, generator, fn)


def xavier_normal_(t: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """Glorot/Xavier normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)). A
    zero-element tensor is returned unchanged."""
    fn = "xavier_normal_"
    shape = _random_target(t, fn)
    fan_in, fan_out = _fans(shape, fn)
    if 0 in shape:
        return t
    std = _real(gain, "gain", fn) * math.sqrt(2.0 / (fan_in + fan_out))
    return _normal(t, 0.0, std, generator, fn)


def _kaiming_std(t: Any, a: float, mode: str, nonlinearity: str, fn: str) -> float | None:
    """gain / sqrt(fan), or None for a zero-element tensor (nothing to fill)."""
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{fn}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    a = _real(a, "a", fn)
    try:
        gain = calculate_gain(nonlinearity, a)
    except ValueError as err:  # an unknown nonlinearity: name the function called
        raise ValueError(f"{fn}: {err}") from None
    shape = _random_target(t, fn)
    fan_in, fan_out = _fans(shape, fn)
    if 0 in shape:
        return None
    fan = fan_in if mode == "fan_in" else fan_out
    return gain / math.sqrt(fan)


def kaiming_uniform_(t: Any, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Any:
    """He/Kaiming uniform: U(-b, b) with b = gain * sqrt(3 / fan), gain from
    :func:`calculate_gain` (``a`` is the leaky-relu slope). ``torch.nn.Linear`` uses
    ``a = sqrt(5)``, which gives b = 1 / sqrt(fan_in). A zero-element tensor is returned
    unchanged."""
    fn = "kaiming_uniform_"
    std = _kaiming_std(t, a, mode, nonlinearity, fn)
    if std is None:
        return t
    bound = math.sqrt(3.0) * std
    return _uniform(t, -bound, bound, generator, fn)


def kaiming_normal_(t: Any, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Any:
    """He/Kaiming normal: N(0, std^2) with std = gain / sqrt(fan). A zero-element tensor is
    returned unchanged."""
    fn = "kaiming_normal_"
    std = _kaiming_std(t, a, mode, nonlinearity, fn)
    if std is None:
        return t
    return _normal(t, 0.0, std, generator, fn)


# ------------------------------------------------------------------------- orthogonal
def _haar_orthogonal(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """A (rows, cols) matrix with orthonormal columns (rows >= cols) or rows (rows < cols),
    distributed uniformly (Haar).

    The QR factorisation A = QR of a Gaussian A is unique only up to the signs of R's
    diagonal, and LAPACK's sign choice depends on A, which biases Q. Multiplying each column
    of Q by sign(R_jj) makes R's diagonal positive; then Q is Haar-distributed (Mezzadri 2007,
    How to generate random matrices from the classical compact groups).
    """
    flat = rng.standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)  # reduced QR: q (max, min) with orthonormal columns
    signs = np.sign(np.diag(r))
    signs[signs == 0] = 1.0
    q = q * signs  # scales column j by sign(R_jj)
    if rows < cols:
        q = q.T
    return q


def orthogonal_(t: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """Fill with a (semi-)orthogonal matrix times ``gain``, drawn uniformly (Haar).

    A tensor of shape ``(rows, *rest)`` is treated as a ``(rows, cols)`` matrix with
    ``cols = prod(rest)``: for rows >= cols its columns are orthonormal (W^T W = I), otherwise
    its rows are (W W^T = I). See :func:`_haar_orthogonal` for the sign fix.

    References: Saxe, McClelland and Ganguli (2014), Exact solutions to the nonlinear dynamics
    of learning in deep linear neural networks.
    """
    shape = _random_target(t, "orthogonal_")
    gain = _real(gain, "gain", "orthogonal_")
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: need at least 2 dimensions, got shape {shape}")
    rows = shape[0]
    cols = int(np.prod(shape[1:]))
    if rows == 0 or cols == 0:
        return t
    q = _haar_orthogonal(rows, cols, get_generator(generator))
    return _write(t, (gain * q).reshape(shape), "orthogonal_")


def orthogonal_blocks_(t: Any, num_blocks: int, gain: float = 1.0,
                       generator: Any = None) -> Any:
    """Make each of ``num_blocks`` row blocks of a 2-D tensor orthogonal.

    A stacked recurrent weight of shape ``(G*H, H)`` (G = 3 for GRU, 4 for LSTM) holds one
    ``H x H`` matrix per gate; orthogonalising the whole stack would not make any gate's
    matrix orthogonal. Here block g, rows ``g*H:(g+1)*H``, is filled by :func:`orthogonal_`
    independently (blocks drawn in order from the one generator).
    """
    shape = _random_target(t, "orthogonal_blocks_")
    if len(shape) != 2:
        raise ValueError(f"orthogonal_blocks_: expected a 2-D tensor, got shape {shape}")
    num_blocks = _count(num_blocks, "num_blocks", "orthogonal_blocks_")
    gain = _real(gain, "gain", "orthogonal_blocks_")
    if shape[0] % num_blocks != 0:
        raise ValueError(
            f"orthogonal_blocks_: {shape[0]} rows do not split into num_blocks={num_blocks} "
            f"equal blocks (shape {shape})"
        )
    if 0 in shape:
        return t
    rng = get_generator(generator)
    h = shape[0] // num_blocks
    out = np.empty(shape, dtype=np.float64)
    for g in range(num_blocks):
        out[g * h:(g + 1) * h] = gain * _haar_orthogonal(h, shape[1], rng)
    return _write(t, out, "orthogonal_blocks_")


# ------------------------------------------------------------------------- recurrent helpers
def rnn_default_(t: Any, hidden_size: int, generator: Any = None) -> Any:
    """torch's default for every weight and bias of RNN/GRU/LSTM: U(-k, k), k = 1/sqrt(H)."""
    if isinstance(hidden_size, (bool, np.bool_)) or not isinstance(hidden_size,
                                                                   (int, np.integer)):
        raise TypeError(f"rnn_default_: hidden_size must be an integer, got {hidden_size!r}")
    if hidden_size <= 0:
        raise ValueError(f"rnn_default_: hidden_size must be positive, got {hidden_size}")
    k = 1.0 / math.sqrt(hidden_size)
    return _uniform(t, -k, k, generator, "rnn_default_")


def set_forget_bias_(bias: Any, hidden_size: int, value: float = 1.0,
                     gate_order: str = "ifgo") -> Any:
    """Set the forget-gate slice of a stacked LSTM bias vector to ``value``.

    A bias of shape ``(len(gate_order) * H,)`` is split into gate blocks in ``gate_order``
    (torch: ``'ifgo'``, input, forget, cell candidate, output; CS231n uses ``'ifog'``); the
    block named ``'f'`` is filled. A positive forget bias (Gers et al. 2000; Jozefowicz et al.
    2015 recommend 1) keeps the cell state, and its gradient, alive early in training.

    Notes
    -----
    torch's LSTM has two biases, ``bias_ih`` and ``bias_hh``, and the gate sees their sum: set
    the value on one of them and zero the other's forget slice, or halve it on both.
    """
    hidden_size = _count(hidden_size, "hidden_size", "set_forget_bias_")
    value = _real(value, "value", "set_forget_bias_")
    if not isinstance(gate_order, str) or len(set(gate_order)) != len(gate_order) \
            or "f" not in gate_order:
        raise ValueError(
            f"set_forget_bias_: gate_order must be distinct gate letters including 'f', got "
            f"{gate_order!r}"
        )
    shape = _shape(bias, "set_forget_bias_")
    expected = (len(gate_order) * hidden_size,)
    if shape != expected:
        raise ValueError(
            f"set_forget_bias_: bias of shape {shape} does not hold {len(gate_order)} gates "
            f"({gate_order!r}) of hidden size {hidden_size}; expected shape {expected}"
        )
    k = gate_order.index("f")
    values = _float64_copy(bias)
    values[k * hidden_size:(k + 1) * hidden_size] = value
    return _write(bias, values, "set_forget_bias_")


def spectral_radius(w: Any) -> float:
    """The spectral radius max |lambda_i| of a square matrix (Tensor or array).

    For a linear recurrence h_t = W h_{t-1}, gradients through T steps scale like rho(W)^T:
    they vanish when rho < 1 and can explode when rho > 1 (Pascanu, Mikolov and Bengio 2013).

    A matrix on a device is copied to the host explicitly first: CuPy has no eigenvalue
    solver for general (non-symmetric) matrices.
    """
    a = to_device(_matrix64(w, "spectral_radius"), "cpu")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"spectral_radius: expected a square matrix, got shape {a.shape}")
    if a.size == 0:
        return 0.0
    if not np.isfinite(a).all():
        raise ValueError(f"spectral_radius: the matrix of shape {a.shape} holds inf or nan, "
                         f"so it has no eigenvalues to measure")
    return float(np.max(np.abs(np.linalg.eigvals(a))))


def scale_to_spectral_radius_(w: Any, rho: float) -> Any:
    """Rescale a square matrix in place so that its spectral radius is ``rho``.

    Eigenvalues scale linearly (rho(cW) = |c| rho(W)), so W <- W * rho / rho(W) hits the
    target exactly up to rounding (to about 1e-15 relative in float64; float32 storage rounds
    the result to about 1e-7).
    """
    rho = _real(rho, "rho", "scale_to_spectral_radius_")
    if rho < 0:
        raise ValueError(f"scale_to_spectral_radius_: rho must be >= 0, got {rho}")
    current = spectral_radius(w)
    if current == 0.0:
        raise ValueError(
            "scale_to_spectral_radius_: the matrix has spectral radius 0 (nilpotent or zero), "
            "so no rescaling can give it another radius"
        )
    return _write(w, _float64_copy(w) * (rho / current), "scale_to_spectral_radius_")
