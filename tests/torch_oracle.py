"""torch as the optional oracle of the parity tests.

``requires_torch`` skips a test before it starts when torch is not installed. A hypothesis
test (``@given`` with ``@example``) must use it instead of calling ``pytest.importorskip``
in its body: there, each explicit example fails first with the skip, and hypothesis attaches
a "Failing explicit example" report to the skip reason, which `pytest -rs` then prints in a
passing run (tests/test_quiet_output.py checks it stays quiet). The test body may still
import torch with ``pytest.importorskip("torch")``: with the marker it never skips there.
"""
import importlib.util

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None

requires_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="could not import 'torch': the parity tests compare with torch in "
                          "float64 (pip install torch)")
