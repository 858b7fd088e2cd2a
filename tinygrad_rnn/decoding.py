r"""Decoding: choosing tokens from a model's logits one step at a time, for a language model
(:func:`generate`, also ``tr.lm.generate``) and for an encoder-decoder (:func:`greedy_decode`,
:func:`sample_decode`, :func:`beam_search`).

Choosing a token
----------------
At each step the model gives logits z (V,) for the next token, and the token is chosen by:

(D1)  greedy:        w = argmax_v z_v
(D2)  sample:        w ~ q,   q_v = exp(z_v / tau) / sum_{u in K} exp(z_u / tau)  for v in K,
                     q_v = 0 otherwise

with temperature tau > 0 and K the ``top_k`` largest logits (all V when ``top_k`` is None).
As tau -> 0, q puts all its mass on the argmax, so sampling becomes greedy decoding; as
tau -> infinity, q tends to the uniform distribution over K. top_k = 1 is greedy decoding.
:func:`sample_logits` applies (D1) or (D2) to given logits.

Language models
---------------
A recurrent LM reads the prompt once and then carries its hidden state one token at a time;
a feed-forward LM slides its window of n - 1 ids. :func:`generate` works with any model with
the two methods of that protocol:

* ``prime(prompt_ids) -> (logits (V,), state)``: the next-token logits after the prompt;
* ``advance(token_id, state) -> (logits (V,), state)``: feed one chosen token.

Generation runs in eval mode (no dropout) under ``tr.no_grad()``, and puts every module's
training flag back afterwards.

Encoder-decoder models
----------------------
:func:`greedy_decode`, :func:`sample_decode` and :func:`beam_search` work with any model that
has the step-by-step interface of :class:`tinygrad_rnn.nn.Seq2Seq`:

* ``model.encode(src, src_lengths) -> (state, memory)``;
* ``model.decode_step(prev_ids (N,), state, memory) -> (logits (N, V), state, weights)``,
  ``weights`` (N, S) or None;
* ``model.reorder(state_or_memory, index) -> rows index`` of a state or memory;
* ``model.bos_id`` and ``model.eos_id``.

They run under :func:`tinygrad_rnn.no_grad` (no graph is built). Each returns a
:class:`DecodeResult`: for every source sentence the generated token ids (without BOS; ending
with EOS when the hypothesis finished, so ``len(sequence) <= max_len``), its score, the sum of
the model's log-probabilities of those tokens, and the attention weights of the chosen
hypothesis, one row per generated token (None for models without attention).

Beam search keeps, per source sentence, the ``beam_width`` best of all one-token extensions
of the live hypotheses. An extension that ends with EOS is finished: it leaves the beam and no
longer grows (the beam shrinks by one). The search stops when no hypothesis is live or at
``max_len`` tokens (unfinished hypotheses then compete as they are). The result is the
hypothesis with the best normalized score ``score / length ** alpha`` (length in tokens, EOS
included); ``alpha = 0`` compares raw log-probabilities. With ``beam_width = 1`` this is
exactly greedy decoding; with a beam as wide as the number of hypotheses it is exact search.

Devices
-------
A model moved with ``model.to(device)`` decodes on that device. The source ids are host
arrays (copied to the device by the model's embedding). The loop itself runs on the host (it
stops at EOS, grows Python lists of tokens, ranks beams), so each step copies exactly one
thing from the device explicitly: the N chosen ids (greedy, sampling: the choice itself is
made on the device) or the (B, V) log-probabilities of the live beams (beam search: the
ranking needs them all). Scores and attention weights stay on the device until the end and
are copied once. Sampling draws its uniform numbers on the host from the seeded generator
and copies them to the device, so a seed gives the same tokens on every device.

Examples
--------
>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> model = tr.nn.Seq2Seq(10, 8, emb=4, hidden=6, decoder="bahdanau", generator=0)
>>> src, lengths = np.array([[4, 5, 6], [7, 8, 0]]), np.array([3, 2])
>>> res = beam_search(model, src, lengths, beam_width=3, max_len=4)
>>> len(res.sequences), res.attention[1].shape[1]       # attention over the real positions
(2, 2)
>>> greedy = greedy_decode(model, src, lengths, max_len=4)
>>> bool(np.all(greedy.scores <= 0.0))
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _validate
from . import functional as F
from .backend import get_array_module, to_device
from .engine import no_grad
from .nn._checks import host_lengths
from .nn._checks import check_ids
from .nn.module import eval_no_grad
from .random import get_generator
from .tensor import Tensor

__all__ = ["generate", "sample_logits", "STRATEGIES", "DecodeResult", "greedy_decode",
           "sample_decode", "beam_search"]


# ------------------------------------------------------------------------- choosing a token
#: The decoding strategies of :func:`generate`.
STRATEGIES = ("greedy", "sample")


def check_temperature(temperature: Any, where: str,
                      greedy: str = "strategy='greedy'") -> float:
    """tau of (D2) as a float: a finite number > 0 (TypeError for a non-number, ValueError
    otherwise). ``greedy`` names the caller's greedy alternative, the tau -> 0 limit.
    Shared by :func:`generate`, :func:`sample_logits` and :func:`sample_decode`."""
    if isinstance(temperature, np.ndarray) and temperature.ndim == 0:
        temperature = temperature[()]  # a 0-d array of a number, as the other knobs take
    if isinstance(temperature, (bool, np.bool_)) or not isinstance(
            temperature, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: temperature must be a number, got "
                        f"{type(temperature).__name__}")
    tau = float(temperature)
    if not (tau > 0 and math.isfinite(tau)):
        raise ValueError(f"{where}: temperature must be a finite number > 0, got {temperature!r}"
                         f" (use {greedy} for the tau -> 0 limit)")
    return tau


def check_top_k(top_k: Any, V: int, where: str) -> int:
    """k of (D2): None means all V ids; otherwise an integer in [1, V] (not a bool)."""
    if top_k is None:
        return V
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) \
            or not 1 <= top_k <= V:
        raise ValueError(f"{where}: top_k must be None or an integer in [1, V] = [1, {V}], "
                         f"got {top_k!r}")
    return int(top_k)


def top_k_mask(z: Any, k: int, xp: Any = np) -> Any:
    """(N, V) bool, True at exactly the ``k`` largest entries of each row of ``z`` (N, V),
    ties broken towards the lower id; ``xp`` is the array module of ``z`` (NumPy or CuPy).

    With the k-th largest value ``kth`` of a row, every entry above ``kth`` is kept, and of
    the entries equal to ``kth`` the first ``k - (number above)`` in id order."""
    kth = xp.sort(z, axis=-1)[:, -k][:, None]                        # (N, 1)
    above = z > kth
    tied = z == kth
    room = k - above.sum(axis=-1, keepdims=True)                      # tied entries that fit
    return above | (tied & (xp.cumsum(tied, axis=-1) <= room))


def _log_softmax(z: np.ndarray) -> np.ndarray:
    """log softmax along the last axis, float64, log-sum-exp form."""
    peak = np.max(z, axis=-1, keepdims=True)
    shifted = z - peak
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def sample_rows(z: Any, tau: float, k: int, u: Any, xp: Any = np) -> Any:
    """One draw of (D2) per row of float64 logits ``z`` (N, V), on their device.

    ``u`` (N,) are uniform numbers in [0, 1) on the same device as ``z``: the draw is the
    first id whose cumulative probability exceeds ``u`` times the row's total (inverse CDF),
    so an id outside the top k (probability 0) is never drawn. Returns the ids (N,).
    Shared by :func:`sample_logits` and :func:`sample_decode`.
    """
    scaled = z / tau
    if k < z.shape[-1]:
        scaled = xp.where(top_k_mask(z, k, xp), scaled, -np.inf)
    scaled = scaled - scaled.max(axis=-1, keepdims=True)              # max-shifted softmax
    q = xp.exp(scaled)                                                # (N, V), unnormalised
    cdf = xp.cumsum(q, axis=-1)
    threshold = u * cdf[:, -1]                                        # (N,) in [0, total)
    return xp.argmax(cdf > threshold[:, None], axis=-1)


def sample_logits(logits: Any, strategy: str = "sample", temperature: float = 1.0,
                  top_k: int | None = None, generator: Any = None) -> Any:
    """Choose token ids from logits by (D1) or (D2).

    Parameters
    ----------
    logits : array-like (V,) or (N, V)
        Unnormalised scores (a Tensor is accepted); one draw per row.
    strategy : {'greedy', 'sample'}
    temperature : float
        tau > 0 of (D2); checked for both strategies, used by sampling only.
    top_k : int, optional
        Sample among exactly the k largest logits (ties broken towards the lower id).
    generator : int, numpy Generator or None
        The source of the draws (one uniform number per row).

    Returns
    -------
    int for (V,) logits, an int64 array (N,) for (N, V).
    """
    where = "sample_logits"
    if strategy not in STRATEGIES:
        raise ValueError(f"{where}: strategy must be one of {STRATEGIES}, got {strategy!r}")
    tau = check_temperature(temperature, where)
    z = np.asarray(logits.numpy() if hasattr(logits, "numpy") else logits)
    if z.dtype.kind not in "biuf":
        raise TypeError(f"{where}: logits must be an array of real numbers, got "
                        f"{type(logits).__name__} of dtype {z.dtype}")
    z = z.astype(np.float64)
    if z.ndim not in (1, 2) or z.shape[-1] == 0:
        raise ValueError(f"{where}: expected logits of shape (V,) or (N, V) with V >= 1, got "
                         f"{z.shape}")
    if np.isnan(z).any() or (z == np.inf).any():
        raise ValueError(f"{where}: logits contain NaN or +inf")
    if (z == -np.inf).all(axis=-1).any():
        raise ValueError(f"{where}: a row of logits is all -inf (no token has probability)")
    k = check_top_k(top_k, z.shape[-1], where)
    single = z.ndim == 1
    rows = z[None] if single else z                                   # (N, V)
    if strategy == "greedy":
        chosen = rows.argmax(axis=-1)
    else:
        rng = get_generator(generator)
        chosen = sample_rows(rows, tau, k, rng.random(rows.shape[0]))
    chosen = chosen.astype(np.int64)
    return int(chosen[0]) if single else chosen


# ------------------------------------------------------------------------- language models
def generate(model: Any, prompt_ids: Any, max_new_tokens: int, strategy: str = "greedy",
             temperature: float = 1.0, top_k: int | None = None, eos_id: int | None = None,
             generator: Any = None, return_log_probs: bool = False) -> Any:
    """Continue ``prompt_ids`` with up to ``max_new_tokens`` ids from ``model``.

    Parameters
    ----------
    model : RNNLM, FeedForwardLM, or any model with ``prime``/``advance`` and ``vocab_size``
    prompt_ids : 1-D ids
        At least one id, each in [0, V) (start from ``[BOS_ID]`` to generate from nothing).
    max_new_tokens : int
        The most ids to generate (>= 0).
    strategy : {'greedy', 'sample'}
        (D1) or (D2) of the module docstring.
    temperature : float
        tau > 0 for sampling.
    top_k : int, optional
        Sample among the k most probable ids, 1 <= k <= V.
    eos_id : int, optional
        Stop after generating this id (e.g. ``EOS_ID`` for ``</s>``), which is included in the
        result. None (the default) always generates ``max_new_tokens`` ids.
    generator : int, numpy Generator or None
        Seed of the draws: the same seed gives the same continuation.
    return_log_probs : bool
        Also return, for every generated id, its log-probability under the model itself
        (log softmax of the raw logits: temperature 1, no top-k), so that their sum is the
        model's log-likelihood of the continuation given the prompt.

    Returns
    -------
    ids : int64 array (M,), M <= max_new_tokens: the generated ids only, without the prompt.
    log_probs : float64 array (M,), when ``return_log_probs``.

    Examples
    --------
    >>> import numpy as np
    >>> from tinygrad_rnn.lm import RNNLM
    >>> model = RNNLM(8, 6, 6, cell='gru', generator=0)
    >>> ids = generate(model, [2, 4], 5, strategy='sample', temperature=0.8, generator=1)
    >>> ids.shape, bool(np.array_equal(ids, generate(model, [2, 4], 5, strategy='sample',
    ...                                                temperature=0.8, generator=1)))
    ((5,), True)
    """
    where = "generate"
    if not isinstance(return_log_probs, (bool, np.bool_)):
        raise TypeError(f"{where}: return_log_probs must be True or False, got "
                        f"{return_log_probs!r} ({type(return_log_probs).__name__})")
    if not (hasattr(model, "prime") and hasattr(model, "advance")
            and hasattr(model, "vocab_size")):
        raise TypeError(f"{where}: the model needs prime(prompt_ids), advance(token_id, state) "
                        f"and vocab_size (RNNLM and FeedForwardLM have them); got "
                        f"{type(model).__name__}")
    V = int(model.vocab_size)
    if strategy not in STRATEGIES:
        raise ValueError(f"{where}: strategy must be one of {STRATEGIES}, got {strategy!r}")
    tau = check_temperature(temperature, where)
    k = check_top_k(top_k, V, where)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) \
            or max_new_tokens < 0:
        raise ValueError(f"{where}: max_new_tokens must be an integer >= 0, got "
                         f"{max_new_tokens!r}")
    prompt = np.asarray(prompt_ids.numpy() if hasattr(prompt_ids, "numpy") else prompt_ids)
    if prompt.ndim != 1 or prompt.size == 0:
        raise ValueError(f"{where}: prompt_ids must be a non-empty 1-D sequence of ids, got "
                         f"shape {prompt.shape} (start from [BOS_ID] to generate from "
                         f"nothing)")
    if prompt.dtype.kind not in "iu":
        raise TypeError(f"{where}: prompt ids must be integers, got dtype {prompt.dtype}")
    bad = np.flatnonzero((prompt < 0) | (prompt >= V))
    if bad.size:
        raise IndexError(f"{where}: prompt id {int(prompt[bad[0]])} at position {int(bad[0])} "
                         f"is out of range for vocabulary size {V}")
    if eos_id is not None and (isinstance(eos_id, bool)
                               or not isinstance(eos_id, (int, np.integer))
                               or not 0 <= eos_id < V):
        raise ValueError(f"{where}: eos_id must be None or an id in [0, {V}), got {eos_id!r}")
    rng = get_generator(generator)
    ids: list[int] = []
    log_probs: list[float] = []
    if max_new_tokens > 0:
        with eval_no_grad(model):
            logits, state = model.prime(prompt.astype(np.int64))
            for step in range(int(max_new_tokens)):
                z = np.asarray(logits, dtype=np.float64)              # (V,)
                token = sample_logits(z, strategy, tau, k, rng)
                ids.append(token)
                log_probs.append(float(_log_softmax(z)[token]))
                if eos_id is not None and token == eos_id:
                    break
                if step + 1 < max_new_tokens:
                    logits, state = model.advance(token, state)
    out = np.array(ids, dtype=np.int64)
    if return_log_probs:
        return out, np.array(log_probs, dtype=np.float64)
    return out


# ------------------------------------------------------------------------- encoder-decoder models
@dataclass
class DecodeResult:
    """Decoded sequences, one per source sentence.

    Attributes
    ----------
    sequences : list of int64 arrays
        Generated ids (no BOS; the final EOS included when the hypothesis finished).
    scores : float64 array (N,)
        Sum of the model's log-probabilities of each sequence's tokens (accumulated in
        float64 whatever the model's dtype).
    attention : list of arrays (len(sequences[i]), S_i) in the model's dtype, or None
        The attention weights of each generated token over the source's real positions.
    finished : bool array (N,)
        Whether each sequence ended with EOS (False: cut at ``max_len``).
    """

    sequences: list
    scores: np.ndarray
    attention: list | None
    finished: np.ndarray


def _check_model(model: Any, who: str, beam: bool = False) -> None:
    """Refuse a model without the decoding interface of the module docstring, with a
    TypeError naming ``who`` and what is missing (not an AttributeError from the first
    call)."""
    methods = ("encode", "decode_step") + (("reorder",) if beam else ())
    missing = [m for m in methods if not callable(getattr(model, m, None))]
    for name in ("bos_id", "eos_id"):
        value = getattr(model, name, None)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            missing.append(name)
    if missing:
        raise TypeError(
            f"{who}: model must be an encoder-decoder with encode(src, src_lengths), "
            f"decode_step(prev, state, memory){', reorder(x, index)' if beam else ''} and "
            f"integer bos_id and eos_id (e.g. tr.nn.Seq2Seq); a {type(model).__name__} lacks "
            f"{', '.join(missing)}"
        )


def _source(src: Any, src_lengths: Any, who: str,
            vocab: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """The source ids (N, S) and lengths (N,) as host arrays, checked for every decoder
    (``who`` names it in errors): integer ids of shape (N, S), in [0, ``vocab``) when the
    model's source vocabulary size is known, and integer lengths of shape (N,) in [1, S]
    (default: all S)."""
    ids = np.asarray(src.numpy() if isinstance(src, Tensor) else src)
    if ids.ndim != 2 or ids.dtype.kind not in "iu":
        hint = " (use src[None] for one sentence)" if ids.ndim == 1 else ""
        raise ValueError(f"{who}: src must be an integer array (N, S), got shape {ids.shape} "
                         f"and dtype {ids.dtype}{hint}")
    if isinstance(vocab, (int, np.integer)) and not isinstance(vocab, bool):
        check_ids(who, "src", ids, int(vocab), "the model's src_vocab")
    elif ids.size and int(ids.min()) < 0:
        check_ids(who, "src", ids, int(ids.max()) + 1)  # names the negative id
    N, S = ids.shape
    if N and S == 0:
        raise ValueError(f"{who}: src of shape {ids.shape} has no tokens; every sentence "
                         f"needs at least one")
    if src_lengths is None:
        return ids, np.full(N, S, dtype=np.int64)
    lens = host_lengths(src_lengths, who, "src_lengths").astype(np.int64)
    if lens.shape != (N,):
        raise ValueError(f"{who}: src_lengths must have shape (N,) = ({N},) for src of shape "
                         f"{ids.shape}, got shape {lens.shape}")
    if bool((lens < 1).any()) or bool((lens > S).any()):
        raise ValueError(f"{who}: src_lengths must be integers in [1, S] = [1, {S}] for src "
                         f"of shape {ids.shape}, got {lens.tolist()}")
    return ids, lens


def _positive_int(value: Any, name: str, who: str) -> int:
    """An integer count >= 1 (not a bool; a float such as 2.5 is refused, not truncated)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{who}: {name} must be an integer >= 1, got {value!r}")
    return int(value)


def _log_probs(logits: Tensor) -> Any:
    """(N, V) float64 log-probabilities, on the logits' device."""
    return F.log_softmax(logits, axis=-1)._data.astype(np.float64)


def _stepwise(model: Any, src: Any, src_lengths: Any, max_len: int, choose: Any,
              who: str) -> DecodeResult:
    """Batched left-to-right decoding; ``choose(logits (N, V) raw array, xp) -> ids (N,)``
    on the logits' device."""
    max_len = _positive_int(max_len, "max_len", who)
    _check_model(model, who)
    ids, lens = _source(src, src_lengths, who, getattr(model, "src_vocab", None))
    N = ids.shape[0]
    with no_grad():
        state, memory = model.encode(ids, lens)
        prev = np.full(N, model.bos_id, dtype=np.int64)
        done = np.zeros(N, dtype=bool)
        scores: Any = None                                  # (N,) float64, on the device
        tokens: list[np.ndarray] = []
        weights_t: list[Any] = []                           # (N, S) each, on the device
        steps = np.zeros(N, dtype=np.int64)                 # tokens generated per row
        for _ in range(max_len):
            logits, state, weights = model.decode_step(prev, state, memory)
            xp = get_array_module(logits._data)
            logp = _log_probs(logits)                       # (N, V)
            chosen = choose(logits._data, xp)                # (N,) on the device
            # the one device -> host copy of a step: the chosen ids drive the loop (EOS, stop)
            nxt = to_device(chosen, "cpu").astype(np.int64)
            live = ~done
            if scores is None:
                scores = xp.zeros(N, dtype=np.float64)
            scores += xp.where(xp.asarray(live), logp[xp.arange(N), chosen], 0.0)
            steps += live
            tokens.append(nxt)
            if weights is not None:
                weights_t.append(weights._data)
            done = done | (nxt == model.eos_id)
            prev = nxt
            if done.all():
                break
    seqs = [np.array([tok[i] for tok in tokens[: steps[i]]], dtype=np.int64)
            for i in range(N)]
    attn = None
    if weights_t:
        w_all = to_device(get_array_module(weights_t[0]).stack(weights_t), "cpu")  # (T, N, S)
        attn = [np.stack([w[i, : lens[i]] for w in w_all[: steps[i]]])
                for i in range(N)]
    return DecodeResult(seqs, to_device(scores, "cpu"), attn, done.copy())


def greedy_decode(model: Any, src: Any, src_lengths: Any = None,
                  max_len: int = 50) -> DecodeResult:
    """Greedy decoding: at every step the most probable token (batched over sentences).

    Parameters
    ----------
    model
        A model with the interface of the module docstring (e.g. :class:`~tinygrad_rnn.nn.
        Seq2Seq`); anything else is a TypeError naming what it lacks.
    src : int array (N, S)
    src_lengths : int array (N,), optional
    max_len : int
        The most tokens generated per sentence (EOS included).
    """
    def choose(logits: Any, xp: Any) -> Any:
        return xp.argmax(logits, axis=-1)

    return _stepwise(model, src, src_lengths, max_len, choose, "greedy_decode")


def sample_decode(model: Any, src: Any, src_lengths: Any = None, max_len: int = 50,
                  temperature: float = 1.0, top_k: int | None = None,
                  generator: Any = None) -> DecodeResult:
    """Ancestral sampling: each token drawn from softmax(logits / temperature), restricted to
    the ``top_k`` most probable tokens when given (batched over sentences).

    The draw is the one of :func:`tinygrad_rnn.lm.sample_logits`, with the same rules:
    ``temperature`` a finite number > 0, ``top_k`` None or an integer in [1, V] (checked
    against the model's V at the first step), and exactly ``top_k`` candidates, ties broken
    towards the lower id (so ``top_k=1`` is greedy decoding). The reported scores are
    log-probabilities under the model itself (temperature 1, no top-k), so they compare with
    those of the other decoders. A fixed ``generator`` (int seed or numpy Generator) makes
    the draws reproducible.
    """
    who = "sample_decode"
    tau = check_temperature(temperature, who, greedy="greedy_decode")
    rng = get_generator(generator)

    def choose(logits: Any, xp: Any) -> Any:
        k = check_top_k(top_k, logits.shape[-1], who)
        u = xp.asarray(rng.random(logits.shape[0]))                  # drawn on the host
        return sample_rows(logits.astype(np.float64), tau, k, u, xp)

    return _stepwise(model, src, src_lengths, max_len, choose, "sample_decode")


def _length_penalty(alpha: Any, who: str) -> float:
    """``alpha`` as a finite float >= 0: NaN would rank every hypothesis as NaN (the pick
    then depends on the order of the comparisons), and a negative alpha would favour short
    outputs even more than the raw log-probabilities do."""
    alpha = _validate.finite_real(alpha, "alpha", who)
    if alpha < 0:
        raise ValueError(f"{who}: alpha must be >= 0 (0 = raw log-probabilities, 0.6-1 is "
                         f"common), got {alpha!r}")
    return alpha


def _normalized(score: float, length: int, alpha: float) -> float:
    return score / (max(length, 1) ** alpha) if alpha else score


def beam_search(model: Any, src: Any, src_lengths: Any = None, beam_width: int = 5,
                max_len: int = 50, alpha: float = 0.0) -> DecodeResult:
    """Beam search (one source sentence at a time, its beams batched).

    Parameters
    ----------
    model, src, src_lengths, max_len
        As :func:`greedy_decode`.
    beam_width : int
        How many hypotheses are kept per step (1 = greedy).
    alpha : float
        Length normalization: hypotheses are ranked at the end by ``score / length**alpha``
        (0 = raw log-probability, which favours short outputs; 0.6-1 is common). A finite
        number >= 0: NaN, inf or a negative alpha is a ValueError, a non-number a TypeError.

    Returns
    -------
    DecodeResult
        ``scores`` are the raw log-probabilities of the chosen hypotheses (not normalized).
    """
    who = "beam_search"
    width = _positive_int(beam_width, "beam_width", who)
    max_len = _positive_int(max_len, "max_len", who)
    alpha = _length_penalty(alpha, who)
    _check_model(model, who, beam=True)
    ids, lens = _source(src, src_lengths, who, getattr(model, "src_vocab", None))
    seqs, scores, attns, finished = [], [], [], []
    with no_grad():
        for n in range(ids.shape[0]):
            best = _beam_one(model, ids[n: n + 1, : lens[n]], lens[n: n + 1], width,
                             max_len, alpha)
            seqs.append(np.array(best[0], dtype=np.int64))
            scores.append(best[1])
            attns.append(best[2])
            finished.append(best[3])
    attention = attns if all(a is not None for a in attns) else None
    return DecodeResult(seqs, np.array(scores, dtype=np.float64), attention,
                        np.array(finished, dtype=bool))


def _beam_one(model: Any, src: np.ndarray, lens: np.ndarray, width: int, max_len: int,
              alpha: float) -> tuple[list, float, np.ndarray | None, bool]:
    """Beam search for one sentence; returns (tokens, score, attention (T, S) in the model's
    dtype or None, finished)."""
    state, memory = model.encode(src, lens)
    # live hypotheses: parallel lists of tokens, score, attention rows
    live_tok: list[list[int]] = [[]]
    live_score = np.zeros(1, dtype=np.float64)
    live_attn: list[list | None] = [[]]
    done: list[tuple[list, float, list | None, bool]] = []
    prev = np.array([model.bos_id], dtype=np.int64)
    for _ in range(max_len):
        logits, state, weights = model.decode_step(prev, state, memory)
        # the one device -> host copy of a step: ranking the extensions needs every
        # log-probability of the live beams
        logp = to_device(_log_probs(logits), "cpu")                 # (B, V)
        B, V = logp.shape
        total = live_score[:, None] + logp                          # (B, V)
        flat = total.reshape(-1)
        k = min(width, flat.size)
        # top k by score; ties broken by the lower flat index (stable)
        order = np.argsort(-flat, kind="stable")[:k]
        w = None if weights is None else weights._data               # (B, S), on the device
        keep_rows, keep_tok, keep_score, keep_attn, keep_ids = [], [], [], [], []
        for j in order:
            b, v = divmod(int(j), V)
            toks = live_tok[b] + [v]
            rows = None if w is None else live_attn[b] + [w[b]]
            if v == model.eos_id:
                done.append((toks, float(flat[j]), rows, True))
            else:
                keep_rows.append(b)
                keep_tok.append(toks)
                keep_score.append(float(flat[j]))
                keep_attn.append(rows)
                keep_ids.append(v)
        if not keep_rows:
            break
        live_tok, live_attn = keep_tok, keep_attn
        live_score = np.array(keep_score, dtype=np.float64)
        index = np.array(keep_rows, dtype=np.int64)
        state = model.reorder(state, index)
        if len(keep_rows) != _memory_rows(memory):
            memory = model.reorder(memory, np.zeros(len(keep_rows), dtype=np.int64))
        prev = np.array(keep_ids, dtype=np.int64)
    else:
        for toks, s, rows in zip(live_tok, live_score, live_attn):
            done.append((toks, float(s), rows, False))
    best = max(range(len(done)),
               key=lambda i: (_normalized(done[i][1], len(done[i][0]), alpha), -i))
    tokens, score, rows, finished = done[best]
    attention = None
    if rows is not None:               # the chosen attention rows (at least one), copied once
        attention = to_device(get_array_module(rows[0]).stack(rows), "cpu")
    return tokens, score, attention, finished


def _memory_rows(memory: Any) -> int:
    """The number of rows (hypotheses) a memory holds: the first dimension of its first
    array-like field."""
    for x in memory:
        if x is not None and hasattr(x, "shape"):
            return int(x.shape[0])
    raise ValueError("memory_rows: the memory holds no array")
