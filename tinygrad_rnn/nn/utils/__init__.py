"""Gradient utilities: norms, clipping, and flattening parameters to one vector.

Named and behaving as in ``torch.nn.utils``. Gradients are the raw backend arrays in
``p.grad`` (anything else there, e.g. a Tensor assigned by hand, raises ``TypeError``);
clipping scales them in place. Parameters whose ``.grad`` is ``None`` are skipped
everywhere.

Clipping by the global norm (Pascanu, Mikolov and Bengio, 2013) is the standard remedy for
exploding gradients in recurrent networks::

    loss.backward()
    total = clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()

References
----------
R. Pascanu, T. Mikolov and Y. Bengio, "On the difficulty of training recurrent neural
networks", ICML 2013.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Iterable

import numpy as np

from ...backend import DEFAULT_FLOAT, device_of, get_array_module, result_float_dtype
from ...engine import no_grad
from ...creation import cat
from ...tensor import Tensor

__all__ = [
    "get_total_norm", "grad_norm", "clip_grad_norm_", "clip_grads_with_norm_",
    "clip_grad_value_", "parameters_to_vector", "vector_to_parameters",
]


def _as_param_list(parameters: Tensor | Iterable[Tensor], where: str) -> list[Tensor]:
    """A single Tensor or an iterable (a generator is consumed once) as a list; a TypeError
    naming ``where`` for anything else (a number, None)."""
    if isinstance(parameters, Tensor):
        return [parameters]
    if isinstance(parameters, (str, bytes, np.ndarray)) or not hasattr(parameters, "__iter__"):
        raise TypeError(f"{where}: parameters must be a Tensor or an iterable of Tensors "
                        f"(e.g. model.parameters()), got {type(parameters).__name__}")
    return list(parameters)


def _is_raw_array(value: Any) -> bool:
    """True for a ``numpy.ndarray`` (not a subclass) or a device array (CuPy's, the
    stand-in's): what ``p.grad`` holds."""
    return type(value) is np.ndarray or get_array_module(value) is not np


def _grads_of(parameters: list[Tensor], where: str, in_place: bool = False) -> list[Any]:
    """The gradients of the parameters that have one; a TypeError (naming ``where``, the
    parameter and the gradient's type) for a ``p.grad`` that is not a raw backend array,
    e.g. a Tensor assigned by hand. ``in_place``: the caller writes into them, so a
    read-only gradient is a ValueError naming the parameter (before anything is written)."""
    grads = []
    for k, p in enumerate(parameters):
        if not isinstance(p, Tensor):
            raise TypeError(f"{where}: parameters must be Tensors, but item {k} is a "
                            f"{type(p).__name__}")
        grad = p._grad  # the raw array behind the Tensor p.grad
        if grad is None:
            continue
        if not _is_raw_array(grad):  # (the .grad setter checks what is assigned)
            raise TypeError(
                f"{where}: parameter {k} (shape {p.shape}, dtype {p.dtype}) has a gradient "
                f"of type {type(grad).__module__}.{type(grad).__name__}; assign p.grad a "
                f"Tensor or an array of the parameter's shape and dtype"
            )
        # NumPy arrays can be read-only (CuPy's have no such flag)
        if in_place and not getattr(getattr(grad, "flags", None), "writeable", True):
            raise ValueError(
                f"{where}: the gradient of parameter {k} (shape {p.shape}) is a read-only "
                f"array, and clipping scales gradients in place; give it a writable copy "
                f"(p.grad = p.grad.clone())"
            )
        grads.append(grad)
    return grads


def _real_number(where: str, name: str, value: Any) -> float:
    """``value`` as a float when it is a real number (Python or NumPy, or a 0-d numeric
    NumPy array); a TypeError naming ``where``, the argument and the value otherwise
    (strings, None, bools, sequences)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        return float(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where}: {name} must be a real number, got "
                        f"{type(value).__name__} {value!r}")
    return float(value)


def _norm_order(norm_type: Any, where: str) -> float:
    """``norm_type`` as a float (``'inf'`` is accepted); only p > 0 and inf are norms."""
    try:
        p = float(norm_type)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: invalid norm_type: {norm_type!r} (expected a number or "
                         f"'inf')") from None
    if not (p > 0):
        raise ValueError(f"{where}: invalid norm_type: {norm_type} (must be > 0 or inf)")
    return p


def _array_module_of(arrays: list[Any], what: str) -> Any:
    """The array module of ``arrays`` (NumPy for none); a RuntimeError naming the devices
    when the arrays are spread over several."""
    devices = {device_of(a) for a in arrays}
    if len(devices) > 1:
        raise RuntimeError(
            f"{what}: the gradients are on several devices ({', '.join(sorted(devices))}); "
            f"move the parameters to one device first (Module.to)"
        )
    return get_array_module(*arrays)


def _two_norm_of_narrow_floats(arrays: list[Any], xp: Any) -> Any:
    """The 2-norm of float32 (or float16) ``arrays`` seen as one vector, in float64, in one
    dot product per array: ``sqrt(sum_i a_i . a_i)``.

    The rescaling by the largest magnitude that :func:`_total_norm_float64` does is not
    needed here: the square of a float32 lies between about 2e-90 and 1.2e77, far inside
    float64's range, so nothing underflows or overflows. inf and NaN entries still give an
    inf or NaN norm. The result agrees with the rescaled one to float64 rounding (the sums
    are added in another order), and skips its extra passes over every gradient (the
    maximum, the absolute value, the division and the squares).
    """
    squares = []
    for a in arrays:
        flat = a.reshape(-1).astype(np.float64)                # (size,) a float64 copy
        squares.append(xp.dot(flat, flat))                     # ||a||_2^2
    return xp.sqrt(xp.sum(xp.stack(squares)))


def _total_norm_float64(arrays: list[Any], p: float, xp: Any) -> Any:
    """The p-norm of all ``arrays`` seen as one vector, accumulated in float64.

    ``(sum_i sum_j |a_ij|^p)^(1/p)``, or ``max_ij |a_ij|`` for p = inf. The entries are
    divided by the largest magnitude m before being raised to the power p (the norm is
    ``m * ||a / m||_p``), so tiny float64 gradients do not underflow to a zero norm and huge
    ones do not overflow to inf. NaN or inf entries give a NaN or inf result (without NumPy
    warnings); empty arrays count as zeros.

    Returns a 0-d float64 array of ``xp`` on the arrays' device. Nothing is read back to the
    host: the special cases (m = 0, inf or NaN) are selected with ``xp.where`` instead of an
    ``if``, so on a GPU the norm costs no synchronisation.
    """
    nonempty = [a for a in arrays if a.size > 0]
    if not nonempty:
        return xp.zeros((), dtype=np.float64)
    if p == 2.0 and all(a.dtype.kind == "f" and a.dtype.itemsize <= 4 for a in nonempty):
        return _two_norm_of_narrow_floats(nonempty, xp)
    maxima = xp.stack([xp.max(xp.abs(a)).astype(np.float64) for a in nonempty])
    largest = xp.max(maxima)                                   # m (NaN if any entry is NaN)
    if math.isinf(p):
        return largest
    rescale = xp.isfinite(largest) & (largest > 0)             # else the norm is m itself
    divisor = xp.where(rescale, largest, 1.0)
    sums = []
    # when m is inf the sums below are computed unscaled and may overflow; they are then
    # discarded by the final where, so the overflow warning is noise
    with np.errstate(over="ignore"):
        for a in nonempty:
            scaled = a.astype(np.float64)                      # a copy we own
            xp.abs(scaled, out=scaled)
            scaled /= divisor                                  # entries in [0, 1]
            if p == 2.0:
                sums.append(xp.sum(scaled * scaled))           # ||a / m||_2^2
            elif p == 1.0:
                sums.append(xp.sum(scaled))
            else:
                sums.append(xp.sum(scaled ** p))               # ||a / m||_p^p
        total = xp.sum(xp.stack(sums))
        # xp.power, not **: on the CPU ``total`` is a NumPy scalar, whose ** (libm's pow)
        # can differ by an ulp from the ufunc loop that 0-d device arrays (and the stand-in)
        # use
        root = xp.sqrt(total) if p == 2.0 else xp.power(total, 1.0 / p)
        return xp.where(rescale, largest * root, largest)


def get_total_norm(tensors: Any | Iterable[Any], norm_type: float | str = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """The norm of several arrays taken together, as if concatenated into one vector.

    Math
    ----
    ``||(a_1, ..., a_k)||_p = (sum_i ||a_i||_p^p)^(1/p)``, and ``max_i ||a_i||_inf`` for
    ``p = inf``. For p = 2 this is ``sqrt(sum_i ||a_i||^2)``.

    Parameters
    ----------
    tensors : array or Tensor, or an iterable of them
        Usually gradients (``[p.grad for p in params]``), all on one device.
    norm_type : float or 'inf'
        p > 0, or ``inf`` for the max norm (default 2).
    error_if_nonfinite : bool
        Raise ``RuntimeError`` when the norm is NaN or infinite (this reads the norm back
        to the host: one synchronisation on a GPU).
    foreach : None
        Accepted for torch compatibility; ignored.

    Returns
    -------
    Tensor
        0-d, on the inputs' device, in their float dtype (float32 for float32 gradients, as
        torch), computed in float64 whatever that dtype. A float32 0 on the CPU when there
        are no tensors.
    """
    if isinstance(tensors, Tensor) or hasattr(tensors, "shape"):
        tensors = [tensors]
    arrays = [t._data if isinstance(t, Tensor) else t for t in tensors]
    for k, a in enumerate(arrays):
        if not _is_raw_array(a):
            raise TypeError(f"get_total_norm: item {k} is a {type(a).__name__}; expected "
                            f"Tensors or raw backend arrays (numpy.ndarray, CuPy)")
    xp = _array_module_of(arrays, "get_total_norm")
    total = _checked_total_norm(arrays, norm_type, error_if_nonfinite, xp, "get_total_norm")
    return _norm_tensor(total, arrays)


def _checked_total_norm(arrays: list[Any], norm_type: Any, error_if_nonfinite: Any,
                        xp: Any, where: str) -> Any:
    """The float64 total norm (0-d, on the arrays' device), checked for NaN/inf on request."""
    p = _norm_order(norm_type, where)
    if not isinstance(error_if_nonfinite, (bool, np.bool_)):  # 'no' would be truthy
        raise TypeError(f"{where}: error_if_nonfinite must be True or False, got "
                        f"{error_if_nonfinite!r} ({type(error_if_nonfinite).__name__})")
    total = _total_norm_float64(arrays, p, xp)
    if error_if_nonfinite and not bool(xp.isfinite(total)):    # the one explicit read-back
        raise RuntimeError(
            f"{where}: the total norm of order {p} of the gradients is non-finite "
            f"({float(total)}), "
            f"so it cannot be clipped. To scale the gradients by it anyway, pass "
            f"error_if_nonfinite=False"
        )
    return total


def _norm_tensor(total: Any, arrays: list[Any]) -> Tensor:
    """The 0-d float64 norm as a Tensor in the arrays' float dtype, on their device."""
    if not arrays:
        return Tensor(np.zeros((), dtype=DEFAULT_FLOAT))
    dtype = result_float_dtype(*(a.dtype for a in arrays))
    return Tensor(total, dtype=dtype)


def grad_norm(parameters: Tensor | Iterable[Tensor], norm_type: float | str = 2.0) -> float:
    """The total norm of the parameters' gradients (no clipping), as a Python float.

    The same number as :func:`clip_grad_norm_` returns (accumulated in float64), for
    gradient-norm tracking; parameters without a gradient are skipped; 0.0 when none has one.
    Being a Python float, it is read back from the device (one synchronisation on a GPU).
    """
    where = "grad_norm"
    grads = _grads_of(_as_param_list(parameters, where), where)
    xp = _array_module_of(grads, where)
    return float(_total_norm_float64(grads, _norm_order(norm_type, where), xp))


def clip_grads_with_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                          total_norm: Any, foreach: bool | None = None) -> None:
    """Scale the gradients in place by ``min(1, max_norm / (total_norm + 1e-6))``.

    ``total_norm`` is a number, or a 0-d Tensor or array on the gradients' device (from
    :func:`get_total_norm`; it is not read back to the host). A negative ``total_norm``
    raises ``ValueError`` (a norm is never negative; scaling by it would flip every
    gradient), checked where it is free: for a number or a host array. A device
    ``total_norm`` is not read back, so its sign is not checked there (:func:`get_total_norm`
    never returns a negative one).

    A NaN or infinite ``total_norm`` is accepted, with the semantics of
    :func:`clip_grad_norm_` under its default ``error_if_nonfinite=False`` (as torch): NaN
    makes every gradient NaN and inf makes them 0 (NaN where they were infinite). To refuse
    a non-finite norm instead, compute it with ``get_total_norm(...,
    error_if_nonfinite=True)``, which raises before anything is scaled.

    Raises
    ------
    TypeError
        ``max_norm`` or ``total_norm`` is not a real number (or a 0-d numeric array/Tensor),
        or a ``p.grad`` is not a raw backend array.
    ValueError
        ``max_norm`` is negative or NaN, ``total_norm`` is negative or not 0-d.
    RuntimeError
        ``total_norm`` or the gradients are on different devices.
    """
    where = "clip_grads_with_norm_"
    max_norm = _checked_max_norm(max_norm, where)
    grads = _grads_of(_as_param_list(parameters, where), where, in_place=True)
    norm = total_norm._data if isinstance(total_norm, Tensor) else total_norm
    if _is_raw_array(norm):
        if norm.shape != () or norm.dtype.kind not in "iuf":
            raise ValueError(f"{where}: total_norm must be a single number (0-d), got an "
                             f"array of shape {norm.shape} and dtype {norm.dtype}")
        if get_array_module(norm) is np:                       # on the host: free to read
            _check_total_norm_sign(float(norm), where)
    else:
        norm = _real_number(where, "total_norm", norm)
        _check_total_norm_sign(norm, where)
    if not grads:
        return
    xp = _array_module_of(grads, where)
    if _is_raw_array(norm):
        if device_of(norm) != device_of(grads[0]):
            raise RuntimeError(
                f"{where}: total_norm is on {device_of(norm)} but the "
                f"gradients are on {device_of(grads[0])}"
            )
        total = norm.astype(np.float64)
    else:
        total = xp.asarray(norm, dtype=np.float64)             # a host number
    _scale_grads(grads, max_norm, total, xp)


