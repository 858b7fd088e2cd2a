"""Text data: vocabularies, tokenizers, language-model batching and dataset splits.

Everything here works on plain Python strings and NumPy ``int64`` id arrays; nothing imports
the autograd engine, so the same ids feed a count-based n-gram model and a recurrent LM.

Special tokens
--------------
Every :class:`Vocab` starts with four special tokens, always with the same ids:

====  ==========  ===============================================================
 id    token       meaning
====  ==========  ===============================================================
 0     ``<pad>``   padding of sentence batches (:func:`pad_batch`); never a target
 1     ``<unk>``   any token that is not in the vocabulary
 2     ``<s>``     beginning of a sentence (also the left padding of n-gram contexts)
 3     ``</s>``    end of a sentence
====  ==========  ===============================================================

Batching a stream for stateful truncated BPTT
---------------------------------------------
A language model trained on one long text carries its hidden state from one window to the
next. :func:`lm_stream` cuts the id stream into N contiguous rows ("batchify")::

    ids      = w0 w1 w2 ... w_{NL}              (N L + 1 ids used, the rest dropped)
    inputs   = ids[0 : N L].reshape(N, L)        row r is w_{rL} ... w_{rL+L-1}
    targets  = ids[1 : N L + 1].reshape(N, L)    the same, shifted by one token

so ``targets[r, t]`` is the token after ``inputs[r, t]``, row r of the batch continues row r
of the previous window, and every one of the N L targets appears exactly once.
:func:`lm_stream_batches` yields windows of ``bptt_len`` columns of that pair, in order;
to run a schedule of ``tinygrad_rnn.truncation`` instead, hand it the whole pair
(time along axis 1).
"""
from __future__ import annotations

import json
import operator
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Mapping, Sequence, TypeVar, overload

import numpy as np

from .. import _validate
from ..io import atomic_write
from ..random import get_generator

__all__ = [
    "PAD", "UNK", "BOS", "EOS", "SPECIAL_TOKENS", "PAD_ID", "UNK_ID", "BOS_ID", "EOS_ID",
    "Vocab", "CharTokenizer", "WordTokenizer", "batchify", "lm_stream", "lm_stream_batches",
    "pad_batch", "train_valid_test_split", "split_stream", "split_sizes", "read_text_file",
]

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
#: The special tokens, in id order: ``SPECIAL_TOKENS[i]`` has id ``i`` in every Vocab.
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

_VOCAB_FORMAT = "tinygrad_rnn.vocab"
_VOCAB_VERSION = 1

T = TypeVar("T")


