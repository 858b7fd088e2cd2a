"""Gradient-norm tracking and the analysis of vanishing and exploding gradients.

Two kinds of tools:

* :class:`GradientMonitor` records, for every backward pass, ||dL/dh_t|| at every time step
  (per recurrent module, layer and direction; ||dL/dc_t|| too for the LSTM), ||dL/dtheta|| per
  parameter, and the global norm before and after clipping; the history across training steps
  is kept in plain NumPy arrays. The per-step gradients come from the recurrent layers'
  ``track_state_grads`` switch, which both engines implement identically: each layer's
  :class:`StateGradRecording` (its one hook point) hands out a :class:`StateGradRecorder`
  per forward call, which backward fills in.
* Analysis of the recurrence itself: the step Jacobians dh_t/dh_{t-1} written out for Elman,
  GRU and LSTM (:func:`step_jacobians`), their products ||dh_T/dh_t|| (:func:`jacobian_products`),
  the spectrum of W_hh, the bound of Pascanu et al. 2013 (:func:`pascanu_bound`), a fitted
  decay rate and a "gradient horizon" (:func:`gradient_horizon`).

Devices: a monitored model may live on any device. Norms are computed where the gradients
are, and only the resulting numbers (a float per parameter, a (T,) vector per recorded
state gradient) are copied to the host, explicitly, for the history. The analysis functions
(:func:`step_jacobians`, :func:`spectral_radius`, :func:`singular_values`,
:func:`pascanu_bound`) copy the parameters and inputs to the host explicitly and work there
in float64: the matrices are small (H x H), and a solver for the eigenvalues of general
(non-symmetric) matrices is not in every CuPy release the gpu extra allows.

The vanishing-gradient argument in one line (docs/vanishing.md derives it): for the Elman
RNN, dh_T/dh_t = prod_{s=t+1}^{T} diag(f'(a_s)) W_hh, so
||dh_T/dh_t|| <= (sigma_max(W_hh) * max f')^(T - t), which decays geometrically when the base
is below 1.

References
----------
R. Pascanu, T. Mikolov, Y. Bengio, "On the difficulty of training recurrent neural networks",
ICML 2013.
Y. Bengio, P. Simard, P. Frasconi, "Learning long-term dependencies with gradient descent is
difficult", IEEE TNN 1994.

Why one module of about 860 lines: the per-step state-gradient recording the recurrent
layers hook into, the monitor that reads it, and the analysis of the same numbers (step
Jacobians, the Pascanu bound, decay fits), in the order docs/vanishing.md derives them.
"""
from __future__ import annotations

import weakref
from typing import Any, Iterable

import numpy as np

from . import _validate
from .backend import get_array_module, to_device
from .dtypes import array_of
from .engine import is_grad_enabled
from .ops.activations import stable_sigmoid
from .nn._checks import host_lengths
from .tensor import Tensor

__all__ = [
    "GradientMonitor", "step_jacobians", "jacobian_products", "spectral_radius",
    "singular_values", "pascanu_bound", "gradient_horizon", "fit_decay_rate",
    "state_grad_norms", "StateGradRecording", "StateGradRecorder",
]


def _host(a: Any) -> np.ndarray:
    """``a`` as a NumPy array: host data as it is, device data copied explicitly."""
    return np.asarray(a) if get_array_module(a) is np else to_device(a, "cpu")


def _raw(a: Any) -> Any:
    """The array of a Tensor, or ``a`` itself."""
    return a._data if isinstance(a, Tensor) else a


def _real_array(values: Any, where: str, what: str) -> Any:
    """``values`` (a Tensor, device array or host array-like) as an array of real numbers
    on its device, in float64; a TypeError naming ``where`` and ``what`` for strings,
    objects and complex values (NumPy would fail deep inside, or drop the imaginary
    part)."""
    return array_of(values, where, what).astype(np.float64)


def _real_number(value: Any, where: str, name: str) -> float:
    """``value`` as a finite float (Python or NumPy real, or a 0-d array or one-element
    tensor holding one, such as the norm clip_grad_norm_ returns)."""
    if isinstance(value, Tensor) and value.numel() == 1 and value.dtype.kind in "iuf":
        value = value.item()
    return _validate.finite_real(value, name, where)


def _sq_norm(a: Any) -> float:
    """||a||^2 in float64, computed on ``a``'s device; only the number comes back."""
    g = a.astype(np.float64)
    return float((g * g).sum())


