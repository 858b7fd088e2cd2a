"""Text data (tinygrad_rnn/data/text.py).

* Vocab: special tokens at ids 0..3, deterministic order (count desc, then token), min_freq,
  max_size, unknown tokens -> <unk>, decode, JSON round trip, atomic save, clear errors for
  unreadable or invalid vocab files;
* tokenizers: char level round trip exact (hypothesis over text), word level token round trip;
* stateful LM batching: the stream is covered exactly once, in order, y is x shifted by one;
* pad_batch: lengths and mask; splits: deterministic, disjoint, covering; contiguous streams.
"""
from __future__ import annotations

import doctest
import json
import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tinygrad_rnn.data.text as text_module
from tinygrad_rnn.data import (
    BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, CharTokenizer, Vocab, WordTokenizer,
    batchify, lm_stream, lm_stream_batches, pad_batch, split_stream, train_valid_test_split,
)
from tinygrad_rnn.data.text import split_sizes


def test_docstring_examples() -> None:
    result = doctest.testmod(text_module)
    assert result.attempted > 0 and result.failed == 0


# --------------------------------------------------------------------------------------------
# Vocab
# --------------------------------------------------------------------------------------------
def test_special_tokens_have_fixed_ids() -> None:
    v = Vocab.build(["x", "y"])
    assert SPECIAL_TOKENS == ("<pad>", "<unk>", "<s>", "</s>")
    assert [v.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert (v.pad_id, v.unk_id, v.bos_id, v.eos_id) == (0, 1, 2, 3)
    assert v.tokens[:4] == list(SPECIAL_TOKENS)


def test_vocab_order_is_count_desc_then_token() -> None:
    counts = {"b": 3, "a": 3, "c": 5, "d": 1, "e": 3}
    v = Vocab.from_counts(counts)
    assert v.tokens[4:] == ["c", "a", "b", "e", "d"]
    # the insertion order of the counts does not matter
    assert Vocab.from_counts(dict(reversed(list(counts.items())))) == v


def test_vocab_min_freq_and_max_size() -> None:
    counts = Counter({"a": 5, "b": 4, "c": 2, "d": 1, "e": 1})
    assert Vocab.from_counts(counts, min_freq=2).tokens[4:] == ["a", "b", "c"]
    assert Vocab.from_counts(counts, min_freq=5).tokens[4:] == ["a"]
    assert Vocab.from_counts(counts, min_freq=6).tokens[4:] == []
    v = Vocab.from_counts(counts, max_size=6)
    assert len(v) == 6 and v.tokens[4:] == ["a", "b"]
    assert len(Vocab.from_counts(counts, max_size=4)) == 4
    with pytest.raises(ValueError, match="max_size"):
        Vocab.from_counts(counts, max_size=3)
    with pytest.raises(ValueError, match="min_freq"):
        Vocab.from_counts(counts, min_freq=0)


def test_vocab_build_from_sentences_and_ignores_special_strings() -> None:
    v = Vocab.build([["a", "b"], ["a", "<unk>", "</s>"]])
    assert v.tokens == list(SPECIAL_TOKENS) + ["a", "b"]
    assert v.encode(["<unk>", "</s>"]).tolist() == [UNK_ID, EOS_ID]


def test_unknown_tokens_map_to_unk() -> None:
    v = Vocab.build("hello")
    ids = v.encode(list("help!"))
    assert ids.dtype == np.int64
    assert ids.tolist()[:3] == [v.token_to_id("h"), v.token_to_id("e"), v.token_to_id("l")]
    assert ids[3] == UNK_ID and ids[4] == UNK_ID
    assert "p" not in v and "h" in v and "<unk>" in v
    assert v.decode(ids) == ["h", "e", "l", "<unk>", "<unk>"]
    assert v.encode([]).shape == (0,) and v.encode([]).dtype == np.int64


def test_decode_rejects_bad_ids() -> None:
    v = Vocab.build("ab")
    with pytest.raises(IndexError, match="id 6 out of range"):
        v.decode([4, 6])
    with pytest.raises(IndexError):
        v.decode([-1])
    with pytest.raises(IndexError):
        v.id_to_token(len(v))


def test_vocab_constructor_rejects_duplicates_and_specials() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Vocab(["a", "a"])
    with pytest.raises(ValueError, match="special"):
        Vocab(["<s>"])


@given(st.lists(st.text(min_size=1, max_size=4), max_size=30))
def test_vocab_encode_decode_round_trip(tokens: list[str]) -> None:
    v = Vocab.build(tokens)
    expected = [t if t in v else "<unk>" for t in tokens]
    assert v.decode(v.encode(tokens)) == expected
    # every non-special token of the data is in the vocabulary (min_freq=1)
    assert all(t in v for t in tokens)


@given(st.lists(st.text(max_size=5), max_size=30), st.integers(1, 3))
def test_vocab_json_round_trip(tmp_path_factory: pytest.TempPathFactory, tokens: list[str],
                               min_freq: int) -> None:
    v = Vocab.build(tokens, min_freq=min_freq)
    path = tmp_path_factory.mktemp("vocab") / "vocab.json"
    v.to_json(path)
    w = Vocab.from_json(path)
    assert w == v and w.tokens == v.tokens
    assert w.encode(tokens).tolist() == v.encode(tokens).tolist()
    # no temporary file is left behind
    assert sorted(p.name for p in path.parent.iterdir()) == ["vocab.json"]


def test_vocab_to_json_overwrites_atomically(tmp_path) -> None:
    path = tmp_path / "v.json"
    Vocab.build("abc").to_json(path)
    Vocab.build("xyz").to_json(path)
    assert Vocab.from_json(path).tokens[4:] == ["x", "y", "z"]
    assert os.listdir(tmp_path) == ["v.json"]


def test_vocab_from_json_errors_name_the_path(tmp_path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(FileNotFoundError, match="missing.json"):
        Vocab.from_json(missing)
    with pytest.raises(IsADirectoryError, match="directory"):
        Vocab.from_json(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.json.*invalid JSON"):
        Vocab.from_json(bad)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ValueError, match=r"bin\.json.*not UTF-8"):
        Vocab.from_json(binary)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"tokens": ["a"]}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"other\.json.*not a tinygrad_rnn vocabulary"):
        Vocab.from_json(other)
    nospecial = tmp_path / "nospecial.json"
    nospecial.write_text(json.dumps({"format": "tinygrad_rnn.vocab", "version": 1,
                                     "tokens": ["a", "b"]}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"nospecial\.json.*special tokens"):
        Vocab.from_json(nospecial)
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps({"format": "tinygrad_rnn.vocab", "version": 1,
                               "tokens": list(SPECIAL_TOKENS) + ["a", "a"]}),
                   encoding="utf-8")
    with pytest.raises(ValueError, match=r"dup\.json.*duplicate"):
        Vocab.from_json(dup)


