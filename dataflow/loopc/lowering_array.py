"""Lowerings of the array and NN ops, registered into :data:`.lowering.LOWERINGS`.

Softmax, LogSoftmax, the dense and sparse softmax cross-entropies, Transpose, Slice,
StridedSlice and its gradient StridedSliceGrad, GatherGrad (axis 0), SumToShape, BroadcastTo, ExpandDims, Size, Fill, Pow, float
FloorDiv/FloorMod and Cast (float -> int included). Each follows the reference kernel
exactly (see :mod:`.lowering` for the rules) but Pow, which is libm's pow, within 1 ulp
of NumPy's (its AVX-512 loop is not libm's); where the
kernel raises (a label or index out of range, an integer to a negative power, a slice
past the end) or leaves the value to the platform (a float -> int cast out of range),
the compiled code raises ``Fallback`` and the frame re-runs interpreted. The softmax
family calls the interpreter's own compiled kernels (:mod:`.nbhelpers_array`), so its
values are the interpreter's, within the documented bounds of the NumPy kernels.

>>> sorted(t for t in ("Softmax", "StridedSlice", "Transpose") if t in LOWERINGS)
['Softmax', 'StridedSlice', 'Transpose']
"""
from __future__ import annotations

import numpy as np

from .lowering import (LOWERINGS, _dtype_name, _elementwise, _elementwise_check,
                       register_lowering)

__all__ = ["LOWERINGS", "float_to_int_bounds"]

_FLOATS = ("float32", "float64")


def _rank(t):
    return t.shape.ndims


def _float_rank_check(*tensors):
    for t in tensors:
        dt = _dtype_name(t)
        if dt not in _FLOATS:
            return f"{dt} (the compiled kernels take float32 and float64)"
        if _rank(t) in (None, 0):
            return "an input of unknown rank or a scalar"
    return None


# -- softmax and cross-entropy ----------------------------------------------------------------

@register_lowering("Softmax", "LogSoftmax", check=lambda op: _float_rank_check(op._inputs[0]))
def _softmax(e):
    fn = "softmax_nd" if e.op.type == "Softmax" else "log_softmax_nd"
    return [f"{fn}({e.args[0]})"]


def _xent_check(op):
    logits, labels = op._inputs
    why = _float_rank_check(logits, labels)
    if why:
        return why
    if _rank(logits) != _rank(labels) or _dtype_name(logits) != _dtype_name(labels):
        return "logits and labels of different ranks or dtypes"
    return None


@register_lowering("SoftmaxCrossEntropyWithLogits", check=_xent_check)
def _xent(e):
    pair = e.gen.fresh("t")
    e.line(f"{pair} = xent_nd({e.args[0]}, {e.args[1]})")
    return [f"{pair}[0]", f"{pair}[1]"]


def _sparse_xent_check(op):
    logits, labels = op._inputs
    why = _float_rank_check(logits)
    if why:
        return why
    if _dtype_name(labels) not in ("int32", "int64"):
        return f"labels of dtype {_dtype_name(labels)}"
    if _rank(labels) is None:
        return "labels of unknown rank"
    return None


@register_lowering("SparseSoftmaxCrossEntropyWithLogits", check=_sparse_xent_check)
def _sparse_xent(e):
    pair = e.gen.fresh("t")
    e.line(f"{pair} = sparse_xent_nd({e.args[0]}, {e.args[1]})")
    return [f"{pair}[0]", f"{pair}[1]"]


# -- Transpose, Slice, StridedSlice -----------------------------------------------------------

def _known_rank_check(op):
    x = op._inputs[0]
    if _dtype_name(x) is None:
        return "non-numeric dtype"
    if _rank(x) in (None, 0):
        return "an input of unknown rank or a scalar"
    return None


@register_lowering("Transpose", check=_known_rank_check)
def _transpose(e):
    perm = e.op.get_attr("perm")
    perm = tuple(range(_rank(e.op._inputs[0]))[::-1]) if perm is None else \
        tuple(int(p) for p in perm)
    # A copy in C order: a transposed view would give the loop values two layouts.
    return [f"np.ascontiguousarray(np.transpose({e.args[0]}, {perm!r}))"]


