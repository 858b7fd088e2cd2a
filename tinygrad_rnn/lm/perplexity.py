r"""One perplexity evaluation for every language model in the package.

n-gram models, a feed-forward LM and the recurrent LMs are all scored here, on the same tokens
with the same formula, so their numbers can be compared.

What is scored
--------------
For a sequence w_0 .. w_{T-1} the first token is given and each of the following T - 1 tokens
is scored given everything before it:

(1)  NLL = - sum_{t=1}^{T-1} log p(w_t | w_0 .. w_{t-1})        (nats)

For a corpus of several sequences the NLLs and token counts add up. To score sentences the way
n-gram models do (every word and the end of the sentence), wrap each in ``<s>`` ... ``</s>``
with :func:`with_boundaries`; for one long stream, pass the ids as they are.

Perplexity
----------
With N scored tokens, the cross entropy per token in nats is H = NLL / N, and

(2)  PPL = exp(H) = 2 ** (H / ln 2) = 2 ** H_bits

where H_bits = H / ln 2 is the cross entropy in bits per token. A model that is uniform over V
tokens has H = log V and PPL = V exactly: the perplexity is the size of a uniform vocabulary
that would be as uncertain as the model.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ..data.text import BOS_ID, EOS_ID

__all__ = ["perplexity", "LMEvaluation", "evaluate_lm", "evaluate_perplexity",
           "ngram_perplexity", "with_boundaries", "bits_per_token"]

ModelFn = Callable[[np.ndarray], Any]


def _check_nll(nll_sum_nats: Any, num_tokens: Any, where: str) -> float:
    """The checks :func:`perplexity` and :func:`bits_per_token` share; returns the NLL."""
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, (int, np.integer)) \
            or num_tokens < 1:
        raise ValueError(f"{where}: num_tokens must be a positive integer, got "
                         f"{num_tokens!r}")
    value = nll_sum_nats
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}: nll_sum_nats (the summed NLL) must be a real number, got "
                        f"{nll_sum_nats!r} ({type(nll_sum_nats).__name__})")
    nll = float(value)
    if math.isnan(nll):
        raise ValueError(f"{where}: the NLL is NaN")
    # an NLL is a sum of -log p >= 0; allow only rounding error below 0
    if nll < -1e-9 * max(1, int(num_tokens)):
        raise ValueError(f"{where}: the NLL must be >= 0 (a sum of -log p), got {nll!r}; "
                         "did you pass the log-likelihood instead of its negative?")
    return nll


def perplexity(nll_sum_nats: float, num_tokens: int) -> float:
    """exp(mean negative log-likelihood in nats), eq. (2); equal to ``2 ** H_bits``.

    Parameters
    ----------
    nll_sum_nats : float
        The summed negative log-likelihood -sum log p (>= 0; ``inf`` if some token had
        probability 0).
    num_tokens : int
        How many tokens were scored (>= 1).
    """
    nll = _check_nll(nll_sum_nats, num_tokens, "perplexity")
    try:
        return math.exp(max(nll, 0.0) / int(num_tokens))
    except OverflowError:
        return math.inf


def bits_per_token(nll_sum_nats: float, num_tokens: int) -> float:
    """The cross entropy in bits per token, NLL / (N ln 2) (bits per character for a
    character model); ``perplexity == 2 ** bits_per_token``."""
    nll = _check_nll(nll_sum_nats, num_tokens, "bits_per_token")
    return max(nll, 0.0) / int(num_tokens) / math.log(2.0)


class LMEvaluation(NamedTuple):
    """The result of :func:`evaluate_lm`: the summed NLL (nats) and the number of scored
    tokens, with the derived cross entropy and perplexity."""

    nll_sum: float
    num_tokens: int

    @property
    def cross_entropy(self) -> float:
        """Mean NLL per token, in nats."""
        return self.nll_sum / self.num_tokens

    @property
    def bits(self) -> float:
        """Cross entropy in bits per token (H / ln 2)."""
        return self.cross_entropy / math.log(2.0)

    @property
    def perplexity(self) -> float:
        """exp(cross entropy) = 2 ** bits, eq. (2)."""
        return perplexity(self.nll_sum, self.num_tokens)


def with_boundaries(sentences: Sequence[Any], bos_id: int = BOS_ID,
                    eos_id: int = EOS_ID) -> list[np.ndarray]:
    """Wrap every sentence (a 1-D sequence of non-negative integer ids, possibly empty) as
    ``<s> sentence </s>`` (int64), so that scoring it under eq. (1) scores every word and the
    end of the sentence."""
    where = "with_boundaries"
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                or value < 0:
            raise ValueError(f"{where}: {name} must be a non-negative integer id, got "
                             f"{value!r}")
    if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__iter__"):
        raise TypeError(f"{where}: sentences must be a list of 1-D id sequences, got "
                        f"{type(sentences).__name__}")
    out = []
    for i, s in enumerate(sentences):
        body = _id_sequence(s, f"{where}: sentence {i}")
        out.append(np.concatenate([[bos_id], body, [eos_id]]).astype(np.int64))
    return out


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "numpy") and callable(value.numpy):  # a Tensor (or torch tensor)
        value = value.numpy()
    elif hasattr(value, "get") and callable(value.get) and not isinstance(value, dict):
        value = value.get()  # cupy array
    return np.asarray(value)


def _id_sequence(seq: Any, what: str) -> np.ndarray:
    """``seq`` as a 1-D int64 array of non-negative ids (an empty sequence is allowed); the
    errors start with ``what``. A float id is refused, not truncated."""
    ids = np.asarray(seq)
    if ids.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of ids, got shape {ids.shape}")
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{what}: ids must be integers, got dtype {ids.dtype}")
    if ids.min() < 0:
        raise ValueError(f"{what}: negative id {int(ids.min())}")
    return ids.astype(np.int64, copy=False)


def _as_sequences(data: Any) -> list[np.ndarray]:
    """One stream (a 1-D array or a flat list of scalars) or several sequences (a 2-D array,
    a list of sequences)."""
    if isinstance(data, np.ndarray):
        if data.ndim == 1:
            return [data]
        if data.ndim == 2:
            return list(data)
        raise ValueError(f"evaluate_lm: expected 1-D or 2-D ids, got shape {data.shape}")
    items = list(data)
    if items and all(np.ndim(x) == 0 for x in items):
        return [np.asarray(items)]
    return [np.asarray(x) for x in items]


def _sequence_nll(model_fn: ModelFn, ids: np.ndarray, check_normalized: bool,
                  atol: float | None) -> float:
    T = ids.size
    out = _to_numpy(model_fn(ids))
    if out.ndim == 1:
        if out.shape != (T - 1,):
            raise ValueError(f"evaluate_lm: model_fn returned shape {out.shape} for {T} ids; "
                             f"expected ({T - 1},) log-probabilities of ids[1:] or "
                             f"({T}, V) / ({T - 1}, V) next-token log-distributions")
        token_lp = out.astype(np.float64)
    elif out.ndim == 2:
        if out.shape[0] not in (T, T - 1):
            raise ValueError(f"evaluate_lm: model_fn returned shape {out.shape} for {T} ids; "
                             f"expected ({T}, V) or ({T - 1}, V)")
        rows = out[: T - 1].astype(np.float64)      # (T-1, V): row t predicts ids[t + 1]
        V = rows.shape[1]
        if ids[1:].max() >= V:
            raise ValueError(f"evaluate_lm: target id {int(ids[1:].max())} is outside the "
                             f"model's {V} outputs")
        if check_normalized:
            tol = atol if atol is not None else (1e-9 if out.dtype == np.float64 else 1e-4)
            peak = rows.max(axis=1, keepdims=True)
            lse = (peak + np.log(np.exp(rows - peak).sum(axis=1, keepdims=True)))[:, 0]
            worst = float(np.max(np.abs(lse)))
            if not worst <= tol:
                raise ValueError(
                    f"evaluate_lm: the rows returned by model_fn are not log-probabilities "
                    f"(|logsumexp| up to {worst:.3g} > {tol:g}); apply log_softmax to logits"
                )
        token_lp = rows[np.arange(T - 1), ids[1:]]
    else:
        raise ValueError(f"evaluate_lm: model_fn returned an array of shape {out.shape}")
    if np.isnan(token_lp).any():
        raise ValueError("evaluate_lm: model_fn returned NaN log-probabilities")
    if (token_lp > 1e-6).any():
        raise ValueError(f"evaluate_lm: model_fn returned log-probabilities above 0 (max "
                         f"{float(token_lp.max()):.3g}), i.e. probabilities above 1; pass "
                         "log-probabilities, not probabilities or logits")
    return -math.fsum(token_lp.tolist())


def evaluate_lm(model_fn: ModelFn, data: Any, check_normalized: bool = True,
                atol: float | None = None) -> LMEvaluation:
    """Score ``data`` with a language model under eq. (1).

    Parameters
    ----------
    model_fn : callable
        ``model_fn(ids)`` for one 1-D ``int64`` sequence of T ids returns either
        ``(T - 1,)`` log-probabilities log p(ids[t] | ids[:t]) for t = 1 .. T - 1, or
        next-token log-distributions of shape ``(T, V)`` or ``(T - 1, V)`` whose row t is
        log p(. | ids[:t + 1]) (the output of a neural LM on the whole sequence; a last
        row that predicts past the end is ignored). NumPy arrays, Tensors and CuPy arrays
        are accepted. Nats, natural logarithms.
    data : 1-D ids, or a list of sequences (or a 2-D array, one sequence per row)
        One stream (the model sees the whole of it, so a stateful RNN carries its state),
        or several sequences (e.g. :func:`with_boundaries` sentences) scored independently.
        Sequences shorter than 2 score nothing.
    check_normalized : bool
        For 2-D outputs, check that every used row is a log-distribution (logsumexp = 0 up
        to ``atol``: 1e-9 for float64 outputs, 1e-4 for float32), which catches raw logits.
    """
    if not callable(model_fn):
        raise TypeError(f"evaluate_lm: model_fn must be a callable model_fn(ids) returning "
                        f"log-probabilities, got {type(model_fn).__name__}")
    if not isinstance(check_normalized, (bool, np.bool_)):
        raise TypeError(f"evaluate_lm: check_normalized must be True or False, got "
                        f"{check_normalized!r} ({type(check_normalized).__name__})")
    nll = 0.0
    count = 0
    for i, seq in enumerate(_as_sequences(data)):
        ids = _id_sequence(seq, f"evaluate_lm: sequence {i}")
        if ids.size < 2:
            continue
        nll += _sequence_nll(model_fn, ids, check_normalized, atol)
        count += ids.size - 1
    if count == 0:
        raise ValueError("evaluate_lm: nothing to score (every sequence has fewer than 2 ids)")
    return LMEvaluation(nll, count)


def evaluate_perplexity(model_fn: ModelFn, data: Any, check_normalized: bool = True,
                        atol: float | None = None) -> float:
    """The perplexity of ``model_fn`` on ``data``: ``evaluate_lm(...).perplexity``."""
    return evaluate_lm(model_fn, data, check_normalized=check_normalized,
                       atol=atol).perplexity


def ngram_perplexity(model: Any, data: Any) -> float:
    """The perplexity of a fitted :class:`~tinygrad_rnn.lm.NGramLM` on ``data`` (a stream or
    a list of sequences), through the shared :func:`evaluate_lm`, so it is comparable with a
    neural LM scored on the same ids."""
    return evaluate_perplexity(model.token_log_probs, data)
