"""Truncated backpropagation through time: both variants, named, in one place.

Timeline of a stream of T steps (see docs/truncation.md for the figure):

* **Chunked TBPTT(k)** (:func:`chunked`): cut the stream into chunks of k steps. Run each
  chunk from the state the previous chunk ended in, *detached* (the value is carried, the
  graph is not), put the loss on every step of the chunk, backpropagate, update. Gradients
  never cross a chunk boundary: the loss at the first step of a chunk sees 1 step of history,
  the loss at its last step k steps.
* **TBPTT(k1, k2)** of Williams & Peng (1990) (:func:`williams_peng`): every k1 steps,
  backpropagate k2 >= k1 steps. At an update time t the window [t - k2, t) is run from the
  (detached) state at t - k2 (a last, shorter update at the end of the stream starts k2 - k1
  steps before its own loss range); the loss is put on its last k1 steps only, so every step's loss
  is counted exactly once over the stream, and every loss sees at least k2 - k1 + 1 steps of
  history. TBPTT(k, k) is chunked TBPTT(k).
* **Full BPTT** is k >= T: one window, the exact gradient.
* The **truncation-bias meter** (:func:`truncation_bias`) compares the gradient of a schedule,
  accumulated over a whole sequence, with the full-BPTT gradient (relative error, cosine).

Devices: the schedule runs on whatever device the model and ``x`` live on; only the loss of
each window comes back to the host (one float per window, for the returned list), and the
truncation-bias meter copies the parameter gradients to the host explicitly to compare them.

The schedule is independent of the engine: windows are run by a ``forward`` callable that
takes ``(x_window, state)`` and returns ``(outputs, new_state)``, so the same code drives
``nn.RNN``/``GRU``/``LSTM`` with ``engine='fused'`` or ``'autograd'``, or any model.

References
----------
R. J. Williams and J. Peng, "An efficient gradient-based algorithm for on-line training of
recurrent network trajectories", Neural Computation 2(4), 1990.
I. Sutskever, "Training recurrent neural networks", PhD thesis, University of Toronto, 2013.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, NamedTuple

import numpy as np

from .backend import to_device
from .tensor import Tensor

__all__ = ["Truncation", "Window", "chunked", "williams_peng", "full", "windows",
           "detach_state", "run_truncated", "TruncationBias", "truncation_bias"]


@dataclass(frozen=True)
class Truncation:
    """A truncation schedule: every ``k1`` steps, backpropagate ``k2`` steps (k1 <= k2)."""

    k1: int
    k2: int

    def __post_init__(self) -> None:
        _check_steps("Truncation", k1=self.k1, k2=self.k2)

    @property
    def name(self) -> str:
        if self.k1 == self.k2:
            return f"TBPTT({self.k1})"
        return f"TBPTT({self.k1}, {self.k2})"


def _check_steps(where: str, **steps: Any) -> None:
    """Each of ``steps`` (name -> value) is an integer number of steps >= 1 (a bool or a
    float is a TypeError), and ``k1 <= k2`` when both are given; errors name ``where``."""
    for name, value in steps.items():
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{where}: {name} must be an integer number of steps, got "
                            f"{value!r} ({type(value).__name__})")
        if value < 1:
            raise ValueError(f"{where}: {name} must be >= 1 step (a schedule needs "
                             f"1 <= k1 <= k2), got {value}")
    if "k1" in steps and "k2" in steps and steps["k2"] < steps["k1"]:
        raise ValueError(f"{where}: need 1 <= k1 <= k2 (every k1 steps, backpropagate k2 >= "
                         f"k1 steps), got k1={steps['k1']}, k2={steps['k2']}")


def _check_schedule(where: str, schedule: Any) -> None:
    if not isinstance(schedule, Truncation):
        raise TypeError(f"{where}: schedule must be a Truncation (chunked(k), "
                        f"williams_peng(k1, k2) or full(T)), got {type(schedule).__name__}")


def chunked(k: int) -> Truncation:
    """Chunked TBPTT(k): chunks of k steps, state carried and detached between chunks."""
    _check_steps("chunked", k=k)
    return Truncation(int(k), int(k))


def williams_peng(k1: int, k2: int) -> Truncation:
    """Williams & Peng's TBPTT(k1, k2): every k1 steps, backpropagate k2 steps."""
    _check_steps("williams_peng", k1=k1, k2=k2)
    return Truncation(int(k1), int(k2))


def full(T: int) -> Truncation:
    """Full BPTT over a sequence of T steps (one window)."""
    return Truncation(max(T, 1), max(T, 1))  # (TB7) k1 = k2 = T: full BPTT


@dataclass(frozen=True)
class Window:
    """One backward pass: run steps [start, stop) from the detached state at ``start``; the
    loss covers steps [loss_start, stop). ``carry`` is the step whose state the next window
    starts from (a step in [start, stop], or ``stop`` for chunked schedules)."""

    start: int
    loss_start: int
    stop: int
    carry: int | None


