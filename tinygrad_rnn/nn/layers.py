"""Basic layers: Linear, Embedding, Dropout, containers and activation modules.

Each mirrors its ``torch.nn`` counterpart: constructor arguments, parameter names and shapes,
default initialisation and ``state_dict`` keys, so a torch state dict converted to NumPy loads
into the layer and gives the same numbers.

Every layer that draws random numbers takes ``generator`` (an int seed, a
``numpy.random.Generator``, or ``None`` for the default generator reset by
``tr.manual_seed``), and layers with weights take ``dtype`` (default float32). Initial values
are drawn in float64 and cast, so a float32 and a float64 layer built from the same seed hold
the same numbers up to rounding.

Devices: layers are built on the host (initial values are drawn there, so a seed gives the
same numbers whatever the device) and moved with ``.to(device)``. Embedding ids may be given
on the host (a list or NumPy array, copied to the table's device) or as a Tensor on the
table's device; Dropout masks are drawn on the host and copied to the input's device.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any, Iterable, Iterator

import numpy as np

from .. import functional as F
from ..backend import DEFAULT_FLOAT, get_array_module
from .. import _validate
from ..random import get_generator
from ..tensor import Tensor
from . import init
from ._checks import (
    check_features, check_generator, check_ids, check_input_dtype, float_dtype,
)
from .module import Module, Parameter

__all__ = [
    "Linear", "Embedding", "Dropout", "Sequential", "ModuleList", "ModuleDict", "Tanh", "ReLU",
    "Sigmoid", "Identity",
]


def place(module: Module, device: Any) -> None:
    """Move a freshly built ``module`` to ``device`` (torch's ``device=`` constructor
    argument): None leaves it on the host, where every layer draws its initial values, so
    a seed gives the same numbers on every device."""
    if device is not None:
        module.to(device)


def as_input(x: Any, name: str, owner: str) -> Tensor:
    """``x`` as a Tensor: a Tensor as it is, a device array or host array-like of numbers
    (a NumPy array of any layout, a list, a NumPy scalar) converted as ``tr.tensor`` does;
    a TypeError naming ``owner`` and ``name`` for anything else (None, a string, a dict, an
    object array) instead of an error from deep inside the first op."""
    if isinstance(x, Tensor):
        return x
    if get_array_module(x) is not np:
        return Tensor(x)
    got = type(x).__name__
    if x is None or isinstance(x, (str, bytes, dict, set)):
        raise TypeError(f"{owner}: {name} must be a Tensor or an array of numbers, got {got}")
    try:
        dtype = np.asarray(x).dtype
    except (TypeError, ValueError) as err:  # ragged nested lists
        raise TypeError(f"{owner}: {name} must be a Tensor or an array of numbers, got a "
                        f"{got} that is not one ({err})") from None
    if dtype.kind not in "biuf":
        raise TypeError(f"{owner}: {name} must be a Tensor or an array of numbers, got a "
                        f"{got} of dtype {dtype}")
    return Tensor(x)


def _table_data(table: Any) -> Any:
    """The raw array of a Tensor or array-like table, left on its device (host data as
    NumPy)."""
    if isinstance(table, Tensor):
        return table._data
    return table if get_array_module(table) is not np else np.asarray(table)


def _torch_default(owner: str, name: str, value: Any, default: Any) -> None:
    """A NotImplementedError naming ``owner`` and ``name`` unless ``value`` is torch's
    default ``default``: an option of the torch layer that this library does not provide
    (refused, never ignored)."""
    if value is not default and value != default:
        raise NotImplementedError(f"{owner}: {name}={value!r} is not supported by "
                                  f"tinygrad_rnn (only the default {name}={default!r})")


def dtype_note(dtype: np.dtype) -> str:
    """``', dtype=float64'`` for a non-default dtype, for ``extra_repr``."""
    return "" if dtype == np.dtype(DEFAULT_FLOAT) else f", dtype={dtype}"


# ------------------------------------------------------------------------- Linear
class Linear(Module):
    """Affine map y = x W^T + b, as ``torch.nn.Linear``.

    Parameters
    ----------
    in_features, out_features : int
    bias : bool
        Learn an additive bias (default True); without it ``self.bias`` is None.
    device : str, optional
        Where the parameters live (built on the host, then moved; default the host).
    dtype : float dtype, optional
        Default ``tr.get_default_dtype()`` (float32 unless changed), as in torch.
    generator : int, numpy Generator or None
        Source of the initial values (keyword only; torch draws from its global generator).

    Attributes
    ----------
    weight : Parameter, shape (out_features, in_features)
    bias : Parameter, shape (out_features,), or None
        Both initialised from U(-k, k) with k = 1/sqrt(in_features), torch's default
        (``kaiming_uniform_`` with a = sqrt(5) gives exactly this bound); weight first, then
        bias, from the one generator.

    Math
    ----
    y = x W^T + b. With upstream gradient G = dL/dy (rows are samples):
    dL/dx = G W, dL/dW = G^T x (summed over all leading axes), dL/db = sum of G over them.

    Shapes
    ------
    x (*, in_features) -> y (*, out_features). x must have the parameters' dtype (a float64
    input to a float32 layer is a TypeError, as in torch, not a silent float64 result).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *, generator: Any = None) -> None:
        super().__init__()
        in_features = _validate.size(in_features, "in_features", "Linear", minimum=0)
        out_features = _validate.size(out_features, "out_features", "Linear", minimum=0)
        bias = _validate.flag(bias, "bias", "Linear")
        dt = float_dtype(dtype, "Linear")
        self.in_features, self.out_features = in_features, out_features
        rng = check_generator(generator, "Linear")
        k = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = Parameter(np.zeros((out_features, in_features), dtype=dt))
        init.uniform_(self.weight, -k, k, generator=rng)
        if bias:
            self.bias = Parameter(np.zeros((out_features,), dtype=dt))
            init.uniform_(self.bias, -k, k, generator=rng)
        else:
            self.register_parameter("bias", None)
        place(self, device)

    def forward(self, x: Tensor) -> Tensor:
        x = as_input(x, "input", "Linear")
        check_input_dtype("Linear", "input", x, self.weight.dtype)
        check_features("Linear", "input", x, self.in_features, "in_features")
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}{dtype_note(self.weight.dtype)}")


