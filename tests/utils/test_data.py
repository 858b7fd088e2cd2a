"""tinygrad_rnn.utils.data against torch.utils.data: collate results, lengths, batch orders
for sequential sampling, random_split sizes; determinism with a seed; bad inputs."""
from __future__ import annotations

import doctest
import warnings
from collections import namedtuple

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.utils import data as D

Point = namedtuple("Point", ["x", "y"])


def test_doctests() -> None:
    result = doctest.testmod(D, extraglobs={"np": np, "tr": tr})
    assert result.failed == 0 and result.attempted > 0


# ------------------------------------------------------------------------ helpers (torch)

def _same(ours, theirs, torch) -> None:
    """Structure, type, dtype and values of a collated batch equal torch's."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tr.Tensor), (ours, theirs)
        expected = theirs.numpy()
        assert ours.numpy().dtype == expected.dtype
        assert ours.numpy().shape == expected.shape
        np.testing.assert_array_equal(ours.numpy(), expected)
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for key in theirs:
            _same(ours[key], theirs[key], torch)
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            _same(a, b, torch)
    else:
        assert ours == theirs and type(ours) is type(theirs)


def _to_torch(sample, torch):
    """The same sample with our tensors replaced by torch tensors."""
    if isinstance(sample, tr.Tensor):
        return torch.from_numpy(np.array(sample.numpy()))
    if isinstance(sample, dict):
        return {k: _to_torch(v, torch) for k, v in sample.items()}
    if isinstance(sample, Point):
        return Point(*(_to_torch(v, torch) for v in sample))
    if isinstance(sample, (list, tuple)):
        return type(sample)(_to_torch(v, torch) for v in sample)
    return sample


BATCHES = [
    [1, 2, 3],
    [1.5, 2.0, -3.25],
    [True, False],
    ["a", "bc"],
    [b"x", b"y"],
    [np.float32(1.5), np.float32(2.5)],
    [np.int32(1), np.int32(7)],
    [np.array([1.0, 2.0]), np.array([3.0, 4.0])],
    [np.array([[1, 2]], dtype=np.int16), np.array([[3, 4]], dtype=np.int16)],
    [(1, 2.5, "s"), (3, 4.5, "t")],
    [[1, 2], [3, 4]],
    [{"a": 1, "b": [1.0, 2.0]}, {"a": 2, "b": [3.0, 4.0]}],
    [Point(1, 2.0), Point(3, 4.0)],
    [(np.arange(3.0), 1), (np.arange(3.0) + 1, 0)],
]


@pytest.mark.parametrize("batch", BATCHES, ids=range(len(BATCHES)))
def test_default_collate_matches_torch(batch) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate
    _same(D.default_collate(batch), default_collate(batch), torch)


def test_default_collate_stacks_tensors_as_torch() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_collate
    rng = np.random.default_rng(0)
    samples = [(tr.tensor(rng.standard_normal((3, 2))), tr.tensor(int(k))) for k in range(4)]
    _same(D.default_collate(samples), default_collate(_to_torch(samples, torch)), torch)


@pytest.mark.parametrize("sample", [np.array([1, 2]), np.float64(2.5), 3, "s",
                                    (np.array([1.0]), 2), [np.array([1.0]), 2.5],
                                    {"k": np.array([1, 2])}, Point(np.array(0), 1)])
def test_default_convert_matches_torch(sample) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import default_convert
    _same(D.default_convert(sample), default_convert(sample), torch)


def test_default_collate_float_is_float64_and_int_is_int64() -> None:
    assert D.default_collate([1.0, 2.0]).dtype == np.float64
    assert D.default_collate([1, 2]).dtype == np.int64


# -------------------------------------------------------------- loaders in sequential order

def _pairs(n: int = 7):
    x = np.arange(n * 3, dtype=np.float64).reshape(n, 3)
    y = np.arange(n) % 2
    return x, y


@pytest.mark.parametrize("batch_size", [1, 2, 3, 7, 10])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sequential_loader_matches_torch(batch_size: int, drop_last: bool) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, TensorDataset
    x, y = _pairs()
    ours = D.DataLoader(D.TensorDataset(tr.tensor(x), tr.tensor(y)), batch_size=batch_size,
                        drop_last=drop_last)
    theirs = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)),
                        batch_size=batch_size, drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, want = list(ours), list(theirs)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        _same(a, b, torch)


def test_batch_size_none_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    samples = [np.arange(2.0) + k for k in range(3)]
    ours, theirs = D.DataLoader(samples, batch_size=None), DataLoader(samples, batch_size=None)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        _same(a, b, torch)


@pytest.mark.parametrize("n,batch_size,drop_last", [(10, 3, False), (10, 3, True),
                                                     (9, 3, True), (0, 2, False), (1, 4, True)])
def test_batch_sampler_matches_torch(n: int, batch_size: int, drop_last: bool) -> None:
    pytest.importorskip("torch")
    from torch.utils.data import BatchSampler, SequentialSampler
    ours = D.BatchSampler(D.SequentialSampler(range(n)), batch_size, drop_last)
    theirs = BatchSampler(SequentialSampler(range(n)), batch_size, drop_last)
    assert list(ours) == list(theirs)
    assert len(ours) == len(theirs)


class Squares(D.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __getitem__(self, i: int) -> tuple:
        return float(i), i * i

    def __len__(self) -> int:
        return self.n


def _stream_class(base: type) -> type:
    class Stream(base):
        def __init__(self, n: int) -> None:
            self.n = n

        def __iter__(self):
            return iter([{"v": float(k), "tag": f"t{k}"} for k in range(self.n)])

        def __len__(self) -> int:
            return self.n

    return Stream


Stream = _stream_class(D.IterableDataset)


def test_custom_dataset_and_concat_match_torch() -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import ConcatDataset, DataLoader
    ours = D.DataLoader(Squares(3) + Squares(4), batch_size=3)
    theirs = DataLoader(ConcatDataset([Squares(3), Squares(4)]), batch_size=3)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _same(a, b, torch)
    both = Squares(3) + Squares(4)
    assert [both[i] for i in range(-7, 7)] == [
        ConcatDataset([Squares(3), Squares(4)])[i] for i in range(-7, 7)]


@pytest.mark.parametrize("batch_size,drop_last", [(2, False), (2, True), (None, False)])
def test_iterable_dataset_matches_torch(batch_size, drop_last: bool) -> None:
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    ours = D.DataLoader(Stream(5), batch_size=batch_size, drop_last=drop_last)
    from torch.utils.data import IterableDataset
    theirs = DataLoader(_stream_class(IterableDataset)(5), batch_size=batch_size,
                        drop_last=drop_last)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        _same(a, b, torch)


def test_chain_dataset() -> None:
    assert [d["v"] for d in Stream(2) + Stream(3)] == [0.0, 1.0, 0.0, 1.0, 2.0]


def test_subset_and_custom_collate() -> None:
    sub = D.Subset(Squares(10), [9, 2, 5])
    assert len(sub) == 3 and sub[0] == (9.0, 81) and sub[-1] == (5.0, 25)
    loader = D.DataLoader(sub, batch_size=2, collate_fn=lambda b: [s[1] for s in b])
    assert list(loader) == [[81, 4], [25]]


class Batched(Squares):
    """A dataset that fetches whole batches, recording the index lists it is given."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.requests: list = []

    def __getitems__(self, indices: list) -> list:
        self.requests.append(indices)
        return [self[i] for i in indices]


