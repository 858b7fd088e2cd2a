"""Encoder-decoder (sequence-to-sequence) models, with and without attention.

One class, :class:`Seq2Seq`, covers the models an NLP course compares:

* an **encoder**: an RNN, GRU or LSTM layer (optionally bidirectional) over the embedded
  source tokens, run with the source lengths so padding never reaches any state;
* a **bridge**: ``s_0 = tanh(W_b [h_fwd; h_bwd] + b_b)`` maps the encoder's final state(s)
  (the forward direction's at the last real token, the backward direction's at the first) to
  the decoder's hidden size (for an LSTM the cell state gets its own bridge);
* a **decoder**, one of five, chosen by ``decoder=``:

  ========== ==================================================================================
  'init'     the summary ``c = [h_fwd; h_bwd]`` only sets the initial state s_0 (Sutskever et
             al. 2014): s_t = cell(y_{t-1}, s_{t-1}), logits = W_o s_t + b_o
  'input'    c is also fed to the recurrence at every step: s_t = cell([y_{t-1}; c], s_{t-1})
  'output'   and also to the output layer: logits = W_o [s_t; c] + b_o (Cho et al. 2014)
  'bahdanau' attention with the previous state as the query (Bahdanau et al. 2015):
             c_t = attend(s_{t-1}, H), s_t = cell([y_{t-1}; c_t], s_{t-1}),
             logits = W_o [s_t; c_t] + b_o; additive score by default
  'luong'    attention with the current state as the query (Luong et al. 2015):
             s_t = cell([y_{t-1}; h~_{t-1}], s_{t-1}) (input feeding), c_t = attend(s_t, H),
             h~_t = tanh(W_c [c_t; s_t]), logits = W_o h~_t + b_o; 'bilinear' ("general")
             score by default, 'dot' projects the keys to the decoder size first
  ========== ==================================================================================

  Here ``y_{t-1}`` is the embedding of the previous target token and ``H`` (N, S, E) the
  encoder outputs (E = hidden or 2 hidden). Source padding is masked in every attention step
  (``key_padding_mask``, True = padding), so padded source positions get weight exactly 0.

Training uses teacher forcing (``tgt_in`` = BOS + target is fed); ``teacher_forcing_ratio``
< 1 turns on scheduled sampling (Bengio et al. 2015): at every step after the first, each
sequence independently feeds back the model's own previous prediction (the argmax of its
logits) with probability ``1 - ratio``, drawn from a seeded generator.
:func:`teacher_forcing_schedule` gives the ratio as a decaying function of the update index.

Step-by-step decoding (greedy, sampling, beam search: :mod:`tinygrad_rnn.decoding`) uses the
same three methods as the training loop: :meth:`Seq2Seq.encode`,
:meth:`Seq2Seq.decode_step` and :meth:`Seq2Seq.reorder`.

Devices
-------
After ``model.to(device)`` everything runs on the parameters' device. Source ids, lengths and
``tgt_in`` are read on the host (they drive shapes and checks; Tensors of them are copied there
explicitly with ``.numpy()``), so pass them as host arrays: the embedding lookups copy the ids
to the device, the padding mask is built on the host and copied to the device once per batch
(:meth:`Seq2Seq.encode`), and :meth:`Seq2Seq.loss` copies host targets (a target Tensor on the
model's device is used where it is). Otherwise the only device -> host copy is scheduled
sampling's: the N predicted ids of each step, which are fed back as the next inputs.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from .. import _validate
from .. import functional as F
from ..backend import DEFAULT_FLOAT, get_array_module, to_device
from ..random import get_generator
from ..creation import cat, stack, zeros
from ..tensor import Tensor
from ._checks import host_lengths
from .attention import SCORES, Attention, attend
from .cells import GRUCell, LSTMCell, RNNCell
from ._checks import float_dtype
from ._checks import check_ids
from .layers import Embedding, Linear
from .module import Module
from .recurrent import GRU, LSTM, RNN

__all__ = ["Seq2Seq", "Memory", "DecoderState", "teacher_forcing_schedule", "DECODERS"]

DECODERS = ("init", "input", "output", "bahdanau", "luong")
_ATTENTION = ("bahdanau", "luong")
_LAYERS = {"rnn": (RNN, RNNCell), "gru": (GRU, GRUCell), "lstm": (LSTM, LSTMCell)}


class Memory(NamedTuple):
    """What the decoder reads from the encoder, one row per sequence (or beam hypothesis).

    Attributes
    ----------
    outputs : Tensor (N, S, E)
        Encoder outputs (zero at padded positions); the attention values.
    keys : Tensor (N, S, K)
        The attention keys: ``outputs``; their projection W_k h_j for the additive score
        (computed once per sentence instead of once per decoder step, as Bahdanau et al.
        suggest); or their projection to the decoder size for Luong's 'dot' score.
    padding : bool array (N, S)
        True at padded source positions; on the model's device.
    summary : Tensor (N, E)
        The fixed context c = [h_fwd; h_bwd] of the non-attention decoders.
    """

    outputs: Tensor
    keys: Tensor
    padding: Any
    summary: Tensor


class DecoderState(NamedTuple):
    """The recurrent decoder state: h (N, H), c (N, H) for an LSTM (else None), and Luong's
    attentional vector h~_{t-1} (N, H) fed to the next input (else None)."""

    h: Tensor
    c: Tensor | None
    feed: Tensor | None


def _rows(x: Any, index: Any) -> Any:
    """Rows ``index`` of a Tensor or array (None passes through); a host index is copied to
    the device of ``x``."""
    if x is None:
        return None
    if isinstance(x, Tensor):
        return x[index]
    return x[get_array_module(x).asarray(index)]


def teacher_forcing_schedule(step: int, total_steps: int, kind: str = "linear",
                             start: float = 1.0, end: float = 0.0, k: float = 10.0) -> float:
    """The teacher-forcing ratio (probability of feeding the true token) at update ``step``.

    Parameters
    ----------
    step, total_steps : int
        The update index (0-based) and the number of updates of the run.
    kind : {'constant', 'linear', 'inverse_sigmoid', 'exponential'}
        ``'constant'``: always ``start``. ``'linear'``: from ``start`` down to ``end`` over
        the run, ``start - (start - end) * step / (total_steps - 1)``. ``'inverse_sigmoid'``
        (Bengio et al. 2015): ``end + (start - end) * k / (k + exp(i / k))`` with
        ``i = step * 100 / total_steps`` (so ``k`` sets where the drop happens on a 0..100
        scale). ``'exponential'``: ``end + (start - end) * q**step`` with
        ``q = exp(log(0.01) / total_steps)`` (1% of the way left at the end).

    Returns
    -------
    float in [min(start, end), max(start, end)]
    """
    where = "teacher_forcing_schedule"
    step = _validate.size(step, "step", where, minimum=0)
    total_steps = _validate.size(total_steps, "total_steps", where)
    start = _validate.probability(start, "start", where)
    end = _validate.probability(end, "end", where)
    k = _validate.finite_real(k, "k", where)
    if kind == "constant":
        return float(start)
    if kind == "linear":
        frac = min(max(step / max(total_steps - 1, 1), 0.0), 1.0)
        return float(start - (start - end) * frac)
    if kind == "inverse_sigmoid":
        if k < 1.0:
            raise ValueError(f"teacher_forcing_schedule: k must be >= 1, got {k}")
        i = step * 100.0 / total_steps
        return float(end + (start - end) * k / (k + math.exp(i / k)))
    if kind == "exponential":
        q = math.exp(math.log(0.01) / total_steps)
        return float(end + (start - end) * q ** step)
    raise ValueError(f"teacher_forcing_schedule: kind must be 'constant', 'linear', "
                     f"'inverse_sigmoid' or 'exponential', got {kind!r}")


class Seq2Seq(Module):
    """Encoder-decoder model: recurrent encoder, bridge, and one of five decoders.

    Parameters
    ----------
    src_vocab, tgt_vocab : int
        Source and target vocabulary sizes.
    emb : int
        Embedding size (source and target embeddings are separate tables).
    hidden : int
        Hidden size H of the encoder (per direction) and of the decoder.
    cell : {'gru', 'lstm', 'rnn'}
        The recurrent cell of both encoder and decoder.
    bidirectional : bool
        Bidirectional encoder (encoder outputs of size E = 2H); default True.
    decoder : {'init', 'input', 'output', 'bahdanau', 'luong'}
        See the module docstring.
    score : {'additive', 'dot', 'scaled_dot', 'bilinear'}, optional
        The attention score; default 'additive' for 'bahdanau' and 'bilinear' for 'luong'.
    attn_hidden : int, optional
        Hidden size of the additive score (default H).
    pad_id, bos_id, eos_id : int
        Special target ids (defaults: those of :class:`tinygrad_rnn.data.Vocab`, 0, 2, 3),
        each in [0, tgt_vocab). ``pad_id`` is the padding id of both embeddings (so it is
        also below ``src_vocab``) and the ``ignore_index`` of :meth:`loss`.
    engine : {'fused', 'autograd'}
        The encoder layer's engine.
    dtype, generator
        Parameter dtype (float32 default) and the source of the initial values.

    Shapes
    ------
    forward(src (N, S) int, src_lengths (N,), tgt_in (N, T) int) -> (logits (N, T, V),
    weights (N, T, S) or None). ``weights[n, t]`` is the attention of output step t over the
    source (zero at padding); None for the decoders without attention.

    Examples
    --------
    >>> import numpy as np
    >>> import tinygrad_rnn as tr
    >>> model = tr.nn.Seq2Seq(10, 8, emb=4, hidden=6, decoder="bahdanau", generator=0)
    >>> src = np.array([[4, 5, 6], [7, 8, 0]])            # second row padded
    >>> tgt_in = np.array([[2, 4, 5], [2, 6, 0]])         # BOS + target
    >>> logits, weights = model(src, np.array([3, 2]), tgt_in)
    >>> logits.shape, weights.shape, float(weights.numpy()[1, :, 2].max())
    ((2, 3, 8), (2, 3, 3), 0.0)
    """

    def __init__(self, src_vocab: int, tgt_vocab: int, emb: int, hidden: int,
                 cell: str = "gru", bidirectional: bool = True, decoder: str = "bahdanau",
                 score: str | None = None, attn_hidden: int | None = None, pad_id: int = 0,
                 bos_id: int = 2, eos_id: int = 3, engine: str = "fused",
                 dtype: Any = DEFAULT_FLOAT, generator: Any = None) -> None:
        super().__init__()
        if cell not in _LAYERS:
            raise ValueError(f"Seq2Seq: cell must be one of {tuple(_LAYERS)}, got {cell!r}")
        if decoder not in DECODERS:
            raise ValueError(f"Seq2Seq: decoder must be one of {DECODERS}, got {decoder!r}")
        if score is not None and score not in SCORES:
            raise ValueError(f"Seq2Seq: score must be one of {SCORES} or None, got {score!r}")
        bidirectional = _validate.flag(bidirectional, "bidirectional", "Seq2Seq")
        if score is not None and decoder not in _ATTENTION:
            raise ValueError(f"Seq2Seq: score is only used by the attention decoders "
                             f"{_ATTENTION}, not {decoder!r}")
        src_vocab = _validate.size(src_vocab, "src_vocab", "Seq2Seq")
        tgt_vocab = _validate.size(tgt_vocab, "tgt_vocab", "Seq2Seq")
        emb = _validate.size(emb, "emb", "Seq2Seq")
        hidden = _validate.size(hidden, "hidden", "Seq2Seq")
        if attn_hidden is not None:
            attn_hidden = _validate.size(attn_hidden, "attn_hidden", "Seq2Seq")
            used = decoder == "bahdanau" and score in (None, "additive") or (
                decoder == "luong" and score == "additive")
            if not used:
                raise ValueError(
                    f"Seq2Seq: attn_hidden is the hidden size of the additive score, which "
                    f"decoder={decoder!r} with score={score!r} does not use; leave it None "
                    f"or choose score='additive'")
        # an eos_id outside the target vocabulary is never emitted (decoding would always run
        # to max_len), a bos_id outside it fails at the first decoder step: refuse both here
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if not 0 <= _validate.integer(value, name, "Seq2Seq") < tgt_vocab:
                raise ValueError(f"Seq2Seq: {name}={value} is outside the target vocabulary "
                                 f"[0, tgt_vocab) = [0, {tgt_vocab})")
        if not 0 <= _validate.integer(pad_id, "pad_id", "Seq2Seq") < min(src_vocab, tgt_vocab):
            raise ValueError(f"Seq2Seq: pad_id={pad_id} must be an id of both vocabularies, "
                             f"[0, min(src_vocab, tgt_vocab)) = [0, "
                             f"{min(src_vocab, tgt_vocab)})")
        dt = float_dtype(dtype, "Seq2Seq")
        rng = get_generator(generator)
        self.cell, self.decoder, self.bidirectional = cell, decoder, bool(bidirectional)
        self.hidden, self.emb = int(hidden), int(emb)
        self.src_vocab, self.tgt_vocab = int(src_vocab), int(tgt_vocab)
        self.pad_id, self.bos_id, self.eos_id = int(pad_id), int(bos_id), int(eos_id)
        layer_cls, cell_cls = _LAYERS[cell]
        H = self.hidden
        E = H * (2 if bidirectional else 1)
        self.enc_size = E
        self.src_embed = Embedding(src_vocab, emb, padding_idx=pad_id, dtype=dt, generator=rng)
        self.tgt_embed = Embedding(tgt_vocab, emb, padding_idx=pad_id, dtype=dt, generator=rng)
        self.encoder = layer_cls(emb, H, batch_first=True, bidirectional=bidirectional,
                                 engine=engine, dtype=dt, generator=rng)
        self.bridge = Linear(E, H, dtype=dt, generator=rng)
        if cell == "lstm":
            self.bridge_c = Linear(E, H, dtype=dt, generator=rng)
        dec_in = emb
        if decoder in ("input", "output", "bahdanau"):
            dec_in = emb + E
        elif decoder == "luong":
            dec_in = emb + H
        self.dec_cell = cell_cls(dec_in, H, dtype=dt, generator=rng)
        self.score = None
        if decoder in _ATTENTION:
            self.score = score or ("additive" if decoder == "bahdanau" else "bilinear")
            key_size = E
            if self.score in ("dot", "scaled_dot") and E != H:
                self.key_proj = Linear(E, H, bias=False, dtype=dt, generator=rng)
                key_size = H
            hid = attn_hidden if self.score == "additive" else None
            self.attention = Attention(self.score, H, key_size, value_size=E, hidden_size=hid,
                                       dtype=dt, generator=rng)
        if decoder == "luong":
            self.combine = Linear(E + H, H, dtype=dt, generator=rng)
            out_in = H
        elif decoder in ("output", "bahdanau"):
            out_in = H + E
        else:
            out_in = H
        self.out = Linear(out_in, tgt_vocab, dtype=dt, generator=rng)

    # ------------------------------------------------------------------ properties
    @property
    def uses_attention(self) -> bool:
        """Whether the decoder attends over the encoder outputs."""
        return self.decoder in _ATTENTION

    # ------------------------------------------------------------------ encoder
    def encode(self, src: Any, src_lengths: Any = None) -> tuple[DecoderState, Memory]:
        """Run the encoder and the bridge.

        Parameters
        ----------
        src : int array (N, S)
            Source ids, padded with ``pad_id`` after each sequence's length.
        src_lengths : int array (N,), optional
            True lengths (>= 1); default: all S.

        Returns
        -------
        (initial decoder state, memory)
        """
        ids = np.asarray(src.numpy() if isinstance(src, Tensor) else src)
        if ids.ndim != 2 or ids.dtype.kind not in "iu":
            raise ValueError(f"Seq2Seq: src must be an integer array (N, S), got shape "
                             f"{ids.shape} and dtype {ids.dtype}")
        check_ids("Seq2Seq", "src", ids, self.src_vocab, "src_vocab")
        N, S = ids.shape
        if src_lengths is None:
            lens = np.full(N, S, dtype=np.int64)
        else:
            lens = host_lengths(src_lengths, "Seq2Seq", "src_lengths").astype(np.int64)
        if lens.shape != (N,) or bool((lens < 1).any()) or bool((lens > S).any()):
            raise ValueError(f"Seq2Seq: src_lengths must be (N,) = ({N},) integers in "
                             f"[1, {S}], got {lens.tolist()}")
        x = self.src_embed(ids)                                             # (N, S, D)
        # the padding mask is built on the host and copied to the model's device once
        xp = get_array_module(x._data)
        padding = xp.asarray(np.arange(S)[None, :] >= lens[:, None])        # (N, S)
        out, hn = self.encoder(x, lengths=lens)                             # (N, S, E)
        if self.cell == "lstm":
            hn, cn = hn
        summary = hn[0] if not self.bidirectional else cat([hn[0], hn[1]], axis=-1)
        h0 = self.bridge(summary).tanh()                                    # (N, H)
        c0 = None
        if self.cell == "lstm":
            csum = cn[0] if not self.bidirectional else cat([cn[0], cn[1]], axis=-1)
            c0 = self.bridge_c(csum).tanh()
        feed = None
        if self.decoder == "luong":
            feed = zeros(N, self.hidden, dtype=out.dtype, device=out.device)
        keys = out
        if "key_proj" in self._modules:
            keys = self.key_proj(out)
        elif self.score == "additive":
            keys = self.attention.key_proj(out)                             # (N, S, A)
        return DecoderState(h0, c0, feed), Memory(out, keys, padding, summary)

    # ------------------------------------------------------------------ decoder
    def _attend(self, query: Tensor, memory: Memory) -> tuple[Tensor, Tensor]:
        """Context (N, E) and weights (N, S) of one decoder query (N, H)."""
        if self.score != "additive":
            return self.attention(query, memory.keys, memory.outputs,
                                  key_padding_mask=memory.padding)
        # the additive score with the keys projected once (memory.keys = W_k h_j): the same
        # numbers as self.attention(query, outputs, outputs, key_padding_mask=padding)
        att = self.attention
        qp = att.query_proj(query).unsqueeze(1)                             # (N, 1, A)
        scores = ((qp + memory.keys).tanh() @ att.v).unsqueeze(1)           # (N, 1, S)
        keep = ~memory.padding[:, None, :]                                  # (N, 1, S)
        context, weights = attend(scores, memory.outputs, keep)
        return context.squeeze(1), weights.squeeze(1)

    def _cell(self, x: Tensor, state: DecoderState) -> tuple[Tensor, Tensor | None]:
        if self.cell == "lstm":
            return self.dec_cell(x, (state.h, state.c))
        return self.dec_cell(x, state.h), None

    def decode_step(self, prev: Any, state: DecoderState,
                    memory: Memory) -> tuple[Tensor, DecoderState, Tensor | None]:
        """One decoder step.

        Parameters
        ----------
        prev : int array (N,)
            The previous target token (BOS at the first step): host ids (copied to the
            device by the embedding lookup), or ids already on the model's device.
        state : DecoderState
        memory : Memory

        Returns
        -------
        (logits (N, V), next state, attention weights (N, S) or None)
        """
        y = self.tgt_embed(prev)                                            # (N, D)
        weights = None
        feed = None
        if self.decoder == "init":
            h, c = self._cell(y, state)
            logits = self.out(h)
        elif self.decoder in ("input", "output"):
            h, c = self._cell(cat([y, memory.summary], axis=-1), state)
            z = h if self.decoder == "input" else cat([h, memory.summary], axis=-1)
            logits = self.out(z)
        elif self.decoder == "bahdanau":
            context, weights = self._attend(state.h, memory)                # (N, E), (N, S)
            h, c = self._cell(cat([y, context], axis=-1), state)
            logits = self.out(cat([h, context], axis=-1))
        else:                                                               # luong
            h, c = self._cell(cat([y, state.feed], axis=-1), state)
            context, weights = self._attend(h, memory)
            feed = self.combine(cat([context, h], axis=-1)).tanh()          # (N, H)
            logits = self.out(feed)
        return logits, DecoderState(h, c, feed), weights

    @staticmethod
    def reorder(state_or_memory: Any, index: Any) -> Any:
        """Rows ``index`` of a :class:`DecoderState` or :class:`Memory` (beam search uses it to
        expand a sentence into beams and to follow back-pointers). ``index`` is a host int
        array (copied to the device) or an int array or Tensor on the model's device."""
        idx = index._data if isinstance(index, Tensor) else index
        if get_array_module(idx) is np:
            idx = np.asarray(idx, dtype=np.int64)
        return type(state_or_memory)(*(_rows(x, idx) for x in state_or_memory))

    # ------------------------------------------------------------------ training
    def forward(self, src: Any, src_lengths: Any, tgt_in: Any,
                teacher_forcing_ratio: float = 1.0,
                generator: Any = None) -> tuple[Tensor, Tensor | None]:
        """Decode ``tgt_in`` (BOS + target) with teacher forcing or scheduled sampling.

        Parameters
        ----------
        src, src_lengths
            As :meth:`encode`.
        tgt_in : int array (N, T)
            Decoder inputs: BOS followed by the target (positions past a target's end may
            hold anything; they only influence outputs at later, padded, positions).
        teacher_forcing_ratio : float in [0, 1]
            1 (default): always feed ``tgt_in[:, t]``. Otherwise, for t >= 1 each sequence
            feeds the argmax of its own step-(t-1) logits with probability 1 - ratio.
        generator : int or numpy Generator, optional
            Source of the scheduled-sampling coin flips (ratio < 1 only).

        Returns
        -------
        (logits (N, T, V), weights (N, T, S) or None)
        """
        tgt = np.asarray(tgt_in.numpy() if isinstance(tgt_in, Tensor) else tgt_in)
        if tgt.ndim != 2 or tgt.dtype.kind not in "iu":
            raise ValueError(f"Seq2Seq: tgt_in must be an integer array (N, T), got shape "
                             f"{tgt.shape} and dtype {tgt.dtype}")
        if tgt.shape[1] == 0:
            raise ValueError(f"Seq2Seq: tgt_in must have at least one step (BOS first), got "
                             f"shape {tgt.shape}")
        check_ids("Seq2Seq", "tgt_in", tgt, self.tgt_vocab, "tgt_vocab")
        teacher_forcing_ratio = _validate.probability(
            teacher_forcing_ratio, "teacher_forcing_ratio", "Seq2Seq")
        state, memory = self.encode(src, src_lengths)
        N, T = tgt.shape
        if N != memory.padding.shape[0]:
            raise ValueError(f"Seq2Seq: tgt_in has {N} rows but src has "
                             f"{memory.padding.shape[0]}")
        rng = get_generator(generator) if teacher_forcing_ratio < 1.0 else None
        logits_t: list[Tensor] = []
        weights_t: list[Any] = []
        prev = tgt[:, 0]
        for t in range(T):
            if t > 0:
                prev = tgt[:, t]
                if rng is not None:
                    own = rng.random(N) >= teacher_forcing_ratio                # (N,) bool
                    # the one device -> host copy of a step: the N predicted ids, fed back
                    z = logits_t[-1]._data                                       # (N, V)
                    pred = to_device(get_array_module(z).argmax(z, axis=-1), "cpu")
                    prev = np.where(own, pred, prev)
            logits, state, weights = self.decode_step(prev, state, memory)
            logits_t.append(logits)
            if weights is not None:
                weights_t.append(weights)
        logits = stack(logits_t, axis=1)                                    # (N, T, V)
        weights = stack(weights_t, axis=1) if weights_t else None          # (N, T, S)
        return logits, weights

    def loss(self, src: Any, src_lengths: Any, tgt_in: Any, tgt_out: Any,
             teacher_forcing_ratio: float = 1.0, generator: Any = None) -> Tensor:
        """Mean token cross entropy of ``tgt_out`` (target + EOS, padded with ``pad_id``),
        padding ignored (``ignore_index=pad_id``)."""
        logits, _ = self.forward(src, src_lengths, tgt_in, teacher_forcing_ratio, generator)
        N, T, V = logits.shape
        target = tgt_out if isinstance(tgt_out, Tensor) else np.asarray(tgt_out)
        if tuple(target.shape) != (N, T):
            raise ValueError(f"Seq2Seq: tgt_out of shape {target.shape} does not match "
                             f"tgt_in of shape {(N, T)}")
        return F.cross_entropy(logits.reshape(N * T, V), target.reshape(-1),
                               ignore_index=self.pad_id)

    def extra_repr(self) -> str:
        s = (f"cell={self.cell!r}, decoder={self.decoder!r}, hidden={self.hidden}, "
             f"bidirectional={self.bidirectional}")
        if self.score is not None:
            s += f", score={self.score!r}"
        return s
