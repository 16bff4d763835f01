"""Array ops: placeholders, identity, reshaping, joining, indexing, shape queries (TF names).

>>> x = placeholder(df.float32, shape=[None, 3])
>>> y = reshape(transpose(x), [-1])
>>> first_row = x[0]
>>> y.shape.as_list(), first_row.shape.as_list()
([None], [3])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import (constant, constant_value, convert_to_tensor,
                                 register_tensor_conversion)
from ..framework.graph import Tensor, get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape, as_shape
from . import shape_fns

# -- definitions -----------------------------------------------------------------------------
for _t in ("Identity", "StopGradient", "PreventGradient", "Snapshot"):
    register_op(_t, forwards_input=True)(shape_fns.unchanged)
for _t in ("ZerosLike", "OnesLike", "PlaceholderWithDefault"):
    register_op(_t)(shape_fns.unchanged)


@register_op("Placeholder")
def _placeholder_infer(op):
    return [(op.get_attr("dtype"), op.get_attr("shape"))]


def _shape_tensor_dims(t: Tensor):
    """The entries of the 1-D int tensor ``t`` known at build time: a list of ints
    (``-1`` kept) and None for unknown entries, or None when even the length is unknown.
    A constant gives every entry, ``shape(y)`` the static shape of ``y`` and a ``stack``
    of scalars its constant ones (as TF's ``constant_value_as_shape``)."""
    value = constant_value(t)
    if value is not None:
        return [int(d) for d in np.ravel(value)]
    if t.op.type == "Shape":
        return t.op.inputs[0].shape.dims
    if t.op.type == "Pack" and t.shape.ndims == 1:
        entries = [constant_value(d) for d in t.op.inputs]
        return [None if d is None else int(d) for d in entries]
    n = t.shape[0] if t.shape.ndims == 1 else None
    return None if n is None else [None] * n


def shape_from_tensor(t: Tensor) -> TensorShape:
    """The static shape described by the 1-D int tensor ``t`` (-1 entries are unknown)."""
    return TensorShape(_shape_tensor_dims(t))


@register_op("Reshape")
def _reshape_infer(op):
    x, shape_t = op.inputs
    dims = _shape_tensor_dims(shape_t)
    if dims is None:
        return [(x.dtype, TensorShape(None))]
    if dims.count(-1) > 1:
        raise ValueError(f"Reshape '{op.name}': at most one -1 in the shape, got {dims}")
    if None in dims:  # some entries are computed: only the constant ones are known
        return [(x.dtype, TensorShape(dims))]
    n_in = x.shape.num_elements()
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        if n_in is not None:
            if known == 0 or n_in % known:
                raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape "
                                 f"{dims} (op '{op.name}')")
            dims = [n_in // known if d == -1 else d for d in dims]
        else:
            dims = [None if d == -1 else d for d in dims]
    elif n_in is not None and n_in != int(np.prod(dims)):
        raise ValueError(f"Cannot reshape a tensor with {n_in} elements to shape {dims} "
                         f"(op '{op.name}')")
    return [(x.dtype, TensorShape(dims))]


@register_op("Transpose")
def _transpose_infer(op):
    x = op.inputs[0]
    perm = op.get_attr("perm")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None if perm is None else [None] * len(perm)))]
    dims = x.shape.as_list()
    if perm is None:
        return [(x.dtype, TensorShape(dims[::-1]))]
    if sorted(perm) != list(range(len(dims))):
        raise ValueError(f"Transpose '{op.name}': perm {list(perm)} is not a permutation of "
                         f"the {len(dims)} dimensions")
    return [(x.dtype, TensorShape([dims[p] for p in perm]))]


