"""Safe checkpoints: :func:`save` and :func:`load` for state dicts, without pickle.

A checkpoint is a ``.npz`` (zip) archive holding

* ``__tinygrad_rnn__``: a uint8 array with a UTF-8 JSON manifest: the format name and
  version, and the structure of the saved object (dict keys and their order, lists, tuples,
  Python scalars and strings), in which every array is a reference to an archive entry;
* ``a0``, ``a1``, ...: one ``.npy`` entry per array (numeric or boolean dtypes only).

So a model's ``state_dict()`` and nested objects such as an optimizer's state dict (integer
keys, hyperparameters, lists of parameter indices, ``None``) round-trip exactly:
``load(save(x))`` equals ``x``, arrays bit for bit (NaN payloads and -0.0 included).

Devices
-------
A checkpoint holds host arrays only. :func:`save` copies device data (Tensors and arrays on
a GPU or the stand-in) to the host explicitly, before the file system is touched;
:func:`load` returns NumPy arrays. To restore a model on a device, load into the module
(``model.to('cuda'); model.load_state_dict(tr.load(path))`` copies every value to the
parameter's device) or the optimizer (``opt.load_state_dict(...)`` does the same for its
state), whichever device the checkpoint was saved from.

Safety
------
* **No code runs on load.** Nothing is unpickled: the file must be a zip archive (a pickle,
  e.g. from ``torch.save`` of old or ``pickle.dump``, is refused from its first bytes), the
  archive is read with :mod:`zipfile` and each ``.npy`` header is parsed by NumPy's header
  reader; object (and any non-numeric) dtypes are refused before any data is read.
* **Only regular files are read.** A directory, FIFO, socket or device is refused
  (``ValueError``) from its ``stat``, before it is opened (a FIFO would otherwise block
  forever); the file is then opened non-blocking and checked again.
* **Foreign or crafted files are refused**: a plain ``.npz``/``.npy`` or a torch zip
  checkpoint has no manifest; an archive with two members of the same name, or any member the
  manifest does not account for exactly (``a0`` beside ``a0.npy``, a second manifest), is
  refused. Truncated or corrupted files raise ``ValueError`` (zip CRC checks catch flipped
  bytes).
* **Sizes are checked before allocating.** The sizes the archive declares (the zip directory's
  uncompressed size of every member, which bounds what can be read, and each ``.npy`` header's
  shape and dtype, which must agree with it) are added up before any array is allocated and
  compared with ``max_bytes``. The default, ``max_bytes='auto'``, allows
  ``max(DEFAULT_MAX_BYTES, MAX_EXPANSION * file size)``: 256 MiB, or 16 times the file size
  if that is more. An uncompressed checkpoint (the default of :func:`save`) is never near the
  limit (it is about as large as its arrays), nor is a compressed one of trained weights
  (float data deflates by a few percent); a file that claims more is a decompression bomb
  (deflate reaches about 1000:1, so 0.5 MiB can declare 500 MiB) or a checkpoint made mostly
  of zeros. Load one you trust with ``load(path, max_bytes=None)`` (no limit) or a number of
  bytes.
* **Nesting is bounded.** :func:`save` refuses a reference cycle (an object that contains
  itself) and nesting deeper than :data:`MAX_DEPTH` with a ``ValueError`` naming where, so
  that everything it writes loads back.

Writing: atomic, through symlinks, never over a read-only file
----------------------------------------------------------------
:func:`save` (and :meth:`tinygrad_rnn.data.Vocab.to_json`, through the same
:func:`atomic_write`) writes what ``open(path, 'wb')`` would write to, but atomically:

* ``path`` is resolved as ``open`` resolves it: a symlink (or chain of them, or a dangling
  one) is followed and the file it points to is replaced; the link stays a link.
* The target must be a regular file or not exist yet: a directory, a missing folder, a FIFO
  or a device is refused before anything is written. A target with no write permission bit
  (e.g. mode 0444) or that this process may not write is refused with ``PermissionError``
  naming it, the file left as it was (root included: a read-only checkpoint is protected on
  purpose).
* The data goes to a temporary file ``.<name>.trtmp<pid>-<random>.tmp`` beside the resolved
  target, which is flushed, fsynced, given the permissions (and owner, where allowed) of the
  file it replaces and renamed over it with ``os.replace``. Readers see the old file or the
  new one, never a mix. If anything fails before the rename (an exception, a
  ``KeyboardInterrupt``), the temporary file is removed at once.
* A writer that dies without running any cleanup (SIGKILL, out-of-memory kill, power loss)
  leaves its temporary file behind; **the next write to that folder removes it**. The rule
  that tells a dead writer's file from a live one's is a lock: each writer holds an exclusive
  ``flock`` on its temporary file from creating it until after the rename, and the kernel
  drops that lock when the process dies, however it dies (after a reboot no lock exists).
  Before writing, a writer scans its folder for names of that pattern and removes only those
  it can lock itself, checking that the name still refers to the file it locked; a writer
  that finds its own fresh file removed before it got the lock starts a new one. So the file
  of a live writer (another thread, process or container on the same machine) is never
  removed. Where locks are not available (no ``fcntl``, e.g. Windows, or a file system
  without ``flock``) nothing is removed and dead writers' files stay. A folder on a network
  file system written from several machines relies on its locks reaching across machines
  (NFS's do, unless it is mounted with ``local_lock=flock`` or ``all``).
* Files that do not match the pattern are never touched, including the
  ``.<name>.<random>.tmp`` files of older versions, whose writers cannot be told apart from
  other programs'.

Example
-------
>>> import os, tempfile
>>> import numpy as np
>>> import tinygrad_rnn as tr
>>> with tempfile.TemporaryDirectory() as folder:
...     path = os.path.join(folder, "model.npz")
...     tr.save({"w": np.arange(3.0), "meta": {"step": 7, "betas": (0.9, 0.999)}}, path)
...     loaded = tr.load(path)
>>> loaded["w"], loaded["meta"]
(array([0., 1., 2.]), {'step': 7, 'betas': (0.9, 0.999)})
"""
from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import tempfile
import zipfile
from collections import OrderedDict
from typing import IO, Any, Callable, Mapping