@register_lowering("Slice", check=_known_rank_check)
def _slice(e):
    x, begin, size = e.args
    rank = _rank(e.op._inputs[0])
    e.line(f"if np.asarray({begin}).size != {rank} or np.asarray({size}).size != {rank}: "
           "raise Fallback()")
    bounds = []
    for k in range(rank):
        b, s = e.gen.fresh("b"), e.gen.fresh("s")
        e.line(f"{b} = np.int64(np.asarray({begin}).ravel()[{k}])")
        e.line(f"{s} = np.int64(np.asarray({size}).ravel()[{k}])")
        e.line(f"if {s} == -1: {s} = {x}.shape[{k}] - {b}")
        e.line(f"if {b} < 0 or {s} < 0 or {b} + {s} > {x}.shape[{k}]: raise Fallback()")
        bounds.append(f"{b}:{b} + {s}")
    return [f"{x}[{', '.join(bounds)}].copy()"]


_CONSUMING = ("int", "slice", "tensor_int", "tensor_slice")


def _strided_slice_check(op):
    why = _known_rank_check(op)
    if why:
        return why
    for item in op.get_attr("spec"):
        if item[0] == "slice" and item[3] == 0:
            return "a slice step of 0"
    return None


def _slice_part(value):
    return "" if value is None else str(value)


def _strided_key(e, x, rank, spec, extra):
    """The basic-indexing key of a StridedSlice ``spec`` into ``x`` (of ``rank``) as
    generated code; emits the range checks NumPy makes (Numba would read past the end)."""
    n_real = sum(1 for item in spec if item[0] in _CONSUMING)
    parts, axis = [], 0
    for item in spec:
        kind = item[0]
        if kind == "ellipsis":
            parts.append("...")
            axis += rank - n_real
        elif kind == "newaxis":
            parts.append("None")
        elif kind in ("int", "tensor_int"):
            i = str(item[1]) if kind == "int" else f"np.int64({extra[item[1] - 1]})"
            e.line(f"if not (-{x}.shape[{axis}] <= {i} < {x}.shape[{axis}]): "
                   "raise Fallback()")
            parts.append(i)
            axis += 1
        elif kind == "slice":
            parts.append(":".join(_slice_part(p) for p in item[1:]))
            axis += 1
        else:   # tensor_slice: each bound a tensor ("t", k) or a constant ("c", value)
            bounds = [f"np.int64({extra[r[1] - 1]})" if r[0] == "t" else _slice_part(r[1])
                      for r in item[1:]]
            if item[3][0] == "t":
                e.line(f"if {bounds[2]} == 0: raise Fallback()")
            parts.append(":".join(bounds))
            axis += 1
    return ", ".join(parts) + ("," if len(parts) == 1 else "")


@register_lowering("StridedSlice", check=_strided_slice_check)
def _strided_slice(e):
    x, extra = e.args[0], e.args[1:]
    value = f"{x}[{_strided_key(e, x, _rank(e.op._inputs[0]), e.op.get_attr('spec'), extra)}]"
    if _rank(e.op._outputs[0]) == 0:
        return [value]
    # A copy in C order, as for Transpose (the kernel's view holds the same values).
    return [f"np.ascontiguousarray({value})"]


def _strided_slice_grad_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    if _target_rank(op) in (None, 0) or _rank(op._inputs[0]) is None:
        return "a gradient or target shape of unknown rank, or a scalar target"
    for item in op.get_attr("spec"):
        if item[0] == "slice" and item[3] == 0:
            return "a slice step of 0"
    return None


@register_lowering("StridedSliceGrad", check=_strided_slice_grad_check)
def _strided_slice_grad(e):
    """Zeros of the target shape with the gradient written at the key (the kernel's
    ``out[key] = grad``: basic indexing selects each element once); a gradient of
    another shape than the key selects raises in the compiled code, which hands back."""
    g, shape, extra = e.args[0], e.args[1], e.args[2:]
    n = _target_rank(e.op)
    dims = ", ".join(f"np.int64(np.asarray({shape}).ravel()[{k}])" for k in range(n))
    out = e.gen.fresh("t")
    e.line(f"{out} = np.zeros(({dims},), np.{e.dtype(0)})")
    key = _strided_key(e, out, n, e.op.get_attr("spec"), extra)
    e.line(f"{out}[{key}] = {g}")
    return [out]


def _gather_grad_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    n = _target_rank(op, 2)
    if n in (None, 0) or _rank(op._inputs[1]) is None:
        return "params or indices of unknown rank"
    if op.get_attr("axis") % n != 0:
        return f"GatherGrad on axis {op.get_attr('axis')} is not lowered"
    return None


@register_lowering("GatherGrad", check=_gather_grad_check)
def _gather_grad(e):
    """Zeros of the params' shape with each gradient row added at its index, in order
    (``np.add.at``: repeated indices add up one after another, negative ones wrap)."""
    g, idx, shape = e.args
    n = _target_rank(e.op, 2)
    dims = ", ".join(f"np.int64(np.asarray({shape}).ravel()[{k}])" for k in range(n))
    out = e.gen.fresh("t")
    e.line(f"{out} = np.zeros(({dims},), np.{e.dtype(0)})")
    e.line(f"gather_grad0({g}, {idx}, {out})")
    return [out]


