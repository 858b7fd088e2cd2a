"""``torch.nn.functional``'s names, signatures and keyword names, so that a torch program's
``import torch.nn.functional as F`` can become ``import tinygrad_rnn.nn.functional as F``.

Each function here is a thin wrapper around :mod:`tinygrad_rnn.functional` (the lowercase
primitives with the full derivations in their docstrings) or a short composition of its
differentiable ops; nothing is computed twice. The differences from torch, all deliberate:

* ``softmax``/``log_softmax`` without ``dim`` raise (torch warns and guesses an axis from
  the input's rank, which silently normalises over the batch of a 1-D-per-sample input).
* ``inplace=True`` (``relu``, ``leaky_relu``, ``dropout``, ``elu``, ``silu``) computes the
  result out of place and writes it into the input with ``input.copy_(result)``, which is
  recorded in the graph like torch's in-place ops (a leaf that requires a gradient is
  refused, as in torch). The input is returned.
* Options torch has but this library does not (``embedding``'s ``max_norm``,
  ``scale_grad_by_freq`` and ``sparse``; ``normalize``'s ``out``) raise a
  NotImplementedError that says so, never a silently different result.
* The deprecated ``size_average``/``reduce`` arguments of the losses are mapped to
  ``reduction`` exactly as torch maps them.

Example
-------
>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> import tinygrad_rnn.nn.functional as F
>>> x = tr.tensor(np.array([[1.0, 2.0, 3.0]]))
>>> F.softmax(x, dim=1).sum(dim=1).item()
1.0
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _validate
from .. import functional as _core
from ..arguments import axis_argument, check_integer_ids
from ..backend import device_of, get_array_module, to_device
from ..ops.base import Context, Function
from ..ops.conv import Conv1d
from ..ops.losses import check_reduction
from ..ops.normalization import LayerNorm
from ..creation import cat
from ..tensor import Tensor

__all__ = [
    "relu", "relu_", "tanh", "sigmoid", "softmax", "log_softmax", "dropout", "embedding",
    "linear", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "pad", "one_hot", "normalize", "gelu", "leaky_relu",
    "softplus", "logsigmoid", "elu", "silu", "layer_norm", "conv1d",
]

#: the padding modes of :func:`pad`
PAD_MODES = ("constant", "reflect", "replicate", "circular")


# ------------------------------------------------------------------------------ checks
def _tensor(fn: str, name: str, value: Any) -> Tensor:
    """``value`` as a Tensor (a Tensor as it is; host numbers wrapped), a TypeError naming
    ``fn`` and ``name`` for anything that holds no numbers."""
    return _core.as_tensor_argument(fn, name, value)


def _real(fn: str, name: str, value: Any) -> float:
    """``value`` as a finite Python float (a Python or NumPy real number or a 0-d array of
    one; never a bool or a string); a TypeError or ValueError naming ``fn`` and ``name``."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: {name} must be a real number, got {value!r} "
                        f"({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{fn}: {name} must be finite, got {value!r}")
    return number


def _dim(fn: str, dim: Any) -> int:
    """``dim`` given to ``fn`` as an int; None is refused with the reason (see
    :func:`softmax`)."""
    if dim is None:
        raise TypeError(
            f"{fn}: dim is required, e.g. {fn}(logits, dim=-1) for classes on the last axis. "
            f"torch picks a dim with a deprecation warning when it is left out; tinygrad_rnn "
            f"refuses instead (a deliberate difference), as the guess normalises over the "
            f"batch axis of some inputs"
        )
    return axis_argument(fn, None, dim)


def _cast(fn: str, x: Tensor, dtype: Any) -> Tensor:
    """``x`` converted to the float ``dtype`` (differentiably) before ``fn`` runs, as torch's
    ``dtype=`` argument does; None leaves it as it is."""
    if dtype is None:
        return x
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{fn}: dtype must be a floating-point dtype, got {dtype!r}") from None
    if dt.kind != "f":
        raise TypeError(f"{fn}: dtype must be a floating-point dtype, got {dt}")
    return x if x.dtype == dt else x.astype(dt)