@pytest.mark.parametrize("version", [True, 1.0, "1", None, 2])
def test_vocab_version_must_be_the_integer_one(tmp_path, version) -> None:
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"format": "tinygrad_rnn.vocab", "version": version,
                                "tokens": list(SPECIAL_TOKENS)}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"v\.json.*unsupported version"):
        Vocab.from_json(path)


def test_vocab_json_nested_too_deeply_is_a_value_error_naming_the_path(tmp_path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000, encoding="utf-8")
    with pytest.raises(ValueError, match=r"deep\.json.*nested too deeply"):
        Vocab.from_json(path)


def test_vocab_with_a_lone_surrogate_round_trips(tmp_path) -> None:
    # valid JSON and a valid Python str, but not encodable as UTF-8: written escaped
    path = tmp_path / "v.json"
    path.write_text(json.dumps({"format": "tinygrad_rnn.vocab", "version": 1,
                                "tokens": list(SPECIAL_TOKENS) + ["\ud800", "é"]}),
                    encoding="utf-8")
    v = Vocab.from_json(path)
    assert v.tokens[4:] == ["\ud800", "é"]
    v.to_json(tmp_path / "again.json")
    assert Vocab.from_json(tmp_path / "again.json") == v
    Vocab(["\udcff"]).to_json(tmp_path / "built.json")
    assert Vocab.from_json(tmp_path / "built.json").tokens[4:] == ["\udcff"]
    # without a surrogate the file stays readable UTF-8 text
    Vocab(["é"]).to_json(tmp_path / "plain.json")
    assert "é" in (tmp_path / "plain.json").read_text(encoding="utf-8")
    assert sorted(os.listdir(tmp_path)) == ["again.json", "built.json", "plain.json", "v.json"]


