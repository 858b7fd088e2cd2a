"""Transformer layers against torch (the comparisons skip cleanly when torch is absent).

After loading torch's state dict converted to NumPy, in float64 with dropout 0 (or in eval
mode), the outputs and the gradients w.r.t. every input and every parameter equal torch's to
1e-10, for TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
TransformerDecoder and Transformer: norm_first and batch_first both ways, relu and gelu
(names, functions and modules), causal float masks, boolean and float key padding masks,
boolean and 3-D (N * nhead, L, S) attention masks, unbatched inputs. Also: state_dict keys in
torch's order, generate_square_subsequent_mask, the word language model's subclass of
nn.Transformer, independent dropout in the cloned layers, a directional gradcheck of an
encoder layer, and clear errors for bad arguments and inputs.

Masks here never empty a whole row: torch gives NaN there (we give zeros, see
tests/nn/test_attention.py).
"""
from __future__ import annotations

import doctest
import math
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import nn

from module_helpers import swapped_parameters

# torch's own notes about its fast paths and mixed mask types
pytestmark = pytest.mark.filterwarnings(
    "ignore:.*(mismatched|enable_nested_tensor|is_causal).*:UserWarning")

SAME = 1e-10  # |a - b| <= SAME * max(1, |b|)
E, H, FF = 8, 2, 12


def _torch() -> Any:
    return pytest.importorskip("torch")


def assert_same(a: Any, b: Any, what: str) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    if a.size:
        err = np.abs(a - b) / np.maximum(1.0, np.abs(b))
        assert np.all(err <= SAME), f"{what}: max scaled difference {err.max():.3g}"


def load_torch_state(ours: nn.Module, theirs: Any) -> None:
    """Load ``theirs``' state dict into ``ours``, after checking the keys, order and shapes."""
    state = {k: v.detach().numpy().copy() for k, v in theirs.state_dict().items()}
    mine = ours.state_dict()
    assert list(state) == list(mine)
    for k, v in state.items():
        assert tuple(mine[k].shape) == v.shape, k
    ours.load_state_dict(state)


def as_torch(value: Any) -> Any:
    torch = _torch()
    if value is None or isinstance(value, bool):
        return value
    return torch.tensor(np.asarray(value))


def run_both(theirs: Any, ours: nn.Module, inputs: list, masks: dict,
             seed: int = 0) -> None:
    """Forward and backward of a random weighting of the output through both; compare the
    output and the gradients of every input and parameter."""
    torch = _torch()
    rng = np.random.default_rng(seed)
    xt = [torch.tensor(x, requires_grad=True) for x in inputs]
    xo = [tr.Tensor(x.copy(), requires_grad=True) for x in inputs]
    yt = theirs(*xt, **{k: as_torch(v) for k, v in masks.items()})
    yo = ours(*xo, **masks)
    assert_same(yo.numpy(), yt.detach().numpy(), "output")
    w = rng.standard_normal(tuple(yt.shape))
    (yt * torch.tensor(w)).sum().backward()
    (yo * tr.Tensor(w)).sum().backward()
    for k, (a, b) in enumerate(zip(xo, xt)):
        assert_same(a.grad.numpy(), b.grad.numpy(), f"grad of input {k}")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_same(p.grad.numpy(), theirs_params[name].grad.numpy(), f"grad of {name}")


def sequence(rng: np.random.Generator, n: int, s: int, batch_first: bool) -> np.ndarray:
    shape = (n, s, E) if batch_first else (s, n, E)
    return rng.standard_normal(shape)


def causal(s: int) -> np.ndarray:
    return np.triu(np.full((s, s), -np.inf), k=1)


def padding(n: int, s: int) -> np.ndarray:
    """True = padding; row b pads its last b positions (never a whole row)."""
    pad = np.zeros((n, s), dtype=bool)
    for b in range(n):
        pad[b, s - b:] = b > 0
    return pad