def state_grad_norms(grads: Any, lengths: Any = None) -> np.ndarray:
    """||dL/dh_t|| for every step t of a (T, N, H) gradient array: the Frobenius norm over the
    batch and hidden axes, in float64, computed on the array's device. Returns shape (T,),
    on the host.

    With ``lengths`` (N,) (those the layer ran with), only the positions t < lengths[n] are
    summed: at a padded step the layer carries the state unchanged, and the gradient there
    is a copy of the carried one (dL/dh_n, or dL/dh_0 in the reverse direction), not the
    gradient of a step the sequence took. A step at which no sequence is running gets NaN,
    so that it is neither plotted nor fitted as a vanishing (zero) gradient."""
    g = _real_array(grads, "state_grad_norms", "grads")
    xp = get_array_module(g)
    if g.ndim < 2:
        raise ValueError(f"state_grad_norms: grads must be (T, N, ...) per-step gradients, got "
                         f"shape {tuple(g.shape)}")
    if lengths is None:
        # sum over every axis but time (a reshape to (T, -1) is ambiguous when T = 0)
        return _host(xp.sqrt((g * g).sum(axis=tuple(range(1, g.ndim)))))
    lens = host_lengths(lengths, "state_grad_norms")
    if lens.shape != (g.shape[1],):
        raise ValueError(f"state_grad_norms: lengths of shape {lens.shape} do not match "
                         f"gradients of shape {tuple(g.shape)}; expected (T, N, ...) "
                         f"gradients and (N,) lengths")
    T = g.shape[0]
    bad = np.flatnonzero((lens < 0) | (lens > T))
    if bad.size:
        k = int(bad[0])
        raise ValueError(f"state_grad_norms: lengths[{k}] = {int(lens[k])} is outside "
                         f"[0, T] = [0, {T}] for gradients of shape {tuple(g.shape)}")
    valid = np.arange(g.shape[0])[:, None] < lens[None, :]           # (T, N), host
    per_row = (g * g).sum(axis=tuple(range(2, g.ndim)))              # (T, N), device
    # a select, not a 0/1 product: an inf at a padded position must not turn into NaN
    total = xp.where(xp.asarray(valid), per_row, 0.0).sum(axis=1)
    norms = np.sqrt(_host(total))
    norms[~valid.any(axis=1)] = np.nan
    return norms


# ------------------------------------------------------------------------- per-step recording
class StateGradRecorder:
    """The per-step state gradients of ONE forward call of a recurrent layer: dL/dh_t (and
    dL/dc_t) per (layer, direction), filled in during backward.

    The graph of the call holds the record (the fused op's context, the autograd engine's
    hooks), so a call that no backward pass reaches leaves nothing behind. When backward
    writes into it, the record hands itself to its layer's :class:`StateGradRecording`, which
    keeps it until its next fresh start (see :attr:`tinygrad_rnn.nn.RNNBase.state_grads`).

    Attributes
    ----------
    grads : dict
        ``(layer, direction) -> {'h': (T, N, H)[, 'c': (T, N, H)]}``.
    index : int
        The call's number among the layer's forward calls (call order).
    steps : int
        T, the call's number of time steps.
    lengths : ndarray or None
        The call's (N,) host ``lengths`` (None when every sequence ran all T steps).
    writes : int
        How many times backward wrote into the record.
    """

    def __init__(self, recording: StateGradRecording, index: int, steps: int,
                 lengths: np.ndarray | None) -> None:
        self.grads: dict[tuple[int, int], dict[str, Any]] = {}
        self.index = index
        self.steps = steps
        self.lengths = lengths
        self.writes = 0
        # weak: the recording keeps its records, no cycle
        self._recording = weakref.ref(recording)
        self._generation = -1  # the recording's generation it was last handed to

    def buffer(self, key: tuple[int, int], name: str, shape: tuple, dtype: Any,
               xp: Any) -> Any:
        """The (T, N, H) buffer for ``key``/``name`` on ``xp``'s device, zeroed when first
        asked for; a hook asks for it to write one step into it."""
        self._written()
        return self._slot(key, name, shape, dtype, xp)

    def store(self, key: tuple[int, int], name: str, value: Any) -> None:
        """Keep the whole (T, N, H) array the fused kernel computed."""
        self._written()
        self.grads.setdefault(key, {})[name] = value

    def empty(self, key: tuple[int, int], name: str, shape: tuple, dtype: Any,
              xp: Any) -> None:
        """Record the empty (0, N, H) arrays of a call with no step (no hook will ever
        write, so the record is complete at once)."""
        self._slot(key, name, shape, dtype, xp)
        self._hand_over()

    def hook(self, key: tuple[int, int], name: str, t: int, shape: tuple, dtype: Any,
             rows: Any = None) -> Any:
        """A tensor hook (autograd engine) that writes the gradient it sees into the
        (T, N, H) buffer at step t; only the batch rows selected by the boolean (N,) ``rows``
        (on the gradient's device) when it is given."""
        def write(grad: Any) -> None:
            buf = self.buffer(key, name, shape, dtype, get_array_module(grad))
            if rows is None:
                buf[t] = grad
            else:
                buf[t][rows] = grad[rows]
        return write

    def _slot(self, key: tuple[int, int], name: str, shape: tuple, dtype: Any,
              xp: Any) -> Any:
        slot = self.grads.setdefault(key, {})
        if name not in slot:
            slot[name] = xp.zeros(shape, dtype=dtype)
        return slot[name]

    def _written(self) -> None:
        self.writes += 1
        self._hand_over()

    def _hand_over(self) -> None:
        """Join the recording's current records, once per fresh start of it."""
        recording = self._recording()
        if recording is not None and self._generation != recording.generation:
            self._generation = recording.generation
            recording.keep(self)


