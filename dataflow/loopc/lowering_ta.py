"""TensorArrays inside compiled frames: the TensorArray ops' lowerings and their state.

A TensorArray used in a frame (read, written, gathered, scattered, sized, or its gradient
array made with ``TensorArrayGradV3``) comes in as a loop invariant: its handle is the
``TensorArrayResource`` the step made outside the loop. The compiled code gets it as one
tuple ``(buf, st, es, m)`` (see :mod:`.nbhelpers_array`): every element in one
preallocated array that grows by doubling, as the stacks do, a flag byte per element
(written, holds a value, read, cleared), the partial element shape and the array's
scalars (size, dynamic size, clear after read, gradient array, ...). The helpers apply
``TensorArrayResource``'s rules one for one; where it raises (an index out of range, a
second write, a read of a cleared or an unwritten element whose shape is not known, a
shape that does not fit) the compiled code raises ``Fallback`` and the frame re-runs
interpreted, so the error is the interpreter's own, class and message. After the
compiled code returns, the elements go back to the resource (their values views of the
buffer), flags, size and shape knowledge with them.

Handles and flows keep their meaning: the handle is a name for the slot (its value in
the generated code is ``None``); the flow is an ordinary float scalar, and each access
returns or waits for it as the kernels do. A gradient array made inside the frame (the
gradient loop's ``TensorArrayGradV3``) is a slot of its own, keyed by the forward array's
Enter and the gradient's source: the runner passes the existing gradient array, or the
state the kernel would give a new one, and makes it for real only if
``TensorArrayGradV3`` ran.

Not lowered (the frame stays interpreted, ``RunMetadata.interpreted_frames`` says why):
a TensorArray made inside the frame, Concat/Split/Close, elements of unknown rank, an
array written and differentiated in the same frame. At run time the frame is handed to
the interpreter when the array's elements differ in shape (``infer_shape=False``).

>>> sorted(t for t in LOWERINGS if t.startswith("TensorArray"))[:3]
['TensorArrayGatherV3', 'TensorArrayGradV3', 'TensorArrayReadV3']
"""
from __future__ import annotations

import numpy as np

from dataflow.framework import op_registry as R
# The element record and shape test of the kernel's resource: the compiled state is
# committed back into that very resource.
from dataflow.kernels.numpy_cpu.tensor_array import (TensorArrayResource, _Element,
                                                     _fully_defined)

from .lowering import LOWERINGS, RESOURCE_KINDS, _dtype_name, register_lowering

__all__ = ["LOWERINGS", "TensorArraySlots"]

# Positions in the state's flag bytes and scalars (nbhelpers_array's TA_* constants; kept
# here as plain numbers so that the code generator does not import Numba).
_W, _V, _R, _C = 1, 2, 4, 8
(_N, _FIXED, _EFD, _MADE, _DISALLOWED, _DYNAMIC, _CLEAR, _GRAD, _IDENTICAL) = range(9)
_META = 9

_ELEMENT_OPS = ("TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3",
                "TensorArrayScatterV3")
_WRITES = ("TensorArrayWriteV3", "TensorArrayScatterV3")
_TA_OPS = _ELEMENT_OPS + ("TensorArraySizeV3", "TensorArrayGradV3")


def _unsupported(message):
    from .codegen import Unsupported as CodegenUnsupported   # (codegen imports this module)
    return CodegenUnsupported(message)


# -- which array an op touches -----------------------------------------------------------------

def _slot_key(gen, handle):
    """``(root Enter, None)`` for a TensorArray that entered the top-level frame, or
    ``(root Enter, source)`` for its gradient array made in the frame."""
    t = handle
    while True:
        op = t.op
        if op in gen.top_enters:
            return op, None
        if op.type == "TensorArrayGradV3":
            root, source = _slot_key(gen, op._inputs[0])
            if source is not None:
                raise _unsupported(f"'{op.name}': the gradient array of a gradient array")
            return root, op.get_attr("source")
        if op._op_def.role in (R.ENTER, R.SWITCH) or op._op_def.forwards_input:
            t = op._inputs[0]
            continue
        raise _unsupported(f"TensorArray '{handle.name}' does not come from an Enter of "
                           f"the frame (made by '{op.name}' ({op.type}) inside the loop)")


def _op_key(gen, op):
    if op.type == "TensorArrayGradV3":
        root, source = _slot_key(gen, op._inputs[0])
        if source is not None:
            raise _unsupported(f"'{op.name}': the gradient array of a gradient array")
        key = root, op.get_attr("source")
    else:
        key = _slot_key(gen, op._inputs[0])
    # Two Enters of one outer handle carry one array: one slot (the first Enter's).
    root = gen.ta_roots.setdefault(key[0]._inputs[0], key[0])
    return root, key[1]


