"""More array ops under TF1's names: argmax/argmin, slice, split, unstack, pad, gather_nd,
scatter_nd, boolean_mask, reverse, range, linspace, cumsum, top_k, in_top_k.

Axes, ``k`` and split sizes are static attributes here (TF1 programs pass Python ints or
constants; a constant tensor is accepted too). Slice bounds, paddings and range bounds
are tensors, so they may be computed at run time.

>>> x = df.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
>>> i = argmax(x, axis=1)
>>> top, where_ = top_k(x, k=2)
>>> p = pad(x, [[1, 1], [0, 0]], mode="REFLECT")
>>> with df.Session() as sess:
...     sess.run(i)
...     sess.run(top)
...     sess.run(where_)
...     sess.run(p)
array([1, 0])
array([[5., 2.],
       [7., 3.]], dtype=float32)
array([[1, 2],
       [0, 2]], dtype=int32)
array([[7., 0., 3.],
       [1., 5., 2.],
       [7., 0., 3.],
       [1., 5., 2.]], dtype=float32)
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import constant_value, convert_to_tensor
from ..framework.graph import Tensor, get_default_graph, name_scope
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import shape_fns
from .array_ops import shape_from_tensor

__all__ = ["argmax", "argmin", "slice", "split", "unstack", "pad", "gather_nd", "scatter_nd",
           "boolean_mask", "reverse", "reverse_v2", "range", "linspace", "lin_space", "cumsum",
           "top_k", "in_top_k"]


def _static_int(value, what, op_name):
    """A Python int from an int, a NumPy integer or a constant scalar tensor."""
    if isinstance(value, Tensor):
        v = constant_value(value)
        if v is None:
            raise TypeError(f"{op_name}: {what} must be a Python int or a constant here (a "
                            "static attribute), not a computed Tensor")
        value = v
    if np.ndim(value) != 0:
        raise ValueError(f"{op_name}: {what} must be a scalar, got {value!r}")
    return int(value)


def _check_axis(axis, ndims, op):
    if ndims is not None and not -ndims <= axis < ndims:
        raise ValueError(f"{op.type} '{op.name}': axis {axis} is out of range for a tensor "
                         f"of rank {ndims} (expected in [{-ndims}, {ndims}))")
    return axis if ndims is None else axis % ndims


# -- ArgMax / ArgMin -----------------------------------------------------------------------------

def _arg_infer(op):
    x = op.inputs[0]
    if not x.dtype.is_numeric:
        raise TypeError(f"{op.type} '{op.name}': input must be numeric, got {x.dtype.name}")
    if x.shape.ndims == 0:
        raise ValueError(f"{op.type} '{op.name}': input must have at least one dimension")
    axis = _check_axis(op.get_attr("axis"), x.shape.ndims, op)
    if x.shape.ndims is None:
        return [(op.get_attr("output_type"), TensorShape(None))]
    dims = x.shape.as_list()
    return [(op.get_attr("output_type"), TensorShape(dims[:axis] + dims[axis + 1:]))]


for _t in ("ArgMax", "ArgMin"):
    register_op(_t)(_arg_infer)


def _arg(op_type, input, axis, name, dimension, output_type):  # noqa: A002
    if axis is not None and dimension is not None:
        raise ValueError("Cannot specify both 'axis' and 'dimension'")
    axis = dimension if axis is None else axis
    axis = 0 if axis is None else _static_int(axis, "axis", op_type)
    output_type = _dtypes.as_dtype(output_type)
    if output_type not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"{op_type}: output_type must be int32 or int64, got {output_type.name}")
    x = convert_to_tensor(input)
    return get_default_graph().create_op(op_type, [x], {"axis": axis, "output_type": output_type},
                                         name=name or op_type).outputs[0]


def argmax(input, axis=None, name=None, dimension=None, output_type=_dtypes.int64):  # noqa: A002
    """Index of the largest value along ``axis`` (0 when None); ties give the first index.

    >>> df.Session().run(argmax(df.constant([[1, 9], [8, 2]]), axis=1))
    array([1, 0])
    """
    return _arg("ArgMax", input, axis, name, dimension, output_type)


def argmin(input, axis=None, name=None, dimension=None, output_type=_dtypes.int64):  # noqa: A002
    """Index of the smallest value along ``axis`` (0 when None); ties give the first index.

    >>> df.Session().run(argmin(df.constant([3, 1, 2])))
    np.int64(1)
    """
    return _arg("ArgMin", input, axis, name, dimension, output_type)


# -- Slice -----------------------------------------------------------------------------------

def _const_ints(t):
    v = constant_value(t)
    return None if v is None else [int(d) for d in np.ravel(v)]


@register_op("Slice")
def _slice_infer(op):
    x, begin, size = op.inputs
    for t, what in ((begin, "begin"), (size, "size")):
        if not t.dtype.is_integer:
            raise TypeError(f"Slice '{op.name}': {what} must be int32 or int64, got "
                            f"{t.dtype.name}")
        if t.shape.ndims not in (None, 1):
            raise ValueError(f"Slice '{op.name}': {what} must be a vector, got shape {t.shape}")
    n = begin.shape[0] if begin.shape.ndims == 1 else None
    n = size.shape[0] if n is None and size.shape.ndims == 1 else n
    rank = x.shape.ndims
    for t, what in ((begin, "begin"), (size, "size")):
        if rank is not None and t.shape.ndims == 1 and t.shape[0] not in (None, rank):
            raise ValueError(f"Slice '{op.name}': {what} has {t.shape[0]} entries for a tensor "
                             f"of rank {rank}")
    rank = n if rank is None else rank
    if rank is None:
        return [(x.dtype, TensorShape(None))]
    b, s = _const_ints(begin), _const_ints(size)
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank
    out = []
    for i in builtins_range(rank):
        bi = None if b is None else b[i]
        si = None if s is None else s[i]
        di = dims[i]
        # Bounds that do not fit are left to the kernel's InvalidArgumentError (TF
        # raises at run time too, even for constant bounds).
        fits = bi is None or di is None or 0 <= bi <= di and (si is None or si == -1
                                                              or 0 <= si <= di - bi)
        if not fits:
            out.append(None)
        elif si is not None and si != -1:
            out.append(si)
        elif si == -1 and bi is not None and di is not None:
            out.append(di - bi)
        else:
            out.append(None)
    return [(x.dtype, TensorShape(out))]


def _int_vector(v):
    """A 1-D int tensor from a tensor, a list of ints, or a list mixing ints and scalar
    tensors (stacked, as TF's automatic packing)."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (list, tuple)) and any(isinstance(e, Tensor) for e in v):
        from .array_ops import stack
        return stack([_cast(convert_to_tensor(e, dtype=_dtypes.int32)
                            if not isinstance(e, Tensor) else e, _dtypes.int32) for e in v])
    return convert_to_tensor(np.asarray(v, dtype=np.int32).reshape(-1))


def slice(input_, begin, size, name=None):  # noqa: A001 - TF's name
    """The block of ``input_`` starting at ``begin`` of extent ``size`` (-1: to the end).

    >>> df.Session().run(slice(df.constant([[1, 2, 3], [4, 5, 6]]), [0, 1], [2, -1]))
    array([[2, 3],
           [5, 6]], dtype=int32)
    """
    x = convert_to_tensor(input_)
    b, s = _int_vector(begin), _int_vector(size)
    if b.dtype is not s.dtype:
        s = _cast(s, b.dtype)
    return get_default_graph().create_op("Slice", [x, b, s], name=name or "Slice").outputs[0]


def _cast(t, dtype):
    from .math_ops import cast
    return cast(t, dtype)


# -- Split / SplitV / Unpack ------------------------------------------------------------------

@register_op("SplitV")
def _split_infer(op):
    x = op.inputs[0]
    sizes = list(op.get_attr("size_splits"))
    axis = _check_axis(op.get_attr("axis"), x.shape.ndims, op)
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))] * len(sizes)
    dims = x.shape.as_list()
    d = dims[axis]
    if sizes.count(-1) > 1:
        raise ValueError(f"split '{op.name}': at most one size may be -1, got {sizes}")
    if op.get_attr("even") and d is not None and d % len(sizes):
        raise ValueError(f"Dimension size must be evenly divisible by {len(sizes)} but is {d} "
                         f"for '{op.name}' (op: Split)")
    if d is not None:
        known = sum(s for s in sizes if s != -1)
        if -1 in sizes:
            if known > d:
                raise ValueError(f"split '{op.name}': sizes {sizes} exceed dimension {d}")
            sizes = [d - known if s == -1 else s for s in sizes]
        elif known != d:
            raise ValueError(f"Determined shape must either match input shape along split_dim "
                             f"exactly if fully specified, or be less than the size of the "
                             f"input along split_dim if not fully specified. Got: {known} vs "
                             f"{d} (op '{op.name}')")
    out = []
    for s in sizes:
        dd = list(dims)
        dd[axis] = None if s == -1 else s
        out.append((x.dtype, TensorShape(dd)))
    return out


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Split ``value`` along ``axis`` into equal parts (an int) or parts of the given sizes
    (a list; one size may be -1). Returns a list of tensors.

    >>> a, b = split(df.constant([[1, 2, 3, 4]]), 2, axis=1)
    >>> df.Session().run([a, b])
    [array([[1, 2]], dtype=int32), array([[3, 4]], dtype=int32)]
    """
    x = convert_to_tensor(value)
    axis = _static_int(axis, "axis", "split")
    rank = x.shape.ndims
    if rank is not None and not -rank <= axis < rank:
        raise ValueError(f"split: axis {axis} is out of range for a tensor of rank {rank}")
    splits = num_or_size_splits
    if isinstance(splits, Tensor):
        v = constant_value(splits)
        if v is None:
            raise TypeError("split: num_or_size_splits must be an int, a list or a constant")
        splits = v
    if np.ndim(splits) == 0:
        n = int(splits)
        if n <= 0:
            raise ValueError(f"split: num_split must be positive, got {n}")
        d = None if rank is None else x.shape[axis]
        sizes = [d // n if d is not None else -1] * n
        even = True
        if d is None:
            return _split_unknown(x, n, axis, name)
    else:
        sizes = [int(s) for s in np.ravel(splits)]
        if num is not None and int(num) != len(sizes):
            raise ValueError(f"split: num={num} but {len(sizes)} sizes given")
        even = False
    op = get_default_graph().create_op("SplitV", [x], {"size_splits": tuple(sizes),
                                                      "axis": axis, "even": even}, name=name)
    return list(op.outputs)


def _split_unknown(x, n, axis, name):
    """Equal parts of a dimension unknown until run time."""
    op = get_default_graph().create_op("Split", [x], {"num_split": n, "axis": axis}, name=name)
    return list(op.outputs)


@register_op("Split")
def _split_even_infer(op):
    x = op.inputs[0]
    n = op.get_attr("num_split")
    axis = _check_axis(op.get_attr("axis"), x.shape.ndims, op)
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))] * n
    dims = x.shape.as_list()
    if dims[axis] is not None:
        if dims[axis] % n:
            raise ValueError(f"Dimension size must be evenly divisible by {n} but is "
                             f"{dims[axis]} for '{op.name}' (op: Split)")
        dims[axis] //= n
    return [(x.dtype, TensorShape(dims))] * n


@register_op("Unpack")
def _unpack_infer(op):
    x = op.inputs[0]
    num, axis = op.get_attr("num"), op.get_attr("axis")
    axis = _check_axis(axis, x.shape.ndims, op)
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))] * num
    dims = x.shape.as_list()
    if dims[axis] is not None and dims[axis] != num:
        raise ValueError(f"unstack '{op.name}': num {num} does not match dimension {axis} of "
                         f"size {dims[axis]}")
    return [(x.dtype, TensorShape(dims[:axis] + dims[axis + 1:]))] * num


def unstack(value, num=None, axis=0, name="unstack"):
    """The rank-(R-1) slices of ``value`` along ``axis``, as a list.

    >>> a, b = unstack(df.constant([[1, 2], [3, 4]]))
    >>> df.Session().run([a, b])
    [array([1, 2], dtype=int32), array([3, 4], dtype=int32)]
    """
    x = convert_to_tensor(value)
    axis = int(axis)
    rank = x.shape.ndims
    if rank is not None and not -rank <= axis < rank:
        raise ValueError(f"axis = {axis} not in [{-rank}, {rank})")
    if num is None:
        if rank is None or x.shape[axis] is None:
            raise ValueError(f"Cannot infer num from shape {x.shape}")
        num = x.shape[axis]
    op = get_default_graph().create_op("Unpack", [x], {"num": int(num), "axis": axis}, name=name)
    return list(op.outputs)


# -- Pad ---------------------------------------------------------------------------------------

def _pad_infer(op):
    x, paddings = op.inputs[0], op.inputs[1]
    if not paddings.dtype.is_integer:
        raise TypeError(f"{op.type} '{op.name}': paddings must be int32 or int64, got "
                        f"{paddings.dtype.name}")
    ps = paddings.shape
    if ps.ndims not in (None, 2) or ps.ndims == 2 and ps[1] not in (None, 2):
        raise ValueError(f"{op.type} '{op.name}': paddings must be a matrix with 2 columns, "
                         f"got shape {ps}")
    rank = x.shape.ndims
    if rank is not None and ps.ndims == 2 and ps[0] not in (None, rank):
        raise ValueError(f"{op.type} '{op.name}': the first dimension of paddings must be the "
                         f"rank of inputs [{ps[0]},2] vs {rank}")
    if rank is None:
        rank = ps[0] if ps.ndims == 2 else None
        if rank is None:
            return [(x.dtype, TensorShape(None))]
    if op.type == "PadV2" and op.inputs[2].dtype is not x.dtype:
        raise TypeError(f"pad '{op.name}': constant_values must have the dtype of the tensor")
    p = constant_value(paddings)
    dims = x.shape.as_list() if x.shape.ndims is not None else [None] * rank
    if p is None:
        return [(x.dtype, TensorShape([None] * rank))]
    p = np.asarray(p).reshape(rank, 2)
    if (p < 0).any():
        raise ValueError(f"{op.type} '{op.name}': paddings must be non-negative, got "
                         f"{p.tolist()}")
    # MirrorPad's limit on paddings (below the dimension) is checked by the kernel:
    # TF raises InvalidArgumentError at run time, even for constant inputs.
    return [(x.dtype, TensorShape([None if d is None else d + int(a) + int(b)
                                   for d, (a, b) in zip(dims, p)]))]


register_op("PadV2")(_pad_infer)
register_op("MirrorPad")(_pad_infer)
register_op("MirrorPadGrad")(lambda op: [(op.inputs[0].dtype, _mirror_grad_shape(op))])


def _mirror_grad_shape(op):
    grad, paddings = op.inputs
    p = constant_value(paddings)
    if grad.shape.ndims is None or p is None:
        return TensorShape(None if grad.shape.ndims is None else [None] * grad.shape.ndims)
    return TensorShape([None if d is None else d - int(a) - int(b)
                        for d, (a, b) in zip(grad.shape.as_list(), np.asarray(p).reshape(-1, 2))])


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """Pad ``tensor`` with ``paddings[i] = [before, after]`` entries along dimension ``i``.

    ``mode`` is ``"CONSTANT"`` (``constant_values``), ``"REFLECT"`` (mirror without the
    edge) or ``"SYMMETRIC"`` (mirror with the edge), case-insensitive as in TF.

    >>> df.Session().run(pad(df.constant([[1, 2]]), [[0, 0], [2, 1]], "SYMMETRIC"))
    array([[2, 1, 1, 2, 2]], dtype=int32)
    """
    x = convert_to_tensor(tensor)
    p = paddings if isinstance(paddings, Tensor) else convert_to_tensor(
        np.asarray(paddings, dtype=np.int32).reshape(-1, 2))
    mode = str(mode).upper()
    g = get_default_graph()
    if mode == "CONSTANT":
        c = convert_to_tensor(constant_values, dtype=x.dtype)
        return g.create_op("PadV2", [x, p, c], name=name or "Pad").outputs[0]
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise ValueError(f"Unknown padding mode: {mode}")
    return g.create_op("MirrorPad", [x, p], {"mode": mode}, name=name or "MirrorPad").outputs[0]


def mirror_pad_grad(grad, paddings, mode, name=None):
    """The gradient of MirrorPad: ``grad`` with the mirrored borders added back in."""
    return get_default_graph().create_op("MirrorPadGrad", [grad, paddings], {"mode": mode},
                                         name=name or "MirrorPadGrad").outputs[0]


# -- GatherNd / ScatterNd -------------------------------------------------------------------------

@register_op("GatherNd")
def _gather_nd_infer(op):
    params, indices = op.inputs
    if not indices.dtype.is_integer:
        raise TypeError(f"GatherNd '{op.name}': indices must be int32 or int64, got "
                        f"{indices.dtype.name}")
    if indices.shape.ndims == 0:
        raise ValueError(f"GatherNd '{op.name}': indices must be at least a vector")
    if indices.shape.ndims is None or indices.shape[-1] is None or params.shape.ndims is None:
        return [(params.dtype, TensorShape(None))]
    k = indices.shape[-1]
    if k > params.shape.ndims:
        raise ValueError(f"GatherNd '{op.name}': index innermost dimension length must be <= "
                         f"params rank; saw: {k} vs. {params.shape.ndims}")
    return [(params.dtype, TensorShape(indices.shape.as_list()[:-1] +
                                       params.shape.as_list()[k:]))]


@register_op("ScatterNd")
def _scatter_nd_infer(op):
    indices, updates, shape = op.inputs
    if not indices.dtype.is_integer or not shape.dtype.is_integer:
        raise TypeError(f"ScatterNd '{op.name}': indices and shape must be integer tensors")
    out = shape_from_tensor(shape)
    if indices.shape.ndims not in (None, 0) and indices.shape[-1] is not None \
            and updates.shape.ndims is not None and out.ndims is not None:
        k = indices.shape[-1]
        want = indices.shape.as_list()[:-1] + out.as_list()[k:]
        if not updates.shape.is_compatible_with(want):
            raise ValueError(f"ScatterNd '{op.name}': updates has shape {updates.shape}, "
                             f"expected {TensorShape(want)} from indices {indices.shape} and "
                             f"shape {out}")
    return [(updates.dtype, out)]


def gather_nd(params, indices, name=None, batch_dims=0):
    """Slices of ``params`` at the index vectors in the last dimension of ``indices``.

    >>> df.Session().run(gather_nd(df.constant([[1, 2], [3, 4]]), [[1, 0], [0, 1]]))
    array([3, 2], dtype=int32)
    """
    if batch_dims != 0:
        raise ValueError("gather_nd: only batch_dims=0 is supported")
    params = convert_to_tensor(params)
    indices = convert_to_tensor(indices)
    return get_default_graph().create_op("GatherNd", [params, indices],
                                         name=name or "GatherNd").outputs[0]


def scatter_nd(indices, updates, shape, name=None):
    """Zeros of ``shape`` with ``updates`` added at ``indices`` (repeated indices sum).

    >>> df.Session().run(scatter_nd([[1], [3]], [9.0, 7.0], [5]))
    array([0., 9., 0., 7., 0.], dtype=float32)
    """
    indices = convert_to_tensor(indices)
    updates = convert_to_tensor(updates)
    shape = shape if isinstance(shape, Tensor) else convert_to_tensor(
        np.asarray(shape, dtype=indices.dtype.as_numpy_dtype))
    return get_default_graph().create_op("ScatterNd", [indices, updates, shape],
                                         name=name or "ScatterNd").outputs[0]


# -- boolean_mask (composed) -----------------------------------------------------------------------

def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """The entries of ``tensor`` where the boolean ``mask`` is true, mask dimensions flattened
    into one (starting at ``axis``), as TF1 composes it from reshape, where and gather.

    >>> df.Session().run(boolean_mask(df.constant([[1, 2], [3, 4]]), [True, False]))
    array([[1, 2]], dtype=int32)
    """
    from .array_ops import concat, gather, reshape, shape, squeeze, where
    from .math_ops import reduce_prod
    with name_scope(name):
        tensor = convert_to_tensor(tensor)
        mask = convert_to_tensor(mask)
        if not mask.dtype.is_bool:
            raise TypeError(f"boolean_mask: mask must be bool, got {mask.dtype.name}")
        k = mask.shape.ndims
        if k == 0:
            raise ValueError("mask cannot be scalar.")
        if k is None:
            raise ValueError("Number of mask dimensions must be specified, even if some "
                             "dimensions are None.  E.g. shape=[None] is ok, but shape=None "
                             "is not.")
        axis = 0 if axis is None else int(axis)
        ts = tensor.shape
        if ts.ndims is not None:
            if axis < 0:
                axis += ts.ndims
            if not ts[axis:axis + k].is_compatible_with(mask.shape):
                raise ValueError(f"Shapes {ts[axis:axis + k]} and {mask.shape} are incompatible")
        if ts.is_fully_defined():
            dims = ts.as_list()
            flat = dims[:axis] + [int(np.prod(dims[axis:axis + k], dtype=np.int64))] + \
                dims[axis + k:]
            tensor = reshape(tensor, flat)
        else:
            s = shape(tensor)
            lead = reduce_prod(s[axis:axis + k], axis=[0], keepdims=True)
            tensor = reshape(tensor, concat([s[:axis], lead, s[axis + k:]], 0))
            if ts.ndims is not None:
                tensor.set_shape(ts[:axis].as_list() + [ts[axis:axis + k].num_elements()] +
                                 ts[axis + k:].as_list())
        indices = squeeze(where(reshape(mask, [-1])), axis=[1])
        return gather(tensor, indices, axis=axis)


# -- ReverseV2 ------------------------------------------------------------------------------------

@register_op("ReverseV2")
def _reverse_infer(op):
    x = op.inputs[0]
    axes = op.get_attr("axis")
    rank = x.shape.ndims
    if rank is not None:
        norm = [_check_axis(a, rank, op) for a in axes]
        if len(set(norm)) != len(norm):
            raise ValueError(f"ReverseV2 '{op.name}': axis {list(axes)} repeats a dimension")
    return [(x.dtype, x.shape)]


def reverse(tensor, axis, name=None):
    """``tensor`` with the dimensions ``axis`` (a list of ints) reversed.

    >>> df.Session().run(reverse(df.constant([[1, 2], [3, 4]]), [1]))
    array([[2, 1],
           [4, 3]], dtype=int32)
    """
    x = convert_to_tensor(tensor)
    if isinstance(axis, Tensor):
        v = constant_value(axis)
        if v is None:
            raise TypeError("reverse: axis must be a list of ints or a constant")
        axis = v
    axes = tuple(int(a) for a in np.ravel(axis))
    return get_default_graph().create_op("ReverseV2", [x], {"axis": axes},
                                         name=name or "ReverseV2").outputs[0]


reverse_v2 = reverse


# -- Range / LinSpace ------------------------------------------------------------------------------

_RANGE_ORDER = [_dtypes.int32, _dtypes.int64, _dtypes.float32, _dtypes.float64]


@register_op("Range")
def _range_infer(op):
    start, limit, delta = op.inputs
    for t, what in ((start, "start"), (limit, "limit"), (delta, "delta")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"Range '{op.name}': {what} must be a scalar, got shape {t.shape}")
    values = [constant_value(t) for t in op.inputs]
    if any(v is None for v in values):
        return [(start.dtype, TensorShape([None]))]
    s, lim, d = (v.item() if hasattr(v, "item") else v for v in values)
    return [(start.dtype, TensorShape([range_length(s, lim, d, op)]))]


def range_length(start, limit, delta, op=None):
    """The number of elements of ``range(start, limit, delta)``; ValueError naming ``op``
    (an InvalidArgumentError at run time) for TF's invalid arguments."""
    where = f" (op '{op.name}')" if op is not None else ""
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}{where}")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}{where}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}{where}")
    if isinstance(start, (int, np.integer)) and isinstance(limit, (int, np.integer)) \
            and isinstance(delta, (int, np.integer)):
        return int((abs(limit - start) + abs(delta) - 1) // abs(delta))
    return int(np.ceil(abs((limit - start) / delta)))


def _range_dtype(values):
    """TF1's rule: the widest of the arguments' dtypes in int32 < int64 < float32 < float64
    (Python ints count as int32, Python floats as float32)."""
    from ..framework.convert import infer_dtype
    found = [v.dtype if isinstance(v, Tensor) else infer_dtype(v) for v in values]
    return max(found, key=lambda d: _RANGE_ORDER.index(d) if d in _RANGE_ORDER else -1)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001 - TF's name
    """``[start, start + delta, ...]`` up to, not including, ``limit`` (``range(n)``: 0..n-1).

    >>> df.Session().run(range(3, 18, 3))
    array([ 3,  6,  9, 12, 15], dtype=int32)
    """
    if limit is None:
        start, limit = 0, start
    with name_scope(name) as scope:
        if dtype is None:
            dtype = _range_dtype([start, limit, delta])
        dtype = _dtypes.as_dtype(dtype)
        if dtype not in _RANGE_ORDER:
            raise TypeError(f"range: dtype must be one of int32, int64, float32, float64, got "
                            f"{dtype.name}")
        args = []
        for v, what in ((start, "start"), (limit, "limit"), (delta, "delta")):
            t = convert_to_tensor(v, dtype=None if isinstance(v, Tensor) else dtype, name=what)
            args.append(_cast(t, dtype))
        return get_default_graph().create_op("Range", args, name=scope).outputs[0]


@register_op("LinSpace")
def _linspace_infer(op):
    start, stop, num = op.inputs
    if not start.dtype.is_floating or stop.dtype is not start.dtype:
        raise TypeError(f"LinSpace '{op.name}': start and stop must share one floating dtype")
    if not num.dtype.is_integer:
        raise TypeError(f"LinSpace '{op.name}': num must be int32 or int64")
    for t, what in ((start, "start"), (stop, "stop"), (num, "num")):
        if t.shape.ndims not in (None, 0):
            raise ValueError(f"LinSpace '{op.name}': {what} must be a scalar, got shape "
                             f"{t.shape}")
    n = constant_value(num)
    if n is not None and int(n) <= 0:
        raise ValueError(f"Requires num > 0: {int(n)} (op '{op.name}')")
    return [(start.dtype, TensorShape([None if n is None else int(n)]))]


def linspace(start, stop, num, name=None):
    """``num`` evenly spaced values from ``start`` to ``stop`` inclusive (float).

    >>> df.Session().run(linspace(10.0, 12.0, 3))
    array([10., 11., 12.], dtype=float32)
    """
    start = convert_to_tensor(start)
    stop = convert_to_tensor(stop, dtype=start.dtype if not isinstance(stop, Tensor) else None)
    num = convert_to_tensor(num) if isinstance(num, Tensor) else convert_to_tensor(
        np.int32(num))
    return get_default_graph().create_op("LinSpace", [start, stop, num],
                                         name=name or "LinSpace").outputs[0]


lin_space = linspace


# -- Cumsum ----------------------------------------------------------------------------------------

@register_op("Cumsum")
def _cumsum_infer(op):
    x = op.inputs[0]
    if not x.dtype.is_numeric:
        raise TypeError(f"Cumsum '{op.name}': input must be numeric, got {x.dtype.name}")
    if x.shape.ndims == 0:
        raise ValueError(f"Cumsum '{op.name}': input must have at least one dimension")
    _check_axis(op.get_attr("axis"), x.shape.ndims, op)
    return shape_fns.unchanged(op)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):  # noqa: A002
    """Running sums along ``axis``; ``exclusive`` leaves each element out of its own sum,
    ``reverse`` sums from the end.

    >>> df.Session().run(cumsum(df.constant([1, 2, 3]), exclusive=True))
    array([0, 1, 3], dtype=int32)
    """
    x = convert_to_tensor(x)
    attrs = {"axis": _static_int(axis, "axis", "cumsum"), "exclusive": bool(exclusive),
             "reverse": bool(reverse)}
    return get_default_graph().create_op("Cumsum", [x], attrs, name=name or "Cumsum").outputs[0]


