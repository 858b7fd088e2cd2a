"""torch's tensor API under its own names (issue "Real PyTorch RNN programs run with only
their imports renamed"): sizes, dtype names, creation, conversion, the methods and function
forms RNN programs use. Each is compared with torch (skipped cleanly without it) on value,
dtype, shape and, where differentiable, gradient, in float64."""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr


def _torch() -> Any:
    return pytest.importorskip("torch")


def _pair(data: np.ndarray, requires_grad: bool = True) -> tuple:
    torch = _torch()
    return (tr.Tensor(data.copy(), requires_grad=requires_grad),
            torch.tensor(data.copy(), requires_grad=requires_grad))


def _same(ours: Any, theirs: Any, atol: float = 1e-12) -> None:
    """Values, dtype and shape of a tensor (or a tuple of tensors) equal torch's."""
    torch = _torch()
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _same(o, t, atol)
        return
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, tr.Tensor), type(ours)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_allclose(ours.numpy().astype(float),
                                   theirs.detach().numpy().astype(float), rtol=0, atol=atol)
    else:
        assert ours == theirs


X = np.random.default_rng(0).normal(size=(3, 4, 5))

# (name, our call, torch's call): the same code on both libraries
DIFFERENTIABLE: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("max_dim", lambda lib, x: x.max(1)[0]),
    ("max_dim_keepdim", lambda lib, x: x.max(dim=2, keepdim=True).values),
    ("min_dim", lambda lib, x: x.min(-1).values),
    ("max_all", lambda lib, x: x.max()),
    ("topk", lambda lib, x: x.topk(2, dim=1).values),
    ("topk_smallest", lambda lib, x: x.topk(3, largest=False).values),
    ("sort", lambda lib, x: x.sort(dim=0, descending=True).values),
    ("gather", lambda lib, x: x.gather(2, lib.tensor(np.array([[[0, 4], [1, 1], [3, 2],
                                                                  [0, 0]]] * 3)))),
    ("index_select", lambda lib, x: x.index_select(1, lib.tensor(np.array([3, 0, 3])))),
    ("norm", lambda lib, x: x.norm()),
    ("norm_dim", lambda lib, x: x.norm(dim=1, keepdim=True)),
    ("norm_p1", lambda lib, x: x.norm(p=1, dim=2)),
    ("norm_p3", lambda lib, x: x.norm(p=3, dim=0)),
    ("repeat", lambda lib, x: x.repeat(2, 1, 3)),
    ("repeat_more_dims", lambda lib, x: x[0].repeat(2, 1, 2)),
    ("chunk", lambda lib, x: lib.cat(x.chunk(3, dim=2)[::-1], dim=2)),
    ("split", lambda lib, x: x.split(2, dim=1)[1]),
    ("unbind", lambda lib, x: x.unbind(1)[2]),
    ("t", lambda lib, x: x[0].t()),
    ("mm", lambda lib, x: x[0].mm(x[1].t())),
    ("bmm", lambda lib, x: x.bmm(x.transpose(1, 2))),
    ("matmul_fn", lambda lib, x: lib.matmul(x, x.transpose(1, 2))),
    ("flatten", lambda lib, x: x.flatten(1)),
    ("flatten_range", lambda lib, x: x.flatten(0, 1)),
    ("sum_dim_keepdim", lambda lib, x: x.sum(dim=1, keepdim=True)),
    ("mean_dims", lambda lib, x: x.mean(dim=(0, 2))),
    ("std", lambda lib, x: x.std(dim=1)),
    ("var_biased", lambda lib, x: x.var(dim=2, unbiased=False)),
    ("expand", lambda lib, x: x[:, :1].expand(3, 6, 5)),
    ("expand_minus_one", lambda lib, x: x[:, :1].expand(-1, 6, -1)),
    ("view", lambda lib, x: (x * 1).view(12, 5)),
    ("view_minus_one", lambda lib, x: (x * 1).view(-1, 10)),
    ("narrow", lambda lib, x: x.narrow(2, 1, 3)),
    ("squeeze_unsqueeze", lambda lib, x: x.unsqueeze(1).squeeze(1)),
    ("permute_dims", lambda lib, x: x.permute(2, 0, 1)),
    ("softmax_dim", lambda lib, x: x.softmax(dim=1)),
    ("log_softmax_fn", lambda lib, x: lib.log_softmax(x, dim=-1)),
    ("tanh_fn", lambda lib, x: lib.tanh(x)),
    ("sigmoid_fn", lambda lib, x: lib.sigmoid(x)),
    ("exp_fn", lambda lib, x: lib.exp(x * 0.1)),
    ("clamp_fn", lambda lib, x: lib.clamp(x, min=-0.5, max=0.5)),
    ("max_fn_dim", lambda lib, x: lib.max(x, 1)[0]),
    ("max_fn_pair", lambda lib, x: lib.max(x, x.flip(0)) if hasattr(x, "flip")
     else lib.max(x, x * 0.5)),
    ("contiguous", lambda lib, x: x.transpose(0, 1).contiguous()),
]


