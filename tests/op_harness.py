"""Shared harness of the op tests: build an op on constants or placeholders, run it."""
from __future__ import annotations

import numpy as np

import dataflow as df

# How an input reaches the op: a constant, or a placeholder with a full, partly
# unknown or unknown static shape (so shape inference is tested at every precision).
MODES = ["constant", "placeholder", "partial", "unknown"]


def make_input(value, mode):
    """A tensor for ``value`` (constant or placeholder per ``mode``) and its feed."""
    value = np.asarray(value)
    dtype = df.as_dtype(value.dtype)
    if mode == "constant":
        return df.constant(value, dtype=dtype), {}
    shape = {"placeholder": value.shape, "partial": [None] * value.ndim,
             "unknown": None}[mode]
    p = df.placeholder(dtype, shape=shape)
    return p, {p: value}


def run_op(build, values, input_modes):
    """Build ``build(*inputs)`` in a fresh graph and run it; returns (tensor(s), result).

    >>> out, value = run_op(lambda a: a * 2.0, [np.float32(3)], ["placeholder"])
    """
    with df.Graph().as_default():
        tensors, feed = [], {}
        for value, mode in zip(values, input_modes):
            t, f = make_input(value, mode)
            tensors.append(t)
            feed.update(f)
        out = build(*tensors)
        with df.Session() as sess:
            return out, sess.run(out, feed_dict=feed)


def ops_of_type(graph, op_type):
    """The operations of ``graph`` whose type is ``op_type``, in creation order."""
    return [op for op in graph.get_operations() if op.type == op_type]