@register_op("ConcatV2")
def _concat_infer(op):
    xs = op.inputs
    axis = op.get_attr("axis")
    ranks = {t.shape.ndims for t in xs if t.shape.ndims is not None}
    if len(ranks) > 1:
        raise ValueError(f"ConcatV2 '{op.name}': inputs have different ranks {sorted(ranks)}")
    if any(t.dtype is not xs[0].dtype for t in xs):
        raise TypeError(f"ConcatV2 '{op.name}': all inputs must share one dtype")
    if not ranks:
        return [(xs[0].dtype, TensorShape(None))]
    rank = ranks.pop()
    if not -rank <= axis < rank:
        raise ValueError(f"ConcatV2 '{op.name}': axis {axis} out of range for rank {rank}")
    axis %= rank
    out = []
    for i in range(rank):
        col = [t.shape[i] if t.shape.ndims is not None else None for t in xs]
        if i == axis:
            out.append(None if None in col else sum(col))
        else:
            known = {c for c in col if c is not None}
            if len(known) > 1:
                raise ValueError(f"ConcatV2 '{op.name}': dimension {i} differs between inputs "
                                 f"({sorted(known)})")
            out.append(known.pop() if known else None)
    return [(xs[0].dtype, TensorShape(out))]


@register_op("Pack")
def _pack_infer(op):
    xs = op.inputs
    shape = xs[0].shape
    for t in xs[1:]:
        if t.dtype is not xs[0].dtype:
            raise TypeError(f"stack '{op.name}': all inputs must share one dtype")
        if not shape.is_compatible_with(t.shape):
            raise ValueError(f"stack '{op.name}': shapes {shape} and {t.shape} differ")
        shape = shape.merge_with(t.shape)
    axis = op.get_attr("axis")
    if shape.ndims is None:
        return [(xs[0].dtype, TensorShape(None))]
    dims = shape.as_list()
    if not -len(dims) - 1 <= axis <= len(dims):
        raise ValueError(f"stack '{op.name}': axis {axis} out of range")
    axis %= len(dims) + 1
    return [(xs[0].dtype, TensorShape(dims[:axis] + [len(xs)] + dims[axis:]))]


@register_op("Fill")
def _fill_infer(op):
    dims_t, value = op.inputs
    if value.shape.ndims not in (None, 0):
        raise ValueError(f"fill '{op.name}': value must be a scalar, got shape {value.shape}")
    return [(value.dtype, shape_from_tensor(dims_t))]


def _shape_query_infer(op):
    x = op.inputs[0]
    if op.type == "Shape":
        return [(op.get_attr("out_type"), TensorShape([x.shape.ndims]))]
    return [(op.get_attr("out_type"), TensorShape([]))]


for _t in ("Shape", "Size", "Rank"):
    register_op(_t, reads_shapes_only=True)(_shape_query_infer)


@register_op("GatherV2")
def _gather_infer(op):
    params, indices = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"gather '{op.name}': indices must be int32 or int64, got "
                        f"{indices.dtype.name}")
    axis = op.get_attr("axis")
    if params.shape.ndims is None or indices.shape.ndims is None:
        return [(params.dtype, TensorShape(None))]
    p = params.shape.as_list()
    axis %= len(p)
    return [(params.dtype, TensorShape(p[:axis] + indices.shape.as_list() + p[axis + 1:]))]


@register_op("OneHot")
def _one_hot_infer(op):
    indices = op.inputs[0]
    depth, axis = op.get_attr("depth"), op.get_attr("axis")
    if indices.shape.ndims is None:
        return [(op.get_attr("dtype"), TensorShape(None))]
    dims = indices.shape.as_list()
    axis = len(dims) if axis == -1 else axis
    return [(op.get_attr("dtype"), TensorShape(dims[:axis] + [depth] + dims[axis:]))]


@register_op("SelectV2")
def _select_infer(op):
    c, x, y = op.inputs
    if not c.dtype.is_bool:
        raise TypeError(f"where '{op.name}': condition must be bool, got {c.dtype.name}")
    if x.dtype is not y.dtype:
        raise TypeError(f"where '{op.name}': x and y must share one dtype "
                        f"({x.dtype.name} vs {y.dtype.name})")
    from ..framework.tensor_shape import broadcast_shapes
    return [(x.dtype, broadcast_shapes(broadcast_shapes(c.shape, x.shape), y.shape))]


