"""The base of every differentiable primitive: :class:`Function`, its :class:`Context`, the
one central :func:`sum_to_shape`, and :func:`pairwise_sum`, the float32-accurate sum it and
the reductions use.

An op is a subclass of :class:`Function` with two static methods on raw backend arrays::

    class Tanh(Function):
        @staticmethod
        def forward(ctx, x):
            y = xp.tanh(x)
            ctx.save_for_backward(y)       # the derivative is written in the output
            return y

        @staticmethod
        def backward(ctx, grad_out):
            (y,) = ctx.saved_arrays
            return grad_out * (1 - y * y)  # dL/dx = dL/dy * (1 - y^2)

``forward`` receives one array per tensor input and any constants as keyword arguments;
``backward`` receives one upstream gradient per output and returns one gradient per tensor
input (or ``None`` for an input that needs none). Backward never builds a graph: it is the
derivation written in array code. ``Function.apply`` (:func:`tinygrad_rnn.engine.record`,
wired up by the engine) runs forward, wraps the results in tensors and records the node.

Higher-order gradients are out of scope: backward runs on raw arrays, so a gradient is never
itself differentiable.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..backend import get_array_module


class Context:
    """The node an op leaves in the graph: what backward needs, and nothing else.

    Attributes set by the op: anything it stores with :meth:`save_for_backward` or as plain
    attributes (``ctx.axis = 1``). Attributes set by the engine: ``inputs`` (the input tensors,
    kept so the graph can be walked; outputs are never kept, so there are no reference
    cycles), ``needs_input_grad``, the versions of saved tensors, output hooks.

    One Context is made per recorded op, so it is kept cheap: the attributes most nodes
    leave at their default value are class attributes, read through the instance and set on
    it only by the nodes that need them (a hook, a retained gradient, a saved tensor).
    """

    saved_arrays: tuple = ()
    released = False
    saved_versions: Sequence[tuple] = ()  # (counter, version, "input"/"output", index, shape)
    out_hooks: dict | None = None  # output index -> gradient hooks (Tensor.register_hook)
    out_retain: dict | None = None  # output index -> weak reference (Tensor.retain_grad)
    mixed_dtypes = False  # inputs and outputs hold more than one float dtype
    clock = 0  # engine.REBASES when recorded (set only once some in-place write rebased)
    scope: tuple = ()  # engine.record_scope labels open when recorded (for drawing)
    seq = 0  # when it was recorded: engine.record numbers the nodes 1, 2, ... in order
    version_hint = ""  # the op's words added to the engine's "modified in place" error

    if TYPE_CHECKING:
        # ops and the engine set their own attributes (ctx.axis = 1, ctx.inputs): to a type
        # checker each is Any; at run time a misspelt one still raises AttributeError
        def __getattr__(self, name: str) -> Any: ...

        def __setattr__(self, name: str, value: Any) -> None: ...

    def __init__(self, fn: type[Function]) -> None:
        self.fn = fn
        self.name = fn.__name__

    def save_for_backward(self, *arrays: Any) -> None:
        """Keep ``arrays`` for backward. If an array is an input's or an output's data, an
        in-place write to that tensor before backward raises instead of corrupting the
        gradient (version counter)."""
        self.saved_arrays = arrays

    def release(self) -> None:
        """Drop everything backward needed (saved arrays, inputs, op attributes)."""
        name, fn = self.name, self.fn
        self.__dict__.clear()  # the class defaults above show through again
        self.name, self.fn = name, fn
        self.released = True


class Function:
    """Base class of a differentiable primitive; see the module docstring."""

    #: True for ops whose math is floating-point whatever the input (exp, log, division,
    #: mean, softmax, losses): integer or boolean inputs are computed in the default float
    #: dtype (float32 unless ``tr.set_default_dtype`` changed it) as in torch, not in NumPy's
    #: float64. Ops that keep integers integer (add, sum, max, indexing, reshape) leave it
    #: False.
    int_inputs_as_float = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # ``float_math`` is the attribute's old name, still spelled so in ops/losses.py until
        # its rename lands there: it means the same
        if "float_math" in vars(cls):
            cls.int_inputs_as_float = vars(cls)["float_math"]

    @staticmethod
    def forward(ctx: Context, *arrays: Any, **constants: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, *grad_outs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Any, **constants: Any) -> Any:
        """Run the op on tensors (or array-likes) and record it in the graph.

        The one wiring point: :mod:`tinygrad_rnn.engine` replaces this method when it is
        imported, with ``Function.apply = classmethod(record)`` (so this lower layer never
        imports the engine, and an op costs one Python call less than a forwarding method
        would); :func:`tinygrad_rnn.engine.record` is what runs."""
        raise RuntimeError("Function.apply needs tinygrad_rnn.engine to be imported")


def sum_to_shape(grad: Any, shape: tuple) -> Any:
    """Reduce a broadcast gradient back to ``shape``: the gradient of ``broadcast_to``.

    Broadcasting copies a value along new leading axes and along size-1 axes, so the
    gradient sums over exactly those axes. Example: the RNN bias ``(N, H) + (H,)`` gives a
    ``(N, H)`` gradient that sums over axis 0 to ``(H,)``.

    Raises ``ValueError`` when ``grad`` cannot have come from broadcasting ``shape``.
    """
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    if lead < 0:
        raise ValueError(
            f"sum_to_shape: gradient of shape {grad.shape} has fewer dimensions than the "
            f"target shape {shape}"
        )
    # exercise: sum_to_shape begin
    axes = list(range(lead))  # (BC8) (i): the leading axes broadcasting added
    for i, s in enumerate(shape):
        gs = grad.shape[lead + i]
        if s == 1 and gs != 1:
            axes.append(lead + i)  # (BC8) (ii): a size-1 axis broadcasting copied
        elif s != gs:
            raise ValueError(
                f"sum_to_shape: gradient of shape {grad.shape} cannot be reduced to {shape}"
            )
    out = pairwise_sum(grad, tuple(axes), keepdims=True) if axes else grad  # (BC7)
    return out.reshape(shape)
    # exercise: end


#: Along an axis of at most this many entries, :func:`pairwise_sum` lets the array module add
#: the entries one after another; a longer axis is first halved down to this length.
PAIRWISE_BLOCK = 32


def _fast(a: Any, ax: int) -> bool:
    """Whether ``ax`` is the fast axis in memory of ``a`` (unit stride), which NumPy sums
    pairwise by itself."""
    return a.strides[ax] == a.itemsize


def _along(ax: int, start: int, stop: int) -> tuple:
    """The index ``[:, ..., :, start:stop]`` that slices axis ``ax`` and keeps the others."""
    return (slice(None),) * ax + (slice(start, stop),)


def pairwise_sum(a: Any, axes: tuple, keepdims: bool = False) -> Any:
    """Sum of ``a`` over ``axes`` (a tuple of non-negative ints), with a float32 or float16
    rounding error that does not grow with the number of terms.

    Why: NumPy adds pairwise only along the fast axis in memory (the last axis of a
    C-contiguous array). Over any other axis, such as the batch axis of a bias gradient
    ``(N, H) -> (H,)``, it adds one row after another, so a float32 sum of n rows is off by
    up to about n * 2**-24 of the sum of magnitudes: 1e-5 relative at n = 200,000, 30 to
    600 times torch's error.

    How: while a reduced axis that is not the fast one has more than ``PAIRWISE_BLOCK``
    entries, its first half is added to its second half elementwise (an odd last entry joins
    the first partial sum), which halves its length; the last at most ``PAIRWISE_BLOCK``
    partial sums are added by ``xp.sum``, one axis at a time. Each term then takes part in
    at most ``log2(n / PAIRWISE_BLOCK) + PAIRWISE_BLOCK`` roundings per axis, whatever n. The
    halvings are whole-array additions, so this costs about what ``xp.sum`` costs (less over
    a long, narrow axis, which NumPy sums slowly).

    float16 is added in float32 (its partial sums would overflow at 65,504 and lose bits at
    every step; torch does the same) and rounded once at the end. float64, integers and
    booleans, and float32 sums that NumPy adds pairwise anyway or that add at most
    ``PAIRWISE_BLOCK`` terms one after another, are ``xp.sum`` exactly as before, bit for bit.
    The same steps run on every device.
    """
    xp = get_array_module(a)
    if a.dtype.kind != "f" or a.dtype.itemsize >= 8:
        return xp.sum(a, axis=axes, keepdims=keepdims)
    dtype = a.dtype
    if math.prod(a.shape[ax] for ax in axes if not _fast(a, ax)) <= PAIRWISE_BLOCK:
        if dtype.itemsize >= 4:
            return xp.sum(a, axis=axes, keepdims=keepdims)
        return xp.sum(a, axis=axes, keepdims=keepdims, dtype=np.float32).astype(dtype)
    if dtype.itemsize < 4:
        a = a.astype(np.float32)
    for ax in axes:
        n = a.shape[ax]
        if not _fast(a, ax):  # (a is a new array after each axis: ask again)
            while n > PAIRWISE_BLOCK:
                half = n // 2
                s = a[_along(ax, 0, half)] + a[_along(ax, half, 2 * half)]
                if n % 2:
                    s[_along(ax, 0, 1)] += a[_along(ax, 2 * half, n)]
                a, n = s, half
        a = xp.sum(a, axis=ax, keepdims=True)
    if not keepdims:
        a = a.reshape(tuple(n for ax, n in enumerate(a.shape) if ax not in axes))
    return a.astype(dtype, copy=False)
