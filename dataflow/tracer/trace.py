"""Recording a trace: the ops one imperative step ran, through the eager recorder hook.

While a step is traced, a :class:`TraceRecorder` sits in
:data:`dataflow.framework.eager.RECORDERS` and sees every op eager dispatch runs. It
keeps, per op, what the graph generator needs (:class:`TraceOp`): type, attributes,
output dtypes and shapes, program location (:mod:`.location`) and where each input
comes from:

* ``("n", i, k)`` output ``k`` of the ``i``-th op recorded in this step;
* ``("v", name)`` the handle of variable ``name`` (variables become graph variables);
* ``("f",)`` anything else: a constant made from a Python value in the step, or a
  tensor from outside the step. It becomes an *Input Feeding*: fed by value every
  step, never identified by its value or by which Python object holds it.

Stateful ops other than variable ops (printing, random generators, I/O) are not
recorded: they run in Python in every step; their tensor inputs become *Output
Fetching* points and their outputs feeds of later ops. Python reads of a value made in
the step (``.numpy()``, ``bool``, ``float``, printing) are Output Fetching points too;
so are the values still referenced when the step returns (they are materialised).

>>> with df.eager_mode():
...     rec = TraceRecorder(Locator())
...     df.framework.eager.RECORDERS.append(rec.record)
...     try:
...         x = df.constant([1.0, 2.0])
...         y = df.reduce_sum(x * 2.0)
...         total = float(y)                 # a Python read: an Output Fetching
...     finally:
...         df.framework.eager.RECORDERS.remove(rec.record)
...     trace = rec.finish()
>>> [(op.op_type, op.inputs) for op in trace.ops]
[('Mul', (('f',), ('f',))), ('Sum', (('n', 0, 0),))]
>>> total, trace.reads                   # read after both ops were recorded
(6.0, {(1, 0): 2})
"""
from __future__ import annotations

import gc
import sys
import threading
from typing import NamedTuple

import numpy as np

from .. import dtypes as _dtypes
from ..framework import eager as _eager
from ..framework.eager import EagerTensor
from ..framework.op_registry import get_op_def
from ..framework.tensor_shape import TensorShape
from .location import Locator

__all__ = ["TraceOp", "Trace", "TraceRecorder", "is_recorded", "freeze", "VARIABLE_OPS",
           "WRITING_VARIABLE_OPS", "feed_slice_bounds", "GRADIENT_OP", "gradient_between"]

# Stateful ops that belong in the graph anyway (the seed's exception): the variable ops.
# Their first input is a variable handle; the graph orders them per variable.
READING_VARIABLE_OPS = frozenset({"ReadVariableOp", "VarIsInitializedOp"})
WRITING_VARIABLE_OPS = frozenset({
    "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ResourceApplyAdam",
    "ResourceScatterAdd", "ResourceSparseApplyMomentum"})
VARIABLE_OPS = READING_VARIABLE_OPS | WRITING_VARIABLE_OPS
# The pseudo-op type of a ``GradientTape.gradient`` call recorded as one node: the
# generated graph computes it with ``df.gradients`` (through folded loops too), so the
# trace holds no gradient op of its own (their number grows with a loop's trip count).
GRADIENT_OP = "TapeGradient"

_RECORDED: dict = {}   # op type -> whether it goes into the graph


def is_recorded(op_type: str) -> bool:
    """Whether ops of ``op_type`` go into the generated graph: every stateless op and the
    variable ops; other stateful ops (printing, random, I/O, creating a variable) run in
    Python, so a fallback never runs them twice.

    >>> is_recorded("MatMul"), is_recorded("AssignAddVariableOp"), is_recorded("PrintV2")
    (True, True, False)
    """
    hit = _RECORDED.get(op_type)
    if hit is None:
        hit = _RECORDED[op_type] = (op_type in VARIABLE_OPS
                                    or not get_op_def(op_type).stateful)
    return hit


def freeze(value):
    """A hashable stand-in for an attribute value (lists, dicts, arrays, shapes).

    >>> freeze({"perm": [1, 0], "transpose_a": True}) == freeze({"transpose_a": True,
    ...                                                          "perm": [1, 0]})
    True
    """
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, TensorShape):
        return ("shape", None if value.ndims is None else tuple(value.as_list()))
    try:
        hash(value)
    except TypeError:
        return ("repr", repr(value))
    return value