class StateGradRecording:
    """The per-step state gradients of one recurrent layer across its forward calls.

    This is the layer's one hook point (``RNNBase.state_grad_recording``): the layer asks
    :meth:`start_call` for the record of each forward call, its engines fill that record in
    during backward (:meth:`StateGradRecorder.store`, :meth:`StateGradRecorder.hook`), and the
    layer's ``track_state_grads``, ``state_grads`` and ``state_grad_segments`` read it here.
    :class:`GradientMonitor` finds recurrent layers by it.

    Attributes
    ----------
    owner : str
        The layer's class name (named in errors).
    keys : list
        Every ``(layer, direction, kind)`` the layer records, kind 'h' (and 'c' for an LSTM).
    track : bool
        Whether forward calls are recorded (the layer's ``track_state_grads``).
    """

    def __init__(self, owner: str, keys: list[tuple[int, int, str]]) -> None:
        self.owner = owner
        self.keys = keys
        self.track = False
        # the records that backward reached since the last fresh start, which bumps the
        # generation; calls numbers the forward calls
        self.records: list[StateGradRecorder] = []
        self.calls = 0
        self.generation = 0

    def start_call(self, steps: int, lengths: np.ndarray | None) -> StateGradRecorder | None:
        """The record of a forward call of ``steps`` steps, or None when nothing is to be
        recorded (tracking off, or gradients disabled: then the records are left as they
        are)."""
        if not (self.track and is_grad_enabled()):
            return None
        if any(r.writes for r in self.records):
            # a backward pass ran since the calls recorded so far: this call starts afresh
            self.records = []
            self.generation += 1
        record = StateGradRecorder(self, self.calls, steps, lengths)
        self.calls += 1
        return record

    def keep(self, record: StateGradRecorder) -> None:
        """Called by a record that backward has just reached (once per fresh start): keep
        it, in call order."""
        self.records.append(record)
        self.records.sort(key=lambda r: r.index)

    @property
    def segments(self) -> list[StateGradRecorder]:
        """The records, one per forward call, in call order (a new list)."""
        return list(self.records)

    def joined(self) -> dict:
        """``(layer, direction) -> {'h': (T, N, H)[, 'c': ...]}``: the records joined along
        time in call order (T is the sum of their steps); ``{}`` when there is none."""
        segments = self.records
        if len(segments) <= 1:
            return segments[0].grads if segments else {}
        sizes = [next(iter(r.grads.values()))["h"].shape[1] for r in segments]
        if len(set(sizes)) > 1:
            raise ValueError(
                f"{self.owner}.state_grads: the {len(segments)} forward calls since "
                f"the last backward pass had batch sizes {sizes}, so their per-step gradients "
                f"cannot be joined along time; read state_grad_segments (one record per call) "
                f"instead"
            )
        joined: dict = {}
        for key, slot in segments[0].grads.items():
            joined[key] = {}
            for name, first in slot.items():
                xp = get_array_module(first)
                joined[key][name] = xp.concatenate([r.grads[key][name] for r in segments],
                                                   axis=0)
        return joined


