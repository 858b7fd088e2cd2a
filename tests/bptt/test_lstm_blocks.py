"""The fused LSTM backward in blocks of steps, and the memory it shares.

* the GEMM block size (4 x ``_layout.GEMM_BLOCK_ELEMS`` for the LSTM: the weight and bias
  gradients are added up block by block, so no (T, N, G*H) gradient array is held)
  changes the float64 results only at rounding level: one step per block, a few steps and
  all steps in one block agree to 1e-12 and equal the per-step reference loop; with all
  steps in one block every result is bit for bit the single-GEMM result;
* with several blocks, a second backward on the same cache (what ``retain_graph=True``
  relies on) gives exactly the same gradients and leaves the cache unchanged;
* ``hs`` is a view of the cache's state buffer when no step is padded (no copy), a fresh
  array when some step is; through ``nn.LSTM`` an in-place write to that output raises at
  backward instead of corrupting the gradients, and ``retain_graph=True`` repeats exactly.

Every LSTM variant (plain, peephole, coupled, both) runs with variable lengths (including a
zero length) and both directions.
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
import tinygrad_rnn.bptt._layout as layout
from tinygrad_rnn.bptt import lstm_forward

from .test_kernels import (
    Variant, make_inputs, make_upstream, reference, seq_backward, seq_forward,
)

LSTM_VARIANTS = [Variant("lstm"), Variant("lstm", peephole=True),
                 Variant("lstm", coupled=True), Variant("lstm", peephole=True, coupled=True)]
CASES = list(itertools.product(LSTM_VARIANTS, [None, [7, 0, 4]], [False, True]))
IDS = [f"{v}-{'pad' if lengths else 'full'}-{'rev' if reverse else 'fwd'}"
       for v, lengths, reverse in CASES]
T, N, D, H = 7, 3, 4, 5


def _grads(v: Variant, lengths: Any, reverse: bool, gemm_elems: int,
           monkeypatch: pytest.MonkeyPatch, dtype: Any = np.float64) -> dict[str, Any]:
    # on the host the LSTM's blocks hold 4 * GEMM_BLOCK_ELEMS elements (and GEMM_MIN_ROWS
    # rows): ask for at least gemm_elems
    monkeypatch.setattr(layout, "GEMM_MIN_ROWS", 1)
    monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", -(-gemm_elems // 4))
    inp = make_inputs(v, T, N, D, H, 3, True, dtype)
    up = make_upstream(v, T, N, H, 3, dtype)
    *_, cache = seq_forward(v, inp, lengths, reverse)
    return seq_backward(v, up, cache)


@pytest.mark.parametrize("v,lengths,reverse", CASES, ids=IDS)
def test_gemm_block_size_changes_results_only_at_rounding_level(
        v: Variant, lengths: Any, reverse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    step = N * v.gates * H
    one, few, whole = (_grads(v, lengths, reverse, elems, monkeypatch)
                       for elems in (1, 3 * step, 1 << 40))
    inp = make_inputs(v, T, N, D, H, 3, True)
    up = make_upstream(v, T, N, H, 3)
    _, ref, _ = reference(v, inp, up, lengths, reverse)
    for name, a in whole.items():
        if a is None:
            assert one[name] is None and few[name] is None, name
            continue
        for other in (one, few):
            np.testing.assert_allclose(other[name], a, rtol=0, atol=1e-12, err_msg=name)
        if name in ref and ref[name] is not None:
            np.testing.assert_allclose(a, ref[name], rtol=0, atol=1e-12, err_msg=name)


def test_blocks_are_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings the tests above use do split the backward: one GEMM pair per block."""
    calls = []
    real = layout.add_matmul

    def counting(total: Any, a: Any, b: Any) -> Any:
        calls.append(a.shape)
        return real(total, a, b)

    import tinygrad_rnn.bptt.lstm as lstm_module
    monkeypatch.setattr(lstm_module, "add_matmul", counting)
    for elems, blocks in ((1, T), (3 * N * 4 * H, 3), (1 << 40, 1)):
        calls.clear()
        _grads(Variant("lstm"), None, False, elems, monkeypatch)
        assert len(calls) == 2 * blocks, elems        # dweight_ih and dweight_hh per block
    # the defaults at the benchmark's size: all T = 64 steps in one block up to H = 256
    monkeypatch.undo()
    assert layout.gemm_blocks(64, False, 32 * 4 * 256,
                              max(layout.gemm_block_budget(np, 32, 32 * 4 * 256),
                                  4 * layout.GEMM_BLOCK_ELEMS)) == [(0, 64)]