def freeze_attrs(attrs) -> tuple:
    """The attributes as a hashable key: the items themselves when they hash (the common
    case, one cheap check per op), else with each value frozen."""
    if not attrs:
        return ()
    items = tuple(attrs.items())
    try:
        hash(items)
        return items
    except TypeError:
        return tuple((k, freeze(v)) for k, v in attrs.items())


class TraceOp(NamedTuple):
    """One recorded op: what makes it a node and what rebuilds it in a graph."""

    op_type: str
    attrs: dict
    attrs_key: tuple
    location: tuple          # (call-site stack, iteration index)
    inputs: tuple            # per input: ("n", i, k) | ("v", name) | ("f",)
    feed_specs: tuple        # per input: (dtype, shape) of a fed input, else None
    out_specs: tuple         # per output: (dtype, TensorShape)
    name: str
    # per input: id() of a fed tensor (kept alive while the step is recorded, so two
    # fed inputs with one id are one Python object: a loop invariant), else None
    feed_ids: tuple = ()


class Trace:
    """The ops of one step in program order. ``reads`` maps each output ``(i, k)``
    Python read to how many ops had been recorded when it first read it; ``alive`` the
    outputs still referenced when the step returned; ``created`` names the variables the
    step created (a trace that uses them cannot happen again: the next step finds them
    made)."""

    def __init__(self):
        self.ops: list = []
        self.reads: dict = {}
        self.shape_reads: dict = {}  # like ``reads``, for reads of an output's shape
        self.alive: set = set()
        self.variables: dict = {}    # name -> the variable's handle (an EagerTensor)
        self.created: set = set()
        # Call sites of gradients recorded op by op: their repeated ops (one dense
        # layer's gradient after another's) are no Python loop, so none is folded.
        self.gradient_stacks: set = set()

    @property
    def fetched(self) -> set:
        """Outputs the graph must send: those read and those kept."""
        return set(self.reads) | self.alive

    @property
    def repeatable(self) -> bool:
        """False when an op uses a variable this step created."""
        if not self.created:
            return True
        return not any(src[0] == "v" and src[1] in self.created
                       for op in self.ops for src in op.inputs)


def feed_slice_bounds(op_type, inputs, attrs):
    """``inputs, attrs`` of an op about to run in a traced or co-executed step, with the
    Python int bounds and indices of a ``StridedSlice`` (``x[a:b]``, ``x[:, t]``) turned
    into scalar tensor inputs: a constant from a Python value is fed, not identified by
    its value. Faster R-CNN crops a region chosen in Python (with the bounds in the
    ``spec`` attribute every new region was a new node), and an RNN's ``xs[:, t]`` reads
    its loop index: fed, every iteration of the loop is the same node, so the loop can
    fold (:mod:`.loops`). Slices with no bounds stay in the spec.

    >>> x = df.constant([[1.0, 2.0, 3.0]])
    >>> ins, attrs = feed_slice_bounds("StridedSlice", [x],
    ...                                {"spec": (("int", 0), ("slice", 1, 3, None))})
    >>> attrs["spec"], [int(t) for t in ins[1:]]
    ((('tensor_int', 1), ('tensor_slice', ('t', 2), ('t', 3), ('c', None))), [0, 1, 3])
    """
    if op_type != "StridedSlice":
        return inputs, attrs
    spec = attrs["spec"]
    if not any(item[0] == "int" or (item[0] == "slice"
                                    and (item[1] is not None or item[2] is not None))
               for item in spec):
        return inputs, attrs
    inputs = list(inputs)
    new_spec = []
    for item in spec:
        if item[0] == "int":
            inputs.append(EagerTensor(np.asarray(item[1], np.int32), _dtypes.int32))
            new_spec.append(("tensor_int", len(inputs) - 1))
            continue
        if item[0] != "slice" or (item[1] is None and item[2] is None):
            new_spec.append(item)
            continue
        refs = []
        for bound in item[1:]:
            if bound is None:
                refs.append(("c", None))
            else:
                inputs.append(EagerTensor(np.asarray(bound, np.int32), _dtypes.int32))
                refs.append(("t", len(inputs) - 1))   # 1-based among the index inputs
        new_spec.append(("tensor_slice", *refs))
    attrs = dict(attrs)
    attrs["spec"] = tuple(new_spec)
    return inputs, attrs


def variable_name(t):
    """The variable name of a handle tensor made by a VarHandleOp, else None."""
    if t._dtype is not _dtypes.resource:
        return None
    op = t._op
    if op is None or op._type != "VarHandleOp":
        return None
    return op._attrs["shared_name"]


