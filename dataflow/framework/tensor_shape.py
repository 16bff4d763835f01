"""Static shapes that may be partly or wholly unknown, as ``tf.TensorShape``.

>>> TensorShape([None, 3]).is_compatible_with([5, 3])
True
>>> broadcast_shapes(TensorShape([4, 1]), TensorShape([3]))
TensorShape([4, 3])
"""
from __future__ import annotations

import operator

__all__ = ["TensorShape", "as_shape", "unknown_shape", "broadcast_shapes"]


class TensorShape:
    """A static shape: ``dims`` is ``None`` (unknown rank) or a tuple of ``int | None``."""

    __slots__ = ("_dims",)

    def __init__(self, dims=None):
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        else:
            self._dims = tuple(_dim(d) for d in dims)

    @property
    def dims(self):
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self):
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d is not None for d in self._dims)

    def as_list(self):
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def num_elements(self):
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d
        return n

    def is_compatible_with(self, other) -> bool:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self._dims, other._dims)])

    def most_specific_compatible_shape(self, other) -> "TensorShape":
        """The most specific shape compatible with both (dims that differ become unknown)."""
        other = as_shape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return TensorShape(None)
        return TensorShape([a if a == b else None for a, b in zip(self._dims, other._dims)])

    def __len__(self):
        if self._dims is None:
            raise ValueError("Cannot take the length of a shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else None
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __eq__(self, other):
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self):
        return hash(self._dims)

    def __repr__(self):
        return "TensorShape(None)" if self._dims is None else f"TensorShape({list(self._dims)})"

    def __str__(self):
        if self._dims is None:
            return "<unknown>"
        return "(" + ", ".join("?" if d is None else str(d) for d in self._dims) + \
            ("," if len(self._dims) == 1 else "") + ")"


def _dim(d):
    """One dimension: an int, or None when unknown (None or negative, as -1 in TF)."""
    if d is None:
        return None
    try:
        d = operator.index(d)  # ints and NumPy integers; 2.5 or "3" are errors
    except TypeError:
        raise TypeError(f"Dimension value must be an integer or None, got {d!r}") from None
    return None if d < 0 else d


def as_shape(shape) -> TensorShape:
    """Convert a list/tuple/None/TensorShape to a :class:`TensorShape`."""
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def broadcast_shapes(a: TensorShape, b: TensorShape) -> TensorShape:
    """NumPy broadcasting on static shapes; raises ValueError when they cannot broadcast."""
    if a._dims is None or b._dims is None:
        return TensorShape(None)
    x, y = list(a._dims), list(b._dims)
    n = max(len(x), len(y))
    x = [1] * (n - len(x)) + x
    y = [1] * (n - len(y)) + y
    out = []
    for p, q in zip(x, y):
        if p == 1:
            out.append(q)
        elif q == 1:
            out.append(p)
        elif p is None or q is None:
            out.append(p if q is None else q)
        elif p == q:
            out.append(p)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: {a} and {b}")
    return TensorShape(out)
