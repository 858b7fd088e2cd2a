"""Safe checkpoints: :func:`save` and :func:`load`, called as ``torch.save`` /
``torch.load``, without pickle.

``tr.save(obj, f)`` and ``tr.load(f, map_location=None, weights_only=True)`` take a path or
a binary file object (``open(path, 'wb')``, :class:`io.BytesIO`), as torch's do, and save
what a training script saves: a Tensor, a NumPy array, a ``state_dict()`` (a model's or an
optimizer's), nested dicts, lists and tuples of them, Python numbers, strings and None.
Types come back as saved: a Tensor as a Tensor (dtype, ``requires_grad``, device), an
``nn.Parameter`` as a Parameter, a NumPy array as a NumPy array, a tuple as a tuple, an
``OrderedDict`` as an ``OrderedDict``. A module or optimizer object itself is refused with a
pointer to its ``state_dict()`` (torch pickles it whole; nothing here pickles).

What differs from torch, on purpose and never silently: ``weights_only=False`` (torch's
unpickling of arbitrary objects), a ``pickle_module``, ``mmap=True``, pickle's keyword
arguments and a callable ``map_location`` are refused with an error that says so;
``pickle_protocol`` is accepted and ignored (it only selects pickle's byte format, and no
pickle is written). A write to a path is atomic; a write to a file object cannot be (see
:func:`save`).

Format
------
A checkpoint is a ``.npz`` (zip) archive holding

* ``__tinygrad_rnn__``: a uint8 array with a UTF-8 JSON manifest: the format name and
  version, and the structure of the saved object (dict keys and their order, lists, tuples,
  Python scalars and strings; each Tensor's device and ``requires_grad``), in which every
  array is a reference to an archive entry;
* ``a0``, ``a1``, ...: one ``.npy`` entry per array (numeric or boolean dtypes only).

So ``load(save(x))`` equals ``x``, arrays bit for bit (NaN payloads and -0.0 included).

Devices
-------
A checkpoint holds host arrays only. :func:`save` copies device data (Tensors and arrays on
a GPU or the stand-in) to the host explicitly, before anything is written, and records each
Tensor's device. :func:`load` puts each Tensor back on that device (``map_location=None``,
as torch does; an error that suggests ``map_location='cpu'`` when that device is not
available), or on the device ``map_location`` names: ``'cpu'``, ``'cuda'`` (``'cuda:0'``),
``'standin'``, an object whose ``str()`` is one of these (``torch.device('cpu')``), or a dict
from saved to target device names. NumPy arrays stay NumPy arrays (device arrays that were
not in a Tensor load as NumPy). ``model.load_state_dict(tr.load(f))`` and
``opt.load_state_dict(...)`` copy every value to the parameter's device in any case.

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
>>> import io
>>> buffer = io.BytesIO()
>>> tr.save(tr.tensor(np.arange(3.0), requires_grad=True), buffer)
>>> _ = buffer.seek(0)
>>> tr.load(buffer, map_location="cpu", weights_only=True)
Tensor([0., 1., 2.], dtype=float64, requires_grad=True)

Why one module of about 1,220 lines: ``torch.save``/``torch.load``'s file format (a zip of
pickled records and storages) is written and read here under one set of safety rules
(restricted unpickling, size limits, atomic writes), and the writer and the reader must
agree on every record, so they are kept side by side.
"""
from __future__ import annotations

import errno
import io
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

from .backend import get_array_module, module_for_device, normalize_device, to_device
from .tensor import Tensor

try:  # POSIX: the lock that tells a live writer's temporary file from a dead one's
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["save", "load", "atomic_write", "FORMAT_NAME", "FORMAT_VERSION", "MAX_DEPTH",
           "DEFAULT_MAX_BYTES", "MAX_EXPANSION"]

FORMAT_NAME = "tinygrad_rnn.checkpoint"
#: Version 2 added Tensors and Parameters as their own entries (version 1 files still load).
FORMAT_VERSION = 2
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