_SLOT = EagerTensor.__dict__["_value"]   # the value slot of every EagerTensor
_EAGER_SHAPE = EagerTensor.shape.fget


class TracedTensor(EagerTensor):
    """An EagerTensor made by an op of the step being traced: Python reads of its value
    are noted as Output Fetching points. Same layout as EagerTensor (outputs of traced
    ops are switched to this class as they are recorded)."""

    __slots__ = ()

    def _note_read(self):
        rec = _ACTIVE.recorder
        if rec is not None:
            rec.note_read(self)

    def numpy(self):
        self._note_read()
        return super().numpy()

    @property
    def shape(self):
        # A shape read: the graph sends the value for it when it cannot infer the shape
        # (a Reshape to a fed shape, Unique); without the note, each such read in a
        # co-executed step would be a fallback that no merged trace ever removes.
        rec = _ACTIVE.recorder
        if rec is not None:
            rec.note_shape_read(self)
        return _EAGER_SHAPE(self)

    def __array__(self, dtype=None, copy=None):
        self._note_read()
        return super().__array__(dtype, copy)

    def __bool__(self):
        self._note_read()
        return super().__bool__()

    def __float__(self):
        self._note_read()
        return super().__float__()

    def __int__(self):
        self._note_read()
        return super().__int__()

    def __index__(self):
        self._note_read()
        return super().__index__()

    def __format__(self, spec):
        self._note_read()
        return super().__format__(spec)

    def __repr__(self):
        self._note_read()
        return super().__repr__()

    def __str__(self):
        self._note_read()
        return super().__str__()

    def __reduce__(self):
        self._note_read()
        return super().__reduce__()


class _Active(threading.local):
    recorder = None


_ACTIVE = _Active()


