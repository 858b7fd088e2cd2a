"""Argument checks of the nn layers, kept beside the math rather than inside it."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import _validate
from ..backend import device_of, get_array_module, get_default_dtype, is_float_dtype, to_device
from ..dtypes import array_of
from ..random import get_generator
from ..tensor import Tensor


def host_lengths(lengths: Any, owner: str, what: str = "lengths") -> np.ndarray:
    """Sequence lengths as a host NumPy integer array, for ``owner`` (named in errors).

    Lengths decide which steps run and which positions are masked, so they are read on the
    host, and as in PyTorch they must be given there (a list, a NumPy array or a CPU Tensor):
    lengths on a device raise a TypeError asking for the explicit copy (``.numpy()``)
    instead of being copied back silently. A non-integer dtype is a ValueError (2.5 steps
    would otherwise be truncated to 2)."""
    raw = lengths._data if isinstance(lengths, Tensor) else lengths
    if get_array_module(raw) is not np:
        raise TypeError(
            f"{owner}: {what} must be on the host (a list, NumPy array or CPU Tensor), as in "
            f"PyTorch, but they are on {device_of(raw)}; copy them explicitly with .numpy() "
            f"(they decide which steps run, so they are read on the host)"
        )
    arr = np.asarray(raw)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{owner}: {what} must be integers, got dtype {arr.dtype} "
                         f"(shape {arr.shape})")
    return arr


# ------------------------------------------------------------------------- layer arguments
def float_dtype(dtype: Any, layer: str) -> np.dtype:
    """``dtype`` as a NumPy floating-point dtype; a TypeError naming ``layer`` otherwise.
    None means the default, ``tr.get_default_dtype()`` (float32 unless changed), as in torch
    (``np.dtype(None)`` alone would be float64)."""
    try:
        dt = np.dtype(get_default_dtype() if dtype is None else dtype)
    except TypeError:
        raise TypeError(f"{layer}: dtype must be a floating-point dtype, got {dtype!r}") from None
    if not is_float_dtype(dt):
        raise TypeError(f"{layer}: dtype must be a floating-point dtype, got {dt}")
    return dt


def check_input_dtype(owner: str, name: str, x: Any, dtype: np.dtype) -> None:
    """Refuse an input ``x`` whose dtype is not the parameters' ``dtype``, with a TypeError
    naming ``owner``, the input ``name``, both dtypes and the fix.

    NumPy would compute a float64 input with float32 parameters silently in float64 (and a
    float16 or integer one in float32), so the output, every gradient upstream of it and
    the time taken would depend on how the data happened to be made
    (``tr.tensor(np.random.randn(5, 4))`` is float64). torch refuses such inputs, and so do
    the recurrent layers and cells here. An input without a dtype (a list) is left to the
    op, which raises its own error."""
    got = getattr(x, "dtype", None)
    if got is None or got == dtype:
        return
    fix = f"convert the input with {name}.to(np.{dtype})"
    if is_float_dtype(got):
        fix += f", or the module with model.to(np.{got})"
    raise TypeError(f"{owner}: {name} dtype {got} does not match the parameters' dtype "
                    f"{dtype} ({fix})")


def check_float_tensor(who: str, name: str, x: Any) -> Tensor:
    """``x`` itself when it is a floating-point Tensor; a TypeError naming ``who`` and
    ``name`` otherwise."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{who}: {name} must be a Tensor, got {type(x).__name__}")
    if not is_float_dtype(x.dtype):
        raise TypeError(f"{who}: {name} must be floating point, got dtype {x.dtype}")
    return x


# ------------------------------------------------------------------------- attention
def check_heads(who: str, embed_dim: Any, num_heads: Any,
                dropout: Any) -> tuple[int, int, float]:
    """``embed_dim`` and ``num_heads`` as positive ints, the first divisible by the second,
    and ``dropout`` as a probability; the errors name ``who``."""
    embed_dim = _validate.size(embed_dim, "embed_dim", who)
    num_heads = _validate.size(num_heads, "num_heads", who)
    if embed_dim % num_heads != 0:
        raise ValueError(f"{who}: embed_dim={embed_dim} is not divisible by "
                         f"num_heads={num_heads}")
    return embed_dim, num_heads, _validate.probability(dropout, "dropout", who)


