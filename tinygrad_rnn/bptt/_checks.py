"""Argument checks of the BPTT kernels, so that each kernel body reads as its math.

Every kernel starts with one call into this module (``checks.rnn_forward(...)``,
``checks.sequence_backward(...)``, ...), which raises a TypeError, ValueError or RuntimeError
naming the kernel, the argument and the full shapes and dtypes involved, and returns the sizes
read off the validated arguments. Raw backend arrays only; nothing above
:mod:`tinygrad_rnn.backend`.

Devices
-------
The kernels run on the device of their inputs: every array call goes through the inputs'
array module ``xp``, and all arguments of one call must live on one device (a RuntimeError
names the two devices otherwise). ``lengths`` is the one exception: like PyTorch, which wants
sequence lengths as a CPU tensor, the kernels take them on the host (a list or NumPy array),
validate them there, build the step mask there and copy the mask to the device once. Lengths
given as device data are refused with a TypeError rather than copied back silently.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..backend import device_of, get_array_module
from ._layout import Array, lstm_gates


# --------------------------------------------------------------------------------------------
# one call per kernel
# --------------------------------------------------------------------------------------------
def rnn_step_forward(x_t: Array, h_prev: Array, weight_ih: Array, weight_hh: Array,
                     bias_ih: Array | None, bias_hh: Array | None,
                     nonlinearity: str) -> Sizes:
    """The arguments of :func:`tinygrad_rnn.bptt.rnn_step_forward`; returns (0, N, D, H)."""
    fname = "rnn_step_forward"
    check_nonlinearity(fname, nonlinearity)
    return check_recurrent_args(fname, 1, x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh,
                                sequence=False, x_name="x_t", h_name="h_prev")


def rnn_forward(x: Array, h0: Array, weight_ih: Array, weight_hh: Array,
                bias_ih: Array | None, bias_hh: Array | None, nonlinearity: str,
                lengths: Any, reverse: Any) -> tuple[Sizes, np.ndarray | None]:
    """The arguments of :func:`tinygrad_rnn.bptt.rnn_forward`; returns the sizes (T, N, D, H)
    and the validated host lengths (None stays None)."""
    fname = "rnn_forward"
    check_nonlinearity(fname, nonlinearity)
    check_flag(fname, "reverse", reverse)
    sizes = check_recurrent_args(fname, 1, x, h0, weight_ih, weight_hh, bias_ih, bias_hh,
                                 sequence=True)
    return sizes, check_lengths(fname, lengths, sizes.T, sizes.N)


def gru_step_forward(x_t: Array, h_prev: Array, weight_ih: Array, weight_hh: Array,
                     bias_ih: Array | None, bias_hh: Array | None, reset: str) -> Sizes:
    """The arguments of :func:`tinygrad_rnn.bptt.gru_step_forward`; returns (0, N, D, H)."""
    fname = "gru_step_forward"
    check_reset(fname, reset)
    return check_recurrent_args(fname, 3, x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh,
                                sequence=False, x_name="x_t", h_name="h_prev")


def gru_forward(x: Array, h0: Array, weight_ih: Array, weight_hh: Array,
                bias_ih: Array | None, bias_hh: Array | None, reset: str, lengths: Any,
                reverse: Any) -> tuple[Sizes, np.ndarray | None]:
    """The arguments of :func:`tinygrad_rnn.bptt.gru_forward`; returns the sizes (T, N, D, H)
    and the validated host lengths (None stays None)."""
    fname = "gru_forward"
    check_reset(fname, reset)
    check_flag(fname, "reverse", reverse)
    sizes = check_recurrent_args(fname, 3, x, h0, weight_ih, weight_hh, bias_ih, bias_hh,
                                 sequence=True)
    return sizes, check_lengths(fname, lengths, sizes.T, sizes.N)


def lstm_step_forward(x_t: Array, h_prev: Array, c_prev: Array, weight_ih: Array,
                      weight_hh: Array, bias_ih: Array | None, bias_hh: Array | None,
                      weight_ch: Array | None, coupled: Any) -> Sizes:
    """The arguments of :func:`tinygrad_rnn.bptt.lstm_step_forward`; returns (0, N, D, H)."""
    fname = "lstm_step_forward"
    check_flag(fname, "coupled", coupled)
    G = lstm_gates(coupled)
    return check_recurrent_args(
        fname, G, x_t, h_prev, weight_ih, weight_hh, bias_ih, bias_hh, sequence=False,
        cell=True, c0=c_prev, weight_ch=weight_ch, peepholes=G - 1, x_name="x_t",
        h_name="h_prev", c_name="c_prev")


def lstm_forward(x: Array, h0: Array, c0: Array, weight_ih: Array, weight_hh: Array,
                 bias_ih: Array | None, bias_hh: Array | None, weight_ch: Array | None,
                 coupled: Any, lengths: Any, reverse: Any) -> tuple[Sizes, np.ndarray | None]:
    """The arguments of :func:`tinygrad_rnn.bptt.lstm_forward`; returns the sizes (T, N, D, H)
    and the validated host lengths (None stays None)."""
    fname = "lstm_forward"
    check_flag(fname, "coupled", coupled)
    check_flag(fname, "reverse", reverse)
    G = lstm_gates(coupled)
    sizes = check_recurrent_args(
        fname, G, x, h0, weight_ih, weight_hh, bias_ih, bias_hh, sequence=True, cell=True,
        c0=c0, weight_ch=weight_ch, peepholes=G - 1)
    return sizes, check_lengths(fname, lengths, sizes.T, sizes.N)


def step_backward(fname: str, cache: Any, cache_type: type, **grads: Array | None) -> None:
    """The arguments of a per-step backward ``fname``: ``cache`` must be the ``cache_type``
    of the matching forward, and each upstream gradient ``d<name>`` None or shaped, typed and
    placed like the cache's ``<name>`` (``dh_t`` like ``cache.h_t``)."""
    check_cache(fname, cache, cache_type, fname.replace("backward", "forward"))
    for name, g in grads.items():
        like = getattr(cache, name[1:])
        check_grad_arg(fname, name, g, like.shape, like.dtype, cache.h_t)


