"""nn.LayerNorm and nn.functional.layer_norm against torch's (skipped cleanly without torch).

float64 throughout: values and the gradients of the input, weight and bias equal torch's to
1e-12 relative to max(1, the largest |torch's value| of the array), with the module built
from torch's state dict. (Relative to the array, not to each entry: dx subtracts means of
terms of the array's size, so a small entry among large ones carries their rounding, in
torch's order of operations as in ours: at scale 1e-2 the entries reach 1e2 and a -0.1 entry
differs by 3e-12.)
The derivation is docs/layernorm.md; the gradient check is the layer_norm entry of
tests/op_registry.py.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn as tr
import tinygrad_rnn.nn as nn
import tinygrad_rnn.nn.functional as F

torch = pytest.importorskip("torch")

TOL = 1e-12


def close(got: Any, want: Any) -> None:
    got = got.numpy() if isinstance(got, tr.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL * scale)


def _torch_module(shape: tuple, affine: bool, bias: bool, eps: float, seed: int) -> Any:
    """torch's LayerNorm in float64 with random (not default) weight and bias."""
    module = torch.nn.LayerNorm(shape, eps=eps, elementwise_affine=affine, bias=bias,
                                dtype=torch.float64)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=gen, dtype=torch.float64) * 2 - 0.5)
    return module


@given(lead=st.lists(st.integers(1, 4), max_size=2),
       # at least 2 normalized entries: with one, x_hat is 0 by definition (exactly here,
       # within torch's rounding of x - mean there), tested on its own below
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple)
       .filter(lambda s: int(np.prod(s)) >= 2),
       affine=st.booleans(), bias=st.booleans(), eps=st.sampled_from([1e-5, 1e-3, 0.5]),
       scale=st.sampled_from([1e-2, 1.0, 100.0]), seed=st.integers(0, 2**31 - 1))
def test_layer_norm_module_matches_torch(lead: list, shape: tuple, affine: bool, bias: bool,
                                         eps: float, scale: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    theirs = _torch_module(shape, affine, bias, eps, seed)
    ours = nn.LayerNorm(shape, eps=eps, elementwise_affine=affine, bias=bias,
                        dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    assert repr(ours).split("  #")[0] == repr(theirs)
    x = rng.normal(size=tuple(lead) + shape) * scale + rng.normal()
    g = rng.normal(size=x.shape)
    xt, xx = tr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, z = ours(xt), theirs(xx)
    close(y, z)
    y.backward(g)
    z.backward(torch.from_numpy(g))
    close(xt.grad, xx.grad)
    for (name, p), (name_t, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == name_t
        close(p.grad, q.grad)


def test_layer_norm_defaults_and_parameters_are_torchs() -> None:
    tr.set_default_dtype(np.float64)
    try:
        ours = nn.LayerNorm(4)
    finally:
        tr.set_default_dtype(np.float32)
    theirs = torch.nn.LayerNorm(4, dtype=torch.float64)
    assert ours.normalized_shape == theirs.normalized_shape == (4,)
    assert ours.eps == theirs.eps and ours.elementwise_affine is True
    for (name, p), (name_t, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert name == name_t and p.dtype == np.float64
        close(p, q)
    assert nn.LayerNorm([2, 3]).weight.shape == (2, 3)
    assert nn.LayerNorm(3).weight.dtype == np.float32
    no_affine = nn.LayerNorm(3, elementwise_affine=False)
    assert no_affine.weight is None and no_affine.bias is None
    assert list(no_affine.state_dict()) == []
    no_bias = nn.LayerNorm(3, bias=False)
    assert no_bias.bias is None and list(no_bias.state_dict()) == ["weight"]
    assert repr(no_bias).split("  #")[0] == repr(torch.nn.LayerNorm(3, bias=False))


@pytest.mark.parametrize("with_weight, with_bias", [(True, True), (True, False),
                                                    (False, True), (False, False)])
def test_functional_layer_norm_matches_torch(with_weight: bool, with_bias: bool) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 2, 4)) * 5.0 + 1.0
    w, b = rng.normal(size=(2, 4)), rng.normal(size=(2, 4))
    g = rng.normal(size=x.shape)
    ours = [tr.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y = F.layer_norm(ours[0], (2, 4), ours[1] if with_weight else None,
                     ours[2] if with_bias else None, eps=1e-3)
    z = torch.nn.functional.layer_norm(theirs[0], (2, 4), theirs[1] if with_weight else None,
                                       theirs[2] if with_bias else None, eps=1e-3)
    close(y, z)
    y.backward(g)
    z.backward(torch.from_numpy(g))
    for used, a, t in zip((True, with_weight, with_bias), ours, theirs):
        if used:
            close(a.grad, t.grad)
        else:
            assert a.grad is None and t.grad is None


def test_layer_norm_float32_is_float32_and_close_to_float64() -> None:
    x = np.random.default_rng(0).normal(size=(5, 7))
    y32 = nn.LayerNorm(7)(tr.tensor(x.astype(np.float32)))
    y64 = F.layer_norm(tr.tensor(x), (7,))
    assert y32.dtype == np.float32
    np.testing.assert_allclose(y32.numpy(), y64.numpy(), rtol=1e-5, atol=1e-5)


def test_layer_norm_errors_name_the_function_and_argument() -> None:
    x = tr.tensor(np.ones((2, 3)))
    with pytest.raises(RuntimeError, match=r"layer_norm: given normalized_shape=\[4\]"):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match=r"layer_norm: weight has shape \[2\]"):
        F.layer_norm(x, (3,), tr.tensor(np.ones(2)))
    with pytest.raises(ValueError, match="layer_norm: normalized_shape must name at least"):
        F.layer_norm(x, ())
    with pytest.raises(TypeError, match="LayerNorm: normalized_shape must be an int"):
        nn.LayerNorm("3")
    with pytest.raises(ValueError, match="LayerNorm: normalized_shape must hold positive"):
        nn.LayerNorm((3, 0))
    with pytest.raises(ValueError, match="LayerNorm: eps must be >= 0"):
        nn.LayerNorm(3, eps=-1.0)
    with pytest.raises(TypeError, match="LayerNorm: elementwise_affine must be True or False"):
        nn.LayerNorm(3, elementwise_affine="yes")
    with pytest.raises(RuntimeError, match=r"expected an input of shape \[\*, 3\]"):
        nn.LayerNorm(3, dtype=np.float64)(tr.tensor(np.ones((2, 4))))


@pytest.mark.parametrize("eps", [1e-5, 0.5])
def test_a_single_normalized_entry_gives_exactly_the_bias(eps: float) -> None:
    """One entry per normalized row: x - mean(x) is exactly 0, so the output is the bias and
    the weight gets exactly zero gradient; torch's are the same within its rounding of
    x - mean (about 1e-12 at |x| = 100, amplified by 1/sqrt(eps))."""
    rng = np.random.default_rng(0)
    theirs = _torch_module((1,), True, True, eps, 3)
    ours = nn.LayerNorm(1, eps=eps, dtype=np.float64)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = rng.normal(size=(4, 1)) * 100.0
    g = rng.normal(size=x.shape)
    xt, xx = tr.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, z = ours(xt), theirs(xx)
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(ours.bias.numpy(), x.shape))
    np.testing.assert_allclose(y.numpy(), z.detach().numpy(), rtol=0, atol=1e-9)
    y.backward(g)
    z.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(ours.weight.grad.numpy(), [0.0])
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), atol=1e-9)
    np.testing.assert_allclose(xt.grad.numpy(), xx.grad.numpy(), rtol=0, atol=1e-9)
