"""TensorArray kernels: an array is a Python object owned by the step that made it.

``TensorArrayV3`` makes a fresh :class:`TensorArrayResource` each time it runs (each
step, each instance of an enclosing loop), as the ``Stack`` kernel does for stacks;
its handle output *is* that object. The rules (TF1's ``tensor_array.h``):

* an index is written at most once, except in a gradient array, where writes add up;
* with ``clear_after_read`` an index is read at most once (stack, gather and concat
  read too), and an index already read cannot be written;
* reading an index never written gives zeros of the element shape when that shape is
  fully known (given, or set by a write when shapes are identical), else it is an
  error; a gradient array knows each element's shape from its forward array;
* indices are checked against the size unless the array is dynamically sized.

Errors are ``InvalidArgumentError`` (``UnimplementedError`` for stacking or concatenating
an empty array whose element shape is not fully known); the executor adds the node.
"""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel
from ._util import np_dtype, scalarize


# Element shapes known only in part are tuples of ints and Nones, or None (unknown rank).
def _partial(static_shape):
    """A partial shape from a static shape attribute (anything with ``.dims``)."""
    dims = static_shape.dims
    return None if dims is None else tuple(dims)


def _compatible(partial, shape) -> bool:
    if partial is None or shape is None:
        return True
    return len(partial) == len(shape) and all(
        a is None or b is None or a == b for a, b in zip(partial, shape))


def _merge(partial, other):
    if partial is None:
        return other
    if other is None:
        return partial
    return tuple(a if a is not None else b for a, b in zip(partial, other))


def _fully_defined(partial) -> bool:
    return partial is not None and all(d is not None for d in partial)


