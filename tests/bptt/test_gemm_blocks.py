"""The fused Elman and GRU backward kernels work through time in blocks of steps
(``_layout.gemm_blocks``): the gate gradients of one block at a time, its share of the weight
and bias gradients added after it. Checked on their results:

* the blocks cover every time index once, in the order backpropagation through time visits
  them, with about equal lengths, each within ``GEMM_BLOCK_ELEMS`` (or one step);
* the block size changes the state gradients (dh_all, dh0) in no bit, and the weight, bias
  and input gradients only by the rounding of a sum taken in another order (float64);
* the backward holds no whole-sequence (T, N, G*H) array of gate gradients (tracemalloc);
* with several blocks, backward still only reads its cache and repeats exactly.

Both cells and their variants, with biases, variable lengths (including a zero length) and
both directions.
"""
from __future__ import annotations

import itertools
import tracemalloc
from typing import Any, Callable

import numpy as np
import pytest

import tinygrad_rnn.bptt._layout as layout
from tinygrad_rnn.bptt import gru_backward, gru_forward, rnn_backward, rnn_forward

VARIANTS = ["rnn-tanh", "rnn-relu", "gru-after", "gru-before"]


def _run(variant: str, dtype: type, lengths: Any, reverse: bool, T: int = 9, N: int = 3,
         D: int = 4, H: int = 5) -> tuple[Any, Callable[..., Any], tuple]:
    """Forward one sequence; return the cache, the backward function and (dhs, dh_n)."""
    rng = np.random.default_rng(0)
    family, option = variant.split("-")
    G = 1 if family == "rnn" else 3

    def r(*shape: int) -> np.ndarray:
        return (0.6 * rng.standard_normal(shape)).astype(dtype)

    x, h0, w_ih, w_hh, b_ih, b_hh = r(T, N, D), r(N, H), r(G * H, D), r(G * H, H), r(G * H), \
        r(G * H)
    if family == "rnn":
        *_, cache = rnn_forward(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity=option,
                                lengths=lengths, reverse=reverse)
        return cache, rnn_backward, (r(T, N, H), r(N, H))
    *_, cache = gru_forward(x, h0, w_ih, w_hh, b_ih, b_hh, reset=option, lengths=lengths,
                            reverse=reverse)
    return cache, gru_backward, (r(T, N, H), r(N, H))


