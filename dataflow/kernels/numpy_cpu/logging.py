"""Assert and Print kernels."""
from __future__ import annotations

import sys

import numpy as np

from dataflow import errors

from ..registry import register_kernel


def _summary(x, n):
    flat = np.asarray(x).ravel()
    items = " ".join(str(v) for v in flat[:n])
    return f"[{items}{'...' if flat.size > n else ''}]"


@register_kernel("Assert")
def _assert(ctx):
    n = ctx.attr("summarize")
    names = [t.name for t in ctx.op.inputs[1:]]

    def check(cond, *data):
        if not np.all(cond):
            shown = " ".join(f"{name}={_summary(d, n)}" for name, d in zip(names, data))
            raise errors.InvalidArgumentError(None, None, f"assertion failed: {shown}")
    return check


@register_kernel("Print")
def _print(ctx):
    message, first_n, n = ctx.attr("message"), ctx.attr("first_n"), ctx.attr("summarize")
    count = [0]

    def print_identity(x, *data):
        count[0] += 1
        if first_n < 0 or count[0] <= first_n:
            print(message + "".join(_summary(d, n) for d in data), file=sys.stderr)
        return x
    return print_identity


@register_kernel("PrintV2")
def _print_v2(ctx):
    template, stream = ctx.attr("template"), ctx.attr("output_stream")
    sep, end, n = ctx.attr("sep"), ctx.attr("end"), ctx.attr("summarize")

    def render(x):
        return str(x) if np.ndim(x) == 0 else _summary(x, n)

    def print_op(*values):
        parts = [render(values[i]) if kind == "t" else i for kind, i in template]
        print(sep.join(parts), end=end, file=stream)
    return print_op