def self_masks(case: str, n: int, s: int, rng: np.random.Generator) -> tuple[Any, Any]:
    """(attention mask, key padding mask) for a self-attention of n sequences of length s."""
    if case == "none":
        return None, None
    if case == "causal":
        return causal(s), None
    if case == "padding":
        return None, padding(n, s)
    if case == "causal+padding":
        return causal(s), padding(n, s)
    if case == "bool_3d":
        blocked = rng.random((n * H, s, s)) < 0.3
        blocked[..., 0] = False                                 # keep every row non-empty
        return blocked, None
    if case == "float_padding":                                 # additive, torch merges it
        add = -rng.random((n, s))
        add[0, -1] = -np.inf
        return rng.standard_normal((s, s)), add
    raise ValueError(case)


SELF_MASKS = ("none", "causal", "padding", "causal+padding", "bool_3d", "float_padding")
LAYOUTS = [(nf, bf) for nf in (False, True) for bf in (False, True)]


def layer_pair(kind: str, norm_first: bool, batch_first: bool, activation: Any = "relu",
               torch_activation: Any = None, seed: int = 0, **kw: Any) -> tuple:
    torch = _torch()
    torch.manual_seed(seed)
    args = dict(dim_feedforward=FF, dropout=0.0, batch_first=batch_first,
                norm_first=norm_first, **kw)
    theirs = getattr(torch.nn, kind)(
        E, H, activation=activation if torch_activation is None else torch_activation,
        dtype=torch.float64, **args)
    ours = getattr(nn, kind)(E, H, activation=activation, dtype=np.float64, **args)
    load_torch_state(ours, theirs)
    return theirs, ours


# --------------------------------------------------------------------------------------------
# layers against torch
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first,batch_first", LAYOUTS)
@pytest.mark.parametrize("mask", SELF_MASKS)
def test_encoder_layer_matches_torch(norm_first: bool, batch_first: bool, activation: str,
                                     mask: str) -> None:
    theirs, ours = layer_pair("TransformerEncoderLayer", norm_first, batch_first, activation)
    rng = np.random.default_rng(1)
    n, s = 3, 5
    src_mask, pad = self_masks(mask, n, s, rng)
    run_both(theirs, ours, [sequence(rng, n, s, batch_first)],
             {"src_mask": src_mask, "src_key_padding_mask": pad})


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first,batch_first", LAYOUTS)
@pytest.mark.parametrize("mask", SELF_MASKS)
def test_decoder_layer_matches_torch(norm_first: bool, batch_first: bool, activation: str,
                                     mask: str) -> None:
    theirs, ours = layer_pair("TransformerDecoderLayer", norm_first, batch_first, activation)
    rng = np.random.default_rng(2)
    n, t, s = 3, 4, 6
    tgt_mask, tgt_pad = self_masks(mask, n, t, rng)
    memory_pad = padding(n, s) if mask != "none" else None
    memory_mask = None
    if mask == "bool_3d":
        memory_mask = rng.random((n * H, t, s)) < 0.3
        memory_mask[..., 0] = False
    run_both(theirs, ours, [sequence(rng, n, t, batch_first), sequence(rng, n, s, batch_first)],
             {"tgt_mask": tgt_mask, "tgt_key_padding_mask": tgt_pad,
              "memory_mask": memory_mask, "memory_key_padding_mask": memory_pad})


@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_activation_callables_and_modules_match_torch(kind: str) -> None:
    torch = _torch()
    rng = np.random.default_rng(3)
    cases = [(nn.functional.gelu, torch.nn.functional.gelu), (nn.GELU(), torch.nn.GELU()),
             (nn.functional.relu, torch.nn.functional.relu),
             (lambda x: x.tanh(), lambda x: x.tanh())]
    for ours_act, torch_act in cases:
        theirs, ours = layer_pair(kind, False, True, ours_act, torch_act)
        inputs = [rng.standard_normal((2, 4, E))]
        if kind == "TransformerDecoderLayer":
            inputs.append(rng.standard_normal((2, 3, E)))
        run_both(theirs, ours, inputs, {})


