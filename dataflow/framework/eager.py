"""Imperative (eager) execution: every op runs when it is created.

In eager mode the default graph is an :class:`EagerGraph`. Its ``create_op`` is the one
place where every op is dispatched (:func:`execute`): each op wrapper works unchanged,
builds its op through ``create_op`` and gets back an :class:`EagerOp` whose outputs are
:class:`EagerTensor`\\ s holding NumPy values. A tracer or a gradient tape hooks in at that
one place (:data:`RECORDERS`).

>>> with eager_mode():
...     x = df.constant([1.0, 2.0])
...     y = x * x + 1.0
...     executing_eagerly(), y.numpy().tolist()
(True, [2.0, 5.0])
>>> executing_eagerly()
False

Dispatch, made lean for small ops:

* the kernel of each signature (op type, input dtypes, attributes; the op name too for
  stateful ops, whose kernels keep per-node state) is built once and cached, with the
  output dtypes that shape inference gave when it was first seen;
* shape inference runs only for a new signature (its errors are raised then); later
  calls go straight to the kernel, whose errors become :mod:`dataflow.errors` classes
  naming the op, as the executor reports them in graph mode;
* shapes of eager tensors are computed from their values when asked for;
* an executed op keeps its inputs only while something records (a tape): otherwise a
  long imperative loop would keep every intermediate value alive.

The framework layer does not know kernels: the runtime installs the function that builds
a kernel for an op (:func:`set_kernel_builder`).
"""
from __future__ import annotations

import contextlib
import types

import numpy as np

from .. import dtypes as _dtypes
from .. import errors
from . import graph as _graph
from .graph import Graph, Tensor
from .op_registry import NORMAL, get_op_def
from .tensor_shape import TensorShape, as_shape

__all__ = ["EagerTensor", "EagerOp", "EagerGraph", "enable_eager_execution", "eager_mode",
           "executing_eagerly", "execute", "set_kernel_builder", "register_fast_operator",
           "RECORDERS", "VARIABLE_WATCHERS", "set_dispatcher", "execute_now"]

DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"

# Callables ``fn(op)`` called after every executed op while non-empty (gradient tapes, a
# tracer): the one hook on eager dispatch.
RECORDERS: list = []
# Callables ``fn(variable)`` called when a variable is read in eager mode while non-empty
# (tapes watch trainable variables as they are accessed, as TF's tapes do).
VARIABLE_WATCHERS: list = []
# ``build(op, resources) -> kernel callable``, installed by dataflow.runtime.eager.
_KERNEL_BUILDER: list = [None]
_NO_CONSUMERS = ()
_PY_SCALARS = (float, int, bool)
# ``convert(value, dtype) -> EagerTensor`` for Python scalars, installed by
# dataflow.framework.convert (which imports this module).
_SCALAR_CONVERTER: list = [None]
_NO_INPUTS = ()


def set_kernel_builder(build) -> None:
    """Install ``build(op, resources)``, which returns the kernel callable of an eager op
    (the runtime installs it: this layer does not import kernels)."""
    _KERNEL_BUILDER[0] = build


class EagerOp:
    """An executed op: what gradient functions and kernels read of an op (type, name,
    attributes, inputs, outputs), without a graph node behind it."""

    __slots__ = ("_graph", "_type", "_name", "_inputs", "_outputs", "_attrs", "__weakref__")

    device = DEVICE
    _control_flow_context = None
    _control_inputs = ()

    def __init__(self, graph, op_type, name, inputs, attrs):
        self._graph = graph
        self._type = op_type
        self._name = name
        self._inputs = inputs
        self._attrs = attrs
        self._outputs = []

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    graph = property(lambda self: self._graph)
    inputs = property(lambda self: tuple(self._inputs))
    outputs = property(lambda self: self._outputs)
    control_inputs = property(lambda self: [])
    op_def = property(lambda self: get_op_def(self._type))
    node_def = property(lambda self: self)

    @property
    def attrs(self) -> dict:
        return dict(self._attrs)

    def get_attr(self, name):
        try:
            return self._attrs[name]
        except KeyError:
            raise ValueError(f"Operation '{self._name}' ({self._type}) has no attr named "
                             f"'{name}'.") from None

    def values(self):
        return tuple(self._outputs)

    def _get_control_flow_context(self):
        return None

    def __repr__(self):
        return f"<df.EagerOp '{self._name}' type={self._type}>"


