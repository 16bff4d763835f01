"""NumPy kernel of ReverseSequence."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel


@register_kernel("ReverseSequence")
def _reverse_sequence(ctx):
    seq_axis, batch_axis = ctx.attr("seq_dim"), ctx.attr("batch_dim")

    def reverse(x, lengths):
        x = np.asarray(x)
        lengths = np.asarray(lengths)
        if lengths.shape != (x.shape[batch_axis],):
            raise errors.InvalidArgumentError(
                None, None, f"len(seq_lens) != input.dims({batch_axis}), ({lengths.size} vs. "
                f"{x.shape[batch_axis]})")
        if np.any(lengths < 0) or np.any(lengths > x.shape[seq_axis]):
            raise errors.InvalidArgumentError(
                None, None, f"seq_lens must be in [0, {x.shape[seq_axis]}], got "
                f"{lengths.tolist()}")
        out = x.copy()
        for b, n in enumerate(lengths.tolist()):
            index = [slice(None)] * x.ndim
            index[batch_axis] = b
            index[seq_axis] = slice(0, n)
            source = list(index)
            source[seq_axis] = slice(n - 1, None, -1) if n else slice(0, 0)
            out[tuple(index)] = x[tuple(source)]
        return out
    return reverse
