"""Variable-length batches, as ``torch.nn.utils.rnn``: padding, packing and back.

A batch of B sequences of lengths L_0, ..., L_{B-1} (each of shape (L_b, *)) has two
layouts:

* **padded**: one tensor (T, B, *) (or (B, T, *) with ``batch_first``), T = max L_b, the
  steps past each sequence's end filled with ``padding_value`` (:func:`pad_sequence`);
* **packed** (:class:`PackedSequence`): only the valid steps, time step by time step. The
  sequences are ordered by decreasing length (``sorted_indices``), so at step t the first
  ``batch_sizes[t]`` of them are still running and ``data`` holds their rows one after the
  other: ``data`` has shape (sum L_b, *).

:func:`pack_padded_sequence` and :func:`pad_packed_sequence` convert between the two, and
``nn.RNN``/``GRU``/``LSTM`` take a PackedSequence and return one (with ``h_n`` (and
``c_n``) from each sequence's last valid step, in the original batch order), exactly as in
torch. Every conversion is one gather (advanced indexing) of the data, so it is
differentiable with respect to the padded or packed data (the gradient of a gather is a
scatter-add); padding positions receive no gradient.

Lengths decide the layout, so they are read on the host (a list, a NumPy array or a CPU
Tensor of integers), as in torch; ``batch_sizes``, ``sorted_indices`` and
``unsorted_indices`` are int64 host Tensors.

Notes
-----
With ``enforce_sorted=False`` the sequences are sorted by decreasing length with a stable
sort, so sequences of equal length keep their batch order. torch's sort is not stable for
more than 16 sequences: there, among sequences of *equal* length, ``sorted_indices`` and the
row order inside ``data`` may differ from torch's. Nothing else can differ: padded tensors,
lengths, ``batch_sizes``, recurrent outputs, final states and all gradients are independent
of that order.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import numpy as np

from ...backend import get_array_module
from ...creation import cat
from ...tensor import Tensor
from .._checks import host_lengths

__all__ = [
    "PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence",
    "pack_sequence", "unpad_sequence", "unpack_sequence", "invert_permutation",
]

PADDING_SIDES = ("right", "left")


class _PackedFields(NamedTuple):
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(_PackedFields):
    """A batch of variable-length sequences without padding (a named tuple, as torch's).

    Attributes
    ----------
    data : Tensor, shape (sum of lengths, *)
        The valid steps: step 0 of every sequence (longest first), then step 1 of those
        still running, and so on.
    batch_sizes : int64 Tensor, shape (T,)
        How many sequences are still running at each step (non-increasing); on the host.
    sorted_indices : int64 Tensor of shape (B,), or None
        ``data``'s sequence order as indices into the original batch (None when the batch
        was already sorted by decreasing length, ``enforce_sorted=True``).
    unsorted_indices : int64 Tensor of shape (B,), or None
        The inverse permutation: where original sequence b sits in the sorted order.

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`, not by hand.
    """

    def __new__(cls, data: Tensor, batch_sizes: Any = None, sorted_indices: Any = None,
                unsorted_indices: Any = None) -> "PackedSequence":
        if not isinstance(data, Tensor):
            raise TypeError(f"PackedSequence: data must be a Tensor, got "
                            f"{type(data).__name__}")
        if batch_sizes is None:
            raise ValueError("PackedSequence: batch_sizes is required (build a "
                             "PackedSequence with pack_padded_sequence or pack_sequence)")
        batch_sizes = _int64_tensor(host_lengths(batch_sizes, "PackedSequence",
                                                 "batch_sizes"))
        if sorted_indices is not None:
            sorted_indices = _int64_tensor(host_lengths(sorted_indices, "PackedSequence",
                                                        "sorted_indices"))
            if unsorted_indices is None:
                unsorted_indices = _int64_tensor(invert_permutation(sorted_indices.numpy()))
        elif unsorted_indices is not None:
            raise ValueError("PackedSequence: unsorted_indices given without sorted_indices")
        if unsorted_indices is not None and not isinstance(unsorted_indices, Tensor):
            unsorted_indices = _int64_tensor(host_lengths(unsorted_indices, "PackedSequence",
                                                          "unsorted_indices"))
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    # ---------------------------------------------------------------- conversions
    def _with_data(self, data: Tensor) -> "PackedSequence":
        return type(self)(data, self.batch_sizes, self.sorted_indices, self.unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> "PackedSequence":
        """``data.to(*args, **kwargs)`` (device and/or dtype); the indices stay on the host.
        Returns ``self`` when nothing changes, as torch."""
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else self._with_data(data)

    def cpu(self) -> "PackedSequence":
        return self.to("cpu")

    def double(self) -> "PackedSequence":
        return self.to(np.float64)

    def float(self) -> "PackedSequence":
        return self.to(np.float32)

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` is on a CUDA device."""
        return str(self.data.device).startswith("cuda")


# ------------------------------------------------------------------------------ helpers
def _int64_tensor(values: Any) -> Tensor:
    """Host int64 Tensor of ``values`` (an index or length vector)."""
    return Tensor(np.asarray(values, dtype=np.int64))


def _as_tensor(value: Any, fn: str, name: str) -> Tensor:
    """``value`` as a Tensor; a TypeError naming ``fn`` and ``name`` for anything that is
    not a Tensor or an array of numbers."""
    if isinstance(value, Tensor):
        return value
    try:
        arr = get_array_module(value).asarray(value)
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.dtype.kind not in "biuf":
        raise TypeError(f"{fn}: {name} must be a Tensor, got {type(value).__name__}")
    return Tensor(arr)


def _flag(fn: str, name: str, value: Any) -> bool:
    """``value`` as a bool (True/False or 0/1, Python or NumPy); a TypeError naming ``fn``
    and ``name`` otherwise."""
    if isinstance(value, (bool, np.bool_)) or (
            isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise TypeError(f"{fn}: {name} must be True or False, got {value!r}")


def invert_permutation(permutation: Any) -> np.ndarray:
    """The inverse of a permutation of 0..n-1: ``inv[permutation[i]] = i``."""
    perm = np.asarray(permutation, dtype=np.int64)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.size, dtype=np.int64)
    return inverse


def _packed_positions(batch_sizes: np.ndarray, sorted_indices: np.ndarray | None) -> tuple:
    """(t, b) for every row of a packed ``data``, in its order: the time step and the
    *original* batch index of each row (two (sum of lengths,) int64 arrays)."""
    steps = batch_sizes.size
    width = int(batch_sizes[0]) if steps else 0
    # (T, B_sorted): True where sorted sequence j still runs at step t; row-major order of
    # the True entries is exactly the packed order (step by step, longest first)
    running = np.arange(width)[None, :] < batch_sizes[:, None]
    t_idx, j_idx = np.nonzero(running)
    b_idx = j_idx if sorted_indices is None else sorted_indices[j_idx]
    return t_idx, b_idx


def _sequence_lengths(batch_sizes: np.ndarray) -> np.ndarray:
    """Lengths of the sequences in sorted order, from the batch sizes: sequence j runs for
    as many steps as have more than j sequences."""
    width = int(batch_sizes[0]) if batch_sizes.size else 0
    return (batch_sizes[None, :] > np.arange(width)[:, None]).sum(axis=1).astype(np.int64)


def _pad_row(data: Tensor, padding_value: float) -> Tensor:
    """One row of ``padding_value`` shaped like a row of ``data`` (constant: no gradient)."""
    return data.new_full((1,) + tuple(data.shape[1:]), padding_value)


# ------------------------------------------------------------------------------ padding
def pad_sequence(sequences: Any, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences of different lengths into one padded tensor, as torch.

    Parameters
    ----------
    sequences : list of Tensor
        B tensors of shapes (L_b, *) with the same trailing shape * and dtype.
    batch_first : bool
        Output (B, T, *) instead of (T, B, *); T = max L_b.
    padding_value : float
        The value of the steps past a sequence's end.
    padding_side : {'right', 'left'}
        Pad after each sequence (default) or before it.

    Returns
    -------
    Tensor
        Differentiable with respect to every sequence (one gather from their
        concatenation).
    """
    fn = "pad_sequence"
    if isinstance(sequences, Tensor):
        sequences = list(sequences)  # torch takes a tensor as the sequence of its rows
    if not isinstance(sequences, Iterable):
        raise TypeError(f"{fn}: sequences must be a list of Tensors, got "
                        f"{type(sequences).__name__}")
    seqs = [_as_tensor(s, fn, f"sequences[{k}]") for k, s in enumerate(sequences)]
    if not seqs:
        raise ValueError(f"{fn}: received an empty list of sequences")
    batch_first = _flag(fn, "batch_first", batch_first)
    if padding_side not in PADDING_SIDES:
        raise ValueError(f"{fn}: padding_side must be 'right' or 'left', got "
                         f"{padding_side!r}")
    trailing = tuple(seqs[0].shape[1:]) if seqs[0].ndim else None
    for k, s in enumerate(seqs):
        if s.ndim == 0:
            raise ValueError(f"{fn}: sequences[{k}] is 0-d; each sequence needs a time axis "
                             f"(shape (L, *))")
        if tuple(s.shape[1:]) != trailing:
            raise ValueError(f"{fn}: sequences[{k}] has shape {tuple(s.shape)}, but "
                             f"sequences[0] has shape {tuple(seqs[0].shape)}; all must share "
                             f"the trailing shape {trailing}")
        if s.dtype != seqs[0].dtype:
            raise TypeError(f"{fn}: sequences[{k}] has dtype {s.dtype}, but sequences[0] has "
                            f"{seqs[0].dtype}; all must share one dtype")
    lengths = np.array([s.shape[0] for s in seqs], dtype=np.int64)
    T, B = int(lengths.max()), len(seqs)
    data = cat(seqs + [_pad_row(seqs[0], padding_value)], axis=0)  # (sum L + 1, *)
    pad_index = int(lengths.sum())
    # index_map[b, t]: the row of ``data`` at step t of sequence b (pad_index past its end)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    steps = np.arange(T)[None, :]
    if padding_side == "left":
        steps = steps - (T - lengths)[:, None]  # the sequence ends at step T - 1
    valid = (steps >= 0) & (steps < lengths[:, None])
    index_map = np.where(valid, starts[:, None] + steps, pad_index)  # (B, T)
    return data[index_map if batch_first else index_map.T]


