"""Hypothesis profiles: `dev` (fast, the default), `ci` (derandomized, 100 examples, no
deadline, no example database) and `nightly` (1000 examples). Select with the environment
variable HYPOTHESIS_PROFILE; .ci/run uses `ci`.

The stand-in device 'standin' (the CuPy emulator of tinygrad_rnn.testing) is registered with
the backend here, for every test, and every test leaves os.environ as it found it."""
import os
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tinygrad_rnn.testing import cupy_emulator

cupy_emulator.register()

settings.register_profile("dev", max_examples=20, deadline=None)
settings.register_profile(
    "ci", max_examples=100, derandomize=True, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("nightly", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _environment_restored() -> Iterator[None]:
    """Put os.environ back after each test. Code a test runs may set variables for the
    whole process (Dask's nannies set MALLOC_TRIM_THRESHOLD_, which then showed up in the
    command line a later benchmark test reads), and no test may depend on the ones before it."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)