@pytest.mark.parametrize("name, program", DIFFERENTIABLE, ids=[c[0] for c in DIFFERENTIABLE])
def test_differentiable_method_matches_torch(name: str, program: Callable) -> None:
    torch = _torch()
    if name == "max_fn_pair":
        program = lambda lib, x: lib.max(x, x * 0.5)  # noqa: E731
    ours, theirs = _pair(X)
    out_o, out_t = program(tr, ours), program(torch, theirs)
    _same(out_o, out_t)
    weights = np.random.default_rng(1).normal(size=tuple(out_t.shape))
    (out_o * tr.tensor(weights)).sum().backward()
    (out_t * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=0, atol=1e-12)


NON_DIFFERENTIABLE: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("max_indices", lambda lib, x: x.max(1)[1]),
    ("min_indices_keepdim", lambda lib, x: x.min(dim=0, keepdim=True).indices),
    ("argmax", lambda lib, x: x.argmax()),
    ("argmax_dim", lambda lib, x: x.argmax(dim=2)),
    ("argmin_keepdim", lambda lib, x: x.argmin(1, keepdim=True)),
    ("topk_indices", lambda lib, x: x.topk(2).indices),
    ("sort_indices", lambda lib, x: x.sort(1).indices),
    ("argsort", lambda lib, x: x.argsort(dim=0, descending=True)),
    ("long", lambda lib, x: (x * 3).long()),
    ("int", lambda lib, x: (x * 3).int()),
    ("bool", lambda lib, x: (x > 0).bool()),
    ("float", lambda lib, x: x.float()),
    ("eq", lambda lib, x: x.eq(x[0])),
    ("gt_fn", lambda lib, x: lib.gt(x, 0.1)),
    ("lt_op", lambda lib, x: x < 0),
    ("and", lambda lib, x: (x > 0) & (x < 1)),
    ("or", lambda lib, x: (x > 1) | (x < -1)),
    ("invert", lambda lib, x: ~(x > 0)),
    ("any_dim", lambda lib, x: (x > 2).any(dim=1)),
    ("all", lambda lib, x: (x > -5).all()),
    ("sum_bool", lambda lib, x: (x > 0).sum()),
    ("new_zeros", lambda lib, x: x.new_zeros(2, 3)),
    ("new_ones", lambda lib, x: x.new_ones((2,))),
    ("new_full", lambda lib, x: x.new_full((2, 2), 7.0)),
    ("new_tensor", lambda lib, x: x.new_tensor([1, 2])),
    ("zeros_like", lambda lib, x: lib.zeros_like(x)),
    ("full_like", lambda lib, x: lib.full_like(x, 2.5)),
    ("type_as", lambda lib, x: lib.tensor([1, 2]).type_as(x)),
]


@pytest.mark.parametrize("name, program", NON_DIFFERENTIABLE,
                         ids=[c[0] for c in NON_DIFFERENTIABLE])
def test_non_differentiable_method_matches_torch(name: str, program: Callable) -> None:
    torch = _torch()
    ours, theirs = _pair(X, requires_grad=False)
    _same(program(tr, ours), program(torch, theirs))


def test_sizes_as_torch() -> None:
    torch = _torch()
    ours, theirs = _pair(X, requires_grad=False)
    assert ours.size() == tuple(theirs.size()) and isinstance(ours.size(), tuple)
    assert isinstance(ours.size(), tr.Size) and isinstance(ours.shape, tuple)
    for d in (0, 1, 2, -1, -3):
        assert ours.size(d) == theirs.size(d)
    assert ours.numel() == theirs.numel() == ours.size().numel()
    assert ours.dim() == theirs.dim() == ours.ndimension()
    with pytest.raises(IndexError, match="size: axis 3 is out of range"):
        ours.size(3)
    m = tr.nn.Linear(3, 4)
    assert sum(p.numel() for p in m.parameters()) == 16