# ------------------------------------------------------------------------- Embedding
class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim``, as
    ``torch.nn.Embedding``.

    Parameters
    ----------
    num_embeddings : int
        Vocabulary size V.
    embedding_dim : int
        Vector size E.
    padding_idx : int, optional
        This row is initialised to zeros and never receives a gradient (a padding token).
        Negative values count from the end, as in torch.
    max_norm, norm_type, scale_grad_by_freq, sparse
        torch's options; only their defaults are supported (anything else is a
        NotImplementedError naming the option).
    device, dtype, generator
        As for :class:`Linear`.

    Attributes
    ----------
    weight : Parameter, shape (V, E)
        Initialised from N(0, 1), torch's default.

    Math
    ----
    y[..., :] = W[ids[...], :]. dL/dW[v] = sum of G at every position whose id is v (repeated
    ids accumulate); dL/dW[padding_idx] = 0. Ids carry no gradient.

    Shapes
    ------
    ids (*) integer -> y (*, E).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Any = None, _freeze: bool = False,
                 device: Any = None, dtype: Any = None, *, generator: Any = None) -> None:
        super().__init__()
        _torch_default("Embedding", "max_norm", max_norm, None)
        _torch_default("Embedding", "scale_grad_by_freq", scale_grad_by_freq, False)
        _torch_default("Embedding", "sparse", sparse, False)
        _validate.finite_real(norm_type, "norm_type", "Embedding")
        _freeze = _validate.flag(_freeze, "_freeze", "Embedding")
        num_embeddings = _validate.size(num_embeddings, "num_embeddings", "Embedding", minimum=0)
        embedding_dim = _validate.size(embedding_dim, "embedding_dim", "Embedding", minimum=0)
        if padding_idx is not None:
            padding_idx = _validate.integer(padding_idx, "padding_idx", "Embedding")
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(
                    f"Embedding: padding_idx {padding_idx} is outside the table of "
                    f"{num_embeddings} rows"
                )
            padding_idx = padding_idx % num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        if _weight is None:
            dt = float_dtype(dtype, "Embedding")
            self.weight = Parameter(np.zeros((num_embeddings, embedding_dim), dtype=dt))
            init.normal_(self.weight, 0.0, 1.0, generator=generator)
            if padding_idx is not None:
                init.zeros_(self.weight._data[padding_idx])
        else:
            data = _table_data(_weight)
            if tuple(data.shape) != (num_embeddings, embedding_dim):
                raise ValueError(
                    f"Embedding: _weight has shape {tuple(data.shape)}, expected "
                    f"{(num_embeddings, embedding_dim)}"
                )
            float_dtype(data.dtype, "Embedding")
            self.weight = Parameter(data, requires_grad=not _freeze)
        place(self, device)

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An Embedding holding a copy of ``embeddings`` (V, E) in its dtype; with ``freeze``
        the weight does not require a gradient. The padding row is kept as given. The
        other options are torch's; only their defaults are supported."""
        freeze = _validate.flag(freeze, "freeze", "Embedding.from_pretrained")
        for name, value, default in (("max_norm", max_norm, None),
                                     ("scale_grad_by_freq", scale_grad_by_freq, False),
                                     ("sparse", sparse, False)):
            _torch_default("Embedding.from_pretrained", name, value, default)
        data = _table_data(embeddings)
        if data.ndim != 2:
            raise ValueError(
                f"Embedding.from_pretrained: expected a 2-D (V, E) array, got shape "
                f"{tuple(data.shape)}"
            )
        emb = cls(data.shape[0], data.shape[1], padding_idx, _weight=data)
        emb.weight.requires_grad_(not freeze)
        return emb

    def forward(self, ids: Any) -> Tensor:
        check_ids("Embedding", "input", ids, self.num_embeddings, "num_embeddings")
        return F.embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s + dtype_note(self.weight.dtype)


