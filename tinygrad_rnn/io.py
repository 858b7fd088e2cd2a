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
  e.g. from ``torch.save`` of old or ``pickle.dump``, is refused from its first bytes), arrays
  are read with ``numpy.load(..., allow_pickle=False)``, and object arrays are refused.
* **Foreign files are refused**: a plain ``.npz``/``.npy`` or a torch zip checkpoint has no
  manifest. Truncated or corrupted files raise ``ValueError`` (zip CRC checks catch flipped
  bytes).
* **Atomic writes.** :func:`save` writes a temporary file in the target's directory, flushes
  and fsyncs it, then renames it over the target with ``os.replace``. If anything fails (or
  the process is interrupted) before the rename, the previous file under that name is intact
  and the temporary file is removed.

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
import os
import tempfile
import zipfile
from collections import OrderedDict
from typing import Any, Mapping

import numpy as np

from .backend import get_array_module, to_device

__all__ = ["save", "load", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "tinygrad_rnn.checkpoint"
FORMAT_VERSION = 1
MANIFEST = "__tinygrad_rnn__"
_ALLOWED_KINDS = "biufc"  # bool, signed, unsigned, float, complex
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_NPY_MAGIC = b"\x93NUMPY"


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


def _check_dtype(arr: np.ndarray | np.generic, path: tuple, verb: str) -> None:
    if arr.dtype.kind not in _ALLOWED_KINDS or arr.dtype.fields is not None:
        raise ValueError(
            f"{verb}: the array at {_where(path)} has dtype {arr.dtype}; only numeric and "
            f"boolean arrays are allowed in a checkpoint (object, string and structured "
            f"arrays are refused)"
        )


class _Encoder:
    """Turns a nested object into a JSON-able tree plus a list of arrays."""

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []

    def _ref(self, arr: np.ndarray) -> str:
        name = f"a{len(self.arrays)}"
        self.arrays.append(arr)
        return name

    def encode(self, value: Any, path: tuple) -> dict:
        # the explicit type tags keep bool/int/float/str/None, tuple/list and dict/OrderedDict
        # apart, so decoding gives back exactly what was saved
        if value is None:
            return {"t": "none"}
        # arrays first: NumPy scalars such as np.float64 are also Python floats
        arr = _as_numpy(value, path)
        if arr is not None:
            _check_dtype(arr, path, "save")
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
        if isinstance(value, (list, tuple)):
            items = [self.encode(v, path + (i,)) for i, v in enumerate(value)]
            return {"t": "tuple" if isinstance(value, tuple) else "list", "items": items}
        raise TypeError(
            f"save: cannot save a {type(value).__name__} at {_where(path)}; a checkpoint holds "
            f"arrays, Tensors, dicts, lists, tuples, str, int, float, bool and None"
        )


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


def _new_file_mode(path: str) -> int:
    """The permissions the checkpoint should get: those of the file it replaces, otherwise
    what a plain ``open(path, 'w')`` would create (0o666 minus the umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        pass
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


def _checked_target(path: Any) -> str:
    """``path`` as a str, refused (before anything is written) unless it can name a file:
    not empty, not an existing directory, not ending with a path separator."""
    try:
        path = os.fsdecode(os.fspath(path))
    except TypeError:
        raise TypeError(f"save: path must be a str or path-like, got {type(path).__name__} "
                        f"{path!r}") from None
    if not path:
        raise ValueError("save: path is empty; give a file name such as 'model.npz'")
    separators = tuple(s for s in (os.sep, os.altsep) if s)
    if path.endswith(separators) or os.path.isdir(path):
        raise IsADirectoryError(
            errno.EISDIR,
            f"save: path {path!r} is a directory (or ends with a path separator); give a "
            f"file name, e.g. {os.path.join(path, 'model.npz')!r}",
            path,
        )
    return path


def save(obj: Mapping[str, Any], path: str | os.PathLike, compress: bool = False) -> None:
    """Write a state dict (or a nested dict such as an optimizer's state) to ``path``.

    Parameters
    ----------
    obj : mapping
        Top-level keys are str. Values are NumPy arrays, device arrays or Tensors (on any
        device) of numeric or boolean dtype, all saved as host arrays, or nested dicts (str
        or int keys), lists and tuples of such values and of Python scalars, strings and
        None.
    path : str or path-like
        Written exactly under this name (no suffix is added; ``.npz`` is conventional).
    compress : bool
        Deflate the entries (smaller, slower).

    Raises
    ------
    ValueError
        An array of a non-numeric dtype (object, string, structured), naming its key; an
        empty ``path``.
    TypeError
        A key or value of an unsupported type, naming where it is; a ``path`` that is not a
        str or path-like.
    IsADirectoryError
        ``path`` is an existing directory or ends with a path separator (a file name is
        needed).
    FileNotFoundError
        The directory ``path`` names does not exist.

    Notes
    -----
    The write is atomic: the checkpoint is written to a temporary file in the same directory,
    fsynced and renamed over ``path``; on any error the previous file at ``path`` is left
    untouched and the temporary file is removed. Everything is validated before the file
    system is touched.
    """
    if not isinstance(obj, Mapping):
        raise TypeError(f"save: expected a dict (e.g. model.state_dict()), got "
                        f"{type(obj).__name__}")
    path = _checked_target(path)
    encoder = _Encoder()
    tree = encoder.encode(obj, ())
    manifest = json.dumps(
        {"format": FORMAT_NAME, "version": FORMAT_VERSION, "tree": tree},
        ensure_ascii=True, allow_nan=False,
    ).encode("ascii")

    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, f"save: directory {directory!r} does not exist",
                                directory)
    mode = _new_file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_archive(f, manifest, encoder.arrays, compress)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:  # also KeyboardInterrupt: never leave a half-written temp file
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)


# ------------------------------------------------------------------------- decoding
class _Decoder:
    """Rebuilds the saved object from the manifest tree and the archive's arrays."""

    def __init__(self, archive: Any, path: str) -> None:
        self.archive = archive
        self.path = path
        self.used: set[str] = set()

    def _array(self, ref: Any, where: tuple) -> np.ndarray:
        if not isinstance(ref, str) or ref + ".npy" not in self.archive.zip.namelist():
            raise ValueError(f"load: {self.path!r} is damaged: the manifest refers to a "
                             f"missing entry {ref!r} (at {_where(where)})")
        if ref in self.used:
            raise ValueError(f"load: {self.path!r} is damaged: entry {ref!r} is used twice")
        self.used.add(ref)
        try:
            arr = self.archive[ref]
        except ValueError as err:
            if "pickle" in str(err) or "Object arrays" in str(err):
                raise ValueError(
                    f"load: the array at {_where(where)} in {self.path!r} is an object array "
                    f"(stored with pickle); refused, nothing was unpickled"
                ) from err
            raise ValueError(f"load: {self.path!r} is corrupt or truncated: entry {ref!r}: "
                             f"{err}") from err
        except Exception as err:  # BadZipFile (CRC), EOFError, zlib.error, OSError, ...
            raise ValueError(f"load: {self.path!r} is corrupt or truncated: entry {ref!r}: "
                             f"{type(err).__name__}: {err}") from err
        if not isinstance(arr, np.ndarray):
            raise ValueError(f"load: {self.path!r} is damaged: entry {ref!r} is not a .npy "
                             f"array")
        _check_dtype(arr, where, "load")
        return arr

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


def _check_header(path: str) -> None:
    """Refuse anything that is not a zip archive, before NumPy sees it."""
    with open(path, "rb") as f:
        head = f.read(8)
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


def load(path: str | os.PathLike) -> Any:
    """Read a checkpoint written by :func:`save`; returns the saved object.

    Arrays come back as NumPy (host) arrays with the saved dtype, shape and bytes (Tensors
    and device arrays were saved as host arrays); dicts come back in the saved key order
    and type (``dict`` or ``OrderedDict``, as ``state_dict()`` returns), tuples as tuples.
    Load a model with ``model.load_state_dict(tr.load(path))``, on any device.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        The file is a pickle, a foreign ``.npz``/``.npy`` (or torch zip) file, truncated or
        corrupt, from a newer format version, or holds an object array. Nothing in the file
        is ever executed.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, f"load: no checkpoint at {path!r}", path)
    _check_header(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as err:  # BadZipFile, EOFError, OSError, ...
        raise ValueError(f"load: {path!r} is corrupt or truncated (cannot read the zip "
                         f"archive: {type(err).__name__}: {err})") from err
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"load: {path!r} is not a tinygrad_rnn checkpoint")
    with archive:
        names = archive.zip.namelist()
        if MANIFEST + ".npy" not in names:
            raise ValueError(
                f"load: {path!r} was not written by tinygrad_rnn.save (no {MANIFEST!r} "
                f"entry); a plain .npz can be read with numpy.load(path, allow_pickle=False)"
            )
        try:
            raw = archive[MANIFEST]
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
        decoder = _Decoder(archive, path)
        obj = decoder.decode(manifest.get("tree"), ())
        extra = sorted(set(n[:-4] if n.endswith(".npy") else n for n in names)
                       - decoder.used - {MANIFEST})
        if extra:
            raise ValueError(f"load: {path!r} holds entries the manifest does not list "
                             f"({', '.join(extra[:5])}); not a checkpoint tr.save wrote")
    return obj
