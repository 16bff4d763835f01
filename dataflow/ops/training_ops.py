"""Fused optimizer updates, as TF's ``ResourceApplyAdam``: one op updates a variable
and its slots, instead of a dozen elementwise ops per variable; and the ops of TF1's
sparse updates (an ``IndexedSlices`` gradient): ``ResourceScatterAdd``,
``ResourceSparseApplyMomentum``, and ``Unique`` / ``UnsortedSegmentSum``, which sum the
rows of repeated indices first."""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import shape_fns

register_op("ResourceApplyAdam", stateful=True)(shape_fns.no_outputs)


def resource_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                        name="ResourceApplyAdam"):
    """``m, v, var`` updated in place by one Adam step (TF1's formulas, see AdamOptimizer).

    ``var``, ``m`` and ``v`` are variable handles; the scalars are tensors of the
    variable's dtype.
    """
    inputs = [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad]
    return get_default_graph().create_op("ResourceApplyAdam", inputs, name=name)


# -- sparse updates (an IndexedSlices gradient: rows ``values`` at ``indices``) ----------------

@register_op("Unique")
def _unique_infer(op):
    x = op.inputs[0]
    return [(x.dtype, TensorShape([None])), (_dtypes.int32, x.shape)]


@register_op("UnsortedSegmentSum")
def _unsorted_segment_sum_infer(op):
    data, ids, num = op.inputs
    rows = num.op.get_attr("value") if num.op.type == "Const" else None
    if data.shape.ndims is None or ids.shape.ndims is None:
        return [(data.dtype, TensorShape(None))]
    tail = data.shape.as_list()[ids.shape.ndims:]
    return [(data.dtype, TensorShape([None if rows is None else int(rows)] + tail))]


register_op("ResourceScatterAdd", stateful=True)(shape_fns.no_outputs)
register_op("ResourceSparseApplyMomentum", stateful=True)(shape_fns.no_outputs)


def unique(x, name=None):
    """``(y, idx)``: the distinct values of 1-D ``x`` in order of first appearance, and
    for each element of ``x`` the index of its value in ``y`` (TF's ``unique``).

    >>> y, idx = unique(df.constant([4, 1, 4, 2]))
    >>> [v.tolist() for v in df.Session().run([y, idx])]
    [[4, 1, 2], [0, 1, 0, 2]]
    """
    op = get_default_graph().create_op("Unique", [convert_to_tensor(x)], name=name or "Unique")
    return op.outputs[0], op.outputs[1]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """Row ``i`` of the result is the sum of the rows of ``data`` whose ``segment_ids``
    are ``i`` (zeros where none are), as TF's ``unsorted_segment_sum``.

    >>> s = unsorted_segment_sum(df.constant([1.0, 2.0, 3.0]), [1, 0, 1], 3)
    >>> df.Session().run(s).tolist()
    [2.0, 4.0, 0.0]
    """
    inputs = [convert_to_tensor(data), convert_to_tensor(segment_ids),
              convert_to_tensor(num_segments)]
    return get_default_graph().create_op("UnsortedSegmentSum", inputs,
                                         name=name or "UnsortedSegmentSum").outputs[0]


def resource_scatter_add(resource, indices, updates, name="ResourceScatterAdd"):
    """Add the rows ``updates`` to the variable behind ``resource`` at ``indices``
    (repeated indices add up), in place."""
    inputs = [resource, convert_to_tensor(indices), convert_to_tensor(updates)]
    return get_default_graph().create_op("ResourceScatterAdd", inputs, name=name)


def resource_sparse_apply_momentum(var, accum, lr, grad, indices, momentum,
                                   use_nesterov=False, name="ResourceSparseApplyMomentum"):
    """TF's SparseApplyMomentum on variable handles: for the (distinct) rows ``indices``
    only, ``accum = accum * momentum + grad`` and ``var -= lr * accum`` (with Nesterov,
    ``var -= grad * lr + accum * momentum * lr``)."""
    inputs = [var, accum, lr, grad, indices, momentum]
    return get_default_graph().create_op("ResourceSparseApplyMomentum", inputs,
                                         {"use_nesterov": bool(use_nesterov)}, name=name)