def test_getitems_fetches_whole_batches_and_iterator_has_length() -> None:
    ds = Batched(5)
    loader = D.DataLoader(ds, batch_size=2)
    it = iter(loader)
    assert len(it) == 3
    first = next(it)
    np.testing.assert_array_equal(first[1].numpy(), [0, 1])
    assert [b[1].numpy().tolist() for b in it] == [[4, 9], [16]]
    assert ds.requests == [[0, 1], [2, 3], [4]]


def test_num_workers_loads_in_process_in_order() -> None:
    calls = []
    loader = D.DataLoader(Squares(5), batch_size=2, num_workers=2,
                          worker_init_fn=calls.append)
    plain = D.DataLoader(Squares(5), batch_size=2)
    for a, b in zip(loader, plain):
        np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())
    assert calls == [0]
    assert D.get_worker_info() is None


# ------------------------------------------------------------------------ random choices

@pytest.mark.parametrize("lengths", [[3, 7], [0, 10], [1, 2, 3, 4], [0.5, 0.5], [0.3, 0.7],
                                     [0.1, 0.2, 0.3, 0.4], [1 / 3, 1 / 3, 1 / 3], [1.0, 0.0]])
def test_random_split_sizes_match_torch(lengths) -> None:
    pytest.importorskip("torch")
    from torch.utils.data import random_split
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = D.random_split(Squares(10), lengths, generator=0)
        theirs = random_split(Squares(10), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    indices = sorted(i for s in ours for i in s.indices)
    assert indices == list(range(10))


def test_random_split_warns_on_empty_fraction_split() -> None:
    with pytest.warns(UserWarning, match="random_split: split 1 has length 0"):
        D.random_split(Squares(3), [1.0, 0.0], generator=0)


def test_shuffle_is_a_permutation_and_reproducible_with_manual_seed() -> None:
    ds = Squares(20)

    def epoch(loader):
        return [int(v) for batch in loader for v in batch[1].numpy()]

    tr.manual_seed(0)
    loader = D.DataLoader(ds, batch_size=4, shuffle=True)
    first, second = epoch(loader), epoch(loader)
    assert sorted(first) == [i * i for i in range(20)]
    assert first != second  # a new order each epoch
    tr.manual_seed(0)
    again = D.DataLoader(ds, batch_size=4, shuffle=True)
    assert epoch(again) == first and epoch(again) == second


@pytest.mark.parametrize("generator", [3, np.random.default_rng(3)])
def test_generator_seed_or_numpy_generator(generator) -> None:
    a = list(D.RandomSampler(range(9), generator=generator))
    b = list(D.RandomSampler(range(9), generator=np.random.default_rng(3)))
    assert a == b and sorted(a) == list(range(9))


def test_int_seed_gives_new_orders_per_epoch_but_reproducible_runs() -> None:
    s1, s2 = D.RandomSampler(range(8), generator=5), D.RandomSampler(range(8), generator=5)
    e1, e2 = list(s1), list(s1)
    assert e1 != e2 and [list(s2), list(s2)] == [e1, e2]


def test_random_sampler_lengths_and_replacement() -> None:
    s = D.RandomSampler(range(4), num_samples=10, generator=0)
    out = list(s)
    assert len(s) == len(out) == 10
    assert sorted(out[:4]) == sorted(out[4:8]) == [0, 1, 2, 3]
    r = list(D.RandomSampler(range(3), replacement=True, num_samples=50, generator=1))
    assert len(r) == 50 and set(r) <= {0, 1, 2}
    sub = list(D.SubsetRandomSampler([10, 20, 30], generator=2))
    assert sorted(sub) == [10, 20, 30]
    w = list(D.WeightedRandomSampler([0.0, 1.0, 0.0], 5, generator=0))
    assert w == [1] * 5


# --------------------------------------------------------------------------------- bad inputs

def _raises(exc, fn, *needles):
    with pytest.raises(exc) as info:
        fn()
    for needle in needles:
        assert needle in str(info.value), (needle, str(info.value))


def test_tensor_dataset_bad_inputs() -> None:
    _raises(ValueError, lambda: D.TensorDataset(tr.zeros(3, 2), tr.zeros(4)),
            "TensorDataset", "first axis", "(3, 2)", "(4,)")
    _raises(TypeError, lambda: D.TensorDataset(np.zeros(3)), "TensorDataset", "tensors[0]",
            "ndarray")
    _raises(ValueError, lambda: D.TensorDataset(), "TensorDataset", "at least one")
    _raises(ValueError, lambda: D.TensorDataset(tr.tensor(1.0)), "tensors[0]", "0-d")


def test_torch_generator_refused() -> None:
    torch = pytest.importorskip("torch")
    g = torch.Generator()
    _raises(TypeError, lambda: D.DataLoader(Squares(3), shuffle=True, generator=g),
            "DataLoader", "generator", "torch", "cannot equal")
    _raises(TypeError, lambda: D.random_split(Squares(3), [1, 2], generator=g),
            "random_split", "generator")
    _raises(TypeError, lambda: D.RandomSampler(range(3), generator="x"),
            "RandomSampler", "generator", "str")


def test_dataloader_conflicts_and_arguments() -> None:
    ds = Squares(4)
    _raises(ValueError, lambda: D.DataLoader(ds, sampler=[0, 1], shuffle=True),
            "DataLoader", "sampler", "shuffle")
    _raises(ValueError, lambda: D.DataLoader(ds, batch_sampler=[[0]], batch_size=2),
            "DataLoader", "batch_sampler")
    _raises(ValueError, lambda: D.DataLoader(ds, batch_size=None, drop_last=True),
            "DataLoader", "drop_last")
    _raises(ValueError, lambda: D.DataLoader(ds, batch_size=0), "DataLoader", "batch_size")
    _raises(ValueError, lambda: D.DataLoader(ds, batch_size=True), "batch_size")
    _raises(ValueError, lambda: D.DataLoader(ds, num_workers=-1), "DataLoader", "num_workers")
    _raises(ValueError, lambda: D.DataLoader(Stream(3), num_workers=2), "IterableDataset",
            "num_workers")
    _raises(ValueError, lambda: D.DataLoader(Stream(3), shuffle=True), "shuffle")
    _raises(TypeError, lambda: D.DataLoader(ds, shuffle="yes"), "DataLoader", "shuffle")
    assert isinstance(D.DataLoader(ds, shuffle=1).sampler, D.RandomSampler)  # as torch
    _raises(TypeError, lambda: D.DataLoader(ds, collate_fn=3), "collate_fn")
    _raises(TypeError, lambda: D.DataLoader(5), "DataLoader", "dataset", "int")
    loader = D.DataLoader(ds, batch_size=2)
    _raises(ValueError, lambda: setattr(loader, "batch_size", 3), "DataLoader", "batch_size")
    loader.collate_fn = D.default_collate  # not frozen, as in torch


def test_samplers_and_split_bad_inputs() -> None:
    _raises(ValueError, lambda: D.BatchSampler(range(3), 0, False), "BatchSampler",
            "batch_size")
    _raises(TypeError, lambda: D.BatchSampler(range(3), 2, None), "BatchSampler", "drop_last")
    _raises(TypeError, lambda: D.BatchSampler(3, 2, False), "BatchSampler", "sampler")
    _raises(ValueError, lambda: D.RandomSampler(range(3), num_samples=0), "RandomSampler",
            "num_samples")
    _raises(TypeError, lambda: D.RandomSampler(range(3), replacement=1), "replacement")
    _raises(ValueError, lambda: D.random_split(Squares(5), [2, 2]), "random_split",
            "sum to 4", "(5)")
    _raises(ValueError, lambda: D.random_split(Squares(5), [0.5, 0.6]), "random_split")
    _raises(ValueError, lambda: D.random_split(Squares(5), [6, -1]), "lengths[1]", "negative")
    _raises(ValueError, lambda: D.random_split(Squares(5), [1.2, -0.2]), "random_split")
    _raises(TypeError, lambda: D.ConcatDataset(5), "ConcatDataset", "int")
    _raises(ValueError, lambda: D.ConcatDataset([]), "ConcatDataset", "empty")
    _raises(ValueError, lambda: D.ConcatDataset(iter([])), "ConcatDataset", "empty")
    _raises(TypeError, lambda: D.ConcatDataset([Squares(2), Stream(2)]), "datasets[1]",
            "IterableDataset")
    _raises(IndexError, lambda: (Squares(2) + Squares(2))[4], "ConcatDataset", "4")
    _raises(NotImplementedError, lambda: D.Dataset()[0], "Dataset.__getitem__")


def test_collate_bad_inputs() -> None:
    _raises(RuntimeError, lambda: D.default_collate([tr.zeros(2), tr.zeros(3)]),
            "default_collate", "(2,)", "(3,)")
    _raises(RuntimeError, lambda: D.default_collate([[1, 2], [1]]), "default_collate",
            "same length")
    _raises(TypeError, lambda: D.default_collate([object()]), "default_collate", "object")
    _raises(TypeError, lambda: D.default_collate([np.array(["a"])]), "default_collate",
            "dtype")
    _raises(IndexError, lambda: D.default_collate([]), "default_collate", "empty")
    _raises(TypeError, lambda: D.default_collate([tr.zeros(2), np.zeros(2)]),
            "batch[1]", "ndarray")
