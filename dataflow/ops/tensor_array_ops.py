"""``TensorArray``: an array of tensors written and read inside graphs (TF1's ``TensorArrayV3``).

A TensorArray is built as TF1 builds it: a ``TensorArrayV3`` op makes, in every run
step, a fresh array and yields its resource *handle* plus a scalar float ``flow``.
Every write returns a new flow, and every read takes one as input: the flow orders
accesses (a read waits for the write whose flow it consumes) and is what travels
through ``while_loop`` as a loop variable (``while_loop`` and ``cond`` turn
TensorArrays into their flows and back). The handle of an array made outside a loop
enters the loop as a loop invariant.

Gradients (``dataflow/autodiff/tensor_array_grad.py``) use a *gradient array* per
source: ``TensorArrayGradV3`` finds or makes it next to the forward array, and
gradient writes to one index add up.

>>> ta = TensorArray(df.float32, size=3)
>>> ta = ta.write(0, 1.0).write(1, 2.0).write(2, 3.0)
>>> total = df.reduce_sum(ta.stack())
>>> df.Session().run(total)
np.float32(6.0)
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import constant, constant_value, convert_to_tensor
from ..framework.graph import Tensor, get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape, as_shape
from . import shape_fns

__all__ = ["TensorArray", "flow_of", "with_flow", "is_tensor_array"]


# -- op definitions ----------------------------------------------------------------------------
_SCALAR = TensorShape([])


@register_op("TensorArrayV3", stateful=True)
def _ta_infer(op):
    return [(_dtypes.resource, _SCALAR), (_dtypes.float32, _SCALAR)]


@register_op("TensorArrayGradV3", stateful=True)
def _ta_grad_infer(op):
    return [(_dtypes.resource, _SCALAR), (_dtypes.float32, _SCALAR)]


for _t in ("TensorArrayWriteV3", "TensorArrayScatterV3", "TensorArraySplitV3"):
    register_op(_t, stateful=True)(shape_fns.scalar(_dtypes.float32))
register_op("TensorArraySizeV3", stateful=True)(shape_fns.scalar(_dtypes.int32))
register_op("TensorArrayCloseV3", stateful=True)(shape_fns.no_outputs)


@register_op("TensorArrayReadV3", stateful=True)
def _ta_read_infer(op):
    return [(op.get_attr("dtype"), TensorShape(None))]


@register_op("TensorArrayGatherV3", stateful=True)
def _ta_gather_infer(op):
    elem = op.get_attr("element_shape")
    n = op.inputs[1].shape[0] if op.inputs[1].shape.ndims == 1 else None
    shape = TensorShape(None) if elem.ndims is None else TensorShape([n] + elem.dims)
    return [(op.get_attr("dtype"), shape)]


@register_op("TensorArrayConcatV3", stateful=True)
def _ta_concat_infer(op):
    rest = op.get_attr("element_shape_except0")
    shape = TensorShape(None) if rest.ndims is None else TensorShape([None] + rest.dims)
    return [(op.get_attr("dtype"), shape), (_dtypes.int64, TensorShape([None]))]


# -- helpers -----------------------------------------------------------------------------------
def _index(index, name="index"):
    index = convert_to_tensor(index, dtype=_dtypes.int32, name=name) \
        if not isinstance(index, Tensor) else index
    if index.dtype is not _dtypes.int32:
        raise TypeError(f"TensorArray {name} must be int32, got {index.dtype.name}")
    return index


def _check_dtype(value: Tensor, dtype, what):
    """A dtype mismatch known while building is a ValueError (TF1 only logged it and
    failed in the kernel)."""
    if value.dtype is not dtype:
        raise ValueError(f"TensorArray dtype is {dtype.name} but Op is trying to {what} "
                         f"dtype {value.dtype.name}")


def _arange(n):
    """``[0, 1, ..., n-1]`` (int32) for a scalar int tensor or int ``n``.

    A constant when ``n`` is known while building; otherwise the coordinates of an
    all-true vector of length ``n`` (``Where``), which needs no op beyond the core set.
    """
    from .array_ops import fill, reshape, stack, where
    from .math_ops import cast
    static = n if isinstance(n, (int, np.integer)) else constant_value(n)
    if static is not None:
        return constant(np.arange(int(static), dtype=np.int32), name="indices")
    coords = where(fill(stack([n]), convert_to_tensor(True)))
    return cast(reshape(coords, [-1]), _dtypes.int32, name="indices")


# Ops a handle passes through on its way into loops and conds.
_HANDLE_FORWARDERS = ("Enter", "Exit", "Switch", "Identity")


def _array_device(handle: Tensor) -> str:
    """The device of the op that made the array behind ``handle`` (through the Enters of
    loops and the Switches of conds the handle passed)."""
    op = handle.op
    while op.type in _HANDLE_FORWARDERS and op.inputs:
        op = op.inputs[0].op
    return op.device


def is_tensor_array(x) -> bool:
    return isinstance(x, TensorArray)


def flow_of(x):
    """``x``'s flow if ``x`` is a TensorArray, else ``x`` (how loops and conds carry it)."""
    return x.flow if isinstance(x, TensorArray) else x