@pytest.mark.parametrize("v", LSTM_VARIANTS, ids=str)
def test_one_gemm_block_is_the_single_gemm_result_bit_for_bit(
        v: Variant, monkeypatch: pytest.MonkeyPatch) -> None:
    """All T steps in one block: the block sums are the sums over all T*N rows, in float32
    too (the blocks' sums are then a sum of one term)."""
    whole = _grads(v, [7, 0, 4], False, T * N * v.gates * H, monkeypatch, np.float32)
    huge = _grads(v, [7, 0, 4], False, 1 << 40, monkeypatch, np.float32)
    for name, a in whole.items():
        if a is not None:
            np.testing.assert_array_equal(a, huge[name], err_msg=name)


@pytest.mark.parametrize("v,lengths,reverse", CASES, ids=IDS)
def test_backward_in_several_blocks_repeats_exactly_and_keeps_its_cache(
        v: Variant, lengths: Any, reverse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "GEMM_MIN_ROWS", 1)
    monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", N * v.gates * H // 2)   # 2 steps a block
    inp = make_inputs(v, T, N, D, H, 5, True, np.float32)
    up = make_upstream(v, T, N, H, 5, np.float32)
    *_, cache = seq_forward(v, inp, lengths, reverse)
    before = {name: np.array(a, copy=True) for name, a in cache._asdict().items()
              if isinstance(a, np.ndarray)}
    first = seq_backward(v, up, cache)
    for name, a in before.items():
        np.testing.assert_array_equal(getattr(cache, name), a, err_msg=f"cache.{name}")
    second = seq_backward(v, up, cache)
    for name, a in first.items():
        if a is not None:
            np.testing.assert_array_equal(a, second[name], err_msg=name)


def test_hs_is_a_view_of_the_states_only_when_nothing_is_padded() -> None:
    inp = make_inputs(Variant("lstm"), T, N, D, H, 1, True, np.float32)
    args = (inp["x"], inp["h0"], inp["c0"], inp["weight_ih"], inp["weight_hh"],
            inp["bias_ih"], inp["bias_hh"])
    hs, h_n, c_n, cache = lstm_forward(*args)
    assert np.shares_memory(hs, cache.h_states)
    for state in (h_n, c_n):              # the final states are copies: never the cache's
        assert not np.shares_memory(state, cache.h_states)
        assert not np.shares_memory(state, cache.c_states)
    padded, *_ = lstm_forward(*args, lengths=[7, 2, 7])
    assert not np.shares_memory(padded, cache.h_states)
    np.testing.assert_array_equal(padded[2:, 1], 0)


def _lstm_step(model: Any, x: Any) -> tuple[Any, Any]:
    out, (h_n, c_n) = model(x)
    return out, (out * out).sum() + h_n.sum() + (c_n * c_n).sum()


def test_in_place_write_to_the_output_raises_at_backward() -> None:
    model = tr.nn.LSTM(4, 5, generator=0)
    x = tr.Tensor(np.random.default_rng(0).standard_normal((6, 3, 4)).astype(np.float32))
    out, _ = model(x)
    loss = out.sum()
    out += 1.0                                          # the view of the kernel's states
    with pytest.raises(RuntimeError,
                       match="FusedRecurrent.backward: output 0 .* modified in place"):
        loss.backward()


@pytest.mark.parametrize("gemm_steps", [1, 2, 100])
def test_retain_graph_second_backward_gives_identical_gradients(
        gemm_steps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "GEMM_MIN_ROWS", 1)
    monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", gemm_steps * 3 * 4 * 5 // 4)
    model = tr.nn.LSTM(4, 5, generator=0)
    x = tr.Tensor(np.random.default_rng(1).standard_normal((6, 3, 4)).astype(np.float32),
                  requires_grad=True)
    _, loss = _lstm_step(model, x)
    loss.backward(retain_graph=True)
    first = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    first["x"] = x.grad.numpy().copy()
    model.zero_grad()
    x.grad = None
    loss.backward()
    for name, p in model.named_parameters():
        np.testing.assert_array_equal(p.grad.numpy(), first[name], err_msg=name)
    np.testing.assert_array_equal(x.grad.numpy(), first["x"])