def test_vocab_to_json_errors_name_the_target_not_a_temporary_file(tmp_path) -> None:
    v = Vocab.build("ab")
    target = tmp_path / "missing" / "v.json"
    with pytest.raises(FileNotFoundError) as info:
        v.to_json(target)
    assert str(target) in str(info.value) and ".tmp" not in str(info.value)
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(IsADirectoryError) as info:
        v.to_json(tmp_path / "dir.json")
    assert "dir.json" in str(info.value) and ".tmp" not in str(info.value)
    assert os.listdir(tmp_path) == ["dir.json"] and os.listdir(tmp_path / "dir.json") == []


# --------------------------------------------------------------------------------------------
# tokenizers
# --------------------------------------------------------------------------------------------
@given(st.text(max_size=200))
def test_char_tokenizer_round_trip_is_exact(s: str) -> None:
    tok = CharTokenizer()
    tokens = tok.tokenize(s)
    assert len(tokens) == len(s)
    assert tok.detokenize(tokens) == s
    assert CharTokenizer(lowercase=True).detokenize(CharTokenizer(lowercase=True)
                                                    .tokenize(s)) == s.lower()


@given(st.text(max_size=200), st.booleans())
def test_word_tokenizer_token_round_trip(s: str, lowercase: bool) -> None:
    tok = WordTokenizer(lowercase=lowercase)
    tokens = tok.tokenize(s)
    assert tok.tokenize(tok.detokenize(tokens)) == tokens
    # tokens never contain whitespace, and no non-space character is lost
    assert all(t and not any(ch.isspace() for ch in t) for t in tokens)
    source = s.lower() if lowercase else s
    assert "".join(tokens) == "".join(ch for ch in source if not ch.isspace())


def test_word_tokenizer_splits_words_and_punctuation() -> None:
    assert WordTokenizer().tokenize("Don't panic! x_1 = 42.") == \
        ["Don", "'", "t", "panic", "!", "x_1", "=", "42", "."]
    assert WordTokenizer(lowercase=True).tokenize("The END") == ["the", "end"]
    assert WordTokenizer().detokenize(["a", ",", "b"]) == "a , b"


