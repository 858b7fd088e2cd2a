"""SequenceTagger.loss refuses tags that are not integer ids instead of converting them.

np.array(tags, dtype=np.int64) would truncate 0.7 to 0, turn True into 1, parse the string
'2' and wrap 1e30 to a negative id. Like SequenceClassifier.loss and cross_entropy, the loss
wants integer tags: other dtypes raise a TypeError naming SequenceTagger.loss and the dtype.
Integer tags of any width (host arrays, lists, Tensors) give the same loss, and the caller's
tags are not modified by the masking of padded steps.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn.nn import SequenceTagger

IDS = np.array([[1, 2, 3, 0, 0], [2, 3, 1, 1, 2]])
LENS = np.array([3, 5])
TAGS = np.array([[0, 1, 2, 1, 1], [2, 0, 1, 1, 0]])


def _tagger() -> SequenceTagger:
    return SequenceTagger(5, 4, 3, 3, dtype=np.float64, generator=0)


@pytest.mark.parametrize("tags, dtype", [
    (TAGS + 0.7, "float64"),
    (TAGS.astype(np.float32), "float32"),
    (np.full((2, 5), 1e30), "float64"),
    (TAGS > 0, "bool"),
    (TAGS.astype(str), "<U21"),
    ([[0, 1, 2, 1, 1], [2, 0, 1, 1, 0.5]], "float64"),
    ([[0, 1, 2, 1, 1], [2, 0, 1, 1, 10 ** 30]], "object"),
])
def test_non_integer_host_tags_are_refused(tags: Any, dtype: str) -> None:
    msg = re.escape(f"SequenceTagger.loss: tags must hold integer tag ids, got dtype {dtype}")
    with pytest.raises(TypeError, match=msg):
        _tagger().loss(IDS, tags, LENS)


def test_float_tag_tensor_is_refused() -> None:
    with pytest.raises(TypeError, match=re.escape("SequenceTagger.loss: tags must hold "
                                                  "integer tag ids, got a Tensor of dtype "
                                                  "float64")):
        _tagger().loss(IDS, tr.Tensor(TAGS.astype(np.float64)), LENS)


def test_ragged_tags_are_refused_naming_the_loss() -> None:
    with pytest.raises(ValueError, match=re.escape("SequenceTagger.loss: tags must be an "
                                                   "(N, T) array of integer tag ids")):
        _tagger().loss(IDS, [[0, 1, 2, 1, 1], [2, 0, 1]], LENS)


def test_unsigned_tags_beyond_int64_are_refused() -> None:
    tags = TAGS.astype(np.uint64)
    tags[1, 4] = np.uint64(2 ** 64 - 100)       # would wrap to -100, the ignore_index
    with pytest.raises(ValueError, match=re.escape(f"tag id {2 ** 64 - 100} does not fit")):
        _tagger().loss(IDS, tags, LENS)


def test_integer_tags_of_every_kind_give_the_same_loss() -> None:
    model = _tagger()
    expected = float(model.loss(IDS, TAGS, LENS).numpy())
    given = TAGS.copy()
    for tags in (given, TAGS.astype(np.int8), TAGS.astype(np.uint16), TAGS.tolist(),
                 tr.Tensor(TAGS)):
        assert float(model.loss(IDS, tags, LENS).numpy()) == expected
    np.testing.assert_array_equal(given, TAGS)  # the padded steps were masked in a copy


def test_accuracy_takes_raw_device_arrays() -> None:
    """The docstring promises 'a Tensor or array': a raw device array is copied explicitly."""
    import tinygrad_rnn as tr
    from tinygrad_rnn import backend

    z = np.array([[0.1, 2.0], [3.0, -1.0], [0.0, 1.0]])
    y = np.array([1, 0, 0])
    want = tr.nn.accuracy(z, y)
    assert want == 2 / 3
    assert tr.nn.accuracy(backend.to_device(z, "standin"), backend.to_device(y, "standin")) == want
    assert tr.nn.accuracy(tr.tensor(z, device="standin"), y) == want