def sequence_backward(fname: str, cache: Any, cache_type: type, input_grad: Any,
                      state_grads: Any, **grads: Array | None) -> Sizes:
    """The arguments of a fused backward ``fname``: the cache of the matching forward, the
    two switches, and the upstream gradients (``dhs`` (T, N, H), the others (N, H)), each None
    or of the forward's dtype and device. Returns the sizes (T, N, D, H) of the forward."""
    check_cache(fname, cache, cache_type, fname.replace("backward", "forward"))
    check_flag(fname, "input_grad", input_grad)
    check_flag(fname, "state_grads", state_grads)
    # the (T + 1, N, H) buffer of hidden states (the LSTM's is h_states, next to c_states)
    states = cache.h_states if "h_states" in cache._fields else cache.states
    T, N, D = (int(s) for s in cache.x.shape)
    H = int(states.shape[2])
    for name, g in grads.items():
        shape = (T, N, H) if name == "dhs" else (N, H)
        check_grad_arg(fname, name, g, shape, states.dtype, states)
    return Sizes(T, N, D, H)


# --------------------------------------------------------------------------------------------
# the checks they are made of
# --------------------------------------------------------------------------------------------
def check_nonlinearity(fname: str, nonlinearity: str) -> None:
    """The Elman nonlinearity is 'tanh' or 'relu'."""
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{fname}: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")


def check_reset(fname: str, reset: str) -> None:
    """Where the GRU's reset gate acts: 'after' (PyTorch) or 'before' the recurrent GEMM."""
    if reset not in ("after", "before"):
        raise ValueError(f"{fname}: reset must be 'after' or 'before', got {reset!r}")


def _shape(a: Array) -> tuple[int, ...]:
    return tuple(int(s) for s in a.shape)


def _is_array(a: Any) -> bool:
    """True for a NumPy, CuPy or stand-in array (anything with a shape, a dtype and ndim)."""
    return all(hasattr(a, attr) for attr in ("shape", "dtype", "ndim"))


def check_array(fname: str, name: str, a: Any, hint: str = "", optional: bool = False) -> None:
    """An array argument must be an array (``optional``: an array or None, and None is not
    checked here); TypeError naming ``fname``, ``name`` and the type that was given otherwise
    (``hint`` is appended to the message)."""
    if not _is_array(a):
        what = "an array or None" if optional else "an array"
        raise TypeError(f"{fname}: {name} must be {what}, got {type(a).__name__}{hint}")


def check_flag(fname: str, name: str, value: Any) -> None:
    """A switch must be a bool (``bool`` or ``numpy.bool_``) or the integer 0 or 1 (Python or
    NumPy; ``reverse=1`` is a common spelling): plain truthiness would let ``reverse="no"``
    mean True, so strings, other integers, floats and None are a TypeError."""
    if not (isinstance(value, (bool, np.bool_))
            or isinstance(value, (int, np.integer)) and value in (0, 1)):
        raise TypeError(f"{fname}: {name} must be a bool (True or False), got {value!r} of "
                        f"type {type(value).__name__}")


