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

from typing import Any, Callable

from ..backend import get_array_module

# Set by tinygrad_rnn.tensor at import time: the function that runs an op on tensors and
# records it in the graph. Kept as a hook so this lower layer never imports the tensor layer.
_apply_impl: Callable[..., Any] | None = None


class Context:
    """The node an op leaves in the graph: what backward needs, and nothing else.

    Attributes set by the op: anything it stores with :meth:`save_for_backward` or as plain
    attributes (``ctx.axis = 1``). Attributes set by the engine: ``inputs`` (the input tensors,
    kept so the graph can be walked; outputs are never kept, so there are no reference
    cycles), ``needs_input_grad``, the versions of saved tensors, output hooks.
    """

    def __init__(self, fn: type) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.saved_arrays: tuple = ()
        self.released = False

    def save_for_backward(self, *arrays: Any) -> None:
        """Keep ``arrays`` for backward. If an array is an input's or an output's data, an
        in-place write to that tensor before backward raises instead of corrupting the
        gradient (version counter)."""
        self.saved_arrays = arrays

    def release(self) -> None:
        """Drop everything backward needed (saved arrays, inputs, op attributes)."""
        name, fn = self.name, self.fn
        self.__dict__.clear()
        self.name, self.fn = name, fn
        self.saved_arrays = ()
        self.released = True


class Function:
    """Base class of a differentiable primitive; see the module docstring."""

    @staticmethod
    def forward(ctx: Context, *arrays: Any, **constants: Any) -> Any:
        raise NotImplementedError

    @staticmethod
    def backward(ctx: Context, *grad_outs: Any) -> Any:
        raise NotImplementedError

    @classmethod
    def apply(cls, *inputs: Any, **constants: Any) -> Any:
        """Run the op on tensors (or array-likes) and record it in the graph."""
        assert _apply_impl is not None, "tinygrad_rnn.tensor was not imported"
        return _apply_impl(cls, *inputs, **constants)


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
