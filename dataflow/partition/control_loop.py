"""Per-partition control loops: what lets a device run its part of a while loop alone.

A device that has nodes of a loop frame but not the loop's predicate (``LoopCond``)
does not know how many iterations to run. The partitioner gives it a small state
machine in that frame (the design note, section 6)::

    Enter(dummy) -> Merge -> Switch(pred received from the predicate's device)
                      ^          | true
                      +-- NextIteration

The Merge fires once per iteration the predicate's device started; every Recv of
that frame on the device gets a control edge from it, so a Recv runs only in those
iterations, and the received predicate decides whether NextIteration starts the
next one. The Enter's dummy input is a constant in the root frame, or, for a nested
loop, the enclosing frame's pivot on the same device (its control loop's Switch
output), so inner control loops are entered once per outer iteration. The device that
owns the predicate gets a control loop too, whose Switch reads the LoopCond itself.

>>> def body(i, v):                       # the predicate stays on /cpu:0
...     with df.device("/cpu:1"):
...         return i + 1, v * 2.0
>>> with df.device("/cpu:0"):
...     _, y = df.while_loop(lambda i, v: i < 3, body, (0, 1.0))
>>> loops = df.partition(df.get_default_graph(), [y]).control_loops
>>> [(loop.device, loop.pred.op.type) for loop in loops]
[('/device:CPU:0', 'LoopCond'), ('/device:CPU:1', '_Recv')]
>>> [op.type for op in loops[1].ops]
['Enter', 'Merge', 'Switch', 'NextIteration']
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes

__all__ = ["ControlLoop", "build_control_loop"]


@dataclass(eq=False)
class ControlLoop:
    """The control loop of ``frame`` on ``device`` (ops of ``partitions[device]``).

    ``pred`` is the predicate the Switch reads: a Recv (``pred.op.type == "_Recv"``)
    from the device that owns the loop's LoopCond, or that LoopCond itself on the
    owning device.
    """

    device: str
    frame: str
    enter: object
    merge: object
    switch: object
    next_iteration: object
    pred: object

    @property
    def ops(self) -> list:
        return [self.enter, self.merge, self.switch, self.next_iteration]

    @property
    def pivot(self):
        """The Switch's true output: live exactly in iterations that run the body."""
        return self.switch.outputs[1]


def build_control_loop(writer, device, frame, parent_pivot, pred_of) -> ControlLoop:
    """Add the control loop of ``frame`` (a FramePlan) to ``device``'s partition.

    ``writer.new_op(device, type, inputs, attrs, specs, base_name)`` creates ops;
    ``pred_of(merge_op)`` is called once the Merge exists and returns the predicate
    tensor on ``device`` (a Recv that must get a control edge from that Merge).
    """
    prefix = f"control_loop/{frame.name}"
    dt, shape = parent_pivot.dtype, parent_pivot.shape
    enter = writer.new_op(device, "Enter", [parent_pivot],
                          {"frame_name": frame.name, "is_constant": False,
                           "parallel_iterations": frame.parallel_iterations},
                          [(dt, shape)], f"{prefix}/Enter")
    e = enter.outputs[0]
    merge = writer.new_op(device, "Merge", [e, e], {}, [(dt, shape), (dtypes.int32, [])],
                          f"{prefix}/Merge")
    pred = pred_of(merge)
    switch = writer.new_op(device, "Switch", [merge.outputs[0], pred], {},
                           [(dt, shape), (dt, shape)], f"{prefix}/Switch")
    nxt = writer.new_op(device, "NextIteration", [switch.outputs[1]], {}, [(dt, shape)],
                        f"{prefix}/NextIteration")
    writer.set_input(merge, 1, nxt.outputs[0])
    return ControlLoop(device, frame.name, enter, merge, switch, nxt, pred)