def _check_total_norm_sign(total_norm: float, where: str) -> None:
    """ValueError for a negative ``total_norm`` (NaN passes: see clip_grads_with_norm_)."""
    if total_norm < 0:
        raise ValueError(f"{where}: invalid total_norm: {total_norm} (a norm is >= 0; a "
                         f"negative one would flip the sign of every gradient)")


def _checked_max_norm(max_norm: Any, where: str) -> float:
    """``max_norm`` as a float; TypeError unless a real number, ValueError unless >= 0."""
    max_norm = _real_number(where, "max_norm", max_norm)
    if not max_norm >= 0:
        raise ValueError(f"{where}: invalid max_norm: {max_norm} (must be >= 0)")
    return max_norm


def _scale_grads(grads: list[Any], max_norm: float, total_norm: Any, xp: Any) -> None:
    """``g *= min(1, max_norm / (total_norm + 1e-6))`` for every g; ``total_norm`` is a 0-d
    float64 array of ``xp``, so on a device the coefficient never leaves it."""
    # exercise: clip_grad_norm begin
    clip_coef = xp.minimum(max_norm / (total_norm + 1e-6), 1.0)   # clamp(max=1); NaN stays
    if xp is np and clip_coef == 1.0:
        return      # on the host this test is free: skip multiplying by exactly 1
    coef_as: dict[Any, Any] = {}                                  # the coefficient per dtype
    with np.errstate(invalid="ignore", over="ignore"):            # inf * 0 = NaN, as torch
        for g in grads:
            if g.dtype not in coef_as:
                coef_as[g.dtype] = clip_coef.astype(g.dtype)
            g *= coef_as[g.dtype]
    # exercise: end