# -- TopKV2 / InTopKV2 -----------------------------------------------------------------------------

@register_op("TopKV2")
def _top_k_infer(op):
    x = op.inputs[0]
    k = op.get_attr("k")
    if not x.dtype.is_numeric:
        raise TypeError(f"TopKV2 '{op.name}': input must be numeric, got {x.dtype.name}")
    if k < 0:
        raise ValueError(f"Need k >= 0, got {k} (op '{op.name}')")
    if x.shape.ndims == 0:
        raise ValueError(f"Shape must be at least rank 1 but is rank 0 for '{op.name}' "
                         "(op: TopKV2)")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None)), (_dtypes.int32, TensorShape(None))]
    dims = x.shape.as_list()
    if dims[-1] is not None and dims[-1] < k:
        raise ValueError(f"input must have at least k columns. Had {dims[-1]}, needed {k} "
                         f"(op '{op.name}')")
    out = TensorShape(dims[:-1] + [k])
    return [(x.dtype, out), (_dtypes.int32, out)]


TopKV2 = collections.namedtuple("TopKV2", ["values", "indices"])


def top_k(input, k=1, sorted=True, name=None):  # noqa: A002 - TF's names
    """The ``k`` largest entries of the last dimension and their indices (int32), as the
    named tuple ``(values, indices)``; equal values keep their order (lower index first).

    >>> values, indices = top_k(df.constant([1.0, 3.0, 2.0]), k=2)
    >>> df.Session().run([values, indices])
    [array([3., 2.], dtype=float32), array([1, 2], dtype=int32)]
    """
    x = convert_to_tensor(input)
    k = _static_int(k, "k", "top_k")
    op = get_default_graph().create_op("TopKV2", [x], {"k": k, "sorted": bool(sorted)},
                                       name=name or "TopKV2")
    return TopKV2(*op.outputs)


