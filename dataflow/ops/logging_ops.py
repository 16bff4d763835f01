"""Debugging ops: ``Assert``, ``Print`` (TF1, identity that prints) and ``print``.

>>> x = df.placeholder(df.float32, [])
>>> check = Assert(x > 0, [x], name="x_positive")
>>> with df.control_dependencies([check]):
...     y = df.sqrt(x)
>>> float(df.Session().run(y, {x: 4.0}))
2.0
"""
from __future__ import annotations

import sys

from ..framework.convert import convert_to_tensor
from ..framework.graph import Operation, Tensor, get_default_graph
from ..framework.op_registry import register_op
from . import shape_fns

register_op("Assert", stateful=True)(shape_fns.no_outputs)
register_op("Print", stateful=True)(shape_fns.unchanged)
register_op("PrintV2", stateful=True)(shape_fns.no_outputs)


def Assert(condition, data, summarize=None, name=None) -> Operation:  # noqa: N802 - TF's name
    """An op that raises InvalidArgumentError with ``data`` when ``condition`` is false."""
    condition = convert_to_tensor(condition)
    if not condition.dtype.is_bool:
        raise TypeError(f"Assert: condition must be bool, got {condition.dtype.name}")
    data = [convert_to_tensor(d) for d in data]
    return get_default_graph().create_op("Assert", [condition, *data],
                                         {"summarize": summarize or 3},
                                         name=name or "Assert")


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):  # noqa: N802
    """Identity of ``input_`` that prints ``message`` and ``data`` to stderr when run."""
    input_ = convert_to_tensor(input_)
    data = [convert_to_tensor(d) for d in data]
    attrs = {"message": message or "", "first_n": first_n or -1, "summarize": summarize or 3}
    return get_default_graph().create_op("Print", [input_, *data], attrs,
                                         name=name or "Print").outputs[0]


class _StandardStream:
    """Writes to ``sys.<name>`` as it is when the op runs, not when the graph was built.

    ``tf.print`` resolves ``sys.stderr`` at call time and its kernel writes to the
    process's standard stream; binding the stream object when ``print_`` is defined
    would keep writing to whatever ``sys.stderr`` was at import (a stale capture
    buffer under pytest, a closed file after a redirect).
    """

    def __init__(self, name):
        self.name = name

    def write(self, text):
        return getattr(sys, self.name).write(text)

    def flush(self):
        getattr(sys, self.name).flush()

    def __repr__(self):
        return f"<sys.{self.name}>"


_STANDARD_STREAMS = {"stderr": _StandardStream("stderr"), "stdout": _StandardStream("stdout")}


def _resolve_stream(stream):
    """A stream object for ``output_stream``: sys.stderr/stdout (or their names) follow
    later redirections; any other file-like object is used as given."""
    if stream is None:
        return _STANDARD_STREAMS["stderr"]
    if isinstance(stream, str):
        if stream not in _STANDARD_STREAMS:
            raise ValueError(f"print: unsupported output_stream {stream!r}; use sys.stderr, "
                             "sys.stdout, 'stderr', 'stdout' or a file-like object")
        return _STANDARD_STREAMS[stream]
    for name in _STANDARD_STREAMS:
        if stream is getattr(sys, name) or stream is getattr(sys, f"__{name}__"):
            return _STANDARD_STREAMS[name]
    return stream


def print_(*inputs, output_stream=None, sep=" ", end="\n", summarize=3, name=None):
    """An op printing its inputs (tensors and Python values) each time it runs (tf.print).

    ``output_stream`` defaults to standard error, looked up when the op runs.
    """
    output_stream = _resolve_stream(output_stream)
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    template = [("t", tensors.index(x)) if isinstance(x, Tensor) else ("s", str(x))
                for x in inputs]
    attrs = {"template": template, "output_stream": output_stream, "sep": sep, "end": end,
             "summarize": summarize}
    return get_default_graph().create_op("PrintV2", tensors, attrs, name=name or "PrintV2")