def check_attention_args(score: Any, scores: tuple, query_size: Any, key_size: Any,
                         value_size: Any, hidden_size: Any, bias: Any,
                         dtype: Any) -> tuple[bool, int, int, Any, Any, np.dtype]:
    """The constructor arguments of :class:`tinygrad_rnn.nn.Attention`; returns (bias,
    query_size, key_size, value_size, hidden_size, dtype) checked (None sizes stay None)."""
    if score not in scores:
        raise ValueError(f"Attention: score must be one of {scores}, got {score!r}")
    bias = _validate.flag(bias, "bias", "Attention")
    query_size = _validate.size(query_size, "query_size", "Attention")
    key_size = _validate.size(key_size, "key_size", "Attention")
    if value_size is not None:
        value_size = _validate.size(value_size, "value_size", "Attention")
    if hidden_size is not None:
        hidden_size = _validate.size(hidden_size, "hidden_size", "Attention")
    if score in ("dot", "scaled_dot") and query_size != key_size:
        raise ValueError(
            f"Attention: score {score!r} needs query_size == key_size, got "
            f"query_size={query_size} and key_size={key_size}; use 'bilinear' or "
            f"'additive' for different sizes"
        )
    if hidden_size is not None and score != "additive":
        raise ValueError(
            f"Attention: hidden_size is only used by the 'additive' score, not {score!r}"
        )
    return bias, query_size, key_size, value_size, hidden_size, float_dtype(dtype, "Attention")


def check_attention_inputs(layer: Any, query: Any, keys: Any, values: Any,
                           causal: Any) -> bool:
    """The inputs of :meth:`tinygrad_rnn.nn.Attention.forward`: floating-point Tensors in
    the parameters' dtype (or, without parameters, in one dtype), of fitting shapes; returns
    ``causal`` as a bool."""
    causal = _validate.flag(causal, "causal", "Attention")
    for name, x in (("query", query), ("keys", keys), ("values", values)):
        check_float_tensor("Attention", name, x)
    _attention_dtypes(layer, query, keys, values)
    _attention_shapes(layer, query, keys, values)
    return causal


def _attention_dtypes(layer: Any, query: Tensor, keys: Tensor, values: Tensor) -> None:
    """query, keys and values in the parameters' dtype ('bilinear', 'additive'), or in
    one dtype ('dot', 'scaled_dot', which have none); a TypeError otherwise, where NumPy
    would silently compute a float32 model's float64 input in float64."""
    first = next(iter(layer.parameters()), None)
    if first is not None:
        for name, x in (("query", query), ("keys", keys), ("values", values)):
            check_input_dtype("Attention", name, x, first.dtype)
        return
    for name, x in (("keys", keys), ("values", values)):
        if x.dtype != query.dtype:
            raise TypeError(
                f"Attention: {name} dtype {x.dtype} does not match the query's dtype "
                f"{query.dtype} (convert one of them, e.g. {name}.to(np.{query.dtype}))"
            )


def _attention_shapes(layer: Any, query: Tensor, keys: Tensor, values: Tensor) -> None:
    shapes = (f"query of shape {query.shape}, keys of shape {keys.shape} and values of "
              f"shape {values.shape}")
    if query.ndim not in (2, 3) or keys.ndim != 3 or values.ndim != 3:
        raise ValueError(
            f"Attention: expected query (N, Tq, Dq) or (N, Dq), keys (N, Tk, Dk) and "
            f"values (N, Tk, Dv); got {shapes}"
        )
    if query.shape[-1] != layer.query_size:
        raise ValueError(
            f"Attention: query of shape {query.shape} has last dimension "
            f"{query.shape[-1]}, but query_size is {layer.query_size}"
        )
    if keys.shape[-1] != layer.key_size:
        raise ValueError(
            f"Attention: keys of shape {keys.shape} have last dimension {keys.shape[-1]}, "
            f"but key_size is {layer.key_size}"
        )
    if layer.value_size is not None and values.shape[-1] != layer.value_size:
        raise ValueError(
            f"Attention: values of shape {values.shape} have last dimension "
            f"{values.shape[-1]}, but value_size is {layer.value_size}"
        )
    if not query.shape[0] == keys.shape[0] == values.shape[0]:
        raise ValueError(f"Attention: batch sizes differ: {shapes}")
    if keys.shape[1] != values.shape[1]:
        raise ValueError(
            f"Attention: keys of shape {keys.shape} and values of shape {values.shape} "
            f"have different lengths ({keys.shape[1]} != {values.shape[1]})"
        )


