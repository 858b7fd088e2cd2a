"""Whether operations are recorded, per thread: grad mode (``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``inference_mode``), the ``record_scope`` labels put on each recorded op,
and the clock of recorded in-place writes.

This is the state that recording (:func:`tinygrad_rnn.engine.record`) reads on every op and
the tensor reads before an in-place write; it imports nothing from the package, so every
module above can read it. The public names are re-exported by :mod:`tinygrad_rnn.engine`
and the package (``tr.no_grad``).
"""
from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Callable, Generator

import numpy as np

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
    "record_scope", "current_scope", "GRAD_MODE", "SCOPES", "ScopeCount", "REBASES",
]


class _GradMode(threading.local):
    """Whether new operations are recorded, per thread (as torch's grad mode): one thread
    inside ``no_grad`` never switches recording off in another. Every thread starts with
    recording on."""

    enabled = True


GRAD_MODE = _GradMode()


def is_grad_enabled() -> bool:
    """True when new operations are recorded for backward in the calling thread."""
    return GRAD_MODE.enabled


class set_grad_enabled:
    """Set gradient recording on or off in the calling thread, as a function call, a context
    manager or a decorator, as torch's ``set_grad_enabled``.

    * ``tr.set_grad_enabled(False)`` switches recording off at once (until switched back);
    * ``with tr.set_grad_enabled(False): ...`` restores the previous value on exit, also on
      an exception;
    * ``@tr.set_grad_enabled(False)`` (and ``@tr.no_grad()``, ``@tr.enable_grad()``) on a
      function runs each call in that mode; on a generator function, the mode holds inside
      the generator's body each time it resumes, and the caller's mode is restored at every
      ``yield``, so the body of ``for batch in batches(): ...`` runs in the caller's mode.

    The mode is per thread: each thread has its own, and a context entered in one thread
    never changes another's.
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(
                f"set_grad_enabled: mode must be a bool, got {mode!r} ({type(mode).__name__})"
            )
        self.mode = bool(mode)
        self.prev: list[bool] = []
        # called as a function, it switches at once (torch: set_grad_enabled(False)); the
        # value it replaced is what a `with` on this object restores
        self._at_call: bool | None = GRAD_MODE.enabled
        GRAD_MODE.enabled = self.mode

    def __enter__(self) -> None:
        prev, self._at_call = self._at_call, None
        self.prev.append(GRAD_MODE.enabled if prev is None else prev)
        GRAD_MODE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        GRAD_MODE.enabled = self.prev.pop()

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}: used as a decorator, it takes a function, "
                            f"got {fn!r}")
        if self._at_call is not None:  # a decorator changes nothing until the call
            GRAD_MODE.enabled, self._at_call = self._at_call, None
        mode = self.mode
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator_wrapper(*args: Any, **kwargs: Any) -> Any:
                return (yield from _generator_in_mode(fn(*args, **kwargs), mode))

            return generator_wrapper

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _Mode(mode):
                return fn(*args, **kwargs)

        return wrapper


class _Mode:
    """The plain context manager behind the decorators: set ``mode`` in this thread on
    entry, restore the thread's previous value on exit."""

    __slots__ = ("mode", "prev")

    def __init__(self, mode: bool) -> None:
        self.mode = mode

    def __enter__(self) -> None:
        self.prev = GRAD_MODE.enabled
        GRAD_MODE.enabled = self.mode

    def __exit__(self, *exc: Any) -> None:
        GRAD_MODE.enabled = self.prev


def _generator_in_mode(gen: Generator, mode: bool) -> Generator:
    """Drive ``gen`` with gradient mode ``mode`` while its body runs, and the caller's mode
    while the caller runs (between yields). Values sent in, exceptions thrown in and
    ``close()`` reach ``gen`` as they would without the wrapper."""
    try:
        with _Mode(mode):
            request = next(gen)
    except StopIteration as stop:
        return stop.value
    while True:
        try:
            sent = yield request
        except GeneratorExit:
            with _Mode(mode):
                gen.close()
            raise
        except BaseException as err:
            try:
                with _Mode(mode):
                    request = gen.throw(err)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                with _Mode(mode):
                    request = gen.send(sent)
            except StopIteration as stop:
                return stop.value


class no_grad(set_grad_enabled):
    """Disable graph recording in this thread: ``with tr.no_grad(): ...`` or
    ``@tr.no_grad()`` (on functions and generator functions). Nothing changes until the
    block is entered."""

    def __init__(self) -> None:
        self.mode, self.prev, self._at_call = False, [], None


class inference_mode(set_grad_enabled):
    """``no_grad`` under torch's other name (``inference_mode(False)`` records as usual).
    This engine has no separate inference tensors: tensors made inside are ordinary tensors
    that do not require a gradient."""

    def __init__(self, mode: bool = True) -> None:
        if not isinstance(mode, (bool, np.bool_)):
            raise TypeError(
                f"inference_mode: mode must be a bool, got {mode!r} ({type(mode).__name__})"
            )
        self.mode, self.prev, self._at_call = not mode, [], None


class enable_grad(set_grad_enabled):
    """Re-enable graph recording inside a ``no_grad`` block (in this thread only)."""

    def __init__(self) -> None:
        self.mode, self.prev, self._at_call = True, [], None



class _Scopes(threading.local):
    """The labels of the ``record_scope`` blocks the calling thread is inside, innermost
    last (what tinygrad_rnn.viz draws as clusters: "layer 0, t = 3")."""

    def __init__(self) -> None:
        self.stack: list = []
        self.labels: tuple = ()  # tuple(stack), kept up to date: one tuple per block, not op


SCOPES = _Scopes()


class ScopeCount:
    """How many ``record_scope`` blocks are open in all threads: while 0, recording an op
    reads no thread-local state at all."""

    active = 0


class record_scope:
    """Label every op recorded inside the block with ``label`` (``ctx.scope``, a tuple of
    the labels of the enclosing blocks, outermost first). Changes no result; costs one
    attribute read per recorded op while no block is open anywhere.

    >>> import tinygrad_rnn as tr
    >>> x = tr.Tensor([1.0], requires_grad=True)
    >>> with tr.engine.record_scope("t = 0"):
    ...     y = x * 2
    >>> y.grad_fn.scope
    ('t = 0',)
    """

    def __init__(self, label: Any) -> None:
        self.label = label

    def __enter__(self) -> "record_scope":
        scopes = SCOPES
        scopes.stack.append(self.label)
        scopes.labels = tuple(scopes.stack)
        ScopeCount.active += 1
        return self

    def __exit__(self, *exc: Any) -> None:
        scopes = SCOPES
        scopes.stack.pop()
        scopes.labels = tuple(scopes.stack)
        ScopeCount.active -= 1


def current_scope() -> tuple:
    """The labels of the open ``record_scope`` blocks of this thread (outermost first)."""
    return SCOPES.labels


class _Clock:
    """Counts recorded in-place writes that gave a tensor a new place in the graph."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0


#: Bumped by every rebase (a recorded in-place write); a node remembers the value at its
#: recording (``Context.clock``), so it reaches each input as that input was then.
REBASES = _Clock()