def test_encoder_layer_activation_codes_as_torch() -> None:
    torch = _torch()
    for act in ("relu", "gelu", nn.functional.relu, nn.GELU(), nn.functional.tanh):
        ours = nn.TransformerEncoderLayer(E, H, FF, activation=act)
        torch_act = act if isinstance(act, str) else {
            nn.functional.relu: torch.nn.functional.relu,
            nn.functional.tanh: torch.tanh}.get(act, torch.nn.GELU())
        theirs = torch.nn.TransformerEncoderLayer(E, H, FF, activation=torch_act)
        assert ours.activation_relu_or_gelu == theirs.activation_relu_or_gelu


@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_unbatched_layers_match_torch(kind: str) -> None:
    theirs, ours = layer_pair(kind, True, False, "gelu")
    rng = np.random.default_rng(4)
    if kind == "TransformerEncoderLayer":
        pad = np.array([False, False, False, True, True])
        run_both(theirs, ours, [rng.standard_normal((5, E))],
                 {"src_mask": causal(5), "src_key_padding_mask": pad})
    else:
        run_both(theirs, ours, [rng.standard_normal((4, E)), rng.standard_normal((6, E))],
                 {"tgt_mask": causal(4),
                  "memory_key_padding_mask": np.array([False] * 5 + [True])})


@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
def test_eval_mode_with_dropout_matches_torch(kind: str) -> None:
    torch = _torch()
    torch.manual_seed(5)
    theirs = getattr(torch.nn, kind)(E, H, FF, dropout=0.3, dtype=torch.float64).eval()
    ours = getattr(nn, kind)(E, H, FF, dropout=0.3, dtype=np.float64).eval()
    load_torch_state(ours, theirs)
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((4, 2, E))]
    if kind == "TransformerDecoderLayer":
        inputs.append(rng.standard_normal((3, 2, E)))
    run_both(theirs, ours, inputs, {})


def test_no_bias_layers_match_torch() -> None:
    rng = np.random.default_rng(6)
    theirs, ours = layer_pair("TransformerEncoderLayer", False, False, bias=False)
    assert ours.norm1.bias is None and ours.linear1.bias is None
    run_both(theirs, ours, [rng.standard_normal((4, 2, E))], {"src_mask": causal(4)})
    theirs, ours = layer_pair("TransformerDecoderLayer", True, True, bias=False)
    run_both(theirs, ours, [rng.standard_normal((2, 4, E)), rng.standard_normal((2, 3, E))],
             {"tgt_mask": causal(4)})


# --------------------------------------------------------------------------------------------
# stacks and the full model against torch
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("norm_first,batch_first", LAYOUTS)
def test_encoder_stack_matches_torch(norm_first: bool, batch_first: bool) -> None:
    torch = _torch()
    torch.manual_seed(7)
    args = dict(dim_feedforward=FF, dropout=0.0, batch_first=batch_first,
                norm_first=norm_first, activation="gelu")
    theirs = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(E, H, dtype=torch.float64, **args), 3,
        norm=torch.nn.LayerNorm(E, dtype=torch.float64), enable_nested_tensor=False)
    for p in theirs.parameters():  # the clones start equal: make the layers differ
        p.data.normal_(0.0, 0.5)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, dtype=np.float64, **args), 3,
                                 norm=nn.LayerNorm(E, dtype=np.float64))
    load_torch_state(ours, theirs)
    rng = np.random.default_rng(7)
    n, s = 3, 5
    run_both(theirs, ours, [sequence(rng, n, s, batch_first)],
             {"mask": causal(s), "src_key_padding_mask": padding(n, s)})
    # is_causal with the causal mask (torch's hint) gives the same numbers
    theirs.zero_grad()
    ours.zero_grad()
    run_both(theirs, ours, [sequence(rng, n, s, batch_first)],
             {"mask": causal(s), "is_causal": True})


