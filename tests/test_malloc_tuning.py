"""tinygrad_rnn.malloc_tuning: freed array memory stays in the process (glibc's mmap and
trim thresholds raised) when a program calls ``keep_freed_memory()``, unless the user chose
otherwise; ``import tinygrad_rnn`` alone changes nothing.

The effect is measured, not timed: the minor page faults (fresh pages the kernel had to
zero-fill) of one ``log_softmax`` of an (8192, 512) float32 array, in a fresh process with
and without the setting. Timings are in docs/performance.md, section "Update: freed host
memory stays in the process"."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tinygrad_rnn import malloc_tuning

ROOT = Path(__file__).resolve().parents[1]
GLIBC_LINUX = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"

PROBE = """
import json, resource, sys
import numpy as np
import tinygrad_rnn as tr
if sys.argv[1] == "call":
    tr.malloc_tuning.keep_freed_memory()
z = np.random.default_rng(0).standard_normal((8192, 512)).astype(np.float32)  # 16 MiB
x = tr.from_numpy(z)
for _ in range(5):
    tr.functional.log_softmax(x, -1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(40):
    tr.functional.log_softmax(x, -1)
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 40
print(json.dumps({"status": tr.malloc_tuning.status(), "faults": faults}))
"""


def _probe(call: bool = True, **env_changes: str) -> dict:
    """A fresh process that imports tinygrad_rnn, calls ``keep_freed_memory()`` when
    ``call``, and counts the page faults of a log_softmax of 16 MiB."""
    env = {k: v for k, v in os.environ.items()
           if k not in (*malloc_tuning.GLIBC_ENV_VARS, malloc_tuning.ENV_VAR,
                        malloc_tuning.TUNABLES_VAR)}
    env.update(env_changes)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", PROBE, "call" if call else "import only"],
                         env=env, capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting exists on Linux with glibc only")
def test_import_alone_leaves_malloc_as_it_is() -> None:
    """Importing the package changes nothing outside it: without the call, glibc's
    defaults give every log_softmax fresh pages, as they do when the call is turned off."""
    quiet = _probe(call=False)
    assert quiet["status"] == "malloc left as it is (keep_freed_memory() not called)"
    assert quiet["faults"] > 100, quiet


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting exists on Linux with glibc only")
def test_the_call_keeps_freed_memory_and_removes_the_page_faults() -> None:
    tuned = _probe()
    default = _probe(**{malloc_tuning.ENV_VAR: "default"})
    assert tuned["status"].startswith("glibc malloc keeps freed memory: mmap threshold 32 MiB")
    assert default["status"] == f"glibc malloc left as it is ({malloc_tuning.ENV_VAR}=default)"
    # glibc's defaults give every call fresh pages (about 1,000 faults of 4 KiB here, for
    # the call's 16 MiB arrays; at 4 MiB, once log_softmax wrote its results into its own
    # fresh arrays, and at 512 KiB the count depended on the memory layout, down to 0); with
    # the thresholds raised the pages are reused
    assert default["faults"] > 100, default
    assert tuned["faults"] < 5, tuned


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting exists on Linux with glibc only")
def test_glibc_environment_variables_win() -> None:
    got = _probe(MALLOC_TRIM_THRESHOLD_="1000000")
    assert got["status"] == ("glibc malloc left as it is (set by the environment: "
                             "MALLOC_TRIM_THRESHOLD_)")


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting exists on Linux with glibc only")
def test_glibc_malloc_tunables_win() -> None:
    """GLIBC_TUNABLES is glibc's recommended way to set malloc; the call's mallopt would
    override it. The user's 128 KiB mmap threshold must stay in effect: the call's 16 MiB
    arrays are then mapped afresh each time, so the page faults are glibc's default ones."""
    got = _probe(GLIBC_TUNABLES="glibc.malloc.mmap_threshold=131072")
    assert got["status"] == ("glibc malloc left as it is (set by the environment: "
                             "GLIBC_TUNABLES glibc.malloc.mmap_threshold)")
    assert got["faults"] > 100, got


@pytest.mark.skipif(not GLIBC_LINUX, reason="the setting exists on Linux with glibc only")
def test_tunables_of_other_glibc_parts_do_not_count() -> None:
    got = _probe(GLIBC_TUNABLES="glibc.elision.enable=0")
    assert got["status"].startswith("glibc malloc keeps freed memory"), got
    assert got["faults"] < 5, got


def test_malloc_tunables_are_found_among_others(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_tuning, "_status", malloc_tuning.status())
    said = malloc_tuning.keep_freed_memory({malloc_tuning.TUNABLES_VAR: (
        "glibc.elision.enable=0:glibc.malloc.trim_threshold=1:glibc.malloc.tcache_count=0")})
    assert said == ("glibc malloc left as it is (set by the environment: GLIBC_TUNABLES "
                    "glibc.malloc.trim_threshold, GLIBC_TUNABLES glibc.malloc.tcache_count)")
    said = malloc_tuning.keep_freed_memory({malloc_tuning.TUNABLES_VAR: "glibc.malloc.arena_max=2",
                                        "MALLOC_TOP_PAD_": "0"})
    assert said == ("glibc malloc left as it is (set by the environment: MALLOC_TOP_PAD_, "
                    "GLIBC_TUNABLES glibc.malloc.arena_max)")


def test_choices_that_leave_malloc_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_tuning, "_status", malloc_tuning.status())  # restored afterwards
    assert malloc_tuning.keep_freed_memory({malloc_tuning.ENV_VAR: " Default "}) == (
        f"glibc malloc left as it is ({malloc_tuning.ENV_VAR}=default)")
    said = malloc_tuning.keep_freed_memory({"MALLOC_TOP_PAD_": "0", "MALLOC_MMAP_THRESHOLD_": "1"})
    assert said == ("glibc malloc left as it is (set by the environment: MALLOC_MMAP_THRESHOLD_, "
                    "MALLOC_TOP_PAD_)")
    said = malloc_tuning.keep_freed_memory({"MALLOC_TOP_PAD_": "0"})
    assert malloc_tuning.status() == said


def test_not_glibc_leaves_malloc_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_tuning, "_status", malloc_tuning.status())
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert malloc_tuning.keep_freed_memory({}) == "malloc left as it is (not glibc on Linux)"


@pytest.mark.parametrize("value", ["off", "0", "false", "defualt"])
def test_an_unknown_setting_is_an_error_not_ignored(value: str) -> None:
    with pytest.raises(ValueError, match=f"TINYGRAD_RNN_MALLOC='{value}' is not a setting"):
        malloc_tuning.keep_freed_memory({malloc_tuning.ENV_VAR: value})


def test_keep_is_the_explicit_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(malloc_tuning, "_status", malloc_tuning.status())
    said = malloc_tuning.keep_freed_memory({malloc_tuning.ENV_VAR: "keep"})
    assert said.startswith("glibc malloc keeps") or "not glibc" in said