# ------------------------------------------------------------------------------ file helpers
def read_text_file(path: str | os.PathLike, what: str = "text file") -> str:
    """Read a UTF-8 text file, raising an error that names the path and the problem.

    Raises
    ------
    FileNotFoundError
        The path does not exist.
    IsADirectoryError
        The path is a directory.
    PermissionError / OSError
        The file exists but cannot be read.
    ValueError
        The bytes are not valid UTF-8 (the message gives the offset of the first bad byte).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} {str(p)!r}: no such file")
    if p.is_dir():
        raise IsADirectoryError(f"{what} {str(p)!r}: is a directory, expected a file")
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise type(exc)(f"{what} {str(p)!r}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} {str(p)!r}: not UTF-8 text (invalid byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start}); is it a binary file?"
        ) from exc


def _atomic_write_text(path: str | os.PathLike, text: str, what: str = "write") -> None:
    """Write ``text`` as UTF-8 to ``path`` with :func:`tinygrad_rnn.io.atomic_write`: all or
    nothing, through symlinks, never over a read-only file, and the temporary files of
    killed writers in the folder are removed. ``what`` names the caller in errors."""
    data = text.encode("utf-8")  # fails before the file system is touched
    atomic_write(path, lambda f: f.write(data), what)


# ------------------------------------------------------------------------------------ Vocab
class Vocab:
    """A token <-> id mapping with the four special tokens at ids 0..3.

    Ids 0, 1, 2, 3 are always ``<pad>``, ``<unk>``, ``<s>``, ``</s>`` (see the module
    docstring); regular tokens follow. Build one from data with :meth:`build` (from a token
    iterable) or :meth:`from_counts` (from a token -> count mapping): tokens are ordered by
    count, most frequent first, ties broken by the token string, so the same data always gives
    the same ids.

    Parameters
    ----------
    tokens : sequence of str
        The regular tokens in id order (ids 4, 5, ...). Must be distinct and must not contain
        a special token.

    Examples
    --------
    >>> v = Vocab.build("abracadabra")
    >>> v.tokens[4:]
    ['a', 'b', 'r', 'c', 'd']
    >>> v.encode(list("abz")).tolist()
    [4, 5, 1]
    >>> v.decode([4, 5, 1])
    ['a', 'b', '<unk>']
    """

    def __init__(self, tokens: Sequence[str] = ()) -> None:
        if isinstance(tokens, (bytes, Mapping)) or not hasattr(tokens, "__iter__"):
            raise TypeError(f"Vocab: tokens must be a sequence of str, got "
                            f"{type(tokens).__name__}")
        itos = list(SPECIAL_TOKENS)
        stoi = {tok: i for i, tok in enumerate(itos)}
        for tok in tokens:
            if not isinstance(tok, str):
                raise TypeError(f"Vocab: tokens must be str, got {type(tok).__name__} {tok!r}")
            if tok in stoi:
                kind = "a special token" if tok in SPECIAL_TOKENS else "a duplicate"
                raise ValueError(f"Vocab: token {tok!r} is {kind}")
            stoi[tok] = len(itos)
            itos.append(tok)
        self._itos = itos
        self._stoi = stoi

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_freq: int = 1,
                    max_size: int | None = None) -> "Vocab":
        """Build a vocabulary from token counts.

        Parameters
        ----------
        counts : mapping str -> int
            How often each token occurs. Special-token strings in it are ignored (they
            already have ids 0..3).
        min_freq : int
            Keep tokens that occur at least this often (>= 1).
        max_size : int, optional
            The largest vocabulary size, the four special tokens included (>= 4); the most
            frequent tokens are kept.
        """
        check_vocab_limits(min_freq, max_size, "Vocab.from_counts")
        kept = [(tok, int(c)) for tok, c in counts.items()
                if c >= min_freq and tok not in SPECIAL_TOKENS]
        kept.sort(key=lambda tc: (-tc[1], tc[0]))  # frequency desc, then token
        if max_size is not None:
            kept = kept[: max_size - len(SPECIAL_TOKENS)]
        return cls([tok for tok, _ in kept])

    @classmethod
    def build(cls, tokens: Iterable[str] | Iterable[Iterable[str]], min_freq: int = 1,
              max_size: int | None = None) -> "Vocab":
        """Count ``tokens`` (a flat iterable of str, or an iterable of token lists, e.g.
        sentences) and build a vocabulary with :meth:`from_counts`."""
        check_vocab_limits(min_freq, max_size, "Vocab.build")
        if isinstance(tokens, bytes) or not hasattr(tokens, "__iter__"):
            raise TypeError(f"Vocab.build: tokens must be an iterable of str (or of token "
                            f"lists), got {type(tokens).__name__}")
        counts: Counter[str] = Counter()
        for item in tokens:
            if isinstance(item, str):
                counts[item] += 1
            else:
                counts.update(item)
        return cls.from_counts(counts, min_freq=min_freq, max_size=max_size)

    # ---------------------------------------------------------------- lookups
    @property
    def tokens(self) -> list[str]:
        """All tokens in id order (a copy), the special tokens first."""
        return list(self._itos)

    pad_id = PAD_ID
    unk_id = UNK_ID
    bos_id = BOS_ID
    eos_id = EOS_ID

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return token in self._stoi

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Vocab):
            return NotImplemented
        return self._itos == other._itos

    __hash__ = None  # type: ignore[assignment]  # mutable-looking container: not hashable

    def __repr__(self) -> str:
        shown = ", ".join(repr(t) for t in self._itos[4:10])
        more = ", ..." if len(self._itos) > 10 else ""
        return f"Vocab(size={len(self)}, tokens=[{shown}{more}])"

    def token_to_id(self, token: str) -> int:
        """The id of ``token``; ``<unk>``'s id (1) when it is not in the vocabulary."""
        return self._stoi.get(token, UNK_ID)

    def id_to_token(self, index: int) -> str:
        """The token with id ``index``: anything integer (a Python or NumPy int, a 0-d integer
        array such as ``np.array(4)``; whatever ``operator.index`` accepts). A bool, a float
        (refused, not truncated) or anything else is a TypeError; an id out of range an
        IndexError."""
        refused = TypeError(f"Vocab.id_to_token: id must be an integer, got {index!r}")
        if isinstance(index, (bool, np.bool_)):  # operator.index would take True as 1
            raise refused
        try:
            i = operator.index(index)  # 0-d bool and float arrays raise TypeError too
        except TypeError:
            raise refused from None
        if not 0 <= i < len(self._itos):
            raise IndexError(f"Vocab.id_to_token: id {i} out of range for a vocabulary of "
                             f"size {len(self)}")
        return self._itos[i]

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """Token ids as a 1-D ``int64`` array; unknown tokens map to ``<unk>`` (id 1)."""
        if isinstance(tokens, bytes) or not hasattr(tokens, "__iter__"):
            raise TypeError(f"Vocab.encode: tokens must be an iterable of str, got "
                            f"{type(tokens).__name__}")
        get = self._stoi.get
        ids = []
        for tok in tokens:
            if not isinstance(tok, str):
                raise TypeError(f"Vocab.encode: tokens must be str, got {type(tok).__name__} "
                                f"{tok!r}")
            ids.append(get(tok, UNK_ID))
        return np.array(ids, dtype=np.int64)

    # for type checkers: a list of tokens by default, a str with as_string=True
    @overload
    def decode(self, ids: Iterable[int] | np.ndarray, as_string: Literal[False] = ...,
               sep: str = ...) -> list[str]: ...
    @overload
    def decode(self, ids: Iterable[int] | np.ndarray, as_string: Literal[True],
               sep: str = ...) -> str: ...
    @overload
    def decode(self, ids: Iterable[int] | np.ndarray, as_string: bool = ...,
               sep: str = ...) -> list[str] | str: ...

    def decode(self, ids: Iterable[int] | np.ndarray, as_string: bool = False,
               sep: str = "") -> list[str] | str:
        """The tokens of ``ids`` (a 1-D sequence of ints); IndexError for an id out of range.

        By default (``as_string=False``, unchanged) the result is the list of tokens. With
        ``as_string=True`` it is one string, the tokens joined by ``sep``: ``""`` (the
        default) for characters, ``" "`` for words. ``sep`` without ``as_string=True`` is
        a ValueError, since a list of tokens has nothing to join.
        """
        if not isinstance(as_string, (bool, np.bool_)):
            raise TypeError(f"Vocab.decode: as_string must be True or False, got "
                            f"{as_string!r} ({type(as_string).__name__})")
        if not isinstance(sep, str):
            raise TypeError(f"Vocab.decode: sep must be a str, got {type(sep).__name__}")
        if sep and not as_string:
            raise ValueError(f"Vocab.decode: sep={sep!r} is used only with as_string=True "
                             f"(the default returns the list of tokens)")
        arr = id_sequence(ids, "Vocab.decode")
        if arr.size and (arr.min() < 0 or arr.max() >= len(self._itos)):
            bad = int(arr[(arr < 0) | (arr >= len(self._itos))][0])
            raise IndexError(f"Vocab.decode: id {bad} out of range for a vocabulary of size "
                             f"{len(self)}")
        tokens = [self._itos[i] for i in arr.tolist()]
        return sep.join(tokens) if as_string else tokens

    # ---------------------------------------------------------------- persistence
    def to_json(self, path: str | os.PathLike) -> None:
        """Save to a JSON file, written like ``tr.save``: atomically (temporary file, then
        ``os.replace``), through a symlink, never over a read-only file.

        Tokens are written as UTF-8 text; if one holds a lone surrogate (a valid Python and
        JSON string that UTF-8 cannot encode, e.g. from ``os.fsdecode`` of undecodable
        bytes), the whole file is written with ``\\uXXXX`` escapes instead, so that
        :meth:`from_json` gives back exactly these tokens.

        Raises
        ------
        IsADirectoryError, FileNotFoundError, PermissionError, ValueError, OSError
            As ``tr.save``: ``path`` is a directory, its folder is missing, it is read-only,
            it is a FIFO or device, ...; every message names ``path``.
        """
        payload = {"format": _VOCAB_FORMAT, "version": _VOCAB_VERSION,
                   "tokens": self._itos}
        text = json.dumps(payload, ensure_ascii=False, indent=0) + "\n"
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escape everything non-ASCII
            text = json.dumps(payload, ensure_ascii=True, indent=0) + "\n"
        _atomic_write_text(path, text, what="Vocab.to_json")

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "Vocab":
        """Load a vocabulary saved by :meth:`to_json`.

        Raises FileNotFoundError / IsADirectoryError / OSError when the file cannot be read
        and ValueError when it is not a valid vocabulary file; every message names the path.
        """
        text = read_text_file(path, what="vocab file")
        where = f"vocab file {str(path)!r}"
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: invalid JSON ({exc.msg} at line {exc.lineno}, column "
                             f"{exc.colno})") from exc
        except RecursionError:
            raise ValueError(f"{where}: invalid vocabulary (JSON nested too deeply to "
                             f"parse)") from None
        if not isinstance(payload, dict) or payload.get("format") != _VOCAB_FORMAT:
            raise ValueError(f"{where}: not a tinygrad_rnn vocabulary (expected a JSON object "
                             f"with \"format\": \"{_VOCAB_FORMAT}\")")
        version = payload.get("version")
        if type(version) is not int or version != _VOCAB_VERSION:  # not True, not 1.0
            raise ValueError(f"{where}: unsupported version {version!r} (this code reads "
                             f"version {_VOCAB_VERSION}, the integer)")
        tokens = payload.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise ValueError(f"{where}: \"tokens\" must be a list of strings")
        if tuple(tokens[: len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f"{where}: the first tokens must be the special tokens "
                             f"{list(SPECIAL_TOKENS)}, got {tokens[:len(SPECIAL_TOKENS)]}")
        try:
            return cls(tokens[len(SPECIAL_TOKENS):])
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from exc


# ------------------------------------------------------------------------------- tokenizers
def _check_lowercase(value: Any, owner: str) -> bool:
    """``lowercase`` as a bool (Python or NumPy); ``'no'`` would be truthy."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: lowercase must be True or False, got {value!r} "
                        f"({type(value).__name__})")
    return bool(value)


def _check_text(text: Any, where: str) -> str:
    if not isinstance(text, str):
        hint = " (decode bytes first, e.g. data.decode('utf-8'))" if isinstance(
            text, (bytes, bytearray)) else ""
        raise TypeError(f"{where}: text must be a str, got {type(text).__name__}{hint}")
    return text


class CharTokenizer:
    """Character-level tokenizer: every Unicode code point is a token.

    ``detokenize(tokenize(text)) == text`` exactly (when ``lowercase`` is False; with it, the
    result is ``text.lower()``).
    """

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = _check_lowercase(lowercase, "CharTokenizer")

    def tokenize(self, text: str) -> list[str]:
        """The characters of ``text`` (lowercased first if ``lowercase``)."""
        text = _check_text(text, "CharTokenizer.tokenize")
        if self.lowercase:
            text = text.lower()
        return list(text)

    def detokenize(self, tokens: Iterable[str]) -> str:
        """Concatenate the characters."""
        return "".join(tokens)

    def __repr__(self) -> str:
        return f"CharTokenizer(lowercase={self.lowercase})"


_WORD_RE = re.compile(r"\w+|[^\w\s]")


class WordTokenizer:
    """Word-level tokenizer: runs of word characters (letters, digits, underscore) and single
    punctuation characters are tokens; whitespace only separates tokens and is dropped.

    ``"Don't panic!"`` gives ``['Don', "'", 't', 'panic', '!']``.

    Round trip: :meth:`detokenize` joins the tokens with single spaces, so the original
    whitespace and the attachment of punctuation are lost (``"Don ' t panic !"``), but the
    tokens survive: ``tokenize(detokenize(tokenize(text))) == tokenize(text)`` for every text.
    """

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = _check_lowercase(lowercase, "WordTokenizer")

    def tokenize(self, text: str) -> list[str]:
        """The word and punctuation tokens of ``text`` (lowercased first if ``lowercase``)."""
        text = _check_text(text, "WordTokenizer.tokenize")
        if self.lowercase:
            text = text.lower()
        return _WORD_RE.findall(text)

    def detokenize(self, tokens: Iterable[str]) -> str:
        """The tokens joined by single spaces (see the class docstring for the round trip)."""
        return " ".join(tokens)

    def __repr__(self) -> str:
        return f"WordTokenizer(lowercase={self.lowercase})"


# --------------------------------------------------------------------------------- batching
def id_sequence(ids: Any, where: str) -> np.ndarray:
    """``ids`` as a 1-D NumPy array of integers (an empty one may have any dtype): a
    ValueError for another shape and a TypeError for non-integer ids, naming ``where``.
    Shared by the decoders of vocabularies and tasks and by the n-gram model."""
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{where}: expected a 1-D sequence of ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{where}: ids must be integers, got dtype {arr.dtype}")
    return arr


def _as_id_stream(ids: Any, where: str) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"{where}: expected a 1-D stream of token ids, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{where}: token ids must be integers, got dtype {arr.dtype}")
    if arr.size:
        # ids are >= 0 and fit int64 (a uint64 id above 2**63 - 1 would wrap to a negative)
        bad = np.flatnonzero((arr < 0) | (arr > np.iinfo(np.int64).max))
        if bad.size:
            raise ValueError(f"{where}: token ids must be in [0, 2**63), got {arr[bad[0]]} at "
                             f"position {bad[0]}")
    return arr.astype(np.int64, copy=False)


def check_vocab_limits(min_freq: Any, max_size: Any, where: str) -> None:
    """``min_freq`` an integer >= 1 and ``max_size`` None or an integer >= 4 (it counts the
    special tokens); ValueErrors naming ``where``."""
    if isinstance(min_freq, bool) or not isinstance(min_freq, (int, np.integer)) \
            or min_freq < 1:
        raise ValueError(f"{where}: min_freq must be an integer >= 1, got {min_freq!r}")
    if max_size is not None and (isinstance(max_size, bool)
                                 or not isinstance(max_size, (int, np.integer))
                                 or max_size < len(SPECIAL_TOKENS)):
        raise ValueError(
            f"{where}: max_size counts the {len(SPECIAL_TOKENS)} special tokens and must be "
            f"an integer >= {len(SPECIAL_TOKENS)}, got {max_size!r}"
        )


def batchify(ids: Any, batch_size: int) -> np.ndarray:
    """The classic "batchify": the stream cut into ``batch_size`` contiguous rows.

    Row r is ``ids[r L : (r + 1) L]`` with ``L = len(ids) // batch_size``; the last
    ``len(ids) % batch_size`` ids are dropped. Returns an ``int64`` array of shape (N, L).
    """
    where = "batchify"
    arr = _as_id_stream(ids, where)
    n = _validate.positive_int(batch_size, "batch_size", where)
    length = arr.size // n
    if length == 0:
        raise ValueError(f"{where}: a stream of {arr.size} ids is too short for "
                         f"batch_size={n}")
    return arr[: n * length].reshape(n, length)


def lm_stream(ids: Any, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole stream as an (inputs, targets) pair for stateful truncated BPTT.

    ``inputs = ids[:N L].reshape(N, L)`` and ``targets = ids[1:N L + 1].reshape(N, L)`` with
    ``L = (len(ids) - 1) // N``: ``targets[r, t]`` is the token after ``inputs[r, t]``, and
    every row is a contiguous piece of the text that continues across windows. Hand the pair
    to a ``tinygrad_rnn.truncation`` schedule with the time axis 1 (batch first).

    Returns two ``int64`` arrays of shape (N, L).
    """
    where = "lm_stream"
    arr = _as_id_stream(ids, where)
    n = _validate.positive_int(batch_size, "batch_size", where)
    length = (arr.size - 1) // n if arr.size else 0
    if length < 1:
        raise ValueError(f"{where}: a stream of {arr.size} ids is too short for "
                         f"batch_size={n} (need at least {n + 1})")
    inputs = arr[: n * length].reshape(n, length)        # (N, L)
    targets = arr[1: n * length + 1].reshape(n, length)  # (N, L)
    return inputs, targets


def lm_stream_batches(ids: Any, batch_size: int,
                      bptt_len: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (x, y) windows of the :func:`lm_stream` pair for stateful truncated BPTT.

    Window j is ``x = inputs[:, j k : (j + 1) k]`` and ``y = targets[:, j k : (j + 1) k]``
    with ``k = bptt_len`` (the last window may be shorter), both (N, k) ``int64``: row r of
    each window continues row r of the previous one, so carry (and detach) the hidden state
    between windows. Over all windows every id of ``ids[1 : N L + 1]`` is a target exactly
    once, in order, and ``y`` is ``x`` shifted by one token.
    """
    where = "lm_stream_batches"
    k = _validate.positive_int(bptt_len, "bptt_len", where)
    inputs, targets = lm_stream(ids, batch_size)
    for start in range(0, inputs.shape[1], k):
        yield inputs[:, start: start + k], targets[:, start: start + k]


def pad_batch(sequences: Sequence[Any],
              pad_id: int = PAD_ID) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pad variable-length id sequences (sentences) into one batch.

    Returns
    -------
    padded : (N, T) int64
        Row i holds ``sequences[i]`` followed by ``pad_id``; T is the longest length.
    lengths : (N,) int64
        The true lengths.
    mask : (N, T) bool
        True at real tokens, False at padding (``mask[i, t] == t < lengths[i]``).

    ``pad_id`` is an integer (a negative one such as -100 is allowed, e.g. to pad targets
    with an ``ignore_index``); a float or a bool is refused, not truncated.
    """
    where = "pad_batch"
    if isinstance(pad_id, (bool, np.bool_)) or not isinstance(pad_id, (int, np.integer)):
        raise ValueError(f"{where}: pad_id must be an integer id, got {pad_id!r}")
    if isinstance(sequences, (str, bytes)) or not hasattr(sequences, "__len__"):
        raise TypeError(f"{where}: sequences must be a list of 1-D id sequences, got "
                        f"{type(sequences).__name__}")
    if len(sequences) == 0:
        raise ValueError(f"{where}: need at least one sequence")
    arrays = []
    for i, seq in enumerate(sequences):
        arr = np.asarray(seq)
        if arr.ndim != 1:
            raise ValueError(f"{where}: sequence {i} must be 1-D, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{where}: sequence {i} must hold integer ids, got {arr.dtype}")
        if arr.size and arr.dtype == np.uint64 and arr.max() > np.iinfo(np.int64).max:
            raise ValueError(f"{where}: sequence {i} holds id {arr.max()}, which does not fit "
                             f"the int64 batch (ids must be below 2**63)")
        arrays.append(arr)
    lengths = np.array([a.size for a in arrays], dtype=np.int64)        # (N,)
    width = int(lengths.max())
    padded = np.full((len(arrays), width), pad_id, dtype=np.int64)      # (N, T)
    for i, arr in enumerate(arrays):
        padded[i, : arr.size] = arr
    mask = np.arange(width)[None, :] < lengths[:, None]                 # (N, T)
    return padded, lengths, mask


# ----------------------------------------------------------------------------------- splits
def split_sizes(n: int, fractions: Sequence[float], where: str = "split_sizes") -> list[int]:
    """Sizes of consecutive parts of ``n`` items: part i ends at ``round(n * (f_0 + ... +
    f_i))``, so the sizes add up to n exactly. ``n`` is an integer >= 0; ``fractions`` are
    >= 0 and sum to 1. Errors name ``where`` (the public function called)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"{where}: n must be an integer >= 0, got {n!r}")
    n = int(n)
    if isinstance(fractions, (str, bytes)) or not hasattr(fractions, "__iter__") or any(
            isinstance(f, (bool, np.bool_)) or not isinstance(
                f, (int, float, np.integer, np.floating)) for f in fractions):
        raise TypeError(f"{where}: fractions must be a sequence of numbers, got "
                        f"{fractions!r}")
    fr = [float(f) for f in fractions]
    if len(fr) == 0 or any(not np.isfinite(f) or f < 0 for f in fr):
        raise ValueError(f"{where}: fractions must be non-negative numbers, got "
                         f"{fractions!r}")
    if abs(sum(fr) - 1.0) > 1e-9:
        raise ValueError(f"{where}: fractions must sum to 1, got {fractions!r} "
                         f"(sum {sum(fr)!r})")
    bounds = [0]
    acc = 0.0
    for f in fr[:-1]:
        acc += f
        bounds.append(min(n, int(round(n * acc))))
    bounds.append(n)
    return [b - a for a, b in zip(bounds[:-1], bounds[1:])]


def train_valid_test_split(items: Sequence[T], fractions: Sequence[float] = (0.8, 0.1, 0.1),
                           generator: Any = 0) -> tuple[list[T], ...]:
    """Shuffle ``items`` (e.g. sentences) with a seeded generator and cut them into parts.

    Parameters
    ----------
    items : sequence
    fractions : sequence of float
        Part sizes as fractions of ``len(items)`` (>= 0, summing to 1); see
        :func:`split_sizes`. The default gives train / valid / test.
    generator : int, numpy.random.Generator or None
        The shuffle's seed. The default 0 makes the split the same in every run; None draws
        from the package's default generator (see ``tinygrad_rnn.manual_seed``).

    Returns
    -------
    one list per fraction; together they hold every item exactly once.
    """
    rng = get_generator(generator)
    items = list(items)
    sizes = split_sizes(len(items), fractions, "train_valid_test_split")
    order = rng.permutation(len(items))
    parts = []
    start = 0
    for size in sizes:
        parts.append([items[i] for i in order[start: start + size]])
        start += size
    return tuple(parts)


def split_stream(ids: Any, fractions: Sequence[float] = (0.8, 0.1, 0.1)) -> tuple[np.ndarray, ...]:
    """Cut a token stream into contiguous parts (no shuffling): the first part is the
    beginning of the text, the last its end, so held-out text is never interleaved with
    training text. Sizes as in :func:`split_sizes`; returns views of the ``int64`` stream."""
    arr = _as_id_stream(ids, "split_stream")
    sizes = split_sizes(arr.size, fractions, "split_stream")
    parts = []
    start = 0
    for size in sizes:
        parts.append(arr[start: start + size])
        start += size
    return tuple(parts)
