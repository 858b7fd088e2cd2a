"""tr.nn.functional and the torch-named modules against torch (skipped cleanly without it).

For every function and module added for programs that only rename their imports:

* values, dtype, shape and the gradient of every differentiable input equal torch's in
  float64 (1e-12 relative), on hypothesis-drawn inputs kept off the kinks;
* every torch keyword name of a public function is accepted (compared with
  ``inspect.signature`` of torch's function, or torch's documented signature);
* modules built from torch's state dict give torch's numbers, and their reprs are torch's;
* Module hooks, containers and conversions behave as torch's;
* unsupported options and bad arguments are clear errors naming the function or class and
  the argument.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tinygrad_rnn as tr
import tinygrad_rnn.nn as nn
import tinygrad_rnn.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

TOL = 1e-12  # |a - b| <= TOL * max(1, |b|) in float64


def close(got: Any, want: Any, tol: float = TOL) -> None:
    """``got`` (a Tensor or array) equals torch's ``want`` in shape and to ``tol``."""
    got = np.asarray(got.numpy() if isinstance(got, tr.Tensor) else got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def grad_of(t: tr.Tensor) -> np.ndarray:
    return np.asarray(t.grad.numpy() if isinstance(t.grad, tr.Tensor) else t.grad)


def pair(a: np.ndarray) -> tuple:
    """(our leaf, torch's leaf) holding ``a``, both requiring a gradient."""
    return tr.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def check_same(ours: Callable, theirs: Callable, *arrays: np.ndarray, tol: float = TOL) -> None:
    """Forward value, dtype, shape and the gradient of every input (for a random upstream
    gradient) of ``ours`` equal those of ``theirs``."""
    leaves = [pair(a) for a in arrays]
    y = ours(*[p[0] for p in leaves])
    z = theirs(*[p[1] for p in leaves])
    close(y, z, tol)
    assert y.dtype == np.dtype(str(z.dtype).removeprefix("torch."))
    g = np.random.default_rng(0).normal(size=z.shape)
    y.backward(tr.tensor(g)) if y.ndim else y.backward()
    z.backward(torch.tensor(g)) if z.dim() else z.backward()
    for mine, theirs_leaf in leaves:
        close(grad_of(mine), theirs_leaf.grad, tol)


def floats(shape: Any, lo: float = -4.0, hi: float = 4.0, away: float = 0.0) -> Any:
    """float64 arrays with entries in [lo, hi] at least ``away`` from 0 (kinks)."""
    elements = st.floats(lo, hi, allow_nan=False).filter(lambda v: abs(v) >= away)
    return hnp.arrays(np.float64, shape, elements=elements)


SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


# ------------------------------------------------------------------------- activations
ACTIVATIONS = {
    "relu": (F.relu, TF.relu, 0.05),
    "tanh": (F.tanh, torch.tanh, 0.0),
    "sigmoid": (F.sigmoid, torch.sigmoid, 0.0),
    "gelu": (F.gelu, TF.gelu, 0.0),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: TF.gelu(x, approximate="tanh"), 0.0),
    "leaky_relu": (lambda x: F.leaky_relu(x, negative_slope=0.2),
                   lambda x: TF.leaky_relu(x, negative_slope=0.2), 0.05),
    "softplus": (F.softplus, TF.softplus, 0.0),
    "softplus_beta": (lambda x: F.softplus(x, beta=2.0, threshold=3.0),
                      lambda x: TF.softplus(x, beta=2.0, threshold=3.0), 0.0),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid, 0.0),
    "elu": (lambda x: F.elu(x, alpha=0.7), lambda x: TF.elu(x, alpha=0.7), 0.05),
    "silu": (F.silu, TF.silu, 0.0),
    "softmax": (lambda x: F.softmax(x, dim=-1), lambda x: TF.softmax(x, dim=-1), 0.0),
    "log_softmax": (lambda x: F.log_softmax(x, dim=0), lambda x: TF.log_softmax(x, dim=0), 0.0),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@given(data=st.data())