def legacy_reduction(fn: str, size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's mapping of the deprecated ``size_average`` and ``reduce`` flags to
    ``reduction``: when either is given, ``reduce=False`` means 'none', otherwise
    ``size_average=False`` means 'sum' and anything else 'mean' (each defaults to True);
    ``reduction`` is then ignored, as in torch."""
    if size_average is None and reduce is None:
        return reduction
    size_average = (True if size_average is None
                    else _validate.flag(size_average, "size_average", fn))
    reduce = True if reduce is None else _validate.flag(reduce, "reduce", fn)
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _inplace(fn: str, x: Tensor, result: Tensor, inplace: Any) -> Tensor:
    """``result``, or, with ``inplace``, ``x`` after ``x.copy_(result)`` (recorded in the
    graph when ``x`` is part of one)."""
    if not _validate.flag(inplace, "inplace", fn):
        return result
    if x.is_leaf and x.requires_grad:
        raise RuntimeError(f"{fn}(inplace=True): the input is a leaf that requires a gradient, "
                           f"which cannot be written in place (as in torch); use "
                           f"inplace=False")
    return x.copy_(result)


def _unsupported(fn: str, name: str, value: Any, default: Any) -> None:
    """A NotImplementedError naming ``fn`` and ``name`` unless ``value`` is torch's
    default ``default`` (an option this library does not provide)."""
    if value is not default and value != default:
        raise NotImplementedError(f"{fn}: {name}={value!r} is not supported by tinygrad_rnn "
                                  f"(only the default {name}={default!r})")


# ------------------------------------------------------------------------------ activations
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """max(x, 0); derivative 1[x > 0] (0 at 0). ``inplace`` writes into ``input``."""
    x = _tensor("relu", "input", input)
    return _inplace("relu", x, _core.relu(x), inplace)


def relu_(input: Tensor) -> Tensor:
    """:func:`relu` in place (``relu(input, inplace=True)``)."""
    return relu(input, inplace=True)


def tanh(input: Tensor) -> Tensor:
    """tanh(x); derivative 1 - tanh(x)^2."""
    return _core.tanh(_tensor("tanh", "input", input))


def sigmoid(input: Tensor) -> Tensor:
    """1 / (1 + exp(-x)), overflow-free; derivative y (1 - y)."""
    return _core.sigmoid(_tensor("sigmoid", "input", input))


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype: Any = None) -> Tensor:
    """Softmax along ``dim`` (required here; see the module notes), max-shifted.

    Math: y_i = exp(x_i) / sum_j exp(x_j); VJP y * (g - <g, y>). ``dtype`` converts the
    input first, as in torch (e.g. float64 for a float32 input)."""
    x = _cast("softmax", _tensor("softmax", "input", input), dtype)
    return _core.softmax(x, dim=_dim("softmax", dim))


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype: Any = None) -> Tensor:
    """log(softmax(x)) along ``dim`` (required) in the log-sum-exp form; VJP
    g - softmax(x) * sum(g). ``dtype`` converts the input first."""
    x = _cast("log_softmax", _tensor("log_softmax", "input", input), dtype)
    return _core.log_softmax(x, dim=_dim("log_softmax", dim))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """x for x > 0, ``negative_slope`` * x otherwise; derivative 1 or ``negative_slope``
    (``negative_slope`` at 0, as in torch)."""
    x = _tensor("leaky_relu", "input", input)
    slope = _real("leaky_relu", "negative_slope", negative_slope)
    return _inplace("leaky_relu", x, _core.where(x._data > 0, x, x * slope), inplace)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """x for x > 0, alpha (exp(x) - 1) otherwise; derivative 1 or alpha exp(x). The
    exponential only sees the non-positive entries, so it never overflows."""
    x = _tensor("elu", "input", input)
    alpha = _real("elu", "alpha", alpha)
    positive = x._data > 0
    negative_part = _core.exp(_core.where(positive, 0.0, x)) - 1.0
    return _inplace("elu", x, _core.where(positive, x, negative_part * alpha), inplace)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """x sigmoid(x) (swish); derivative s + x s (1 - s)."""
    x = _tensor("silu", "input", input)
    return _inplace("silu", x, x * _core.sigmoid(x), inplace)


def _softplus_stable(z: Tensor) -> Tensor:
    """log(1 + exp(z)) as max(z, 0) + log(1 + exp(-|z|)): never overflows, and at z = 0
    the split gradient of the maximum gives the derivative sigmoid(0) = 1/2 exactly."""
    return _core.maximum(z, 0.0) + _core.log(1.0 + _core.exp(-_core.abs(z)))


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta x)) / beta, and x itself where beta x > ``threshold`` (torch's
    rule); derivative sigmoid(beta x) (1 above the threshold)."""
    x = _tensor("softplus", "input", input)
    beta = _real("softplus", "beta", beta)
    threshold = _real("softplus", "threshold", threshold)
    z = x * beta
    smooth = _softplus_stable(z) if beta == 1.0 else _softplus_stable(z) / beta
    return _core.where(z._data > threshold, x, smooth)


def logsigmoid(input: Tensor) -> Tensor:
    """log sigmoid(x) = -softplus(-x), overflow-free; derivative sigmoid(-x)."""
    x = _tensor("logsigmoid", "input", input)
    return -_softplus_stable(-x)


def _erf(a: Any) -> Any:
    """The error function, elementwise, on the host (NumPy has none; ``math.erf`` is
    correctly rounded to a few ulps), returned on ``a``'s device."""
    on_host = get_array_module(a) is np
    host = a if on_host else to_device(a, "cpu")
    out = np.vectorize(math.erf, otypes=[np.float64])(host).astype(a.dtype)
    return out if on_host else to_device(out, device_of(a))


class GELU(Function):
    """y = x Phi(x) with Phi the standard normal CDF (torch's ``gelu``, approximate='none').

    Math: Phi(x) = (1 + erf(x / sqrt(2))) / 2, phi(x) = exp(-x^2 / 2) / sqrt(2 pi);
    dy/dx = Phi(x) + x phi(x); VJP: g (Phi(x) + x phi(x)).

    Notes
    -----
    Defined here because it is the only torch activation that no composition of the
    library's primitives gives (it needs erf); its gradient is checked in float64 with
    central differences like every other op.
    """

    int_inputs_as_float = True

    @staticmethod
    def forward(ctx: Context, x: Any) -> Any:
        cdf = (1 + _erf(x / x.dtype.type(math.sqrt(2.0)))) / 2
        ctx.save_for_backward(x, cdf)
        return x * cdf

    @staticmethod
    def backward(ctx: Context, g: Any) -> Any:
        x, cdf = ctx.saved_arrays
        xp = get_array_module(x)
        pdf = xp.exp(-x * x / 2) / x.dtype.type(math.sqrt(2.0 * math.pi))
        return g * (cdf + x * pdf)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit: x Phi(x) (``approximate='none'``, :class:`GELU`) or
    torch's tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (``'tanh'``)."""
    x = _tensor("gelu", "input", input)
    if approximate == "none":
        return GELU.apply(x)
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (_core.tanh(inner) + 1.0)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


# ------------------------------------------------------------------------------ layers
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """y = x W^T + b; see :func:`tinygrad_rnn.functional.linear`."""
    return _core.linear(input, weight, bias)


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Inverted dropout (zero with probability ``p``, scale the rest by 1/(1-p)) when
    ``training``; the mask comes from the default generator (``tr.manual_seed``). See
    :func:`tinygrad_rnn.functional.dropout`."""
    x = _tensor("dropout", "input", input)
    return _inplace("dropout", x, _core.dropout(x, p, training), inplace)


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows ``weight[input]``; the ``padding_idx`` row gets no gradient. ``max_norm``,
    ``scale_grad_by_freq`` and ``sparse`` are not supported (NotImplementedError)."""
    _unsupported("embedding", "max_norm", max_norm, None)
    _unsupported("embedding", "scale_grad_by_freq", scale_grad_by_freq, False)
    _unsupported("embedding", "sparse", sparse, False)
    if max_norm is None:
        _real("embedding", "norm_type", norm_type)
    return _core.embedding(input, weight, padding_idx)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """Class ids (any shape, integers >= 0) as one-hot rows: an int64 Tensor of shape
    ``tensor.shape + (num_classes,)``; ``num_classes=-1`` takes the largest id + 1. Ids
    outside [0, num_classes) are an IndexError, as torch raises. Not differentiable."""
    ids = tensor._data if isinstance(tensor, Tensor) else np.asarray(tensor)
    check_integer_ids("one_hot", ids)
    if isinstance(num_classes, (bool, np.bool_)) or not isinstance(
            num_classes, (int, np.integer)):
        raise TypeError(f"one_hot: num_classes must be an int, got {num_classes!r}")
    xp = get_array_module(ids)
    if num_classes == -1:
        if ids.size == 0:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass it")
        num_classes = int(ids.max()) + 1
    if num_classes < 1 and ids.size:
        raise ValueError(f"one_hot: num_classes must be positive or -1, got {num_classes}")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_classes):
        raise IndexError(f"one_hot: class ids must lie in [0, {num_classes}), got values "
                         f"from {int(ids.min())} to {int(ids.max())}")
    out = (ids[..., None] == xp.arange(num_classes)).astype(np.int64)
    return Tensor(out)


