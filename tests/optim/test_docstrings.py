"""The examples in the docstrings of tinygrad_rnn.optim and tinygrad_rnn.io run as written."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["tinygrad_rnn.optim", "tinygrad_rnn.optim.sgd", "tinygrad_rnn.optim.adam",
           "tinygrad_rnn.optim.rmsprop", "tinygrad_rnn.optim.adagrad",
           "tinygrad_rnn.optim.lbfgs", "tinygrad_rnn.optim.lr_scheduler",
           "tinygrad_rnn.optim.optimizer", "tinygrad_rnn.io"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