def _shape_str(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


class _Element:
    """One index: its value (None once cleared, or while only its shape is known)."""

    __slots__ = ("value", "shape", "written", "read", "cleared")

    def __init__(self):
        self.value = None
        self.shape = None
        self.written = self.read = self.cleared = False


class TensorArrayResource:
    """The elements of one TensorArray in one step, with TF1's access rules."""

    def __init__(self, name, dtype, size, element_shape, dynamic_size, clear_after_read,
                 identical_element_shapes, is_grad=False, marked_size=-1):
        self.name = name
        self.dtype = dtype
        self.elements = [_Element() for _ in range(size)]
        self.element_shape = element_shape
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.identical_element_shapes = identical_element_shapes
        self.is_grad = is_grad            # writes aggregate; unwritten reads are zeros
        self.marked_size = marked_size    # the size after a split (gradient arrays: forward's)
        self.closed = False
        self.gradients_disallowed = False
        self.grads: dict = {}             # source -> gradient TensorArrayResource

    def _error(self, message):
        return errors.InvalidArgumentError(None, None, f"TensorArray {self.name}: {message}")

    def _check_open(self):
        if self.closed:
            raise self._error("has already been closed.")

    @property
    def size(self) -> int:
        return len(self.elements)

    # -- writes --------------------------------------------------------------------------------
    def write(self, index, value):
        self._check_open()
        index = int(index)
        if index < 0 or (not self.dynamic_size and index >= len(self.elements)):
            raise self._error(f"Tried to write to index {index} but array is not resizeable "
                              f"and size is: {len(self.elements)}")
        if index >= len(self.elements):
            self.elements.extend(_Element() for _ in range(index + 1 - len(self.elements)))
        value = np.asarray(value) if not isinstance(value, np.generic) else value
        if value.dtype != self.dtype:
            raise self._error(f"Could not write to TensorArray index {index} because the "
                              f"value dtype is {value.dtype.name} but TensorArray dtype is "
                              f"{self.dtype.name}.")
        shape = np.shape(value)
        if not _compatible(self.element_shape, shape):
            raise self._error(
                f"Could not write to TensorArray index {index} because the value shape is "
                f"{_shape_str(shape)} which is incompatible with the TensorArray's inferred "
                f"element shape: {_shape_str(self.element_shape)} (consider setting "
                f"infer_shape=False).")
        if self.identical_element_shapes and not _fully_defined(self.element_shape):
            self.element_shape = tuple(shape)
        t = self.elements[index]
        if t.read:
            raise self._error(f"Could not write to TensorArray index {index} because it has "
                              "already been read.")
        if t.written and not self.is_grad:
            raise self._error(f"Could not write to TensorArray index {index} because it has "
                              "already been written to.")
        if t.written:
            if tuple(shape) != tuple(t.shape):
                raise self._error(
                    f"Could not aggregate to TensorArray index {index} because the existing "
                    f"shape is {_shape_str(t.shape)} but the new input shape is "
                    f"{_shape_str(shape)}.")
            # A gradient array adds partial gradients (the first value may be a shape only).
            t.value = value if t.value is None else scalarize(np.add(t.value, value))
            if t.value is value:
                return
            self.gradients_disallowed = True
            return
        t.value, t.shape, t.written = value, tuple(shape), True

    # -- reads ---------------------------------------------------------------------------------
    def read(self, index):
        self._check_open()
        index = int(index)
        n = len(self.elements)
        if index < 0 or (not self.is_grad and index >= n):
            raise errors.InvalidArgumentError(
                None, None, f"Tried to read from index {index} but array size is: {n}")
        if index >= n or not self.elements[index].written:
            self._fill_unwritten(index)
        t = self.elements[index]
        if t.cleared:
            raise self._error(f"Could not read index {index} twice because it was cleared "
                              "after a previous read (perhaps try setting clear_after_read "
                              "= false?).")
        value = t.value
        if value is None:
            value = scalarize(np.zeros(t.shape, dtype=self.dtype))
        if self.clear_after_read:
            t.value, t.cleared = None, True
        else:
            t.value = value
        t.read = True
        return value

    def _fill_unwritten(self, index):
        """An unwritten index reads as zeros of the known shape (TF's zero-fill)."""
        n = len(self.elements)
        if self.is_grad and index < n and self.elements[index].shape:
            shape = self.elements[index].shape
        elif not _fully_defined(self.element_shape):
            raise self._error(
                f"Could not read from TensorArray index {index}.  Furthermore, the element "
                f"shape is not fully defined: {_shape_str(self.element_shape)}.  It is "
                "possible you are working with a resizeable TensorArray and stop_gradients "
                "is not allowing the gradients to be written.  If you set the full "
                "element_shape property on the forward TensorArray, the proper all-zeros "
                "tensor will be returned instead of incurring this error.")
        else:
            shape = self.element_shape
        if index >= n:
            self.elements.extend(_Element() for _ in range(index + 1 - n))
            for t in self.elements[n:]:
                t.shape, t.written = shape, True
        else:
            t = self.elements[index]
            t.shape, t.written = shape, True

    def read_many(self, indices, element_shape, what="pack"):
        """The elements at ``indices`` stacked; all must have one shape."""
        self._check_open()
        if not indices:
            shape = self._merged_shape(element_shape)
            if not _fully_defined(shape):
                raise errors.UnimplementedError(
                    None, None, f"TensorArray has size zero, but element shape "
                    f"{_shape_str(shape)} is not fully defined. Currently only static shapes "
                    "are supported when packing zero-size TensorArrays.")
            return np.zeros((0,) + shape, dtype=self.dtype)
        values = [self.read(i) for i in indices]
        first = np.shape(values[0])
        for i, v in zip(indices, values):
            if np.shape(v) != first:
                raise self._error(
                    f"TensorArray has inconsistent shapes.  Index {indices[0]} has shape: "
                    f"{_shape_str(first)} but index {i} has shape: {_shape_str(np.shape(v))}")
        return np.stack([np.asarray(v) for v in values])

    def _merged_shape(self, element_shape):
        if not _compatible(self.element_shape, element_shape):
            raise self._error(f"Incompatible element shapes {_shape_str(element_shape)} and "
                              f"{_shape_str(self.element_shape)}")
        return _merge(self.element_shape, element_shape)

    def pack_or_concat_size(self) -> int:
        """How many elements stack and concat read (a gradient array: the forward's
        size after its split, if any)."""
        if self.is_grad and self.marked_size >= 0:
            return self.marked_size
        return len(self.elements)

    # -- gradient arrays -----------------------------------------------------------------------
    def gradient_array(self, source, name):
        """The gradient array for ``source`` (made at its first request): same size and
        element shape, each element's shape copied so unwritten gradients read as zeros."""
        self._check_open()
        grad = self.grads.get(source)
        if grad is not None:
            return grad
        if self.gradients_disallowed:
            raise self._error(
                "Unable to create a gradients TensorArray.  Perhaps you used the "
                "multiple_writes_aggregate flag on a previous write?  Gradient calculation "
                "is impossible when multiple writes are performed to the same index.")
        self.dynamic_size = False  # a differentiated array no longer grows
        grad = TensorArrayResource(f"{name}@{source}", self.dtype, len(self.elements),
                                   self.element_shape, False, True,
                                   self.identical_element_shapes, is_grad=True,
                                   marked_size=self.marked_size)
        for mine, theirs in zip(grad.elements, self.elements):
            if theirs.written:
                mine.shape, mine.written = theirs.shape, True
        self.grads[source] = grad
        return grad


def _check_handle_dtype(ta, dtype, op_name):
    if np_dtype(dtype) != ta.dtype:
        raise errors.InvalidArgumentError(
            None, None, f"TensorArray dtype is {ta.dtype.name} but Op requested dtype "
            f"{np_dtype(dtype).name}.")


def _indices(indices):
    arr = np.asarray(indices)
    if arr.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"indices must be a vector, got shape {_shape_str(arr.shape)}")
    return [int(i) for i in arr]


# -- kernels -----------------------------------------------------------------------------------
@register_kernel("TensorArrayV3")
def _tensor_array(ctx):
    name = ctx.attr("tensor_array_name") or ctx.op.name
    dtype = np_dtype(ctx.attr("dtype"))
    shape = _partial(ctx.attr("element_shape"))
    dynamic, clear = ctx.attr("dynamic_size"), ctx.attr("clear_after_read")
    identical = ctx.attr("identical_element_shapes")
    flow = np.float32(0.0)

    def make(size):
        size = int(size)
        if size < 0:
            raise errors.InvalidArgumentError(None, None, f"Size should be >= 0, got {size}")
        return TensorArrayResource(name, dtype, size, shape, dynamic, clear, identical), flow
    return make