CREATION: list[tuple[str, Callable[[Any], Any]]] = [
    ("zeros", lambda lib: lib.zeros(2, 3)),
    ("zeros_tuple_long", lambda lib: lib.zeros((2, 3), dtype=lib.long)),
    ("ones_double", lambda lib: lib.ones(4, dtype=lib.double)),
    ("empty_shape", lambda lib: lib.empty(2, 2).shape),
    ("full_int", lambda lib: lib.full((2,), 3)),
    ("full_float", lambda lib: lib.full((2,), 3.5)),
    ("full_bool", lambda lib: lib.full((2,), True)),
    ("arange", lambda lib: lib.arange(5)),
    ("arange_float", lambda lib: lib.arange(0.0, 1.0, 0.25)),
    ("linspace", lambda lib: lib.linspace(0, 1, 5)),
    ("linspace_double", lambda lib: lib.linspace(-2, 3, 7, dtype=lib.float64)),
    ("tensor_ints", lambda lib: lib.tensor([[1, 2], [3, 4]])),
    ("tensor_floats", lambda lib: lib.tensor([1.0, 2.5])),
    ("tensor_bools", lambda lib: lib.tensor([True, False])),
    ("as_tensor", lambda lib: lib.as_tensor(np.array([1.0, 2.0]))),
    ("from_numpy", lambda lib: lib.from_numpy(np.arange(3, dtype=np.int32))),
    ("LongTensor", lambda lib: lib.LongTensor([1, 2, 3])),
    ("FloatTensor", lambda lib: lib.FloatTensor([1, 2, 3])),
    ("FloatTensor_shape", lambda lib: lib.FloatTensor(2, 3).shape),
    ("cat_dim", lambda lib: lib.cat([lib.ones(2, 1), lib.zeros(2, 2)], dim=1)),
    ("stack_dim", lambda lib: lib.stack([lib.ones(2), lib.zeros(2)], dim=1)),
    ("where", lambda lib: lib.where(lib.tensor([True, False]), lib.tensor([1.0, 2.0]),
                                    lib.tensor([3.0, 4.0]))),
]


@pytest.mark.parametrize("name, program", CREATION, ids=[c[0] for c in CREATION])
def test_creation_matches_torch(name: str, program: Callable) -> None:
    torch = _torch()
    ours, theirs = program(tr), program(torch)
    if isinstance(theirs, torch.Size):
        assert tuple(ours) == tuple(theirs)
    else:
        _same(ours, theirs)


def test_dtype_names_compare_with_tensor_dtypes_and_set_default_dtype() -> None:
    pairs = [(tr.float32, tr.float), (tr.float64, tr.double), (tr.int64, tr.long),
             (tr.int32, tr.int), (tr.float16, tr.half)]
    for a, b in pairs:
        assert a == b
    assert tr.zeros(2, dtype=tr.long).dtype == tr.int64
    assert tr.tensor([1.0]).dtype == tr.float32 and tr.get_default_dtype() == tr.float32
    try:
        tr.set_default_dtype(tr.float64)
        assert tr.tensor([1.0]).dtype == tr.float64
        assert tr.zeros(2).dtype == tr.float64 and tr.randn(2, generator=0).dtype == tr.float64
        assert tr.arange(0.0, 1.0, 0.5).dtype == tr.float64
        assert (tr.tensor([1, 2]) / 2).dtype == tr.float64
    finally:
        tr.set_default_dtype(tr.float32)
    assert tr.tensor([1.0]).dtype == tr.float32
    with pytest.raises(TypeError, match="set_default_dtype"):
        tr.set_default_dtype(tr.long)


def test_from_numpy_shares_memory_and_as_tensor_does_not_copy() -> None:
    a = np.zeros(3)
    t = tr.from_numpy(a)
    t[0] = 5.0
    assert a[0] == 5.0
    assert tr.as_tensor(a).numpy() is not None and np.shares_memory(tr.as_tensor(a).numpy(), a)
    assert tr.as_tensor(t) is t


def test_devices_as_torch() -> None:
    dev = tr.device("cpu")
    assert dev == "cpu" and str(dev) == "cpu" and dev.type == "cpu"
    x = tr.ones(2).to(dev)
    assert x.device == dev and x.to("cpu") is x and x.cpu() is x
    assert isinstance(tr.cuda.is_available(), bool)
    with pytest.raises(ValueError, match="unknown device"):
        tr.device("tpu")
    y = tr.ones(2).to(tr.zeros(1, dtype=tr.float64))
    assert y.dtype == tr.float64


def test_type_conversions_name_the_type() -> None:
    x = tr.ones(2)
    assert x.type() == "tinygrad_rnn.FloatTensor"
    assert x.type(tr.long).dtype == tr.long
    assert x.type("torch.LongTensor").dtype == tr.long
    assert x.long().type() == "tinygrad_rnn.LongTensor"


