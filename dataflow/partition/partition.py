"""``df.partition``: split a graph into one subgraph per device, joined by Send/Recv.

The construction follows the design note (sections 4-6) and TensorFlow's
``graph_partition.cc``:

1. prune the graph to what the fetches need and place every op
   (:mod:`dataflow.partition.placement`);
2. copy each op into a new :class:`~dataflow.Graph` per device (the user's graph is
   never changed; copies keep their names);
3. replace every edge that crosses devices by a ``_Send`` on the source device and a
   ``_Recv`` on the destination device (one pair per tensor and destination device);
   a control edge crosses as a dummy value sent after the source ran (or died);
4. give every device that has nodes of a loop frame but not its predicate a control
   loop (:mod:`dataflow.partition.control_loop`); every Recv of a frame gets a control
   edge from its device's per-iteration anchor (the control loop's Merge; the
   predicate's device gets one too, reading its LoopCond directly), so it runs once
   per iteration the predicate started.

>>> g = df.Graph()
>>> with g.as_default():
...     with df.device("/cpu:0"):
...         x = df.constant(2.0)
...     with df.device("/cpu:1"):
...         y = x * 3.0
>>> part = df.partition(g, [y])
>>> sorted(part.partitions)
['/device:CPU:0', '/device:CPU:1']
>>> [(p.kind, p.key) for p in part.send_recv_pairs]
[('data', ('/device:CPU:0', '/device:CPU:1', 'Const:0'))]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import dtypes, errors
from ..framework import op_registry as R
from ..framework.graph import Graph, Operation, Tensor
from ..framework.device_spec import canonical_device
from ..framework.graph_analysis import fed_placeholder, infer_frames, prune
from ..ops import comm_ops
from ..runtime.partitioned import register_partitioner
from .control_loop import build_control_loop
from .placement import Placement, assign_devices

__all__ = ["PartitionResult", "SendRecvPair", "partition"]

DEFAULT_DEVICE = "/device:CPU:0"


@dataclass(eq=False)
class SendRecvPair:
    """One cross-device edge: ``send`` in ``partitions[key[0]]``, ``recv`` in
    ``partitions[key[1]]``; ``key = (src_device, dst_device, tensor_name)`` is the static
    part of the rendezvous key. The pair is used once per iteration of ``frame`` (''
    for the root frame). ``kind`` is ``"data"``, ``"control"`` (a control edge sent as a
    dummy value) or ``"predicate"`` (a loop predicate only a control loop reads)."""

    key: tuple
    send: Operation
    recv: Operation
    frame: str
    kind: str


@dataclass(eq=False)
class PartitionResult:
    """What :func:`partition` returns; every graph and op in it can be inspected.

    Attributes:
      graph: the user's graph (unchanged).
      partitions: ``{device: Graph}``, one subgraph per device that runs something.
      placement: :class:`~dataflow.partition.placement.Placement` of the user's ops.
      send_recv_pairs: every :class:`SendRecvPair`.
      control_loops: every :class:`~dataflow.partition.control_loop.ControlLoop`.
      loop_leaders: ``{frame_name: device}`` of frames spanning several devices: the
        device of the loop's predicate.
      frame_parents: ``{frame_name: parent frame name}`` ('' is the root frame).
      frame_of: ``{partition Operation: frame name}`` for every op of every partition.
      fetches: per fetch, ``(device, partition Tensor)``, or None for a fed tensor.
      targets: ``{device: [Operation]}``: what each partition must run (its Sends and
        the user's targets placed there).
      feeds: ``{device: [(user Tensor, partition Placeholder tensor)]}``.
      copies: ``{(user Operation, device): partition Operation}``.
    """

    graph: Graph
    partitions: dict
    placement: Placement
    send_recv_pairs: list
    control_loops: list
    loop_leaders: dict
    frame_parents: dict
    frame_of: dict
    fetches: list
    targets: dict
    feeds: dict
    copies: dict = field(default_factory=dict)

    @property
    def devices(self) -> list:
        return sorted(self.partitions)

    def control_loops_on(self, device) -> dict:
        """``{frame_name: ControlLoop}`` of ``device``."""
        return {c.frame: c for c in self.control_loops if c.device == device}

    def messages_per_iteration(self, frame: str) -> int:
        """Rendezvous messages one iteration of ``frame`` sends (Send/Recv pairs in it)."""
        return sum(1 for p in self.send_recv_pairs if p.frame == frame)

    def to_dot(self, **kwargs) -> str:
        """Graphviz DOT of the partitions (devices as colours, frames as clusters)."""
        from .. import viz
        return viz.partition_to_dot(self, **kwargs)


def partition(graph, fetches, feeds=None, devices=None, *, default_device=None,
              resolve=None) -> PartitionResult:
    """Split the part of ``graph`` that computes ``fetches`` into one graph per device.

    ``fetches``: tensors, operations or names (a list, or one). ``feeds``: tensors (or
    a feed_dict: its keys) that are fed; they cut the graph. ``devices``: the devices
    that exist (canonical names such as ``"/cpu:1"``); an op placed elsewhere raises
    InvalidArgumentError. ``default_device`` (default: the first of ``devices``, else
    ``/cpu:0``) runs unplaced ops; ``resolve(op)`` overrides how a placed op's device
    name is resolved (the Session uses it for soft placement).

    >>> with df.device("/cpu:0"):
    ...     x = df.constant(2.0, name="x")
    >>> with df.device("/cpu:1"):
    ...     y = df.multiply(x, 3.0, name="y")
    >>> part = df.partition(df.get_default_graph(), [y])
    >>> [op.type for op in part.partitions["/device:CPU:1"].get_operations()]
    ['Const', 'Mul', '_Recv']
    """
    fetch_tensors, targets = _as_fetches(graph, fetches)
    feed_tensors = [graph.as_graph_element(f, allow_operation=False) for f in (feeds or ())]
    known = [canonical_device(d) for d in devices] if devices else None
    default = canonical_device(default_device) if default_device else (
        known[0] if known else DEFAULT_DEVICE)
    if resolve is None:
        resolve = _resolver(known)
    return _Partitioner(graph, fetch_tensors, targets, feed_tensors, default,
                        resolve).build()


def _as_fetches(graph, fetches):
    if isinstance(fetches, (Tensor, Operation, str)):
        fetches = [fetches]
    tensors, ops = [], []
    for f in fetches:
        el = graph.as_graph_element(f)
        (tensors if isinstance(el, Tensor) else ops).append(el)
    return tensors, ops


def _resolver(known):
    def resolve(op):
        d = canonical_device(op.device)
        if known is not None and d not in known:
            raise errors.InvalidArgumentError(
                None, op, f"Cannot assign a device for operation {op.name}: {op.device} was "
                f"explicitly assigned but the known devices are {known}")
        return d
    return resolve


class _Partitioner:
    """One partitioning run (the state shared by the steps of the construction)."""

    def __init__(self, graph, fetch_tensors, targets, feed_tensors, default, resolve):
        self.graph = graph
        self.fetch_tensors = fetch_tensors
        self.user_targets = targets
        self.fed = set(feed_tensors)
        self.ops = prune(fetch_tensors, targets, self.fed)
        self.needed = set(self.ops)
        self.frame_of, self.frames = infer_frames(self.ops, self.fed)
        self.placement = assign_devices(self.ops, default, resolve, self.fed)
        self.parts = {d: Graph() for d in self.placement.all_devices}
        self.copies: dict = {}
        self.part_frame: dict = {}      # partition op -> user Frame it runs in
        self.pairs: list = []
        self.recvs: dict = {}           # (tensor or ("^", op), dst device) -> Recv tensor
        self.anchors: dict = {}         # (device, frame name) -> (control op, pivot tensor)
        self.control_loops: list = []
        self.feeds: dict = {}
        self.feed_phs: dict = {}
        self.targets: dict = {d: [] for d in self.parts}
        self.dummies: dict = {}
        self.leaders = self._loop_leaders()

    # -- frames ----------------------------------------------------------------------------
    def _out_frame(self, op):
        role = op._op_def.role
        if role == R.ENTER:
            return self.frames[op.get_attr("frame_name")]
        if role == R.EXIT:
            return self.frame_of[op].parent
        return self.frame_of[op]

    def _loop_leaders(self) -> dict:
        """Frame name -> (device of its LoopCond, loop Merges of the frame on that device)."""
        leaders = {}
        for op in self.ops:
            if op.type == "LoopCond" and self.frame_of[op].name not in leaders:
                leaders[self.frame_of[op].name] = (self.placement.device[op], op)
        return leaders

    def _frame_devices(self) -> dict:
        """Frame name -> devices with nodes in it or in a frame nested in it."""
        spans: dict = {}
        for op in self.ops:
            for d in self.placement.copies[op]:
                for f in (self.frame_of[op], self._out_frame(op)):
                    while f.parent is not None:
                        spans.setdefault(f.name, set()).add(d)
                        f = f.parent
        return spans

    # -- writing partition graphs ------------------------------------------------------------
    def new_op(self, device, op_type, inputs, attrs, specs, base_name, frame=None,
               exact=False) -> Operation:
        """Create an op in ``device``'s partition without the builders' machinery (no
        name scopes, control-flow contexts or shape inference: specs are given)."""
        g = self.parts[device]
        name = base_name if exact else g.unique_name(base_name)
        op = Operation(g, op_type, name, inputs, attrs, device)
        op._outputs = [Tensor(op, i, dt, sh) for i, (dt, sh) in enumerate(specs)]
        g._ops.append(op)
        g._ops_by_name[name] = op
        if exact:
            g._names_in_use[name.lower()] = 1
        g._bump()
        if frame is not None:
            self.part_frame[op] = frame
        return op

    @staticmethod
    def set_input(op, index, tensor):
        old = op._inputs[index]
        old._consumers.remove(op)
        op._inputs[index] = tensor
        tensor._consumers.append(op)

    @staticmethod
    def add_control(op, src):
        if src not in op._control_inputs:
            op._control_inputs.append(src)
            src._control_outputs.append(op)

    # -- the construction --------------------------------------------------------------------
    def build(self) -> PartitionResult:
        for op in self.ops:                      # 1. a copy per device, no edges yet
            for d in self.placement.copies[op]:
                self.copies[(op, d)] = self.new_op(
                    d, op.type, [], op._attrs, [(t.dtype, t.shape) for t in op._outputs],
                    op.name, frame=self.frame_of[op], exact=True)
        spans = self._frame_devices()
        for name, devs in spans.items():        # 2. control loops of multi-device frames
            if len(devs) > 1:
                for d in sorted(devs):
                    self._anchor(d, self.frames[name])
        for op in self.ops:                      # 3. edges, with Send/Recv where they cross
            for d in self.placement.copies[op]:
                self._wire(op, d)
        fetches = []
        for t in self.fetch_tensors:
            if t in self.fed:
                fetches.append(None)
            else:
                d = self.placement.copies[t.op][0]
                fetches.append((d, self.copies[(t.op, d)]._outputs[t._value_index]))
        for op in self.user_targets:
            d = self.placement.copies[op][0]
            self.targets[d].append(self.copies[(op, d)])
        frame_of = {op: f.name for op, f in self.part_frame.items()}
        return PartitionResult(
            graph=self.graph, partitions=self.parts, placement=self.placement,
            send_recv_pairs=self.pairs, control_loops=self.control_loops,
            loop_leaders={n: d for n, (d, _) in self.leaders.items() if len(spans[n]) > 1},
            frame_parents={f.name: f.parent.name for f in self.frames.values()
                           if f.parent is not None},
            frame_of=frame_of, fetches=fetches, targets=self.targets, feeds=self.feeds,
            copies=self.copies)

    def _wire(self, op, d):
        new = self.copies[(op, d)]
        inputs = []
        for t in op._inputs:
            if t in self.fed:
                inputs.append(self._feed(t, d))
            else:
                inputs.append(self._tensor_on(t, d))
        new._inputs = inputs
        for t in inputs:
            t._consumers.append(new)
        for c in op._control_inputs:
            if c not in self.needed or fed_placeholder(c, self.fed):
                continue
            if d in self.placement.copies[c]:
                self.add_control(new, self.copies[(c, d)])
            else:
                self.add_control(new, self._control_recv(c, d).op)

    def _tensor_on(self, t, d) -> Tensor:
        """``t`` as available on device ``d``: the local copy's output, or a Recv."""
        if d in self.placement.copies[t.op]:
            return self.copies[(t.op, d)]._outputs[t._value_index]
        key = (t, d)
        recv = self.recvs.get(key)
        if recv is None:
            src = self.placement.copies[t.op][0]
            value = self.copies[(t.op, src)]._outputs[t._value_index]
            recv = self.recvs[key] = self._send_recv(value, src, d, t.name,
                                                     self._out_frame(t.op), "data")
        return recv

    def _control_recv(self, c, d) -> Tensor:
        """A control edge ``c -> (op on d)`` that crosses devices: a dummy value sent once
        ``c`` ran (dead if ``c`` was dead)."""
        key = (("^", c), d)
        recv = self.recvs.get(key)
        if recv is None:
            src = self.placement.copies[c][0]
            frame = self._out_frame(c)
            dummy = self.new_op(src, "Const", [], {"value": _DUMMY, "dtype": dtypes.float32},
                                [(dtypes.float32, [])], f"control_dummy/{c.name}",
                                frame=frame)
            self.add_control(dummy, self.copies[(c, src)])
            recv = self.recvs[key] = self._send_recv(dummy.outputs[0], src, d, "^" + c.name,
                                                     frame, "control")
        return recv

    def _send_recv(self, value, src, dst, edge_name, frame, kind) -> Tensor:
        attrs = {"send_device": src, "recv_device": dst, "tensor_name": edge_name}
        base = edge_name.replace(":", "_").lstrip("^")
        send = self.new_op(src, comm_ops.SEND_TYPE, [value], dict(attrs), [],
                           f"send/{base}/to_{_tag(dst)}", frame=frame)
        self.targets[src].append(send)
        recv = self.new_op(dst, comm_ops.RECV_TYPE, [],
                           dict(attrs, dtype=value.dtype, shape=value.shape),
                           [(value.dtype, value.shape)], f"recv/{base}/from_{_tag(src)}",
                           frame=frame)
        if frame.parent is not None:
            self.add_control(recv, self._anchor(dst, frame)[0])
        self.pairs.append(SendRecvPair((src, dst, edge_name), send, recv, frame.name, kind))
        return recv.outputs[0]

    def _feed(self, t, d) -> Tensor:
        key = (t, d)
        ph = self.feed_phs.get(key)
        if ph is None:
            op = self.new_op(d, "Placeholder", [], {"dtype": t.dtype, "shape": t.shape},
                             [(t.dtype, t.shape)], f"feed/{t.op.name}_{t._value_index}",
                             frame=self.frames[""])
            ph = self.feed_phs[key] = op.outputs[0]
            self.feeds.setdefault(d, []).append((t, ph))
        return ph

    # -- per-iteration anchors and control loops ---------------------------------------------
    def _anchor(self, d, frame):
        """``(control op, pivot tensor)`` of ``frame`` on device ``d``: the op every Recv of
        the frame waits for (once per iteration), and the tensor nested control loops
        enter from. The root frame has no control op; its pivot is a dummy constant."""
        key = (d, frame.name)
        got = self.anchors.get(key)
        if got is not None:
            return got
        if frame.parent is None:
            got = self.anchors[key] = (None, self._dummy(d))
            return got
        leader = self.leaders.get(frame.name)
        if leader is None:
            raise errors.InvalidArgumentError(
                None, next((op for op in self.ops if self.frame_of[op] is frame), None),
                f"Loop frame '{frame.name}' spans several devices but has no LoopCond: the "
                "partitioner cannot tell the other devices when an iteration starts")
        # Every device of the frame, the predicate's included, anchors on a control loop:
        # its Merge fires only for iterations whose predicate was true. A loop Merge of
        # the user's graph is no anchor: its NextIteration can be live after the last
        # true predicate (a ControlTrigger in the body makes dead values live again), so
        # it fires for one more iteration whose Recvs no device ever sends (a hang).
        _, loop_cond = leader
        parent_pivot = self._anchor(d, frame.parent)[1]

        def pred_of(merge_op):
            self.anchors[key] = (merge_op, None)  # the predicate's Recv waits for this Merge
            return self._tensor_on(loop_cond.outputs[0], d)

        loop = build_control_loop(self, d, frame, parent_pivot, pred_of)
        for op in loop.ops:
            self.part_frame[op] = frame
        self.part_frame[loop.enter] = frame.parent
        for p in self.pairs:
            if p.recv.outputs[0] is loop.pred and p.kind == "data":
                p.kind = "predicate"
        self.control_loops.append(loop)
        # A target, so that the plan keeps it even where no Recv of the frame waits for
        # it: it is what starts the device's iterations.
        self.targets[d].append(loop.next_iteration)
        got = self.anchors[key] = (loop.merge, loop.pivot)
        return got

    def _dummy(self, d) -> Tensor:
        t = self.dummies.get(d)
        if t is None:
            op = self.new_op(d, "Const", [], {"value": _DUMMY, "dtype": dtypes.float32},
                             [(dtypes.float32, [])], "control_loop/dummy",
                             frame=self.frames[""])
            t = self.dummies[d] = op.outputs[0]
        return t


_DUMMY = np.zeros((), np.float32)
_DUMMY.flags.writeable = False


def _tag(device: str) -> str:
    """A device name as an op-name part (``/device:CPU:1`` -> ``CPU_1``)."""
    return device.replace("/device:", "").replace("/", "_").replace(":", "_").strip("_")


# Session(devices=...) and ConfigProto(partition_mode=...) run partitioned graphs through
# the runtime, which gets the partitioner from here (it must not import this package).
register_partitioner(partition)