class EagerTensor(Tensor):
    """A tensor with a value, made by an op run in eager mode.

    It behaves as a NumPy value: ``.numpy()``, ``np.asarray(t)``, ``float(t)``,
    ``int(t)``, ``bool(t)``, ``len(t)``, iteration over dimension 0, and every Tensor
    operator (run eagerly).

    >>> with eager_mode():
    ...     t = df.constant([[1, 2], [3, 4]])
    ...     [int(row[1]) for row in t], t.shape.as_list(), int(np.asarray(t).sum())
    ([2, 4], [2, 2], 10)
    """

    __slots__ = ("_value",)

    def __init__(self, value, dtype, op=None, value_index=0):
        self._value = value
        self._dtype = dtype
        self._op = op
        self._value_index = value_index
        self._shape = None
        self._consumers = _NO_CONSUMERS

    # -- Tensor's face --------------------------------------------------------------------
    @property
    def op(self):
        op = self._op
        if op is None:  # a constant made from a value: its Const op is made when asked for
            op = self._op = EagerOp(_eager_graph(), "Const", "Const", _NO_INPUTS,
                                    {"value": self._value, "dtype": self._dtype})
            op._outputs = [self]
        return op

    graph = property(lambda self: self.op._graph)
    device = property(lambda self: DEVICE)

    @property
    def name(self) -> str:
        return f"{self.op._name}:{self._value_index}"

    @property
    def shape(self) -> TensorShape:
        s = self._shape
        if s is None:
            s = self._shape = TensorShape(np.shape(self._value))
        return s

    def get_shape(self) -> TensorShape:
        return self.shape

    def set_shape(self, shape) -> None:
        """Check that ``shape`` is compatible with the value's shape (ValueError if not)."""
        if not self.shape.is_compatible_with(as_shape(shape)):
            raise ValueError(f"Tensor's shape {self.shape} is not compatible with supplied "
                             f"shape {as_shape(shape)}")

    def consumers(self):
        return []

    # -- the value ------------------------------------------------------------------------
    def numpy(self):
        """The value as a NumPy array (a NumPy scalar for a 0-d tensor); a copy."""
        v = self._value
        if isinstance(v, np.ndarray):
            return v[()] if v.ndim == 0 else v.copy()
        return np.asarray(v, dtype=self._dtype.as_numpy_dtype)[()]

    def eval(self, feed_dict=None, session=None):
        return self.numpy()

    def __array__(self, dtype=None, copy=None):
        arr = np.asarray(self._value)
        if dtype is not None and arr.dtype != dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def __bool__(self):
        return bool(self._value)

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __index__(self):
        if not self._dtype.is_integer:
            raise TypeError(f"Only integer tensors can be used as an index, not "
                            f"{self._dtype.name}")
        return int(self._value)

    def __len__(self):
        if np.ndim(self._value) == 0:
            raise TypeError("len() of a 0-d tensor (a scalar) is not defined")
        return len(self._value)

    def __iter__(self):
        if np.ndim(self._value) == 0:
            raise TypeError("Cannot iterate over a scalar tensor.")
        for i in range(len(self._value)):
            yield self[i]

    def __format__(self, spec):
        return format(self.numpy(), spec)

    def __repr__(self):
        return (f"<df.EagerTensor: shape={tuple(self.shape.as_list())}, "
                f"dtype={self._dtype.name}, numpy={np.asarray(self._value)!r}>")

    def __str__(self):
        return (f"df.EagerTensor({np.asarray(self._value)}, shape="
                f"{tuple(self.shape.as_list())}, dtype={self._dtype.name})")

    def __reduce__(self):
        return (_rebuild, (self.numpy(), self._dtype.name))


def _rebuild(value, dtype_name):
    return EagerTensor(value, _dtypes.as_dtype(dtype_name))


class EagerGraph(Graph):
    """The default graph in eager mode: ``create_op`` executes the op at once.

    Name scopes, collections and ``control_dependencies`` work as in a graph (ops run in
    program order, so dependencies hold by themselves); the variables' storage and the
    kernel cache belong to the eager graph.
    """

    def __init__(self):
        super().__init__()
        self._kernels: dict = {}     # signature -> (kernel, output dtypes)
        self.resources: dict = {}    # variable cells and random streams, by name

    # create_op(op_type, inputs, attrs=None, name=None, output_specs=None) is execute
    # itself (installed below): one Python frame less on every op.

    def reset_random_streams(self) -> None:
        """Forget every random op's stream, so random ops restart their sequences from
        their seeds (``set_random_seed`` calls it, as TF2's ``tf.random.set_seed`` resets
        op-seeded eager ops): a seeded eager program run twice in one process draws the
        same numbers both times."""
        streams = [k for k in self.resources
                   if isinstance(k, tuple) and k[0] == "random_stream"]
        names = {key[1] for key in streams}
        for key in streams:
            del self.resources[key]
        # Stateful kernels are cached under their signature plus the op name, and hold
        # their stream: drop those of the random ops so they are rebuilt with a new one.
        for key in [k for k, entry in self._kernels.items()
                    if entry[2] and k[-1] in names]:
            del self._kernels[key]

    @contextlib.contextmanager
    def name_scope(self, name):
        """Push a name scope. Eager names are not made unique (as in TF2): nothing looks
        ops up by name, and a long imperative loop would otherwise collect a new name per
        step without end. Variables still take unique names (their storage is found by
        name): :class:`~dataflow.Variable` asks :meth:`unique_name` for one."""
        old = self._name_stack
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            new = f"{old}/{name}" if old else name
        self._name_stack = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._name_stack = old

    def control_dependencies(self, control_inputs):
        """Nothing to add: eager ops run in program order, so every op created in the
        block already runs after ``control_inputs``."""
        return contextlib.nullcontext()