import numpy as np

from .backend import get_array_module, to_device

try:  # POSIX: the lock that tells a live writer's temporary file from a dead one's
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["save", "load", "atomic_write", "FORMAT_NAME", "FORMAT_VERSION", "MAX_DEPTH",
           "DEFAULT_MAX_BYTES", "MAX_EXPANSION"]

FORMAT_NAME = "tinygrad_rnn.checkpoint"
FORMAT_VERSION = 1
MANIFEST = "__tinygrad_rnn__"
#: The deepest nesting of dicts, lists and tuples :func:`save` accepts (the top-level dict
#: is depth 0); deeper objects would give a manifest too deep to parse back.
MAX_DEPTH = 100
#: ``load(..., max_bytes='auto')`` allows ``max(DEFAULT_MAX_BYTES, MAX_EXPANSION * file
#: size)`` bytes of declared (uncompressed) archive members.
DEFAULT_MAX_BYTES = 256 * 2 ** 20
MAX_EXPANSION = 16
_ALLOWED_KINDS = "biufc"  # bool, signed, unsigned, float, complex
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"
_READ_CHUNK = 1 << 20
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# the temporary files atomic_write creates, and the only files it ever removes
_TEMP_MARK = ".trtmp"
_TEMP_NAME = re.compile(r"\..*\.trtmp[0-9]+-[A-Za-z0-9_]+\.tmp", re.DOTALL)


# ------------------------------------------------------------------------- encoding
def _where(path: tuple) -> str:
    """A readable location such as ``['state'][0]['exp_avg']``."""
    return "".join(f"[{p!r}]" for p in path) or "the top level"


