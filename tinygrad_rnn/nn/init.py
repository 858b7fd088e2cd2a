"""Weight initialisation, in place, with the names of ``torch.nn.init``.

Every function writes into a :class:`~tinygrad_rnn.Tensor` (usually a
:class:`~tinygrad_rnn.nn.Parameter`) or a raw array under ``no_grad``, keeps its dtype, and
returns it. Random values are drawn in float64 from ``generator`` (a seed, a
``numpy.random.Generator``, or ``None`` for the default generator that ``tr.manual_seed``
resets) and then cast, so a float32 and a float64 model built from the same seed hold the same
numbers up to rounding.

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
from typing import Any

import numpy as np

from ..backend import get_array_module, to_device
from ..engine import no_grad
from ..random import get_generator
from ..tensor import Tensor

__all__ = [
    "calculate_gain", "uniform_", "normal_", "constant_", "zeros_", "ones_", "eye_",
    "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
    "orthogonal_blocks_", "rnn_default_", "set_forget_bias_", "spectral_radius",
    "scale_to_spectral_radius_",
]


# ------------------------------------------------------------------------- helpers
def _shape(t: Any) -> tuple:
    if not (isinstance(t, (Tensor, np.ndarray)) or get_array_module(t) is not np):
        raise TypeError(f"init: expected a Tensor or an array, got {type(t).__name__}")
    return tuple(t.shape)


def _write(t: Any, values: Any) -> Any:
    """Copy ``values`` (any float array of t's shape) into ``t`` in place, in t's dtype."""
    if isinstance(t, Tensor):
        xp = get_array_module(t.data)
        with no_grad():
            t.copy_(xp.asarray(values))  # casts to t's dtype, bumps the version counter
    elif isinstance(t, np.ndarray) or get_array_module(t) is not np:
        xp = get_array_module(t)
        t[...] = xp.asarray(values)
    else:
        raise TypeError(f"init: expected a Tensor or an array, got {type(t).__name__}")
    return t


def _raw(t: Any) -> Any:
    """The array of a Tensor, or the array itself."""
    return t.data if isinstance(t, Tensor) else t


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
    ``leaky_relu``: sqrt(2 / (1 + slope^2)) with slope ``param`` (default 0.01);
    ``selu``: 3/4.
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
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = float(param)
        else:
            raise ValueError(f"calculate_gain: negative slope {param!r} is not a number")
        return math.sqrt(2.0 / (1.0 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4.0
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


# ------------------------------------------------------------------------- basic fills
def uniform_(t: Any, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Any:
    """Fill with samples of U(a, b)."""
    if not a <= b:
        raise ValueError(f"uniform_: need a <= b, got a={a}, b={b}")
    rng = get_generator(generator)
    return _write(t, rng.uniform(a, b, size=_shape(t)))


def normal_(t: Any, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Any:
    """Fill with samples of N(mean, std^2)."""
    if std < 0:
        raise ValueError(f"normal_: std must be >= 0, got {std}")
    rng = get_generator(generator)
    return _write(t, mean + std * rng.standard_normal(_shape(t)))


def constant_(t: Any, val: float) -> Any:
    """Fill with ``val``."""
    xp = get_array_module(_raw(t))
    return _write(t, xp.full(_shape(t), val, dtype=np.float64))


def zeros_(t: Any) -> Any:
    """Fill with 0."""
    return constant_(t, 0.0)


def ones_(t: Any) -> Any:
    """Fill with 1."""
    return constant_(t, 1.0)


def eye_(t: Any) -> Any:
    """Fill a 2-D tensor with the identity (ones on the main diagonal)."""
    shape = _shape(t)
    if len(shape) != 2:
        raise ValueError(f"eye_: expected a 2-D tensor, got shape {shape}")
    return _write(t, get_array_module(_raw(t)).eye(shape[0], shape[1]))


# ------------------------------------------------------------------------- scaled by fans
def xavier_uniform_(t: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """Glorot/Xavier uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)), which
    gives variance gain^2 * 2 / (fan_in + fan_out).

    References: Glorot and Bengio (2010), Understanding the difficulty of training deep
    feedforward neural networks.
    """
    fan_in, fan_out = _fans(_shape(t), "xavier_uniform_")
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -bound, bound, generator=generator)


def xavier_normal_(t: Any, gain: float = 1.0, generator: Any = None) -> Any:
    """Glorot/Xavier normal: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(_shape(t), "xavier_normal_")
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return normal_(t, 0.0, std, generator=generator)


def _kaiming_std(t: Any, a: float, mode: str, nonlinearity: str, fn: str) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"{fn}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(_shape(t), fn)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(t: Any, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator: Any = None) -> Any:
    """He/Kaiming uniform: U(-b, b) with b = gain * sqrt(3 / fan), gain from
    :func:`calculate_gain` (``a`` is the leaky-relu slope). ``torch.nn.Linear`` uses
    ``a = sqrt(5)``, which gives b = 1 / sqrt(fan_in)."""
    std = _kaiming_std(t, a, mode, nonlinearity, "kaiming_uniform_")
    bound = math.sqrt(3.0) * std
    return uniform_(t, -bound, bound, generator=generator)


