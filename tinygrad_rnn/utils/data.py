"""Datasets, samplers and ``DataLoader``, with ``torch.utils.data``'s names and behaviour.

A program written for ``torch.utils.data`` runs with its import renamed:

>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> from tinygrad_rnn.utils.data import DataLoader, TensorDataset
>>> ds = TensorDataset(tr.tensor(np.arange(10.0).reshape(5, 2)), tr.tensor([0, 1, 0, 1, 1]))
>>> loader = DataLoader(ds, batch_size=2)
>>> len(loader)
3
>>> [tuple(y.shape) for _, y in loader]
[(2,), (2,), (1,)]

What is the same as torch
-------------------------
* Map-style datasets (``__getitem__``/``__len__``) and iterable datasets (``__iter__``);
  ``dataset_a + dataset_b`` concatenates.
* The order of the samples for sequential sampling, batching, ``drop_last`` and the lengths
  ``len(loader)`` and ``len(batch_sampler)``.
* :func:`default_collate` follows torch's rules: tensors are stacked along a new leading
  axis; NumPy arrays become tensors and are stacked; Python floats become a float64 tensor,
  Python ints an int64 tensor (bools a bool tensor); NumPy scalars keep their dtype;
  strings and bytes are left as they are (the batch's list, or a tuple inside a sequence);
  dicts are collated key by key; tuples and lists are collated position by position (a
  tuple gives a list, a namedtuple the same namedtuple).
  ``batch_size=None`` turns batching off and each sample goes through
  :func:`default_convert` (NumPy arrays to tensors, everything else unchanged).
* ``random_split`` takes lengths as counts or as fractions that sum to 1, with torch's
  rounding (floors, then one extra item to each split in turn).
* The argument conflicts torch refuses (``sampler`` with ``shuffle``, ``batch_sampler``
  with ``batch_size``/``shuffle``/``sampler``/``drop_last``, ``batch_size=None`` with
  ``drop_last``) are refused here too.

Where it differs, and why
-------------------------
* **Random orders differ from torch's.** Every random choice (shuffling, ``RandomSampler``,
  ``random_split``) draws from a NumPy generator: the ``generator`` argument may be an int
  seed, a ``numpy.random.Generator`` or ``None``, which means the package's default
  generator at the time of drawing, so ``tinygrad_rnn.manual_seed(0)`` makes a whole run's
  shuffles reproducible. A ``torch.Generator`` is refused with an error; the same seed
  cannot give torch's permutations, because the two libraries' random streams differ. An
  int seed makes one generator for the object, so successive epochs still differ, as they
  do with a seeded ``torch.Generator``.
* **No worker processes.** ``num_workers > 0`` is accepted for a map-style dataset and the
  samples are loaded in the main process, in the same order as torch's workers return them
  (so results are the same, only not in parallel); ``worker_init_fn``, if given, is called
  once with worker id 0 at the start of each pass, as by a single worker, and
  :func:`get_worker_info` returns None. For an iterable dataset ``num_workers > 0`` is
  refused: torch runs a copy of the dataset in every worker (each copy yields everything
  unless the dataset splits itself with ``get_worker_info``), which one process cannot
  reproduce honestly.
* ``pin_memory`` is accepted and does nothing: the data are NumPy arrays in host memory.

Why one module of about 960 lines: ``torch.utils.data`` in one place, where torch's users
look for it: datasets, samplers, batching and the ``DataLoader`` that combines them, which
share their argument checks.
"""
from __future__ import annotations

import bisect
import collections.abc
import copy
import math
import warnings
from typing import Any, Callable, Generic, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from .. import random as _random
from ..creation import stack
from ..creation import tensor as _make_tensor
from ..tensor import Tensor

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset",
    "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
    "WeightedRandomSampler", "BatchSampler", "DataLoader", "default_collate",
    "default_convert", "get_worker_info",
]

T_co = TypeVar("T_co", covariant=True)


# ---------------------------------------------------------------------------- argument checks

def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_bool(owner: str, name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: {name} must be a bool, got {value!r}")
    return bool(value)


def _check_positive_int(owner: str, name: str, value: Any) -> int:
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}")
    return int(value)