def execute(graph, op_type, inputs, attrs=None, name=None, output_specs=None):
    """Run one op now; returns its :class:`EagerOp` (outputs are EagerTensors).

    The single entry of eager dispatch: :class:`EagerGraph`.create_op calls it for every
    op wrapper, and every recorder in :data:`RECORDERS` sees each executed op.
    """
    # The kernel cache key: op type, input dtypes (by identity: they are singletons, and
    # their Python-level hash would cost more than the rest), attributes, forced outputs.
    if len(inputs) == 2:  # the common binary op, without the generic loop
        a, b = inputs
        if type(a) is not EagerTensor or type(b) is not EagerTensor:
            _check_inputs(op_type, inputs)
        key = (op_type, id(a._dtype), id(b._dtype))
        values = (a._value, b._value)
    else:
        for t in inputs:
            if type(t) is not EagerTensor:
                _check_inputs(op_type, inputs)
        key = (op_type,) + tuple([id(t._dtype) for t in inputs])
        values = [t._value for t in inputs]
    if attrs:
        key += tuple(attrs.items())
    else:
        attrs = {}
    if output_specs is not None:
        key += tuple(id(dt) for dt, _ in output_specs)
    op = EagerOp(graph, op_type, name or op_type, inputs, attrs)
    kernels = graph._kernels
    try:
        entry = kernels.get(key)
    except TypeError:  # an unhashable attribute (an array): no caching
        entry = key = None
    if entry is not None and entry[2]:
        # A stateful kernel keeps per-node state (a variable cell, a random stream): one
        # kernel per node name.
        entry = kernels.get(key + (op._name,))
    if entry is None:
        entry = _prepare(graph, op, output_specs)
        if key is not None:
            kernels[key] = entry
            if entry[2]:
                kernels[key + (op._name,)] = entry
    out_dtypes = entry[1]
    try:
        result = entry[0](*values)
    except Exception as exc:
        raise _op_error(op, exc) from exc
    if len(out_dtypes) == 1:
        op._outputs = [EagerTensor(result, out_dtypes[0], op, 0)]
    elif out_dtypes:
        op._outputs = [EagerTensor(v, dt, op, i)
                       for i, (v, dt) in enumerate(zip(result, out_dtypes))]
    if RECORDERS:
        for record in RECORDERS:
            record(op)
    else:
        op._inputs = _NO_INPUTS
    return op


def register_fast_operator(method, op_type, node_name, dtypes, swap=False) -> None:
    """Let ``EagerTensor.<method>`` (``"__add__"``...) run ``op_type`` straight through
    :func:`execute` when both operands are eager tensors of one dtype in ``dtypes``: what
    the op wrapper behind the operator would build (the ops layer registers the
    operators whose wrapper does nothing else for such operands). Other operands take
    the wrapper, as graph tensors do.
    """
    accepted = frozenset(id(d) for d in dtypes)
    wrapper = _graph._OPERATOR_TABLE[method]

    def operator(self, other):
        kind = type(other)
        if id(self._dtype) in accepted and (
                kind is EagerTensor and other._dtype is self._dtype or kind in _PY_SCALARS):
            g = _graph.get_default_graph()
            if type(g) is EagerGraph:
                if kind is not EagerTensor:  # what the wrapper does: adopt our dtype
                    other = _SCALAR_CONVERTER[0](other, self._dtype)
                inputs = [other, self] if swap else [self, other]
                return execute(g, op_type, inputs, None, node_name)._outputs[0]
        return wrapper(self, other)

    operator.__name__ = method
    setattr(EagerTensor, method, operator)


EagerGraph.create_op = execute
# The dispatch that runs ops (``execute`` itself), whatever set_dispatcher installed.
execute_now = execute


