"""The graph IR: :class:`Graph`, :class:`Operation` and :class:`Tensor`.

A graph is a list of operations in creation order. Each operation has typed
inputs (tensors produced by other operations), control inputs (operations that
must run first), attributes and outputs. Graphs may contain cycles only through
``NextIteration`` back edges, which the while-loop builder closes with
:meth:`Operation.update_input`.

>>> g = Graph()
>>> with g.as_default():
...     a = df.constant(1.0)
...     b = a + a
>>> b.name, b.op.type
('add:0', 'AddV2')
"""
from __future__ import annotations

import contextlib
import itertools
import re
import threading

from .. import dtypes as _dtypes
from .device_spec import canonical_device
from .op_registry import get_op_def
from .tensor_shape import TensorShape, as_shape

__all__ = ["Graph", "Operation", "Tensor", "get_default_graph", "reset_default_graph",
           "name_scope", "control_dependencies", "device", "get_default_session",
           "default_session"]

_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/>]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\-/>]*$")

# Tensor operator overloads are installed by dataflow.ops once the op wrappers exist,
# so that this module does not import the op library.
_OPERATOR_TABLE: dict = {}
# Checks run on every new op's inputs (the control-flow package registers the
# "inputs from another loop" check here, keeping this module free of it).
_INPUT_CHECKS: list = []
# The DOT writer behind Graph.to_dot: dataflow.viz registers it when imported (the
# package's __init__ imports viz), so this module needs no import of the drawing code.
_DOT_WRITER: list = []


class Tensor:
    """A symbolic handle to one output of an :class:`Operation`.

    Tensors carry a static dtype and a (possibly partial) static shape; their
    values exist only while a :class:`~dataflow.Session` runs the graph.
    """

    __slots__ = ("_op", "_value_index", "_dtype", "_shape", "_consumers", "__weakref__")
    __array_priority__ = 100  # make NumPy defer to our operators: np.float32(2) * t

    def __init__(self, op: "Operation", value_index: int, dtype, shape):
        self._op = op
        self._value_index = value_index
        self._dtype = _dtypes.as_dtype(dtype)
        self._shape = as_shape(shape)
        self._consumers: list[Operation] = []

    op = property(lambda self: self._op, doc="The operation that produces this tensor.")
    value_index = property(lambda self: self._value_index)
    dtype = property(lambda self: self._dtype)
    graph = property(lambda self: self._op._graph)
    device = property(lambda self: self._op.device)

    @property
    def name(self) -> str:
        return f"{self._op.name}:{self._value_index}"

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape) -> None:
        """Refine the static shape; raises ValueError if incompatible."""
        self._shape = self._shape.merge_with(as_shape(shape))

    def consumers(self) -> list["Operation"]:
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        """Run this tensor in ``session`` (default: the current default session)."""
        session = session or get_default_session()
        if session is None:
            raise ValueError("Cannot evaluate tensor: no default session is registered. "
                             "Use `with sess.as_default():` or pass session=")
        return session.run(self, feed_dict)

    def __repr__(self):
        return f"<df.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    def __hash__(self):
        return id(self)

    def __eq__(self, other):  # identity, as TF1 graph tensors
        return self is other

    def __ne__(self, other):
        return self is not other

    def __bool__(self):
        raise TypeError("Using a df.Tensor as a Python bool is not allowed. Use df.cond to "
                        "branch on a tensor's value.")

    def __iter__(self):
        raise TypeError("Tensor objects are not iterable when building a graph; index them "
                        "with t[i] or use df.unstack-style ops.")

    def __len__(self):
        raise TypeError("len() of a symbolic Tensor is not defined; use df.shape(t)[0].")

    def __index__(self):
        raise TypeError("A symbolic Tensor cannot be used as a Python index.")


def _make_operator(name):
    def method(self, *args):
        return _OPERATOR_TABLE[name](self, *args)
    method.__name__ = name
    return method


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__neg__", "__abs__", "__matmul__",
              "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__",
              "__or__", "__ror__", "__invert__", "__getitem__"):
    setattr(Tensor, _name, _make_operator(_name))


