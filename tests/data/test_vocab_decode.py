"""Vocab.decode returns the list of tokens by default (unchanged) and one string on request."""
from __future__ import annotations

import numpy as np
import pytest

from tinygrad_rnn.data import Vocab


def test_decode_default_is_the_list_of_tokens() -> None:
    vocab = Vocab(list("abc"))
    assert vocab.decode(vocab.encode(list("cab"))) == ["c", "a", "b"]


def test_decode_as_string_joins_the_tokens() -> None:
    chars = Vocab(list("helo "))
    ids = chars.encode(list("hello"))
    assert chars.decode(ids, as_string=True) == "hello"
    assert chars.decode(np.asarray(ids), as_string=np.True_) == "hello"
    assert chars.decode([], as_string=True) == ""
    words = Vocab(["the", "cat", "sat"])
    ids = words.encode(["the", "cat", "sat"])
    assert words.decode(ids, as_string=True, sep=" ") == "the cat sat"


@pytest.mark.parametrize("kwargs, error, message", [
    ({"as_string": "yes"}, TypeError, "as_string must be True or False"),
    ({"as_string": True, "sep": 0}, TypeError, "sep must be a str"),
    ({"sep": " "}, ValueError, "sep=' ' is used only with as_string=True"),
])
def test_decode_refuses_bad_options(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=f"Vocab.decode: {message}"):
        Vocab(list("ab")).decode([0, 1], **kwargs)


def test_decode_as_string_still_checks_the_range() -> None:
    with pytest.raises(IndexError, match="Vocab.decode: id 99 out of range"):
        Vocab(list("ab")).decode([0, 99], as_string=True)
