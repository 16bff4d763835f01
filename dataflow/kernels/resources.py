"""Runtime resources that kernels create and the runtime handles: variable storage.

A resource lives in a Session's ``resources`` dict (by name) and survives across
runs of that Session. This module imports nothing of the runtime nor of any kernel
package, so both may use it: the variable kernels create :class:`VariableCell`s, the
processes mode hands their values between worker processes and refuses to send a
cell through a pipe.

>>> from dataflow.framework.tensor_shape import TensorShape
>>> cell = VariableCell("w", "float32", TensorShape([2]))
>>> cell.store(np.zeros(2)).tolist()
[0.0, 0.0]
"""
from __future__ import annotations

import numpy as np

from dataflow import errors

__all__ = ["VariableCell", "is_process_local"]


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