class GradientMonitor:
    """Record gradient norms of a model at every backward pass.

    Usage::

        monitor = tr.monitor.GradientMonitor(model)      # switches on state-grad tracking
        loss.backward()
        total = tr.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        monitor.record(pre_clip_norm=total)             # before/after clipping
        monitor.state_norms("rnn", layer=0)             # (steps, T) array

    ``record`` must be called after ``backward`` (and after clipping, if any); it reads the
    gradients, it never changes them. The norm before clipping is either passed to
    ``record`` (``clip_grad_norm_`` returns it) or taken by :meth:`before_clip` between
    backward and clipping.

    Per-step state norms: each ``record`` appends one row per recurrent module, layer,
    direction and kind ('h', and 'c' for an LSTM), so that row i of :meth:`state_norms`
    belongs to step i of :attr:`steps` and :meth:`global_norms`:

    * the row covers every forward call of the layer since the last backward pass (a
      sequence fed in segments, step-by-step decoding): the calls' steps one after the
      other, in call order (:attr:`tinygrad_rnn.nn.RNNBase.state_grads`); a forward pass
      under ``no_grad`` between ``backward`` and ``record`` changes nothing;
    * when the layer ran with ``lengths``, a padded position does not count in its step's
      norm, and a step at which no sequence was running is NaN (:func:`state_grad_norms`):
      the gradient carried through padding is not the gradient of a step, and counting it
      would make short sequences' final-state gradients show up at late steps;
    * a record with no new per-step gradients for the module (it did not run, or no
      backward pass reached it since the previous record) gives a row of NaN.
    """

    def __init__(self, model: Any) -> None:
        if not all(callable(getattr(model, m, None))
                   for m in ("named_modules", "named_parameters", "parameters")):
            raise TypeError(f"GradientMonitor: model must be a tr.nn.Module (it reads "
                            f"named_modules() and named_parameters()), got "
                            f"{type(model).__name__}")
        self.model = model
        self.recurrent: dict[str, Any] = {}
        self._state: dict[tuple, list] = {}  # (name, layer, direction, kind) -> rows
        for name, module in model.named_modules():
            recording = getattr(module, "state_grad_recording", None)
            if isinstance(recording, StateGradRecording):
                recording.track = True          # the layer's track_state_grads
                name = name or "(model)"
                self.recurrent[name] = module
                for layer, direction, kind in recording.keys:
                    self._state[(name, layer, direction, kind)] = []
        self.param_names = [n for n, _ in model.named_parameters()]
        self.history: dict[str, list] = {"global_norm": [], "clipped_norm": []}
        self._param_norms: list[np.ndarray] = []
        self._seen: dict[str, list] = {}  # name -> (record, writes) read by the last record()
        self._pre_clip: float | None = None

    def before_clip(self) -> float:
        """Record the global norm now (call between backward and clipping); returns it."""
        self._pre_clip = self._global_norm()
        return self._pre_clip

    def _global_norm(self) -> float:
        total = 0.0
        for p in self.model.parameters():
            if p._grad is not None:
                total += _sq_norm(p._grad)
        return float(np.sqrt(total))

    def record(self, clipped: bool = False, pre_clip_norm: Any = None) -> None:
        """Append this backward pass's norms to the history.

        The global norm before clipping is ``pre_clip_norm`` when given (a float or the 0-d
        Tensor ``clip_grad_norm_`` returns), else the one saved by :meth:`before_clip` since
        the last record, else the current norm (no clipping happened). ``clipped=True``
        says that the gradients were clipped: then one of the first two is required, and its
        absence raises ``RuntimeError`` instead of recording the clipped norm as the
        pre-clipping one.
        """
        if not isinstance(clipped, (bool, np.bool_)):
            raise TypeError(f"GradientMonitor.record: clipped must be True or False, got "
                            f"{clipped!r} ({type(clipped).__name__})")
        now = self._global_norm()
        if pre_clip_norm is not None:
            # a one-element tensor (clip_grad_norm_'s result) is read by _real_number
            pre = _real_number(pre_clip_norm, "GradientMonitor.record", "pre_clip_norm")
        elif self._pre_clip is not None:
            pre = self._pre_clip
        elif clipped:
            raise RuntimeError(
                "GradientMonitor.record(clipped=True): the norm before clipping is unknown; "
                "call before_clip() between backward and clipping, or pass "
                "pre_clip_norm=<the value clip_grad_norm_ returned>"
            )
        else:
            pre = now
        self.history["global_norm"].append(pre)
        self.history["clipped_norm"].append(now)
        self._pre_clip = None
        norms = []
        for _, p in self.model.named_parameters():
            if p._grad is None:
                norms.append(0.0)
            else:
                norms.append(float(np.sqrt(_sq_norm(p._grad))))
        self._param_norms.append(np.asarray(norms))
        fresh = {name: self._new_segments(name, module)
                 for name, module in self.recurrent.items()}
        for (name, layer, direction, kind), rows in self._state.items():
            parts = [state_grad_norms(r.grads[(layer, direction)][kind], r.lengths)
                     for r in fresh[name]]
            rows.append(np.concatenate(parts) if parts else np.zeros(0))

    def _new_segments(self, name: str, module: Any) -> list:
        """The module's per-call records, or [] when they are the very ones the previous
        record read and no backward pass has written into them since."""
        segments = module.state_grad_recording.segments
        old = self._seen.get(name, [])
        # weak references: the monitor must not keep old gradient arrays alive
        self._seen[name] = [(weakref.ref(r), r.writes) for r in segments]
        same = len(old) == len(segments) and all(
            ref() is r and writes == r.writes for (ref, writes), r in zip(old, segments))
        return [] if same else segments

    @property
    def steps(self) -> int:
        """Number of recorded backward passes."""
        return len(self.history["global_norm"])

    def param_norms(self) -> dict[str, np.ndarray]:
        """||dL/dtheta|| per parameter name, each an array over recorded steps."""
        if not self._param_norms:
            return {n: np.zeros(0) for n in self.param_names}
        stacked = np.stack(self._param_norms)
        return {n: stacked[:, i] for i, n in enumerate(self.param_names)}

    def global_norms(self) -> tuple[np.ndarray, np.ndarray]:
        """(before clipping, after clipping), each an array over recorded steps."""
        return (np.asarray(self.history["global_norm"]),
                np.asarray(self.history["clipped_norm"]))

    def _state_key(self, where: str, module: str | None, layer: Any, direction: Any,
                   kind: str) -> tuple:
        """The key of the recorded rows, checked (messages name ``where``)."""
        if module is None:
            if len(self.recurrent) != 1:
                have = (f"recurrent modules {list(self.recurrent)}; name one"
                        if self.recurrent else "no recurrent module (RNN, GRU or LSTM)")
                raise ValueError(f"{where}: the model has {have}")
            module = next(iter(self.recurrent))
        if module not in self.recurrent:
            raise ValueError(
                f"{where}: no recurrent module named {module!r}; the model's are "
                f"{list(self.recurrent)} (names as named_modules() gives them, '(model)' for "
                f"a model that is itself a recurrent layer)"
            )
        for what, value in (("layer", layer), ("direction", direction)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"{where}: {what} must be an integer, got "
                                f"{type(value).__name__} {value!r}")
        key = (module, int(layer), int(direction), kind)
        if key not in self._state:
            valid = [k[1:] for k in self._state if k[0] == module]
            raise ValueError(
                f"{where}: {module!r} ({type(self.recurrent[module]).__name__}) has no "
                f"layer={layer}, direction={direction}, kind={kind!r}; the valid (layer, "
                f"direction, kind) are {valid}"
            )
        return key

    def latest_state_norms(self, module: str | None = None, layer: int = 0,
                           direction: int = 0, kind: str = "h") -> np.ndarray:
        """The last recorded step's row of :meth:`state_norms` (a 1-D array of length T, empty
        before the first record), without building the whole (steps, T) array: what a
        training loop logs once per update."""
        key = self._state_key("latest_state_norms", module, layer, direction, kind)
        rows = self._state[key]
        return np.asarray(rows[-1], dtype=np.float64) if rows else np.zeros(0)

    def state_norms(self, module: str | None = None, layer: int = 0, direction: int = 0,
                    kind: str = "h") -> np.ndarray:
        """||dL/dh_t|| (kind 'h') or ||dL/dc_t|| (kind 'c', LSTM only) as an array
        (steps, T): row i belongs to recorded step i.

        ``module`` is the recurrent submodule's name as ``named_modules()`` gives it, or
        ``'(model)'`` when the monitored model is itself a recurrent layer; it may be omitted
        when there is only one. Rows are padded with NaN on the right to the longest; a
        step without data is a row of NaN (see the class docstring). An unknown module,
        layer, direction or kind is a ``ValueError`` listing the valid ones.
        """
        key = self._state_key("state_norms", module, layer, direction, kind)
        rows = self._state[key]
        if not rows:
            return np.zeros((0, 0))
        width = max(len(r) for r in rows)
        out = np.full((len(rows), width), np.nan)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out


