"""Backward through the fused recurrent layers is repeatable when the graph is retained.

``loss.backward(retain_graph=True)`` twice through a fused layer must give the same
gradients (bit for bit) both times: the fused backward kernels only read the cache the
forward pass left, so the second pass sees exactly what the first saw. Checked for the LSTM
(plain, peephole, coupled), the GRU and the Elman RNN, two layers, both directions, with
variable lengths, with and without per-step state gradients, in float32 (the default).
Without ``retain_graph`` a second backward still raises the engine's clear error.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.nn import GRU, LSTM, RNN

LAYERS = {
    "lstm": (LSTM, {}),
    "lstm-peephole-coupled": (LSTM, {"peephole": True, "coupled": True}),
    "gru": (GRU, {}),
    "rnn": (RNN, {}),
}


def _model_and_loss(name: str, track: bool, lengths: Any) -> tuple[Any, Any, Any]:
    """A two-layer bidirectional fused layer, a loss on its outputs and final states, and
    the input (which requires a gradient, so dx is computed too)."""
    cls, options = LAYERS[name]
    model = cls(3, 4, num_layers=2, bidirectional=True, generator=0, **options)
    model.track_state_grads = track
    rng = np.random.default_rng(1)
    x = tr.tensor(rng.standard_normal((5, 3, 3)).astype(np.float32), requires_grad=True)
    out, state = model(x, lengths=lengths)
    h_n = state[0] if isinstance(state, tuple) else state
    w_out = tr.tensor(rng.standard_normal(out.shape).astype(np.float32))
    loss = (out * w_out).sum() + (h_n * h_n).sum()
    return model, loss, x


def _grads(model: Any, x: Any) -> dict[str, np.ndarray]:
    grads = {name: p.grad.array.copy() for name, p in model.named_parameters()}
    grads["input"] = x.grad.array.copy()
    return grads


@pytest.mark.parametrize("track", [False, True])
@pytest.mark.parametrize("lengths", [None, [5, 2, 0]])
@pytest.mark.parametrize("name", list(LAYERS))
def test_two_backward_passes_with_retain_graph_give_identical_gradients(
        name: str, lengths: Any, track: bool) -> None:
    model, loss, x = _model_and_loss(name, track, lengths)
    loss.backward(retain_graph=True)
    first = _grads(model, x)
    first_states = {k: {n: a.copy() for n, a in v.items()}
                    for k, v in model.state_grads.items()}
    model.zero_grad()
    x.grad = None
    loss.backward(retain_graph=True)
    second = _grads(model, x)
    assert first.keys() == second.keys()
    for key in first:
        assert second[key].dtype == np.float32, key
        np.testing.assert_array_equal(second[key], first[key], err_msg=key)
    assert bool(first_states) == track
    for key, slot in first_states.items():
        for n, a in slot.items():
            np.testing.assert_array_equal(model.state_grads[key][n], a,
                                          err_msg=f"state_grads[{key}][{n!r}]")


def test_second_backward_without_retain_graph_still_raises() -> None:
    _, loss, _ = _model_and_loss("lstm", False, None)
    loss.backward()
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()