def check_multihead_args(embed_dim: Any, num_heads: Any, dropout: Any, bias: Any,
                         add_bias_kv: Any, add_zero_attn: Any, kdim: Any, vdim: Any,
                         batch_first: Any, dtype: Any) -> tuple:
    """The constructor arguments of :class:`tinygrad_rnn.nn.MultiheadAttention`; returns
    (embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
    batch_first, dtype) checked (None kdim/vdim stay None)."""
    who = "MultiheadAttention"
    embed_dim, num_heads, dropout = check_heads(who, embed_dim, num_heads, dropout)
    if kdim is not None:
        kdim = _validate.size(kdim, "kdim", who)
    if vdim is not None:
        vdim = _validate.size(vdim, "vdim", who)
    bias = _validate.flag(bias, "bias", who)
    add_bias_kv = _validate.flag(add_bias_kv, "add_bias_kv", who)
    add_zero_attn = _validate.flag(add_zero_attn, "add_zero_attn", who)
    batch_first = _validate.flag(batch_first, "batch_first", who)
    return (embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim,
            batch_first, float_dtype(dtype, who))


def check_multihead_inputs(layer: Any, query: Any, key: Any, value: Any, need_weights: Any,
                           average_attn_weights: Any, is_causal: Any) -> tuple[bool, ...]:
    """The inputs of :meth:`tinygrad_rnn.nn.MultiheadAttention.forward`; returns
    (need_weights, average_attn_weights, is_causal, batched) as bools."""
    who = "MultiheadAttention"
    need_weights = _validate.flag(need_weights, "need_weights", who)
    average_attn_weights = _validate.flag(average_attn_weights, "average_attn_weights", who)
    is_causal = _validate.flag(is_causal, "is_causal", who)
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_float_tensor(who, name, x)
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_input_dtype(who, name, x, layer.out_proj.weight.dtype)
    shapes = (f"query of shape {query.shape}, key of shape {key.shape} and value of shape "
              f"{value.shape}")
    if not query.ndim == key.ndim == value.ndim or query.ndim not in (2, 3):
        raise ValueError(
            f"MultiheadAttention: query, key and value must all be 3-D (batched) or all "
            f"2-D (unbatched); got {shapes}"
        )
    for name, x, size in (("query", query, layer.embed_dim), ("key", key, layer.kdim),
                          ("value", value, layer.vdim)):
        if x.shape[-1] != size:
            raise ValueError(
                f"MultiheadAttention: {name} of shape {x.shape} has last dimension "
                f"{x.shape[-1]}, expected {size}"
            )
    batched = query.ndim == 3
    bdim = (0 if layer.batch_first else 1) if batched else None
    sdim = (1 if layer.batch_first else 0) if batched else 0
    if batched and not query.shape[bdim] == key.shape[bdim] == value.shape[bdim]:
        raise ValueError(f"MultiheadAttention: batch sizes differ: {shapes}")
    if key.shape[sdim] != value.shape[sdim]:
        raise ValueError(
            f"MultiheadAttention: key of shape {key.shape} and value of shape "
            f"{value.shape} have different sequence lengths"
        )
    return need_weights, average_attn_weights, is_causal, batched


def check_unbatched_padding_mask(who: str, key: Tensor, key_padding_mask: Any) -> None:
    """As torch: one (S,) key_padding_mask for the one unbatched sequence of keys ``key``
    (1, S, E); the error names the shape given, not the one after adding N = 1."""
    src = key.shape[1]
    if key_padding_mask.shape != (src,):
        raise ValueError(
            f"{who}: for unbatched input (key of shape {tuple(key.shape[1:])}), "
            f"key_padding_mask must be 1-D of shape {(src,)} (S,), got shape "
            f"{tuple(key_padding_mask.shape)}"
        )