@pytest.mark.parametrize("norm_first,batch_first", LAYOUTS)
def test_decoder_stack_matches_torch(norm_first: bool, batch_first: bool) -> None:
    torch = _torch()
    torch.manual_seed(8)
    args = dict(dim_feedforward=FF, dropout=0.0, batch_first=batch_first,
                norm_first=norm_first)
    theirs = torch.nn.TransformerDecoder(
        torch.nn.TransformerDecoderLayer(E, H, dtype=torch.float64, **args), 2,
        norm=torch.nn.LayerNorm(E, dtype=torch.float64))
    for p in theirs.parameters():
        p.data.normal_(0.0, 0.5)
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, dtype=np.float64, **args), 2,
                                 norm=nn.LayerNorm(E, dtype=np.float64))
    load_torch_state(ours, theirs)
    rng = np.random.default_rng(8)
    n, t, s = 2, 4, 6
    run_both(theirs, ours, [sequence(rng, n, t, batch_first), sequence(rng, n, s, batch_first)],
             {"tgt_mask": causal(t), "tgt_key_padding_mask": padding(n, t),
              "memory_key_padding_mask": padding(n, s)})


@pytest.mark.parametrize("norm_first,batch_first", LAYOUTS)
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_matches_torch(norm_first: bool, batch_first: bool,
                                   activation: str) -> None:
    torch = _torch()
    torch.manual_seed(9)
    args = dict(d_model=E, nhead=H, num_encoder_layers=2, num_decoder_layers=2,
                dim_feedforward=FF, dropout=0.0, activation=activation,
                batch_first=batch_first, norm_first=norm_first)
    theirs = torch.nn.Transformer(dtype=torch.float64, **args)
    ours = nn.Transformer(dtype=np.float64, **args)
    load_torch_state(ours, theirs)
    rng = np.random.default_rng(9)
    n, s, t = 3, 6, 4
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(t, dtype=np.float64).numpy()
    run_both(theirs, ours, [sequence(rng, n, s, batch_first), sequence(rng, n, t, batch_first)],
             {"tgt_mask": tgt_mask, "src_key_padding_mask": padding(n, s),
              "memory_key_padding_mask": padding(n, s), "tgt_key_padding_mask": padding(n, t)})


def test_unbatched_transformer_matches_torch() -> None:
    torch = _torch()
    torch.manual_seed(10)
    args = dict(d_model=E, nhead=H, num_encoder_layers=1, num_decoder_layers=2,
                dim_feedforward=FF, dropout=0.0)
    theirs = torch.nn.Transformer(dtype=torch.float64, **args)
    ours = nn.Transformer(dtype=np.float64, **args)
    load_torch_state(ours, theirs)
    rng = np.random.default_rng(10)
    run_both(theirs, ours, [rng.standard_normal((5, E)), rng.standard_normal((3, E))],
             {"tgt_mask": causal(3), "src_mask": causal(5)})


def test_transformer_attributes_and_state_dict_keys_are_torchs() -> None:
    torch = _torch()
    for kw in ({}, {"batch_first": True, "bias": False, "num_decoder_layers": 0}):
        args = dict(d_model=E, nhead=H, num_encoder_layers=2, dim_feedforward=FF, **kw)
        theirs = torch.nn.Transformer(**args)
        ours = nn.Transformer(**args)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        for k, v in theirs.state_dict().items():
            assert tuple(ours.state_dict()[k].shape) == tuple(v.shape), k
        for name in ("d_model", "nhead", "batch_first"):
            assert getattr(ours, name) == getattr(theirs, name)
        assert ours.encoder.num_layers == theirs.encoder.num_layers
        assert len(ours.decoder.layers) == len(theirs.decoder.layers)
        assert ours.encoder.layers[0].self_attn.batch_first == kw.get("batch_first", False)
    layer = nn.TransformerEncoderLayer(E, H)
    assert layer.linear1.out_features == 2048 and layer.dropout.p == 0.1
    assert layer.norm1.eps == 1e-5 and layer.self_attn.dropout == 0.1