def _as_numpy(value: Any, path: tuple) -> np.ndarray | np.generic | None:
    """The NumPy array behind ``value`` (an ndarray, NumPy scalar, Tensor or device array,
    the last two copied from a device to the host), or None when ``value`` is not
    array-like."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value
    if get_array_module(value) is not np:  # a device array (CuPy, the stand-in)
        return to_device(value, "cpu")
    numpy_method = getattr(type(value), "numpy", None)
    if callable(numpy_method):  # a Tensor (ours; also torch's, when it needs no grad)
        try:
            arr = value.numpy()
        except Exception as err:
            raise ValueError(
                f"save: cannot convert the {type(value).__name__} at {_where(path)} to a NumPy "
                f"array: {err}"
            ) from err
        if isinstance(arr, (np.ndarray, np.generic)):
            # a 0-d Tensor may hand back a NumPy scalar (e.g. a loss from .sum()): saved as
            # the 0-d array it stands for, so it loads as an array, like every Tensor
            return np.asarray(arr)
    return None


def _check_dtype(dtype: np.dtype, path: tuple, verb: str) -> None:
    if dtype.kind not in _ALLOWED_KINDS or dtype.fields is not None:
        raise ValueError(
            f"{verb}: the array at {_where(path)} has dtype {dtype}; only numeric and "
            f"boolean arrays are allowed in a checkpoint (object, string and structured "
            f"arrays are refused)"
        )


class _Encoder:
    """Turns a nested object into a JSON-able tree plus a list of arrays.

    Containers on the path being encoded are tracked by ``id``, so a reference cycle is
    reported where it closes instead of recursing without end; nesting deeper than
    :data:`MAX_DEPTH` is refused likewise. A value shared by two branches (no cycle) is
    simply saved twice.
    """

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.open_containers: dict[int, tuple] = {}  # id -> where it was entered

    def _ref(self, arr: np.ndarray) -> str:
        name = f"a{len(self.arrays)}"
        self.arrays.append(arr)
        return name

    def _enter(self, value: Any, path: tuple) -> None:
        first = self.open_containers.get(id(value))
        if first is not None:
            raise ValueError(
                f"save: the {type(value).__name__} at {_where(path)} contains itself: it is "
                f"the same object as the one at {_where(first)} (a reference cycle); a "
                f"checkpoint holds a tree of values, copy or break the cycle first"
            )
        if len(path) > MAX_DEPTH:
            raise ValueError(
                f"save: the {type(value).__name__} at {_where(path)} is nested more than "
                f"MAX_DEPTH={MAX_DEPTH} levels deep; flatten the object (e.g. use a list of "
                f"arrays instead of nested lists)"
            )
        self.open_containers[id(value)] = path

    def encode(self, value: Any, path: tuple) -> dict:
        # the explicit type tags keep bool/int/float/str/None, tuple/list and dict/OrderedDict
        # apart, so decoding gives back exactly what was saved
        if value is None:
            return {"t": "none"}
        # arrays first: NumPy scalars such as np.float64 are also Python floats
        arr = _as_numpy(value, path)
        if arr is not None:
            _check_dtype(arr.dtype, path, "save")
            if isinstance(arr, np.generic):
                return {"t": "scalar", "ref": self._ref(np.asarray(arr))}
            return {"t": "array", "ref": self._ref(arr)}
        if isinstance(value, bool):
            return {"t": "bool", "v": bool(value)}
        if isinstance(value, int):
            return {"t": "int", "v": str(int(value))}
        if isinstance(value, float):
            # repr round-trips exactly, nan, inf and -0.0 included
            return {"t": "float", "v": float.__repr__(float(value))}
        if isinstance(value, str):
            return {"t": "str", "v": str(value)}
        if isinstance(value, (Mapping, list, tuple)):
            self._enter(value, path)
            try:
                return self._encode_container(value, path)
            finally:
                del self.open_containers[id(value)]
        raise TypeError(
            f"save: cannot save a {type(value).__name__} at {_where(path)}; a checkpoint holds "
            f"arrays, Tensors, dicts, lists, tuples, str, int, float, bool and None"
        )

    def _encode_container(self, value: Any, path: tuple) -> dict:
        if isinstance(value, Mapping):
            items = []
            for key, item in value.items():
                if isinstance(key, str):
                    kind = "s"
                elif isinstance(key, int) and not isinstance(key, bool) and path:
                    kind, key = "i", str(key)
                else:
                    allowed = "str" if not path else "str or int"
                    raise TypeError(
                        f"save: keys must be {allowed}; got {type(key).__name__} key {key!r} "
                        f"at {_where(path)}"
                    )
                sub = path + ((key if kind == "s" else int(key)),)
                items.append([kind, key, self.encode(item, sub)])
            return {"t": "odict" if isinstance(value, OrderedDict) else "dict", "items": items}
        items = [self.encode(v, path + (i,)) for i, v in enumerate(value)]
        return {"t": "tuple" if isinstance(value, tuple) else "list", "items": items}


def _write_archive(fileobj: Any, manifest: bytes, arrays: list[np.ndarray],
                   compress: bool) -> None:
    """Write the zip archive: the manifest entry, then one ``.npy`` entry per array."""
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(fileobj, mode="w", compression=method, allowZip64=True) as zf:
        entries = [(MANIFEST, np.frombuffer(manifest, dtype=np.uint8))]
        entries += [(f"a{i}", arr) for i, arr in enumerate(arrays)]
        for name, arr in entries:
            with zf.open(name + ".npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asarray(arr), allow_pickle=False)


# ------------------------------------------------------------------------- atomic writes
def _fsync_dir(directory: str) -> None:
    """Make the rename durable (POSIX); a no-op where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask_mode() -> int:
    """What a plain ``open(path, 'w')`` would create: 0o666 minus the umask."""
    try:  # Linux: read the umask without changing it
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)  # elsewhere: the classic query (briefly sets a common value)
    os.umask(umask)
    return 0o666 & ~umask


