"""The base of every differentiable primitive: :class:`Function`, its :class:`Context`, and the
one central :func:`sum_to_shape`.

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
derivation written in array code. ``Function.apply`` (wired up by :mod:`tinygrad_rnn.tensor`)
runs forward, wraps the results in tensors and records the node.

Higher-order gradients are out of scope: backward runs on raw arrays, so a gradient is never
itself differentiable.
"""
from __future__ import annotations

from typing import Any

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
    saved_versions: tuple = ()  # (counter, version, "input"/"output", index, shape) each
    out_hooks: dict | None = None  # output index -> gradient hooks (Tensor.register_hook)
    out_retain: dict | None = None  # output index -> weak reference (Tensor.retain_grad)
    mixed_dtypes = False  # inputs and outputs hold more than one float dtype

    def __init__(self, fn: type) -> None:
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
    #: mean, softmax, losses): integer or boolean inputs are computed in ``DEFAULT_FLOAT``
    #: (float32) as in torch, not in NumPy's float64. Ops that keep integers integer (add,
    #: sum, max, indexing, reshape) leave it False.
    float_math = False

    @staticmethod
    def forward(ctx: Context, *arrays: Any, **constants: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, *grad_outs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Any, **constants: Any) -> Any:
        """Run the op on tensors (or array-likes) and record it in the graph.

        :mod:`tinygrad_rnn.tensor` replaces this method at import time with its ``_apply``
        (so this lower layer never imports the tensor layer, and an op costs one Python call
        less than a forwarding method would)."""
        raise RuntimeError("Function.apply needs tinygrad_rnn.tensor to be imported")


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
    axes = list(range(lead))
    for i, s in enumerate(shape):
        gs = grad.shape[lead + i]
        if s == 1 and gs != 1:
            axes.append(lead + i)
        elif s != gs:
            raise ValueError(
                f"sum_to_shape: gradient of shape {grad.shape} cannot be reduced to {shape}"
            )
    xp = get_array_module(grad)
    out = xp.sum(grad, axis=tuple(axes), keepdims=True) if axes else grad
    return out.reshape(shape)