def clip_grad_norm_(parameters: Tensor | Iterable[Tensor], max_norm: float,
                    norm_type: float | str = 2.0, error_if_nonfinite: bool = False,
                    foreach: bool | None = None) -> Tensor:
    """Clip the gradients of ``parameters`` by their total norm, in place.

    Math
    ----
    With g the concatenation of all gradients and ``n = ||g||_p`` (see
    :func:`get_total_norm`)::

        g <- g * min(1, max_norm / (n + 1e-6))

    so afterwards ``||g||_p <= max_norm``; gradients whose total norm is below ``max_norm``
    are left exactly as they were. The direction of g never changes.

    Parameters
    ----------
    parameters : Tensor or iterable of Tensor
        Parameters whose ``.grad`` is clipped (those with ``grad is None`` are skipped), all
        on one device.
    max_norm : float
        Largest allowed total norm (>= 0).
    norm_type : float or 'inf'
        p of the p-norm (default 2; ``inf`` for the max norm).
    error_if_nonfinite : bool
        Raise ``RuntimeError`` (naming the norm) when the total norm is NaN or infinite,
        before touching the gradients. Otherwise (default, as torch) the gradients are
        scaled anyway (see :func:`clip_grads_with_norm_`) and the NaN/inf norm is returned.
    foreach : None
        Accepted for torch compatibility; ignored.

    Returns
    -------
    Tensor
        The total norm before clipping: 0-d, on the gradients' device (as torch returns
        it), in their dtype, accumulated in float64 (torch accumulates in the gradients'
        dtype). Call ``.item()`` for a Python float.

    Notes
    -----
    On a GPU nothing is read back to the host (no synchronisation): the norm, the clipping
    coefficient and the scaling all stay on the device, and gradients below ``max_norm``
    are multiplied by exactly 1. Only ``error_if_nonfinite=True`` reads the norm back.

    Unlike torch, a negative or NaN ``max_norm`` raises ``ValueError`` (torch would flip or
    NaN the gradients), and one that is not a real number (a string, None) ``TypeError``.
    """
    where = "clip_grad_norm_"
    grads = _grads_of(_as_param_list(parameters, where), where, in_place=True)
    max_norm = _checked_max_norm(max_norm, where)
    xp = _array_module_of(grads, where)
    total = _checked_total_norm(grads, norm_type, error_if_nonfinite, xp, where)
    _scale_grads(grads, max_norm, total, xp)      # the float64 norm, not the rounded one
    return _norm_tensor(total, grads)


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float,
                     foreach: bool | None = None) -> None:
    """Clip every gradient entry into ``[-clip_value, clip_value]``, in place.

    Unlike norm clipping this changes the gradient's direction. Unlike torch, a negative or
    NaN ``clip_value`` raises ``ValueError`` (torch would set every entry to it), and one
    that is not a real number (a string, None) ``TypeError``.
    """
    clip_value = _real_number("clip_grad_value_", "clip_value", clip_value)
    if not clip_value >= 0:
        raise ValueError(f"clip_grad_value_: invalid clip_value: {clip_value} (must be >= 0)")
    where = "clip_grad_value_"
    for g in _grads_of(_as_param_list(parameters, where), where, in_place=True):
        xp = get_array_module(g)
        xp.clip(g, -clip_value, clip_value, out=g)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Concatenate the parameters, each flattened, into one 1-D tensor (differentiable:
    gradients flow back to the parameters)."""
    params = _as_param_list(parameters, "parameters_to_vector")
    if not params:
        raise ValueError("parameters_to_vector: no parameters")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into the parameters, in place.

    The inverse of :func:`parameters_to_vector`. Runs under ``no_grad`` and bumps each
    parameter's version counter. Unlike torch (which makes the parameters views of
    ``vec``), the values are copied.

    Raises
    ------
    TypeError
        When ``vec`` is not a Tensor.
    ValueError
        When ``vec`` is not 1-D or its length is not the total size of the parameters.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: vec must be a Tensor, got "
                        f"{type(vec).__name__}")
    params = _as_param_list(parameters, "vector_to_parameters")
    total = sum(math.prod(p.shape) for p in params)
    if vec.ndim != 1 or vec.shape[0] != total:
        raise ValueError(
            f"vector_to_parameters: vec has shape {vec.shape}, the parameters have "
            f"{total} elements in all"
        )
    pointer = 0
    with no_grad():
        for p in params:
            n = math.prod(p.shape)
            p.copy_(vec._data[pointer:pointer + n].reshape(p.shape))
            pointer += n


# torch.nn.utils.rnn: padding and packing of variable-length batches (a submodule, as torch's)
from . import rnn  # noqa: E402  (after the names above, which it does not use)