def with_flow(template, value):
    """``value`` as ``template`` was: a TensorArray like ``template`` with flow ``value``
    when ``template`` is a TensorArray, else ``value`` itself."""
    if isinstance(template, TensorArray):
        return template._with_flow(value)
    return value


# -- the Python object -------------------------------------------------------------------------
class TensorArray:
    """An array of tensors of one dtype, with TF1's graph-mode semantics.

    Writes return a new TensorArray (same handle, new flow): use the result, not the
    original, for later reads. Each index may be written once; with
    ``clear_after_read`` (the default) it may be read once. Reading an index never
    written gives zeros if the element shape is known (given, or inferred from a
    write), and is an error otherwise. ``dynamic_size`` lets writes grow the array.

    >>> ta = TensorArray(df.float32, size=0, dynamic_size=True)
    >>> i, ta = df.while_loop(lambda i, ta: i < 4,
    ...                       lambda i, ta: (i + 1, ta.write(i, df.cast(i, df.float32) ** 2)),
    ...                       (0, ta))
    >>> squares = ta.stack()
    >>> df.Session().run(squares)
    array([0., 1., 4., 9.], dtype=float32)
    """

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None):
        if handle is not None and tensor_array_name:
            raise ValueError("Cannot construct with both handle and tensor_array_name")
        if handle is not None and not isinstance(handle, Tensor):
            raise TypeError("Handle must be a Tensor")
        if handle is None and size is None:
            raise ValueError("Size must be provided if handle is not provided")
        if handle is not None and size is not None:
            raise ValueError("Cannot provide both a handle and size at the same time")
        if handle is not None and element_shape is not None:
            raise ValueError("Cannot provide both a handle and element_shape at the same time")
        if handle is not None and dynamic_size is not None:
            raise ValueError("Cannot provide both a handle and dynamic_size at the same time")
        if handle is not None and clear_after_read is not None:
            raise ValueError("Cannot provide both a handle and clear_after_read at the same "
                             "time")
        if clear_after_read is None:
            clear_after_read = True
        self._dtype = _dtypes.as_dtype(dtype)
        self._dynamic_size = bool(dynamic_size)
        self._size = size
        self._infer_shape = infer_shape
        # One list shared by every TensorArray of the same handle (writes' results, loop
        # copies): a shape inferred from one write is known to all of them.
        self._element_shape = [as_shape(element_shape)]
        self._colocate_with_first_write_call = colocate_with_first_write_call
        self._colocate_with = [] if colocate_with_first_write_call else None
        g = get_default_graph()
        if handle is not None:
            if flow is None:
                raise ValueError("flow must not be None if handle is not None.")
            self._handle, self._flow = handle, flow
            return
        with g.name_scope(name or "TensorArray") as scope:
            size = convert_to_tensor(size, dtype=_dtypes.int32, name="size")
            attrs = {"dtype": self._dtype, "element_shape": self._element_shape[0],
                     "dynamic_size": self._dynamic_size,
                     "clear_after_read": bool(clear_after_read),
                     "identical_element_shapes": bool(infer_shape),
                     "tensor_array_name": tensor_array_name or ""}
            if colocate_with_first_write_call:
                # Placed with the first value written (see _maybe_colocate_with).
                with g.device(None):
                    op = g.create_op("TensorArrayV3", [size], attrs, name=scope)
            else:
                op = g.create_op("TensorArrayV3", [size], attrs, name=scope)
        self._handle, self._flow = op.outputs

    # -- properties ----------------------------------------------------------------------------
    @property
    def flow(self) -> Tensor:
        """The float scalar that orders accesses to the array."""
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def handle(self) -> Tensor:
        return self._handle

    @property
    def element_shape(self) -> TensorShape:
        """The static shape of the elements, as far as known while building."""
        return self._element_shape[0]

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic_size

    def _with_flow(self, flow) -> "TensorArray":
        """A TensorArray of the same handle (and shared shape knowledge) with ``flow``."""
        ta = TensorArray(self._dtype, handle=self._handle, flow=flow,
                         infer_shape=self._infer_shape,
                         colocate_with_first_write_call=self._colocate_with_first_write_call)
        ta._colocate_with = self._colocate_with
        ta._element_shape = self._element_shape
        ta._dynamic_size = self._dynamic_size
        ta._size = self._size
        return ta

    def _check_element_shape(self, shape):
        """Merge ``shape`` into the element shape; a ValueError if incompatible."""
        if not as_shape(shape).is_compatible_with(self.element_shape):
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected "
                             f"{self.element_shape}")
        if self._infer_shape:
            self._element_shape[0] = self.element_shape.merge_with(shape)

    def _maybe_colocate_with(self, value: Tensor):
        """With ``colocate_with_first_write_call``, the array lives where the first value
        written to it does: the handle op takes that value's device."""
        if self._colocate_with is None or self._colocate_with:
            return
        self._colocate_with.append(value)
        creator = self._handle.op
        if creator.type == "TensorArrayV3" and not creator.device and value.device:
            creator._set_device(value.device)

    def _op(self, op_type, inputs, attrs=None, name=None):
        """An op on the array, placed where the array lives (a resource's ops run on its
        device, as TF's placer puts them)."""
        g = get_default_graph()
        with g.device(_array_device(self._handle) or None):
            return g.create_op(op_type, inputs, attrs or {}, name=name or op_type)

    # -- element access ------------------------------------------------------------------------
    def read(self, index, name=None) -> Tensor:
        """The element at ``index`` (zeros of the element shape if never written)."""
        index = _index(index)
        value = self._op("TensorArrayReadV3", [self._handle, index, self._flow],
                         {"dtype": self._dtype}, name or "TensorArrayReadV3").outputs[0]
        value.set_shape(self.element_shape)
        return value

    def write(self, index, value, name=None) -> "TensorArray":
        """A TensorArray whose element ``index`` is ``value``."""
        g = get_default_graph()
        with g.name_scope(name or "TensorArrayWrite"):
            index = _index(index)
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            _check_dtype(value, self._dtype, "write")
            self._check_element_shape(value.shape)
            self._maybe_colocate_with(value)
            flow = self._op("TensorArrayWriteV3", [self._handle, index, value, self._flow],
                            {"T": self._dtype}).outputs[0]
        return self._with_flow(flow)

    def gather(self, indices, name=None) -> Tensor:
        """The elements at ``indices``, stacked along a new first dimension."""
        indices = convert_to_tensor(indices, dtype=_dtypes.int32) \
            if not isinstance(indices, Tensor) else indices
        value = self._op("TensorArrayGatherV3", [self._handle, indices, self._flow],
                         {"dtype": self._dtype, "element_shape": self.element_shape},
                         name or "TensorArrayGatherV3").outputs[0]
        if self.element_shape.ndims is not None:
            value.set_shape([value.shape[0]] + self.element_shape.dims)
        return value

    def stack(self, name=None) -> Tensor:
        """Every element, stacked along a new first dimension."""
        g = get_default_graph()
        with g.name_scope(name or "TensorArrayStack"):
            value = self.gather(_arange(self.size()))
            if self.element_shape.ndims is not None and not self._dynamic_size:
                n = constant_value(self._size) if isinstance(self._size, Tensor) \
                    else self._size
                if n is not None:
                    value.set_shape([int(n)] + self.element_shape.dims)
            return value

    def concat(self, name=None) -> Tensor:
        """Every element (each at least a vector) joined along dimension 0."""
        rest = self.element_shape[1:]
        value = self._op("TensorArrayConcatV3", [self._handle, self._flow],
                         {"dtype": self._dtype, "element_shape_except0": rest},
                         name or "TensorArrayConcatV3").outputs[0]
        return value

    def scatter(self, indices, value, name=None) -> "TensorArray":
        """A TensorArray whose element ``indices[i]`` is ``value[i]``."""
        g = get_default_graph()
        with g.name_scope(name or "TensorArrayScatter"):
            indices = convert_to_tensor(indices, dtype=_dtypes.int32) \
                if not isinstance(indices, Tensor) else indices
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            _check_dtype(value, self._dtype, "scatter")
            self._check_element_shape(value.shape[1:])
            self._maybe_colocate_with(value)
            flow = self._op("TensorArrayScatterV3",
                            [self._handle, indices, value, self._flow],
                            {"T": self._dtype}).outputs[0]
        return self._with_flow(flow)

    def unstack(self, value, name=None) -> "TensorArray":
        """A TensorArray whose element ``i`` is ``value[i]``."""
        from .array_ops import shape
        g = get_default_graph()
        with g.name_scope(name or "TensorArrayUnstack"):
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            n = value.shape[0] if value.shape.ndims else None
            return self.scatter(_arange(n if n is not None else shape(value)[0]), value)

    def split(self, value, lengths, name=None) -> "TensorArray":
        """A TensorArray whose elements are consecutive pieces of ``value`` (along
        dimension 0) of the given ``lengths``."""
        from .math_ops import cast
        g = get_default_graph()
        with g.name_scope(name or "TensorArraySplit"):
            value = convert_to_tensor(value, preferred_dtype=self._dtype, name="value")
            _check_dtype(value, self._dtype, "split")
            lengths = convert_to_tensor(lengths, preferred_dtype=_dtypes.int64)
            if lengths.dtype is not _dtypes.int64:
                lengths = cast(lengths, _dtypes.int64)
            known = constant_value(lengths)
            if value.shape.ndims is not None and known is not None:
                known = np.ravel(known)
                if known.size and known.max() == known.min():
                    self._check_element_shape([int(known[0])] + value.shape.dims[1:])
            self._maybe_colocate_with(value)
            flow = self._op("TensorArraySplitV3", [self._handle, value, lengths, self._flow],
                            {"T": self._dtype}).outputs[0]
        return self._with_flow(flow)

    def size(self, name=None) -> Tensor:
        """The number of elements (int32)."""
        if not self._dynamic_size and self._size is not None:
            if isinstance(self._size, Tensor):
                return self._size
            return convert_to_tensor(self._size, dtype=_dtypes.int32)
        return self._op("TensorArraySizeV3", [self._handle, self._flow],
                        name=name or "TensorArraySizeV3").outputs[0]

    def close(self, name=None):
        """An op releasing the array's elements; later accesses are errors."""
        return self._op("TensorArrayCloseV3", [self._handle], name=name or "TensorArrayCloseV3")

    def identity(self) -> "TensorArray":
        """A TensorArray whose flow is an Identity of this one's (for control dependencies)."""
        from .array_ops import identity
        return self._with_flow(identity(self._flow))

    def grad(self, source, flow=None, name=None) -> "TensorArray":
        """The gradient TensorArray of this one for gradient computation ``source``
        (one per source and run; gradient writes to an index add up)."""
        from .array_ops import identity
        if flow is None:
            flow = self._flow
        g = get_default_graph()
        with g.name_scope(name or "TensorArrayGrad"):
            g_handle, _ = self._op("TensorArrayGradV3", [self._handle, flow],
                                   {"source": str(source)}).outputs
            with g.control_dependencies([g_handle]):
                flow = identity(flow, name="gradient_flow")
        ta = TensorArray(self._dtype, handle=g_handle, flow=flow,
                         infer_shape=self._infer_shape, colocate_with_first_write_call=False)
        ta._element_shape = self._element_shape
        return ta

    def __repr__(self):
        return (f"<df.TensorArray '{self._handle.op.name}' dtype={self._dtype.name} "
                f"element_shape={self.element_shape}>")