def test_transformer_initialises_matrices_xavier_uniform() -> None:
    model = nn.Transformer(E, H, 1, 1, FF, generator=0)
    for name, p in model.named_parameters():
        if p.ndim > 1:
            bound = math.sqrt(6.0 / sum(p.shape))
            assert np.abs(p.numpy()).max() <= bound, name
    # and the same seed gives the same model
    again = nn.Transformer(E, H, 1, 1, FF, generator=0)
    for (name, p), (_, q) in zip(model.named_parameters(), again.named_parameters()):
        assert np.array_equal(p.numpy(), q.numpy()), name


@pytest.mark.parametrize("sz,dtype", [(1, None), (4, None), (5, np.float64), (0, None)])
def test_generate_square_subsequent_mask_is_torchs(sz: int, dtype: Any) -> None:
    torch = _torch()
    ours = nn.Transformer.generate_square_subsequent_mask(sz, dtype=dtype)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(
        sz, dtype=None if dtype is None else torch.float64)
    assert ours.dtype == np.dtype(str(theirs.dtype).replace("torch.", ""))
    assert np.array_equal(ours.numpy(), theirs.numpy())


# --------------------------------------------------------------------------------------------
# the word language model's subclass of nn.Transformer
# --------------------------------------------------------------------------------------------
def word_lm_classes(nn_mod: Any, lib: Any) -> tuple:
    """PyTorch's word language model's TransformerModel, written against ``nn_mod`` (torch.nn
    or tinygrad_rnn.nn); ``lib`` gives log, tril, ones and log_softmax by name."""

    class TransformerModel(nn_mod.Transformer):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
            super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                             num_encoder_layers=nlayers, dropout=dropout)
            self.model_type = "Transformer"
            self.src_mask = None
            self.input_emb = nn_mod.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn_mod.Linear(ninp, ntoken)

        def _generate_square_subsequent_mask(self, sz):
            return lib["log"](lib["tril"](lib["ones"](sz, sz)))

        def forward(self, src, has_mask=True):
            if has_mask:
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    self.src_mask = self._generate_square_subsequent_mask(len(src))
            else:
                self.src_mask = None
            src = self.input_emb(src) * math.sqrt(self.ninp)
            output = self.encoder(src, mask=self.src_mask)
            output = self.decoder(output)
            return lib["log_softmax"](output, dim=-1)

    return TransformerModel


def test_word_lm_transformer_subclass_matches_torch() -> None:
    torch = _torch()
    torch.manual_seed(11)
    torch_lib = {"log": torch.log, "tril": torch.tril, "ones": torch.ones,
                 "log_softmax": torch.nn.functional.log_softmax}

    def tr_mask_ones(a: int, b: int) -> tr.Tensor:
        return tr.Tensor(np.ones((a, b)))

    def tr_log(t: tr.Tensor) -> tr.Tensor:
        with np.errstate(divide="ignore"):
            return tr.Tensor(np.log(t.numpy()))

    tr_lib = {"log": tr_log, "tril": lambda t: tr.Tensor(np.tril(t.numpy())),
              "ones": tr_mask_ones, "log_softmax": nn.functional.log_softmax}
    ntoken, ninp, nhead, nhid, nlayers = 11, E, H, FF, 2
    theirs = word_lm_classes(torch.nn, torch_lib)(ntoken, ninp, nhead, nhid, nlayers,
                                                  dropout=0.0).double()
    ours = word_lm_classes(nn, tr_lib)(ntoken, ninp, nhead, nhid, nlayers, dropout=0.0)
    ours = ours.double()
    assert isinstance(ours, nn.Transformer) and isinstance(ours.decoder, nn.Linear)
    assert len(ours.encoder.layers) == nlayers
    load_torch_state(ours, theirs)
    ids = np.random.default_rng(11).integers(0, ntoken, size=(6, 3))
    out_t = theirs(torch.tensor(ids))
    out_o = ours(tr.tensor(ids))
    assert_same(out_o.numpy(), out_t.detach().numpy(), "log-probabilities")
    target = np.random.default_rng(12).integers(0, ntoken, size=ids.size)
    loss_t = torch.nn.functional.nll_loss(out_t.view(-1, ntoken), torch.tensor(target))
    loss_o = nn.functional.nll_loss(out_o.view(-1, ntoken), tr.tensor(target))
    loss_t.backward()
    loss_o.backward()
    assert_same(loss_o.item(), loss_t.item(), "loss")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert_same(p.grad.numpy(), theirs_params[name].grad.numpy(), f"grad of {name}")