@register_op("Where")
def _where_infer(op):
    rank = op.inputs[0].shape.ndims
    return [(_dtypes.int64, TensorShape([None, rank]))]


@register_op("ExpandDims")
def _expand_dims_infer(op):
    x = op.inputs[0]
    axis = op.get_attr("axis")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))]
    dims = x.shape.as_list()
    if not -len(dims) - 1 <= axis <= len(dims):
        raise ValueError(f"expand_dims '{op.name}': axis {axis} is out of range for a "
                         f"tensor of rank {len(dims)}")
    axis = axis % (len(dims) + 1)
    return [(x.dtype, TensorShape(dims[:axis] + [1] + dims[axis:]))]


@register_op("Squeeze")
def _squeeze_infer(op):
    x = op.inputs[0]
    axes = op.get_attr("squeeze_dims")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))]
    dims = x.shape.as_list()
    if axes:
        if any(not -len(dims) <= a < len(dims) for a in axes):
            raise ValueError(f"squeeze '{op.name}': axis {list(axes)} is out of range for a "
                             f"tensor of rank {len(dims)}")
        axes = {a % len(dims) for a in axes}
        for a in axes:
            if dims[a] not in (1, None):
                raise ValueError(f"Can not squeeze dim[{a}], expected a dimension of 1, got "
                                 f"{dims[a]} (op '{op.name}')")
        return [(x.dtype, TensorShape([d for i, d in enumerate(dims) if i not in axes]))]
    if None in dims:
        return [(x.dtype, TensorShape(None))]
    return [(x.dtype, TensorShape([d for d in dims if d != 1]))]


@register_op("Tile")
def _tile_infer(op):
    x, multiples = op.inputs
    m = constant_value(multiples)
    if multiples.shape.ndims not in (None, 1):
        raise ValueError(f"tile '{op.name}': multiples must be 1-D, got shape "
                         f"{multiples.shape}")
    n = multiples.shape[0] if multiples.shape.ndims == 1 else None
    if n is not None and x.shape.ndims is not None and n != x.shape.ndims:
        raise ValueError(f"tile '{op.name}': multiples has {n} entries for a tensor of rank "
                         f"{x.shape.ndims}")
    if x.shape.ndims is None or m is None:
        return [(x.dtype, TensorShape(None if x.shape.ndims is None else [None] * x.shape.ndims))]
    return [(x.dtype, TensorShape([None if d is None else d * int(k)
                                   for d, k in zip(x.shape.as_list(), m)]))]


@register_op("StridedSlice")
def _strided_slice_infer(op):
    x = op.inputs[0]
    spec = op.get_attr("spec")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))]
    dims = x.shape.as_list()
    n_real = sum(1 for s in spec if s[0] in ("int", "slice", "tensor_int", "tensor_slice"))
    if n_real > len(dims):
        raise ValueError(f"Index {op.name}: too many indices ({n_real}) for a tensor of rank "
                         f"{len(dims)}")
    out, i = [], 0
    for item in spec:
        kind = item[0]
        if kind == "ellipsis":
            k = len(dims) - n_real
            out.extend(dims[i:i + k])
            i += k
        elif kind == "newaxis":
            out.append(1)
        elif kind in ("int", "tensor_int"):
            if kind == "int" and dims[i] is not None and not -dims[i] <= item[1] < dims[i]:
                raise ValueError(f"Index {item[1]} is out of bounds for dimension {i} of size "
                                 f"{dims[i]} (op '{op.name}')")
            i += 1
        elif kind == "slice":
            out.append(None if dims[i] is None else len(range(*slice(*item[1:]).indices(dims[i]))))
            i += 1
        else:  # tensor_slice: bounds known at run time, or now for constant bounds
            out.append(_tensor_slice_length(op, item, dims[i]))
            i += 1
    out.extend(dims[i:])
    return [(x.dtype, TensorShape(out))]