# -- SumToShape (the gradient of a broadcast) ----------------------------------------------------

def _target_rank(op, k=1):
    dims = op._inputs[k].shape
    if dims.ndims != 1 or dims.as_list()[0] is None:
        return None
    return dims.as_list()[0]


def _sum_to_shape_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    grank, n = _rank(op._inputs[0]), _target_rank(op)
    if grank is None or n is None:
        return "a gradient or target shape of unknown rank"
    if n == grank or n == 0 or (grank == 2 and n == 1):
        return None
    return f"summing a rank-{grank} gradient to rank {n} is not lowered"


@register_lowering("SumToShape", check=_sum_to_shape_check)
def _sum_to_shape(e):
    """The three shapes a loop's broadcasts give: the same shape (no sum), a scalar
    (every element, in NumPy's order) and a row vector of a matrix (the first axis,
    in NumPy's order); any other run-time target hands the frame back."""
    g, shape = e.args
    grank, n, out = _rank(e.op._inputs[0]), _target_rank(e.op), e.dtype(0)
    if n == 0:
        return [g] if grank == 0 else [f"cst(psum({g}), {out!r})"]
    target = [f"np.int64(np.asarray({shape}).ravel()[{k}])" for k in range(n)]
    if n == grank == 2 and _may_keep_a_summed_axis(e.op):
        return [_sum_matrix_to(e, g, target, out)]
    if n == grank:
        for k, d in enumerate(target):
            e.line(f"if {g}.shape[{k}] != {d}: raise Fallback()")
        return [g]
    e.line(f"if {g}.shape[1] != {target[0]}: raise Fallback()")
    return [f"cst(axis_sum({g}, 0), {out!r})"]


def _may_keep_a_summed_axis(op):
    """Whether the target may be a row (1, n) or a column (n, 1) of the matrix gradient
    (a broadcast that kept its rank), as far as the static shapes tell."""
    g, target = op._inputs[0].shape.as_list(), op._outputs[0].shape
    if target.ndims != 2:
        return True
    return any(t is None or (t == 1 and d != 1) for d, t in zip(g, target.as_list()))


def _sum_matrix_to(e, g, target, out):
    """A matrix gradient summed to the same shape, to a row or to a column, as the
    kernel's ``np.sum`` over the broadcast axis (NumPy's order: :func:`axis_sum`)."""
    d0, d1 = (e.gen.fresh("d") for _ in range(2))
    result = e.gen.fresh("t")
    e.line(f"{d0} = {target[0]}")
    e.line(f"{d1} = {target[1]}")
    e.line(f"if {g}.shape[0] == {d0} and {g}.shape[1] == {d1}: "
           f"{result} = np.ascontiguousarray({g})")
    e.line(f"elif {d0} == 1 and {g}.shape[1] == {d1}: "
           f"{result} = np.ascontiguousarray(cst(axis_sum({g}, 0), {out!r})).reshape((1, {d1}))")
    e.line(f"elif {d1} == 1 and {g}.shape[0] == {d0}: "
           f"{result} = np.ascontiguousarray(cst(axis_sum({g}, 1), {out!r})).reshape(({d0}, 1))")
    e.line("else: raise Fallback()")
    return result


def _broadcast_to_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    if _rank(op._inputs[0]) is None or _target_rank(op) is None:
        return "an input or target shape of unknown rank"
    return None


@register_lowering("BroadcastTo", check=_broadcast_to_check)
def _broadcast_to(e):
    """A new array of the target shape (the kernel's copy); shapes that do not broadcast
    raise in the compiled code, which hands the frame back."""
    x, shape = e.args
    n = _target_rank(e.op)
    if n == 0:
        return [x]
    dims = ", ".join(f"np.int64(np.asarray({shape}).ravel()[{k}])" for k in range(n))
    out = e.gen.fresh("t")
    e.line(f"{out} = np.empty(({dims},), np.{e.dtype(0)})")
    e.line(f"{out}[...] = {x}")
    return [out]


# -- ExpandDims, Size, Fill --------------------------------------------------------------------

@register_lowering("ExpandDims", check=lambda op: "non-numeric dtype or unknown rank"
                   if _dtype_name(op._inputs[0]) is None or _rank(op._inputs[0]) is None
                   else None)
