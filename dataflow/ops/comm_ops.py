"""``_Send`` and ``_Recv``: the nodes the partitioner puts on a cross-device edge.

Both carry the rendezvous key parts as attributes: ``send_device``,
``recv_device`` and ``tensor_name`` (the edge's name, unique per key); the executor
adds the frame path of the token at run time (see
:mod:`dataflow.runtime.rendezvous`). A Send has one input and no outputs; a Recv
has no data inputs (it is a source in its partition; inside a loop it gets a
control edge from its device's control loop) and one output of the attributes'
``dtype`` and ``shape``.

They are executor roles, like the control-flow primitives, not kernels: a Send
runs even when its input is dead (it sends the dead bit), and a Recv must not
block the scheduler thread, so it completes asynchronously through the executor's
completion queue. Users do not create them; :func:`dataflow.partition` does::

    part = df.partition(graph, [y])
    [op.type for op in part.partitions["/device:CPU:1"].get_operations()]
"""
from __future__ import annotations

from ..framework import op_registry as _roles
from ..framework.op_registry import register_op

SEND_TYPE = "_Send"
RECV_TYPE = "_Recv"


@register_op(SEND_TYPE, stateful=True, role=_roles.SEND)
def _send_infer(op):
    return []


@register_op(RECV_TYPE, stateful=True, role=_roles.RECV)
def _recv_infer(op):
    return [(op.get_attr("dtype"), op.get_attr("shape"))]