# --------------------------------------------------------------------------------------------
# stateful LM batching
# --------------------------------------------------------------------------------------------
@given(length=st.integers(2, 300), batch_size=st.integers(1, 8), bptt_len=st.integers(1, 40))
def test_lm_stream_batches_cover_the_stream_once_in_order(length: int, batch_size: int,
                                                          bptt_len: int) -> None:
    if length < batch_size + 1:
        with pytest.raises(ValueError, match="too short"):
            list(lm_stream_batches(np.arange(length), batch_size, bptt_len))
        return
    ids = np.arange(100, 100 + length)  # distinct ids: every position is identifiable
    windows = list(lm_stream_batches(ids, batch_size, bptt_len))
    L = (length - 1) // batch_size
    assert len(windows) == -(-L // bptt_len)
    for x, y in windows[:-1]:
        assert x.shape == y.shape == (batch_size, bptt_len)
    for x, y in windows:
        assert x.dtype == y.dtype == np.int64
        assert x.shape == y.shape and 1 <= x.shape[1] <= bptt_len
    xs = np.concatenate([x for x, _ in windows], axis=1)  # (N, L)
    ys = np.concatenate([y for _, y in windows], axis=1)  # (N, L)
    # row r continues across windows; reading rows in order gives the stream, exactly once
    np.testing.assert_array_equal(xs.ravel(), ids[: batch_size * L])
    np.testing.assert_array_equal(ys.ravel(), ids[1: batch_size * L + 1])
    # every target is the token right after its input
    for x, y in windows:
        np.testing.assert_array_equal(y, x + 1)
    # the whole-stream helper is the concatenation of the windows
    inputs, targets = lm_stream(ids, batch_size)
    np.testing.assert_array_equal(inputs, xs)
    np.testing.assert_array_equal(targets, ys)
    # fewer than batch_size ids are left over
    assert length - 1 - batch_size * L < batch_size


def test_batchify_rows_are_contiguous() -> None:
    ids = np.arange(23)
    m = batchify(ids, 4)
    assert m.shape == (4, 5) and m.dtype == np.int64
    np.testing.assert_array_equal(m[1], np.arange(5, 10))
    np.testing.assert_array_equal(m.ravel(), np.arange(20))
    with pytest.raises(ValueError, match="too short"):
        batchify(np.arange(3), 4)
    with pytest.raises(ValueError, match="batch_size"):
        batchify(ids, 0)
    with pytest.raises(ValueError, match="bptt_len"):
        list(lm_stream_batches(ids, 2, 0))
    with pytest.raises(ValueError, match="1-D"):
        lm_stream(np.zeros((2, 3), dtype=np.int64), 1)


def test_lm_stream_drives_a_truncation_schedule() -> None:
    """The (N, L) pair is what tr.truncation windows over (time axis 1): the loss ranges
    of a TBPTT(k1, k2) schedule cover every target once."""
    from tinygrad_rnn.truncation import williams_peng, windows

    inputs, targets = lm_stream(np.arange(61), 3)
    seen = np.concatenate([targets[:, w.loss_start:w.stop]
                           for w in windows(inputs.shape[1], williams_peng(4, 7))], axis=1)
    np.testing.assert_array_equal(seen.ravel(), np.arange(1, 61))


# --------------------------------------------------------------------------------------------
# pad_batch
# --------------------------------------------------------------------------------------------
@given(st.lists(st.lists(st.integers(4, 50), max_size=12), min_size=1, max_size=8))
def test_pad_batch_lengths_and_mask(seqs: list[list[int]]) -> None:
    padded, lengths, mask = pad_batch(seqs)
    N, T = len(seqs), max(len(s) for s in seqs)
    assert padded.shape == mask.shape == (N, T) and lengths.shape == (N,)
    assert padded.dtype == lengths.dtype == np.int64 and mask.dtype == np.bool_
    for i, s in enumerate(seqs):
        assert lengths[i] == len(s)
        assert padded[i, : len(s)].tolist() == s
        assert (padded[i, len(s):] == PAD_ID).all()
        assert mask[i].tolist() == [t < len(s) for t in range(T)]


def test_pad_batch_custom_pad_and_errors() -> None:
    padded, lengths, mask = pad_batch([np.array([5, 6]), np.array([7])], pad_id=-1)
    assert padded.tolist() == [[5, 6], [7, -1]]
    assert lengths.tolist() == [2, 1] and mask.tolist() == [[True, True], [True, False]]
    with pytest.raises(ValueError, match="at least one"):
        pad_batch([])
    with pytest.raises(ValueError, match="sequence 1 must be 1-D"):
        pad_batch([[1], [[1, 2]]])
    with pytest.raises(TypeError, match="integer"):
        pad_batch([[1.5]])


# --------------------------------------------------------------------------------------------
# splits
# --------------------------------------------------------------------------------------------
@given(n=st.integers(0, 200), seed=st.integers(0, 2**31),
       fractions=st.sampled_from([(0.8, 0.1, 0.1), (0.5, 0.5), (0.7, 0.2, 0.1), (1.0,),
                                  (0.0, 0.25, 0.75)]))
def test_train_valid_test_split_deterministic_disjoint_covering(n: int, seed: int,
                                                                fractions: tuple) -> None:
    items = [f"sentence {i}" for i in range(n)]
    parts = train_valid_test_split(items, fractions, generator=seed)
    again = train_valid_test_split(items, fractions, generator=seed)
    assert parts == again
    assert len(parts) == len(fractions)
    flat = [x for part in parts for x in part]
    assert sorted(flat) == sorted(items)  # disjoint and covering
    assert len(set(flat)) == n
    for part, f in zip(parts, fractions):
        assert abs(len(part) - f * n) <= 1
    assert [len(p) for p in parts] == split_sizes(n, fractions)


def test_train_valid_test_split_depends_on_the_seed() -> None:
    items = list(range(100))
    a = train_valid_test_split(items, generator=1)
    b = train_valid_test_split(items, generator=2)
    assert a != b
    assert train_valid_test_split(items) == train_valid_test_split(items)  # default seed 0
    assert [len(p) for p in a] == [80, 10, 10]


def test_split_fractions_are_checked() -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        train_valid_test_split([1, 2, 3], (0.5, 0.4))
    with pytest.raises(ValueError, match="non-negative"):
        split_stream(np.arange(5), (1.2, -0.2))


@given(n=st.integers(0, 300),
       fractions=st.sampled_from([(0.8, 0.1, 0.1), (0.9, 0.05, 0.05), (0.5, 0.5)]))
def test_split_stream_is_contiguous(n: int, fractions: tuple) -> None:
    ids = np.arange(n)
    parts = split_stream(ids, fractions)
    assert all(p.dtype == np.int64 for p in parts)
    np.testing.assert_array_equal(np.concatenate(parts), ids)
    for part, f in zip(parts, fractions):
        assert abs(part.size - f * n) <= 1