def _expand_dims(e):
    x, rank = e.args[0], _rank(e.op._inputs[0])
    axis = int(e.op.get_attr("axis"))
    axis = axis + rank + 1 if axis < 0 else axis
    if rank == 0:
        return [f"np.full(1, {x}, np.{e.dtype(0)})"]
    dims = [f"{x}.shape[{k}]" for k in range(rank)]
    dims.insert(axis, "1")
    return [f"np.ascontiguousarray({x}).reshape(({', '.join(dims)},))"]


@register_lowering("Size", check=lambda op: None if _dtype_name(op._inputs[0]) else
                   "non-numeric dtype")
def _size(e):
    return [f"np.{e.dtype(0)}(np.asarray({e.args[0]}).size)"]


def _fill_check(op):
    if _dtype_name(op._outputs[0]) is None:
        return "non-numeric dtype"
    if _rank(op._inputs[1]) != 0 or _static_dims(op._inputs[0]) is None:
        return "a non-scalar value or dims of unknown length"
    return None


def _static_dims(t):
    if t.shape.ndims == 0:
        return 0
    if t.shape.ndims != 1 or t.shape.as_list()[0] is None:
        return None
    return t.shape.as_list()[0]


@register_lowering("Fill", check=_fill_check)
def _fill(e):
    dims, value = e.args
    n = _static_dims(e.op._inputs[0])
    if n == 0:
        return [f"cst({value}, {e.dtype(0)!r})"]
    shape = ", ".join(f"np.int64(np.asarray({dims}).ravel()[{k}])" for k in range(n))
    return [f"np.full(({shape},), {value}, np.{e.dtype(0)})"]


# -- Pow, float FloorDiv / FloorMod -----------------------------------------------------------

def _binary_same_dtype(op):
    names = {_dtype_name(t) for t in list(op._inputs) + list(op._outputs)}
    if None in names or len(names) != 1:
        return "non-numeric or mixed dtypes"
    dt = names.pop()
    if dt == "float16":
        return "float16 is not lowered"
    return dt


@register_lowering("Pow", check=lambda op: None if _binary_same_dtype(op) in
                   ("float32", "float64", "int8", "int16", "int32", "int64", "uint8")
                   else f"Pow on {_binary_same_dtype(op)} is not lowered")
def _pow(e):
    x, y = e.args
    dt = e.dtype(0)
    if not dt.startswith("float"):
        e.line(f"check_pow_exponent({y})")   # NumPy refuses negative integer powers
    return [f"cst({x} ** {y}, {dt!r})"]


def _floor_check(op):
    if _binary_same_dtype(op) in _FLOATS:
        return None
    return _elementwise_check(op)


def _floor_ops(e):
    if e.dtype(0) not in _FLOATS:
        return _elementwise(e)
    fn = "floordiv_f" if e.op.type == "FloorDiv" else "floormod_f"
    return [f"cst({fn}({e.args[0]}, {e.args[1]}), {e.dtype(0)!r})"]


register_lowering("FloorDiv", "FloorMod", check=_floor_check)(_floor_ops)


# -- Cast ---------------------------------------------------------------------------------------

def float_to_int_bounds(dtype) -> tuple:
    """``(lo, hi)``: float64 bounds such that a float ``v`` truncates into ``dtype`` exactly
    when ``lo < v < hi`` (the float nearest ``min - 1`` from below, ``max + 1`` from above).

    >>> float_to_int_bounds("int8"), float_to_int_bounds("uint8")
    ((-129.0, 128.0), (-1.0, 256.0))
    >>> float_to_int_bounds("int64") == (float(np.nextafter(-2.0**63, -np.inf)), 2.0**63)
    True
    """
    info = np.iinfo(dtype)
    lo, hi = float(int(info.min) - 1), float(int(info.max) + 1)
    if lo > int(info.min) - 1:
        lo = float(np.nextafter(lo, -np.inf))
    if hi < int(info.max) + 1:
        hi = float(np.nextafter(hi, np.inf))
    return lo, hi


def _cast_check(op):
    src, dst = _dtype_name(op._inputs[0]), _dtype_name(op._outputs[0])
    if None in (src, dst):
        return "non-numeric dtype"
    if "float16" in (src, dst):
        return "float16 is not lowered"
    return None


@register_lowering("Cast", check=_cast_check)
def _cast(e):
    src, dst = e.in_dtype(0), e.dtype(0)
    if src.startswith("float") and np.dtype(dst).kind in "iu":
        lo, hi = float_to_int_bounds(dst)
        e.line(f"check_float_to_int({e.args[0]}, {lo!r}, {hi!r})")
    return [f"cst({e.args[0]}, {dst!r})"]
