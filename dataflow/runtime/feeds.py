"""Feeds into a step and fetches out of it: checking ``feed_dict``, filling a plan's
input templates, and turning raw executor results into fetched values.

>>> import dataflow as df
>>> with df.Graph().as_default() as g:
...     x = df.placeholder(df.float32, [2])
>>> tensors, values = convert_feeds(g, {x: [1, 2]})
>>> values[0].dtype.name, tensors == [x]
('float32', True)
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..framework.convert import convert_value
from ..framework.graph import Tensor
from .executor import _NO_VALUE, DEAD

__all__ = ["convert_feeds", "feed_templates", "fetched_value"]


def convert_feeds(graph, feed_dict):
    """``(tensors, values)`` of ``feed_dict``: keys resolved to the graph's tensors,
    values converted to each tensor's dtype and checked against its shape."""
    if not feed_dict:
        return [], []
    tensors, values = [], []
    for key, value in feed_dict.items():
        try:
            t = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
        except (KeyError, ValueError, TypeError) as e:
            raise TypeError(f"Cannot interpret feed_dict key {key!r} as a Tensor: {e}") \
                from None
        if not isinstance(t, Tensor):
            raise TypeError(f"Cannot feed {key!r}: it is not a Tensor")
        if t.dtype.as_numpy_dtype is None:
            raise errors.InvalidArgumentError(None, t.op, f"Cannot feed '{t.name}' of "
                                              f"dtype {t.dtype.name}")
        if isinstance(value, Tensor):
            raise TypeError(f"The value of a feed cannot be a df.Tensor object (feeding "
                            f"'{t.name}'). Acceptable feed values include Python "
                            "scalars, strings, lists and NumPy arrays.")
        try:
            arr = convert_value(value, t.dtype)
        except (TypeError, ValueError) as e:
            raise errors.InvalidArgumentError(
                None, t.op, f"Cannot feed value {_short(value)} to '{t.name}' of dtype "
                f"{t.dtype.name}: {e}") from None
        if not t.shape.is_compatible_with(np.shape(arr)):
            raise errors.InvalidArgumentError(
                None, t.op, f"Cannot feed value of shape {np.shape(arr)} for Tensor "
                f"'{t.name}', which has shape '{t.shape}'")
        tensors.append(t)
        values.append(arr)
    return tensors, values


def feed_templates(plan, feed_values):
    """Per-frame input templates of ``plan`` with this step's feed values filled in
    (None when the plan reads no feed)."""
    if not plan.num_feeds:
        return None
    templates = {}
    for i, slots in enumerate(plan.feed_slots):
        for frame, slot in slots:
            tmpl = templates.get(frame)
            if tmpl is None:
                tmpl = templates[frame] = frame.inputs[:]
            tmpl[slot] = feed_values[i]
    return templates


def fetched_value(t, v, devices=None):
    """What ``run`` returns for fetch ``t`` whose raw result is ``v``: a NumPy scalar
    for a 0-d array, a copy of read-only storage (constants, variables), a host copy
    of a value left in the memory of one of ``devices`` (a
    :class:`~dataflow.runtime.device_set.DeviceSet`). A dead or missing value raises,
    naming the fetch."""
    if v is DEAD:
        raise errors.InvalidArgumentError(
            None, t.op, f"Retval of fetch '{t.name}' does not have a value: the tensor "
            "is dead (it is on an untaken branch of a Switch).")
    if v is _NO_VALUE:
        raise errors.InternalError(
            None, t.op, f"The step finished without computing fetch '{t.name}': some "
            "node never received all of its inputs (malformed control flow?)")
    if type(v) is np.ndarray:
        if v.ndim == 0:
            return v[()]
        if not v.flags.writeable:  # constants and variable storage: hand out a copy
            return v.copy()
        return v
    to_host = devices.fetch_to_host() if devices is not None else None
    return to_host(v) if to_host is not None else v


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