def check_causal_self_attention_input(x: Any, dtype: np.dtype) -> Tensor:
    """The input of :class:`tinygrad_rnn.nn.CausalSelfAttention`: a floating-point (N, T, E)
    Tensor of the parameters' ``dtype``."""
    x = check_float_tensor("CausalSelfAttention", "x", x)
    check_input_dtype("CausalSelfAttention", "x", x, dtype)
    if x.ndim != 3:
        raise ValueError(
            f"CausalSelfAttention: expected x of shape (N, T, E), got shape {x.shape}"
        )
    return x


# ------------------------------------------------------------------------- recurrent layers
def check_recurrent_layer_args(name: str, input_size: Any, hidden_size: Any, num_layers: Any,
                               dtype: Any, bias: Any, batch_first: Any, bidirectional: Any,
                               dropout: Any, engine: Any, nonlinearity: Any, reset: Any,
                               peephole: Any, coupled: Any, forget_bias: Any) -> tuple:
    """The constructor arguments of the recurrent layer ``name`` (RNN, GRU or LSTM); returns
    (input_size, hidden_size, num_layers, dtype, bias, batch_first, bidirectional, dropout,
    peephole, coupled, forget_bias) checked."""
    input_size = _validate.size(input_size, "input_size", name)
    hidden_size = _validate.size(hidden_size, "hidden_size", name)
    num_layers = _validate.size(num_layers, "num_layers", name)
    dtype = float_dtype(dtype, name)
    # read by truthiness, bidirectional='no' would build two directions
    bias = _validate.flag(bias, "bias", name)
    batch_first = _validate.flag(batch_first, "batch_first", name)
    bidirectional = _validate.flag(bidirectional, "bidirectional", name)
    dropout = _validate.probability(dropout, "dropout", name)
    if engine not in ("fused", "autograd"):
        raise ValueError(f"{name}: engine must be 'fused' or 'autograd', got {engine!r}")
    check_nonlinearity(name, nonlinearity)
    check_reset(name, reset)
    peephole, coupled, forget_bias = check_lstm_variant(name, peephole, coupled, forget_bias)
    return (input_size, hidden_size, num_layers, dtype, bias, batch_first, bidirectional,
            dropout, peephole, coupled, forget_bias)


def check_no_projection(proj_size: Any) -> None:
    """torch's LSTM ``proj_size``: only 0 (no projection) is provided here."""
    if _validate.integer(proj_size, "proj_size", "LSTM") != 0:
        raise NotImplementedError(
            f"LSTM: proj_size={proj_size} (an LSTM with projections) is not supported by "
            f"tinygrad_rnn; use proj_size=0 and a Linear layer on the output instead")


def check_recurrent_input(name: str, x: Tensor, input_size: int, weight: Tensor) -> None:
    """The input of the recurrent layer ``name``: 3-D (or 2-D unbatched), ``input_size``
    features, on the device and in the dtype of the parameters (``weight``)."""
    if x.ndim not in (2, 3):
        raise ValueError(
            f"{name}: expected input of 3 dimensions ((T, N, D), or (N, T, D) with "
            f"batch_first) or 2 (T, D) unbatched, got shape {x.shape}"
        )
    if x.shape[-1] != input_size:
        raise ValueError(
            f"{name}: input of shape {x.shape} has feature size {x.shape[-1]}, "
            f"expected input_size={input_size}"
        )
    _check_like_parameters(name, x, weight, ".double()/.float()")


def _check_like_parameters(name: str, x: Tensor, weight: Tensor, convert: str) -> None:
    """The input ``x`` of the layer or cell ``name`` on the device and in the dtype of its
    parameters (``weight``); ``convert`` names the module methods the dtype error suggests."""
    if x.device != weight.device:
        raise RuntimeError(
            f"{name}: the input is on {x.device} but the parameters are on "
            f"{weight.device}; move the input with .to() or the module with .to()"
        )
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{name}: input dtype {x.dtype} does not match the parameters' dtype "
            f"{weight.dtype} (convert the input, or the module with {convert})"
        )