@register_op("InTopKV2")
def _in_top_k_infer(op):
    predictions, targets = op.inputs
    if predictions.dtype is not _dtypes.float32:
        raise TypeError(f"InTopKV2 '{op.name}': predictions must be float32, got "
                        f"{predictions.dtype.name}")
    if targets.dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"InTopKV2 '{op.name}': targets must be int32 or int64, got "
                        f"{targets.dtype.name}")
    if predictions.shape.ndims not in (None, 2):
        raise ValueError(f"Shape must be rank 2 but is rank {predictions.shape.ndims} for "
                         f"'{op.name}' (op: InTopKV2)")
    if targets.shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {targets.shape.ndims} for "
                         f"'{op.name}' (op: InTopKV2)")
    batch = predictions.shape[0] if predictions.shape.ndims == 2 else None
    tb = targets.shape[0] if targets.shape.ndims == 1 else None
    if batch is not None and tb is not None and batch != tb:
        raise ValueError(f"Dimensions must be equal, but are {batch} and {tb} for "
                         f"'{op.name}' (op: InTopKV2)")
    return [(_dtypes.bool, TensorShape([batch if batch is not None else tb]))]


def in_top_k(predictions, targets, k, name=None):
    """Whether each ``targets[i]`` is among the ``k`` largest of ``predictions[i]``: as TF,
    ties count in its favour (it is in if fewer than ``k`` entries are strictly larger), and
    a row with a non-finite prediction or an out-of-range target gives False.

    >>> df.Session().run(in_top_k(df.constant([[0.1, 0.9], [0.8, 0.2]]), [1, 1], 1))
    array([ True, False])
    """
    predictions = convert_to_tensor(predictions)
    targets = convert_to_tensor(targets)
    k = _static_int(k, "k", "in_top_k")
    return get_default_graph().create_op("InTopKV2", [predictions, targets], {"k": k},
                                         name=name or "in_top_k").outputs[0]


# ``range`` and ``slice`` shadow the builtins in this module.
import builtins as _builtins  # noqa: E402

builtins_range = _builtins.range