def _tensor_slice_length(op, item, dim):
    """The length of a ``tensor_slice`` of a dimension of size ``dim`` when every tensor
    bound is a constant (as TF's shape function does with constant begin/end), else
    None. A bound ``("t", j)`` is ``op.inputs[j]``."""
    if dim is None:
        return None
    bounds = []
    for ref in item[1:]:
        if ref[0] == "c":
            bounds.append(ref[1])
            continue
        value = constant_value(op.inputs[ref[1]])
        if value is None or np.ndim(value) != 0:
            return None
        bounds.append(int(value))
    if bounds[2] == 0:
        return None   # the kernel raises the error
    return len(range(*slice(*bounds).indices(dim)))


# -- wrappers --------------------------------------------------------------------------------

def placeholder(dtype, shape=None, name=None) -> Tensor:
    """A tensor whose value must be fed at run time (``feed_dict={x: value}``).

    >>> x = placeholder(df.float32, shape=[None, 784], name="x")
    >>> df.Session().run(df.shape(x), {x: np.zeros((2, 784), np.float32)})
    array([  2, 784], dtype=int32)
    """
    attrs = {"dtype": _dtypes.as_dtype(dtype), "shape": as_shape(shape)}
    return get_default_graph().create_op("Placeholder", [], attrs,
                                         name=name or "Placeholder").outputs[0]


def placeholder_with_default(input, shape, name=None) -> Tensor:  # noqa: A002 - TF's name
    """``input`` unless a value is fed for the result."""
    x = convert_to_tensor(input)
    op = get_default_graph().create_op("PlaceholderWithDefault", [x], {"shape": as_shape(shape)},
                                       name=name or "PlaceholderWithDefault")
    op.outputs[0].set_shape(shape) if shape is not None else None
    return op.outputs[0]


def _simple(op_type, x, name, attrs=None):
    return get_default_graph().create_op(op_type, [convert_to_tensor(x)], attrs,
                                         name=name or op_type).outputs[0]


def identity(input, name=None) -> Tensor:  # noqa: A002
    """The same value (op type Identity)."""
    return _simple("Identity", input, name)


def stop_gradient(input, name=None) -> Tensor:  # noqa: A002
    """The same value; gradients do not flow through it."""
    return _simple("StopGradient", input, name)


def zeros_like(tensor, dtype=None, name=None) -> Tensor:
    """Zeros with the shape (and dtype, unless given) of ``tensor``."""
    t = _simple("ZerosLike", tensor, name)
    return t if dtype is None else _cast(t, dtype)


def ones_like(tensor, dtype=None, name=None) -> Tensor:
    """Ones with the shape (and dtype, unless given) of ``tensor``."""
    t = _simple("OnesLike", tensor, name)
    return t if dtype is None else _cast(t, dtype)


def _cast(t, dtype):
    from .math_ops import cast
    return cast(t, dtype)


def _filled(shape, value, dtype, name):
    dtype = _dtypes.as_dtype(dtype)
    if isinstance(shape, Tensor):
        return fill(shape, constant(value, dtype=dtype), name=name)
    if any(isinstance(d, Tensor) for d in shape):
        return fill(stack([convert_to_tensor(d, dtype=_dtypes.int32) for d in shape]),
                    constant(value, dtype=dtype), name=name)
    return constant(np.full([int(d) for d in shape], value, dtype=dtype.as_numpy_dtype),
                    dtype=dtype, name=name)


def zeros(shape, dtype=_dtypes.float32, name=None) -> Tensor:
    """A tensor of zeros (``tf.zeros([2, 3])``)."""
    return _filled(shape, 0, dtype, name or "zeros")


def ones(shape, dtype=_dtypes.float32, name=None) -> Tensor:
    """A tensor of ones."""
    return _filled(shape, 1, dtype, name or "ones")


def fill(dims, value, name=None) -> Tensor:
    """A tensor of shape ``dims`` filled with the scalar ``value``."""
    dims = convert_to_tensor(dims, dtype=_dtypes.int32) if not isinstance(dims, Tensor) else dims
    value = convert_to_tensor(value)
    return get_default_graph().create_op("Fill", [dims, value], name=name or "Fill").outputs[0]


