"""Turning Python and NumPy values into tensors: ``constant`` and ``convert_to_tensor``.

>>> t = convert_to_tensor([1, 2, 3])           # a Const op, dtype int32
>>> u = convert_to_tensor(2, dtype=df.float32)  # 2 -> 2.0 loses nothing
>>> t.op.type, t.dtype.name, u.dtype.name
('Const', 'int32', 'float32')
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from . import eager as _eager
from .eager import EagerGraph, EagerTensor
from .graph import Operation, Tensor, get_default_graph
from .op_registry import register_op
from .tensor_shape import TensorShape

__all__ = ["constant", "convert_to_tensor", "convert_value", "infer_dtype", "constant_value",
           "register_tensor_conversion"]

# Types that know how to become a tensor register a function here (as TF's
# register_tensor_conversion_function): Variable, and lists/tuples holding tensors
# (packed by dataflow.ops.array_ops, which this module must not import).
_CONVERSIONS: list = []


def register_tensor_conversion(cls, fn) -> None:
    """``fn(value, dtype, name)`` converts instances of ``cls`` (a class or a tuple of
    classes) to a Tensor, or returns ``NotImplemented`` to leave ``value`` to the next
    conversion (and in the end to :func:`constant`). ``dtype`` is the requested DType
    or None; ``name`` the requested op name or None.

    >>> class Half:
    ...     def __init__(self, x): self.x = x
    >>> register_tensor_conversion(Half, lambda v, dtype, name: constant(v.x / 2, dtype))
    >>> float(convert_to_tensor(Half(3.0)).op.get_attr("value"))
    1.5
    """
    _CONVERSIONS.append((cls, fn))


def infer_dtype(value) -> _dtypes.DType:
    """The dtype TF would give a Python/NumPy value: float32 for floats, int32 for ints."""
    if isinstance(value, (np.ndarray, np.generic)):
        return _dtypes.as_dtype(value.dtype)
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        return _dtypes.float32
    if arr.dtype.kind in "iu":
        if arr.size and (arr.max() > np.iinfo(np.int32).max or arr.min() < np.iinfo(np.int32).min):
            return _dtypes.int64
        return _dtypes.int32
    if arr.dtype.kind == "b":
        return _dtypes.bool
    if arr.dtype.kind in "USO":
        return _dtypes.string
    raise TypeError(f"Cannot infer a dtype for {value!r}")


def convert_value(value, dtype: _dtypes.DType):
    """``value`` as a NumPy array of ``dtype``; TypeError if the conversion would lose data.

    Ints and floats into float tensors are fine (rounded to the nearest value of
    ``dtype``, as TF does for ``constant(0.1)``); ``1.5`` into int32, or an int64 that
    overflows int32, is not. 0-d results are NumPy scalars, so scalar kernels take
    NumPy's fast scalar path.
    """
    np_type = dtype.as_numpy_dtype
    bounds = _INT_BOUNDS.get(dtype)
    if bounds is not None and type(value) in (list, tuple) and len(value) <= 16:
        # A shape or an axis list: Python ints checked here cost a tenth of the general
        # path's array comparisons (a Reshape converts one on every call).
        lo, hi = bounds
        if all(type(v) is int and lo <= v <= hi for v in value):
            return np.array(value, np_type)
    src = np.asarray(value)
    if src.dtype == np_type:
        arr = src
    elif dtype is _dtypes.string:
        arr = src.astype(object)
    else:
        if src.dtype.kind in "USO" and src.dtype != np_type:
            raise TypeError(f"Expected {dtype.name}, got {value!r} of type "
                            f"'{type(value).__name__}' instead.")
        with np.errstate(all="ignore"):
            arr = src.astype(np_type)
            # Rounding to a float type is not a loss TF rejects: 0.1 has no exact float32.
            rounds_ok = dtype.is_floating and src.dtype.kind in "iuf"
            if src.dtype.kind == "c" or not rounds_ok and not np.array_equal(
                    arr.astype(src.dtype), src, equal_nan=src.dtype.kind == "f"):
                raise TypeError(f"Expected {dtype.name}, got {_short(value)} of type "
                                f"'{type(value).__name__}' instead (the conversion would "
                                "lose information).")
            if dtype.is_integer and src.dtype.kind in "iu" and arr.size and (
                    src.max() > np.iinfo(np_type).max or src.min() < np.iinfo(np_type).min):
                raise TypeError(f"Value {_short(value)} overflows {dtype.name}.")
    return arr[()] if arr.ndim == 0 else arr


_INT_BOUNDS = {_dtypes.int32: (-2 ** 31, 2 ** 31 - 1), _dtypes.int64: (-2 ** 63, 2 ** 63 - 1)}


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."


@register_op("Const")
def _const_infer(op: Operation):
    value = op.get_attr("value")
    return [(op.get_attr("dtype"), TensorShape(np.shape(value)))]


def constant(value, dtype=None, shape=None, name="Const") -> Tensor:
    """A tensor with a fixed value (``tf.constant``).

    >>> c = constant([[1, 2], [3, 4]], dtype=df.float32)
    >>> c.shape.as_list(), c.dtype.name
    ([2, 2], 'float32')
    """
    if shape is None and type(value) in _PY_SCALARS \
            and type(get_default_graph()) is EagerGraph:
        return _eager_scalar(value, dtype)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else infer_dtype(value)
    arr = convert_value(value, dt)
    if shape is not None:
        shape = list(shape)
        if np.size(arr) == 1:
            arr = np.full(shape, arr, dtype=dt.as_numpy_dtype)
        elif int(np.prod(shape)) == np.size(arr):
            arr = np.reshape(arr, shape)
        else:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, got {np.shape(arr)}.")
        arr = arr[()] if np.ndim(arr) == 0 else arr
    if isinstance(arr, np.ndarray):
        arr.setflags(write=False)  # constants are shared by every run: keep them immutable
    g = get_default_graph()
    if type(g) is EagerGraph:  # an eager constant holds its value; no op runs
        return EagerTensor(arr, dt)
    return g.create_op("Const", [], {"value": arr, "dtype": dt}, name=name).outputs[0]


_PY_SCALARS = (float, int, bool)
# Python scalars converted in eager mode, by (type, value, id(requested dtype)): the
# ``x + 1.0`` of an imperative loop converts the same few numbers again and again, and
# the checked conversion costs more than the op. Bounded; -0.0 (equal to 0.0) and NaN
# (equal to nothing) are never cached.
_EAGER_SCALARS: dict = {}
_EAGER_SCALARS_MAX = 4096


def _eager_scalar(value, dtype) -> EagerTensor:
    key = (type(value), value, id(dtype))
    hit = _EAGER_SCALARS.get(key)
    if hit is None:
        dt = _dtypes.as_dtype(dtype) if dtype is not None else infer_dtype(value)
        hit = (convert_value(value, dt), dt)
        if (value or type(value) is not float) and len(_EAGER_SCALARS) < _EAGER_SCALARS_MAX:
            _EAGER_SCALARS[key] = hit
    return EagerTensor(hit[0], hit[1])


_eager._SCALAR_CONVERTER[0] = _eager_scalar  # the Tensor operators' Python operands


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None) -> Tensor:
    """Return ``value`` as a Tensor of ``dtype``, making a Const for Python/NumPy values."""
    want = _dtypes.as_dtype(dtype) if dtype is not None else None
    if isinstance(value, Tensor):
        if want is not None and value.dtype is not want:
            raise TypeError(f"Tensor conversion requested dtype {want.name} for Tensor with "
                            f"dtype {value.dtype.name}: {value!r}")
        return value
    for cls, fn in _CONVERSIONS:
        if isinstance(value, cls):
            tensor = fn(value, want, name)
            if tensor is not NotImplemented:
                return tensor
    if isinstance(value, Operation):
        raise TypeError(f"Cannot convert an Operation ({value.name}) to a Tensor; use "
                        "op.outputs[i].")
    if want is None and preferred_dtype is not None:
        try:
            return constant(value, dtype=preferred_dtype, name=name or "Const")
        except TypeError:
            pass
    return constant(value, dtype=want, name=name or "Const")


def constant_value(tensor: Tensor):
    """The value of ``tensor`` if it is known at graph-build time (a Const), else None."""
    if type(tensor) is EagerTensor:
        return tensor._value
    if isinstance(tensor, Tensor) and tensor.op.type == "Const":
        return tensor.op.get_attr("value")
    return None
