"""Hypothesis profiles: `dev` (fast, the default), `ci` (derandomized, 100 examples, no
deadline, no example database) and `nightly` (1000 examples). Select with the environment
variable HYPOTHESIS_PROFILE; .ci/run uses `ci`.

The stand-in device 'standin' (the CuPy emulator of tinygrad_rnn.testing) is registered with
the backend here, for every test."""
import os

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