def pad(input: Tensor, pad: Any, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad (or, with negative sizes, crop) the last ``len(pad) // 2`` dimensions, as torch.

    ``pad`` lists (left, right) sizes starting from the *last* dimension:
    ``(l_last, r_last, l_prev, r_prev, ...)``. Modes: 'constant' (``value``, default 0),
    'reflect' (mirror without repeating the edge; sizes below the dimension's size),
    'replicate' (repeat the edge) and 'circular' (wrap around). Differentiable: the
    gradient of the padding is 0 ('constant') or flows back to the entries it copies.
    """
    x = _tensor("pad", "input", input)
    sizes = _pad_sizes(pad, x.ndim)
    if mode not in PAD_MODES:
        raise ValueError(f"pad: mode must be one of {PAD_MODES}, got {mode!r}")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"pad: value applies to mode='constant' only, got value={value!r} "
                         f"with mode={mode!r}")
    fill = 0.0 if value is None else _real("pad", "value", value)
    for k in range(len(sizes) // 2):
        axis = x.ndim - 1 - k
        left, right = sizes[2 * k], sizes[2 * k + 1]
        if mode == "constant":
            x = _pad_constant(x, axis, left, right, fill)
        else:
            x = _pad_by_index(x, axis, left, right, mode)
    return x


def _pad_sizes(pad: Any, ndim: int) -> list:
    """``pad`` as a list of ints of even length at most 2 * ``ndim`` (torch's rule)."""
    if not isinstance(pad, (tuple, list)) or not all(
            isinstance(p, (int, np.integer)) and not isinstance(p, (bool, np.bool_))
            for p in pad):
        raise TypeError(f"pad: pad must be a tuple of ints (left, right, ...), got {pad!r}")
    if len(pad) % 2 or len(pad) // 2 > ndim:
        raise ValueError(f"pad: pad must hold an even number of sizes, two per padded "
                         f"dimension, at most {2 * ndim} for a {ndim}-d input, got {pad!r}")
    return [int(p) for p in pad]


def _slice_axis(x: Tensor, axis: int, start: int, stop: int) -> Tensor:
    """x[..., start:stop, ...] along ``axis`` (a differentiable view)."""
    return x[(slice(None),) * axis + (slice(start, stop),)]


def _pad_constant(x: Tensor, axis: int, left: int, right: int, fill: float) -> Tensor:
    """``x`` with ``left``/``right`` entries of ``fill`` added along ``axis`` (a negative
    size crops)."""
    n = x.shape[axis]
    if left < 0 or right < 0:
        if n + min(left, 0) + min(right, 0) < 0:
            raise ValueError(f"pad: cannot crop {-min(left, 0)} + {-min(right, 0)} entries "
                             f"from dimension {axis} of size {n} (input shape {x.shape})")
        x = _slice_axis(x, axis, max(-left, 0), n - max(-right, 0))
    parts = []
    xp = get_array_module(x._data)
    for size in (left, right):
        shape = x.shape[:axis] + (max(size, 0),) + x.shape[axis + 1:]
        parts.append(Tensor(xp.full(shape, fill, dtype=x.dtype)))
    return cat([parts[0], x, parts[1]], dim=axis)


def _pad_by_index(x: Tensor, axis: int, left: int, right: int, mode: str) -> Tensor:
    """``x`` padded along ``axis`` by gathering existing entries (one advanced index, whose
    gradient scatter-adds back to the entries copied)."""
    n = x.shape[axis]
    if mode == "reflect" and (left >= n or right >= n):
        raise ValueError(f"pad: reflect padding ({left}, {right}) must be smaller than the "
                         f"dimension's size {n} (dimension {axis} of shape {x.shape})")
    if n == 0:
        raise ValueError(f"pad: mode={mode!r} cannot pad an empty dimension ({axis} of shape "
                         f"{x.shape})")
    positions = np.arange(-left, n + right)
    if mode == "replicate":
        index = np.clip(positions, 0, n - 1)
    elif mode == "circular":
        index = positions % n
    else:  # reflect about the edge entries: -1 -> 1, n -> n - 2
        period = 2 * (n - 1) if n > 1 else 1
        folded = np.abs(positions) % period
        index = np.where(folded >= n, period - folded, folded)
    return x[(slice(None),) * axis + (index,)]


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out: Any = None) -> Tensor:
    """x / max(||x||_p, eps) along ``dim``, as torch.

    Computed as x / max(sum |x|^p, eps^p)^(1/p), the same value (the p-th root is
    monotone), whose gradient stays finite for an all-zero row (0 there, as torch).
    ``out`` is not supported."""
    _unsupported("normalize", "out", out, None)
    x = _tensor("normalize", "input", input)
    p = _real("normalize", "p", p)
    eps = _real("normalize", "eps", eps)
    if p <= 0:
        raise ValueError(f"normalize: p must be positive, got {p}")
    axis = axis_argument("normalize", None, dim)
    powered = x * x if p == 2.0 else _core.abs(x) ** p
    total = _core.clip(powered.sum(dim=axis, keepdims=True), min=eps ** p)
    norm = _core.sqrt(total) if p == 2.0 else total ** (1.0 / p)
    return x / norm


def normalized_shape_tuple(fn: str, normalized_shape: Any) -> tuple:
    """``normalized_shape`` (an int, or a tuple, list or Size of ints) as a non-empty tuple
    of positive Python ints; a TypeError or ValueError naming ``fn`` otherwise."""
    if isinstance(normalized_shape, (int, np.integer)) and not isinstance(
            normalized_shape, (bool, np.bool_)):
        normalized_shape = (normalized_shape,)
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError(f"{fn}: normalized_shape must be an int or a tuple/list of ints, got "
                        f"{normalized_shape!r} ({type(normalized_shape).__name__})")
    sizes = []
    for size in normalized_shape:
        if isinstance(size, (bool, np.bool_)) or not isinstance(size, (int, np.integer)):
            raise TypeError(f"{fn}: normalized_shape must hold ints, got {normalized_shape!r}")
        if size < 1:
            raise ValueError(f"{fn}: normalized_shape must hold positive sizes, got "
                             f"{tuple(normalized_shape)}")
        sizes.append(int(size))
    if not sizes:
        raise ValueError(f"{fn}: normalized_shape must name at least one dimension, got ()")
    return tuple(sizes)


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Layer normalization over the last ``len(normalized_shape)`` dimensions, as torch:
    y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance.

    One primitive, :class:`tinygrad_rnn.ops.LayerNorm`, with the hand-written backward of
    docs/layernorm.md. ``weight`` and ``bias`` (shape ``normalized_shape``) are optional,
    independently. An input whose trailing shape is not ``normalized_shape`` is a
    RuntimeError (torch's type for it)."""
    x = _tensor("layer_norm", "input", input)
    shape = normalized_shape_tuple("layer_norm", normalized_shape)
    eps = _real("layer_norm", "eps", eps)
    if eps < 0:
        raise ValueError(f"layer_norm: eps must be >= 0, got {eps}")
    k = len(shape)
    if x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
        raise RuntimeError(f"layer_norm: given normalized_shape={list(shape)}, expected an "
                           f"input of shape [*, {', '.join(map(str, shape))}], but got an "
                           f"input of shape {list(x.shape)}")
    params = []
    for name, p in (("weight", weight), ("bias", bias)):
        if p is None:
            continue
        p = _tensor("layer_norm", name, p)
        if tuple(p.shape) != shape:
            raise RuntimeError(f"layer_norm: {name} has shape {list(p.shape)}, expected "
                               f"normalized_shape {list(shape)}")
        params.append(p)
    return LayerNorm.apply(x, *params, normalized_ndim=k, eps=eps,
                           has_weight=weight is not None, has_bias=bias is not None)


# ------------------------------------------------------------------------------ convolution
def conv_int(fn: str, name: str, value: Any, minimum: int) -> int:
    """A convolution size argument (``stride``, ``dilation``, ``kernel_size``): an int or a
    1-tuple of one (torch's forms for one dimension), >= ``minimum``; errors name ``fn``."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise ValueError(f"{fn}: {name} must be an int or a tuple of one int for a 1-D "
                             f"convolution, got {value!r}")
        value = value[0]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fn}: {name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {value}")
    return int(value)


def conv_padding(fn: str, padding: Any, kernel_size: int, stride: int,
                 dilation: int) -> tuple[int, int]:
    """torch's ``padding`` of a 1-D convolution as (left, right) zero counts: an int p (or
    (p,)) is (p, p); ``'valid'`` is (0, 0); ``'same'`` pads d (K - 1) in all, the odd one
    on the right, so the output is as long as the input (stride 1 only, as in torch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0
        if padding == "same":
            if stride != 1:
                raise ValueError(f"{fn}: padding='same' is not supported for strided "
                                 f"convolutions (stride={stride}), as in torch; give the "
                                 f"padding as an int")
            total = dilation * (kernel_size - 1)
            return total // 2, total - total // 2
        raise ValueError(f"{fn}: padding must be an int, 'same' or 'valid', got {padding!r}")
    p = conv_int(fn, "padding", padding, 0)
    return p, p


def conv1d_padded(input: Tensor, weight: Tensor, bias: Tensor | None, stride: int,
                  left: int, right: int, dilation: int) -> Tensor:
    """The one call of :class:`tinygrad_rnn.ops.Conv1d` behind :func:`conv1d`,
    :class:`~tinygrad_rnn.nn.Conv1d` and :class:`~tinygrad_rnn.nn.CausalConv1d`: zeros
    padded ``left`` and ``right`` (which may differ: a causal convolution pads only on the
    left); an unbatched input (C_in, L) gives an unbatched output (C_out, L_out)."""
    x = _tensor("conv1d", "input", input)
    w = _tensor("conv1d", "weight", weight)
    if x.ndim not in (2, 3):
        raise ValueError(f"conv1d: expected input of shape (N, C_in, L) or (C_in, L) "
                         f"(unbatched), got shape {x.shape}")
    unbatched = x.ndim == 2
    if unbatched:
        x = x.reshape(1, *x.shape)
    params = (w,) if bias is None else (w, _tensor("conv1d", "bias", bias))
    y = Conv1d.apply(x, *params, stride=stride, padding=(left, right), dilation=dilation,
                     has_bias=bias is not None)
    return y.reshape(*y.shape[1:]) if unbatched else y


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution (a cross-correlation, as torch's) of ``input`` (N, C_in, L) or
    (C_in, L) with ``weight`` (C_out, C_in, K), plus ``bias`` (C_out,).

    One primitive, :class:`tinygrad_rnn.ops.Conv1d`: a GEMM over the unfolded windows and the
    hand-written backward of docs/sequence_models.md, (CV1)-(CV7). ``padding`` is an int,
    ``'same'`` or ``'valid'``; ``groups`` other than 1 is a NotImplementedError."""
    fn = "conv1d"
    if groups != 1:
        raise NotImplementedError(f"{fn}: groups={groups!r} is not supported by tinygrad_rnn "
                                  f"(only groups=1, every output channel reads every input "
                                  f"channel)")
    w = _tensor(fn, "weight", weight)
    if w.ndim != 3:
        raise ValueError(f"{fn}: expected weight of shape (C_out, C_in, kernel_size), got "
                         f"{w.shape}")
    stride = conv_int(fn, "stride", stride, 1)
    dilation = conv_int(fn, "dilation", dilation, 1)
    left, right = conv_padding(fn, padding, w.shape[2], stride, dilation)
    return conv1d_padded(input, w, bias, stride, left, right, dilation)


# ------------------------------------------------------------------------------ losses
def cross_entropy(input: Tensor, target: Any, weight: Any = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of logits (torch's layout: classes on axis 1) against class ids or
    class probabilities; see :func:`tinygrad_rnn.functional.cross_entropy`."""
    reduction = legacy_reduction("cross_entropy", size_average, reduce, reduction)
    return _core.cross_entropy(input, target, weight, ignore_index, reduction,
                               label_smoothing)


def nll_loss(input: Tensor, target: Any, weight: Any = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities; see
    :func:`tinygrad_rnn.functional.nll_loss`."""
    reduction = legacy_reduction("nll_loss", size_average, reduce, reduction)
    return _core.nll_loss(input, target, weight, ignore_index, reduction)


def _weighted(fn: str, loss: Tensor, weight: Any, reduction: str) -> Tensor:
    """An elementwise ``loss`` ('none') times ``weight`` (of the same shape, as torch
    requires), then reduced: 'mean' is the weighted mean sum(w loss) / sum(w), as torch's
    weighted mse/l1. Host weights take the loss's dtype."""
    w = _core.constant_data(weight, loss, fn, "weight")
    if not isinstance(weight, Tensor):
        w = np.asarray(w, dtype=loss.dtype)
    w = Tensor(w)
    if tuple(w.shape) != tuple(loss.shape):
        raise ValueError(f"{fn}: weight of shape {tuple(w.shape)} must have the input's shape "
                         f"{tuple(loss.shape)} (as torch requires)")
    loss = loss * w
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w.sum()


def mse_loss(input: Tensor, target: Any, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Any = None) -> Tensor:
    """Mean squared error (input and target of one shape); dL/dinput = 2 (x - t) / n for
    'mean'. ``weight`` (the input's shape) multiplies each squared error, and 'mean' is
    then the weighted mean, as torch's."""
    reduction = legacy_reduction("mse_loss", size_average, reduce, reduction)
    if weight is None:
        return _core.mse_loss(_tensor("mse_loss", "input", input), target, reduction)
    check_reduction("mse_loss", reduction)
    loss = _core.mse_loss(_tensor("mse_loss", "input", input), target, "none")
    return _weighted("mse_loss", loss, weight, reduction)


def l1_loss(input: Tensor, target: Any, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Any = None) -> Tensor:
    """Mean absolute error |x - t| (input and target of one shape); derivative sign(x - t)
    (0 where equal, as torch). ``weight`` multiplies each error before the reduction."""
    reduction = legacy_reduction("l1_loss", size_average, reduce, reduction)
    check_reduction("l1_loss", reduction)
    x = _tensor("l1_loss", "input", input)
    t = _core.target_on_device(target, x)
    t_shape = tuple(getattr(t, "shape", np.shape(t)))
    if t_shape != x.shape:
        raise ValueError(f"l1_loss: input of shape {x.shape} and target of shape {t_shape} "
                         f"must have the same shape")
    loss = _core.abs(x - t)
    if weight is not None:
        return _weighted("l1_loss", loss, weight, reduction)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def binary_cross_entropy(input: Tensor, target: Any, weight: Any = None,
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Tensor:
    """Binary cross entropy of probabilities in [0, 1], logs clamped at -100 as torch; see
    :func:`tinygrad_rnn.functional.binary_cross_entropy`."""
    reduction = legacy_reduction("binary_cross_entropy", size_average, reduce, reduction)
    return _core.binary_cross_entropy(input, target, weight, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Any, weight: Any = None,
                                     size_average: Any = None, reduce: Any = None,
                                     reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    """Binary cross entropy on logits, overflow-free; see
    :func:`tinygrad_rnn.functional.binary_cross_entropy_with_logits`."""
    fn = "binary_cross_entropy_with_logits"
    reduction = legacy_reduction(fn, size_average, reduce, reduction)
    return _core.binary_cross_entropy_with_logits(_tensor(fn, "input", input), target, weight,
                                                  reduction, pos_weight)
