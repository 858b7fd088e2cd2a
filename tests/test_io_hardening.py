"""Adversarial checks of tr.save / tr.load and Vocab.to_json ("Nothing fails silently").

* writers killed with SIGKILL leave temporary files that the next write to the folder removes,
  while the temporary file of a live writer is never touched;
* a symlink target is written through, a read-only target is refused, a FIFO is refused at
  once (never a hang);
* loading is linear in the number of arrays (an operation count, no timing);
* declared sizes are checked against a limit before anything is allocated;
* archives with duplicate or unlisted members are refused;
* self-referencing and over-deep objects are refused at save with a clear error.
"""
from __future__ import annotations

import os
import random
import signal
import stat
import sys
import threading
import time
import tracemalloc
import warnings
import zipfile

import numpy as np
import pytest

import tinygrad_rnn as tr
from tinygrad_rnn import io as trio
from tinygrad_rnn.data import Vocab

posix_only = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32",
                                reason="needs fork, SIGKILL and POSIX file semantics")


def _temps(folder) -> list[str]:
    """Files in ``folder`` that look like a temporary file of some writer."""
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


def _wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def _fork(body) -> int:
    """Run ``body()`` in a forked child that never returns into pytest."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            body()
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    return pid


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def _child_blocked_in_fsync(write, release_fd: int | None = None) -> None:
    """Child body: make ``os.fsync`` of the temporary file wait (forever, or until a byte
    arrives on ``release_fd``), then run ``write()``: the temporary file is then complete,
    its writer alive."""
    real_fsync = os.fsync
    state = {"first": True}

    def blocking_fsync(fd):
        if state["first"] and os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) \
                .endswith(".tmp"):
            state["first"] = False
            if release_fd is None:
                while True:
                    time.sleep(60)
            os.read(release_fd, 1)
        return real_fsync(fd)

    os.fsync = blocking_fsync
    write()


# ------------------------------------------------------------------------ F4: temp files
@posix_only
def test_killed_writers_leave_no_temp_files_after_the_next_save(tmp_path):
    path = tmp_path / "ckpt.npz"
    old = {"w": np.zeros(3)}
    new = {"w": np.random.default_rng(0).standard_normal(1 << 19)}  # 4 MiB
    tr.save(old, path)
    rng = random.Random(1234)
    kills = left_behind = 0
    deadline = time.monotonic() + 60
    # at least 20 kills at random moments, and enough of them caught inside a save
    while kills < 20 or (left_behind < 3 and kills < 100 and time.monotonic() < deadline):
        pid = _fork(lambda: [tr.save(new, path) for _ in iter(int, 1)])
        time.sleep(rng.uniform(0.0, 0.08))
        _kill(pid)
        kills += 1
        left_behind += bool(_temps(tmp_path))
        loaded = tr.load(path)  # never torn: the old or the new content
        assert loaded["w"].shape in (old["w"].shape, new["w"].shape)
        ref = old if loaded["w"].shape == old["w"].shape else new
        assert loaded["w"].tobytes() == ref["w"].tobytes()
    assert left_behind >= 3, "no kill landed inside a save; the test proved nothing"
    tr.save({"final": np.ones(2)}, path)
    assert _temps(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]
    assert list(tr.load(path)) == ["final"]


@posix_only
def test_a_live_writers_temp_file_is_not_removed(tmp_path):
    target = tmp_path / "live.npz"
    read_fd, write_fd = os.pipe()
    pid = _fork(lambda: _child_blocked_in_fsync(
        lambda: tr.save({"live": np.arange(4.0)}, target), release_fd=read_fd))
    try:
        assert _wait_for(lambda: len(_temps(tmp_path)) == 1)
        live_temp = _temps(tmp_path)
        tr.save({"other": np.ones(2)}, tmp_path / "other.npz")  # cleans up dead temps only
        Vocab.build("ab").to_json(tmp_path / "vocab.json")
        assert _temps(tmp_path) == live_temp
        os.write(write_fd, b"x")  # let the live writer finish
        _, status = os.waitpid(pid, 0)
        pid = 0
    finally:
        if pid:
            _kill(pid)
        os.close(read_fd)
        os.close(write_fd)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert _temps(tmp_path) == []
    assert tr.load(target)["live"].tolist() == [0.0, 1.0, 2.0, 3.0]


@posix_only
@pytest.mark.parametrize("writer", ["save", "vocab"])
def test_a_dead_writers_temp_file_is_removed_by_either_writer(tmp_path, writer):
    def die_inside_a_write():
        _child_blocked_in_fsync(lambda: Vocab.build("xyz").to_json(tmp_path / "dead.json"))

    pid = _fork(die_inside_a_write)
    try:
        assert _wait_for(lambda: len(_temps(tmp_path)) == 1)
    finally:
        _kill(pid)
    foreign = ["notes.tmp", ".dead.json.abc.tmp", "data.npz"]  # not ours: never touched
    for name in foreign:
        (tmp_path / name).write_text("keep")
    if writer == "save":
        tr.save({"a": np.ones(1)}, tmp_path / "a.npz")
        expected = sorted(foreign + ["a.npz"])
    else:
        Vocab.build("ab").to_json(tmp_path / "v.json")
        expected = sorted(foreign + ["v.json"])
    assert sorted(os.listdir(tmp_path)) == expected
    assert not (tmp_path / "dead.json").exists()


def test_module_docstring_no_longer_promises_cleanup_after_any_interruption():
    doc = trio.__doc__
    assert "SIGKILL" in doc and "next" in doc


# ------------------------------------------------------------------------ F8: file kinds
@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_a_symlink_target_is_written_through(tmp_path):
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "ckpt.npz"
    tr.save({"old": np.zeros(1)}, real)
    link = tmp_path / "link.npz"
    link.symlink_to(os.path.join("real", "ckpt.npz"))  # relative, like most links
    tr.save({"new": np.ones(2)}, link)
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "ckpt.npz")
    assert list(tr.load(real)) == ["new"]
    assert sorted(os.listdir(tmp_path)) == ["link.npz", "real"]
    assert os.listdir(tmp_path / "real") == ["ckpt.npz"]
    # a chain of links, and a dangling link (open() would create its target)
    chain = tmp_path / "chain.npz"
    chain.symlink_to(link)
    tr.save({"chained": np.ones(1)}, chain)
    assert chain.is_symlink() and link.is_symlink() and list(tr.load(real)) == ["chained"]
    dangling = tmp_path / "dangling.npz"
    dangling.symlink_to(tmp_path / "real" / "later.npz")
    tr.save({"later": np.ones(1)}, dangling)
    assert dangling.is_symlink() and list(tr.load(tmp_path / "real" / "later.npz")) == ["later"]
    vocab_link = tmp_path / "vocab.json"
    vocab_link.symlink_to(tmp_path / "real" / "vocab.json")
    Vocab.build("ab").to_json(vocab_link)
    assert vocab_link.is_symlink() and Vocab.from_json(tmp_path / "real" / "vocab.json") \
        == Vocab.build("ab")


@pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges on Windows")
def test_a_symlink_loop_is_refused_naming_the_path(tmp_path):
    (tmp_path / "a.npz").symlink_to(tmp_path / "b.npz")
    (tmp_path / "b.npz").symlink_to(tmp_path / "a.npz")
    with pytest.raises(OSError, match="a.npz"):
        tr.save({"x": np.ones(1)}, tmp_path / "a.npz")
    assert sorted(os.listdir(tmp_path)) == ["a.npz", "b.npz"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_read_only_target_is_refused_and_kept(tmp_path):
    path = tmp_path / "frozen.npz"
    tr.save({"old": np.arange(3.0)}, path)
    before = path.read_bytes()
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match="frozen.npz.*read-only"):
        tr.save({"new": np.ones(2)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["frozen.npz"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o444
    vocab = tmp_path / "frozen.json"
    Vocab.build("ab").to_json(vocab)
    text = vocab.read_text()
    os.chmod(vocab, 0o444)
    with pytest.raises(PermissionError, match="frozen.json.*read-only"):
        Vocab.build("xyz").to_json(vocab)
    assert vocab.read_text() == text and sorted(os.listdir(tmp_path)) == ["frozen.json",
                                                                          "frozen.npz"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_loading_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.npz"
    os.mkfifo(fifo)
    outcome: list = []

    def attempt():
        try:
            tr.load(fifo)
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - reported below
            outcome.append(err)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(10.0)
    if thread.is_alive():  # a regression: unblock the reader so the suite goes on
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(10.0)
        pytest.fail("tr.load blocked on a FIFO")
    assert isinstance(outcome[0], ValueError), outcome
    assert "pipe.npz" in str(outcome[0]) and "not a regular file" in str(outcome[0])


def test_loading_a_directory_or_a_device_is_refused(tmp_path):
    with pytest.raises(ValueError, match="load: .* is a directory"):
        tr.load(tmp_path)
    with pytest.raises(TypeError,
                       match="load: f must be a path .str or path-like. or a binary file object"):
        tr.load(None)
    with pytest.raises(TypeError, match="save: compress must be a bool"):
        tr.save({"a": np.ones(1)}, tmp_path / "c.npz", compress="no")
    if os.path.exists("/dev/null"):
        with pytest.raises(ValueError, match="not a regular file"):
            tr.load("/dev/null")
        with pytest.raises(ValueError, match="not a regular file"):
            tr.save({"a": np.ones(1)}, "/dev/null")
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_missing_directory_and_a_directory_target_name_the_target(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.*model.npz|model.npz.*missing"):
        tr.save({"a": np.ones(1)}, tmp_path / "missing" / "model.npz")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        tr.save({"a": np.ones(1)}, tmp_path)
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------ F9: linear load
def _count_operations(path) -> dict[str, int]:
    """Calls of zip listings and lookups, and all Python-level calls, during one load."""
    counts = {"listings": 0, "calls": 0}
    originals = {name: getattr(zipfile.ZipFile, name)
                 for name in ("namelist", "infolist", "getinfo")}

    def counting(original):
        def wrapper(self, *args, **kwargs):
            counts["listings"] += 1
            return original(self, *args, **kwargs)
        return wrapper

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            counts["calls"] += 1

    for name, original in originals.items():
        setattr(zipfile.ZipFile, name, counting(original))
    try:
        sys.setprofile(profile)
        try:
            tr.load(path)
        finally:
            sys.setprofile(None)
    finally:
        for name, original in originals.items():
            setattr(zipfile.ZipFile, name, original)
    return counts


def test_load_is_linear_in_the_number_of_arrays(tmp_path):
    counts = {}
    for n in (100, 400):
        path = tmp_path / f"n{n}.npz"
        tr.save({f"p{i}": np.full(2, i, dtype=np.float32) for i in range(n)}, path)
        counts[n] = _count_operations(path)
    # listing the archive (each listing costs O(n)) happens a fixed number of times
    assert counts[400]["listings"] == counts[100]["listings"] <= 2, counts
    # and the work per array is constant: 4x the arrays, about 4x the calls
    ratio = counts[400]["calls"] / counts[100]["calls"]
    assert ratio < 4.3, counts


# ------------------------------------------------------------------------ F10: bombs
def _zero_bomb(path, nbytes: int) -> None:
    """A valid checkpoint whose one array (zeros) deflates ``nbytes`` to about 1/1000."""
    tr.save({"w": np.zeros(1)}, path)  # a genuine manifest for {"w": <array a0>}
    with zipfile.ZipFile(path) as zf:
        manifest = zf.read(trio.MANIFEST + ".npy")
    header = bytearray()

    class Sink:
        def write(self, data):
            header.extend(data)

    np.lib.format.write_array_header_1_0(
        Sink(), {"descr": "<f8", "fortran_order": False, "shape": (nbytes // 8,)})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        zf.writestr(trio.MANIFEST + ".npy", manifest)
        with zf.open("a0.npy", "w", force_zip64=True) as member:
            member.write(bytes(header))
            zeros = bytes(1 << 20)
            for _ in range(nbytes >> 20):
                member.write(zeros)


def test_a_decompression_bomb_is_refused_before_allocating(tmp_path):
    path = tmp_path / "bomb.npz"
    _zero_bomb(path, 300 << 20)  # 300 MiB of zeros in about 0.3 MiB
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as info:
            tr.load(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(info.value)
    with zipfile.ZipFile(path) as zf:
        declared = zf.getinfo("a0.npy").file_size  # the .npy header and 300 MiB of data
    assert declared > 300 << 20
    assert f"'a0.npy' declares {declared} bytes" in message and "max_bytes=None" in message
    assert peak < 16 << 20, peak  # refused before the array was allocated


def test_the_size_limit_can_be_set_and_lifted(tmp_path):
    path = tmp_path / "zeros.npz"
    tr.save({"w": np.zeros(1 << 20)}, path, compress=True)  # 8 MiB in a few KiB
    with zipfile.ZipFile(path) as zf:
        declared = zf.getinfo("a0.npy").file_size  # 8 MiB of data and the .npy header
    with pytest.raises(ValueError, match=rf"'a0\.npy' declares {declared} bytes.*"
                                         rf"limit of max_bytes=1000000"):
        tr.load(path, max_bytes=1_000_000)
    assert tr.load(path, max_bytes=9 << 20)["w"].shape == (1 << 20,)
    assert tr.load(path, max_bytes=None)["w"].shape == (1 << 20,)
    for bad in (-1, 1.5, True, "big"):
        with pytest.raises((TypeError, ValueError), match="max_bytes"):
            tr.load(path, max_bytes=bad)


def test_a_header_that_declares_more_than_its_member_holds_is_refused(tmp_path):
    path = tmp_path / "liar.npz"
    tr.save({"w": np.arange(4.0)}, path)
    with zipfile.ZipFile(path) as zin:
        members = {n: zin.read(n) for n in zin.namelist()}
    members["a0.npy"] = members["a0.npy"].replace(b"(4,)", b"(4000000000,)", 1)
    with zipfile.ZipFile(path, "w") as zout:
        for name, data in members.items():
            zout.writestr(name, data)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="a0.*declares"):
            tr.load(path, max_bytes=None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


# ------------------------------------------------------------------------ F11: members
def _members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_duplicate_member_names_are_refused(tmp_path):
    good = tmp_path / "good.npz"
    tr.save({"w": np.zeros(2)}, good)
    members = _members(good)
    evil = tmp_path / "evil.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate it writes
        with zipfile.ZipFile(evil, "w") as zf:
            for name, data in members.items():
                zf.writestr(name, data)
            with zf.open("a0.npy", "w") as f:
                np.lib.format.write_array(f, np.full(2, 666.0))
    with pytest.raises(ValueError, match="evil.npz.*'a0.npy'.*twice|twice.*'a0.npy'"):
        tr.load(evil)


@pytest.mark.parametrize("stray", ["a0", "a1.npy", "a0.npy/", "readme.txt",
                                   trio.MANIFEST])
def test_members_the_manifest_does_not_account_for_are_refused(tmp_path, stray):
    good = tmp_path / "good.npz"
    tr.save({"w": np.zeros(2)}, good)
    evil = tmp_path / "evil.npz"
    with zipfile.ZipFile(evil, "w") as zf:
        for name, data in _members(good).items():
            zf.writestr(name, data)
        with zf.open(stray, "w") as f:
            np.lib.format.write_array(f, np.full(2, 666.0))
    with pytest.raises(ValueError, match="does not list"):
        tr.load(evil)


# ------------------------------------------------------------------------ save: cycles
def test_a_self_referencing_object_is_refused_naming_where(tmp_path):
    obj: dict = {"a": {"b": []}}
    obj["a"]["b"].append(obj)
    with pytest.raises(ValueError, match=r"save: .*\['a'\]\['b'\]\[0\].*contains itself"):
        tr.save(obj, tmp_path / "x.npz")
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"save: .*\['l'\]\[0\].*contains itself"):
        tr.save({"l": loop}, tmp_path / "x.npz")
    assert os.listdir(tmp_path) == []


def test_shared_but_acyclic_values_are_saved_as_copies(tmp_path):
    shared = [1, 2]
    tr.save({"a": shared, "b": shared, "c": (shared, shared)}, tmp_path / "x.npz")
    assert tr.load(tmp_path / "x.npz") == {"a": [1, 2], "b": [1, 2], "c": ([1, 2], [1, 2])}


def test_nesting_is_limited_with_a_clear_error_and_the_limit_round_trips(tmp_path):
    deep: list = []
    inner = deep
    for _ in range(trio.MAX_DEPTH - 1):
        inner.append([])
        inner = inner[0]
    inner.append(np.ones(1))
    tr.save({"d": deep}, tmp_path / "deep.npz")
    loaded = tr.load(tmp_path / "deep.npz")["d"]
    for _ in range(trio.MAX_DEPTH - 1):
        loaded = loaded[0]
    assert loaded[0].tolist() == [1.0]
    with pytest.raises(ValueError, match="save: .*nested more than"):
        tr.save({"d": [deep]}, tmp_path / "deeper.npz")
    assert sorted(os.listdir(tmp_path)) == ["deep.npz"]


def test_a_manifest_nested_too_deeply_is_a_value_error(tmp_path):
    good = tmp_path / "good.npz"
    tr.save({"w": np.zeros(1)}, good)
    tree = '{"t": "list", "items": [' * 5000 + "]}" * 5000
    manifest = ('{"format": "tinygrad_rnn.checkpoint", "version": 1, "tree": ' + tree
                + "}").encode()
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w") as zf:
        with zf.open(trio.MANIFEST + ".npy", "w") as f:
            np.lib.format.write_array(f, np.frombuffer(manifest, dtype=np.uint8))
    with pytest.raises(ValueError, match="bad.npz"):
        tr.load(bad)