def _is_parameter(value: Tensor) -> bool:
    """True for an ``nn.Parameter`` (imported here, on use: nn sits above this module)."""
    from .nn.module import Parameter

    return isinstance(value, Parameter)


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
        if isinstance(value, Tensor):
            return self._encode_tensor(value, path)
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
        if callable(getattr(value, "state_dict", None)):
            # torch.save(model) pickles the whole object (its class is looked up, and its code
            # run, at load); a checkpoint here holds values only
            raise TypeError(
                f"save: cannot save the {type(value).__name__} object at {_where(path)} "
                f"itself: torch pickles whole modules and optimizers, and tinygrad_rnn never "
                f"pickles. Save its state instead, tr.save(model.state_dict(), f) (or "
                f"optimizer.state_dict()), and restore it with "
                f"model.load_state_dict(tr.load(f))"
            )
        raise TypeError(
            f"save: cannot save a {type(value).__name__} at {_where(path)}; a checkpoint holds "
            f"arrays, Tensors, dicts, lists, tuples, str, int, float, bool and None"
        )

    def _encode_tensor(self, value: Tensor, path: tuple) -> dict:
        """A Tensor (or Parameter): its data as a host array, with its dtype, device and
        ``requires_grad`` flag, so that it loads back as the same kind of tensor."""
        arr = np.asarray(value.numpy())
        _check_dtype(arr.dtype, path, "save")
        node = {"t": "parameter" if _is_parameter(value) else "tensor", "ref": self._ref(arr),
                "device": value.device, "requires_grad": bool(value.requires_grad)}
        return node

    def _encode_container(self, value: Any, path: tuple) -> dict:
        if isinstance(value, Mapping):
            items: list[Any] = []
            for key, item in value.items():
                if isinstance(key, str):
                    kind = "s"
                elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                    kind, key = "i", str(int(key))
                else:
                    raise TypeError(
                        f"save: dict keys must be str or int; got {type(key).__name__} key "
                        f"{key!r} at {_where(path)}"
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


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], object],
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


def save(obj: Any, f: str | os.PathLike | IO[bytes], pickle_module: Any = None,
         pickle_protocol: int = 2, *, compress: bool = False) -> None:
    """Write ``obj`` (a state dict, a Tensor, an array, nested containers of them) to ``f``.

    Called as ``torch.save(obj, f)``: ``f`` is a path or a binary file object.

    Parameters
    ----------
    obj : object
        A Tensor or Parameter (loads back as one, with its dtype, device and
        ``requires_grad``), a NumPy array or scalar (loads back as NumPy), a device array
        (saved as a host array, loads as NumPy), a Python int, float, bool, str or None, or
        dicts (str or int keys; ``OrderedDict`` kept as such), lists and tuples of these, at
        most :data:`MAX_DEPTH` levels deep: e.g. ``model.state_dict()``,
        ``optimizer.state_dict()`` or ``{'epoch': 3, 'model': ..., 'optimizer': ...}``.
        Arrays must have a numeric or boolean dtype. A module or an optimizer itself is
        refused (torch pickles it whole; save its ``state_dict()``).
    f : str, path-like or binary file object
        A path is written exactly under this name (no suffix is added; ``.npz`` is
        conventional), atomically (see Notes); a symlink is written through. A file object
        (``open(path, 'wb')``, :class:`io.BytesIO`) is written at its current position and
        left open; it must be opened in binary mode for writing.
    pickle_module : None
        torch's argument; only ``None`` (the default) is accepted, since nothing is pickled:
        any module is refused with a ValueError rather than silently not used.
    pickle_protocol : int
        torch's argument, accepted and ignored: it selects pickle's byte format, and a
        checkpoint here is a zip of ``.npy`` arrays and a JSON manifest, not a pickle. It must
        be an int (as in torch); the file is the same whatever its value.
    compress : bool
        Deflate the entries (smaller, slower). Keyword only (torch has no such argument).

    Raises
    ------
    ValueError
        An array of a non-numeric dtype (object, string, structured), naming its key; a
        reference cycle or nesting deeper than :data:`MAX_DEPTH`, naming where; an empty
        path; a path that is a FIFO, socket or device; a ``pickle_module``; a file object
        that is not writable.
    TypeError
        A key or value of an unsupported type (a module or optimizer among them), naming
        where it is; an ``f`` that is neither a path nor a file object, or a file object
        opened in text mode; a ``compress`` that is not a bool, a ``pickle_protocol`` that
        is not an int.
    IsADirectoryError
        The path is an existing directory or ends with a path separator (a file name is
        needed).
    FileNotFoundError
        The directory the path names does not exist.
    PermissionError
        The path is a read-only file (it is left as it was).

    Notes
    -----
    Everything is validated and encoded before anything is written. Written to a path, the
    write is atomic (see :func:`atomic_write`): the checkpoint goes to a temporary file
    beside the target, fsynced and renamed over it; on any error the previous file is left
    untouched and the temporary file is removed, and temporary files of writers that were
    killed are removed by the next write to the folder. **A write to a file object cannot be
    atomic**: it writes into the object as it goes, so an I/O error or an interrupt part way
    leaves part of a checkpoint in it (what was there before is not restored), and it is
    neither flushed to disk nor fsynced (call ``f.flush()`` and ``os.fsync(f.fileno())``
    for a real file). Pass a path where a crash must not leave a broken file.
    """
    _check_pickle_module("save", pickle_module)
    if isinstance(pickle_protocol, (bool, np.bool_)) \
            or not isinstance(pickle_protocol, (int, np.integer)):
        raise TypeError(f"save: pickle_protocol must be an int (it is accepted and ignored: "
                        f"nothing is pickled), got {type(pickle_protocol).__name__} "
                        f"{pickle_protocol!r}")
    if not isinstance(compress, (bool, np.bool_)):
        raise TypeError(f"save: compress must be a bool, got {type(compress).__name__} "
                        f"{compress!r}")
    fileobj = f if _is_file_object(f) else None
    if fileobj is not None:
        _check_writable(fileobj)
    elif not isinstance(f, (str, bytes, os.PathLike)):
        raise TypeError(f"save: f must be a path (str or path-like) or a binary file object "
                        f"opened for writing, got {type(f).__name__} {f!r}")
    else:
        f = _checked_target(f, "save")
    encoder = _Encoder()
    tree = encoder.encode(obj, ())
    manifest = json.dumps(
        {"format": FORMAT_NAME, "version": FORMAT_VERSION, "tree": tree},
        ensure_ascii=True, allow_nan=False,
    ).encode("ascii")
    if fileobj is not None:
        _write_archive(fileobj, manifest, encoder.arrays, bool(compress))
        return
    assert isinstance(f, str)  # the checked path, from _checked_target above
    atomic_write(f, lambda out: _write_archive(out, manifest, encoder.arrays, bool(compress)),
                 "save")