def test_activation_matches_torch(name: str, data: Any) -> None:
    ours, theirs, away = ACTIVATIONS[name]
    x = data.draw(SHAPES.flatmap(lambda s: floats(s, away=away)))
    check_same(ours, theirs, x)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_at_zero_and_far_out(name: str) -> None:
    """The exact points where compositions could go wrong: 0 (softplus/logsigmoid's split
    maximum, leaky_relu's slope), the softplus threshold and saturated inputs."""
    ours, theirs, away = ACTIVATIONS[name]
    x = np.array([-40.0, -20.5, -1.5, 1.5, 3.0, 19.9, 20.0, 20.1, 45.0])
    if not away:
        x = np.append(x, 0.0)
    check_same(ours, theirs, x)


def test_softmax_dtype_argument_converts_first() -> None:
    x = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    y = F.softmax(tr.tensor(x), dim=1, dtype=np.float64)
    z = TF.softmax(torch.tensor(x), dim=1, dtype=torch.float64)
    assert y.dtype == np.float64
    close(y, z)


# ------------------------------------------------------------------------- losses
@given(x=SHAPES.flatmap(lambda s: st.tuples(floats(s, 0.02, 0.98), floats(s, 0.0, 1.0))),
       reduction=st.sampled_from(["mean", "sum", "none"]), weighted=st.booleans())
def test_binary_cross_entropy_matches_torch(x: tuple, reduction: str, weighted: bool) -> None:
    p, t = x
    w = np.linspace(0.5, 2.0, p.shape[-1]) if weighted else None
    check_same(lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=reduction),
               lambda a, b: TF.binary_cross_entropy(
                   a, b, weight=None if w is None else torch.tensor(w), reduction=reduction),
               p, t)


def test_binary_cross_entropy_floors_match_torch() -> None:
    """log clamped at -100 and x (1 - x) floored at 1e-12: finite loss and gradient at 0
    and 1, the target's gradient infinite there, as torch's."""
    p = np.array([0.0, 1.0, 1e-50, 0.3, 1.0 - 1e-16])
    t = np.array([0.2, 0.7, 0.5, 0.4, 0.0])
    a, b = pair(p)
    c, d = pair(t)
    y = F.binary_cross_entropy(a, c, reduction="none")
    z = TF.binary_cross_entropy(b, d, reduction="none")
    close(y, z)
    y.sum().backward()
    z.sum().backward()
    close(grad_of(a), b.grad)
    infinite = ~np.isfinite(d.grad.numpy())
    np.testing.assert_array_equal(grad_of(c)[infinite], d.grad.numpy()[infinite])  # +-inf
    close(grad_of(c)[~infinite], d.grad.numpy()[~infinite])


def test_binary_cross_entropy_refuses_what_torch_refuses() -> None:
    with pytest.raises(ValueError, match="binary_cross_entropy.*input.*between 0 and 1"):
        F.binary_cross_entropy(tr.tensor([1.5]), tr.tensor([1.0]))
    with pytest.raises(ValueError, match="binary_cross_entropy.*target.*between 0 and 1"):
        F.binary_cross_entropy(tr.tensor([0.5]), tr.tensor([-0.5]))
    with pytest.raises(ValueError, match="binary_cross_entropy.*same shape"):
        F.binary_cross_entropy(tr.tensor([0.5, 0.5]), tr.tensor([1.0]))
    with pytest.raises(ValueError, match="binary_cross_entropy.*reduction"):
        F.binary_cross_entropy(tr.tensor([0.5]), tr.tensor([1.0]), reduction="avg")


def logits_and_ids(seed: int = 0, n: int = 5, c: int = 4) -> tuple:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, c, size=n)
    ids[1] = -100
    return rng.normal(size=(n, c)), ids


LEGACY = [(None, None, "mean"), (None, None, "sum"), (None, None, "none"), (False, None, "x"),
          (True, False, "x"), (None, False, "x"), (True, True, "none")]