def kaiming_normal_(t: Any, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator: Any = None) -> Any:
    """He/Kaiming normal: N(0, std^2) with std = gain / sqrt(fan)."""
    std = _kaiming_std(t, a, mode, nonlinearity, "kaiming_normal_")
    return normal_(t, 0.0, std, generator=generator)


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
    shape = _shape(t)
    if len(shape) < 2:
        raise ValueError(f"orthogonal_: need at least 2 dimensions, got shape {shape}")
    rows = shape[0]
    cols = int(np.prod(shape[1:]))
    if rows == 0 or cols == 0:
        return t
    q = _haar_orthogonal(rows, cols, get_generator(generator))
    return _write(t, (gain * q).reshape(shape))


def orthogonal_blocks_(t: Any, num_blocks: int, gain: float = 1.0,
                       generator: Any = None) -> Any:
    """Make each of ``num_blocks`` row blocks of a 2-D tensor orthogonal.

    A stacked recurrent weight of shape ``(G*H, H)`` (G = 3 for GRU, 4 for LSTM) holds one
    ``H x H`` matrix per gate; orthogonalising the whole stack would not make any gate's
    matrix orthogonal. Here block g, rows ``g*H:(g+1)*H``, is filled by :func:`orthogonal_`
    independently (blocks drawn in order from the one generator).
    """
    shape = _shape(t)
    if len(shape) != 2:
        raise ValueError(f"orthogonal_blocks_: expected a 2-D tensor, got shape {shape}")
    if num_blocks <= 0 or shape[0] % num_blocks != 0:
        raise ValueError(
            f"orthogonal_blocks_: {shape[0]} rows do not split into {num_blocks} equal blocks "
            f"(shape {shape})"
        )
    if 0 in shape:
        return t
    rng = get_generator(generator)
    h = shape[0] // num_blocks
    out = np.empty(shape, dtype=np.float64)
    for g in range(num_blocks):
        out[g * h:(g + 1) * h] = gain * _haar_orthogonal(h, shape[1], rng)
    return _write(t, out)


# ------------------------------------------------------------------------- recurrent helpers
def rnn_default_(t: Any, hidden_size: int, generator: Any = None) -> Any:
    """torch's default for every weight and bias of RNN/GRU/LSTM: U(-k, k), k = 1/sqrt(H)."""
    if hidden_size <= 0:
        raise ValueError(f"rnn_default_: hidden_size must be positive, got {hidden_size}")
    k = 1.0 / math.sqrt(hidden_size)
    return uniform_(t, -k, k, generator=generator)


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
    if len(set(gate_order)) != len(gate_order) or "f" not in gate_order:
        raise ValueError(
            f"set_forget_bias_: gate_order must be distinct gate letters including 'f', got "
            f"{gate_order!r}"
        )
    shape = _shape(bias)
    expected = (len(gate_order) * hidden_size,)
    if shape != expected:
        raise ValueError(
            f"set_forget_bias_: bias of shape {shape} does not hold {len(gate_order)} gates "
            f"({gate_order!r}) of hidden size {hidden_size}; expected shape {expected}"
        )
    k = gate_order.index("f")
    values = _float64_copy(bias)
    values[k * hidden_size:(k + 1) * hidden_size] = value
    return _write(bias, values)


def spectral_radius(w: Any) -> float:
    """The spectral radius max |lambda_i| of a square matrix (Tensor or array).

    For a linear recurrence h_t = W h_{t-1}, gradients through T steps scale like rho(W)^T:
    they vanish when rho < 1 and can explode when rho > 1 (Pascanu, Mikolov and Bengio 2013).

    A matrix on a device is copied to the host explicitly first: CuPy has no eigenvalue
    solver for general (non-symmetric) matrices.
    """
    a = to_device(_float64_copy(w), "cpu")
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"spectral_radius: expected a square matrix, got shape {a.shape}")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(np.linalg.eigvals(a))))


def scale_to_spectral_radius_(w: Any, rho: float) -> Any:
    """Rescale a square matrix in place so that its spectral radius is ``rho``.

    Eigenvalues scale linearly (rho(cW) = |c| rho(W)), so W <- W * rho / rho(W) hits the
    target exactly up to rounding (to about 1e-15 relative in float64; float32 storage rounds
    the result to about 1e-7).
    """
    if rho < 0:
        raise ValueError(f"scale_to_spectral_radius_: rho must be >= 0, got {rho}")
    current = spectral_radius(w)
    if current == 0.0:
        raise ValueError(
            "scale_to_spectral_radius_: the matrix has spectral radius 0 (nilpotent or zero), "
            "so no rescaling can give it another radius"
        )
    return _write(w, _float64_copy(w) * (rho / current))