def check_cache(fname: str, cache: Any, cls: type, producer: str) -> None:
    """A backward function must get the cache of its own forward function."""
    if not isinstance(cache, cls):
        raise TypeError(f"{fname}: cache must be the {cls.__name__} returned by {producer}, "
                        f"got {type(cache).__name__}")


class Sizes(NamedTuple):
    """Sizes read off validated arguments: T time (0 for a single step), N batch, D input,
    H hidden."""

    T: int
    N: int
    D: int
    H: int


def check_recurrent_args(
    fname: str,
    gates: int,
    x: Array,
    h0: Array,
    weight_ih: Array,
    weight_hh: Array,
    bias_ih: Array | None,
    bias_hh: Array | None,
    *,
    sequence: bool,
    cell: bool = False,
    c0: Array | None = None,
    weight_ch: Array | None = None,
    peepholes: int = 0,
    x_name: str = "x",
    h_name: str = "h0",
    c_name: str = "c0",
) -> Sizes:
    """Validate shapes and dtypes of a recurrent call; raise ValueError/TypeError naming
    ``fname`` and the full shapes involved. Returns the sizes (T, N, D, H).

    ``x`` is (T, N, D) when ``sequence`` else (N, D); ``h0`` is (N, H) and fixes H. ``x``,
    ``h0`` and the two weights must be arrays, and so must ``c0`` when ``cell`` (the LSTM):
    the kernels take explicit states, None is no zero state here (the layers make zeros).
    """
    state_hint = (" (the kernels take explicit states: pass zeros of shape (batch, "
                  "hidden_size) for a fresh start)")
    check_array(fname, x_name, x)
    check_array(fname, h_name, h0, state_hint if h0 is None else "")
    if cell:
        check_array(fname, c_name, c0, state_hint if c0 is None else "")
    check_array(fname, "weight_ih", weight_ih)
    check_array(fname, "weight_hh", weight_hh)
    gate_txt = f"{gates}*hidden_size" if gates > 1 else "hidden_size"
    want_x = "(T, N, D) = (time, batch, input_size)" if sequence else "(N, D) = (batch, input)"
    xdim = 3 if sequence else 2
    if x.ndim != xdim:
        raise ValueError(f"{fname}: {x_name} must be {xdim}-D {want_x} but has shape "
                         f"{_shape(x)}")
    xs = _shape(x)
    T = xs[0] if sequence else 0
    N, D = xs[-2], xs[-1]
    if h0.ndim != 2 or int(h0.shape[0]) != N:
        raise ValueError(f"{fname}: {h_name} has shape {_shape(h0)} but expected (batch, "
                         f"hidden_size) with batch = {N} for {x_name} of shape {xs}")
    H = int(h0.shape[1])
    ctx = f"for {x_name} of shape {xs} and {h_name} of shape {_shape(h0)}"
    if c0 is not None:
        check_array(fname, c_name, c0)
        if _shape(c0) != (N, H):
            raise ValueError(f"{fname}: {c_name} has shape {_shape(c0)} but expected "
                             f"(batch, hidden_size) = {(N, H)} {ctx}")
    if _shape(weight_ih) != (gates * H, D):
        raise ValueError(f"{fname}: weight_ih has shape {_shape(weight_ih)} but expected "
                         f"({gate_txt}, input_size) = {(gates * H, D)} {ctx}")
    if _shape(weight_hh) != (gates * H, H):
        raise ValueError(f"{fname}: weight_hh has shape {_shape(weight_hh)} but expected "
                         f"({gate_txt}, hidden_size) = {(gates * H, H)} {ctx}")
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh), ("weight_ch", weight_ch)):
        if b is not None:
            check_array(fname, name, b, optional=True)
    for name, b in (("bias_ih", bias_ih), ("bias_hh", bias_hh)):
        if b is not None and _shape(b) != (gates * H,):
            raise ValueError(f"{fname}: {name} has shape {_shape(b)} but expected "
                             f"({gate_txt},) = {(gates * H,)} {ctx}")
    if weight_ch is not None and _shape(weight_ch) != (peepholes * H,):
        raise ValueError(f"{fname}: weight_ch has shape {_shape(weight_ch)} but expected "
                         f"({peepholes}*hidden_size,) = {(peepholes * H,)} {ctx}")
    named = [(x_name, x), (h_name, h0), (c_name, c0), ("weight_ih", weight_ih),
             ("weight_hh", weight_hh), ("bias_ih", bias_ih), ("bias_hh", bias_hh),
             ("weight_ch", weight_ch)]
    check_same_float_dtype(fname, named)
    check_same_device(fname, named)
    return Sizes(T, N, D, H)


