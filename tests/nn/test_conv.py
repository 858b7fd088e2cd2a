"""nn.Conv1d, nn.CausalConv1d and nn.functional.conv1d: float64 gradient checks (hypothesis,
central differences), the hand-written VJP against the explicit Jacobian of the unfolded
GEMM, parity with torch.nn.Conv1d (values and every gradient, same weights), causality, and
the errors. The op's registry entries (conv1d) add the contract and forward suites.
Derivation: docs/sequence_models.md, (CV1)-(CV7).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinygrad_rnn as tr
import tinygrad_rnn.nn as nn
import tinygrad_rnn.nn.functional as F
from tinygrad_rnn.ops.conv import conv1d_output_length


@st.composite
def conv_problems(draw: Any) -> dict:
    """Shapes, stride, dilation and padding (ints, 'same', 'valid') with at least one output
    step, float64 input, weight and (maybe) bias."""
    n = draw(st.integers(1, 3))
    c_in, c_out = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k = draw(st.integers(1, 4))
    stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    padding = draw(st.one_of(st.integers(0, 3), st.just("valid"),
                             st.just("same") if stride == 1 else st.just(0)))
    left = {"valid": 0, "same": dilation * (k - 1) // 2}.get(padding, padding)
    right = {"valid": 0, "same": dilation * (k - 1) - left}.get(padding, padding)
    min_len = max(1, dilation * (k - 1) + 1 - left - right)
    length = draw(st.integers(min_len, min_len + 6))
    assert conv1d_output_length(length, k, stride, left, right, dilation) >= 1
    seed = draw(st.integers(0, 2 ** 31 - 1))
    rng = np.random.default_rng(seed)
    return dict(x=rng.normal(size=(n, c_in, length)), w=rng.normal(size=(c_out, c_in, k)),
                b=rng.normal(size=c_out) if draw(st.booleans()) else None, stride=stride,
                padding=padding, dilation=dilation)


def _leaf(a: np.ndarray) -> tr.Tensor:
    return tr.tensor(a, requires_grad=True)


# ----------------------------------------------------------------------------- gradients
@given(p=conv_problems())
@settings(max_examples=40)
def test_conv1d_gradcheck_float64(p: dict) -> None:
    """Every entry of dL/dx, dL/dW and dL/db against central differences (CV4)-(CV7)."""
    inputs = [_leaf(p["x"]), _leaf(p["w"])] + ([] if p["b"] is None else [_leaf(p["b"])])

    def fn(x: tr.Tensor, w: tr.Tensor, *b: tr.Tensor) -> tr.Tensor:
        return F.conv1d(x, w, b[0] if b else None, stride=p["stride"], padding=p["padding"],
                        dilation=p["dilation"])

    assert tr.gradcheck(fn, inputs, atol=1e-8, rtol=1e-6)


@given(p=conv_problems())
@settings(max_examples=25)
def test_conv1d_vjp_equals_the_explicit_jacobian(p: dict) -> None:
    """backward(G) == J^T G with J the matrix of the linear map x -> y built column by column
    from (CV1) (y is linear in x, so J e_j is y at the unit input e_j, without the bias)."""
    x, w = p["x"], p["w"]
    kw = dict(stride=p["stride"], padding=p["padding"], dilation=p["dilation"])
    y = F.conv1d(tr.tensor(x), tr.tensor(w), **kw).numpy()
    columns = []
    for j in range(x.size):
        e = np.zeros(x.size)
        e[j] = 1.0
        columns.append(F.conv1d(tr.tensor(e.reshape(x.shape)), tr.tensor(w), **kw)
                       .numpy().ravel())
    jac = np.stack(columns, axis=1)                                 # (y.size, x.size)
    np.testing.assert_allclose(jac @ x.ravel(), y.ravel(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(0).normal(size=y.shape)
    xt = _leaf(x)
    F.conv1d(xt, tr.tensor(w), **kw).backward(tr.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy().ravel(), jac.T @ g.ravel(), rtol=1e-12,
                               atol=1e-12)


def test_zero_upstream_gives_zero_gradients_and_inputs_are_not_mutated() -> None:
    rng = np.random.default_rng(1)
    x, w, b = rng.normal(size=(2, 3, 9)), rng.normal(size=(4, 3, 3)), rng.normal(size=4)
    copies = [a.copy() for a in (x, w, b)]
    leaves = [_leaf(a) for a in (x, w, b)]
    y = F.conv1d(*leaves, stride=2, padding=1, dilation=2)
    y.backward(tr.zeros(*y.shape, dtype=np.float64))
    for leaf, a, copy in zip(leaves, (x, w, b), copies):
        assert leaf.grad.shape == a.shape and leaf.grad.dtype == np.float64
        assert not leaf.grad.numpy().any()
        np.testing.assert_array_equal(a, copy)


def test_float32_follows_float64() -> None:
    rng = np.random.default_rng(2)
    conv64 = nn.Conv1d(3, 5, 4, padding="same", dilation=2, dtype=np.float64, generator=0)
    conv32 = nn.Conv1d(3, 5, 4, padding="same", dilation=2, generator=0)
    x = rng.normal(size=(2, 3, 12))
    y64, y32 = conv64(tr.tensor(x)), conv32(tr.tensor(x.astype(np.float32)))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32.numpy(), y64.numpy(), rtol=1e-5, atol=1e-5)
    y32.sum().backward()
    y64.sum().backward()
    assert conv32.weight.grad.dtype == np.float32
    np.testing.assert_allclose(conv32.weight.grad.numpy(), conv64.weight.grad.numpy(),
                               rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- causal
@given(k=st.integers(1, 4), dilation=st.integers(1, 4), length=st.integers(1, 12),
       cut=st.integers(0, 11), seed=st.integers(0, 2 ** 31 - 1))
def test_causal_conv_never_reads_the_future(k: int, dilation: int, length: int, cut: int,
                                            seed: int) -> None:
    """Changing the input at steps >= cut leaves every output step < cut unchanged, the
    output is as long as the input, and the gradient of output step t is 0 beyond t."""
    cut = min(cut, length - 1)
    rng = np.random.default_rng(seed)
    conv = nn.CausalConv1d(2, 3, k, dilation=dilation, dtype=np.float64, generator=seed)
    x = rng.normal(size=(1, 2, length))
    changed = x.copy()
    changed[:, :, cut:] = rng.normal(size=(1, 2, length - cut))
    y, y2 = conv(tr.tensor(x)).numpy(), conv(tr.tensor(changed)).numpy()
    assert y.shape == (1, 3, length)
    np.testing.assert_array_equal(y[:, :, :cut], y2[:, :, :cut])
    xt = _leaf(x)
    conv(xt)[0, :, cut].sum().backward()
    assert not xt.grad.numpy()[:, :, cut + 1:].any()
    # the receptive field: step cut reads exactly k steps, dilation apart
    reads = np.flatnonzero(np.abs(xt.grad.numpy()[0]).sum(axis=0))
    assert set(reads) <= {cut - dilation * j for j in range(k)}


@given(k=st.integers(1, 4), dilation=st.integers(1, 3), seed=st.integers(0, 2 ** 31 - 1))
@settings(max_examples=20)
def test_causal_conv_gradcheck_float64(k: int, dilation: int, seed: int) -> None:
    conv = nn.CausalConv1d(2, 2, k, dilation=dilation, dtype=np.float64, generator=seed)
    x = _leaf(np.random.default_rng(seed).normal(size=(2, 2, 7)))
    assert tr.gradcheck(lambda t: conv(t), [x], atol=1e-8, rtol=1e-6)
    # the parameters too, through the functional form on the left-padded input
    assert tr.gradcheck(lambda w, b: F.conv1d(F.pad(x, (conv.causal_padding, 0)), w, b,
                                              dilation=dilation),
                        [_leaf(conv.weight.numpy()), _leaf(conv.bias.numpy())],
                        atol=1e-8, rtol=1e-6)


# ----------------------------------------------------------------------------- errors
def test_bad_arguments_are_refused_by_name() -> None:
    x = tr.randn(2, 3, 8, dtype=np.float64, generator=0)
    with pytest.raises(NotImplementedError, match="groups=2"):
        nn.Conv1d(4, 4, 3, groups=2)
    with pytest.raises(NotImplementedError, match="groups=2"):
        F.conv1d(x, tr.randn(4, 3, 2, dtype=np.float64), groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv1d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        nn.Conv1d(3, 4, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="padding must be an int, 'same' or 'valid'"):
        nn.Conv1d(3, 4, 3, padding="full")
    with pytest.raises(ValueError, match="kernel_size must be >= 1"):
        nn.Conv1d(3, 4, 0)
    with pytest.raises(ValueError, match="stride must be an int or a tuple of one int"):
        nn.Conv1d(3, 4, 3, stride=(1, 2))
    conv = nn.Conv1d(3, 4, 3, dtype=np.float64)
    with pytest.raises(ValueError, match=r"expected input of shape \(N, 3, L\)"):
        conv(tr.randn(2, 5, 8, dtype=np.float64))
    with pytest.raises(TypeError, match="float32"):
        conv(tr.randn(2, 3, 8))
    with pytest.raises(ValueError, match="no output step"):
        conv(tr.randn(2, 3, 2, dtype=np.float64))
    with pytest.raises(TypeError, match="one dtype"):
        F.conv1d(x, tr.randn(4, 3, 2))
    with pytest.raises(ValueError, match="expects C_in = 5"):
        F.conv1d(x, tr.randn(4, 5, 2, dtype=np.float64))
    with pytest.raises(ValueError, match=r"bias has shape \(3,\), expected \(4,\)"):
        F.conv1d(x, tr.randn(4, 3, 2, dtype=np.float64), tr.randn(3, dtype=np.float64))


def test_unbatched_input_and_attributes_as_torch() -> None:
    conv = nn.Conv1d(3, 4, (5,), stride=(2,), padding=2, dilation=1, dtype=np.float64,
                     generator=0)
    assert (conv.kernel_size, conv.stride, conv.padding, conv.dilation) == ((5,), (2,), (2,),
                                                                            (1,))
    assert conv.weight.shape == (4, 3, 5) and conv.bias.shape == (4,)
    bound = 1 / np.sqrt(3 * 5)
    assert np.abs(conv.weight.numpy()).max() <= bound
    x = np.random.default_rng(0).normal(size=(3, 11))
    single = conv(tr.tensor(x)).numpy()
    np.testing.assert_array_equal(single, conv(tr.tensor(x[None])).numpy()[0])
    assert single.shape == (4, 6)


def test_standin_device_gives_the_cpu_numbers() -> None:
    conv = nn.CausalConv1d(2, 3, 3, dilation=2, dtype=np.float64, generator=0)
    x = np.random.default_rng(0).normal(size=(2, 2, 9))
    xt = _leaf(x)
    y = conv(xt)
    y.sum().backward()
    moved = nn.CausalConv1d(2, 3, 3, dilation=2, dtype=np.float64, generator=0).to("standin")
    xs = tr.tensor(x, requires_grad=True, device="standin")
    ys = moved(xs)
    ys.sum().backward()
    np.testing.assert_array_equal(ys.numpy(), y.numpy())
    np.testing.assert_array_equal(xs.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(moved.weight.grad.numpy(), conv.weight.grad.numpy())


# ----------------------------------------------------------------------------- torch
def _torch_pair(ours: nn.Conv1d, **kwargs: Any) -> Any:
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Conv1d(dtype=torch.float64, **kwargs)
    theirs.load_state_dict({k: torch.tensor(np.asarray(v)) for k, v in
                            ours.state_dict().items()})
    return torch, theirs


@given(p=conv_problems(), mode=st.sampled_from(["zeros", "zeros", "reflect", "replicate",
                                                "circular"]))
@settings(max_examples=40)
def test_conv1d_module_matches_torch(p: dict, mode: str) -> None:
    c_out, c_in, k = p["w"].shape
    x = p["x"]
    # torch's non-zero modes need the padding below the length (reflect: strictly)
    if mode != "zeros":
        pad = {"valid": 0, "same": p["dilation"] * (k - 1)}.get(p["padding"], p["padding"])
        if pad >= x.shape[2]:
            mode = "zeros"
    kwargs = dict(in_channels=c_in, out_channels=c_out, kernel_size=k, stride=p["stride"],
                  padding=p["padding"], dilation=p["dilation"], bias=p["b"] is not None,
                  padding_mode=mode)
    ours = nn.Conv1d(**kwargs, dtype=np.float64, generator=0)
    torch, theirs = _torch_pair(ours, **kwargs)
    xt = _leaf(x)
    tx = torch.tensor(x, requires_grad=True)
    y, ty = ours(xt), theirs(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = np.random.default_rng(3).normal(size=y.shape)
    y.backward(tr.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    for name, param in theirs.named_parameters():
        np.testing.assert_allclose(getattr(ours, name).grad.numpy(), param.grad.numpy(),
                                   rtol=1e-12, atol=1e-12, err_msg=name)


def test_functional_conv1d_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x, w, b = rng.normal(size=(2, 3, 10)), rng.normal(size=(5, 3, 3)), rng.normal(size=5)
    for kw in (dict(), dict(stride=2, padding=1), dict(padding="same", dilation=3),
               dict(padding="valid", stride=(3,), dilation=(2,))):
        got = F.conv1d(tr.tensor(x), tr.tensor(w), tr.tensor(b), **kw).numpy()
        want = torch.nn.functional.conv1d(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                          **kw).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=str(kw))


@given(k=st.integers(1, 4), dilation=st.integers(1, 3), seed=st.integers(0, 2 ** 31 - 1))
@settings(max_examples=20)
def test_causal_conv_is_torchs_conv_on_a_left_padded_input(k: int, dilation: int,
                                                           seed: int) -> None:
    """CausalConv1d's state dict loads into torch.nn.Conv1d, which gives the same values and
    gradients on F.pad(x, (d (K - 1), 0))."""
    ours = nn.CausalConv1d(3, 2, k, dilation=dilation, dtype=np.float64, generator=seed)
    torch, theirs = _torch_pair(ours, in_channels=3, out_channels=2, kernel_size=k,
                                dilation=dilation)
    x = np.random.default_rng(seed).normal(size=(2, 3, 8))
    xt, tx = _leaf(x), torch.tensor(x, requires_grad=True)
    y = ours(xt)
    ty = theirs(torch.nn.functional.pad(tx, (dilation * (k - 1), 0)))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    y.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(),
                               rtol=1e-12, atol=1e-12)


def test_repr_and_docstring_examples() -> None:
    import doctest

    import tinygrad_rnn.nn.conv as module
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0
    assert repr(nn.Conv1d(3, 4, 3, padding="same")).startswith(
        "Conv1d(3, 4, kernel_size=(3,), stride=(1,), padding=same")