def reshape(tensor, shape, name=None) -> Tensor:
    """``tensor`` with a new shape (one dimension may be -1)."""
    shape = shape if isinstance(shape, Tensor) else convert_to_tensor(
        list(shape) if isinstance(shape, (list, tuple, TensorShape)) else shape,
        dtype=_dtypes.int32)
    return get_default_graph().create_op("Reshape", [convert_to_tensor(tensor), shape],
                                         name=name or "Reshape").outputs[0]


def transpose(a, perm=None, name="transpose") -> Tensor:
    """Permute dimensions (reverse them when ``perm`` is None)."""
    perm = None if perm is None else tuple(int(p) for p in perm)
    return _simple("Transpose", a, name, {"perm": perm})


def concat(values, axis, name="concat") -> Tensor:
    """Join tensors along ``axis``."""
    values = [convert_to_tensor(v) for v in values]
    if len(values) == 1:
        return identity(values[0], name=name)
    return get_default_graph().create_op("ConcatV2", values, {"axis": int(axis)},
                                         name=name).outputs[0]


def stack(values, axis=0, name="stack") -> Tensor:
    """Stack rank-R tensors into one rank-(R+1) tensor."""
    values = list(values)
    first = next((v for v in values if isinstance(v, Tensor)), None)
    dtype = first.dtype if first is not None else None
    values = [convert_to_tensor(v, dtype=dtype) for v in values]
    return get_default_graph().create_op("Pack", values, {"axis": int(axis)},
                                         name=name).outputs[0]


def _holds_tensor(values) -> bool:
    for v in values:
        if isinstance(v, Tensor) or (isinstance(v, (list, tuple)) and _holds_tensor(v)):
            return True
    return False


def _pack_list(values, dtype, name):
    """``convert_to_tensor([t, 1.0])``: a list or tuple holding tensors becomes a Pack of
    its converted elements (TF's autopacking); a list of plain values is left to
    ``constant`` (NotImplemented)."""
    if not _holds_tensor(values):
        return NotImplemented
    return stack([convert_to_tensor(v, dtype=dtype) for v in values], name=name or "packed")


register_tensor_conversion((list, tuple), _pack_list)


def expand_dims(input, axis, name=None) -> Tensor:  # noqa: A002
    """``input`` with a new size-1 dimension at ``axis`` (in ``[-rank-1, rank]``)."""
    return _simple("ExpandDims", input, name, {"axis": int(axis)})


def squeeze(input, axis=None, name=None) -> Tensor:  # noqa: A002
    """``input`` without the size-1 dimensions ``axis`` (all of them when None)."""
    axes = None if axis is None else (
        (int(axis),) if np.ndim(axis) == 0 else tuple(int(a) for a in axis))
    return _simple("Squeeze", input, name, {"squeeze_dims": axes})


def tile(input, multiples, name=None) -> Tensor:  # noqa: A002
    """``input`` repeated ``multiples[i]`` times along dimension ``i``."""
    m = multiples if isinstance(multiples, Tensor) else convert_to_tensor(
        list(multiples), dtype=_dtypes.int32)
    return get_default_graph().create_op("Tile", [convert_to_tensor(input), m],
                                         name=name or "Tile").outputs[0]


def _shape_query(op_type, x, name, out_type, optimize=True):
    x = convert_to_tensor(x)
    out_type = _dtypes.as_dtype(out_type)

    static = _static_shape_query(op_type, x, out_type, name) if optimize else None
    if static is not None:
        return static()  # as TF1's shape(optimize=True): a constant, no run-time query

    def build(t):
        return _simple(op_type, t, name, {"out_type": out_type})
    return _SHAPE_QUERY_BUILDER[0](x, build)