# --------------------------------------------------------------------------------------------
# our own properties
# --------------------------------------------------------------------------------------------
def test_encoder_layer_gradcheck_directional() -> None:
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation="gelu",
                                       dtype=np.float64, generator=13)
    names = [name for name, _ in layer.named_parameters()]
    params = [tr.Tensor(p.numpy().copy(), requires_grad=True)
              for _, p in layer.named_parameters()]
    rng = np.random.default_rng(13)
    src = tr.Tensor(rng.standard_normal((4, 2, E)), requires_grad=True)
    mask, pad = causal(4), padding(2, 4)

    def fn(x: tr.Tensor, *weights: tr.Tensor) -> tr.Tensor:
        with swapped_parameters(layer, dict(zip(names, weights))):
            return layer(x, src_mask=mask, src_key_padding_mask=pad)

    assert tr.gradcheck(fn, [src] + params, mode="directional", n_directions=8, atol=1e-7,
                        rtol=1e-5)


def test_is_causal_without_mask_applies_the_causal_mask() -> None:
    layer = nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, dtype=np.float64, generator=14)
    rng = np.random.default_rng(14)
    tgt, memory = tr.Tensor(rng.standard_normal((5, 2, E))), tr.Tensor(
        rng.standard_normal((3, 2, E)))
    hinted = layer(tgt, memory, tgt_is_causal=True)
    masked = layer(tgt, memory, tgt_mask=causal(5))
    assert np.array_equal(hinted.numpy(), masked.numpy())
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0,
                                                               dtype=np.float64), 2)
    src = tr.Tensor(rng.standard_normal((5, 2, E)))
    assert np.array_equal(encoder(src, is_causal=True).numpy(),
                          encoder(src, mask=causal(5)).numpy())


def test_float_padding_of_zeros_and_minus_inf_equals_boolean_padding() -> None:
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, dtype=np.float64, generator=15)
    src = tr.Tensor(np.random.default_rng(15).standard_normal((4, 3, E)))
    pad = padding(3, 4)
    as_float = np.where(pad, -np.inf, 0.0)
    assert np.array_equal(layer(src, src_key_padding_mask=pad).numpy(),
                          layer(src, src_key_padding_mask=as_float).numpy())


def test_clones_own_parameters_and_dropout() -> None:
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.5, dtype=np.float64, generator=16)
    encoder = nn.TransformerEncoder(layer, 2)
    first, second = encoder.layers
    assert first is not layer and second is not first
    w0, w1 = first.linear1.weight, second.linear1.weight
    assert np.array_equal(w0.numpy(), w1.numpy())
    w0._data[...] = 0.0
    assert not np.array_equal(w0.numpy(), w1.numpy())
    assert np.array_equal(w1.numpy(), layer.linear1.weight.numpy())
    x = tr.ones(4, 3, FF, dtype=np.float64)
    assert not np.array_equal(first.dropout(x).numpy(), second.dropout(x).numpy())
    # seeded: the same masks every time the stack is rebuilt
    again = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, H, FF, dropout=0.5, dtype=np.float64, generator=16), 2)
    rebuilt = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, H, FF, dropout=0.5, dtype=np.float64, generator=16), 2)
    assert np.array_equal(again.layers[1].dropout2(x).numpy(),
                          rebuilt.layers[1].dropout2(x).numpy())


def test_training_mode_applies_dropout_and_eval_does_not() -> None:
    model = nn.Transformer(E, H, 1, 1, FF, dropout=0.5, dtype=np.float64, generator=17)
    rng = np.random.default_rng(17)
    src, tgt = tr.Tensor(rng.standard_normal((4, 2, E))), tr.Tensor(
        rng.standard_normal((3, 2, E)))
    model.eval()
    a, b = model(src, tgt).numpy(), model(src, tgt).numpy()
    assert np.array_equal(a, b)
    model.train()
    assert not np.array_equal(model(src, tgt).numpy(), a)


