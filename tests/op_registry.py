"""Moved: the op registry is ``tinygrad_rnn/testing/registry.py``, one list for the test
suites and ``tinygrad-rnn gradcheck`` (``tinygrad_rnn/testing/suite.py`` adds the cells and
layers). Add new ``OpInfo`` entries there, with a sampler written against its ``Draw``, and
import ``from tinygrad_rnn.testing.registry import ...``."""
raise ImportError("tests/op_registry.py moved to tinygrad_rnn/testing/registry.py: add OpInfo "
                  "entries there and import from tinygrad_rnn.testing.registry")