def windows(T: int, schedule: Truncation) -> list[Window]:
    """The windows a schedule runs over a stream of T steps, in order.

    Update times are k1, 2 k1, ... and T (a last, shorter update if T is not a multiple of
    k1). The loss ranges [loss_start, stop) partition [0, T), so every step's loss is counted
    once, and each window starts k2 - k1 steps before its loss range (so a last, shorter
    window of chunked TBPTT(k) covers only its own steps: the state is detached every k).
    """
    if isinstance(T, (bool, np.bool_)) or not isinstance(T, (int, np.integer)):
        raise TypeError(f"windows: T must be an integer number of steps, got {T!r} "
                        f"({type(T).__name__})")
    if T < 0:
        raise ValueError(f"windows: T must be >= 0 steps, got {T}")
    _check_schedule("windows", schedule)
    T = int(T)
    k1, k2 = schedule.k1, schedule.k2
    # exercise: truncation_windows begin
    stops = list(range(k1, T + 1, k1))
    if not stops or stops[-1] != T:
        stops.append(T)
    if T == 0:
        return []
    out = []
    prev = 0
    for j, stop in enumerate(stops):
        # the window reaches k2 - k1 steps behind its loss range, whose nominal length is k1
        start = max(0, prev + k1 - k2)                                       # (TB3) s_j
        carry = max(0, stop + k1 - k2) if j + 1 < len(stops) else None
        out.append(Window(start=start, loss_start=prev, stop=stop, carry=carry))  # (TB3)
        prev = stop  # a_{j+1} = b_j: the loss ranges partition [0, T) (TB4)
    return out
    # exercise: end


def detach_state(state: Any) -> Any:
    """Detach a recurrent state: a Tensor, None, or a (nested) tuple/list of them."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.detach()
    if isinstance(state, (tuple, list)):
        return type(state)(detach_state(s) for s in state)
    raise TypeError(f"detach_state: unsupported state type {type(state).__name__}")


def run_truncated(forward: Callable[[Tensor, Any], tuple], x: Tensor, schedule: Truncation,
                  loss_fn: Callable[[Any, int, int], Tensor], state: Any = None,
                  on_window: Callable[[Window, Tensor], None] | None = None,
                  time_axis: int = 0) -> tuple[list[float], Any]:
    """Run ``schedule`` over the sequence ``x``: one forward and one backward per window.

    Parameters
    ----------
    forward : callable
        ``forward(x_window, state) -> (outputs, new_state)`` with outputs indexed by time
        along ``time_axis`` (e.g. ``lambda x, h: rnn(x, h)``).
    x : Tensor
        The stream, time along ``time_axis``.
    schedule : Truncation
    loss_fn : callable
        ``loss_fn(outputs_for_loss, loss_start, stop) -> scalar Tensor``: the loss of steps
        [loss_start, stop), given the outputs of exactly those steps. Use a *sum* over steps
        (not a mean) if you want the windows' gradients to add up to the full-BPTT gradient
        when k >= T.
    state : initial state (Tensor, tuple of Tensors, or None).
    on_window : callable, optional
        Called after each backward with the window and its loss: the place to clip, record
        gradient norms, step the optimizer and zero the gradients. Without it, gradients
        accumulate over all windows (which is what the truncation-bias meter measures).

    Returns
    -------
    (losses per window as floats, the final state, detached)
    """
    T = x.shape[time_axis]
    losses = []
    carried = detach_state(state)
    for w in windows(T, schedule):
        state_in = carried
        outputs_parts = []
        pieces = [(w.start, w.stop)]
        if w.carry is not None and w.start < w.carry < w.stop:
            pieces = [(w.start, w.carry), (w.carry, w.stop)]
        st = state_in
        next_carry = None
        for a, b in pieces:
            out, st = forward(_time_slice(x, a, b, time_axis), st)
            outputs_parts.append((a, b, out))
            if b == w.carry:
                next_carry = detach_state(st)
        if w.carry is None or w.carry == w.stop:
            next_carry = detach_state(st)
        elif next_carry is None:  # carry == start: the next window starts where this one did
            next_carry = detach_state(state_in)
        loss_outputs = _gather(outputs_parts, w.loss_start, w.stop, time_axis)
        loss = loss_fn(loss_outputs, w.loss_start, w.stop)  # the window's terms of L (TB1)
        if not isinstance(loss, Tensor):
            raise TypeError(f"run_truncated: loss_fn must return the window's loss as a Tensor "
                            f"(one number, with its graph), got {type(loss).__name__}")
        if loss.requires_grad:
            loss.backward()  # (TB6) g_j, back to the detached state at s_j
        losses.append(float(loss.item()))
        if on_window is not None:
            on_window(w, loss)
        carried = next_carry
    return losses, carried


def _time_slice(x: Tensor, a: int, b: int, axis: int) -> Tensor:
    index = [slice(None)] * x.ndim
    index[axis] = slice(a, b)
    return x[tuple(index)]


def _gather(parts: list, lo: int, hi: int, axis: int) -> Any:
    """Outputs of steps [lo, hi) from the window's pieces (concatenated along time)."""
    from .creation import cat

    chunks = []
    for a, b, out in parts:
        out_t = out[0] if isinstance(out, tuple) else out
        s, e = max(a, lo), min(b, hi)
        if s < e:
            chunks.append(_time_slice(out_t, s - a, e - a, axis))
    return chunks[0] if len(chunks) == 1 else cat(chunks, axis=axis)


