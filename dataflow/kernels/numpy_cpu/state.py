"""Variable kernels. A variable's handle is a :class:`VariableCell` kept in the
Session's resources, so values survive across runs of the same Session."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel


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


@register_kernel("VarHandleOp")
def _handle(ctx):
    name = ctx.attr("shared_name")
    cell = ctx.resources.get(name)
    if cell is None:
        cell = ctx.resources[name] = VariableCell(name, ctx.attr("dtype"), ctx.attr("shape"))
    return lambda: cell


register_kernel("ReadVariableOp")(lambda ctx: VariableCell.read)


@register_kernel("AssignVariableOp")
def _assign(ctx):
    if ctx.op.attrs.get("validate_shape", True):
        return VariableCell.store
    return _store_any_shape


def _store_any_shape(cell, value):
    """tf.assign(..., validate_shape=False): the variable takes the value's shape."""
    value = np.array(value, copy=True)
    value.setflags(write=False)
    cell.value = value
    return value


@register_kernel("ReportUninitializedVariables")
def _report_uninitialized(ctx):
    names = np.array([n.encode() for n in ctx.attr("names")] + [b""], dtype=object)[:-1]

    def kernel(*initialized):
        return names[~np.array(initialized, dtype=bool)]
    return kernel


@register_kernel("AssignAddVariableOp")
def _assign_add(ctx):
    return lambda cell, delta: cell.store_owned(cell.read() + delta)  # a fresh result


@register_kernel("AssignSubVariableOp")
def _assign_sub(ctx):
    return lambda cell, delta: cell.store_owned(cell.read() - delta)


@register_kernel("VarIsInitializedOp")
def _is_initialized(ctx):
    return lambda cell: np.bool_(cell.value is not None)