# ------------------------------------------------------------------------- analysis
def _matrix(W: Any, where: str, square: bool, name: str = "W") -> np.ndarray:
    """W as a non-empty 2-D float64 host array (``square``: and square), else a ValueError
    naming ``where`` and the shape."""
    W = _host(_real_array(W, where, name))
    if W.ndim != 2 or W.size == 0:
        raise ValueError(f"{where}: {name} must be a non-empty 2-D matrix, got shape "
                         f"{W.shape}")
    if not np.isfinite(W).all():
        raise ValueError(f"{where}: {name} of shape {W.shape} holds inf or nan; it has no "
                         f"finite spectrum")
    if square and W.shape[0] != W.shape[1]:
        rows, cols = W.shape
        hint = ""
        if rows % cols == 0:
            hint = (f". A stacked recurrent weight holds one {cols} x {cols} block per gate "
                    f"(GRU weight_hh is 3H x H, LSTM 4H x H): pass one block, "
                    f"W[k * {cols}:(k + 1) * {cols}]")
        raise ValueError(f"{where}: {name} of shape {W.shape} is not square, so it has no "
                         f"eigenvalues{hint}")
    return W.astype(np.float64)


def spectral_radius(W: Any) -> float:
    """max |eigenvalue| of a non-empty square matrix (copied to the host explicitly when it
    is on a device: general eigenvalue solvers are not in every CuPy release). A stacked
    gate weight (GRU, LSTM) is refused: pass one gate's H x H block."""
    W = _matrix(W, "spectral_radius", square=True)
    return float(np.max(np.abs(np.linalg.eigvals(W))))  # rho(W) of (VG6)


def singular_values(W: Any) -> np.ndarray:
    """Singular values of a non-empty 2-D matrix W, largest first (computed on the host, in
    float64)."""
    return np.linalg.svd(_matrix(W, "singular_values", square=False), compute_uv=False)


def pascanu_bound(W_hh: Any, distances: Iterable[int], gamma: float = 1.0) -> np.ndarray:
    """The bound ||dh_T/dh_t|| <= (gamma * sigma_max(W_hh))^(T - t) of Pascanu et al. 2013,
    for each distance T - t. ``gamma`` bounds |f'|: 1 for tanh and relu, 1/4 for sigmoid;
    the largest |f'| actually met on a trajectory gives a tighter bound.

    ``W_hh`` is the square (H, H) recurrent matrix of one gate (a stacked GRU or LSTM
    weight is refused: pass one block), ``distances`` integers >= 0 (T - t), ``gamma`` a
    finite number > 0."""
    where = "pascanu_bound"
    W = _matrix(W_hh, where, square=True, name="W_hh")
    d = _distances(distances, where)
    gamma = _real_number(gamma, where, "gamma")
    if not gamma > 0:
        raise ValueError(f"{where}: gamma bounds |f'| and must be > 0, got {gamma!r}")
    s = float(np.linalg.svd(W, compute_uv=False)[0])
    return (gamma * s) ** d  # (VG5)


def _distances(distances: Any, where: str) -> np.ndarray:
    """``distances`` (an iterable or array of integers >= 0) as a float64 (k,) array."""
    if isinstance(distances, (str, bytes)) or not hasattr(distances, "__iter__") or (
            isinstance(distances, np.ndarray) and distances.ndim == 0):
        raise TypeError(f"{where}: distances must be a sequence of integers T - t >= 0, got "
                        f"{type(distances).__name__}")
    values = list(distances)
    d = np.asarray(values)
    if d.ndim != 1 or (d.size and d.dtype.kind not in "iu"):
        raise TypeError(f"{where}: distances must be a 1-D sequence of integers T - t >= 0, "
                        f"got {values!r}")
    if d.size and int(d.min()) < 0:
        raise ValueError(f"{where}: distances must be >= 0 (a distance T - t back in time), "
                         f"got {int(d.min())}")
    return d.astype(np.float64)


def _blocks(W: np.ndarray, n: int) -> list[np.ndarray]:
    H = W.shape[0] // n
    return [W[k * H:(k + 1) * H] for k in range(n)]