class Operation:
    """A node of the graph: an op type, inputs, control inputs, attributes and outputs."""

    __slots__ = ("_graph", "_id", "_name", "_type", "_inputs", "_outputs", "_control_inputs",
                 "_control_outputs", "_attrs", "_device", "_control_flow_context", "_op_def",
                 "__weakref__")

    def __init__(self, graph: "Graph", op_type: str, name: str, inputs, attrs, device: str):
        self._graph = graph
        self._id = next(graph._id_counter)
        self._name = name
        self._type = op_type
        self._op_def = get_op_def(op_type)
        self._inputs: list[Tensor] = list(inputs)
        self._attrs = dict(attrs or {})
        self._device = device
        self._control_inputs: list[Operation] = []
        self._control_outputs: list[Operation] = []
        self._control_flow_context = None
        self._outputs: list[Tensor] = []
        for t in self._inputs:
            t._consumers.append(self)

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    graph = property(lambda self: self._graph)
    device = property(lambda self: self._device)
    outputs = property(lambda self: list(self._outputs))
    inputs = property(lambda self: tuple(self._inputs))
    control_inputs = property(lambda self: list(self._control_inputs))
    op_def = property(lambda self: self._op_def)

    @property
    def node_def(self):
        return self

    @property
    def attrs(self) -> dict:
        return dict(self._attrs)

    def get_attr(self, name: str):
        """The value of attribute ``name``; ValueError if the op has no such attribute."""
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation '{self._name}' ({self._type}) has no attr named "
                             f"'{name}'.") from None

    def _set_attr(self, name, value):
        self._attrs[name] = value
        self._graph._bump()

    def _set_device(self, device: str):
        self._device = device
        self._graph._bump()

    def values(self):
        return tuple(self._outputs)

    # -- mutation used by the control-flow builders and raw-loop users ---------------------
    def update_input(self, index: int, tensor: Tensor) -> None:
        """Replace input ``index`` by ``tensor`` (closes the back edge of a raw loop).

        >>> e = df.ops.enter(df.constant(0), frame_name="f")
        >>> m, _ = df.ops.merge([e, e])
        >>> nxt = df.ops.next_iteration(m + 1)
        >>> m.op.update_input(1, nxt)        # m.op._update_input, TF's name, works too
        >>> [t.op.type for t in m.op.inputs]
        ['Enter', 'NextIteration']
        """
        if not isinstance(tensor, Tensor):
            raise TypeError(f"update_input expects a Tensor, got {type(tensor).__name__}")
        if tensor.graph is not self._graph:
            raise ValueError("Tensor must be from the same graph as the operation.")
        if not 0 <= index < len(self._inputs):
            raise IndexError(f"Operation '{self._name}' has {len(self._inputs)} inputs; "
                             f"index {index} is out of range")
        old = self._inputs[index]
        if old.dtype is not tensor.dtype:
            raise TypeError(f"Cannot update input {index} of '{self._name}' ({self._type}): "
                            f"dtype {tensor.dtype.name} != {old.dtype.name}")
        old._consumers.remove(self)
        self._inputs[index] = tensor
        tensor._consumers.append(self)
        self._graph._bump()

    _update_input = update_input

    def _add_control_input(self, op: "Operation") -> None:
        if not isinstance(op, Operation):
            raise TypeError(f"Control input must be an Operation, got {type(op).__name__}")
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            op._control_outputs.append(self)
            self._graph._bump()

    def _add_control_inputs(self, ops) -> None:
        for op in ops:
            self._add_control_input(op)

    def _remove_all_control_inputs(self) -> None:
        for op in self._control_inputs:
            op._control_outputs.remove(self)
        self._control_inputs = []
        self._graph._bump()

    def _get_control_flow_context(self):
        return self._control_flow_context

    def _set_control_flow_context(self, ctx) -> None:
        self._control_flow_context = ctx

    def run(self, feed_dict=None, session=None):
        """Run this operation in ``session`` (default: the default session)."""
        session = session or get_default_session()
        if session is None:
            raise ValueError("Cannot run operation: no default session is registered.")
        session.run(self, feed_dict)

    def __repr__(self):
        return f"<df.Operation '{self._name}' type={self._type}>"