class TraceRecorder:
    """Records the ops of one step (install ``record`` in ``eager.RECORDERS``).

    ``locator`` places each op; a co-executed step that falls back hands over its
    ops so far with :meth:`record_replayed` (with the locations they were matched at).
    """

    def __init__(self, locator: Locator):
        self.locator = locator
        self.trace = Trace()
        self._produced: dict = {}    # id(tensor) -> (i, k) for tensors made in the step
        self._keep: list = []        # those tensors, alive while the step runs (ids)
        self._ops: list = []         # the recorded ops
        self._fed: list = []         # the fed tensors (their ids stay unique in the step)
        self._owner = threading.get_ident()
        self._replay_location = None
        _ACTIVE.recorder = self

    # -- the recorder hook ----------------------------------------------------------------
    def record(self, op):
        if threading.get_ident() != self._owner:
            return
        if not is_recorded(op._type):   # not counted at its location: co-execution
            self._note_inputs_read(op)   # runs such ops in Python without matching them
            if op._type == "VarHandleOp":
                self.trace.created.add(op._attrs["shared_name"])
            return
        location = self._replay_location
        if location is None:
            location = self.locator.here()
        inputs, feed_specs, feed_ids = [], [], []
        trace = self.trace
        produced = self._produced
        for t in op._inputs:
            src = produced.get(id(t))
            if src is not None:
                inputs.append(("n",) + src)
                feed_specs.append(None)
                feed_ids.append(None)
                continue
            name = variable_name(t)
            if name is not None:
                inputs.append(("v", name))
                trace.variables.setdefault(name, t)
                feed_specs.append(None)
                feed_ids.append(None)
            else:
                inputs.append(("f",))
                feed_specs.append((t._dtype, tuple(np.shape(t._value))))
                feed_ids.append(id(t))
                self._fed.append(t)
        i = len(trace.ops)
        self._ops.append(op)
        outs = op._outputs
        out_specs = []
        for k, t in enumerate(outs):
            shape = TensorShape(np.shape(t._value))
            t._shape = shape
            out_specs.append((t._dtype, shape))
            if type(t) is EagerTensor:
                t.__class__ = TracedTensor
            produced[id(t)] = (i, k)
            self._keep.append(t)
        attrs = op._attrs
        trace.ops.append(TraceOp(op._type, dict(attrs), freeze_attrs(attrs), location,
                                 tuple(inputs), tuple(feed_specs), tuple(out_specs),
                                 op._name, tuple(feed_ids)))

    def record_gradient(self, tape, targets, sources, output_gradients, compute):
        """``tape.gradient``'s result (``compute(targets, sources, output_gradients)``),
        recorded as one :data:`GRADIENT_OP` node when ``df.gradients`` on the traced ops
        gives the same gradients: every op on a path from a source to a target is on
        the tape and recorded (none ran in Python), no other tape records the gradient
        ops (second order), the targets and tensor sources were made in the step and the
        gradients are dense. Otherwise its ops are recorded one by one."""
        if threading.get_ident() != self._owner:
            return compute(targets, sources, output_gradients)
        wiring = self._gradient_wiring(tape, targets, sources, output_gradients)
        if wiring is None:
            return self._gradient_op_by_op(compute, targets, sources, output_gradients)
        inputs, feed_specs, source_refs, target_ops = wiring
        hooks = _eager.RECORDERS
        saved = list(hooks)
        hooks[:] = []
        active, _ACTIVE.recorder = _ACTIVE.recorder, None  # the gradient functions' reads
        try:                                                # of shapes are not Python's
            grads = compute(targets, sources, output_gradients)
        finally:
            hooks[:] = saved
            _ACTIVE.recorder = active
        between = gradient_between(self.trace.ops, source_refs, target_ops)
        ops = self.trace.ops
        target_refs = set(inputs[:len(targets)])
        connected = [ref in target_refs or any(ref in ops[j].inputs for j in between)
                     for ref in source_refs]
        if any((g is None) == c or (g is not None and not isinstance(g, EagerTensor))
               for g, c in zip(grads, connected)):
            # The tape and df.gradients would disagree (an unwatched source): record the
            # gradient's ops one by one instead (they are pure: computing twice is safe).
            return self._gradient_op_by_op(compute, targets, sources, output_gradients)
        location = self._replay_location
        if location is None:
            location = self.locator.here()
        i = len(ops)
        attrs = {"targets": len(targets), "sources": len(sources)}
        out_specs = []
        k = 0
        for g in grads:
            if g is None:
                out_specs.append(None)
                continue
            g._shape = TensorShape(np.shape(g._value))
            out_specs.append((g._dtype, g._shape))
            if type(g) is EagerTensor:
                g.__class__ = TracedTensor
            self._produced[id(g)] = (i, k)
            self._keep.append(g)
            k += 1
        ops.append(TraceOp(GRADIENT_OP, attrs, freeze_attrs(attrs), location, tuple(inputs),
                           tuple(feed_specs), tuple(out_specs), "gradient"))
        return grads

    def _gradient_op_by_op(self, compute, targets, sources, output_gradients):
        """``compute``'s gradients with their ops recorded one by one, their call sites
        noted in ``Trace.gradient_stacks`` (kept out of loop folding: a gradient's
        ops computed op by op are also what the skeleton's gradient memo replays)."""
        start = len(self.trace.ops)
        grads = compute(targets, sources, output_gradients)
        self.trace.gradient_stacks.update(op.location[0] for op in self.trace.ops[start:])
        return grads

    def _gradient_wiring(self, tape, targets, sources, output_gradients):
        """Inputs of a :data:`GRADIENT_OP` node (targets, sources, output gradients), or
        None when the gradient cannot be one node (see :meth:`record_gradient`)."""
        me = self.record
        if any(hook != me for hook in _eager.RECORDERS):
            return None           # another tape records the gradient's ops
        produced = self._produced
        taped = set()
        for op in tape._ops:
            outs = op._outputs
            if not outs or not is_recorded(op._type):
                return None       # ran in Python: the trace does not see its path
            src = produced.get(id(outs[0]))
            if src is None:
                return None
            taped.add(src[0])
        inputs, feed_specs, source_refs, target_ops = [], [], [], []
        for t in targets:
            src = produced.get(id(t))
            if src is None:
                return None
            inputs.append(("n",) + src)
            feed_specs.append(None)
            target_ops.append(src[0])
        for s in sources:
            handle = getattr(s, "handle", None)
            t = s if handle is None else handle
            src = produced.get(id(t))
            if src is not None:
                ref = ("n",) + src
            else:
                name = variable_name(t) if isinstance(t, EagerTensor) else None
                if name is None:
                    return None
                ref = ("v", name)
                self.trace.variables.setdefault(name, t)
            inputs.append(ref)
            source_refs.append(ref)
            feed_specs.append(None)
        for g in output_gradients or ():
            if not isinstance(g, EagerTensor):
                return None
            src = produced.get(id(g))
            if src is not None:
                inputs.append(("n",) + src)
                feed_specs.append(None)
            else:
                inputs.append(("f",))
                feed_specs.append((g._dtype, tuple(np.shape(g._value))))
        if not gradient_between(self.trace.ops, source_refs, target_ops) <= taped:
            return None           # df.gradients would differentiate an op the tape did not
        return inputs, feed_specs, source_refs, target_ops

    def _note_inputs_read(self, op):
        """A stateful op run in Python reads its inputs: those made in the step are
        Output Fetching points."""
        for t in op._inputs:
            self.note_read(t)

    def note_read(self, t):
        src = self._produced.get(id(t))
        if src is not None:
            self.trace.reads.setdefault(src, len(self.trace.ops))

    def note_shape_read(self, t):
        src = self._produced.get(id(t))
        if src is not None:
            self.trace.shape_reads.setdefault(src, len(self.trace.ops))

    def replaying(self, location):
        """Record the next op at ``location`` (an op re-run after a fallback, at the
        location it was matched at; ``None`` ends it)."""
        self._replay_location = location

    def alias(self, op, handles):
        """``handles`` (the tensors the program holds for ``op``'s outputs, None for one
        that is gone) stand for ``op``'s outputs from now on."""
        src = self._produced.get(id(op._outputs[0])) if op._outputs else None
        if src is None:
            return
        for k, h in enumerate(handles):
            if h is not None:
                self._produced[id(h)] = (src[0], k)
                self._keep.append(h)

    def note_fetched(self, i, k, position):
        self.trace.reads.setdefault((i, k), position)

    # -- the end of the step -----------------------------------------------------------
    def finish(self) -> Trace:
        """Stop recording and return the trace, with ``alive`` filled in.

        An output is alive when something other than the recorded ops references it:
        executed ops keep their inputs while recording (for tapes), so every value
        reaches back to its whole history; those references are counted and set aside
        (after a garbage collection, which frees dead op/output cycles that hold
        references of their own).
        """
        if _ACTIVE.recorder is self:
            _ACTIVE.recorder = None
        self.locator.release()    # a frame it holds would keep that frame's values alive
        trace = self.trace
        keep, produced = self._keep, self._produced
        self._keep, self._produced, self._fed = [], {}, []
        internal: dict = {}
        for op in self._ops:
            for t in op._inputs:
                internal[id(t)] = internal.get(id(t), 0) + 1
        self._ops = []
        # A step run by df.function runs with the collector paused (step.py), so what it
        # made is all in the youngest generation: collecting that one is enough, and
        # costs the step's objects, not a full pass over the process (100-300 ms here).
        gc.collect(0 if not gc.isenabled() else 2)
        alive = set()
        for t in keep:
            # References: the list ``keep``, this loop's variable, getrefcount's argument,
            # the producer's outputs list (not for a handle: its op is held weakly).
            base = 3 if _is_handle(t) else 4
            if sys.getrefcount(t) - base - internal.get(id(t), 0) > 0:
                alive.add(produced[id(t)])
        del t
        trace.alive = alive
        return trace