@pytest.mark.parametrize("T", [0, 1, 2, 7, 64, 100])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("limit", [1, 10, 64, 1 << 19])
def test_gemm_blocks_cover_every_step_once_in_backward_order(
        T: int, reverse: bool, limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", limit)
    step_elems = 3
    blocks = layout.gemm_blocks(T, reverse, step_elems)
    if T == 0:
        assert blocks == [(0, 0)]
        return
    starts = [t0 for t0, _ in blocks]
    assert starts == sorted(starts, reverse=not reverse)   # the order BPTT visits time
    steps = [t for t0, t1 in sorted(blocks) for t in range(t0, t1)]
    assert steps == list(range(T))                         # every step once
    lengths = [t1 - t0 for t0, t1 in blocks]
    assert min(lengths) >= 1
    assert max(lengths) <= max(1, limit // step_elems)      # within the limit, or one step
    assert max(lengths) - min(lengths) < -(-T // len(blocks))   # about equal lengths
    # as few blocks as the limit allows
    most = max(1, limit // step_elems)
    assert len(blocks) == -(-T // most)


def test_block_budget_keeps_enough_rows_for_the_weight_gemms() -> None:
    budget = layout.GEMM_BLOCK_ELEMS
    # a narrow step: the element budget decides (H = 256, N = 32: 2 MiB of float32)
    assert layout.gemm_block_budget(np, 32, 32 * 256) == budget
    # a wide step: raised to GEMM_MIN_ROWS rows (16 steps of 32 at H = 1024, GRU)
    wide = 32 * 3 * 1024
    assert layout.gemm_block_budget(np, 32, wide) == 16 * wide
    blocks = layout.gemm_blocks(64, False, wide, layout.gemm_block_budget(np, 32, wide))
    assert all((t1 - t0) * 32 >= layout.GEMM_MIN_ROWS for t0, t1 in blocks)
    # another array module (a GPU's): 64 times the budget
    assert layout.gemm_block_budget(object(), 32, 32 * 256) == 64 * budget
    assert layout.gemm_block_budget(np, 1000, 1) == max(budget, 1)   # one step covers it


CASES = list(itertools.product(VARIANTS, [None, [9, 0, 4]], [False, True]))


@pytest.mark.parametrize("variant,lengths,reverse", CASES)
def test_gemm_block_size_changes_only_the_rounding_of_the_sums_over_time(
        variant: str, lengths: Any, reverse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, backward, ups = _run(variant, np.float64, lengths, reverse)
    N, H = 3, 5
    G = 1 if variant.startswith("rnn") else 3
    results = []
    monkeypatch.setattr(layout, "GEMM_MIN_ROWS", 1)
    for steps in (1, 2, 4, 1 << 30):                  # steps per block; the last: all in one
        monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", steps * N * G * H)
        results.append(backward(*ups, cache))
    whole = results[-1]
    for other in results[:-1]:
        # the recurrence runs step by step whatever the blocks: the same bits
        np.testing.assert_array_equal(other.dh_all, whole.dh_all)
        np.testing.assert_array_equal(other.dh0, whole.dh0)
        # sums over time (weights, biases) and the dx GEMM in other groupings: rounding only
        for name in ("dx", "dweight_ih", "dweight_hh", "dbias_ih", "dbias_hh"):
            np.testing.assert_allclose(getattr(other, name), getattr(whole, name),
                                       rtol=1e-13, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("lengths", [None, "ragged"])
def test_backward_holds_no_whole_sequence_array_of_gate_gradients(
        variant: str, lengths: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    T, N, D, H = 800, 4, 3, 16
    G = 1 if variant.startswith("rnn") else 3
    lens = None if lengths is None else [T, T // 2, 1, T - 3]
    cache, backward, ups = _run(variant, np.float64, lens, False, T=T, N=N, D=D, H=H)
    monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", 8 * N * G * H)   # blocks of 8 steps
    monkeypatch.setattr(layout, "GEMM_MIN_ROWS", 1)
    gate_grads = T * N * G * H * 8                       # bytes of one (T, N, G*H) array
    tracemalloc.start()
    try:
        backward(*ups, cache, input_grad=False, state_grads=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < gate_grads / 4, (peak, gate_grads)


@pytest.mark.parametrize("variant,lengths,reverse", CASES)
def test_backward_over_several_blocks_reads_its_cache_only_and_repeats_exactly(
        variant: str, lengths: Any, reverse: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    cache, backward, ups = _run(variant, np.float32, lengths, reverse)
    G = 1 if variant.startswith("rnn") else 3
    monkeypatch.setattr(layout, "GEMM_BLOCK_ELEMS", 2 * 3 * G * 5)   # blocks of 2 steps
    monkeypatch.setattr(layout, "GEMM_MIN_ROWS", 1)
    assert len(layout.gemm_blocks(9, reverse, 3 * G * 5)) == 5
    before = {name: np.array(v, copy=True) for name, v in cache._asdict().items()
              if isinstance(v, np.ndarray)}
    first = backward(*ups, cache)
    for name, v in before.items():
        np.testing.assert_array_equal(getattr(cache, name), v, err_msg=f"cache.{name}")
    second = backward(*ups, cache)
    for name in first._fields:
        u, v = getattr(first, name), getattr(second, name)
        assert (u is None) == (v is None), name
        if u is not None:
            assert u.dtype == np.float32, name
            np.testing.assert_array_equal(u, v, err_msg=name)