def _check_generator(owner: str, generator: Any) -> np.random.Generator | None:
    """The generator to draw from: ``None`` (the package default, looked up at each draw),
    a ``numpy.random.Generator``, or a new one made once from an int seed."""
    if generator is None or isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, _random.Generator):  # tr.Generator().manual_seed(42)
        return generator.rng
    if _is_int(generator):
        if generator < 0:
            raise ValueError(f"{owner}: generator seed must be non-negative, got {generator}")
        return np.random.default_rng(int(generator))
    kind = type(generator)
    if kind.__module__.split(".")[0] == "torch":
        raise TypeError(
            f"{owner}: generator cannot be a {kind.__module__}.{kind.__name__}: tinygrad_rnn "
            "draws its random orders from NumPy, so they cannot equal torch's; pass an int "
            "seed, a numpy.random.Generator, or None (the default generator, see "
            "tinygrad_rnn.manual_seed)"
        )
    raise TypeError(
        f"{owner}: generator must be None, an int seed, a numpy.random.Generator or a "
        f"tinygrad_rnn.Generator, "
        f"got {kind.__name__}"
    )


def _draw_from(generator: np.random.Generator | None) -> np.random.Generator:
    # None is looked up at drawing time: manual_seed replaces the default generator
    return _random.get_generator(None) if generator is None else generator


def _check_sized(owner: str, name: str, value: Any) -> int:
    try:
        return len(value)
    except TypeError:
        raise TypeError(
            f"{owner}: {name} must have a length (a map-style dataset or a sequence), "
            f"got {type(value).__name__}"
        ) from None


# ---------------------------------------------------------------------------------- datasets

class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses implement ``__getitem__(index)`` and, for the
    default samplers and ``len(loader)``, ``__len__()``.

    ``a + b`` is ``ConcatDataset([a, b])``.
    """

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError(
            f"{type(self).__name__}.__getitem__: a subclass of Dataset must implement "
            "__getitem__(index)"
        )

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A dataset read as a stream: subclasses implement ``__iter__``; ``__len__`` is
    optional (``len(loader)`` needs it).

    ``a + b`` is ``ChainDataset([a, b])``.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(
            f"{type(self).__name__}.__iter__: a subclass of IterableDataset must implement "
            "__iter__()"
        )

    def __add__(self, other: Any) -> "ChainDataset":  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Samples are the rows of the given tensors: item ``i`` is ``(t[i] for t in tensors)``.

    Parameters
    ----------
    *tensors : Tensor
        Tensors with the same size along their first axis (the sample axis).

    Raises
    ------
    TypeError
        If an argument is not a Tensor.
    ValueError
        If no tensor is given, a tensor is 0-d, or the first sizes differ.
    """

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor, got none")
        for k, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(
                    f"TensorDataset: tensors[{k}] must be a Tensor, got {type(t).__name__}"
                )
            if t.ndim == 0:
                raise ValueError(
                    f"TensorDataset: tensors[{k}] is 0-d; each tensor needs a first axis "
                    "that indexes the samples"
                )
        sizes = [int(t.shape[0]) for t in tensors]
        if any(s != sizes[0] for s in sizes):
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(
                f"TensorDataset: all tensors must have the same size along the first axis, "
                f"got shapes {shapes}"
            )
        self.tensors = tuple(tensors)

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return int(self.tensors[0].shape[0])