def check_same_device(fname: str, named: list[tuple[str, Array | None]]) -> None:
    """All given arrays must live on one device (no implicit copies between devices)."""
    present = [(n, a) for n, a in named if a is not None]
    if not present:
        return
    first_name, first = present[0]
    xp = get_array_module(first)
    for n, a in present[1:]:
        if get_array_module(a) is not xp:
            raise RuntimeError(
                f"{fname}: {first_name} is on {device_of(first)} but {n} is on "
                f"{device_of(a)}; move them to one device first (backend.to_device)")


def check_same_float_dtype(fname: str, named: list[tuple[str, Array | None]]) -> None:
    """All given arrays must share one floating dtype (no silent up- or down-casts)."""
    present = [(n, a) for n, a in named if a is not None]
    if not present:
        return
    first_name, first = present[0]
    if np.dtype(first.dtype).kind != "f":
        raise TypeError(f"{fname}: {first_name} must have a floating dtype, got {first.dtype}")
    for n, a in present[1:]:
        if np.dtype(a.dtype) != np.dtype(first.dtype):
            raise TypeError(f"{fname}: dtypes differ: {first_name} is {first.dtype} but {n} is "
                            f"{a.dtype}; cast them to one float dtype first")


def check_grad_arg(fname: str, name: str, g: Array | None, shape: tuple[int, ...],
                   dtype: Any, ref: Array | None = None) -> None:
    """An upstream gradient must be None or have the forward output's shape and dtype, and
    live on the device of ``ref`` (an array of the forward pass) when that is given."""
    if g is None:
        return
    if not _is_array(g):
        raise TypeError(f"{fname}: {name} must be an array of shape {tuple(shape)} or None, "
                        f"got {type(g).__name__}")
    if _shape(g) != tuple(shape):
        raise ValueError(f"{fname}: {name} has shape {_shape(g)} but the forward output it "
                         f"belongs to has shape {tuple(shape)}")
    if np.dtype(g.dtype) != np.dtype(dtype):
        raise TypeError(f"{fname}: {name} has dtype {g.dtype} but the forward pass ran in "
                        f"{np.dtype(dtype)}")
    if ref is not None:
        check_same_device(fname, [("the forward pass's data", ref), (name, g)])


def check_lengths(fname: str, lengths: Any, T: int, N: int) -> np.ndarray | None:
    """Validate host ``lengths`` (shape (N,), integer dtype, values in [0, T]) and return them
    as a NumPy array; None stays None. Lengths on a device raise a TypeError: they are read
    on the host (validation, mask), and the caller copies them there explicitly. An empty
    list or tuple is the lengths of an empty batch (N = 0); an empty NumPy array must have an
    integer dtype like any other."""
    if lengths is None:
        return None
    if get_array_module(lengths) is not np:
        raise TypeError(
            f"{fname}: lengths must be on the host (a list or NumPy array), as PyTorch "
            f"requires CPU lengths, but they are on {device_of(lengths)}; copy them to the "
            f"host explicitly (.get(), or Tensor.numpy())")
    given = lengths
    try:
        lengths = np.asarray(given)
    except ValueError as err:                  # ragged nesting, such as [1, [2]]
        raise ValueError(f"{fname}: lengths must be a flat sequence of {N} integers (one per "
                         f"sequence of the batch), got {given!r}") from err
    if lengths.size == 0 and not isinstance(given, np.ndarray):
        lengths = lengths.astype(np.int64)     # [] has no dtype of its own: the empty batch
    if _shape(lengths) != (N,):
        raise ValueError(f"{fname}: lengths has shape {_shape(lengths)} but expected "
                         f"(batch,) = {(N,)}")
    if lengths.dtype.kind not in "iu":
        raise ValueError(f"{fname}: lengths must have an integer dtype, got {lengths.dtype}")
    if N > 0:
        lo, hi = int(lengths.min()), int(lengths.max())
        bad = lo if lo < 0 else hi if hi > T else None
        if bad is not None:
            raise ValueError(f"{fname}: lengths contains {bad} but every length must lie in "
                             f"[0, T] with T = {T} (the time size of x)")
    return lengths