# ------------------------------------------------------------------------- Dropout
class Dropout(Module):
    """Inverted dropout, active in training mode only, as ``torch.nn.Dropout``.

    In training mode each entry is zeroed with probability ``p`` and the others are scaled by
    1/(1-p), so the expected output equals the input; in eval mode it is the identity.

    Parameters
    ----------
    p : float
        Drop probability in [0, 1].
    inplace : bool
        Write the result into the input (``input.copy_(result)``, recorded in the graph) and
        return the input, as torch's ``inplace=True``.
    generator : int, numpy Generator or None
        Each Dropout owns its generator: made from the seed when an int is given, used as is
        when a Generator is given, and otherwise spawned from the default generator when the
        layer is built (so ``tr.manual_seed(s)`` before building a model fixes every mask,
        and adding a Dropout does not change the numbers any other layer draws).

    Math
    ----
    y = x * m / (1 - p) with m ~ Bernoulli(1 - p) per entry; dL/dx = G * m / (1 - p).
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, *,
                 generator: Any = None) -> None:
        super().__init__()
        self.p = _validate.probability(p, "p", "Dropout")
        self.inplace = _validate.flag(inplace, "inplace", "Dropout")
        if generator is None:
            default = get_generator(None)
            try:
                self.generator = default.spawn(1)[0]
            except (AttributeError, TypeError, ValueError):  # no seed sequence to spawn from
                self.generator = np.random.default_rng(int(default.integers(2 ** 63)))
        else:
            self.generator = get_generator(generator)

    def forward(self, x: Tensor) -> Tensor:
        y = F.dropout(x, self.p, self.training, generator=self.generator)
        return _write_back("Dropout", x, y) if self.inplace and y is not x else y

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


def _write_back(owner: str, x: Any, y: Tensor) -> Tensor:
    """``x`` after ``x.copy_(y)``: an ``inplace=True`` layer (recorded in the graph like
    torch's in-place ops; a leaf that requires a gradient is refused, as in torch)."""
    if not isinstance(x, Tensor):
        return y
    if x.is_leaf and x.requires_grad:
        raise RuntimeError(f"{owner}(inplace=True): the input is a leaf that requires a "
                           f"gradient, which cannot be written in place (as in torch)")
    return x.copy_(y)


# ------------------------------------------------------------------------- containers
class Sequential(Module):
    """Modules applied one after the other, as ``torch.nn.Sequential``.

    ``Sequential(m0, m1, ...)`` names the modules ``'0'``, ``'1'``, ... (state-dict keys
    ``'0.weight'``); ``Sequential(OrderedDict(name=module, ...))`` uses the given names.
    Supports ``len``, iteration, indexing (a slice gives a Sequential) and ``append``.
    """

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(modules):
                self.add_module(str(i), module)

    def _index(self, idx: int) -> str:
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for {type(self).__name__} of {n}")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return type(self)(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._index(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(self._index(idx), module)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "Sequential":
        self.add_module(str(len(self._modules)), module)
        return self

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x


class ModuleList(Module):
    """A list of sub-modules, registered under ``'0'``, ``'1'``, ... like
    ``torch.nn.ModuleList``. It has no forward: iterate over it in your own."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _index(self, idx: int) -> int:
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for ModuleList of {n}")
        return idx % n

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(self._index(idx))]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.add_module(str(self._index(idx)), module)

    def __delitem__(self, idx: int | slice) -> None:
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[self._index(idx)]
        self._modules.clear()  # renumber, as torch does
        for i, module in enumerate(items):
            self._modules[str(i)] = module

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> "ModuleList":
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)


class ModuleDict(Module):
    """Sub-modules by name, like ``torch.nn.ModuleDict``: registered under their keys (in
    insertion order), so ``state_dict`` keys are ``'<key>.weight'``. Supports indexing,
    ``in``, ``len``, iteration over the keys, ``keys``/``values``/``items``, ``update``,
    ``pop`` and ``clear``. It has no forward."""

    def __init__(self, modules: Any = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        if key not in self._modules:
            raise KeyError(f"ModuleDict has no module {key!r} (keys: {list(self._modules)})")
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def pop(self, key: str) -> Module:
        module = self[key]
        del self._modules[key]
        return module

    def clear(self) -> None:
        self._modules.clear()

    def update(self, modules: Any) -> None:
        """Add ``modules``: a mapping (or ModuleDict) of name -> module, or an iterable of
        (name, module) pairs; a TypeError names ModuleDict for anything else."""
        if isinstance(modules, (dict, ModuleDict)) or hasattr(modules, "items"):
            pairs = list(modules.items())
        else:
            try:
                pairs = [tuple(pair) for pair in modules]
            except TypeError:
                raise TypeError(f"ModuleDict.update: modules must be a mapping or an iterable "
                                f"of (name, module) pairs, got {type(modules).__name__}"
                                ) from None
            for pair in pairs:
                if len(pair) != 2:
                    raise ValueError(f"ModuleDict.update: each element must be a (name, "
                                     f"module) pair, got one of length {len(pair)}")
        for key, module in pairs:
            self.add_module(key, module)


# ------------------------------------------------------------------------- activations
class Tanh(Module):
    """Elementwise tanh; derivative 1 - tanh(x)^2 (see ``tr.functional.tanh``)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class ReLU(Module):
    """Elementwise max(x, 0); derivative 1[x > 0] (0 at 0). ``inplace=True`` writes the
    result into the input (see :class:`Dropout`)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = _validate.flag(inplace, "inplace", "ReLU")

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(x)
        return _write_back("ReLU", x, y) if self.inplace else y

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Sigmoid(Module):
    """Elementwise 1 / (1 + exp(-x)); derivative y (1 - y)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Identity(Module):
    """Returns its input unchanged; accepts and ignores any constructor arguments (torch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x