def step_jacobians(module: Any, x: Any, h0: Any = None, c0: Any = None,
                   sample: int = 0) -> list[np.ndarray]:
    """The step Jacobians J_t = d s_t / d s_{t-1} of a single-layer recurrent layer or cell
    along one sample's trajectory, written out from the equations (float64).

    For Elman and GRU the state is s = h and J_t is (H, H); for the LSTM s = (h, c) and J_t
    is (2H, 2H) in the block layout [[dh/dh, dh/dc], [dc/dh, dc/dc]] (the cell path dc/dc is
    what lets LSTM gradients survive). Formulas (column convention, a = pre-activation):

    * Elman:  J_t = diag(f'(a_t)) W_hh
    * GRU:    J_t = diag(z) + diag(1 - z) dn/dh + diag(h_{t-1} - n) dz/dh with
      dz/dh = diag(z(1-z)) W_hz, dr/dh = diag(r(1-r)) W_hr and, for reset='after',
      dn/dh = diag(1-n^2) [diag(W_hn h + b_hn) dr/dh + diag(r) W_hn]; for 'before',
      dn/dh = diag(1-n^2) W_hn [diag(r) + diag(h) dr/dh]
    * LSTM:   dc/dh = diag(c_{t-1}) df/dh + diag(g) di/dh + diag(i) dg/dh, dc/dc = diag(f)
      (+ peephole terms), dh/d* = diag(tanh c) do/d* + diag(o (1 - tanh^2 c)) dc/d*.

    ``module`` is an RNNCell/GRUCell/LSTMCell or a one-layer unidirectional RNN/GRU/LSTM;
    ``x`` is (T, N, D) time-major, (N, T, D) for a ``batch_first`` layer, or (T, D) (one
    sample: N = 1). ``sample`` picks the trajectory, 0 <= sample < N. The initial states
    ``h0`` and ``c0`` (LSTM only; zeros when omitted) are each one array: (N, H) as a cell
    takes it, (1, N, H) as a layer takes it, or (H,) for the chosen sample alone. The
    ``(h0, c0)`` pair that ``LSTM.forward`` takes is refused: pass ``h0=..., c0=...``.
    Anything else is a ``ValueError`` (``TypeError`` for a wrong type) naming the shapes.
    """
    mode, p, opts = _cell_params(module)
    name = type(module).__name__
    W_ih, W_hh = p["weight_ih"], p["weight_hh"]
    H, D = W_hh.shape[1], W_ih.shape[1]
    xs = _host(_real_array(x, "step_jacobians", "x"))
    if xs.ndim not in (2, 3) or xs.shape[-1] != D:
        raise ValueError(f"step_jacobians: x of shape {xs.shape} does not fit {name} with "
                         f"input size {D}; expected (T, N, {D}) ((N, T, {D}) for a "
                         f"batch_first layer) or (T, {D})")
    batch_first = getattr(module, "batch_first", False)
    N = 1 if xs.ndim == 2 else xs.shape[0 if batch_first else 1]
    if isinstance(sample, bool) or not isinstance(sample, (int, np.integer)):
        raise TypeError(f"step_jacobians: sample must be an integer, got "
                        f"{type(sample).__name__} {sample!r}")
    if not 0 <= sample < N:
        raise ValueError(f"step_jacobians: sample {sample} is out of range for a batch of "
                         f"N = {N} (x of shape {xs.shape}); valid: 0 .. {N - 1}")
    if xs.ndim == 3:
        xs = xs[sample] if batch_first else xs[:, sample]
    if mode != "LSTM" and c0 is not None:
        raise ValueError(f"step_jacobians: c0 is the LSTM cell state; {name} has none")
    h = _initial_state(h0, "h0", N, H, sample)
    c = _initial_state(c0, "c0", N, H, sample)
    T = xs.shape[0]
    b_ih = p.get("bias_ih", np.zeros(W_ih.shape[0]))
    b_hh = p.get("bias_hh", np.zeros(W_hh.shape[0]))
    out = []
    for t in range(T):
        xw = W_ih @ xs[t] + b_ih
        hw = W_hh @ h + b_hh
        if mode == "RNN":
            a = xw + hw  # (VG1)
            if opts["nonlinearity"] == "tanh":
                h_new = np.tanh(a)
                d = 1 - h_new ** 2
            else:
                h_new = np.maximum(a, 0)
                d = (a > 0).astype(np.float64)
            out.append(d[:, None] * W_hh)  # (VG2) J_t = diag(f'(a_t)) W_hh
            h = h_new
        elif mode == "GRU":
            J, h = _gru_jacobian(xw, h, W_hh, b_hh, opts["reset"])
            out.append(J)
        else:
            J, h, c = _lstm_jacobian(xw, h, c, W_hh, b_hh, p.get("weight_ch"),
                                     opts["coupled"])
            out.append(J)
    return out


def _initial_state(s0: Any, what: str, N: int, H: int, sample: int) -> np.ndarray:
    """The (H,) initial state of sample ``sample`` from ``s0`` (None: zeros), which is
    (H,), (N, H) or (1, N, H)."""
    if s0 is None:
        return np.zeros(H)
    if isinstance(s0, (tuple, list)) and any(
            isinstance(a, Tensor) or hasattr(a, "shape") for a in s0):
        raise TypeError(
            f"step_jacobians: {what} must be one array, got a {type(s0).__name__} of "
            f"{len(s0)} arrays; for an LSTM pass h0=... and c0=... separately, not the "
            f"(h0, c0) pair LSTM.forward takes"
        )
    s = _host(_raw(s0)).astype(np.float64)
    if s.shape == (H,):
        return s
    if s.shape in ((N, H), (1, N, H)):
        return s.reshape(N, H)[sample]
    raise ValueError(f"step_jacobians: {what} of shape {s.shape} does not fit a batch of "
                     f"N = {N} with hidden size H = {H}; expected ({N}, {H}), (1, {N}, {H}) or "
                     f"({H},) for the chosen sample alone")