def _file_kind(mode: int) -> str:
    kinds = [(stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")]
    for test, name in kinds:
        if test(mode):
            return name
    return "not a regular file"


def _checked_target(path: Any, what: str) -> str:
    """``path`` as a str, refused (before anything is written) unless it can name a file:
    not empty, not an existing directory, not ending with a path separator."""
    try:
        path = os.fsdecode(os.fspath(path))
    except TypeError:
        raise TypeError(f"{what}: path must be a str or path-like, got {type(path).__name__} "
                        f"{path!r}") from None
    if not path:
        raise ValueError(f"{what}: path is empty; give a file name such as 'model.npz'")
    separators = tuple(s for s in (os.sep, os.altsep) if s)
    if path.endswith(separators) or os.path.isdir(path):
        raise IsADirectoryError(
            errno.EISDIR,
            f"{what}: path {path!r} is a directory (or ends with a path separator); give a "
            f"file name, e.g. {os.path.join(path, 'model.npz')!r}",
            path,
        )
    return path


def _resolved_target(path: str, what: str) -> str:
    """The file ``open(path, 'wb')`` would write: symlinks followed (a dangling one to the
    file it names), as an absolute path."""
    target = os.path.realpath(path)
    if os.path.islink(target):  # realpath stops at a loop
        raise OSError(errno.ELOOP, f"{what}: cannot write {path!r}: its symbolic links form a "
                                   f"loop", path)
    return target


def _check_replaceable(target: str, path: str, what: str) -> os.stat_result | None:
    """The stat of the file at ``target`` (None if there is none), refused unless a regular
    file this process may write."""
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        kind = (NotADirectoryError, errno.ENOTDIR, "is not a directory") \
            if os.path.exists(directory) else (FileNotFoundError, errno.ENOENT, "does not exist")
        raise kind[0](kind[1], f"{what}: cannot write {path!r}: directory {directory!r} "
                               f"{kind[2]}", path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise type(err)(err.errno, f"{what}: cannot write {path!r}: {err.strerror}",
                        path) from err
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"{what}: path {path!r} is a directory; give a "
                                              f"file name", path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what}: {path!r} is {_file_kind(st.st_mode)}, not a regular file; "
                         f"refusing to replace it")
    effective = os.access in os.supports_effective_ids
    if not st.st_mode & 0o222 or not os.access(target, os.W_OK, effective_ids=effective):
        raise PermissionError(
            errno.EACCES,
            f"{what}: cannot write {path!r}: the file is read-only (mode "
            f"{stat.filemode(st.st_mode)}) or not writable by this process; it was left as it "
            f"was. Make it writable (chmod u+w) or write to another name",
            path,
        )
    return st


def _lock(fd: int, blocking: bool) -> bool:
    """Take the exclusive ``flock`` on ``fd``; False when it is held elsewhere or the file
    system has no locks (then nobody can prove a writer dead)."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError:
        return False
    return True


def _remove_dead_temps(directory: str) -> list[str]:
    """Remove the temporary files of dead writers in ``directory``; returns their names.

    A name of the :func:`atomic_write` pattern is removed only when its file can be locked
    (no live writer holds the lock) and the name still refers to the locked file.
    """
    if fcntl is None:
        return []
    try:
        with os.scandir(directory) as entries:
            names = [e.name for e in entries if _TEMP_NAME.fullmatch(e.name)]
    except OSError:
        return []
    removed = []
    for name in names:
        full = os.path.join(directory, name)
        try:
            fd = os.open(full, os.O_RDWR | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
        except OSError:  # gone already, someone else's, a symlink, ...
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or not _lock(fd, blocking=False):
                continue  # a live writer holds it
            if os.path.samestat(st, os.stat(full, follow_symlinks=False)):
                os.unlink(full)
                removed.append(name)
        except OSError:
            continue
        finally:
            os.close(fd)  # drops our lock
    return removed


def _new_locked_temp(directory: str, target: str, path: str, what: str) -> tuple[int, str]:
    """Create a temporary file beside ``target`` and hold its lock (see the module notes)."""
    prefix = f".{os.path.basename(target)[:40]}{_TEMP_MARK}{os.getpid()}-"
    for _ in range(100):
        try:
            fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
        except OSError as err:
            raise type(err)(err.errno, f"{what}: cannot write {path!r}: cannot create a "
                                       f"temporary file in {directory!r}: {err.strerror}",
                            path) from err
        if not _lock(fd, blocking=True):
            return fd, tmp  # no locks here: then no cleaner can remove it either
        try:
            if os.path.samestat(os.fstat(fd), os.stat(tmp, follow_symlinks=False)):
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)  # a cleaner removed it before we held the lock: take another
    raise OSError(errno.EAGAIN, f"{what}: cannot write {path!r}: temporary files in "
                                f"{directory!r} keep disappearing", path)


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], None],
                 what: str = "save") -> str:
    """Write a file atomically, as ``open(path, 'wb')`` would but all or nothing.

    Parameters
    ----------
    path : str or path-like
        The file to write. A symlink is followed (the file it points to is replaced, the link
        kept); the target must be a regular file or not exist, in an existing directory.
    write : callable
        Called once with a binary file object to write the content to.
    what : str
        The name of the public caller, for the messages (e.g. ``"Vocab.to_json"``).

    Returns
    -------
    str
        The absolute path of the file that was written (the resolved target).

    Raises
    ------
    IsADirectoryError, FileNotFoundError, NotADirectoryError
        ``path`` is (or ends like) a directory; its directory does not exist.
    PermissionError
        The target is read-only (no write permission bit, root included) or not writable.
    ValueError
        The target is a FIFO, socket or device; ``path`` is empty.
    OSError
        A symlink loop, or the temporary file could not be created, written or renamed
        (every message names ``path``).

    Notes
    -----
    Before writing, the temporary files of dead writers in the target's folder are removed
    (never a live writer's); see the module docstring for the rule.
    """
    path = _checked_target(path, what)
    target = _resolved_target(path, what)
    st = _check_replaceable(target, path, what)
    directory = os.path.dirname(target)
    mode = stat.S_IMODE(st.st_mode) if st is not None else _umask_mode()
    _remove_dead_temps(directory)
    fd, tmp = _new_locked_temp(directory, target, path, what)
    try:
        with os.fdopen(fd, "wb") as f:  # closing drops the lock: only after the rename
            write(f)
            f.flush()
            os.fsync(f.fileno())
            if st is not None and hasattr(os, "chown") \
                    and (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                try:  # keep the owner of the file we replace, as writing into it would
                    os.chown(tmp, st.st_uid, st.st_gid)
                except OSError:
                    pass
            os.chmod(tmp, mode)
            os.replace(tmp, target)
    except BaseException:  # also KeyboardInterrupt: never leave a half-written temp file
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)
    return target


def save(obj: Mapping[str, Any], path: str | os.PathLike, compress: bool = False) -> None:
    """Write a state dict (or a nested dict such as an optimizer's state) to ``path``.

    Parameters
    ----------
    obj : mapping
        Top-level keys are str. Values are NumPy arrays, device arrays or Tensors (on any
        device) of numeric or boolean dtype, all saved as host arrays, or nested dicts (str
        or int keys), lists and tuples of such values and of Python scalars, strings and
        None, at most :data:`MAX_DEPTH` levels deep.
    path : str or path-like
        Written exactly under this name (no suffix is added; ``.npz`` is conventional). A
        symlink is written through: the file it points to is replaced.
    compress : bool
        Deflate the entries (smaller, slower).

    Raises
    ------
    ValueError
        An array of a non-numeric dtype (object, string, structured), naming its key; a
        reference cycle or nesting deeper than :data:`MAX_DEPTH`, naming where; an empty
        ``path``; a ``path`` that is a FIFO, socket or device.
    TypeError
        A key or value of an unsupported type, naming where it is; a ``path`` that is not a
        str or path-like; a ``compress`` that is not a bool.
    IsADirectoryError
        ``path`` is an existing directory or ends with a path separator (a file name is
        needed).
    FileNotFoundError
        The directory ``path`` names does not exist.
    PermissionError
        ``path`` is a read-only file (it is left as it was).

    Notes
    -----
    The write is atomic (see :func:`atomic_write`): the checkpoint is written to a temporary
    file beside the target, fsynced and renamed over it; on any error the previous file is
    left untouched and the temporary file is removed, and temporary files of writers that
    were killed are removed by the next write to the folder. Everything is validated before
    the file system is touched.
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f"save: expected a dict (e.g. model.state_dict()), got "
                        f"{type(obj).__name__}")
    if not isinstance(compress, (bool, np.bool_)):
        raise TypeError(f"save: compress must be a bool, got {type(compress).__name__} "
                        f"{compress!r}")
    path = _checked_target(path, "save")
    encoder = _Encoder()
    tree = encoder.encode(obj, ())
    manifest = json.dumps(
        {"format": FORMAT_NAME, "version": FORMAT_VERSION, "tree": tree},
        ensure_ascii=True, allow_nan=False,
    ).encode("ascii")
    atomic_write(path, lambda f: _write_archive(f, manifest, encoder.arrays, compress), "save")


# ------------------------------------------------------------------------- decoding
_PLANNED = np.zeros(())  # what an array reference decodes to while the archive is checked


class _Decoder:
    """Rebuilds the saved object from the manifest tree and the archive's members.

    Run twice: first with ``reader=None``, which checks the whole tree and records every
    array reference (no data is read), then with the reader that reads the arrays.
    """

    def __init__(self, members: dict[str, zipfile.ZipInfo], path: str,
                 reader: Callable[[zipfile.ZipInfo, tuple], np.ndarray] | None) -> None:
        self.members = members
        self.path = path
        self.reader = reader
        self.used: set[str] = set()

    def _array(self, ref: Any, where: tuple) -> np.ndarray:
        info = self.members.get(ref + ".npy") if isinstance(ref, str) else None
        if info is None:
            raise ValueError(f"load: {self.path!r} is damaged: the manifest refers to a "
                             f"missing entry {ref!r} (at {_where(where)})")
        if ref in self.used:
            raise ValueError(f"load: {self.path!r} is damaged: entry {ref!r} is used twice")
        self.used.add(ref)
        if self.reader is None:
            return _PLANNED
        return self.reader(info, where)

    def decode(self, node: Any, where: tuple) -> Any:
        if not isinstance(node, dict) or "t" not in node:
            raise ValueError(f"load: {self.path!r} has a malformed manifest at {_where(where)}")
        t = node["t"]
        try:
            if t == "none":
                return None
            if t == "bool":
                return bool(node["v"])
            if t == "int":
                return int(node["v"])
            if t == "float":
                return float(node["v"])
            if t == "str":
                return str(node["v"])
            if t == "array":
                return self._array(node["ref"], where)
            if t == "scalar":
                return self._array(node["ref"], where)[()]
            if t in ("dict", "odict"):
                out: dict = OrderedDict() if t == "odict" else {}
                for kind, key, item in node["items"]:
                    key = int(key) if kind == "i" else str(key)
                    out[key] = self.decode(item, where + (key,))
                return out
            if t in ("list", "tuple"):
                items = [self.decode(v, where + (i,)) for i, v in enumerate(node["items"])]
                return tuple(items) if t == "tuple" else items
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, ValueError) and str(err).startswith("load:"):
                raise
            raise ValueError(f"load: {self.path!r} has a malformed manifest at "
                             f"{_where(where)}: {err!r}") from err
        raise ValueError(f"load: {self.path!r} has an unknown entry type {t!r} at "
                         f"{_where(where)}")


class _ArrayReader:
    """Reads ``.npy`` members: header first (dtype, shape, and their size checked against
    the member's declared size), then the data into an array of exactly that size."""

    def __init__(self, zf: zipfile.ZipFile, path: str) -> None:
        self.zf = zf
        self.path = path

    def __call__(self, info: zipfile.ZipInfo, where: tuple) -> np.ndarray:
        name = info.filename
        try:
            with self.zf.open(info) as member:
                shape, fortran, dtype = self._header(member, name, where)
                count = math.prod(shape)
                header_bytes = member.tell()
                if header_bytes + count * dtype.itemsize != info.file_size:
                    raise ValueError(
                        f"load: {self.path!r} is damaged: entry {name!r} declares "
                        f"{count * dtype.itemsize} bytes of data (shape {shape}, dtype "
                        f"{dtype}) but holds {info.file_size - header_bytes}"
                    )
                arr = np.empty(shape[::-1] if fortran else shape, dtype=dtype)
                buffer = memoryview(arr.reshape(-1).view(np.uint8))
                done = 0
                while done < len(buffer):
                    n = member.readinto(buffer[done:done + _READ_CHUNK])
                    if not n:
                        raise EOFError("the entry ends early")
                    done += n
        except ValueError as err:
            if str(err).startswith("load:"):
                raise
            raise ValueError(f"load: {self.path!r} is corrupt or truncated: entry {name!r}: "
                             f"{err}") from err
        except Exception as err:  # BadZipFile (CRC), EOFError, zlib.error, OSError, ...
            raise ValueError(f"load: {self.path!r} is corrupt or truncated: entry {name!r}: "
                             f"{type(err).__name__}: {err}") from err
        return arr.transpose() if fortran else arr

    def _header(self, member: IO[bytes], name: str, where: tuple) -> tuple:
        if member.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
            raise ValueError(f"load: {self.path!r} is damaged: entry {name!r} is not a .npy "
                             f"array")
        version = tuple(member.read(2))
        readers = {(1, 0): np.lib.format.read_array_header_1_0,
                   (2, 0): np.lib.format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"unsupported .npy format version {version}")
        shape, fortran, dtype = readers[version](member)
        if any(isinstance(n, bool) or n < 0 for n in shape):
            raise ValueError(f"invalid shape {shape}")
        if dtype.hasobject:
            raise ValueError(
                f"load: the array at {_where(where)} in {self.path!r} is an object array "
                f"(stored with pickle); refused, nothing was unpickled"
            )
        _check_dtype(dtype, where, "load")
        return shape, fortran, dtype


def _check_header(f: IO[bytes], path: str) -> None:
    """Refuse anything that is not a zip archive, before the zip reader sees it."""
    head = f.read(8)
    f.seek(0)
    if head.startswith(_ZIP_MAGIC):
        return
    if not head:
        raise ValueError(f"load: {path!r} is empty (a truncated or interrupted write?)")
    if head.startswith(b"\x80"):
        raise ValueError(
            f"load: {path!r} is a Python pickle (e.g. from pickle.dump or an old torch.save), "
            f"not a tinygrad_rnn checkpoint; pickles can run arbitrary code when loaded, so "
            f"they are refused (nothing was unpickled). Convert it to arrays and use tr.save."
        )
    if head.startswith(_NPY_MAGIC):
        raise ValueError(
            f"load: {path!r} is a single-array .npy file, not a tinygrad_rnn checkpoint; read "
            f"it with numpy.load(path, allow_pickle=False)"
        )
    raise ValueError(
        f"load: {path!r} is not a tinygrad_rnn checkpoint (it is not a zip/.npz archive; "
        f"first bytes {head!r})"
    )


def _refuse_non_regular(st: os.stat_result, path: str) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"load: {path!r} is a directory, not a checkpoint file; give the "
                         f"path of the file tr.save wrote")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"load: {path!r} is {_file_kind(st.st_mode)}, not a regular file; a "
                         f"checkpoint is read from a regular file only (it was not read)")


