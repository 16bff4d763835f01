"""Data types of tensors, mirroring ``tf.dtypes``.

Example::

    >>> import dataflow as df
    >>> df.as_dtype("float32") is df.float32
    True
    >>> df.float32.as_numpy_dtype
    <class 'numpy.float32'>
"""
from __future__ import annotations

import builtins

import numpy as np

__all__ = ["DType", "as_dtype", "float16", "float32", "float64", "int8", "int16", "int32",
           "int64", "uint8", "bool", "string", "resource", "variant"]


class DType:
    """A tensor element type. Instances are singletons, compared by identity."""

    __slots__ = ("name", "_np", "is_floating", "is_integer", "is_bool", "is_numeric")

    def __init__(self, name: str, np_type):
        self.name = name
        self._np = np_type
        # Plain attributes, computed once: op wrappers ask on every call, and in eager
        # mode np.issubdtype per question cost about a microsecond of each small op.
        self.is_floating = np_type is not None and np.issubdtype(np_type, np.floating)
        self.is_integer = np_type is not None and np.issubdtype(np_type, np.integer)
        self.is_bool = np_type is np.bool_
        self.is_numeric = self.is_floating or self.is_integer

    @property
    def as_numpy_dtype(self):
        """The NumPy scalar type of this dtype (``np.float32`` for ``float32``)."""
        return self._np

    @property
    def np(self) -> np.dtype:
        return np.dtype(self._np)

    @property
    def base_dtype(self) -> "DType":
        return self

    @property
    def min(self):
        return np.finfo(self._np).min if self.is_floating else np.iinfo(self._np).min

    @property
    def max(self):
        return np.finfo(self._np).max if self.is_floating else np.iinfo(self._np).max

    def __repr__(self) -> str:
        return f"df.{self.name}"

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return self is other
        try:
            return self is as_dtype(other)
        except TypeError:
            return False

    def __hash__(self) -> int:
        return hash(self.name)

    def __reduce__(self):
        return as_dtype, (self.name,)


float16 = DType("float16", np.float16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
uint8 = DType("uint8", np.uint8)
bool = DType("bool", np.bool_)  # noqa: A001 - TF's name
string = DType("string", np.object_)
resource = DType("resource", None)  # handles (stacks, variables): opaque Python objects
variant = DType("variant", None)

_ALL = [float16, float32, float64, int8, int16, int32, int64, uint8, bool, string, resource, variant]
_BY_NAME = {d.name: d for d in _ALL}
_BY_NAME.update({"half": float16, "float": float32, "double": float64})
_BY_NP = {np.dtype(d._np): d for d in _ALL if d._np is not None}
_BY_PY = {float: float32, int: int32, builtins.bool: bool, str: string}


def as_dtype(value) -> DType:
    """Convert a DType, NumPy dtype/type, Python type or name to a :class:`DType`.

    >>> as_dtype(np.int64) is int64 and as_dtype(float) is float32
    True
    """
    if isinstance(value, DType):
        return value
    if value is None:  # np.dtype(None) would silently mean float64
        raise TypeError("Cannot convert None to a dataflow dtype")
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            raise TypeError(f"Unknown dtype name {value!r}") from None
    if value in _BY_PY:
        return _BY_PY[value]
    try:
        return _BY_NP[np.dtype(value)]
    except (TypeError, KeyError):
        raise TypeError(f"Cannot convert {value!r} to a dataflow dtype") from None
