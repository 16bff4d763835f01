"""``reverse_sequence``: reverse the first ``seq_lengths[b]`` steps of each batch entry
(TF's ``ReverseSequence``; ``bidirectional_dynamic_rnn`` runs its backward cell on it).

>>> x = df.constant([[1, 2, 3], [4, 5, 6]])
>>> df.Session().run(reverse_sequence(x, [2, 3], seq_axis=1, batch_axis=0))
array([[2, 1, 3],
       [6, 5, 4]], dtype=int32)
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op

__all__ = ["reverse_sequence"]


@register_op("ReverseSequence")
def _reverse_sequence_infer(op):
    x, lengths = op.inputs
    seq_axis, batch_axis = op.get_attr("seq_dim"), op.get_attr("batch_dim")
    if lengths.shape.ndims not in (None, 1):
        raise ValueError(f"ReverseSequence '{op.name}': seq_lengths must be a vector, got "
                         f"shape {lengths.shape}")
    rank = x.shape.ndims
    if rank is not None:
        for what, axis in (("seq_axis", seq_axis), ("batch_axis", batch_axis)):
            if not 0 <= axis < rank:
                raise ValueError(f"ReverseSequence '{op.name}': {what} {axis} is out of range "
                                 f"for input of rank {rank}")
        if seq_axis == batch_axis:
            raise ValueError(f"ReverseSequence '{op.name}': seq_axis == batch_axis == "
                             f"{seq_axis}")
        batch = x.shape[batch_axis]
        if batch is not None and lengths.shape.ndims == 1 and lengths.shape[0] is not None \
                and lengths.shape[0] != batch:
            raise ValueError(f"ReverseSequence '{op.name}': len(seq_lengths) "
                             f"{lengths.shape[0]} != input.shape[{batch_axis}] {batch}")
    return [(x.dtype, x.shape)]


def reverse_sequence(input, seq_lengths, seq_axis=None, batch_axis=None, name=None,  # noqa: A002
                     seq_dim=None, batch_dim=None):
    """``input`` with, for each ``b``, the slice ``[:seq_lengths[b]]`` along ``seq_axis``
    reversed (entries past the length stay where they are)."""
    seq_axis = seq_axis if seq_axis is not None else seq_dim
    batch_axis = batch_axis if batch_axis is not None else (batch_dim or 0)
    if seq_axis is None:
        raise ValueError("reverse_sequence needs seq_axis")
    x = convert_to_tensor(input)
    lengths = convert_to_tensor(seq_lengths, preferred_dtype=_dtypes.int64)
    if not lengths.dtype.is_integer:
        raise TypeError(f"seq_lengths must be int32 or int64, got {lengths.dtype.name}")
    rank = x.shape.ndims
    if rank is not None:
        seq_axis, batch_axis = seq_axis % rank, batch_axis % rank
    return get_default_graph().create_op(
        "ReverseSequence", [x, lengths], {"seq_dim": int(seq_axis), "batch_dim": int(batch_axis)},
        name=name or "ReverseSequence").outputs[0]