# How a run-time shape query of a tensor is built: ``builder(x, build)`` returns
# ``build(x)`` or an equivalent. Inside a while-loop gradient the query of a forward-loop
# tensor is better built in the forward loop (only its small result is saved, not the
# tensor); dataflow.autodiff, the layer that knows gradient loops, installs that builder.
_SHAPE_QUERY_BUILDER = [lambda x, build: build(x)]


def set_shape_query_builder(builder):
    """Install ``builder(x, build)`` as the way :func:`shape`, :func:`size` and
    :func:`rank` build their run-time query of ``x`` (``build(x)`` makes the op);
    returns the builder it replaces. :mod:`dataflow.autodiff` installs one at import.

    >>> x = df.placeholder(df.float32, [None])
    >>> previous = set_shape_query_builder(lambda x, build: build(x))   # the plain one
    >>> df.shape(x).op.type
    'Shape'
    >>> _ = set_shape_query_builder(previous)                           # put it back
    """
    previous, _SHAPE_QUERY_BUILDER[0] = _SHAPE_QUERY_BUILDER[0], builder
    return previous


def _static_shape_query(op_type, x, out_type, name=None):
    """The query's value as a constant maker, when the static shape answers it."""
    if not x.shape.is_fully_defined():
        if op_type == "Rank" and x.shape.ndims is not None:
            return lambda: constant(x.shape.ndims, dtype=out_type, name=name or op_type)
        return None
    dims = x.shape.as_list()
    value = {"Shape": dims, "Size": int(np.prod(dims, dtype=np.int64)),
             "Rank": len(dims)}[op_type]
    return lambda: constant(value, dtype=out_type, name=name or op_type)


def shape(input, name=None, out_type=_dtypes.int32) -> Tensor:  # noqa: A002
    """The dynamic shape of ``input`` as a 1-D int32 tensor."""
    return _shape_query("Shape", input, name, out_type)


def shape_internal(input, name=None, optimize=True,  # noqa: A002
                   out_type=_dtypes.int32) -> Tensor:
    """:func:`shape`, with TF's ``optimize`` switch: ``optimize=False`` always builds the
    run-time ``Shape`` op, even where the static shape (an eager tensor's) answers the
    query. Code whose result is data-dependent (the length of a ``unique``) uses it so a
    traced step computes the shape inside the generated graph instead of reading it.

    >>> with df.eager_mode():
    ...     x = df.constant([3, 1, 3])
    ...     n, m = shape_internal(x, optimize=False), shape_internal(x)
    >>> n.op.type, m.op.type, n.numpy().tolist()
    ('Shape', 'Const', [3])
    """
    return _shape_query("Shape", input, name, out_type, optimize)


def size(input, name=None, out_type=_dtypes.int32) -> Tensor:  # noqa: A002
    """The number of elements of ``input``."""
    return _shape_query("Size", input, name, out_type)


def rank(input, name=None) -> Tensor:  # noqa: A002
    """The number of dimensions of ``input``."""
    return _shape_query("Rank", input, name, _dtypes.int32)


def gather(params, indices, axis=0, name=None) -> Tensor:
    """Pick slices of ``params`` along ``axis`` at ``indices``."""
    params = convert_to_tensor(params)
    indices = convert_to_tensor(indices)
    axis = int(axis)
    if params.shape.ndims is not None and not -params.shape.ndims <= axis < params.shape.ndims:
        raise ValueError(f"gather: axis {axis} out of range for rank {params.shape.ndims}")
    return get_default_graph().create_op("GatherV2", [params, indices], {"axis": axis},
                                         name=name or "GatherV2").outputs[0]


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """One-hot encode integer ``indices`` into ``depth`` classes (float32 by default)."""
    indices = convert_to_tensor(indices)
    if not indices.dtype.is_integer:
        raise TypeError(f"one_hot: indices must be integers, got {indices.dtype.name}")
    dtype = _one_hot_dtype(dtype, on_value, off_value)
    rank = indices.shape.ndims
    axis = -1 if axis is None else int(axis)
    if axis < -1 or rank is not None and axis > rank:
        raise ValueError(f"one_hot: axis must be -1 or in [0, {rank}], got {axis}")
    attrs = {"depth": int(depth), "axis": axis, "dtype": dtype,
             "on_value": 1 if on_value is None else _scalar_attr(on_value, dtype, "on_value"),
             "off_value": 0 if off_value is None else _scalar_attr(off_value, dtype,
                                                                  "off_value")}
    return get_default_graph().create_op("OneHot", [indices], attrs,
                                         name=name or "one_hot").outputs[0]