def _open_regular(path: str) -> IO[bytes]:
    """Open ``path`` for reading if it is a regular file: checked from ``stat`` before it is
    opened (a FIFO would block ``open``), opened non-blocking and checked again (the name
    may have been given to another file in between)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"load: no checkpoint at {path!r}",
                                path) from None
    _refuse_non_regular(st, path)
    f = os.fdopen(os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC), "rb")
    try:
        _refuse_non_regular(os.fstat(f.fileno()), path)
    except BaseException:
        f.close()
        raise
    return f


def _byte_limit(max_bytes: Any, file_size: int) -> tuple[int | None, str]:
    """The limit on declared bytes, and how it was set (for the message)."""
    if isinstance(max_bytes, str) and max_bytes == "auto":
        limit = max(DEFAULT_MAX_BYTES, MAX_EXPANSION * file_size)
        return limit, (f"max_bytes='auto' allows max(DEFAULT_MAX_BYTES={DEFAULT_MAX_BYTES}, "
                       f"MAX_EXPANSION={MAX_EXPANSION} x the file's {file_size} bytes) = "
                       f"{limit}")
    if max_bytes is None:
        return None, "max_bytes=None: no limit"
    if isinstance(max_bytes, (bool, np.bool_)) or not isinstance(max_bytes, (int, np.integer)):
        raise TypeError(f"load: max_bytes must be an int >= 0, 'auto' or None, got "
                        f"{max_bytes!r}")
    if max_bytes < 0:
        raise ValueError(f"load: max_bytes must be an int >= 0, 'auto' or None, got "
                         f"{max_bytes!r}")
    return int(max_bytes), f"max_bytes={int(max_bytes)}"


def _check_size(path: str, infos: list[zipfile.ZipInfo], limit: int | None, rule: str) -> None:
    """Refuse, before allocating, members whose declared sizes add up past ``limit``."""
    total = sum(info.file_size for info in infos)
    if limit is None or total <= limit:
        return
    largest = max(infos, key=lambda info: info.file_size)
    raise ValueError(
        f"load: {path!r}: entry {largest.filename!r} declares {largest.file_size} bytes "
        f"uncompressed ({total} bytes in the {len(infos)} entries read), more than the limit "
        f"of {rule}. Nothing was allocated. A file that holds much more than its size may be "
        f"a decompression bomb; if you trust it, load it with tr.load(path, "
        f"max_bytes={total}) or max_bytes=None (no limit)"
    )


def load(path: str | os.PathLike, *, max_bytes: int | str | None = "auto") -> Any:
    """Read a checkpoint written by :func:`save`; returns the saved object.

    Arrays come back as NumPy (host) arrays with the saved dtype, shape and bytes (Tensors
    and device arrays were saved as host arrays); dicts come back in the saved key order
    and type (``dict`` or ``OrderedDict``, as ``state_dict()`` returns), tuples as tuples.
    Load a model with ``model.load_state_dict(tr.load(path))``, on any device.

    Parameters
    ----------
    path : str or path-like
        A regular file (a symlink to one is fine).
    max_bytes : int, 'auto' or None
        The most bytes the archive's members may declare, uncompressed, all together; checked
        before anything is allocated. ``'auto'`` (the default) allows
        ``max(DEFAULT_MAX_BYTES, MAX_EXPANSION * file size)`` (256 MiB or 16 times the file,
        whichever is more; see the module docstring), ``None`` means no limit.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    TypeError
        ``path`` is not a str or path-like; ``max_bytes`` is not an int, 'auto' or None.
    ValueError
        The file is not a regular file (a directory, FIFO, socket or device: refused without
        opening it), a pickle, a foreign ``.npz``/``.npy`` (or torch zip) file, truncated or
        corrupt, from a newer format version, holds an object array, holds duplicate members
        or members the manifest does not account for, or declares more than ``max_bytes``.
        Nothing in the file is ever executed.

    Notes
    -----
    The time taken is linear in the number of arrays (one look-up in a dict per array).
    """
    try:
        path = os.fsdecode(os.fspath(path))
    except TypeError:
        raise TypeError(f"load: path must be a str or path-like, got {type(path).__name__} "
                        f"{path!r}") from None
    with _open_regular(path) as f:
        limit, rule = _byte_limit(max_bytes, os.fstat(f.fileno()).st_size)
        _check_header(f, path)
        try:
            zf = zipfile.ZipFile(f)
        except Exception as err:  # BadZipFile, EOFError, OSError, ...
            raise ValueError(f"load: {path!r} is corrupt or truncated (cannot read the zip "
                             f"archive: {type(err).__name__}: {err})") from err
        with zf:
            return _load_archive(zf, path, limit, rule)


def _load_archive(zf: zipfile.ZipFile, path: str, limit: int | None, rule: str) -> Any:
    members: dict[str, zipfile.ZipInfo] = {}
    for info in zf.infolist():
        if info.filename in members:
            raise ValueError(f"load: {path!r} holds the member {info.filename!r} twice (a "
                             f"crafted archive: which copy counts is ambiguous); refused")
        members[info.filename] = info
    manifest_info = members.get(MANIFEST + ".npy")
    if manifest_info is None:
        raise ValueError(
            f"load: {path!r} was not written by tinygrad_rnn.save (no {MANIFEST!r} "
            f"entry); a plain .npz can be read with numpy.load(path, allow_pickle=False)"
        )
    _check_size(path, [manifest_info], limit, rule)
    reader = _ArrayReader(zf, path)
    try:
        raw = reader(manifest_info, (MANIFEST,))
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise ValueError(f"manifest has dtype {raw.dtype} and shape {raw.shape}")
        manifest = json.loads(raw.tobytes().decode("ascii"))
    except Exception as err:
        raise ValueError(f"load: {path!r} is corrupt or not a tinygrad_rnn checkpoint "
                         f"(unreadable manifest: {type(err).__name__}: {err})") from err
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise ValueError(f"load: {path!r} is not a tinygrad_rnn checkpoint (its manifest "
                         f"names no {FORMAT_NAME!r} format)")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"load: {path!r} has an invalid format version {version!r}")
    if version > FORMAT_VERSION:
        raise ValueError(
            f"load: {path!r} was written in checkpoint format version {version}; this "
            f"tinygrad_rnn reads up to version {FORMAT_VERSION} (upgrade tinygrad_rnn)"
        )
    # pass 1: the whole tree is checked and every member accounted for, nothing read yet
    plan = _Decoder(members, path, reader=None)
    plan.decode(manifest.get("tree"), ())
    listed = {ref + ".npy" for ref in plan.used}
    extra = [name for name in members if name not in listed and name != MANIFEST + ".npy"]
    if extra:
        shown = ", ".join(repr(name) for name in extra[:5])
        raise ValueError(f"load: {path!r} holds entries the manifest does not list "
                         f"({shown}); not a checkpoint tr.save wrote")
    _check_size(path, [manifest_info] + [members[name] for name in listed], limit, rule)
    # pass 2: read the arrays
    return _Decoder(members, path, reader=reader).decode(manifest.get("tree"), ())