def _element(op):
    """``(dtype name, element rank)`` an element op says, or None for the others."""
    t = op.type
    if t == "TensorArrayReadV3":
        return _dtype_name(op._outputs[0]), op._outputs[0].shape.ndims
    if t == "TensorArrayWriteV3":
        return _dtype_name(op._inputs[2]), op._inputs[2].shape.ndims
    if t == "TensorArrayGatherV3":
        rank = op._outputs[0].shape.ndims
        return _dtype_name(op._outputs[0]), None if rank is None else rank - 1
    if t == "TensorArrayScatterV3":
        rank = op._inputs[2].shape.ndims
        return _dtype_name(op._inputs[2]), None if rank is None else rank - 1
    return None


def _all_ops(loop):
    yield from loop.ops
    for child in loop.children.values():
        yield from _all_ops(child)


class TensorArraySlots:
    """The resource kind ``"ta"``: the code generator's side (:meth:`claim`,
    :meth:`finish`) and the runner's (:meth:`argument`, :meth:`commit`)."""

    # -- code generation --------------------------------------------------------------------
    @staticmethod
    def claim(gen) -> set:
        """Declare a parameter per TensorArray slot of ``gen``'s frame; the Enters whose
        handles the slots take (not to be treated as stacks or variables)."""
        slots: dict = {}
        gen.ta_roots = {}
        for op in _all_ops(gen.top):
            if op.type in _TA_OPS:
                slots.setdefault(_op_key(gen, op), []).append(op)
        for (root, source), ops in slots.items():
            if source is not None and (root, None) in slots:
                raise _unsupported(f"TensorArray '{root._inputs[0].name}' and its gradient "
                                   "array are used in one frame")
        gen.ta_slots = {}
        for k, ((root, source), ops) in enumerate(slots.items()):
            if not root.get_attr("is_constant"):
                raise _unsupported(f"TensorArray Enter '{root.name}' is a loop variable")
            found = {_element(op) for op in ops if op.type in _ELEMENT_OPS}
            if len(found) > 1:
                raise _unsupported(f"TensorArray '{root._inputs[0].name}' is accessed with "
                                   f"different element dtypes or ranks {sorted(found, key=str)}")
            dtype, rank = found.pop() if found else (None, None)
            if dtype is not None and rank is None:
                raise _unsupported(f"TensorArray '{root._inputs[0].name}': elements of "
                                   "unknown rank")
            name = gen.param(("ta", root, source, rank, dtype), f"ta{k}")
            parts = tuple(f"ta{k}_{p}" for p in "bsem")
            gen.emit(1, f"{', '.join(parts)} = {name}")
            gen.ta_slots[(root, source)] = parts
        return {e for e in gen.top_enters if e._inputs[0] in gen.ta_roots}

    @staticmethod
    def finish(gen):
        """The returned state of each slot, in parameter order."""
        exprs, results = [], []
        for key, parts in getattr(gen, "ta_slots", {}).items():
            exprs.append(f"({', '.join(parts)})")
            results.append(("ta", key))
        return exprs, results

    # -- running ------------------------------------------------------------------------------
    @staticmethod
    def argument(desc, value):
        """``(state tuple, record)`` for the compiled code, or ``(None, why not)``."""
        _, root, source, rank, dtype = desc
        if not isinstance(value, TensorArrayResource):
            return None, f"'{root._inputs[0].name}' is not a TensorArray"
        forward, virtual = value, False
        if source is None:
            ta = value
        else:
            if value.closed:
                return None, f"TensorArray '{value.name}' is closed"
            ta = value.grads.get(source)
            if ta is None:
                if value.gradients_disallowed:
                    return None, f"TensorArray '{value.name}' allows no gradient array"
                ta, virtual = _new_gradient_array(value, source), True
        if ta.closed:
            return None, f"TensorArray '{ta.name}' is closed"
        if dtype is not None and ta.dtype != np.dtype(dtype):
            return None, f"TensorArray '{ta.name}' holds {ta.dtype.name}, not {dtype}"
        state = _pack(ta, rank, dtype)
        if isinstance(state, str):
            return None, f"TensorArray '{ta.name}': {state}"
        return state, (forward, source, ta, virtual, rank)

    @staticmethod
    def commit(record, state):
        """Write the compiled code's final state back into the resource."""
        forward, source, ta, virtual, rank = record
        buf, st, es, m = state
        if virtual:
            if not m[_MADE]:
                return   # TensorArrayGradV3 never ran: no gradient array, nothing read
            ta = forward.gradient_array(source, forward.name)
        if rank is None:
            return       # made or sized only: its elements were not touched
        _unpack(ta, buf, st, m)


RESOURCE_KINDS["ta"] = TensorArraySlots


def _new_gradient_array(forward, source):
    """The gradient array ``forward.gradient_array(source, ...)`` would make, made
    aside (the runner makes the real one only if TensorArrayGradV3 runs)."""
    grad = TensorArrayResource(f"{forward.name}@{source}", forward.dtype,
                               len(forward.elements), forward.element_shape, False, True,
                               forward.identical_element_shapes, is_grad=True,
                               marked_size=forward.marked_size)
    for mine, theirs in zip(grad.elements, forward.elements):
        if theirs.written:
            mine.shape, mine.written = theirs.shape, True
    return grad