def test_float32_layers_compute_in_float32() -> None:
    layer = nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, generator=18)
    src = tr.Tensor(np.random.default_rng(18).standard_normal((4, 2, E)).astype(np.float32),
                    requires_grad=True)
    out = layer(src, src_mask=nn.Transformer.generate_square_subsequent_mask(4))
    out.sum().backward()
    assert out.dtype == np.float32 and src.grad.dtype == np.float32
    assert layer.linear1.weight.grad.dtype == np.float32


def test_docstring_examples_run() -> None:
    from tinygrad_rnn.nn import transformer

    result = doctest.testmod(transformer)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------------------------
# bad arguments and inputs
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerDecoderLayer",
                                  "Transformer"])
def test_d_model_not_divisible_by_nhead_is_refused(kind: str) -> None:
    with pytest.raises(ValueError, match=rf"{kind}: d_model \(10\) must be divisible by "
                                         r"nhead \(3\)"):
        getattr(nn, kind)(10, 3)


@pytest.mark.parametrize("kwargs,error,match", [
    ({"activation": "tanh"}, ValueError, "activation must be 'relu', 'gelu' or a callable"),
    ({"activation": 3}, TypeError, "activation must be 'relu', 'gelu' or a callable"),
    ({"dropout": 1.5}, ValueError, "dropout must be in"),
    ({"dim_feedforward": 0}, ValueError, "dim_feedforward must be positive"),
    ({"layer_norm_eps": 0.0}, ValueError, "layer_norm_eps must be positive"),
    ({"batch_first": "yes"}, TypeError, "batch_first must be True or False"),
    ({"dtype": np.int64}, TypeError, "dtype must be a floating-point dtype"),
])
def test_bad_layer_arguments_are_refused(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=f"TransformerEncoderLayer: {match}"):
        nn.TransformerEncoderLayer(E, H, **kwargs)


def test_bad_stack_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="TransformerEncoder: the layer to stack must be a "
                                        "Module"):
        nn.TransformerEncoder("layer", 2)
    with pytest.raises(ValueError, match="TransformerDecoder: num_layers must be >= 0"):
        nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H), -1)
    with pytest.raises(TypeError, match="TransformerEncoder: norm must be a Module"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H), 1, norm="layernorm")
    with pytest.raises(TypeError, match="Transformer: custom_encoder must be a Module"):
        nn.Transformer(E, H, custom_encoder=lambda x: x)
    with pytest.raises(ValueError, match="Transformer: activation must be 'relu', 'gelu'"):
        nn.Transformer(E, H, activation="swish")
    with pytest.raises(ValueError, match="Transformer: num_decoder_layers must be >= 0"):
        nn.Transformer(E, H, num_decoder_layers=-2)


def _encoder_layer() -> nn.TransformerEncoderLayer:
    return nn.TransformerEncoderLayer(E, H, FF, dtype=np.float64, generator=19)


@pytest.mark.parametrize("mask_kw,error,match", [
    ({"src_mask": np.zeros((4, 5))}, ValueError,
     r"TransformerEncoderLayer: src_mask of shape \(4, 5\) does not match 5 queries and 5 "
     r"keys; expected shape \(5, 5\) or \(4, 5, 5\)"),
    ({"src_mask": np.zeros((3, 5, 5))}, ValueError, r"src_mask of shape \(3, 5, 5\)"),
    ({"src_mask": np.zeros((5, 5), dtype=np.int64)}, TypeError,
     "TransformerEncoderLayer: src_mask must be boolean .* or floating point"),
    ({"src_key_padding_mask": np.zeros((5, 2), bool)}, ValueError,
     r"TransformerEncoderLayer: src_key_padding_mask of shape \(5, 2\) does not match a "
     r"batch of 2 sequences of 5 keys; expected shape \(2, 5\)"),
    ({"src_key_padding_mask": np.zeros((2, 5), np.int32)}, TypeError,
     "TransformerEncoderLayer: src_key_padding_mask must be boolean"),
])
def test_wrong_masks_are_refused_by_name(mask_kw: dict, error: type, match: str) -> None:
    src = tr.Tensor(np.zeros((5, 2, E)))
    with pytest.raises(error, match=match):
        _encoder_layer()(src, **mask_kw)