class Graph:
    """A dataflow graph. Use :meth:`as_default` to build ops into it.

    >>> g = Graph()
    >>> with g.as_default():
    ...     x = df.placeholder(df.float32, name="x")
    >>> g.get_tensor_by_name("x:0") is x
    True
    """

    def __init__(self):
        self._ops: list[Operation] = []
        self._ops_by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._id_counter = itertools.count()
        self._name_stack = ""
        self._control_dependencies_stack: list[_ControlDependenciesController] = []
        self._device_stack: list[str] = []
        self._control_flow_context = None
        self._collections: dict[str, list] = {}
        self._version = 0
        self._lock = threading.RLock()
        self._frame_counter = itertools.count()
        self._finalized = False
        self.seed = None  # the graph-level random seed (framework.random_seed)

    # -- bookkeeping ----------------------------------------------------------------------
    def _bump(self):
        self._version += 1

    @property
    def version(self) -> int:
        """Incremented on every change; the Session's plan cache keys on it."""
        return self._version

    def finalize(self):
        """Make the graph read-only (new ops raise RuntimeError)."""
        self._finalized = True

    @property
    def finalized(self) -> bool:
        return self._finalized

    @contextlib.contextmanager
    def as_default(self):
        """Make this graph the default graph inside a ``with`` block."""
        _default_graph_stack.stack.append(self)
        try:
            yield self
        finally:
            _default_graph_stack.stack.pop()

    # -- names ----------------------------------------------------------------------------
    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """``name`` inside the current name scope, made unique with TF's ``_1`` suffixes."""
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        count = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = count + 1
        if count > 0:
            base = key
            while True:
                candidate = f"{base}_{count}"
                if candidate not in self._names_in_use:
                    break
                count += 1
            if mark_as_used:
                self._names_in_use[candidate] = 1
            name = f"{name}_{count}"
        return name

    def get_name_scope(self) -> str:
        return self._name_stack

    @contextlib.contextmanager
    def name_scope(self, name):
        """Push a name scope; names ending in ``/`` are used verbatim (reentering a scope)."""
        old = self._name_stack
        if name is None or name == "":
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            if not _VALID_SCOPE_NAME.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    # -- devices and control dependencies -------------------------------------------------
    @contextlib.contextmanager
    def device(self, device_name):
        """Record ``device_name`` (e.g. ``"/cpu:1"``) on ops created inside the block."""
        self._device_stack.append(canonical_device(device_name) if device_name else "")
        try:
            yield
        finally:
            self._device_stack.pop()

    def _current_device(self) -> str:
        return self._device_stack[-1] if self._device_stack else ""

    def control_dependencies(self, control_inputs):
        """Ops created inside the block get control inputs on ``control_inputs``.

        ``None`` clears the dependencies collected so far (and, as in TF, lets
        ops escape the current control-flow context's pivot).
        """
        if control_inputs is None:
            return _ControlDependenciesController(self, None)
        ops = []
        for c in control_inputs:
            if hasattr(c, "_as_graph_element"):
                c = c._as_graph_element()
            if isinstance(c, Tensor):
                c = c.op
            if not isinstance(c, Operation):
                raise TypeError(f"Control input must be an Operation or Tensor: {c!r}")
            if c.graph is not self:
                raise ValueError(f"Control input {c.name} is from a different graph")
            ops.append(c)
        return _ControlDependenciesController(self, ops)

    def _current_control_dependencies(self, input_ops) -> list[Operation]:
        """Control inputs a new op with data inputs ``input_ops`` gets from the stack.

        As in TF, a controller is skipped when one of the inputs was itself created
        under it: the dependency then already holds through that input.
        """
        ret = []
        for controller in self._control_dependencies_stack:
            if any(op in controller.seen for op in input_ops):
                continue
            for op in controller.control_inputs:
                if op not in input_ops and op not in ret:
                    ret.append(op)
        return ret

    def _record_op_seen_by_control_dependencies(self, op: Operation) -> None:
        for controller in self._control_dependencies_stack:
            controller.seen.add(op)

    def _get_control_flow_context(self):
        return self._control_flow_context

    def _set_control_flow_context(self, ctx):
        self._control_flow_context = ctx

    # -- op creation ----------------------------------------------------------------------
    def create_op(self, op_type: str, inputs, attrs=None, name=None, *,
                  output_specs=None) -> Operation:
        """Create an op of a registered type. Usually called through the op wrappers.

        ``output_specs`` overrides the op definition's inference with
        ``[(dtype, shape), ...]`` (used by ops whose outputs are known only to
        their builder).
        """
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        with self._lock:
            for t in inputs:
                if not isinstance(t, Tensor):
                    raise TypeError(f"Input to {op_type} must be a Tensor, got {t!r}")
                if t.graph is not self:
                    raise ValueError(f"Tensor {t.name} must be from the same graph as the "
                                     f"{op_type} op being created.")
            base = name or op_type
            if base.endswith("/"):
                # A scope name ("w/") names the op exactly, as in TF: a Variable's
                # handle is "w" while its helpers live under "w/".
                full_name = base[:-1]
                if full_name in self._ops_by_name:
                    raise ValueError(f"Duplicate node name in graph: '{full_name}'")
            else:
                if not _VALID_OP_NAME.match(base.split("/")[-1] or "x"):
                    raise ValueError(f"'{base}' is not a valid node name")
                full_name = self.unique_name(base)
            op = Operation(self, op_type, full_name, inputs, attrs, self._current_device())
            specs = output_specs if output_specs is not None else op._op_def.infer(op)
            op._outputs = [Tensor(op, i, dt, sh) for i, (dt, sh) in enumerate(specs)]
            input_ops = {t.op for t in inputs}
            for c in self._current_control_dependencies(input_ops):
                op._add_control_input(c)
            self._ops.append(op)
            self._ops_by_name[full_name] = op
            self._record_op_seen_by_control_dependencies(op)
            ctx = self._control_flow_context
            op._control_flow_context = ctx
            if _INPUT_CHECKS:
                for t in op._inputs:
                    for check in _INPUT_CHECKS:
                        check(op, t.op)
            if ctx is not None:
                ctx.AddOp(op)
            self._bump()
            return op

    # -- lookup ---------------------------------------------------------------------------
    def to_dot(self, name="dataflow") -> str:
        """Graphviz DOT text of this graph: loop frames as clusters, devices as colours
        (see :mod:`dataflow.viz`). ``open("g.dot", "w").write(g.to_dot())``."""
        if not _DOT_WRITER:
            raise RuntimeError("Graph.to_dot needs dataflow.viz: `import dataflow` loads it")
        return _DOT_WRITER[0](self, name)

    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        """The op called ``name``: KeyError if absent, ValueError for a tensor name."""
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings, got {name!r}")
        if ":" in name:
            raise ValueError(f"Name '{name}' appears to refer to a Tensor, not an Operation.")
        try:
            return self._ops_by_name[name]
        except KeyError:
            raise KeyError(f"The name '{name}' refers to an Operation not in the graph.") \
                from None

    def get_tensor_by_name(self, name: str) -> Tensor:
        """The tensor called ``name`` (``"op:index"``): KeyError if absent, ValueError if
        ``name`` is not a tensor name."""
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings, got {name!r}")
        op_name, sep, idx = name.rpartition(":")
        if not sep or not idx.isdigit() or ":" in op_name:
            raise ValueError(f"The name '{name}' looks like an (invalid) Operation name, "
                             "not a Tensor name. Tensor names must be of the form "
                             "'<op_name>:<output_index>'.")
        op = self.get_operation_by_name(op_name)
        i = int(idx)
        if i >= len(op._outputs):
            raise KeyError(f"The name '{name}' refers to a Tensor which does not exist. "
                           f"The operation '{op_name}' has {len(op._outputs)} outputs.")
        return op._outputs[i]

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        """Resolve a Tensor, Operation, Variable or name string to a graph element."""
        if hasattr(obj, "_as_graph_element"):
            obj = obj._as_graph_element()
        if isinstance(obj, str):
            if ":" in obj and allow_tensor:
                return self.get_tensor_by_name(obj)
            if allow_operation:
                return self.get_operation_by_name(obj)
            raise ValueError(f"Name '{obj}' refers to an Operation, not a Tensor")
        if isinstance(obj, Tensor) and allow_tensor or isinstance(obj, Operation) \
                and allow_operation:
            if obj.graph is not self:
                raise ValueError(f"{obj!r} is not an element of this graph.")
            return obj
        raise TypeError(f"Can not convert a {type(obj).__name__} into a graph element.")

    # -- collections ----------------------------------------------------------------------
    def add_to_collection(self, name: str, value) -> None:
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value) -> None:
        """Add ``value`` to each collection in ``names`` (a name or a list of them)."""
        for name in ([names] if isinstance(names, str) else set(names)):
            self.add_to_collection(name, value)

    def get_collection(self, name: str, scope=None) -> list:
        """A copy of collection ``name``; with ``scope``, only items whose name matches
        it at the start (a regular expression, as TF's ``re.match``)."""
        items = list(self._collections.get(name, []))
        if scope is not None:
            pattern = re.compile(scope)
            items = [v for v in items
                     if isinstance(getattr(v, "name", None), str) and pattern.match(v.name)]
        return items

    def get_collection_ref(self, name: str) -> list:
        """The list behind collection ``name`` itself (created empty if absent)."""
        return self._collections.setdefault(name, [])

    def get_all_collection_keys(self) -> list:
        return [k for k in self._collections if isinstance(k, str)]

    def clear_collection(self, name: str) -> None:
        self._collections.pop(name, None)

    def _next_frame_id(self) -> int:
        return next(self._frame_counter)


