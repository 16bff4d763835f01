"""Variable kernels. A variable's handle is a :class:`VariableCell` kept in the
Session's resources, so values survive across runs of the same Session."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
from ..resources import VariableCell  # a leaf module: the runtime uses it too


@register_kernel("VarHandleOp", constant=True)   # the handle never changes: folded
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
