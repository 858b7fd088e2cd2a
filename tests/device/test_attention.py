"""Attention on devices (tinygrad_rnn/nn/attention.py): every result equals the CPU's.

Each test builds the same seeded module twice, keeps one on the CPU and moves the other with
``.to(device)``, feeds both the same inputs (host NumPy data copied to the device) and compares
with :func:`assert_same` every output, the attention weights and the gradients of every input
and parameter, in float64 and float32:

* :class:`tr.nn.Attention` for each score, with padding, boolean and float ``attn_mask`` and
  causal masks given as host NumPy arrays and as device tensors, fully masked rows included,
  and the single-query (decoder) form; a mask Tensor on the wrong device raises an error naming
  both devices;
* :class:`tr.nn.MultiheadAttention` with ``key_padding_mask``, ``attn_mask`` (boolean, float,
  per head), ``add_bias_kv``, ``add_zero_attn``, ``need_weights``/``average_attn_weights``,
  ``kdim``/``vdim``, unbatched inputs and dropout (its masks drawn on the host: the same on
  every device);
* :class:`tr.nn.CausalSelfAttention`;
* a float64 ``tr.gradcheck`` of a masked additive Attention on the device.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import nn

from module_helpers import swapped_parameters

from ._devices import DEVICES, assert_on_device, assert_same, host

SCORES = ("dot", "scaled_dot", "bilinear", "additive")
DTYPES = (np.float64, np.float32)
N, TQ, TK, D = 3, 4, 5, 6


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def pair(factory: Callable[[], nn.Module], device: str) -> tuple[nn.Module, nn.Module]:
    """The same seeded module twice: one on the CPU, one moved to ``device``."""
    cpu, dev = factory(), factory().to(device)
    for p in dev.parameters():
        assert_on_device(p, device)
    return cpu, dev


def leaves(arrays: list[np.ndarray], device: str | None) -> list[tr.Tensor]:
    """Leaf tensors (requiring gradients) holding ``arrays``, on ``device`` (None: CPU)."""
    return [tr.tensor(a, requires_grad=True, device=device) for a in arrays]


def weighted_sum(outputs: list[Any], upstream: list[np.ndarray], device: str | None) -> Any:
    """sum_k <outputs[k], upstream[k]>: a scalar whose gradient sends ``upstream[k]`` into
    output k (None outputs are skipped)."""
    total = None
    for out, g in zip(outputs, upstream):
        if out is None:
            continue
        term = (out * tr.tensor(g.astype(out.dtype), device=device)).sum()
        total = term if total is None else total + term
    return total


def upstreams(outputs: list[Any], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [None if o is None else rng.standard_normal(o.shape) for o in outputs]


def assert_grads_same(dev: nn.Module, cpu: nn.Module, device: str) -> None:
    """Every parameter gradient of ``dev`` equals that of ``cpu`` (and lives on device)."""
    dev_params = dict(dev.named_parameters())
    names = [name for name, _ in cpu.named_parameters()]
    assert names == list(dev_params), "the two copies have different parameters"
    for name, p in cpu.named_parameters():
        assert p.grad is not None, f"no gradient reached {name}"
        assert_same(dev_params[name].grad, p.grad, device, f"grad of {name}")


def run_both(cpu: nn.Module, dev: nn.Module, device: str, inputs: list[np.ndarray],
             call: Callable[..., list[Any]], cpu_kwargs: dict, dev_kwargs: dict,
             seed: int = 0) -> None:
    """Run ``call(module, *tensors, **kwargs)`` (a list of output Tensors) on both copies,
    backpropagate the same upstream gradients, and compare outputs and all gradients."""
    xs_cpu, xs_dev = leaves(inputs, None), leaves(inputs, device)
    out_cpu = call(cpu, *xs_cpu, **cpu_kwargs)
    out_dev = call(dev, *xs_dev, **dev_kwargs)
    g = upstreams(out_cpu, seed)
    weighted_sum(out_cpu, g, None).backward()
    weighted_sum(out_dev, g, device).backward()
    for k, (od, oc) in enumerate(zip(out_dev, out_cpu)):
        assert_same(od, oc, device, f"output {k}")
        if oc is not None:
            assert np.all(np.isfinite(oc.numpy())), f"output {k} is not finite"
    for k, (xd, xc) in enumerate(zip(xs_dev, xs_cpu)):
        assert_same(xd.grad, xc.grad, device, f"grad of input {k}")
    assert_grads_same(dev, cpu, device)


def as_mask(mask: np.ndarray | None, form: str, device: str) -> Any:
    """A host mask as given to the module: the NumPy array itself ('host') or a Tensor on the
    device ('device')."""
    if mask is None or form == "host":
        return mask
    return tr.tensor(mask, device=device)


def padding_mask() -> np.ndarray:
    """(N, TK): item 0 unpadded, item 1 padded after 3 keys, item 2 entirely padding (its
    rows are fully masked)."""
    kpm = np.zeros((N, TK), dtype=bool)
    kpm[1, 3:] = True
    kpm[2, :] = True
    return kpm


def blocked_pairs() -> np.ndarray:
    """(TQ, TK) boolean attn_mask (True = not allowed); query 3 may attend to nothing."""
    rng = np.random.default_rng(7)
    am = rng.random((TQ, TK)) < 0.3
    am[:, 0] = False
    am[3, :] = True
    return am


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------
MASK_SETS = {
    "padding+causal": lambda: dict(key_padding_mask=padding_mask(), causal=True),
    "attn_mask+padding": lambda: dict(key_padding_mask=padding_mask(),
                                      attn_mask=blocked_pairs()),
    "float_attn_mask": lambda: dict(attn_mask=np.where(blocked_pairs(), -np.inf,
                                                       np.linspace(-1, 1, TQ * TK)
                                                       .reshape(TQ, TK))),
}


def attention_factory(score: str, dtype: Any) -> Callable[[], nn.Module]:
    hidden = 7 if score == "additive" else None
    return lambda: nn.Attention(score, D, D, value_size=3, hidden_size=hidden, dtype=dtype,
                                generator=11)


def attention_inputs(dtype: Any, single: bool = False) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    q = rng.standard_normal((N, D) if single else (N, TQ, D))
    return [q.astype(dtype), rng.standard_normal((N, TK, D)).astype(dtype),
            rng.standard_normal((N, TK, 3)).astype(dtype)]


def call_attention(m: nn.Module, q: tr.Tensor, k: tr.Tensor, v: tr.Tensor,
                   **kw: Any) -> list[Any]:
    context, weights = m(q, k, v, **kw)
    return [context, weights]


def mask_kwargs(masks: dict, form: str, device: str, dtype: Any) -> dict:
    out = {}
    for key, value in masks.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            value = value.astype(dtype)
        out[key] = value if key == "causal" else as_mask(value, form, device)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["host", "device"])
@pytest.mark.parametrize("masks", list(MASK_SETS))
@pytest.mark.parametrize("score", SCORES)
def test_attention_matches_cpu(score, masks, form, dtype, device):
    cpu, dev = pair(attention_factory(score, dtype), device)
    m = MASK_SETS[masks]()
    run_both(cpu, dev, device, attention_inputs(dtype), call_attention,
             mask_kwargs(m, "host", device, dtype), mask_kwargs(m, form, device, dtype))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["host", "device"])
@pytest.mark.parametrize("score", SCORES)
def test_attention_single_query_matches_cpu(score, form, device):
    """The decoder form: one query (N, Dq) per sequence, a padding mask and a 1-D
    attn_mask; item 2 is all padding (zero context, zero gradient)."""
    cpu, dev = pair(attention_factory(score, np.float64), device)
    kpm = padding_mask()
    am = np.zeros(TK, dtype=bool)
    am[1] = True
    run_both(cpu, dev, device, attention_inputs(np.float64, single=True), call_attention,
             dict(key_padding_mask=kpm, attn_mask=am),
             dict(key_padding_mask=as_mask(kpm, form, device), attn_mask=as_mask(am, form,
                                                                                 device)))


@pytest.mark.parametrize("device", DEVICES)
def test_attention_fully_masked_rows_are_zero_on_device(device):
    _, dev = pair(attention_factory("additive", np.float64), device)
    q, k, v = leaves(attention_inputs(np.float64), device)
    context, weights = dev(q, k, v, key_padding_mask=padding_mask(), attn_mask=blocked_pairs())
    (context.sum() + weights.sum()).backward()
    assert np.array_equal(weights.numpy()[2], np.zeros((TQ, TK)))
    assert np.array_equal(context.numpy()[2], np.zeros((TQ, 3)))
    assert np.array_equal(weights.numpy()[:, 3], np.zeros((N, TK)))     # query 3: all blocked
    assert np.array_equal(host(q.grad)[2], np.zeros((TQ, D)))
    assert np.array_equal(host(k.grad)[2], np.zeros((TK, D)))
    assert np.array_equal(host(v.grad)[1, 3:], np.zeros((2, 3)))       # padded values
    assert_on_device((context, weights, q.grad, k.grad, v.grad), device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["key_padding_mask", "attn_mask"])
def test_mask_tensor_on_wrong_device_names_both(which, device):
    """A mask Tensor on another device than the inputs is an error naming both devices, in
    both directions (a CPU mask for device inputs, a device mask for CPU inputs)."""
    mask = padding_mask() if which == "key_padding_mask" else blocked_pairs()
    cpu, dev = pair(attention_factory("dot", np.float64), device)
    for module, inputs_on, mask_on in ((dev, device, "cpu"), (cpu, None, device)):
        q, k, v = leaves(attention_inputs(np.float64), inputs_on)
        with pytest.raises(RuntimeError) as err:
            module(q, k, v, **{which: tr.tensor(mask, device=mask_on)})
        msg = str(err.value)
        assert which in msg and "cpu" in msg and device in msg, msg
    mha = nn.MultiheadAttention(D, 2, batch_first=True, dtype=np.float64,
                                generator=0).to(device)
    x = tr.tensor(attention_inputs(np.float64)[0], device=device)
    kwargs = ({which: tr.tensor(padding_mask()[:, :TQ])} if which == "key_padding_mask"
              else {which: tr.tensor(np.triu(np.ones((TQ, TQ), bool), 1))})
    with pytest.raises(RuntimeError, match=f"{which} is on cpu but the inputs are on {device}"):
        mha(x, x, x, **kwargs)


def test_keep_mask_is_built_with_the_given_array_module():
    """keep_mask builds its result with the given array module (here the stand-in)."""
    from tinygrad_rnn.testing import cupy_emulator as standin

    keep = nn.attention.keep_mask(N, TQ, TK, padding_mask(), blocked_pairs(), True,
                                  xp=standin)
    assert_on_device(keep, "standin")
    want = nn.attention.keep_mask(N, TQ, TK, padding_mask(), blocked_pairs(), True)
    assert np.array_equal(keep.get(), want)


# --------------------------------------------------------------------------------------------
# MultiheadAttention and CausalSelfAttention
# --------------------------------------------------------------------------------------------
E, HEADS, L, S = 8, 2, 4, 5

MHA_CASES = {
    # name: (constructor keywords, forward keywords builder, batch_first, cross attention)
    "self_kpm_causal": (dict(), lambda: dict(key_padding_mask=padding_mask()[:, :L],
                                             is_causal=True), True, False),
    "cross_bias_kv_zero_attn": (dict(add_bias_kv=True, add_zero_attn=True),
                                lambda: dict(key_padding_mask=padding_mask()), False, True),
    "cross_kdim_vdim_attn_mask": (dict(kdim=3, vdim=5),
                                  lambda: dict(attn_mask=blocked_pairs(),
                                               average_attn_weights=False), True, True),
    "float_mask_per_head": (dict(add_zero_attn=True),
                            lambda: dict(attn_mask=np.where(
                                np.random.default_rng(1).random((N * HEADS, L, S)) < 0.3,
                                -np.inf, 0.5)), False, True),
    "no_weights": (dict(bias=False), lambda: dict(key_padding_mask=padding_mask(),
                                                  need_weights=False), True, True),
}


def mha_inputs(cross: bool, batch_first: bool, kdim: int, vdim: int,
               dtype: Any) -> list[np.ndarray]:
    rng = np.random.default_rng(5)

    def seq(t: int, d: int) -> np.ndarray:
        x = rng.standard_normal((N, t, d) if batch_first else (t, N, d))
        return x.astype(dtype)

    if not cross:
        return [seq(L, E)]
    return [seq(L, E), seq(S, kdim), seq(S, vdim)]


def call_mha(m: nn.Module, *xs: tr.Tensor, **kw: Any) -> list[Any]:
    q, k, v = (xs[0], xs[0], xs[0]) if len(xs) == 1 else xs
    out, weights = m(q, k, v, **kw)
    return [out, weights]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["host", "device"])
@pytest.mark.parametrize("case", list(MHA_CASES))
def test_multihead_matches_cpu(case, form, dtype, device):
    ctor, fwd, batch_first, cross = MHA_CASES[case]
    cpu, dev = pair(lambda: nn.MultiheadAttention(E, HEADS, batch_first=batch_first,
                                                  dtype=dtype, generator=4, **ctor), device)
    kw = fwd()
    kw = {k: (v.astype(dtype) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v)
          for k, v in kw.items()}
    dev_kw = {k: (as_mask(v, form, device) if isinstance(v, np.ndarray) else v)
              for k, v in kw.items()}
    inputs = mha_inputs(cross, batch_first, ctor.get("kdim", E), ctor.get("vdim", E), dtype)
    run_both(cpu, dev, device, inputs, call_mha, kw, dev_kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("form", ["host", "device"])
def test_multihead_unbatched_matches_cpu(form, device):
    cpu, dev = pair(lambda: nn.MultiheadAttention(E, HEADS, add_bias_kv=True,
                                                  dtype=np.float64, generator=2), device)
    rng = np.random.default_rng(6)
    inputs = [rng.standard_normal((L, E)), rng.standard_normal((S, E)),
              rng.standard_normal((S, E))]
    kpm = np.array([False, False, True, False, True])
    run_both(cpu, dev, device, inputs, call_mha, dict(key_padding_mask=kpm),
             dict(key_padding_mask=as_mask(kpm, form, device)))


@pytest.mark.parametrize("device", DEVICES)
def test_multihead_dropout_same_masks_on_every_device(device):
    """Dropout masks are drawn on the host from the layer's seeded generator, so a training
    step drops the same weights on the CPU and on the device (two calls: the generator
    advances identically)."""
    cpu, dev = pair(lambda: nn.MultiheadAttention(E, HEADS, dropout=0.4, batch_first=True,
                                                  dtype=np.float64, generator=9), device)
    inputs = mha_inputs(True, True, E, E, np.float64)
    for seed in (0, 1):
        run_both(cpu, dev, device, inputs, call_mha, dict(key_padding_mask=padding_mask()),
                 dict(key_padding_mask=padding_mask()), seed=seed)
        cpu.zero_grad()
        dev.zero_grad()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["host", "device"])
def test_causal_self_attention_matches_cpu(form, dtype, device):
    cpu, dev = pair(lambda: nn.CausalSelfAttention(E, HEADS, dtype=dtype, generator=8), device)
    kpm = padding_mask()[:, :L]
    x = np.random.default_rng(2).standard_normal((N, L, E)).astype(dtype)

    def call(m: nn.Module, x: tr.Tensor, **kw: Any) -> list[Any]:
        out, weights = m(x, need_weights=True, average_attn_weights=False, **kw)
        return [out, weights]

    run_both(cpu, dev, device, [x], call, dict(key_padding_mask=kpm),
             dict(key_padding_mask=as_mask(kpm, form, device)))


# --------------------------------------------------------------------------------------------
# gradcheck on the device
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_additive_attention_gradcheck_on_device(device):
    """float64 central differences on the device, w.r.t. query, keys, values and every
    parameter, with a padding mask, a causal mask and a fully masked row."""
    att = nn.Attention("additive", 3, 3, hidden_size=4, dtype=np.float64,
                       generator=1).to(device)
    rng = np.random.default_rng(0)
    q, k, v = (tr.tensor(rng.standard_normal(s), requires_grad=True, device=device)
               for s in ((2, 3, 3), (2, 4, 3), (2, 4, 2)))
    kpm = np.array([[False, False, True, True], [True, True, True, True]])
    names = [name for name, _ in att.named_parameters()]
    params = [p.detach().requires_grad_(True) for _, p in att.named_parameters()]

    def fn(q, k, v, *ps):
        with swapped_parameters(att, dict(zip(names, ps))):
            context, weights = att(q, k, v, key_padding_mask=kpm, causal=True)
        assert_on_device((context, weights), device)
        return context, weights

    assert tr.gradcheck(fn, [q, k, v, *params], atol=1e-7, rtol=1e-5)