class _ControlDependenciesController:
    def __init__(self, graph: Graph, control_inputs):
        self._graph = graph
        self._new_stack = control_inputs is None
        self.control_inputs = control_inputs or []
        self.seen: set = set()   # ops created under this controller
        self._old_stack = None
        self._old_ctx = None

    def __enter__(self):
        g = self._graph
        if self._new_stack:
            self._old_stack = g._control_dependencies_stack
            g._control_dependencies_stack = []
            self._old_ctx = g._control_flow_context
            g._control_flow_context = None
        g._control_dependencies_stack.append(self)
        return self

    def __exit__(self, *exc):
        g = self._graph
        g._control_dependencies_stack.pop()
        if self._new_stack:
            g._control_dependencies_stack = self._old_stack
            g._control_flow_context = self._old_ctx
        return False


class _DefaultGraphStack(threading.local):
    def __init__(self):
        self.stack: list[Graph] = []
        self.global_default = None


_default_graph_stack = _DefaultGraphStack()
_global_default_graph = [Graph()]


def get_default_graph() -> Graph:
    """The innermost ``as_default`` graph of this thread, else the global default graph."""
    stack = _default_graph_stack.stack
    return stack[-1] if stack else _global_default_graph[0]


def reset_default_graph() -> None:
    """Replace the global default graph by a new, empty one."""
    if _default_graph_stack.stack:
        raise AssertionError("Do not use reset_default_graph() inside a graph.as_default() "
                             "block.")
    # In a program made eager (enable_eager_execution) the new default graph is eager too.
    _global_default_graph[0] = type(_global_default_graph[0])()