def _one_hot_dtype(dtype, on_value, off_value):
    """TF's rule: ``dtype`` if given, else the dtype of on_value/off_value, else float32."""
    given = [_value_dtype(v) for v in (on_value, off_value) if v is not None]
    if dtype is not None:
        return _dtypes.as_dtype(dtype)
    if len(given) == 2 and given[0] is not given[1]:
        raise TypeError(f"one_hot: on_value ({given[0].name}) and off_value "
                        f"({given[1].name}) must have the same dtype")
    return given[0] if given else _dtypes.float32


def _value_dtype(value):
    from ..framework.convert import infer_dtype
    return value.dtype if isinstance(value, Tensor) else infer_dtype(value)


def _scalar_attr(value, dtype, what):
    """A Python/NumPy scalar (or constant scalar tensor) as a value of ``dtype``."""
    from ..framework.convert import convert_value
    if isinstance(value, Tensor):
        value = constant_value(value)
        if value is None:
            raise TypeError(f"one_hot: {what} must be a constant here")
    if np.ndim(value) != 0:
        raise ValueError(f"one_hot: {what} must be a scalar, got shape {np.shape(value)}")
    return convert_value(value, dtype)


def where(condition, x=None, y=None, name=None) -> Tensor:
    """Elementwise ``x if condition else y`` (broadcasting); with only ``condition``, the
    int64 coordinates of its true elements."""
    condition = convert_to_tensor(condition)
    g = get_default_graph()
    if x is None and y is None:
        return g.create_op("Where", [condition], name=name or "Where").outputs[0]
    if x is None or y is None:
        raise ValueError("x and y must both be given, or neither")
    from .math_ops import binary_operands
    x, y = binary_operands(x, y, "SelectV2")
    return g.create_op("SelectV2", [condition, x, y], name=name or "Select").outputs[0]


where_v2 = where


def _slice_item(item, tensors):
    if isinstance(item, Tensor):
        if not item.dtype.is_integer or item.shape.ndims not in (0, None):
            raise TypeError(f"Only scalar integer tensors can index a tensor, got {item!r}")
        tensors.append(item)
        return ("tensor_int", len(tensors))
    if item is Ellipsis:
        return ("ellipsis",)
    if item is None:
        return ("newaxis",)
    if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
        return ("int", int(item))
    if isinstance(item, slice):
        parts = (item.start, item.stop, item.step)
        if any(isinstance(p, Tensor) for p in parts):
            refs = []
            for p in parts:
                if isinstance(p, Tensor):
                    tensors.append(p)
                    refs.append(("t", len(tensors)))
                else:
                    refs.append(("c", p))
            return ("tensor_slice", *refs)
        if any(p is not None and not isinstance(p, (int, np.integer)) for p in parts):
            raise TypeError(f"Slice bounds must be ints, None or scalar tensors: {item!r}")
        return ("slice", *(None if p is None else int(p) for p in parts))
    raise TypeError(f"Only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and "
                    f"scalar int32/int64 tensors are valid indices, got {item!r}")


def strided_slice_item(tensor, key) -> Tensor:
    """``tensor[key]`` for basic indexing (ints, slices, ..., None, scalar int tensors)."""
    tensor = convert_to_tensor(tensor)
    items = key if isinstance(key, tuple) else (key,)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise ValueError("An index can only have a single ellipsis ('...')")
    extra: list[Tensor] = []
    spec = tuple(_slice_item(i, extra) for i in items)
    return get_default_graph().create_op("StridedSlice", [tensor, *extra], {"spec": spec},
                                         name="strided_slice").outputs[0]
