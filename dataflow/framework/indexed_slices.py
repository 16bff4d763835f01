"""``IndexedSlices``: a sparse gradient, rows ``values`` at ``indices`` of a dense tensor.

The gradient of ``gather(params, indices)`` touches only the gathered rows of
``params``; TF1 represents it as ``IndexedSlices(values, indices, dense_shape)``:
row ``k`` of ``values`` belongs at row ``indices[k]`` of a tensor of shape
``dense_shape`` (repeated indices add up). Optimizers apply it as a sparse update;
``convert_to_tensor`` (every op that takes it as input) densifies it. Fetching one
with ``Session.run`` gives an :data:`IndexedSlicesValue`.

>>> params = df.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
>>> grad, = df.gradients(df.reduce_sum(df.gather(params, [2, 0, 2])), params)
>>> isinstance(grad, IndexedSlices)
True
>>> with df.Session() as sess:
...     value = sess.run(grad)
...     dense = sess.run(df.convert_to_tensor(grad))
>>> value.indices.tolist(), value.dense_shape.tolist()
([2, 0, 2], [3, 2])
>>> dense.tolist()
[[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
"""
from __future__ import annotations

import collections

from .tensor_shape import TensorShape

__all__ = ["IndexedSlices", "IndexedSlicesValue"]

#: What ``Session.run`` returns for a fetched :class:`IndexedSlices` (TF's named tuple).
IndexedSlicesValue = collections.namedtuple("IndexedSlicesValue",
                                            ["values", "indices", "dense_shape"])


class IndexedSlices:
    """Rows ``values`` at ``indices`` of a tensor of shape ``dense_shape`` (all Tensors).

    >>> v = df.constant([[1.0, 1.0]])
    >>> s = IndexedSlices(v, df.constant([1]), df.constant([3, 2]))
    >>> s.dtype.name, s.shape.as_list()
    ('float32', [3, 2])
    """

    def __init__(self, values, indices, dense_shape=None):
        self._values = values
        self._indices = indices
        self._dense_shape = dense_shape

    @property
    def values(self):
        """The rows: a Tensor of shape ``[len(indices)] + dense_shape[1:]``."""
        return self._values

    @property
    def indices(self):
        """The 1-D integer Tensor of row indices into the dense tensor."""
        return self._indices

    @property
    def dense_shape(self):
        """The 1-D integer Tensor with the dense tensor's shape (or None)."""
        return self._dense_shape

    @property
    def dtype(self):
        return self._values.dtype

    @property
    def graph(self):
        return self._values.graph

    @property
    def op(self):
        return self._values.op

    @property
    def name(self):
        return self._values.name

    @property
    def device(self):
        return self._values.device

    @property
    def shape(self) -> TensorShape:
        """The dense tensor's static shape: from ``dense_shape`` when it is a constant or
        the shape of a tensor, else the rows' shape with an unknown first dimension."""
        if self._dense_shape is not None and self._dense_shape.op.type == "Const":
            return TensorShape([int(d) for d in self._dense_shape.op.get_attr("value")])
        if self._dense_shape is not None and self._dense_shape.op.type == "Shape":
            return self._dense_shape.op.inputs[0].shape   # the shape of a gather's params
        rows = self._values.shape
        if rows.ndims is None:
            return TensorShape(None)
        return TensorShape([None] + rows.as_list()[1:])

    def __repr__(self):
        shape = "" if self._dense_shape is None else f", dense_shape={self._dense_shape!r}"
        return f"IndexedSlices(indices={self._indices!r}, values={self._values!r}{shape})"