# The default-session stack lives here, beside the default-graph stack (as in TF's
# ops.py): Tensor.eval and Operation.run read it, and Session.as_default pushes onto it.
_default_session = threading.local()


def get_default_session():
    """The innermost ``sess.as_default()`` session of this thread, or None.

    >>> get_default_session() is None
    True
    """
    stack = getattr(_default_session, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def default_session(session):
    """Make ``session`` this thread's default session inside the block (what
    ``Session.as_default`` does); yields ``session``.

    >>> with default_session("a session") as s:
    ...     get_default_session() == s
    True
    """
    stack = getattr(_default_session, "stack", None)
    if stack is None:
        stack = _default_session.stack = []
    stack.append(session)
    try:
        yield session
    finally:
        stack.remove(session)


def name_scope(name, default_name=None, values=None):
    """``with df.name_scope("layer1"):`` prefixes op names with ``layer1/``."""
    if name is None:
        name = default_name
    return get_default_graph().name_scope(name)


def control_dependencies(control_inputs):
    """``with df.control_dependencies([a, b]):`` makes new ops run after ``a`` and ``b``."""
    return get_default_graph().control_dependencies(control_inputs)


def device(device_name):
    """``with df.device("/cpu:1"):`` places new ops on that device."""
    return get_default_graph().device(device_name)
