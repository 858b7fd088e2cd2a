"""Basic layers: Linear, Embedding, Dropout, Sequential, ModuleList and activations.

Values against NumPy, gradients by float64 gradcheck, and (when torch is importable) numbers
and state-dict keys against torch.nn.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import tinygrad_rnn as tr
from tinygrad_rnn import nn

from module_helpers import swapped_parameters
from torch_oracle import requires_torch


def module_fn(module: nn.Module, *names: str):
    """f(x, *params) = module(x) with ``names`` bound to the given tensors."""
    def f(x, *params):
        with swapped_parameters(module, dict(zip(names, params))):
            return module(x)
    return f


# ------------------------------------------------------------------------- Linear
@given(n=st.integers(1, 4), d=st.integers(1, 5), h=st.integers(1, 5), seed=st.integers(0, 99),
       bias=st.booleans())
def test_linear_matches_numpy(n, d, h, seed, bias):
    lin = nn.Linear(d, h, bias=bias, dtype=np.float64, generator=seed)
    x = np.random.default_rng(seed).standard_normal((2, n, d))
    y = lin(tr.Tensor(x))
    expected = x @ lin.weight.numpy().T
    if bias:
        expected = expected + lin.bias.numpy()
    assert y.shape == (2, n, h) and y.dtype == np.float64
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-13, atol=1e-13)


def test_linear_parameters_and_init():
    lin = nn.Linear(50, 40, generator=3)
    assert lin.weight.shape == (40, 50) and lin.bias.shape == (40,)
    assert lin.weight.dtype == np.float32 and lin.bias.dtype == np.float32
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    k = 1 / math.sqrt(50)
    w = lin.weight.numpy()
    assert np.all(np.abs(w) <= k) and np.all(np.abs(lin.bias.numpy()) <= k)
    # U(-k, k): spread over the whole interval, variance k^2 / 3 (2000 samples: ~3% error)
    assert w.max() > 0.98 * k and w.min() < -0.98 * k
    assert abs(w.var() / (k * k / 3) - 1) < 0.1
    assert nn.Linear(3, 2, bias=False).bias is None
    assert list(nn.Linear(3, 2, bias=False).state_dict()) == ["weight"]


def test_linear_is_reproducible_and_dtype_independent():
    a32 = nn.Linear(6, 4, generator=11)
    a64 = nn.Linear(6, 4, dtype=np.float64, generator=11)
    assert a64.weight.dtype == np.float64
    np.testing.assert_array_equal(a32.weight.numpy(), a64.weight.numpy().astype(np.float32))
    np.testing.assert_array_equal(a32.bias.numpy(), a64.bias.numpy().astype(np.float32))
    tr.manual_seed(5)
    b = nn.Linear(6, 4)
    tr.manual_seed(5)
    c = nn.Linear(6, 4)
    np.testing.assert_array_equal(b.weight.numpy(), c.weight.numpy())
    assert not np.array_equal(b.weight.numpy(), nn.Linear(6, 4).weight.numpy())
    rng = np.random.default_rng(0)
    d, e = nn.Linear(6, 4, generator=rng), nn.Linear(6, 4, generator=rng)
    assert not np.array_equal(d.weight.numpy(), e.weight.numpy())  # the generator advanced


def test_linear_float32_matches_float64():
    lin64 = nn.Linear(7, 5, dtype=np.float64, generator=2)
    lin32 = nn.Linear(7, 5, generator=2)
    x = np.random.default_rng(1).standard_normal((3, 7))
    y64 = lin64(tr.Tensor(x)).numpy()
    y32 = lin32(tr.Tensor(x.astype(np.float32))).numpy()
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32, y64, rtol=1e-5, atol=1e-6)


def test_linear_errors():
    with pytest.raises(TypeError, match="floating-point"):
        nn.Linear(2, 2, dtype=np.int64)
    with pytest.raises(ValueError, match="in_features"):
        nn.Linear(-1, 2)
    with pytest.raises(ValueError, match=r"Linear: input of shape \(1, 4\) .*in_features = 3"):
        nn.Linear(3, 2)(tr.Tensor(np.zeros((1, 4), dtype=np.float32)))


def test_linear_float32_bias_gradient_is_accurate_over_many_rows():
    """Linear's bias gradient sums the upstream over every row: over 200,000 rows NumPy's
    row-after-row float32 sum left it about 1e-5 off the float64 result (torch: 2e-7)."""
    lin32 = nn.Linear(4, 3, generator=0)
    lin64 = nn.Linear(4, 3, dtype=np.float64, generator=0)
    with tr.no_grad():
        lin64.weight.copy_(lin32.weight.numpy().astype(np.float64))
        lin64.bias.copy_(lin32.bias.numpy().astype(np.float64))
    x = np.random.default_rng(0).random((200_000, 4)) + 1
    for lin, dt in ((lin32, np.float32), (lin64, np.float64)):
        y = lin(tr.Tensor(x.astype(dt)))
        ((y * y).sum() * 1e-3).backward()
    assert lin32.bias.grad.dtype == np.float32
    exact = lin64.bias.grad
    err = np.linalg.norm(lin32.bias.grad.astype(np.float64) - exact) / np.linalg.norm(exact)
    assert err < 1e-6, f"relative error {err:.2e}"


@pytest.mark.parametrize("x_dtype, p_dtype, fix", [
    (np.float64, np.float32, "input.to(np.float32), or the module with model.to(np.float64)"),
    (np.float32, np.float64, "input.to(np.float64), or the module with model.to(np.float32)"),
    (np.float16, np.float32, "input.to(np.float32), or the module with model.to(np.float16)"),
    (np.int64, np.float32, "input.to(np.float32))"),
])
def test_linear_refuses_an_input_of_another_dtype(x_dtype, p_dtype, fix):
    """A float64 input to a float32 Linear used to give a float64 output (and float64
    gradients upstream) silently; torch and the recurrent layers refuse it."""
    lin = nn.Linear(4, 3, dtype=p_dtype, generator=0)
    x = tr.Tensor(np.ones((5, 4), dtype=x_dtype))
    message = (f"Linear: input dtype {np.dtype(x_dtype)} does not match the parameters' "
               f"dtype {np.dtype(p_dtype)} (convert the input with {fix}")
    with pytest.raises(TypeError, match=re.escape(message)):
        lin(x)
    # the suggested conversion works
    assert lin(x.to(p_dtype)).dtype == p_dtype


@pytest.mark.parametrize("make, message", [
    (lambda: nn.Linear(2.5, 3), "Linear: in_features must be an integer, got 2.5"),
    (lambda: nn.Linear(2, 3.0), "Linear: out_features must be an integer, got 3.0"),
    (lambda: nn.Linear(True, 3), "Linear: in_features must be an integer, got True"),
    (lambda: nn.Embedding(5.5, 2), "Embedding: num_embeddings must be an integer, got 5.5"),
    (lambda: nn.Embedding(5, 2.0), "Embedding: embedding_dim must be an integer, got 2.0"),
    (lambda: nn.Embedding(5, 2, padding_idx=1.5),
     "Embedding: padding_idx must be an integer, got 1.5"),
    (lambda: nn.Embedding(5, 2, padding_idx=True),
     "Embedding: padding_idx must be an integer, got True"),
])
def test_non_integer_sizes_are_refused(make, message):
    """These used to fail with NumPy's "'float' object cannot be interpreted as an integer"
    (or an IndexError for padding_idx), naming neither the layer nor the argument."""
    with pytest.raises(TypeError, match=re.escape(message)):
        make()


def test_numpy_integer_sizes_are_accepted():
    lin = nn.Linear(np.int64(3), np.int32(2))
    emb = nn.Embedding(np.int64(5), np.int16(2), padding_idx=np.int64(-1))
    assert (lin.in_features, lin.out_features) == (3, 2) and lin.weight.shape == (2, 3)
    assert (emb.num_embeddings, emb.embedding_dim, emb.padding_idx) == (5, 2, 4)
    assert all(type(x) is int for x in (lin.in_features, lin.out_features,
                                         emb.num_embeddings, emb.padding_idx))
    with pytest.raises(ValueError, match="Embedding: embedding_dim must be >= 0, got -2"):
        nn.Embedding(5, -2)


@given(seed=st.integers(0, 2 ** 31 - 1), bias=st.booleans())
def test_linear_gradcheck(seed, bias):
    rng = np.random.default_rng(seed)
    lin = nn.Linear(4, 3, bias=bias, dtype=np.float64, generator=seed)
    x = tr.Tensor(rng.standard_normal((2, 4)), requires_grad=True)
    names = ("weight", "bias") if bias else ("weight",)
    params = [tr.Tensor(getattr(lin, n).numpy(), requires_grad=True) for n in names]
    assert tr.gradcheck(module_fn(lin, *names), [x, *params], atol=1e-8, rtol=1e-6)


def test_linear_grads_match_the_formulas():
    rng = np.random.default_rng(0)
    lin = nn.Linear(4, 3, dtype=np.float64, generator=0)
    x = tr.Tensor(rng.standard_normal((2, 5, 4)), requires_grad=True)
    g = rng.standard_normal((2, 5, 3))
    lin(x).backward(g)
    w = lin.weight.numpy()
    np.testing.assert_allclose(x.grad, g @ w, rtol=1e-13)
    np.testing.assert_allclose(lin.weight.grad, np.einsum("nto,nti->oi", g, x.numpy()),
                               rtol=1e-13)
    np.testing.assert_allclose(lin.bias.grad, g.sum(axis=(0, 1)), rtol=1e-13)
    assert lin.weight.grad.dtype == np.float64


# ------------------------------------------------------------------------- Embedding
@given(ids=st.lists(st.integers(0, 9), min_size=1, max_size=12), seed=st.integers(0, 99))
def test_embedding_lookup_and_grad_match_numpy(ids, seed):
    emb = nn.Embedding(10, 3, dtype=np.float64, generator=seed)
    idx = np.array(ids).reshape(1, -1)
    y = emb(idx)
    assert y.shape == (1, len(ids), 3)
    np.testing.assert_array_equal(y.numpy(), emb.weight.numpy()[idx])
    g = np.random.default_rng(seed).standard_normal(y.shape)
    y.backward(g)
    expected = np.zeros((10, 3))
    np.add.at(expected, idx.reshape(-1), g.reshape(-1, 3))  # repeated ids accumulate
    np.testing.assert_allclose(emb.weight.grad, expected, rtol=1e-14)


def test_embedding_init_and_shapes():
    emb = nn.Embedding(400, 50, generator=0)
    w = emb.weight.numpy()
    assert w.shape == (400, 50) and w.dtype == np.float32
    # N(0, 1), 20000 samples: mean within 4 standard errors, std within 3%
    assert abs(w.mean()) < 4 / math.sqrt(w.size)
    assert abs(w.std() - 1) < 0.03
    assert emb(tr.Tensor(np.array(3))).shape == (50,)
    assert emb(np.zeros((2, 3, 4), dtype=np.int64)).shape == (2, 3, 4, 50)
    assert emb([1, 2]).shape == (2, 50)
    with pytest.raises(IndexError, match="400"):
        emb(np.array([400]))


@pytest.mark.parametrize("padding_idx, row", [(0, 0), (3, 3), (-1, 5)])
def test_embedding_padding_row_is_zero_and_gets_no_grad(padding_idx, row):
    emb = nn.Embedding(6, 4, padding_idx=padding_idx, dtype=np.float64, generator=1)
    assert emb.padding_idx == row
    np.testing.assert_array_equal(emb.weight.numpy()[row], np.zeros(4))
    ids = np.array([[row, 1, row], [2, row, 4]])
    emb(ids).backward(np.ones((2, 3, 4)))
    np.testing.assert_array_equal(emb.weight.grad[row], np.zeros(4))
    np.testing.assert_array_equal(emb.weight.grad[1], np.ones(4))
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(6, 4, padding_idx=6)


@given(seed=st.integers(0, 2 ** 31 - 1), padding=st.sampled_from([None, 2]))
def test_embedding_gradcheck(seed, padding):
    emb = nn.Embedding(5, 3, padding_idx=padding, dtype=np.float64, generator=seed)
    # the padding row gets no gradient by design (not the derivative of the lookup), so the
    # ids avoid it here; test_embedding_padding_row_is_zero_and_gets_no_grad covers it
    rows = [r for r in range(5) if r != padding]
    ids = np.random.default_rng(seed).choice(rows, size=(2, 4))
    w = tr.Tensor(emb.weight.numpy(), requires_grad=True)
    assert tr.gradcheck(module_fn(emb, "weight"), [ids, w], atol=1e-8, rtol=1e-6)


def test_embedding_from_pretrained():
    table = np.arange(12, dtype=np.float64).reshape(4, 3)
    emb = nn.Embedding.from_pretrained(table)
    assert emb.weight.dtype == np.float64 and not emb.weight.requires_grad
    np.testing.assert_array_equal(emb([3, 0]).numpy(), table[[3, 0]])
    table[0, 0] = 99.0  # a copy was taken
    assert emb.weight.numpy()[0, 0] == 0.0
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    assert repr(emb) == "Embedding(4, 3, dtype=float64)  # 12 parameters"


# ------------------------------------------------------------------------- Dropout
def _mask(drop: nn.Dropout, shape=(40, 50)) -> np.ndarray:
    return drop(tr.Tensor(np.ones(shape, dtype=np.float32))).numpy() != 0


def test_dropout_same_seed_same_mask():
    a, b = nn.Dropout(0.3, generator=7), nn.Dropout(0.3, generator=7)
    np.testing.assert_array_equal(_mask(a), _mask(b))
    first = _mask(a)
    assert not np.array_equal(first, _mask(a))  # the generator moves on
    tr.manual_seed(123)
    c = nn.Dropout(0.3)
    tr.manual_seed(123)
    d = nn.Dropout(0.3)
    np.testing.assert_array_equal(_mask(c), _mask(d))
    e = nn.Dropout(0.3)  # a second layer from the same default generator: another stream
    tr.manual_seed(123)
    nn.Dropout(0.3)
    assert not np.array_equal(_mask(e), _mask(nn.Dropout(0.3, generator=123)))


def test_dropout_does_not_shift_other_layers_init():
    tr.manual_seed(9)
    a = nn.Linear(3, 3)
    tr.manual_seed(9)
    nn.Dropout(0.5)
    b = nn.Linear(3, 3)
    np.testing.assert_array_equal(a.weight.numpy(), b.weight.numpy())


def test_dropout_eval_is_identity():
    drop = nn.Dropout(0.5, generator=0).eval()
    x = tr.Tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    np.testing.assert_array_equal(drop(x).numpy(), x.numpy())


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_scale_and_rate(p):
    drop = nn.Dropout(p, generator=42)
    x = tr.Tensor(np.full((200, 100), 2.0), requires_grad=True)
    y = drop(x)
    out = y.numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 2.0 / (1 - p), rtol=1e-15)
    n = out.size
    # the drop rate is p within 5 binomial standard errors; the mean is preserved
    assert abs((1 - kept.mean()) - p) < 5 * math.sqrt(p * (1 - p) / n)
    y.backward(np.ones_like(out))
    np.testing.assert_allclose(x.grad, kept / (1 - p), rtol=1e-15)


def test_dropout_edge_probabilities():
    x = tr.Tensor(np.ones((3, 3), dtype=np.float32))
    np.testing.assert_array_equal(nn.Dropout(0.0)(x).numpy(), x.numpy())
    np.testing.assert_array_equal(nn.Dropout(1.0)(x).numpy(), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="p must be"):
        nn.Dropout(1.5)
    assert nn.Dropout(0.25).num_parameters() == 0
    assert repr(nn.Dropout(0.25)) == "Dropout(p=0.25, inplace=False)"  # torch's repr


# ------------------------------------------------------------------------- containers
def test_sequential_forward_indexing_and_keys():
    l1, l2 = nn.Linear(3, 4, dtype=np.float64, generator=0), nn.Linear(4, 2, dtype=np.float64,
                                                                        generator=1)
    seq = nn.Sequential(l1, nn.Tanh(), l2)
    x = np.random.default_rng(0).standard_normal((5, 3))
    expected = np.tanh(x @ l1.weight.numpy().T + l1.bias.numpy()) @ l2.weight.numpy().T
    np.testing.assert_allclose(seq(tr.Tensor(x)).numpy(), expected + l2.bias.numpy(),
                               rtol=1e-13)
    assert len(seq) == 3 and seq[0] is l1 and seq[-1] is l2
    assert list(seq) == [l1, seq[1], l2]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is l1
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and isinstance(seq[3], nn.Sigmoid)
    seq[1] = nn.ReLU()
    assert isinstance(seq[1], nn.ReLU)
    assert len(nn.Sequential()) == 0


def test_module_list():
    layers = nn.ModuleList([nn.Linear(2, 2, generator=i) for i in range(3)])
    assert len(layers) == 3
    assert list(layers.state_dict())[:3] == ["0.weight", "0.bias", "1.weight"]
    layers.append(nn.Tanh())
    layers.extend([nn.ReLU(), nn.Identity()])
    assert len(layers) == 6 and isinstance(layers[-1], nn.Identity)
    first = layers[0]
    layers.insert(0, nn.Sigmoid())
    assert layers[1] is first and isinstance(layers[0], nn.Sigmoid)
    del layers[0]
    assert layers[0] is first
    assert [n for n, _ in layers.named_children()] == ["0", "1", "2", "3", "4", "5"]
    assert list(layers.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias",
                                         "2.weight", "2.bias"]
    sub = layers[1:3]
    assert isinstance(sub, nn.ModuleList) and len(sub) == 2
    x = tr.Tensor(np.ones((1, 2), dtype=np.float32))
    for layer in layers:
        x = layer(x)
    assert x.shape == (1, 2)
    with pytest.raises(NotImplementedError, match="ModuleList"):
        layers(x)


@pytest.mark.parametrize("layer, fn", [
    (nn.Tanh(), np.tanh),
    (nn.ReLU(), lambda a: np.maximum(a, 0)),
    (nn.Sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    (nn.Identity(3, foo=1), lambda a: a),
])
def test_activation_modules(layer, fn):
    x = np.random.default_rng(0).standard_normal((4, 5)) + 0.05  # no exact zeros (relu kink)
    np.testing.assert_allclose(layer(tr.Tensor(x)).numpy(), fn(x), rtol=1e-14, atol=1e-15)
    assert layer.num_parameters() == 0


# ------------------------------------------------------------------------- torch parity
def _torch_state(module) -> dict:
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


@requires_torch
@given(seed=st.integers(0, 2 ** 31 - 1), bias=st.booleans())
@example(seed=0, bias=True)
def test_linear_matches_torch(seed, bias):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(5, 3, bias=bias, dtype=torch.float64)
    ours = nn.Linear(5, 3, bias=bias, dtype=np.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(_torch_state(theirs))
    x = np.random.default_rng(seed).standard_normal((4, 5))
    g = np.random.default_rng(seed + 1).standard_normal((4, 3))
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx)
    ty.backward(torch.tensor(g))
    ox = tr.Tensor(x, requires_grad=True)
    oy = ours(ox)
    oy.backward(g)
    np.testing.assert_allclose(oy.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ox.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy(), rtol=1e-12,
                               atol=1e-12)
    if bias:
        np.testing.assert_allclose(ours.bias.grad, theirs.bias.grad.numpy(), rtol=1e-12,
                                   atol=1e-12)


@given(seed=st.integers(0, 2 ** 31 - 1), padding=st.sampled_from([None, 0, 3]))
def test_embedding_matches_torch(seed, padding):
    torch = pytest.importorskip("torch")
    torch.manual_seed(seed)
    theirs = torch.nn.Embedding(6, 4, padding_idx=padding, dtype=torch.float64)
    ours = nn.Embedding(6, 4, padding_idx=padding, dtype=np.float64)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(_torch_state(theirs))
    ids = np.random.default_rng(seed).integers(0, 6, size=(3, 5))
    g = np.random.default_rng(seed + 1).standard_normal((3, 5, 4))
    ty = theirs(torch.tensor(ids))
    ty.backward(torch.tensor(g))
    oy = ours(ids)
    oy.backward(g)
    np.testing.assert_allclose(oy.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.weight.grad, theirs.weight.grad.numpy(), rtol=1e-12,
                               atol=1e-12)


def test_container_keys_match_torch():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Sequential(
        torch.nn.Embedding(5, 3), torch.nn.Dropout(0.1),
        torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Linear(3, 2, bias=False)]),
        torch.nn.Tanh())
    ours = nn.Sequential(
        nn.Embedding(5, 3), nn.Dropout(0.1),
        nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 2, bias=False)]), nn.Tanh())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (k, v), (tk, tv) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert v.shape == tuple(tv.shape), k
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert ours.num_parameters() == sum(p.numel() for p in theirs.parameters())


def test_dtype_none_means_the_default_float32_in_every_model() -> None:
    """dtype=None is the default dtype, as in torch (np.dtype(None) alone is float64)."""
    models = [
        nn.Linear(2, 3, dtype=None), nn.Embedding(5, 3, dtype=None),
        nn.RNNCell(2, 3, dtype=None), nn.GRUCell(2, 3, dtype=None),
        nn.LSTMCell(2, 3, dtype=None), nn.LSTM(2, 3, dtype=None),
        nn.GRU(2, 3, num_layers=2, bidirectional=True, dtype=None),
        nn.Attention("additive", 4, 4, dtype=None), nn.MultiheadAttention(4, 2, dtype=None),
        nn.Seq2Seq(9, 6, emb=4, hidden=5, dtype=None),
        nn.SequenceClassifier(10, 4, 5, num_classes=3, dtype=None),
        tr.lm.RNNLM(10, 4, 5, dtype=None), tr.lm.FeedForwardLM(10, 2, 4, 5, dtype=None),
    ]
    for model in models:
        assert {p.dtype for p in model.parameters()} == {np.dtype(np.float32)}, model