TORCH_KEYWORDS = [
    ("sum", {"dim": 0, "keepdim": True}), ("mean", {"dim": 0, "keepdim": True}),
    ("max", {"dim": 0, "keepdim": True}), ("min", {"dim": 0, "keepdim": True}),
    ("argmax", {"dim": 0, "keepdim": True}), ("argmin", {"dim": 0, "keepdim": True}),
    ("softmax", {"dim": 0}), ("log_softmax", {"dim": 0}), ("norm", {"dim": 0, "keepdim": True}),
    ("any", {"dim": 0, "keepdim": True}), ("all", {"dim": 0, "keepdim": True}),
    ("std", {"dim": 0, "keepdim": True}), ("var", {"dim": 0, "keepdim": True}),
    ("topk", {"k": 1, "dim": 0}), ("sort", {"dim": 0, "descending": True}),
    ("squeeze", {"dim": 0}), ("unsqueeze", {"dim": 0}), ("flatten", {"start_dim": 0}),
    ("chunk", {"chunks": 2, "dim": 0}), ("split", {"split_size_or_sections": 1, "dim": 0}),
    ("gather", {"dim": 0, "index": tr.zeros(1, 3, dtype=tr.long)}),
    ("index_select", {"dim": 0, "index": tr.zeros(1, dtype=tr.long)}),
    ("narrow", {"dim": 0, "start": 0, "length": 1}), ("unbind", {"dim": 0}),
    ("permute", {"dims": (1, 0)}),
]


@pytest.mark.parametrize("name, kwargs", TORCH_KEYWORDS, ids=[c[0] for c in TORCH_KEYWORDS])
def test_methods_take_torch_keyword_names(name: str, kwargs: dict) -> None:
    x = tr.Tensor(np.arange(6.0).reshape(2, 3))
    getattr(x, name)(**kwargs)  # raises TypeError for an unknown keyword
    if name in ("sum", "mean", "max", "min", "argmax", "softmax", "topk", "sort"):
        getattr(tr, name)(x, **kwargs)


def test_function_forms_refuse_non_tensors_by_name() -> None:
    with pytest.raises(TypeError, match="tanh: input must be a Tensor"):
        tr.tanh([1.0])
    with pytest.raises(TypeError, match="maximum: input must be a Tensor"):
        tr.maximum(1.0, tr.ones(1))


def test_bad_arguments_name_the_method() -> None:
    x = tr.ones(2, 3)
    with pytest.raises(IndexError, match="topk: k=4"):
        x.topk(4)
    with pytest.raises(ValueError, match="gather: index of shape"):
        x.gather(0, tr.zeros(3, dtype=tr.long))
    with pytest.raises(TypeError, match="gather: index must hold integers"):
        x.gather(0, tr.zeros(1, 3))
    with pytest.raises(RuntimeError, match="bmm: input must be a 3-D tensor"):
        x.bmm(x)
    with pytest.raises(RuntimeError, match="t: expects a tensor with <= 2 dimensions"):
        tr.ones(1, 2, 3).t()
    with pytest.raises(ValueError, match="norm: p must be"):
        x.norm(p=-1)
    with pytest.raises(ValueError, match="repeat: 1 sizes"):
        x.repeat(2)
    with pytest.raises(ValueError, match="chunk: chunks must be positive"):
        x.chunk(0)
    with pytest.raises(ValueError, match="randint: need low < high"):
        tr.randint(3, 3, (2,))


def test_norm_gradient_at_zero_is_zero_as_torch() -> None:
    torch = _torch()
    ours, theirs = _pair(np.zeros((2, 3)))
    ours.norm(dim=1).sum().backward()
    theirs.norm(dim=1).sum().backward()
    np.testing.assert_array_equal(ours.grad, theirs.grad.numpy())
    np.testing.assert_array_equal(ours.grad, np.zeros((2, 3)))


@settings(max_examples=30)
@given(k=st.integers(1, 5), dim=st.integers(-3, 2), largest=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_topk_and_sort_match_torch_on_distinct_values(k: int, dim: int, largest: bool,
                                                      seed: int) -> None:
    torch = _torch()
    data = np.random.default_rng(seed).permutation(60).reshape(3, 4, 5).astype(float)
    n = data.shape[dim]
    k = min(k, n)
    ours, theirs = _pair(data)
    got, want = ours.topk(k, dim, largest), theirs.topk(k, dim, largest)
    _same(got.values, want.values)
    _same(got.indices, want.indices)
    s_o, s_t = ours.sort(dim, descending=largest), theirs.sort(dim, descending=largest)
    _same(s_o.values, s_t.values)
    _same(s_o.indices, s_t.indices)


def test_randomness_takes_a_seed_and_is_reproducible() -> None:
    a, b = tr.randint(0, 10, (5,), generator=3), tr.randint(0, 10, (5,), generator=3)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    p = tr.randperm(6, generator=1)
    assert sorted(p.tolist()) == list(range(6)) and p.dtype == tr.long
    assert inspect.signature(tr.randn).parameters["generator"].default is None
