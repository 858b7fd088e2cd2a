"""Convolution layers: :class:`Conv1d`, as ``torch.nn.Conv1d``, and :class:`CausalConv1d`, a
project extension (a Conv1d padded on the left only, so that output step t reads input steps
t - d (K - 1) .. t and never the future: the layer of a temporal convolutional network).

Both call the one primitive :class:`tinygrad_rnn.ops.Conv1d`, whose forward pass is a GEMM
over the unfolded windows and whose backward pass is derived in docs/sequence_models.md,
(CV1)-(CV7).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _validate
from ..tensor import Tensor
from . import functional as F
from . import init
from ._checks import check_generator, check_input_dtype, float_dtype
from .layers import dtype_note, as_input, place
from .module import Module, Parameter

__all__ = ["Conv1d", "CausalConv1d"]

#: torch's padding modes; 'zeros' is computed inside the op, the others pad first
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class Conv1d(Module):
    """1-D convolution over the last axis of (N, C_in, L) inputs, as ``torch.nn.Conv1d``.

    Parameters
    ----------
    in_channels, out_channels : int
        C_in and C_out.
    kernel_size : int or tuple of one int
        K, the number of taps.
    stride : int or (int,)
        Step s between output windows (default 1).
    padding : int, (int,), 'same' or 'valid'
        Values added at both ends (default 0); 'same' keeps the length (stride 1 only; an
        odd total d (K - 1) puts the extra one on the right, as torch).
    dilation : int or (int,)
        Spacing d between taps (default 1): a window spans d (K - 1) + 1 steps.
    groups : int
        Only 1 (every output channel reads every input channel); other values raise
        NotImplementedError.
    bias : bool
        Learn an additive bias per output channel (default True).
    padding_mode : {'zeros', 'reflect', 'replicate', 'circular'}
        What the padding holds (default zeros, computed inside the op); the other modes pad
        with :func:`~tinygrad_rnn.nn.functional.pad` first, as torch.
    device, dtype, generator
        As for :class:`~tinygrad_rnn.nn.Linear`.

    Attributes
    ----------
    weight : Parameter (C_out, C_in, K)
    bias : Parameter (C_out,) or None
        Both from U(-k, k) with k = 1 / sqrt(C_in K), torch's default
        (``kaiming_uniform_`` with a = sqrt(5)); weight first, then bias.
    kernel_size, stride, dilation : tuple of one int; padding : tuple of one int or str
        As torch stores them.

    Math
    ----
    y[n, o, l] = b[o] + sum_{c,k} W[o, c, k] x_pad[n, c, l s + k d]  (docs/sequence_models.md,
    (CV1)); the backward pass is (CV4)-(CV7) of that page.

    Shapes
    ------
    input (N, C_in, L) or (C_in, L) -> (N, C_out, L_out) or (C_out, L_out), with
    L_out = floor((L + P_l + P_r - d (K - 1) - 1) / s) + 1.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> conv = tr.nn.Conv1d(2, 3, kernel_size=3, padding=1, dtype=np.float64, generator=0)
    >>> conv(tr.randn(4, 2, 10, dtype=np.float64, generator=1)).shape
    (4, 3, 10)
    >>> sorted(conv.state_dict())
    ['bias', 'weight']
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None, *,
                 generator: Any = None) -> None:
        super().__init__()
        who = type(self).__name__
        self.in_channels = _validate.size(in_channels, "in_channels", who)
        self.out_channels = _validate.size(out_channels, "out_channels", who)
        if isinstance(groups, bool) or groups != 1:
            raise NotImplementedError(
                f"{who}: groups={groups!r} is not supported by tinygrad_rnn (only groups=1, "
                f"every output channel reads every input channel)")
        self.groups = 1
        self.kernel_size = (F.conv_int(who, "kernel_size", kernel_size, 1),)
        self.stride = (F.conv_int(who, "stride", stride, 1),)
        self.dilation = (F.conv_int(who, "dilation", dilation, 1),)
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{who}: padding_mode must be one of {PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.padding_mode = padding_mode
        # checked now, so a bad padding fails at construction, as in torch
        self._pad = F.conv_padding(who, padding, self.kernel_size[0], self.stride[0],
                                   self.dilation[0])
        self.padding = padding if isinstance(padding, str) else (self._pad[0],)
        self.transposed, self.output_padding = False, (0,)
        bias = _validate.flag(bias, "bias", who)
        dt = float_dtype(dtype, who)
        rng = check_generator(generator, who)
        shape = (self.out_channels, self.in_channels, self.kernel_size[0])
        self.weight = Parameter(np.zeros(shape, dtype=dt))
        if bias:
            self.bias = Parameter(np.zeros(self.out_channels, dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters(generator=rng)
        place(self, device)

    def reset_parameters(self, generator: Any = None) -> None:
        """weight and bias from U(-k, k), k = 1 / sqrt(C_in K) (torch's default)."""
        k = 1.0 / math.sqrt(self.in_channels * self.kernel_size[0])
        rng = check_generator(generator, type(self).__name__)
        init.uniform_(self.weight, -k, k, generator=rng)
        if self.bias is not None:
            init.uniform_(self.bias, -k, k, generator=rng)

    def _padding(self) -> tuple[int, int]:
        """(left, right): the values padded at each end."""
        return self._pad

    def forward(self, input: Tensor) -> Tensor:
        who = type(self).__name__
        x = as_input(input, "input", who)
        check_input_dtype(who, "input", x, self.weight.dtype)
        if x.ndim not in (2, 3) or x.shape[-2] != self.in_channels:
            raise ValueError(f"{who}: expected input of shape (N, {self.in_channels}, L) or "
                             f"({self.in_channels}, L) (in_channels = {self.in_channels}), got "
                             f"shape {x.shape}")
        left, right = self._padding()
        if self.padding_mode != "zeros" and (left or right):
            x = F.pad(x, (left, right), mode=self.padding_mode)
            left = right = 0
        return F.conv1d_padded(x, self.weight, self.bias, self.stride[0], left, right,
                               self.dilation[0])

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,):
            s += f", padding={self.padding}"
        if self.dilation != (1,):
            s += f", dilation={self.dilation}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode!r}"
        return s + dtype_note(self.weight.dtype)


class CausalConv1d(Conv1d):
    """A :class:`Conv1d` that pads d (K - 1) zeros on the left only (a project extension, not
    a torch class): output step t reads input steps t - d (K - 1), ..., t - d, t, so no step
    sees the future and the output is as long as the input.

    Parameters
    ----------
    in_channels, out_channels, kernel_size, dilation, bias, device, dtype, generator
        As for :class:`Conv1d` (stride 1, no other padding).

    Attributes
    ----------
    weight, bias
        As :class:`Conv1d`'s (same shapes, names and initialisation), so its state dict
        loads into a torch ``Conv1d``, which gives the same output on
        ``F.pad(x, (d (K - 1), 0))``.
    causal_padding : int
        d (K - 1), the zeros added on the left.

    Math
    ----
    y[n, o, t] = b[o] + sum_{c,k} W[o, c, k] x[n, c, t - d (K - 1 - k)], with x = 0 before
    step 0: a stack of L such layers with dilations 1, 2, 4, ... sees
    1 + (K - 1)(2^L - 1) past steps (its receptive field).

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> conv = tr.nn.CausalConv1d(1, 1, kernel_size=2, dilation=2, bias=False,
    ...                           dtype=np.float64)
    >>> _ = conv.weight.data.copy_(tr.tensor(np.array([[[1.0, 10.0]]])))
    >>> conv(tr.tensor(np.array([[[1.0, 2.0, 3.0, 4.0]]]))).numpy().tolist()
    [[[10.0, 20.0, 31.0, 42.0]]]
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any,
                 dilation: Any = 1, bias: bool = True, device: Any = None, dtype: Any = None,
                 *, generator: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=1, padding=0,
                         dilation=dilation, bias=bias, device=device, dtype=dtype,
                         generator=generator)
        self.causal_padding = self.dilation[0] * (self.kernel_size[0] - 1)

    def _padding(self) -> tuple[int, int]:
        return self.causal_padding, 0

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, causal_padding={self.causal_padding}"
                + (", bias=False" if self.bias is None else "") + dtype_note(self.weight.dtype))