def unpad_sequence(padded_sequences: Tensor, lengths: Any,
                   batch_first: bool = False) -> list:
    """The inverse of :func:`pad_sequence` (right padding): a list of B tensors of shapes
    (L_b, *), views of the padded tensor (differentiable)."""
    fn = "unpad_sequence"
    x = _as_tensor(padded_sequences, fn, "padded_sequences")
    if x.ndim < 2:
        raise ValueError(f"{fn}: padded_sequences must have a time and a batch axis, got "
                         f"shape {tuple(x.shape)}")
    if not _flag(fn, "batch_first", batch_first):
        x = x.transpose(0, 1)  # (B, T, *)
    lens = host_lengths(lengths, fn)
    if lens.shape != (x.shape[0],):
        raise ValueError(f"{fn}: lengths must have shape ({x.shape[0]},) (one per sequence), "
                         f"got {lens.shape}")
    bad = np.flatnonzero((lens < 0) | (lens > x.shape[1]))
    if bad.size:
        raise ValueError(f"{fn}: lengths[{bad[0]}] = {lens[bad[0]]} is outside "
                         f"[0, {x.shape[1]}]")
    return [x[b, :int(n)] for b, n in enumerate(lens)]


# ------------------------------------------------------------------------------ packing
def _checked_lengths(fn: str, lengths: Any, batch: int, steps: int) -> np.ndarray:
    lens = host_lengths(lengths, fn)
    if lens.ndim != 1:
        raise ValueError(f"{fn}: lengths must be 1-D (one length per sequence), got shape "
                         f"{lens.shape}")
    if lens.size != batch:
        raise ValueError(f"{fn}: expected len(lengths) to equal the batch size {batch}, got "
                         f"{lens.size}")
    if lens.size and lens.min() <= 0:
        raise ValueError(f"{fn}: every length must be > 0 (a PackedSequence cannot hold an "
                         f"empty sequence), got lengths {lens.tolist()}")
    if lens.size and lens.max() > steps:
        raise ValueError(f"{fn}: a length of {int(lens.max())} exceeds the {steps} time steps "
                         f"of the input")
    return lens.astype(np.int64)


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (T, B, *) (or (B, T, *) with ``batch_first``), as torch.

    Parameters
    ----------
    input : Tensor
        The padded batch; what lies past each length is never read.
    lengths : list, NumPy array or CPU Tensor of ints, shape (B,)
        The length of each sequence, each in [1, T].
    batch_first : bool
        Whether ``input`` is (B, T, *).
    enforce_sorted : bool
        True: ``lengths`` must be non-increasing (``sorted_indices`` is then None); False:
        the sequences are sorted here (stable; see the module notes) and the permutation
        is kept in ``sorted_indices`` / ``unsorted_indices``.

    Returns
    -------
    PackedSequence
        ``data`` is one gather of ``input``: differentiable with respect to it (padding
        positions get a zero gradient).
    """
    fn = "pack_padded_sequence"
    x = _as_tensor(input, fn, "input")
    if x.ndim < 2:
        raise ValueError(f"{fn}: input must have a time and a batch axis, got shape "
                         f"{tuple(x.shape)}")
    batch_first = _flag(fn, "batch_first", batch_first)
    enforce_sorted = _flag(fn, "enforce_sorted", enforce_sorted)
    B, T = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    lens = _checked_lengths(fn, lengths, B, T)
    if enforce_sorted:
        if np.any(np.diff(lens) > 0):
            raise ValueError(
                f"{fn}: lengths {lens.tolist()} must be sorted in decreasing order when "
                f"enforce_sorted=True; pass enforce_sorted=False to have them sorted here")
        order = None
    else:
        order = np.argsort(-lens, kind="stable").astype(np.int64)
    sorted_lens = lens if order is None else lens[order]
    width = int(sorted_lens[0]) if sorted_lens.size else 0
    batch_sizes = (sorted_lens[None, :] > np.arange(width)[:, None]).sum(axis=1)
    t_idx, b_idx = _packed_positions(batch_sizes, order)
    data = x[b_idx, t_idx] if batch_first else x[t_idx, b_idx]
    return PackedSequence(data, batch_sizes, order,
                          None if order is None else invert_permutation(order))


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple:
    """Unpack a :class:`PackedSequence` to a padded tensor, as torch.

    Parameters
    ----------
    sequence : PackedSequence
    batch_first : bool
        Return (B, T, *) instead of (T, B, *).
    padding_value : float
        The value past each sequence's end.
    total_length : int, optional
        Pad to this many steps (at least the longest length) instead of the longest
        length, e.g. to undo packing of a padded batch of a fixed length.

    Returns
    -------
    (Tensor, Tensor)
        The padded batch, in the original batch order, differentiable with respect to
        ``sequence.data``; and the lengths (int64, host), in the original order.
    """
    fn = "pad_packed_sequence"
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"{fn}: sequence must be a PackedSequence, got "
                        f"{type(sequence).__name__}")
    batch_first = _flag(fn, "batch_first", batch_first)
    batch_sizes = sequence.batch_sizes.numpy()
    order = None if sequence.sorted_indices is None else sequence.sorted_indices.numpy()
    steps = batch_sizes.size
    if total_length is not None:
        if isinstance(total_length, (bool, np.bool_)) or not isinstance(
                total_length, (int, np.integer)):
            raise TypeError(f"{fn}: total_length must be an int, got {total_length!r}")
        if total_length < steps:
            raise ValueError(f"{fn}: expected total_length to be at least the length of the "
                             f"longest sequence in the input, but got total_length="
                             f"{total_length} and a longest sequence of {steps} steps")
        steps = int(total_length)
    data = sequence.data
    B = int(batch_sizes[0]) if batch_sizes.size else 0
    t_idx, b_idx = _packed_positions(batch_sizes, order)
    # index_map[t, b]: the row of ``data`` at step t of original sequence b (else the pad)
    index_map = np.full((steps, B), data.shape[0], dtype=np.int64)
    index_map[t_idx, b_idx] = np.arange(t_idx.size)
    extended = cat([data, _pad_row(data, padding_value)], axis=0)
    padded = extended[index_map.T if batch_first else index_map]
    lengths = _sequence_lengths(batch_sizes)
    if order is not None:
        original = np.empty_like(lengths)
        original[order] = lengths
        lengths = original
    return padded, _int64_tensor(lengths)


def pack_sequence(sequences: Any, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences (L_b, *) directly: :func:`pad_sequence` then
    :func:`pack_padded_sequence`, as torch."""
    padded = pad_sequence(sequences)  # checks the sequences; (T, B, *)
    seqs = list(sequences)
    lengths = [int(_as_tensor(s, "pack_sequence", f"sequences[{k}]").shape[0])
               for k, s in enumerate(seqs)]
    return pack_padded_sequence(padded, lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The list of sequences (L_b, *) of a PackedSequence, in the original order (the
    inverse of :func:`pack_sequence`)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


def repack_like(padded: Tensor, like: PackedSequence,
                batch_first: bool = False) -> PackedSequence:
    """Pack ``padded`` (T, B, *) (or (B, T, *)) in the layout of ``like`` (its batch sizes
    and order): how a recurrent layer returns its output for a packed input."""
    batch_sizes = like.batch_sizes.numpy()
    order = None if like.sorted_indices is None else like.sorted_indices.numpy()
    t_idx, b_idx = _packed_positions(batch_sizes, order)
    data = padded[b_idx, t_idx] if batch_first else padded[t_idx, b_idx]
    return PackedSequence(data, like.batch_sizes, like.sorted_indices, like.unsorted_indices)