@register_kernel("TensorArrayGradV3")
def _tensor_array_grad(ctx):
    source = ctx.attr("source")

    def grad(ta, flow):
        return ta.gradient_array(source, ta.name), flow
    return grad


@register_kernel("TensorArrayWriteV3")
def _write(ctx):
    def write(ta, index, value, flow):
        ta.write(index, value)
        return flow
    return write


@register_kernel("TensorArrayReadV3")
def _read(ctx):
    dtype = ctx.attr("dtype")

    def read(ta, index, flow):
        _check_handle_dtype(ta, dtype, ctx.op.name)
        return ta.read(index)
    return read


@register_kernel("TensorArrayGatherV3")
def _gather(ctx):
    dtype, element_shape = ctx.attr("dtype"), _partial(ctx.attr("element_shape"))

    def gather(ta, indices, flow):
        _check_handle_dtype(ta, dtype, ctx.op.name)
        return ta.read_many(_indices(indices), element_shape)
    return gather


@register_kernel("TensorArrayScatterV3")
def _scatter(ctx):
    def scatter(ta, indices, value, flow):
        ta._check_open()
        idx = _indices(indices)
        value = np.asarray(value)
        if value.ndim == 0 or len(idx) != value.shape[0]:
            got = value.shape[0] if value.ndim else "a scalar"
            raise errors.InvalidArgumentError(
                None, None, f"Expected len(indices) == values.shape[0], but saw: {len(idx)} "
                f"vs. {got}")
        if not ta.dynamic_size and idx and max(idx) >= ta.size:
            raise errors.InvalidArgumentError(
                None, None, f"Max scatter index must be < array size ({max(idx)} vs. "
                f"{ta.size})")
        for i, row in zip(idx, value):
            ta.write(i, scalarize(row))
        return flow
    return scatter


@register_kernel("TensorArrayConcatV3")
def _concat(ctx):
    dtype, rest = ctx.attr("dtype"), _partial(ctx.attr("element_shape_except0"))

    def concat(ta, flow):
        _check_handle_dtype(ta, dtype, ctx.op.name)
        ta._check_open()
        n = ta.pack_or_concat_size()
        if n == 0:
            if not _fully_defined(rest):
                raise errors.UnimplementedError(
                    None, None, f"TensorArray has size zero, but element_shape_except0 "
                    f"{_shape_str(rest)} is not fully defined. Currently only static shapes "
                    "are supported when concatenating zero-size TensorArrays.")
            return np.zeros((0,) + rest, ta.dtype), np.zeros([0], np.int64)
        values = [np.asarray(ta.read(i)) for i in range(n)]
        for i, v in enumerate(values):
            if v.ndim == 0:
                raise ta._error(f"Concat saw a scalar shape at index {i} but requires at least "
                                "vectors.  Did you mean to call pack?")
            if v.shape[1:] != values[0].shape[1:]:
                raise ta._error(
                    f"TensorArray has inconsistent shapes.  Index 0 has (excepting dimension "
                    f"0) shape: {_shape_str(values[0].shape[1:])} but index {i} has "
                    f"(excepting dimension 0) shape: {_shape_str(v.shape[1:])}")
        lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
        return np.concatenate(values, axis=0), lengths
    return concat


@register_kernel("TensorArraySplitV3")
def _split(ctx):
    def split(ta, value, lengths, flow):
        ta._check_open()
        value = np.asarray(value)
        lengths = np.asarray(lengths)
        if value.ndim == 0:
            raise errors.InvalidArgumentError(
                None, None, "Expected value to be at least a vector, but received shape: []")
        if lengths.ndim != 1:
            raise errors.InvalidArgumentError(
                None, None, f"Expected lengths to be a vector, received shape: "
                f"{_shape_str(lengths.shape)}")
        if int(lengths.sum()) != value.shape[0]:
            raise errors.InvalidArgumentError(
                None, None, f"Expected sum of lengths to be equal to values.shape[0], but sum "
                f"of lengths is {int(lengths.sum())} and value's shape is: "
                f"{_shape_str(value.shape)}")
        if not ta.dynamic_size and ta.size != len(lengths):
            raise errors.InvalidArgumentError(
                None, None, f"TensorArray's size is not equal to the size of lengths "
                f"({ta.size} vs. {len(lengths)}), and the TensorArray is not marked as "
                "dynamically resizeable")
        if not ta.is_grad:
            ta.marked_size = len(lengths)
        ends = np.cumsum(lengths)
        for i, (start, end) in enumerate(zip(ends - lengths, ends)):
            ta.write(i, value[int(start):int(end)])
        return flow
    return split


@register_kernel("TensorArraySizeV3")
def _size(ctx):
    def size(ta, flow):
        ta._check_open()
        return np.int32(ta.size)
    return size


@register_kernel("TensorArrayCloseV3")
def _close(ctx):
    def close(ta):
        ta.elements = []
        ta.closed = True
    return close