def test_wrong_masks_are_refused_by_the_stacks_and_the_model() -> None:
    encoder = nn.TransformerEncoder(_encoder_layer(), 2)
    src = tr.Tensor(np.zeros((5, 2, E)))
    with pytest.raises(ValueError, match=r"TransformerEncoder: mask of shape \(4, 4\)"):
        encoder(src, mask=np.zeros((4, 4)))
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF, dtype=np.float64), 1)
    tgt = tr.Tensor(np.zeros((3, 2, E)))
    with pytest.raises(ValueError, match=r"TransformerDecoder: memory_mask of shape \(3, 3\) "
                                         r"does not match 3 queries and 5 keys"):
        decoder(tgt, src, memory_mask=np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"TransformerDecoder: memory_key_padding_mask of "
                                         r"shape \(2, 3\)"):
        decoder(tgt, src, memory_key_padding_mask=np.zeros((2, 3), bool))
    model = nn.Transformer(E, H, 1, 1, FF, dtype=np.float64)
    with pytest.raises(ValueError, match=r"TransformerEncoder: src_key_padding_mask of shape"):
        model(src, tgt, src_key_padding_mask=np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match=r"TransformerDecoder: tgt_mask of shape \(5, 5\)"):
        model(src, tgt, tgt_mask=causal(5))


def test_wrong_inputs_are_refused_by_name() -> None:
    layer = _encoder_layer()
    with pytest.raises(ValueError, match=r"TransformerEncoderLayer: expected src of shape "
                                         r"\(S, N, E\) or \(S, E\) \(unbatched\) with E = "
                                         r"d_model = 8, got shape \(5, 2, 6\)"):
        layer(tr.Tensor(np.zeros((5, 2, 6))))
    with pytest.raises(TypeError, match="TransformerEncoderLayer: src dtype float32 does not "
                                        "match the parameters' dtype float64"):
        layer(tr.Tensor(np.zeros((5, 2, E), np.float32)))
    with pytest.raises(TypeError, match="TransformerEncoderLayer: src must be floating point"):
        layer(tr.Tensor(np.zeros((5, 2, E), np.int64)))
    decoder_layer = nn.TransformerDecoderLayer(E, H, FF, batch_first=True, dtype=np.float64)
    with pytest.raises(ValueError, match=r"TransformerDecoderLayer: tgt of shape \(2, 3, 8\) "
                                         r"and memory of shape \(4, 5, 8\) have different "
                                         r"batch sizes \(batch_first=True\)"):
        decoder_layer(tr.Tensor(np.zeros((2, 3, E))), tr.Tensor(np.zeros((4, 5, E))))
    with pytest.raises(ValueError, match="TransformerDecoderLayer: tgt of shape .* and memory "
                                         "of shape .* must both be batched"):
        decoder_layer(tr.Tensor(np.zeros((2, 3, E))), tr.Tensor(np.zeros((5, E))))
    model = nn.Transformer(E, H, 1, 1, FF, dtype=np.float64)
    with pytest.raises(ValueError, match=r"Transformer: the batch sizes of src \(shape "
                                         r"\(5, 2, 8\)\) and tgt \(shape \(3, 4, 8\)\) must "
                                         r"be equal"):
        model(tr.Tensor(np.zeros((5, 2, E))), tr.Tensor(np.zeros((3, 4, E))))
    with pytest.raises(ValueError, match="Transformer: the feature sizes of src"):
        model(tr.Tensor(np.zeros((5, 2, E))), tr.Tensor(np.zeros((3, 2, 4))))
    with pytest.raises(TypeError, match="TransformerEncoderLayer: is_causal must be True or "
                                        "False"):
        layer(tr.Tensor(np.zeros((5, 2, E))), is_causal="yes")