class Subset(Dataset[T_co]):
    """The items of ``dataset`` at ``indices``, in that order.

    Parameters
    ----------
    dataset : Dataset
        The full dataset.
    indices : sequence of int
        Which of its items this subset holds.
    """

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        _check_sized("Subset", "indices", indices)
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """Several map-style datasets one after another.

    Parameters
    ----------
    datasets : iterable of Dataset
        At least one; none of them an :class:`IterableDataset`.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        if isinstance(datasets, Dataset) or not isinstance(datasets, collections.abc.Iterable):
            raise TypeError(
                "ConcatDataset: datasets must be an iterable of datasets (a list), got "
                f"{type(datasets).__name__}"
            )
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets is empty; give at least one dataset")
        self.cumulative_sizes: list[int] = []
        total = 0
        for k, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(
                    f"ConcatDataset: datasets[{k}] is an IterableDataset; use ChainDataset "
                    "(or +) to join iterable datasets"
                )
            total += _check_sized("ConcatDataset", f"datasets[{k}]", d)
            self.cumulative_sizes.append(total)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        n = len(self)
        if not _is_int(idx):
            raise TypeError(f"ConcatDataset: index must be an integer, got {idx!r}")
        if not -n <= idx < n:
            raise IndexError(f"ConcatDataset: index {idx} is out of range for length {n}")
        idx = int(idx) % n if idx < 0 else int(idx)
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


class ChainDataset(IterableDataset):
    """Several iterable datasets read one after another."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(_check_sized("ChainDataset", "each dataset", d) for d in self.datasets)


def random_split(dataset: Dataset, lengths: Sequence[int | float],
                 generator: Any = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets.

    Parameters
    ----------
    dataset : Dataset
        A map-style dataset with a length.
    lengths : sequence of int or float
        The sizes of the subsets, summing to ``len(dataset)``; or fractions in [0, 1] summing
        to 1, turned into sizes as torch does: ``floor(n * fraction)`` each, then the
        remaining items one each to the subsets in order (a warning names an empty one).
    generator : None, int or numpy.random.Generator
        Where the permutation comes from (None: the package default generator). The subsets
        cannot equal torch's for the same seed (different random streams).

    Returns
    -------
    list of Subset

    Raises
    ------
    ValueError
        If a length is negative, a fraction is outside [0, 1], or the lengths do not sum to
        the length of the dataset.
    """
    rng = _check_generator("random_split", generator)
    n = _check_sized("random_split", "dataset", dataset)
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, collections.abc.Sequence):
        raise TypeError(
            f"random_split: lengths must be a sequence of ints or fractions, got {lengths!r}"
        )
    for k, v in enumerate(lengths):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            raise TypeError(f"random_split: lengths[{k}] must be a number, got {v!r}")
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        sizes = []
        for k, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(
                    f"random_split: fraction lengths[{k}] = {frac} is not between 0 and 1"
                )
            sizes.append(math.floor(n * frac))
        for k in range(n - sum(sizes)):
            sizes[k % len(sizes)] += 1
        for k, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"random_split: split {k} has length 0 (an empty subset)",
                              stacklevel=2)
    else:
        sizes = []
        for k, v in enumerate(lengths):
            if not _is_int(v) and not (isinstance(v, float) and v.is_integer()):
                raise ValueError(
                    f"random_split: lengths must be ints, or fractions summing to 1; "
                    f"lengths[{k}] = {v!r} (the lengths sum to {total})"
                )
            if v < 0:
                raise ValueError(f"random_split: lengths[{k}] = {v} is negative")
            sizes.append(int(v))
    if sum(sizes) != n:
        raise ValueError(
            f"random_split: the lengths {list(sizes)} sum to {sum(sizes)}, not to the length "
            f"of the dataset ({n})"
        )
    order = _draw_from(rng).permutation(n).tolist()
    subsets, offset = [], 0
    for size in sizes:
        subsets.append(Subset(dataset, order[offset:offset + size]))
        offset += size
    return subsets


# ---------------------------------------------------------------------------------- samplers

class Sampler(Generic[T_co]):
    """Base class of samplers: an iterable over dataset indices (or over lists of indices,
    for a batch sampler). Subclasses implement ``__iter__`` and usually ``__len__``."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(
            f"{type(self).__name__}.__iter__: a subclass of Sampler must implement __iter__()"
        )