def _gru_jacobian(xw: np.ndarray, h: np.ndarray, W_hh: np.ndarray, b_hh: np.ndarray,
                  reset: str) -> tuple[np.ndarray, np.ndarray]:
    xr, xz, xn = np.split(xw, 3)
    W_hr, W_hz, W_hn = _blocks(W_hh, 3)
    b_hr, b_hz, b_hn = np.split(b_hh, 3)
    r = stable_sigmoid(xr + W_hr @ h + b_hr)
    z = stable_sigmoid(xz + W_hz @ h + b_hz)
    dr = (r * (1 - r))[:, None] * W_hr
    dz = (z * (1 - z))[:, None] * W_hz
    if reset == "after":
        hn = W_hn @ h + b_hn
        n = np.tanh(xn + r * hn)
        dn = (1 - n ** 2)[:, None] * (hn[:, None] * dr + r[:, None] * W_hn)
    else:
        n = np.tanh(xn + W_hn @ (r * h) + b_hn)
        dn = (1 - n ** 2)[:, None] * (W_hn @ (np.diag(r) + h[:, None] * dr))
    J = np.diag(z) + (1 - z)[:, None] * dn + (h - n)[:, None] * dz  # (VG7)
    return J, (1 - z) * n + z * h


def _lstm_jacobian(xw: np.ndarray, h: np.ndarray, c: np.ndarray, W_hh: np.ndarray,
                   b_hh: np.ndarray, w_ch: np.ndarray | None,
                   coupled: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    H = h.shape[0]
    a = xw + W_hh @ h + b_hh
    zero = np.zeros(H)
    if coupled:
        a_f, a_g, a_o = np.split(a, 3)
        W_f, W_g, W_o = _blocks(W_hh, 3)
        w_cf, w_co = (np.split(w_ch, 2) if w_ch is not None else (zero, zero))
        w_ci = zero
    else:
        a_i, a_f, a_g, a_o = np.split(a, 4)
        W_i, W_f, W_g, W_o = _blocks(W_hh, 4)
        w_ci, w_cf, w_co = (np.split(w_ch, 3) if w_ch is not None else (zero, zero, zero))
    f = stable_sigmoid(a_f + w_cf * c)
    g = np.tanh(a_g)
    Af = (f * (1 - f))[:, None]
    Ag = (1 - g ** 2)[:, None]
    df_dh, df_dc = Af * W_f, np.diag(Af[:, 0] * w_cf)
    dg_dh = Ag * W_g
    if coupled:
        c_new = f * c + (1 - f) * g
        dc_dh = (c - g)[:, None] * df_dh + (1 - f)[:, None] * dg_dh
        dc_dc = np.diag(f) + (c - g)[:, None] * df_dc
    else:
        i = stable_sigmoid(a_i + w_ci * c)
        Ai = (i * (1 - i))[:, None]
        di_dh, di_dc = Ai * W_i, np.diag(Ai[:, 0] * w_ci)
        c_new = f * c + i * g
        dc_dh = c[:, None] * df_dh + g[:, None] * di_dh + i[:, None] * dg_dh
        dc_dc = np.diag(f) + c[:, None] * df_dc + g[:, None] * di_dc  # (VG9): diag(f) + peepholes
    o = stable_sigmoid(a_o + w_co * c_new)
    Ao = (o * (1 - o))[:, None]
    do_dh = Ao * (W_o + w_co[:, None] * dc_dh)
    do_dc = Ao * (w_co[:, None] * dc_dc)
    tc = np.tanh(c_new)
    k = (o * (1 - tc ** 2))[:, None]
    dh_dh = tc[:, None] * do_dh + k * dc_dh
    dh_dc = tc[:, None] * do_dc + k * dc_dc
    J = np.block([[dh_dh, dh_dc], [dc_dh, dc_dc]])  # (VG8)
    return J, o * tc, c_new


def _cell_params(module: Any) -> tuple[str, dict, dict]:
    name = type(module).__name__
    mode = {"RNNCell": "RNN", "RNN": "RNN", "GRUCell": "GRU", "GRU": "GRU",
            "LSTMCell": "LSTM", "LSTM": "LSTM"}.get(name)
    if mode is None:
        raise TypeError(f"step_jacobians: module must be an RNNCell, GRUCell, LSTMCell or a "
                        f"one-layer RNN, GRU or LSTM, got {name}")
    if name in ("RNN", "GRU", "LSTM"):
        if module.num_layers != 1 or module.bidirectional:
            raise ValueError(f"step_jacobians: {name} must have one layer and one direction")
        sfx = "_l0"
    else:
        sfx = ""
    p = {}
    for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_ch"):
        t = getattr(module, base + sfx, None)
        if t is not None:
            p[base] = _host(t._data).astype(np.float64)
    opts = {"nonlinearity": getattr(module, "nonlinearity", "tanh"),
            "reset": getattr(module, "reset", "after"),
            "coupled": getattr(module, "coupled", False)}
    return mode, p, opts


def jacobian_products(jacobians: list[np.ndarray], ord: Any = 2) -> np.ndarray:
    """||d s_T / d s_t|| for t = 0..T (entry t is the norm of J_T ... J_{t+1}; entry T is
    the identity's norm, 1 for the spectral norm). ``ord`` as numpy.linalg.norm (2 = largest
    singular value). The products are accumulated from the end, one matrix product per
    step."""
    where = "jacobian_products"
    if isinstance(jacobians, (str, bytes)) or not hasattr(jacobians, "__iter__"):
        raise TypeError(f"{where}: jacobians must be a list of square (n, n) matrices, got "
                        f"{type(jacobians).__name__}")
    jacobians = [_host(_real_array(J, where, "jacobians")) for J in jacobians]
    T = len(jacobians)
    if T == 0:
        return np.ones(1)
    n = jacobians[0].shape[0] if jacobians[0].ndim == 2 else -1
    for t, J in enumerate(jacobians):
        if J.shape != (n, n):
            raise ValueError(f"{where}: jacobians must all be square matrices of one shape; "
                             f"jacobians[0] has shape {jacobians[0].shape}, jacobians[{t}] "
                             f"{J.shape}")
    if ord not in (None, 1, -1, 2, -2, np.inf, -np.inf, "fro", "nuc"):
        raise ValueError(f"{where}: ord must be a matrix norm order of numpy.linalg.norm "
                         f"(None, 1, -1, 2, -2, inf, -inf, 'fro', 'nuc'), got {ord!r}")
    P = np.eye(n)
    norms = np.empty(T + 1)
    norms[T] = np.linalg.norm(P, ord)
    for t in range(T - 1, -1, -1):
        # (VG3), (V1): dS_T/dS_t = (dS_T/dS_{t+1}) J_{t+1}; jacobians[t] = J_{t+1}
        P = P @ jacobians[t]
        norms[t] = np.linalg.norm(P, ord)
    return norms


def _vector(values: Any, where: str, what: str) -> np.ndarray:
    """``values`` as a 1-D float64 host array, else a ValueError naming ``where``."""
    v = _host(_real_array(values, where, what))
    if v.ndim != 1:
        raise ValueError(
            f"{where}: {what} must be 1-D (one value per step), got shape {v.shape}; for the "
            f"(steps, T) array of GradientMonitor.state_norms pass one row, e.g. norms[i]"
        )
    return v


def fit_decay_rate(norms: Any, distances: Any = None) -> float:
    """Fit norm ~ C * rate^distance by least squares on log(norm); returns the rate.

    ``norms`` is 1-D, ordered by distance 0, 1, 2, ... unless ``distances`` (1-D, one per
    norm) is given. Non-positive or non-finite norms (NaN padding included) are left out;
    the norms left must sit at two distinct distances at least, else ``ValueError``."""
    y = _vector(norms, "fit_decay_rate", "norms")
    if distances is None:
        d = np.arange(y.size, dtype=np.float64)
    else:
        d = _vector(distances, "fit_decay_rate", "distances")
        if d.shape != y.shape:
            raise ValueError(f"fit_decay_rate: {d.size} distances for {y.size} norms; give "
                             f"one distance per norm")
        if not np.isfinite(d).all():
            raise ValueError("fit_decay_rate: distances must be finite")
    keep = np.isfinite(y) & (y > 0)
    if keep.sum() < 2:
        raise ValueError("fit_decay_rate: need at least two positive norms")
    used = np.unique(d[keep])
    if used.size < 2:
        raise ValueError(f"fit_decay_rate: the positive, finite norms all sit at distance "
                         f"{used[0]:g}; a rate needs norms at two distinct distances")
    slope = np.polyfit(d[keep], np.log(y[keep]), 1)[0]  # (VG10) beta_hat
    return float(np.exp(slope))


def gradient_horizon(norms: Any, fraction: float = 1e-2) -> int:
    """The number of steps back from the end before the norm first falls below
    ``fraction`` times its value at the end.

    ``norms`` is 1-D and indexed by time (norms[-1] at the last step T, e.g. ||dL_T/dh_t||,
    a row of :meth:`GradientMonitor.state_norms` or the output of
    :func:`jacobian_products`). Trailing NaN (the padding of a shorter sequence's row) is
    dropped first, so the last step is the last one with a value; NaN before it, or a row
    of NaN only (a step without data), is a ``ValueError``. Returns the distance d of the
    first step t = T - d with norms[t] < fraction * norms[-1], or the sequence length when
    the norm never falls that low (the horizon is at least the whole sequence); 0 for an
    empty sequence.
    """
    y = _vector(norms, "gradient_horizon", "norms")
    fraction = _real_number(fraction, "gradient_horizon", "fraction")
    if not 0 < fraction < np.inf:
        raise ValueError(f"gradient_horizon: fraction must be a positive number, got "
                         f"{fraction}")
    if y.size == 0:
        return 0
    finite_end = np.flatnonzero(~np.isnan(y))
    if finite_end.size == 0:
        raise ValueError(f"gradient_horizon: all {y.size} norms are NaN (a step without "
                         f"data?)")
    y = y[:finite_end[-1] + 1]  # drop the trailing NaN padding
    if np.isnan(y).any():
        raise ValueError(f"gradient_horizon: norms has NaN at step "
                         f"{int(np.flatnonzero(np.isnan(y))[0])}, before the last value; only "
                         f"trailing NaN padding is allowed")
    ref = y[-1]
    for d in range(1, y.size):
        if y[-1 - d] < fraction * ref:  # (VG11)
            return d
    return int(y.size)