def _pack(ta, rank, dtype):
    """The state tuple of ``ta`` (elements copied into one buffer), or why not."""
    elements = ta.elements
    n = len(elements)
    meta = np.zeros(_META, np.int64)
    meta[_N] = n
    meta[_EFD] = _fully_defined(ta.element_shape)
    meta[_DISALLOWED] = ta.gradients_disallowed
    meta[_DYNAMIC], meta[_CLEAR] = ta.dynamic_size, ta.clear_after_read
    meta[_GRAD], meta[_IDENTICAL] = ta.is_grad, ta.identical_element_shapes
    if rank is None:   # no element access: only the size and the flags matter
        return (np.empty(0), np.zeros(0, np.uint8), np.zeros(0, np.int64), meta)
    shapes = {tuple(el.shape) for el in elements if el.written and el.shape is not None}
    if len(shapes) > 1:
        return "elements of different shapes"
    shape = shapes.pop() if shapes else (tuple(ta.element_shape) if meta[_EFD] else None)
    if shape is not None and len(shape) != rank:
        return f"elements of rank {len(shape)}, the graph says {rank}"
    if ta.element_shape is None:
        es = np.full(rank, -1, np.int64)
    elif len(ta.element_shape) != rank:
        return f"element shape {ta.element_shape}, the graph says rank {rank}"
    else:
        es = np.array([-1 if d is None else d for d in ta.element_shape], np.int64)
    meta[_FIXED] = shape is not None
    buf = np.empty((n,) + (shape if shape is not None else (0,) * rank), dtype)
    # Whole-array NumPy calls rather than a Python statement per element (an RNN's
    # arrays hold one element per time step).
    st = np.array([(_W if el.written else 0) | (_V if el.value is not None else 0) |
                   (_R if el.read else 0) | (_C if el.cleared else 0) for el in elements],
                  np.uint8).reshape(n)
    held = [i for i, el in enumerate(elements) if el.value is not None]
    if held:
        values = [elements[i].value for i in held]
        if any(np.shape(v) != shape for v in values):
            return "elements of different shapes"
        stacked = np.asarray(values, dtype) if rank == 0 else np.stack(values)
        if len(held) == n:
            buf[...] = stacked
        else:
            buf[held] = stacked
    return buf, st, es, meta


def _unpack(ta, buf, st, m):
    shape = tuple(buf.shape[1:]) if m[_FIXED] else None
    n = int(m[_N])
    rows = list(buf[:n])        # views of the rows (NumPy scalars for scalar elements)
    elements = []
    for i, flags in enumerate(st[:n].tolist()):
        el = _Element()
        if flags & _W:
            el.written, el.shape = True, shape
        if flags & _V:
            el.value = rows[i]
        if flags & _R:
            el.read = True
        if flags & _C:
            el.cleared = True
        elements.append(el)
    ta.elements = elements
    if m[_EFD] and not _fully_defined(ta.element_shape):
        ta.element_shape = shape     # a write set it (identical element shapes)
    if m[_DISALLOWED]:
        ta.gradients_disallowed = True


# -- the lowerings -----------------------------------------------------------------------------

def _slot(e):
    return e.gen.ta_slots[_op_key(e.gen, e.op)]


def _scalar_index(op, k, what):
    t = op._inputs[k]
    if t.shape.ndims != 0:
        return f"a TensorArray {what} that is not statically a scalar"
    return None


def _numeric(op):
    dtype = _element(op)[0]
    return None if dtype else "non-numeric TensorArray elements"


@register_lowering("TensorArrayReadV3",
                   check=lambda op: _numeric(op) or _scalar_index(op, 1, "index"))
def _read(e):
    b, s, _, m = _slot(e)
    value = e.gen.fresh("v")
    e.line(f"{b}, {s}, {value} = ta_read({b}, {s}, {m}, {e.args[1]})")
    return [value]


@register_lowering("TensorArrayWriteV3",
                   check=lambda op: _numeric(op) or _scalar_index(op, 1, "index"))
def _write(e):
    b, s, es, m = _slot(e)
    e.line(f"{b}, {s} = ta_write({b}, {s}, {es}, {m}, {e.args[1]}, {e.args[2]})")
    return [e.args[3]]


def _indices_check(op):
    if op._inputs[1].shape.ndims != 1:
        return "TensorArray indices that are not statically a vector"
    return _numeric(op)


@register_lowering("TensorArrayGatherV3", check=_indices_check)
def _gather(e):
    b, s, _, m = _slot(e)
    value = e.gen.fresh("v")
    e.line(f"{b}, {s}, {value} = ta_gather({b}, {s}, {m}, {e.args[1]})")
    return [value]


@register_lowering("TensorArrayScatterV3", check=_indices_check)
def _scatter(e):
    b, s, es, m = _slot(e)
    e.line(f"{b}, {s} = ta_scatter({b}, {s}, {es}, {m}, {e.args[1]}, {e.args[2]})")
    return [e.args[3]]


@register_lowering("TensorArraySizeV3")
def _size(e):
    m = _slot(e)[3]
    return [f"np.int32({m}[{_N}])"]


@register_lowering("TensorArrayGradV3")
def _grad(e):
    e.line(f"ta_made({_slot(e)[3]})")
    return ["None", e.args[1]]