def check_initial_state(name: str, hx: Tensor, x: Tensor, shape: tuple, unbatched: bool,
                        what: str) -> None:
    """A given initial state ``what`` (hx, h_0 or c_0) of the recurrent layer ``name`` for
    the (T, N, D) input ``x``: ``shape`` (L, N, H), or (L, H) for unbatched input, in the
    input's dtype."""
    L, N, H = shape
    if unbatched:
        if hx.ndim != 2:
            # as torch: an unbatched input takes an unbatched state (reshaping an
            # (L, 1, H) state silently would hide a batched/unbatched mix-up)
            raise ValueError(
                f"{name}: for unbatched 2-D input of shape "
                f"{(x.shape[0], x.shape[2])}, {what} must also be 2-D of shape "
                f"{(L, H)} (num_layers * num_directions, hidden_size), "
                f"got a {hx.ndim}-D state of shape {hx.shape}"
            )
        if hx.shape != (L, H):
            raise ValueError(
                f"{name}: {what} must have shape {(L, H)} "
                f"(num_layers * num_directions, hidden_size) for unbatched input, got "
                f"{hx.shape}"
            )
    elif hx.shape != shape:
        raise ValueError(
            f"{name}: {what} must have shape {shape} (num_layers * "
            f"num_directions, N, hidden_size), got {hx.shape}"
        )
    if hx.dtype != x.dtype:
        raise TypeError(f"{name}: {what} dtype {hx.dtype} does not match "
                        f"the parameters' dtype {x.dtype}")


def check_layer_lengths(name: str, lengths: Any, T: int, N: int, minimum: int = 0,
                        why: str = "") -> np.ndarray | None:
    """``lengths`` of the layer ``name`` validated, as a host NumPy array of shape (N,) with
    every entry in [minimum, T] (None stays None); ``why`` ends the range error's note."""
    if lengths is None:
        return None
    arr = host_lengths(lengths, name)
    if arr.shape != (N,):
        raise ValueError(f"{name}: lengths must be an integer array of shape ({N},), got "
                         f"shape {arr.shape} and dtype {arr.dtype}")
    bad = np.flatnonzero((arr < minimum) | (arr > T))
    if bad.size:
        raise ValueError(f"{name}: lengths[{bad[0]}] = {arr[bad[0]]} is outside "
                         f"[{minimum}, {T}] (T = {T} time steps{why})")
    return arr


def check_nonlinearity(name: str, nonlinearity: Any) -> None:
    """The Elman nonlinearity of ``name``: 'tanh' or 'relu'."""
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{name}: nonlinearity must be 'tanh' or 'relu', got "
                         f"{nonlinearity!r}")


def check_reset(name: str, reset: Any) -> None:
    """Where the GRU ``name`` applies its reset gate: 'after' (torch) or 'before'."""
    if reset not in ("after", "before"):
        raise ValueError(f"{name}: reset must be 'after' or 'before', got {reset!r}")


def check_lstm_variant(name: str, peephole: Any, coupled: Any,
                       forget_bias: Any) -> tuple[bool, bool, float]:
    """The LSTM variant options of ``name``: two switches and a finite forget-gate bias."""
    peephole = _validate.flag(peephole, "peephole", name)
    coupled = _validate.flag(coupled, "coupled", name)
    forget_bias = _validate.finite_real(forget_bias, "forget_bias", name)
    return peephole, coupled, forget_bias


# ------------------------------------------------------------------------- recurrent cells
def check_cell_args(name: str, input_size: Any, hidden_size: Any, dtype: Any,
                    bias: Any) -> tuple[int, int, np.dtype, bool]:
    """The constructor arguments shared by the cells (``name``: RNNCell, GRUCell, LSTMCell)."""
    input_size = _validate.size(input_size, "input_size", name)
    hidden_size = _validate.size(hidden_size, "hidden_size", name)
    dtype = float_dtype(dtype, name)
    bias = _validate.flag(bias, "bias", name)
    return input_size, hidden_size, dtype, bias


def check_cell_input(name: str, x: Tensor, input_size: int, weight: Tensor) -> None:
    """The input of the cell ``name``: (N, D) or unbatched (D,), on the device and in the
    dtype of the parameters (``weight``)."""
    if x.ndim not in (1, 2) or x.shape[-1] != input_size:
        raise ValueError(
            f"{name}: expected input of shape (N, {input_size}) or "
            f"({input_size},), got {x.shape}"
        )
    _check_like_parameters(name, x, weight, ".double()")


