"""The output of a fused ``nn.RNN`` / ``nn.GRU`` is the kernel's state buffer itself when no
step is padded (no (T, N, H) copy): backward reads those states, so an in-place write to the
output before backward must raise the engine's clear error (torch.nn.RNN/GRU accept such a
write, because they keep a separate copy; docs/from_torch.md lists the difference), never
give a silently wrong gradient. A clone can be written freely; a padded batch's output is a
copy and can be written too; outputs made without recording gradients can be written.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.nn import GRU, RNN

LAYERS = {"rnn": (RNN, {}), "rnn-relu": (RNN, {"nonlinearity": "relu"}),
          "gru": (GRU, {}), "gru-before": (GRU, {"reset": "before"})}


def _layer(name: str, **kw: Any) -> Any:
    cls, options = LAYERS[name]
    return cls(3, 4, generator=0, **options, **kw)


def _input(batch_first: bool = False) -> Any:
    x = np.random.default_rng(1).standard_normal((5, 2, 3)).astype(np.float32)
    return tr.tensor(x.transpose(1, 0, 2).copy() if batch_first else x)


def _grads(model: Any) -> dict[str, np.ndarray]:
    return {name: p.grad.array.copy() for name, p in model.named_parameters()}


WRITES: dict[str, Callable[[Any], None]] = {
    "mul_": lambda out: out.mul_(2.0),
    "+=": lambda out: out.__iadd__(1.0),
    "setitem": lambda out: out.__setitem__(0, 0.0),
    "view add_": lambda out: out[-1].add_(1.0),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_output_is_the_state_buffer_the_backward_reads(name: str) -> None:
    out, _ = _layer(name)(_input())
    states = out._ctx.cache.states
    assert np.shares_memory(out.array, states)


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("batch_first", [False, True])
def test_in_place_write_to_the_output_raises_at_backward(name: str, write: str,
                                                         batch_first: bool) -> None:
    out, h_n = _layer(name, batch_first=batch_first)(_input(batch_first))
    WRITES[write](out)
    with pytest.raises(RuntimeError, match=r"FusedRecurrent\.backward: output 0 of shape .*"
                                           r"modified in place.*Clone the tensor.*"
                                           r"torch\.nn\.GRU accept a write into their "
                                           r"output, tinygrad_rnn does not.*output\.clone\(\)"
                                           r".*engine='autograd'"):
        (out.sum() + h_n.sum()).backward()


def test_in_place_write_without_recording_raises_at_backward_too() -> None:
    out, _ = _layer("gru")(_input())
    with tr.no_grad():
        out[1] = 5.0
    with pytest.raises(RuntimeError, match="modified in place"):
        out.sum().backward()


@pytest.mark.parametrize("name", list(LAYERS))
def test_writing_into_a_clone_gives_the_gradients_of_the_same_loss(name: str) -> None:
    model = _layer(name)
    out, _ = model(_input())
    (out * 2.0).sum().backward()
    expected = _grads(model)
    model.zero_grad()
    out, _ = model(_input())
    copy = out.clone()
    copy.mul_(2.0)                              # the clone is written, not the output
    copy.sum().backward()
    for key, g in _grads(model).items():
        np.testing.assert_array_equal(g, expected[key], err_msg=key)


@pytest.mark.parametrize("name", list(LAYERS))
def test_padded_output_is_a_copy_and_can_be_written(name: str) -> None:
    model = _layer(name)
    lengths = [5, 3]
    out, _ = model(_input(), lengths=lengths)
    assert not np.shares_memory(out.array, out._ctx.cache.states)
    (out * 2.0).sum().backward()
    expected = _grads(model)
    model.zero_grad()
    out, _ = model(_input(), lengths=lengths)
    out.mul_(2.0)                               # recorded: the gradient flows through it
    out.sum().backward()
    for key, g in _grads(model).items():
        np.testing.assert_allclose(g, expected[key], rtol=1e-6, err_msg=key)


@pytest.mark.parametrize("name", list(LAYERS))
def test_output_made_without_recording_can_be_written(name: str) -> None:
    model = _layer(name)
    with tr.no_grad():
        out, _ = model(_input())
        expected = out.array.copy()
        out.mul_(2.0)
    np.testing.assert_array_equal(out.array, 2.0 * expected)


@pytest.mark.parametrize("name", list(LAYERS))
def test_stacked_layers_read_the_first_layer_output_in_place(name: str) -> None:
    """A second layer's input is the first layer's output (the same memory); two layers
    give the autograd engine's gradients."""
    cls, options = LAYERS[name]
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 2, 3))
    grads = {}
    for engine in ("fused", "autograd"):
        model = cls(3, 4, num_layers=2, generator=0, dtype=np.float64, engine=engine,
                    **options)
        xt = tr.tensor(x, requires_grad=True)
        out, h_n = model(xt)
        (out * out).sum().backward()
        grads[engine] = _grads(model) | {"x": xt.grad.array.copy()}
    for key, g in grads["fused"].items():
        np.testing.assert_allclose(g, grads["autograd"][key], rtol=1e-10, atol=1e-12,
                                   err_msg=key)