def _check_pickle_module(what: str, pickle_module: Any) -> None:
    """Refuse a ``pickle_module``: this package writes and reads no pickles."""
    if pickle_module is not None:
        raise ValueError(
            f"{what}: pickle_module={pickle_module!r} is not supported: tinygrad_rnn never "
            f"pickles or unpickles (a checkpoint is a zip of .npy arrays and a JSON "
            f"manifest); leave pickle_module out"
        )


def _is_file_object(f: Any) -> bool:
    """True for a file-like object (anything with ``read`` or ``write``), not a path."""
    return not isinstance(f, (str, bytes, os.PathLike)) and (
        callable(getattr(f, "write", None)) or callable(getattr(f, "read", None)))


def _describe(f: Any) -> str:
    """A file object as the messages name it: its ``name`` if it has one."""
    name = getattr(f, "name", None)
    if isinstance(name, (str, bytes)):
        return f"<{type(f).__name__} {os.fsdecode(name)!r}>"
    return f"<{type(f).__name__}>"


def _check_writable(f: Any) -> None:
    """Refuse a file object that is in text mode or not open for writing."""
    mode = getattr(f, "mode", None)
    if isinstance(f, io.TextIOBase) or isinstance(mode, str) and "b" not in mode:
        raise TypeError(f"save: the file object {_describe(f)} is open in text mode; a "
                        f"checkpoint is binary, open it with open(path, 'wb')")
    if not callable(getattr(f, "write", None)):
        raise ValueError(f"save: the file object {_describe(f)} has no write method; open "
                         f"it with open(path, 'wb') or use io.BytesIO()")
    writable = getattr(f, "writable", None)
    if getattr(f, "closed", False) is True or (callable(writable) and not writable()):
        state = "closed" if getattr(f, "closed", False) is True else "not open for writing"
        raise ValueError(f"save: the file object {_describe(f)} is {state}; open it with "
                         f"open(path, 'wb') or use io.BytesIO()")


# ------------------------------------------------------------------------- decoding
_PLANNED = np.zeros(())  # what an array reference decodes to while the archive is checked


