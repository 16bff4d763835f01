"""Runtime resources that kernels create and the runtime handles: variable storage and
random streams.

A resource lives in a Session's ``resources`` dict (by name) and survives across
runs of that Session. This module imports nothing of the runtime nor of any kernel
package, so both may use it: the variable kernels create :class:`VariableCell`s, the
processes mode hands their values between worker processes and refuses to send a
cell through a pipe. :func:`handover_state` and :func:`install_handover_state` carry
what a worker process holds (variable values, how far each random stream has drawn) to
the worker that replaces it.

>>> from dataflow.framework.tensor_shape import TensorShape
>>> cell = VariableCell("w", "float32", TensorShape([2]))
>>> cell.store(np.zeros(2)).tolist()
[0.0, 0.0]
"""
from __future__ import annotations

import threading

import numpy as np

from dataflow import errors

__all__ = ["VariableCell", "PhiloxStream", "is_process_local", "handover_state",
           "install_handover_state"]


class VariableCell:
    """The storage of one variable in one Session."""

    __slots__ = ("name", "dtype", "shape", "value", "_dims")

    def __init__(self, name, dtype, shape):
        self.name, self.dtype, self.shape = name, dtype, shape
        self.value = None
        # The static shape as a plain tuple when it is fully known: the common check in
        # store_owned is then one tuple comparison (an optimizer stores every variable
        # and two slots per step; building TensorShapes for that cost ~10 µs a store).
        self._dims = tuple(shape.as_list()) if shape.is_fully_defined() else None

    def read(self):
        if self.value is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized value {self.name}")
        return self.value

    def store(self, value):
        """Set the value to a private, read-only copy of ``value`` (readers keep
        references to stored values, and the caller may still change its array)."""
        if isinstance(value, np.ndarray):
            value = value.copy()
        return self.store_owned(value)

    def store_owned(self, value):
        """Set the value to ``value``, an array nobody else holds (a kernel's fresh
        result): no copy is made."""
        if self._dims is not None and type(value) is np.ndarray and value.shape == self._dims:
            pass
        elif self.shape.ndims is not None and not self.shape.is_compatible_with(np.shape(value)):
            raise errors.InvalidArgumentError(
                None, None, f"Cannot assign a value of shape {np.shape(value)} to variable "
                f"{self.name} of shape {self.shape}")
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
        self.value = value
        return value


def is_process_local(value) -> bool:
    """Whether ``value`` is a resource handle, which only means something in the
    process that made it (a copy in another process would be a different variable)."""
    return isinstance(value, VariableCell)


class PhiloxStream:
    """The random state of one op in one Session: a Philox key and an execution count.

    >>> s = PhiloxStream(1, 2)
    >>> a = s.generator().random(3); b = s.generator().random(3)   # differ
    >>> bool((PhiloxStream(1, 2).generator().random(3) == a).all())
    True
    >>> bool((a == b).any())
    False
    """

    __slots__ = ("key", "_count", "_lock")

    def __init__(self, seed: int, seed2: int):
        if seed == 0 and seed2 == 0:
            key = np.random.SeedSequence().generate_state(2, np.uint64)
        else:
            key = np.array([seed, seed2], dtype=np.uint64)
        self.key = key
        self._count = 0
        self._lock = threading.Lock()

    @property
    def executions(self) -> int:
        """How many executions drew from this stream (the next one uses this count)."""
        return self._count

    @executions.setter
    def executions(self, n: int):
        with self._lock:
            self._count = int(n)

    def generator(self) -> np.random.Generator:
        """A generator for the next execution of the op: NumPy's ``Philox(counter=[0, 0,
        0, n], key=key)``, made by resetting this thread's own Philox object (5x cheaper
        than constructing one; each thread has its own, so draws never share state). It
        stays valid until this thread's next call: draw from it at once."""
        with self._lock:
            n = self._count
            self._count += 1
        bit_generator, state = _thread_philox()
        state["state"]["key"][:] = self.key
        counter = state["state"]["counter"]
        counter[:3] = 0
        counter[3] = n
        state["buffer_pos"] = 4  # an empty buffer: the next draw starts at the counter
        state["has_uint32"] = 0
        state["uinteger"] = 0
        bit_generator.state = state
        return np.random.Generator(bit_generator)


_local = threading.local()


def _thread_philox():
    """This thread's Philox bit generator and a state dict to load into it."""
    cached = getattr(_local, "philox", None)
    if cached is None:
        bit_generator = np.random.Philox(key=np.zeros(2, np.uint64))
        cached = _local.philox = (bit_generator, bit_generator.state)
    return cached


# Marks a random stream's entry in a handover dict (the new worker continues the
# sequence instead of drawing its first numbers again).
_RANDOM_STREAM = "random_stream"


def handover_state(resources) -> dict:
    """What a worker process hands to its successor: ``{name: (dtype, shape, value)}``
    of initialized variables, and ``{key: (_RANDOM_STREAM, None, executions)}`` of
    random streams."""
    state = {name: (cell.dtype, cell.shape, cell.value) for name, cell in resources.items()
             if isinstance(cell, VariableCell) and cell.value is not None}
    state.update({key: (_RANDOM_STREAM, None, stream.executions)
                  for key, stream in resources.items() if isinstance(stream, PhiloxStream)})
    return state


def install_handover_state(resources, state) -> None:
    """Put a predecessor's :func:`handover_state` into ``resources``: into the cells and
    streams the forked kernels already hold (updated, not replaced)."""
    for name, (dtype, shape, value) in state.items():
        if isinstance(dtype, str) and dtype == _RANDOM_STREAM:
            stream = resources.get(name)
            if isinstance(stream, PhiloxStream):
                stream.executions = value
            continue
        cell = resources.get(name)
        if not isinstance(cell, VariableCell):
            cell = resources[name] = VariableCell(name, dtype, shape)
        cell.store_owned(value)