def iter_windows(T: int, schedule: Truncation) -> Iterator[Window]:
    """Iterate over :func:`windows` (for progress bars)."""
    yield from windows(T, schedule)


class TruncationBias(NamedTuple):
    """How far the gradient of one truncation schedule is from the full-BPTT gradient.

    ``relative_error`` is ||g_s - g_full|| / ||g_full|| and ``cosine`` is
    <g_s, g_full> / (||g_s|| ||g_full||), with g the concatenation of all parameter gradients
    (float64). 0 and 1 mean no bias; NaN when a norm they divide by is 0.
    """

    schedule: Truncation
    relative_error: float
    cosine: float

    @property
    def k(self) -> int:
        """The truncation length: k for chunked TBPTT(k), k2 for TBPTT(k1, k2)."""
        return self.schedule.k2


def truncation_bias(forward: Callable[[Tensor, Any], tuple], x: Tensor,
                    loss_fn: Callable[[Any, int, int], Tensor], params: Iterable[Tensor],
                    ks: Iterable[int | Truncation], state: Any = None,
                    time_axis: int = 0) -> list[TruncationBias]:
    """The truncation-bias meter: compare the TBPTT gradient with the full-BPTT gradient.

    For each entry of ``ks`` (an int k means chunked TBPTT(k); a :class:`Truncation` is used
    as it is) the gradients of all windows of the schedule are accumulated over the whole
    sequence (one call of :func:`run_truncated` without ``on_window``, so no update happens
    in between), and compared with the gradient of full BPTT on the same sequence:

        relative error = ||g_k - g_full|| / ||g_full||,   cosine = <g_k, g_full> / (|g_k| |g_full|)

    With a loss that is a *sum* over steps, every step's loss is counted once by every
    schedule, so the only difference is the gradient paths that cross a window boundary,
    which truncation cuts. For k >= T the schedule is one window, the same computation as
    full BPTT: relative error 0 and cosine 1.

    Parameters
    ----------
    forward, x, loss_fn, state, time_axis
        As for :func:`run_truncated`.
    params : iterable of Tensor
        The parameters whose gradients are compared (e.g. ``model.parameters()``). Their
        ``.grad`` is restored to what it was before the call.
    ks : iterable of int or Truncation

    Returns
    -------
    list of TruncationBias, in the order of ``ks``.
    """
    params = list(params)
    saved = [p.grad for p in params]
    T = x.shape[time_axis]
    try:
        g_full = _gradient_vector(forward, x, full(T), loss_fn, params, state, time_axis)  # (TB2)
        n_full = float(np.linalg.norm(g_full))
        out = []
        for k in ks:
            schedule = k if isinstance(k, Truncation) else chunked(k)
            g = _gradient_vector(forward, x, schedule, loss_fn, params, state, time_axis)
            n_g = float(np.linalg.norm(g))
            # (TB8) is g - g_full; (TB9) its relative size and the cosine
            rel = float(np.linalg.norm(g - g_full)) / n_full if n_full > 0 else float("nan")
            if n_full > 0 and n_g > 0:
                cos = float(np.clip(np.dot(g, g_full) / (n_g * n_full), -1.0, 1.0))
            else:
                cos = float("nan")
            out.append(TruncationBias(schedule, rel, cos))
    finally:
        for p, old in zip(params, saved):
            p.grad = old
    return out


def _gradient_vector(forward: Callable, x: Tensor, schedule: Truncation, loss_fn: Callable,
                     params: list[Tensor], state: Any, time_axis: int) -> np.ndarray:
    """All parameter gradients of one truncated pass over ``x``, as one float64 vector."""
    for p in params:
        p.grad = None
    run_truncated(forward, x, schedule, loss_fn, state=state, time_axis=time_axis)
    parts = []
    for p in params:
        if p._grad is None:
            parts.append(np.zeros(p.numel()))
        else:
            g = to_device(p._grad, "cpu")  # explicit copy from a device (no copy on the CPU)
            parts.append(np.asarray(g, dtype=np.float64).ravel())
    return np.concatenate(parts) if parts else np.zeros(0)
