"""tinygrad_rnn/_validate.py: the one home of the scalar-argument checks.

Each function returns the plain Python value or raises with the message the copies it
replaced gave (tests elsewhere match those messages); the last test keeps the copies from
coming back as private validators imported across modules.
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from tinygrad_rnn import _validate as v

PACKAGE = Path(__file__).resolve().parents[1] / "tinygrad_rnn"


def raises(exc: type, message: str, fn: Callable, *args: Any) -> None:
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        fn(*args)


@pytest.mark.parametrize("value, want", [(3, 3), (np.int64(-2), -2), (0, 0)])
def test_integer_returns_a_python_int(value: Any, want: int) -> None:
    got = v.integer(value, "dim", "Flatten")
    assert got == want and type(got) is int


@pytest.mark.parametrize("bad", [True, np.bool_(False), 2.0, "3", None])
def test_integer_refuses_bools_floats_and_strings(bad: Any) -> None:
    raises(TypeError, f"Flatten: dim must be an integer, got {bad!r} ({type(bad).__name__})",
           v.integer, bad, "dim", "Flatten")


def test_size_is_positive_by_default_and_takes_a_minimum() -> None:
    assert v.size(np.int32(4), "hidden_size", "GRU") == 4
    raises(ValueError, "GRU: hidden_size must be positive, got 0", v.size, 0, "hidden_size",
           "GRU")
    assert v.size(0, "in_features", "Linear", minimum=0) == 0
    raises(ValueError, "Linear: in_features must be >= 0, got -1", v.size, -1, "in_features",
           "Linear", 0)
    raises(TypeError, "GRU: hidden_size must be an integer, got 2.5 (float)", v.size, 2.5,
           "hidden_size", "GRU")


@pytest.mark.parametrize("bad", [0, -3, 2.0, True, "4", None])
def test_positive_int_is_one_value_error(bad: Any) -> None:
    raises(ValueError, f"RNNLM: num_layers must be a positive integer, got {bad!r}",
           v.positive_int, bad, "num_layers", "RNNLM")


@pytest.mark.parametrize("value, want", [(True, True), (np.bool_(False), False), (1, True),
                                         (np.int8(0), False)])
def test_flag_takes_bools_and_0_or_1(value: Any, want: bool) -> None:
    got = v.flag(value, "bias", "Linear")
    assert got is want


@pytest.mark.parametrize("bad", ["no", 2, 1.0, None])
def test_flag_refuses_what_truthiness_would_misread(bad: Any) -> None:
    raises(TypeError, f"Linear: bias must be True or False, got {bad!r} ({type(bad).__name__})",
           v.flag, bad, "bias", "Linear")


def test_boolean_takes_only_bools() -> None:
    assert v.boolean(np.bool_(True), "strict", "load_state_dict") is True
    for bad in (1, 0, "yes"):
        raises(TypeError, f"load_state_dict: strict must be True or False, got {bad!r} "
               f"({type(bad).__name__})", v.boolean, bad, "strict", "load_state_dict")


@pytest.mark.parametrize("value, want", [(2, 2.0), (np.float32(0.5), 0.5), (np.array(3), 3.0)])
def test_finite_real_returns_a_python_float(value: Any, want: float) -> None:
    got = v.finite_real(value, "eps", "LayerNorm")
    assert got == want and type(got) is float


def test_finite_real_refuses_non_numbers_and_non_finite_values() -> None:
    raises(TypeError, "LayerNorm: eps must be a real number, got True (bool)", v.finite_real,
           True, "eps", "LayerNorm")
    raises(TypeError, "LayerNorm: eps must be a real number, got '1e-5' (str)", v.finite_real,
           "1e-5", "eps", "LayerNorm")
    for bad in (math.inf, np.nan, 10 ** 400):
        raises(ValueError, f"LayerNorm: eps must be a finite number, got {bad!r}",
               v.finite_real, bad, "eps", "LayerNorm")


def test_probability_is_a_finite_real_in_the_unit_interval() -> None:
    assert v.probability(0, "p", "Dropout") == 0.0 and v.probability(1, "p", "Dropout") == 1.0
    raises(ValueError, "Dropout: p must be in [0, 1], got 1.5", v.probability, 1.5, "p",
           "Dropout")
    raises(TypeError, "Dropout: p must be a real number, got '0.1' (str)", v.probability,
           "0.1", "p", "Dropout")


# the private copies _validate replaced, by the names they had
REPLACED = {"_flag", "_size", "_integer", "_finite", "_probability", "_float_dtype",
            "_check_flag", "_check_bool", "_positive_int", "_check_positive_int"}


def test_no_module_imports_a_private_scalar_validator() -> None:
    """The scalar checks are imported from tinygrad_rnn._validate (or nn._checks for the
    dtype); importing a private copy from another module is how ten copies grew."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names} & REPLACED
                if names:
                    found.append(f"{path.relative_to(PACKAGE.parent)}: {sorted(names)}")
    assert found == []