class _Decoder:
    """Rebuilds the saved object from the manifest tree and the archive's members.

    Run twice: first with ``reader=None``, which checks the whole tree and records every
    array reference (no data is read), then with the reader that reads the arrays.
    """

    def __init__(self, members: dict[str, zipfile.ZipInfo], path: str,
                 reader: Callable[[zipfile.ZipInfo, tuple], np.ndarray] | None,
                 place: Callable[[str, tuple], str]) -> None:
        self.members = members
        self.path = path
        self.reader = reader
        self.place = place  # saved device, where -> the device to load a tensor onto
        self.used: set[str] = set()

    def _tensor(self, node: dict, where: tuple) -> Any:
        """A Tensor (or Parameter) entry: its array, on the device ``map_location`` gives."""
        saved_device, requires_grad = node["device"], node["requires_grad"]
        if not isinstance(saved_device, str) or not isinstance(requires_grad, bool):
            raise ValueError(f"load: {self.path!r} has a malformed manifest at "
                             f"{_where(where)}: a tensor needs a device name and a "
                             f"requires_grad flag")
        device = self.place(saved_device, where)
        arr = self._array(node["ref"], where)
        if self.reader is None:
            return arr
        if arr.dtype.kind not in "biuf" or requires_grad and arr.dtype.kind != "f":
            raise ValueError(f"load: {self.path!r} is damaged: the tensor at {_where(where)} "
                             f"has dtype {arr.dtype} (requires_grad={requires_grad})")
        if device != "cpu":
            arr = to_device(arr, device)
        if node["t"] == "parameter":
            from .nn.module import Parameter  # nn sits above this module

            tensor = Parameter._wrap(arr)
        else:
            tensor = Tensor._wrap(arr)
        if requires_grad:
            tensor.requires_grad_(True)
        return tensor

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
            if t in ("tensor", "parameter"):
                return self._tensor(node, where)
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
                # ndarray is a buffer; NumPy's stubs say so only for Python 3.12's protocol
                buffer = memoryview(arr.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
                done = 0
                while done < len(buffer):
                    n = member.readinto(  # type: ignore[attr-defined]  # a ZipExtFile
                        buffer[done:done + _READ_CHUNK])
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


def load(f: str | os.PathLike | IO[bytes], map_location: Any = None, pickle_module: Any = None,
         *, weights_only: bool | None = True, mmap: bool | None = None,
         max_bytes: int | str | None = "auto", **pickle_load_args: Any) -> Any:
    """Read a checkpoint written by :func:`save`; returns the saved object.

    Called as ``torch.load(f, map_location=..., weights_only=True)``. Tensors and Parameters
    come back as Tensors and Parameters with their dtype, shape, bytes and
    ``requires_grad`` (as leaves), on the device ``map_location`` gives; NumPy arrays and
    scalars come back as NumPy (device arrays were saved as host arrays and load as NumPy);
    dicts come back in the saved key order and type (``dict`` or ``OrderedDict``, as
    ``state_dict()`` returns), tuples as tuples. Restore a model with
    ``model.load_state_dict(tr.load(f))``, on any device.

    Parameters
    ----------
    f : str, path-like or binary file object
        A regular file (a symlink to one is fine), or a file object opened for reading in
        binary mode (``open(path, 'rb')``, :class:`io.BytesIO`) holding the checkpoint from
        its current position to its end (it must be seekable).
    map_location : None, str, device or dict
        Where Tensors go. ``None``: the device each was saved from (a RuntimeError when it
        is not available here, e.g. ``'cuda'`` without a GPU: pass ``map_location='cpu'``).
        A device name the package knows, ``'cpu'``, ``'cuda'`` (``'cuda:0'``) or
        ``'standin'``, or an object whose ``str()`` is one (a ``torch.device``): every
        Tensor goes there. A dict from saved device names to device names
        (``{'cuda:0': 'cpu'}``): Tensors saved on a listed device go to its value, others
        stay. Torch's callables ``fn(storage, location)`` are refused (there are no
        storages here), as are unknown devices (``'mps'``, ``'cuda:1'``).
    pickle_module : None
        torch's argument; only ``None`` is accepted (nothing is unpickled).
    weights_only : bool or None
        ``True`` (the default) or ``None`` (torch's default, which means ``True`` since torch
        2.6): a checkpoint only ever holds tensors, arrays, numbers, strings and containers.
        ``False``, which lets torch unpickle arbitrary objects (and run their code), is
        refused: this package never unpickles.
    mmap : bool or None
        torch's argument; ``None`` or ``False`` (arrays are read into memory). ``True`` is
        refused.
    max_bytes : int, 'auto' or None
        The most bytes the archive's members may declare, uncompressed, all together; checked
        before anything is allocated. ``'auto'`` (the default) allows
        ``max(DEFAULT_MAX_BYTES, MAX_EXPANSION * file size)`` (256 MiB or 16 times the file,
        whichever is more; see the module docstring), ``None`` means no limit. Keyword only
        (torch has no such argument).
    **pickle_load_args
        torch passes these (``encoding=``, ...) to pickle; any is refused (TypeError).

    Raises
    ------
    FileNotFoundError
        The path does not exist.
    TypeError
        ``f`` is neither a path nor a file object, or a file object in text mode;
        ``max_bytes`` is not an int, 'auto' or None; ``weights_only`` or ``mmap`` is not a
        bool or None; ``map_location`` is a callable or of another type; a pickle argument.
    ValueError
        ``weights_only=False``, ``mmap=True``, a ``pickle_module``, an unknown device in
        ``map_location``; a file object that is not readable or not seekable. The file is not
        a regular file (a directory, FIFO, socket or device: refused without opening it), a
        pickle, a foreign ``.npz``/``.npy`` (or torch zip) file, truncated or corrupt, from a
        newer format version, holds an object array, holds duplicate members or members the
        manifest does not account for, or declares more than ``max_bytes``. Nothing in the
        file is ever executed.
    RuntimeError
        A Tensor would go to a device that is not available (``'cuda'`` without CuPy or a
        GPU); nothing is returned then.

    Notes
    -----
    The time taken is linear in the number of arrays (one look-up in a dict per array).
    """
    _check_load_options(map_location, pickle_module, weights_only, mmap, pickle_load_args)
    place = _placement(map_location)
    if _is_file_object(f):
        name = _describe(f)
        stream = _readable_stream(f, name)
        stream.seek(0, io.SEEK_END)
        size = stream.tell()
        stream.seek(0)
        limit, rule = _byte_limit(max_bytes, size)
        return _load_stream(stream, name, limit, rule, place)
    try:
        path = os.fsdecode(os.fspath(f))  # type: ignore[arg-type]  # not a path: below
    except TypeError:
        raise TypeError(f"load: f must be a path (str or path-like) or a binary file object, "
                        f"got {type(f).__name__} {f!r}") from None
    with _open_regular(path) as stream:
        limit, rule = _byte_limit(max_bytes, os.fstat(stream.fileno()).st_size)
        return _load_stream(stream, path, limit, rule, place)


def _load_stream(stream: IO[bytes], path: str, limit: int | None, rule: str,
                 place: Callable[[str, tuple], str]) -> Any:
    """Read the archive that ``stream`` holds from position 0 to its end."""
    _check_header(stream, path)
    try:
        zf = zipfile.ZipFile(stream)
    except Exception as err:  # BadZipFile, EOFError, OSError, ...
        raise ValueError(f"load: {path!r} is corrupt or truncated (cannot read the zip "
                         f"archive: {type(err).__name__}: {err})") from err
    with zf:
        return _load_archive(zf, path, limit, rule, place)


def _check_load_options(map_location: Any, pickle_module: Any, weights_only: Any, mmap: Any,
                        pickle_load_args: dict[str, Any]) -> None:
    """Refuse torch's load options that would need pickle (see :func:`load`)."""
    if pickle_load_args:
        names = ", ".join(sorted(pickle_load_args))
        raise TypeError(f"load: unexpected keyword arguments ({names}); torch passes these "
                        f"to pickle, and tinygrad_rnn never unpickles")
    _check_pickle_module("load", pickle_module)
    if weights_only is not None and not isinstance(weights_only, (bool, np.bool_)):
        raise TypeError(f"load: weights_only must be True, False or None, got "
                        f"{type(weights_only).__name__} {weights_only!r}")
    if weights_only is not None and not weights_only:
        raise ValueError(
            "load: weights_only=False is not supported: it lets torch unpickle arbitrary "
            "objects (running their code), and tinygrad_rnn never unpickles. A checkpoint "
            "here holds only tensors, arrays, numbers, strings and containers, which "
            "weights_only=True (the default) loads"
        )
    if mmap is not None and not isinstance(mmap, (bool, np.bool_)):
        raise TypeError(f"load: mmap must be a bool or None, got {type(mmap).__name__} "
                        f"{mmap!r}")
    if mmap:
        raise ValueError("load: mmap=True is not supported: the arrays are read into memory "
                         "(leave mmap out)")
    if callable(map_location) and not isinstance(map_location, type):
        raise TypeError(
            "load: map_location as a function (torch's fn(storage, location)) is not "
            "supported: there are no storages here. Pass a device name ('cpu', 'cuda', "
            "'standin') or a dict from saved device names to device names"
        )


def _device_name(value: Any, what: str) -> str:
    """A device name from ``map_location`` (a str, or an object whose ``str()`` is one, such
    as a ``torch.device``) as ``'cpu'``, ``'cuda'`` or ``'standin'``."""
    if isinstance(value, (bytes, int, float, list, tuple, set)) or value is None:
        raise TypeError(f"load: {what} must be a device name such as 'cpu', 'cuda' or "
                        f"'standin', got {type(value).__name__} {value!r}")
    try:
        return normalize_device(value if isinstance(value, str) else str(value))
    except ValueError:
        raise ValueError(f"load: {what} names the unknown device {value!r}; tinygrad_rnn "
                         f"knows 'cpu', 'cuda' (or 'cuda:0') and 'standin'") from None


def _placement(map_location: Any) -> Callable[[str, tuple], str]:
    """The device each Tensor goes to, as a function of its saved device (and location, for
    the messages); ``map_location`` is checked here, before the file is opened."""
    if map_location is None:
        table: dict[str, str] = {}
        fixed = None
    elif isinstance(map_location, Mapping):
        table = {_device_name(k, "a key of map_location"):
                 _device_name(v, f"map_location[{k!r}]") for k, v in map_location.items()}
        fixed = None
    else:
        table, fixed = {}, _device_name(map_location, "map_location")
    available: dict[str, str | None] = {}

    def place(saved: str, where: tuple) -> str:
        try:
            saved = normalize_device(saved)
        except ValueError:
            raise ValueError(f"load: the tensor at {_where(where)} names an unknown device "
                             f"{saved!r} (a damaged or foreign checkpoint)") from None
        device = fixed if fixed is not None else table.get(saved, saved)
        if device not in available:
            try:
                module_for_device(device)
                available[device] = None
            except RuntimeError as err:
                available[device] = str(err)
        if available[device] is not None:
            how = ("map_location" if fixed is not None or saved in table
                   else "it was saved there, and map_location=None keeps it there")
            raise RuntimeError(
                f"load: the tensor at {_where(where)} would load on {device!r} ({how}), "
                f"which is not available: {available[device]}. Pass map_location='cpu' "
                f"to load every tensor on the CPU"
            )
        return device

    return place


def _readable_stream(f: Any, name: str) -> IO[bytes]:
    """``f`` checked to be a readable, seekable binary file object, positioned so that the
    checkpoint starts at 0 (the rest of the file is copied into memory when ``f`` is not at
    its start, as a zip archive is located from its end)."""
    mode = getattr(f, "mode", None)
    if isinstance(f, io.TextIOBase) or isinstance(mode, str) and "b" not in mode:
        raise TypeError(f"load: the file object {name} is open in text mode; open it with "
                        f"open(path, 'rb')")
    if getattr(f, "closed", False) is True:
        raise ValueError(f"load: the file object {name} is closed")
    readable, seekable = getattr(f, "readable", None), getattr(f, "seekable", None)
    if not callable(getattr(f, "read", None)) or callable(readable) and not readable():
        raise ValueError(f"load: the file object {name} is not open for reading; open it with "
                         f"open(path, 'rb')")
    if not callable(getattr(f, "seek", None)) or callable(seekable) and not seekable():
        raise ValueError(f"load: the file object {name} is not seekable (a zip archive is "
                         f"read from its end); read it into memory first, e.g. "
                         f"tr.load(io.BytesIO(f.read()))")
    if f.tell() != 0:
        return io.BytesIO(f.read())
    return f


def _load_archive(zf: zipfile.ZipFile, path: str, limit: int | None, rule: str,
                  place: Callable[[str, tuple], str]) -> Any:
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
    plan = _Decoder(members, path, reader=None, place=place)
    plan.decode(manifest.get("tree"), ())
    listed = {ref + ".npy" for ref in plan.used}
    extra = [name for name in members if name not in listed and name != MANIFEST + ".npy"]
    if extra:
        shown = ", ".join(repr(name) for name in extra[:5])
        raise ValueError(f"load: {path!r} holds entries the manifest does not list "
                         f"({shown}); not a checkpoint tr.save wrote")
    _check_size(path, [manifest_info] + [members[name] for name in listed], limit, rule)
    # pass 2: read the arrays
    return _Decoder(members, path, reader=reader, place=place).decode(manifest.get("tree"), ())