def gradient_between(ops, sources, targets) -> set:
    """Indices of the ops in ``ops`` (anything with ``inputs`` wired as in a trace) on a
    path from a source (``("v", name)`` or ``("n", i, k)``) to a target op index: the ops
    ``df.gradients`` differentiates.

    >>> class Op:
    ...     def __init__(self, *inputs): self.inputs = inputs
    >>> ops = [Op(("v", "w")), Op(("n", 0, 0)), Op(("f",)), Op(("n", 1, 0), ("n", 2, 0))]
    >>> sorted(gradient_between(ops, [("v", "w")], [3]))
    [0, 1, 3]
    """
    source_set = set(sources)
    reached: set = set()
    for i, op in enumerate(ops):
        for src in op.inputs:
            if src in source_set or (src[0] == "n" and src[1] in reached):
                reached.add(i)
                break
    needed = set(targets)
    for i in range(len(ops) - 1, -1, -1):
        if i in needed:
            for src in ops[i].inputs:
                if src[0] == "n":
                    needed.add(src[1])
    return reached & needed


def _is_handle(t) -> bool:
    return type(t) is not TracedTensor and type(t) is not EagerTensor


def detach(recorder):
    """Stop ``recorder`` noting Python reads (its step ended without a trace)."""
    if _ACTIVE.recorder is recorder:
        _ACTIVE.recorder = None