class SequentialSampler(Sampler[int]):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order."""

    def __init__(self, data_source: Any) -> None:
        _check_sized("SequentialSampler", "data_source", data_source)
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Indices in a random order.

    Parameters
    ----------
    data_source : sized
        The dataset (only its length is used).
    replacement : bool
        Draw with replacement (``num_samples`` independent uniform draws); without it, a
        permutation, repeated whole as often as ``num_samples`` needs, then cut.
    num_samples : int, optional
        How many indices to give per pass (default ``len(data_source)``).
    generator : None, int or numpy.random.Generator
        None draws from the package default generator at each pass (see
        ``tinygrad_rnn.manual_seed``). Orders cannot equal torch's for the same seed.
    """

    def __init__(self, data_source: Any, replacement: bool = False,
                 num_samples: int | None = None, generator: Any = None) -> None:
        self.data_source = data_source
        self.replacement = _check_bool("RandomSampler", "replacement", replacement)
        if num_samples is not None:
            _check_positive_int("RandomSampler", "num_samples", num_samples)
        self._num_samples = num_samples
        self.generator = _check_generator("RandomSampler", generator)
        _check_sized("RandomSampler", "data_source", data_source)

    @property
    def num_samples(self) -> int:
        if self._num_samples is None:
            return len(self.data_source)
        return int(self._num_samples)

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = _draw_from(self.generator)
        if n == 0:
            if self.num_samples > 0 and self._num_samples is not None:
                raise ValueError("RandomSampler: cannot draw num_samples from an empty "
                                 "data_source")
            return
        if self.replacement:
            yield from rng.integers(0, n, size=self.num_samples).tolist()
            return
        whole, rest = divmod(self.num_samples, n)
        for _ in range(whole):
            yield from rng.permutation(n).tolist()
        if rest:
            yield from rng.permutation(n)[:rest].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices, in a new random order at each pass.

    Parameters
    ----------
    indices : sequence of int
    generator : None, int or numpy.random.Generator
    """

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        _check_sized("SubsetRandomSampler", "indices", indices)
        self.indices = indices
        self.generator = _check_generator("SubsetRandomSampler", generator)

    def __iter__(self) -> Iterator[int]:
        for i in _draw_from(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """Indices ``0..len(weights)-1`` drawn with probabilities proportional to ``weights``.

    Parameters
    ----------
    weights : sequence of float
        Non-negative, not all zero.
    num_samples : int
        How many indices per pass.
    replacement : bool
        Without replacement, an index is drawn at most once (``num_samples`` must not exceed
        the number of non-zero weights).
    generator : None, int or numpy.random.Generator
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        self.num_samples = _check_positive_int("WeightedRandomSampler", "num_samples",
                                               num_samples)
        self.replacement = _check_bool("WeightedRandomSampler", "replacement", replacement)
        data = weights.numpy() if isinstance(weights, Tensor) else weights
        w = np.asarray(data, dtype=np.float64)
        if w.ndim != 1 or w.size == 0:
            raise ValueError(
                f"WeightedRandomSampler: weights must be a non-empty 1-D sequence, got shape "
                f"{w.shape}"
            )
        if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() == 0:
            raise ValueError("WeightedRandomSampler: weights must be finite, non-negative and "
                             "not all zero")
        if not self.replacement and self.num_samples > np.count_nonzero(w):
            raise ValueError(
                f"WeightedRandomSampler: without replacement num_samples ({num_samples}) "
                f"cannot exceed the number of non-zero weights ({np.count_nonzero(w)})"
            )
        self.weights = w
        self.generator = _check_generator("WeightedRandomSampler", generator)

    def __iter__(self) -> Iterator[int]:
        rng = _draw_from(self.generator)
        p = self.weights / self.weights.sum()
        picks = rng.choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        yield from picks.tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    Parameters
    ----------
    sampler : Sampler or iterable of int
    batch_size : int
        A positive integer.
    drop_last : bool
        Drop a last batch smaller than ``batch_size``.

    Examples
    --------
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
    >>> len(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=True))
    2
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int,
                 drop_last: bool) -> None:
        self.batch_size = _check_positive_int("BatchSampler", "batch_size", batch_size)
        self.drop_last = _check_bool("BatchSampler", "drop_last", drop_last)
        if not isinstance(sampler, collections.abc.Iterable):
            raise TypeError(
                f"BatchSampler: sampler must be a Sampler or an iterable of indices, got "
                f"{type(sampler).__name__}"
            )
        self.sampler = sampler

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = _check_sized("BatchSampler", "sampler", self.sampler)
        if self.drop_last:
            return n // self.batch_size
        return -(-n // self.batch_size)


# ---------------------------------------------------------------------------------- collating

_COLLATE_TYPES = "tensors, NumPy arrays, numbers, strings, dicts or sequences"


def _is_text_array(array: np.ndarray) -> bool:
    # strings, bytes and Python objects cannot become a numeric tensor
    return array.dtype.kind in "SaUO"


def default_convert(data: Any) -> Any:
    """What ``DataLoader(batch_size=None)`` does to each sample: NumPy arrays and NumPy
    scalars become tensors (string and object arrays are left alone), containers are
    converted element by element (a tuple gives a list, as in torch), all else is unchanged.

    Examples
    --------
    >>> default_convert([np.array([1, 2]), 3])
    [Tensor([1, 2], dtype=int64), 3]
    """
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _is_text_array(data) else _make_tensor(data)
    if isinstance(data, (np.number, np.bool_)):
        return _make_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def _rebuild_mapping(original: collections.abc.Mapping, items: dict) -> Any:
    """``items`` in a mapping of the original's type where that type allows it."""
    try:
        if isinstance(original, collections.abc.MutableMapping):
            clone = copy.copy(original)
            clone.update(items)
            return clone
        return type(original)(items)  # type: ignore[call-arg]
    except TypeError:
        return items


def _rebuild_sequence(original: collections.abc.Sequence, items: list) -> Any:
    """``items`` in a sequence of the original's type where that type allows it."""
    try:
        if isinstance(original, collections.abc.MutableSequence):
            clone = copy.copy(original)
            for k, item in enumerate(items):
                clone[k] = item
            return clone
        return type(original)(items)  # type: ignore[call-arg]
    except TypeError:
        return items


def _stack_tensors(batch: Sequence[Tensor]) -> Tensor:
    shape = tuple(batch[0].shape)
    for k, t in enumerate(batch):
        if not isinstance(t, Tensor):
            raise TypeError(
                f"default_collate: batch[0] is a Tensor but batch[{k}] is a "
                f"{type(t).__name__}; a batch must hold items of one kind"
            )
        if tuple(t.shape) != shape:
            raise RuntimeError(
                f"default_collate: tensors in a batch must have equal shapes to be stacked, "
                f"got {shape} (batch[0]) and {tuple(t.shape)} (batch[{k}]); pad them, or "
                "pass a collate_fn that does"
            )
    return stack(list(batch), 0)


def default_collate(batch: Sequence[Any]) -> Any:
    """Put a list of samples together into a batch, by torch's rules.

    Parameters
    ----------
    batch : sequence
        The samples, all of one structure.

    Returns
    -------
    The batch: tensors (and NumPy arrays) stacked along a new leading axis; Python floats as
    a float64 tensor, Python ints as an int64 tensor (bools as bool); NumPy scalars as a
    tensor of their dtype; strings and bytes unchanged (the list of them); dicts collated by
    key; namedtuples as the same namedtuple of collated fields; other sequences collated
    position by position (tuples give a list, as in torch).

    Raises
    ------
    IndexError
        If the batch is empty.
    TypeError
        If an element cannot be collated (not one of the types above, or a string/object
        NumPy array).
    RuntimeError
        If tensors or sequences in the batch have different sizes.

    Examples
    --------
    >>> default_collate([(1, 0.5), (2, 1.5)])
    [Tensor([1, 2], dtype=int64), Tensor([0.5, 1.5], dtype=float64)]
    >>> default_collate([{"id": "a"}, {"id": "b"}])
    {'id': ['a', 'b']}
    """
    if isinstance(batch, (str, bytes)) or not isinstance(batch, collections.abc.Sequence):
        raise TypeError(
            f"default_collate: batch must be a list of samples, got {type(batch).__name__}"
        )
    if len(batch) == 0:
        raise IndexError("default_collate: the batch is empty; there is nothing to collate")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray):
        if _is_text_array(elem):
            raise TypeError(
                f"default_collate: cannot collate NumPy arrays of dtype {elem.dtype}; a batch "
                f"must hold {_COLLATE_TYPES}"
            )
        return default_collate([_make_tensor(np.asarray(b)) for b in batch])
    if isinstance(elem, (np.number, np.bool_)):
        return _make_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return _make_tensor(batch, dtype=np.float64)
    if isinstance(elem, int):  # bool included: a bool tensor, as in torch
        return _make_tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(
            elem, {key: default_collate([d[key] for d in batch]) for key in elem}
        )
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(column) for column in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        for k, item in enumerate(batch):
            if len(item) != size:
                raise RuntimeError(
                    f"default_collate: every sequence in a batch must have the same length, "
                    f"got {size} (batch[0]) and {len(item)} (batch[{k}])"
                )
        # columns are tuples, as in torch (a column of strings stays a tuple)
        columns = [default_collate(column) for column in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        return _rebuild_sequence(elem, columns)
    raise TypeError(
        f"default_collate: cannot collate elements of type {type(elem).__name__}; a batch "
        f"must hold {_COLLATE_TYPES}"
    )


def get_worker_info() -> None:
    """Always None: tinygrad_rnn loads data in the main process (see the module notes)."""
    return None


# -------------------------------------------------------------------------------- DataLoader

class DataLoader(Generic[T_co]):
    """Batches of a dataset, in the order of a sampler.

    Parameters
    ----------
    dataset : Dataset or IterableDataset
        A map-style dataset may also define ``__getitems__(indices)`` to fetch a whole batch
        at once; it is then used instead of one ``__getitem__`` per sample, as in torch.
    batch_size : int or None
        Samples per batch (default 1); None turns batching off (each sample goes through
        ``collate_fn``, by default :func:`default_convert`).
    shuffle : bool
        A new random order at every pass (map-style datasets only).
    sampler : Sampler or iterable, optional
        The order of the indices (not with ``shuffle``).
    batch_sampler : Sampler or iterable of lists, optional
        Gives whole batches of indices (not with ``batch_size``, ``shuffle``, ``sampler`` or
        ``drop_last``).
    num_workers : int
        Accepted for map-style datasets; loading happens in this process, in torch's order
        (see the module notes). Refused (> 0) for iterable datasets.
    collate_fn : callable, optional
        Turns a list of samples into a batch (default :func:`default_collate`).
    pin_memory : bool
        Accepted; no effect (host memory).
    drop_last : bool
        Drop a last batch smaller than ``batch_size``.
    timeout : float
        Accepted (non-negative); no effect without worker processes.
    worker_init_fn : callable, optional
        With ``num_workers > 0``, called with 0 at the start of each pass.
    generator : None, int or numpy.random.Generator
        For ``shuffle``: None draws from the package default generator at each pass (so
        ``tinygrad_rnn.manual_seed`` makes shuffling reproducible); a ``torch.Generator`` is
        refused. Shuffled orders cannot equal torch's for the same seed.
    prefetch_factor, persistent_workers, multiprocessing_context, pin_memory_device,
    in_order : accepted for compatibility; no effect.

    Raises
    ------
    ValueError
        For torch's conflicting options, a negative ``num_workers`` or ``timeout``, or
        ``num_workers > 0`` with an iterable dataset.
    TypeError
        For a ``generator`` of the wrong kind (a ``torch.Generator`` included).
    """

    _FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset")

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        owner = "DataLoader"
        if not _is_int(num_workers) or num_workers < 0:
            raise ValueError(
                f"{owner}: num_workers must be a non-negative integer, got {num_workers!r}"
            )
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout < 0:
            raise ValueError(f"{owner}: timeout must be a non-negative number, got {timeout!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"{owner}: collate_fn must be callable, got {collate_fn!r}")
        if worker_init_fn is not None and not callable(worker_init_fn):
            raise TypeError(f"{owner}: worker_init_fn must be callable, got {worker_init_fn!r}")
        _check_bool(owner, "pin_memory", pin_memory)
        _check_bool(owner, "drop_last", drop_last)
        if batch_size is not None:
            _check_positive_int(owner, "batch_size", batch_size)
        gen = _check_generator(owner, generator)
        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            if num_workers > 0:
                raise ValueError(
                    f"{owner}: num_workers={num_workers} with an IterableDataset is not "
                    "supported: torch would run a copy of the dataset in each worker process "
                    "and tinygrad_rnn loads data in this process only; use num_workers=0"
                )
            if shuffle not in (None, False):
                raise ValueError(f"{owner}: shuffle must be left unset for an IterableDataset "
                                 f"(got shuffle={shuffle!r}); shuffle inside the dataset")
            if sampler is not None or batch_sampler is not None:
                raise ValueError(f"{owner}: an IterableDataset takes no sampler or "
                                 "batch_sampler; it decides its own order")
            shuffle = False
        else:
            if not hasattr(dataset, "__getitem__"):
                raise TypeError(
                    f"{owner}: dataset must be a map-style dataset (with __getitem__) or an "
                    f"IterableDataset, got {type(dataset).__name__}"
                )
            if _is_int(shuffle) and shuffle in (0, 1):
                shuffle = bool(shuffle)  # torch takes shuffle=0/1 too
            shuffle = _check_bool(owner, "shuffle", False if shuffle is None else shuffle)
        if sampler is not None and shuffle:
            raise ValueError(f"{owner}: sampler and shuffle=True cannot be used together; "
                             "the sampler decides the order")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    f"{owner}: batch_sampler cannot be used with batch_size, shuffle, sampler "
                    "or drop_last; the batch sampler decides all of them"
                )
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError(f"{owner}: drop_last=True needs batching; batch_size=None turns "
                             "batching off")
        if sampler is None and not iterable:
            if shuffle:
                sampler = RandomSampler(dataset, generator=gen)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert
        )
        self.pin_memory = bool(pin_memory)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.generator = generator
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.pin_memory_device = pin_memory_device
        self.in_order = in_order
        self._initialized = True

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._FROZEN and getattr(self, "_initialized", False):
            raise ValueError(
                f"DataLoader: {name} cannot be changed after the DataLoader is made; make a "
                "new DataLoader"
            )
        super().__setattr__(name, value)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_size is not None or self.batch_sampler is not None

    def __iter__(self) -> "_LoaderIterator":
        if self.num_workers > 0 and self.worker_init_fn is not None:
            self.worker_init_fn(0)
        if isinstance(self.dataset, IterableDataset):
            return _LoaderIterator(self, self._iter_stream())
        return _LoaderIterator(self, self._iter_map())

    def _iter_map(self) -> Iterator[Any]:
        if self.batch_sampler is not None:
            # a dataset may fetch a whole batch at once through __getitems__, as in torch
            fetch_many = getattr(self.dataset, "__getitems__", None)
            for indices in self.batch_sampler:
                if fetch_many is not None:
                    samples = fetch_many(list(indices))
                else:
                    samples = [self.dataset[i] for i in indices]
                yield self.collate_fn(samples)
        else:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])

    def _iter_stream(self) -> Iterator[Any]:
        if self.batch_size is None:
            for item in self.dataset:
                yield self.collate_fn(item)
            return
        batch: list = []
        for item in self.dataset:
            batch.append(item)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if isinstance(self.dataset, IterableDataset):
            n = _check_sized("DataLoader", "dataset", self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self._auto_collation:
            return _check_sized("DataLoader", "batch_sampler", self.batch_sampler)
        return _check_sized("DataLoader", "sampler", self.sampler)


class _LoaderIterator:
    """One pass over a :class:`DataLoader`: ``next()`` gives the next batch and ``len()`` the
    number of batches of the pass, as torch's loader iterators do."""

    def __init__(self, loader: DataLoader, batches: Iterator[Any]) -> None:
        self._loader = loader
        self._batches = batches

    def __iter__(self) -> "_LoaderIterator":
        return self

    def __next__(self) -> Any:
        return next(self._batches)

    def __len__(self) -> int:
        return len(self._loader)