@pytest.mark.parametrize("size_average,reduce,reduction", LEGACY)
def test_class_losses_and_legacy_flags_match_torch(size_average: Any, reduce: Any,
                                                   reduction: str) -> None:
    """cross_entropy/nll_loss with weights and ignore_index; the deprecated size_average
    and reduce flags override reduction exactly as torch's."""
    x, ids = logits_and_ids()
    w = np.array([1.0, 2.0, 0.5, 1.5])
    kw = dict(size_average=size_average, reduce=reduce, reduction=reduction)
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_same(lambda a: F.cross_entropy(a, ids, weight=w, label_smoothing=0.1, **kw),
                       lambda a: TF.cross_entropy(a, torch.tensor(ids), weight=torch.tensor(w),
                                                  label_smoothing=0.1, **kw), x)
            check_same(lambda a: F.nll_loss(F.log_softmax(a, dim=1), ids, weight=w, **kw),
                       lambda a: TF.nll_loss(TF.log_softmax(a, dim=1), torch.tensor(ids),
                                             weight=torch.tensor(w), **kw), x)
            t = np.random.default_rng(3).normal(size=x.shape)
            check_same(lambda a: F.mse_loss(a, t, **kw),
                       lambda a: TF.mse_loss(a, torch.tensor(t), **kw), x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_logit_losses_match_torch(reduction: str) -> None:
    rng = np.random.default_rng(4)
    x, t = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    w = rng.uniform(0.5, 2.0, size=(3, 4))
    check_same(lambda a, b: F.l1_loss(a, b, reduction=reduction),
               lambda a, b: TF.l1_loss(a, b, reduction=reduction), x, t)
    check_same(lambda a, b: F.mse_loss(a, b, reduction=reduction, weight=w),
               lambda a, b: TF.mse_loss(a, b, reduction=reduction, weight=torch.tensor(w)),
               x, t)
    probs = rng.uniform(0, 1, size=(3, 4))
    check_same(lambda a: F.binary_cross_entropy_with_logits(
                   a, probs, weight=w, pos_weight=w[::-1].copy(), reduction=reduction),
               lambda a: TF.binary_cross_entropy_with_logits(
                   a, torch.tensor(probs), weight=torch.tensor(w),
                   pos_weight=torch.tensor(w[::-1].copy()), reduction=reduction), x)


LOSS_MODULES = {
    "CrossEntropyLoss": (dict(weight=np.array([1.0, 2.0, 0.5, 1.5]), ignore_index=2,
                              label_smoothing=0.2), "ids"),
    "NLLLoss": (dict(weight=np.array([1.0, 2.0, 0.5, 1.5]), reduction="sum"), "logp"),
    "MSELoss": (dict(reduction="none"), "floats"),
    "L1Loss": (dict(), "floats"),
    "BCELoss": (dict(weight=np.array([1.0, 2.0, 0.5, 1.5])), "probs"),
    "BCEWithLogitsLoss": (dict(pos_weight=np.array([1.0, 2.0, 0.5, 1.5])), "targets01"),
}


@pytest.mark.parametrize("name", sorted(LOSS_MODULES))
def test_loss_modules_match_torch(name: str) -> None:
    """forward(input, target), buffers in state_dict under torch's keys, repr."""
    kwargs, kind = LOSS_MODULES[name]
    ours = getattr(nn, name)(**kwargs)
    theirs = getattr(torch.nn, name)(**{k: torch.tensor(v) if isinstance(v, np.ndarray)
                                        else v for k, v in kwargs.items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 4))
    target = {"ids": rng.integers(0, 4, size=6), "floats": rng.normal(size=(6, 4)),
              "probs": rng.uniform(size=(6, 4)), "targets01": rng.uniform(size=(6, 4)),
              "logp": rng.integers(0, 4, size=6)}[kind]
    inputs = {"probs": lambda a: F.sigmoid(a), "logp": lambda a: F.log_softmax(a, dim=1)}
    their_inputs = {"probs": torch.sigmoid, "logp": lambda a: TF.log_softmax(a, dim=1)}
    prep = inputs.get(kind, lambda a: a)
    their_prep = their_inputs.get(kind, lambda a: a)
    check_same(lambda a: ours(prep(a), target),
               lambda a: theirs(their_prep(a), torch.tensor(target)), x)
    if name in ("MSELoss", "L1Loss"):
        assert repr(ours).split("(")[0] == repr(theirs).split("(")[0]


def test_loss_modules_check_their_options() -> None:
    with pytest.raises(ValueError, match="CrossEntropyLoss.*reduction"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(TypeError, match="NLLLoss.*ignore_index"):
        nn.NLLLoss(ignore_index=1.5)
    with pytest.raises(ValueError, match="CrossEntropyLoss.*label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=2.0)
    with pytest.raises(TypeError, match="MSELoss.*reduce"):
        nn.MSELoss(reduce="no")
    with pytest.raises(TypeError, match="BCELoss.*weight"):
        nn.BCELoss(weight="heavy")


# ------------------------------------------------------------------------- pad, one_hot, ...
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("sizes", [(1, 2), (0, 1, 2, 0), (2, 1, 1, 1)])
def test_pad_matches_torch(mode: str, sizes: tuple) -> None:
    x = np.random.default_rng(6).normal(size=(2, 3, 4))
    value = 0.5 if mode == "constant" else None
    check_same(lambda a: F.pad(a, sizes, mode=mode, value=value),
               lambda a: TF.pad(a, sizes, mode=mode, value=value), x)


def test_pad_crops_with_negative_sizes_and_checks_arguments() -> None:
    x = np.random.default_rng(7).normal(size=(3, 5))
    check_same(lambda a: F.pad(a, (-1, 2, 1, -2)), lambda a: TF.pad(a, (-1, 2, 1, -2)), x)
    with pytest.raises(ValueError, match="pad: pad must hold an even number"):
        F.pad(tr.tensor(x), (1, 2, 3))
    with pytest.raises(ValueError, match="pad: mode"):
        F.pad(tr.tensor(x), (1, 1), mode="mirror")
    with pytest.raises(ValueError, match="pad: reflect padding"):
        F.pad(tr.tensor(x), (5, 0), mode="reflect")


def test_one_hot_and_normalize_match_torch() -> None:
    ids = np.array([[0, 3], [2, 2]])
    got = F.one_hot(tr.tensor(ids))
    want = TF.one_hot(torch.tensor(ids))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(F.one_hot(ids, num_classes=6).numpy(),
                                  TF.one_hot(torch.tensor(ids), num_classes=6).numpy())
    with pytest.raises(IndexError, match="one_hot"):
        F.one_hot(np.array([0, 5]), num_classes=3)
    x = np.random.default_rng(8).normal(size=(3, 4))
    x[1] = 0.0  # an all-zero row: finite gradient (0 through the norm), as torch
    for p, dim in ((2.0, 1), (1.0, 0), (3.0, -1)):
        check_same(lambda a: F.normalize(a, p=p, dim=dim),
                   lambda a: TF.normalize(a, p=p, dim=dim), x)


def test_dropout_and_embedding_forms() -> None:
    x = tr.tensor(np.ones((4, 5)))
    assert F.dropout(x, p=0.5, training=False) is x
    tr.manual_seed(0)
    y = F.dropout(x, 0.5, True)
    assert set(np.unique(y.numpy())) <= {0.0, 2.0}
    w = tr.tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    close(F.embedding(tr.tensor(np.array([1, 3])), w, padding_idx=1),
          TF.embedding(torch.tensor([1, 3]), torch.tensor(np.arange(12.0).reshape(4, 3))))
    for option in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}, {"sparse": True}):
        name = next(iter(option))
        with pytest.raises(NotImplementedError, match=f"embedding: {name}"):
            F.embedding(np.array([1]), w, **option)


def test_inplace_writes_into_the_input_and_keeps_the_graph() -> None:
    a, b = pair(np.array([[-1.0, 2.0], [0.5, -3.0]]))
    h, k = a * 1.0, b * 1.0
    out = F.relu(h, inplace=True)
    their = TF.relu(k, inplace=True)
    assert out is h
    close(h, their)
    (out * out).sum().backward()
    (their * their).sum().backward()
    close(grad_of(a), b.grad)
    with pytest.raises(RuntimeError, match="relu.*inplace"):
        F.relu(tr.tensor([1.0], requires_grad=True), inplace=True)
    m = tr.tensor(np.array([-1.0, 2.0]))
    assert nn.ReLU(inplace=True)(m) is m and m.numpy().tolist() == [0.0, 2.0]


def test_softmax_without_dim_is_refused_with_the_reason() -> None:
    with pytest.raises(TypeError, match="softmax: dim is required.*deliberate difference"):
        F.softmax(tr.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="log_softmax: dim is required"):
        nn.LogSoftmax()(tr.tensor([1.0, 2.0]))


# ------------------------------------------------------------------------- keyword names
#: torch's documented signatures of the builtins that inspect cannot read
BUILTIN_SIGNATURES = {
    "tanh": ["input"], "sigmoid": ["input"], "linear": ["input", "weight", "bias"],
    "one_hot": ["tensor", "num_classes"], "gelu": ["input", "approximate"],
    "softplus": ["input", "beta", "threshold"], "logsigmoid": ["input"], "relu_": ["input"],
    "conv1d": ["input", "weight", "bias", "stride", "padding", "dilation", "groups"],
}


@pytest.mark.parametrize("name", F.__all__)
def test_every_function_takes_torchs_keyword_names(name: str) -> None:
    try:
        theirs = list(inspect.signature(getattr(TF, name)).parameters)
    except (TypeError, ValueError):
        theirs = BUILTIN_SIGNATURES[name]
    ours = list(inspect.signature(getattr(F, name)).parameters)
    assert ours[:len(theirs)] == theirs, (ours, theirs)


MODULE_SIGNATURES = ["Linear", "Embedding", "Dropout", "ReLU", "Softmax", "LogSoftmax", "GELU",
                     "LeakyReLU", "Softplus", "ELU", "SiLU", "Flatten", "Unflatten", "LSTM",
                     "RNNCell", "GRUCell", "LSTMCell", "CrossEntropyLoss", "NLLLoss",
                     "MSELoss", "L1Loss", "BCELoss", "BCEWithLogitsLoss", "Conv1d"]


@pytest.mark.parametrize("name", MODULE_SIGNATURES)
def test_module_constructors_take_torchs_positional_arguments(name: str) -> None:
    theirs = [p for p in inspect.signature(getattr(torch.nn, name).__init__).parameters
              if p not in ("self", "args", "kwargs")]
    ours = list(inspect.signature(getattr(nn, name).__init__).parameters)[1:]
    assert ours[:len(theirs)] == theirs, (ours, theirs)


def test_recurrent_layers_take_torchs_keywords() -> None:
    for cls in (nn.RNN, nn.GRU, nn.LSTM):
        cls(3, 4, num_layers=2, bias=True, batch_first=True, dropout=0.1, bidirectional=True,
            device="cpu", dtype=np.float64)
    nn.RNN(3, 4, nonlinearity="relu")
    with pytest.raises(NotImplementedError, match="LSTM: proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(NotImplementedError, match="Embedding: max_norm"):
        nn.Embedding(4, 2, max_norm=1.0)


# ------------------------------------------------------------------------- modules
@pytest.mark.parametrize("build", [
    lambda m: m.ReLU(), lambda m: m.ReLU(inplace=True), lambda m: m.Tanh(),
    lambda m: m.Sigmoid(), lambda m: m.Identity(), lambda m: m.Softmax(dim=1),
    lambda m: m.LogSoftmax(dim=-1), lambda m: m.GELU(), lambda m: m.GELU("tanh"),
    lambda m: m.LeakyReLU(0.1), lambda m: m.Softplus(), lambda m: m.ELU(), lambda m: m.SiLU(),
    lambda m: m.LogSigmoid(), lambda m: m.Flatten(), lambda m: m.Flatten(0, 1),
    lambda m: m.Unflatten(1, (2, 3)), lambda m: m.Dropout(0.3),
    lambda m: m.Linear(6, 2, bias=False), lambda m: m.Embedding(10, 3, padding_idx=0),
    lambda m: m.LSTM(6, 4, num_layers=2), lambda m: m.GRU(6, 4, batch_first=True),
    lambda m: m.LSTMCell(6, 5), lambda m: m.CrossEntropyLoss(), lambda m: m.MSELoss(),
])
def test_module_values_and_repr_match_torch(build: Callable) -> None:
    ours, theirs = build(nn), build(torch.nn).double()
    ours.double()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    # ours adds a parameter count after the first line and names a non-default dtype
    head = repr(ours).split("  #")[0].replace(", dtype=float64", "")
    assert head == repr(theirs).splitlines()[0]
    if isinstance(ours, (nn.CrossEntropyLoss, nn.MSELoss, nn.LSTM, nn.GRU, nn.LSTMCell,
                         nn.Embedding, nn.Dropout)):
        return
    x = np.random.default_rng(9).normal(size=(2, 6, 1))
    if isinstance(ours, nn.Linear):
        x = x[..., 0]
    check_same(lambda a: ours(a * 1.0), lambda a: theirs(a * 1.0), x)


def test_torch_models_load_and_match() -> None:
    """A word-LM-shaped model (Embedding, Dropout, LSTM, Linear, LogSoftmax, NLLLoss) from
    torch's state dict gives torch's loss and gradients; then three SGD steps by hand
    stay equal."""
    class Model:
        def __init__(self, m: Any) -> None:
            self.m = m

        def build(self) -> Any:
            m = self.m

            class LM(m.Module):
                def __init__(self) -> None:
                    super().__init__()
                    self.encoder = m.Embedding(11, 5)
                    self.drop = m.Dropout(0.5)
                    self.rnn = m.LSTM(5, 7, 2, dropout=0.5)
                    self.decoder = m.Linear(7, 11)
                    self.out = m.LogSoftmax(dim=1)

                def forward(self, ids: Any) -> Any:
                    emb = self.drop(self.encoder(ids))
                    output, _ = self.rnn(emb)
                    return self.out(self.decoder(self.drop(output)).reshape(-1, 11))
            return LM()

    theirs = Model(torch.nn).build().double().eval()
    ours = Model(nn).build().double().eval()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert sum(p.numel() for p in ours.parameters()) == sum(
        p.numel() for p in theirs.parameters())
    rng = np.random.default_rng(10)
    ids = rng.integers(0, 11, size=(4, 3))
    target = rng.integers(0, 11, size=12)
    loss_ours, loss_theirs = nn.NLLLoss(), torch.nn.NLLLoss()
    for _ in range(3):
        ours.zero_grad()
        theirs.zero_grad()
        a = loss_ours(ours(tr.tensor(ids)), target)
        b = loss_theirs(theirs(torch.tensor(ids)), torch.tensor(target))
        close(a, b)
        a.backward()
        b.backward()
        with torch.no_grad():
            for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
                close(grad_of(p), q.grad, 1e-10)
                p.data = p.data - 0.5 * grad_of(p)
                q -= 0.5 * q.grad


def test_hooks_run_in_order_and_are_removable() -> None:
    lin = nn.Linear(3, 2, dtype=np.float64)
    calls: list = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre") or (args[0] * 2.0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append("post") or out * 0.0)
    h3 = lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    x = tr.tensor(np.ones((1, 3)))
    assert float(lin(x).sum()) == 0.0
    assert calls == ["pre", "first", "post"]
    for h in (h1, h2, h3):
        h.remove()
    h1.remove()  # a second remove does nothing
    close(lin(x), lin.forward(x))
    with lin.register_forward_hook(lambda m, a, k, out: out + 1.0, with_kwargs=True):
        close(lin(x), lin.forward(x).numpy() + 1.0)
    close(lin(x), lin.forward(x))
    with pytest.raises(TypeError, match="register_forward_hook: hook must be callable"):
        lin.register_forward_hook("print")
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        lin.register_full_backward_hook(lambda *a: None)


def test_module_tree_api_as_torch() -> None:
    def build(m: Any) -> Any:
        seq = m.Sequential(m.Linear(2, 3), m.ReLU(), m.Flatten())
        d = m.ModuleDict({"enc": seq, "head": m.Linear(3, 1)})
        d.register_buffer("steps", torch.zeros(1) if m is torch.nn else tr.zeros(1))
        d.register_buffer("scratch", torch.zeros(2) if m is torch.nn else tr.zeros(2),
                          persistent=False)
        return d
    ours, theirs = build(nn), build(torch.nn)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_parameters(prefix="m")] == [
        n for n, _ in theirs.named_parameters(prefix="m")]
    assert len(list(ours.parameters(recurse=False))) == 0
    assert list(ours.keys()) == list(theirs.keys()) and "enc" in ours
    assert ours.eval() is ours and not ours["enc"][0].training
    assert ours.train() is ours and ours["enc"][1].training
    assert ours.requires_grad_(False) is ours
    assert not any(p.requires_grad for p in ours.parameters())
    visited: list = []
    ours.apply(lambda mod: visited.append(type(mod).__name__))
    assert visited[-1] == "ModuleDict" and visited[0] == "Linear"
    assert ours.to(tr.zeros(1, dtype=np.float64)).get_parameter("head.weight").dtype == np.float64
    assert ours.float().get_buffer("steps").dtype == np.float32
    assert ours.get_submodule("enc.0") is ours["enc"][0]


def test_onnx_export_is_a_clear_error() -> None:
    with pytest.raises(NotImplementedError, match="tinygrad_rnn does not provide ONNX export"):
        tr.onnx.export(nn.Linear(2, 2), tr.zeros(1, 2), "model.onnx")
    assert tr.onnx.is_in_onnx_export() is False