def check_cell_state(name: str, hx: Tensor, x: Tensor, hidden_size: int, unbatched: bool,
                     what: str) -> None:
    """A given state ``what`` of the cell ``name`` for the (N, D) input ``x``: (N, H), or
    (H,) for an unbatched input, in the input's dtype. The error names the shapes the caller
    passed."""
    want = (hidden_size,) if unbatched else (x.shape[0], hidden_size)
    if hx.shape != want:
        x_shape = (x.shape[1],) if unbatched else x.shape
        raise ValueError(
            f"{name}: {what} must have shape {want} for input of shape "
            f"{x_shape}, got {hx.shape}"
        )
    if hx.dtype != x.dtype:
        raise TypeError(
            f"{name}: {what} dtype {hx.dtype} does not match the input's "
            f"and parameters' dtype {x.dtype}"
        )


def split_lstm_state(name: str, hx: Any) -> tuple[Any, Any]:
    """Split an LSTM state argument into (h, c); None gives (None, None).

    A single array or Tensor is refused: unpacking it would silently split it along its first
    axis into an h and a c. So is a pair with a None in it, such as ``(h_0, None)``: the state
    is either None (both zero) or two states, never half of one (a zero c_0 put in silently
    would hide a bug, e.g. a forgotten cell state when carrying the state between chunks).
    """
    if hx is None:
        return None, None
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        what = (f"{type(hx).__name__} of shape {tuple(hx.shape)}" if hasattr(hx, "shape")
                else f"{type(hx).__name__} of length {len(hx)}"
                if isinstance(hx, (tuple, list)) else type(hx).__name__)
        raise TypeError(f"{name}: the state must be a pair (h_0, c_0) or None, got {what}")
    missing = [part for part, value in zip(("h_0", "c_0"), hx) if value is None]
    if missing:
        raise TypeError(
            f"{name}: the state must be None or a pair (h_0, c_0) of two states, got "
            f"{' and '.join(missing)} = None in the pair; pass hx=None for zero initial "
            f"states, or give both h_0 and c_0"
        )
    return hx[0], hx[1]


# ------------------------------------------------------------------------- layer inputs
def check_generator(generator: Any, owner: str) -> np.random.Generator:
    """:func:`tinygrad_rnn.random.get_generator` with a TypeError that names ``owner``."""
    if generator is None or isinstance(generator, np.random.Generator) or (
            isinstance(generator, (int, np.integer)) and not isinstance(generator, bool)):
        return get_generator(generator)
    raise TypeError(f"{owner}: generator must be an int seed, a numpy.random.Generator or "
                    f"None, got {generator!r} ({type(generator).__name__})")


def check_features(owner: str, name: str, x: Tensor, size: int, what: str) -> None:
    """Refuse an input whose last dimension is not ``size`` (``what`` names the size, e.g.
    ``in_features``), naming ``owner``, ``name`` and the full shape."""
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{owner}: {name} of shape {tuple(x.shape)} does not fit {what} = "
                         f"{size}; the last dimension must be {size}")


def check_ids(owner: str, name: str, ids: Any, size: int,
              what: str = "vocabulary size") -> None:
    """Refuse token ids that are not integers (TypeError) or lie outside [0, ``size``)
    (IndexError naming the first offending id, its position and ``size``), each naming
    ``owner`` and ``name``. ``ids`` is a Tensor, a device array or host array-like."""
    raw = array_of(ids, owner, name, kinds="iu",
                   holds="integer ids (convert whole-number ids with .astype(np.int64))")
    bad = (raw < 0) | (raw >= size)
    xp = get_array_module(raw)
    if bool(xp.any(bad)):  # one device-to-host copy of a flag; the position only on error
        pos = tuple(int(i) for i in np.argwhere(to_device(bad, "cpu"))[0])
        raise IndexError(f"{owner}: {name} holds id {int(raw[pos])} at position {pos}, out "
                         f"of range for {what} {size} (valid ids: 0 .. {size - 1})")