def set_dispatcher(fn=None):
    """Make ``fn`` (``execute``'s signature) the eager dispatch point, or restore
    ``execute`` with None; returns the dispatcher it replaces. The ``df.function`` tracer
    installs one while the Python side of a step runs against a graph: ops are then
    matched, not run. :func:`execute_now` always runs the op.

    >>> seen = []
    >>> def logging_dispatch(graph, op_type, inputs, attrs=None, name=None,
    ...                      output_specs=None):
    ...     seen.append(op_type)
    ...     return execute_now(graph, op_type, inputs, attrs, name, output_specs)
    >>> with eager_mode():
    ...     previous = set_dispatcher(logging_dispatch)
    ...     try:
    ...         y = df.negative(df.constant([1.0]))
    ...     finally:
    ...         _ = set_dispatcher(previous)
    >>> seen, y.numpy().tolist()
    (['Neg'], [-1.0])
    """
    global execute
    previous = execute
    # The fast operators look ``execute`` up at call time; op wrappers reach it as
    # EagerGraph.create_op: both are switched.
    execute = fn if fn is not None else execute_now
    EagerGraph.create_op = execute if isinstance(execute, types.FunctionType) \
        else _as_method(execute)
    return previous


def _as_method(fn):
    """``fn`` (a bound method, say) as a function that EagerGraph.create_op can be: the
    graph comes in as ``self``."""
    def create_op(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    return create_op


def _check_inputs(op_type, inputs):
    for t in inputs:
        if type(t) is not EagerTensor:
            _check_input(op_type, t)


def _check_input(op_type, t):
    if not isinstance(t, Tensor):
        raise TypeError(f"Input to {op_type} must be a Tensor, got {t!r}")
    if not isinstance(t, EagerTensor):
        raise ValueError(f"Tensor {t.name} belongs to a graph and cannot be an input of "
                         f"the {op_type} op run eagerly; build the graph outside eager mode.")


def _prepare(graph, op, output_specs):
    """Infer the output dtypes of a new signature and build its kernel."""
    op_def = get_op_def(op._type)
    if op_def.role != NORMAL:
        raise errors.UnimplementedError(
            None, op, f"{op._type} is a graph primitive ({op_def.role}) and does not run "
            "eagerly; use df.cond / df.while_loop, which run as Python control flow")
    if output_specs is None:
        try:
            output_specs = op_def.infer(op)
        except ValueError as exc:
            if isinstance(exc, errors.OpError):
                raise
            raise errors.InvalidArgumentError(None, op, str(exc)) from exc
    out_dtypes = tuple(_dtypes.as_dtype(dt) for dt, _ in output_specs)
    op._outputs = [EagerTensor(None, dt, op, i) for i, dt in enumerate(out_dtypes)]
    build = _KERNEL_BUILDER[0]
    if build is None:
        raise RuntimeError("Eager execution needs the runtime: `import dataflow` installs it")
    return build(op, graph.resources), out_dtypes, op_def.stateful


def _op_error(op, exc):
    """The :mod:`dataflow.errors` error for ``exc`` raised by ``op``'s kernel (the classes
    the executor uses in graph mode)."""
    if isinstance(exc, errors.OpError):
        if exc.op is not None:
            return exc
        return type(exc)(None, op, exc.message)
    cls = errors.InvalidArgumentError if isinstance(
        exc, (ValueError, TypeError, IndexError, ArithmeticError, KeyError)) \
        else errors.UnknownError
    return cls(None, op, f"{type(exc).__name__}: {exc}")


def constant_tensor(value, dtype) -> EagerTensor:
    """An eager constant: the value itself, no op run (``constant`` in eager mode)."""
    return EagerTensor(value, dtype)


# -- the mode ---------------------------------------------------------------------------------
_EAGER = [None]


def _eager_graph() -> EagerGraph:
    g = _graph._global_default_graph[0]
    if type(g) is EagerGraph:  # the whole program is eager (reset_default_graph keeps it)
        return g
    if _EAGER[0] is None:
        _EAGER[0] = EagerGraph()
    return _EAGER[0]


def executing_eagerly() -> bool:
    """True when ops run as they are created (:func:`enable_eager_execution`, or inside
    :func:`eager_mode`) and no ``Graph.as_default()`` block is building a graph.

    >>> executing_eagerly()
    False
    """
    return type(_graph.get_default_graph()) is EagerGraph


def enable_eager_execution(config=None, device_policy=None, execution_mode=None) -> None:
    """Run every op eagerly from now on, in every thread (TF1's name; call it at the start
    of a program). ``Graph().as_default()`` blocks still build graphs.

    ::

        import dataflow as df
        df.enable_eager_execution()
        print(df.constant(2.0) * 3.0)      # df.EagerTensor(6.0, shape=(), dtype=float32)
    """
    g = _graph._global_default_graph[0]
    if type(g) is EagerGraph:
        return
    if g.get_operations():
        raise ValueError("enable_eager_execution must be called at program startup, before "
                         "any op is built in the default graph.")
    _graph._global_default_graph[0] = _eager_graph()


@contextlib.contextmanager
def eager_mode():
    """Run ops eagerly inside the block (in this thread).

    >>> with eager_mode():
    ...     float(df.reduce_sum(df.constant([1.0, 2.0, 3.0])))
    6.0
    """
    with _eager_graph().as_default() as g:
        yield g
