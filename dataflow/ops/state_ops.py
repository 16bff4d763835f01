"""Variables: state that lives in a Session across runs (``df.Variable``).

Variables are resource handles, as TF's resource variables: a ``VarHandleOp``
yields the handle, every read is a ``ReadVariableOp`` created where the value
is used (so a read inside a loop body sees the value of that iteration), and
``assign``/``assign_add``/``assign_sub`` return the new value.

>>> v = Variable(0.0, name="counter")
>>> inc = v.assign_add(1.0)
>>> with df.Session() as sess:
...     sess.run(global_variables_initializer())
...     [float(sess.run(inc)) for _ in range(2)]
[1.0, 2.0]
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor, register_tensor_conversion
from ..framework.graph import Tensor, get_default_graph, get_default_session
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import shape_fns

GLOBAL_VARIABLES = "variables"
TRAINABLE_VARIABLES = "trainable_variables"


@register_op("VarHandleOp", stateful=True)
def _handle_infer(op):
    return [(_dtypes.resource, TensorShape([]))]


@register_op("ReadVariableOp", stateful=True)
def _read_infer(op):
    return [(op.get_attr("dtype"), op.get_attr("shape"))]


def _assign_infer(op):
    handle, value = op.inputs
    return [(value.dtype, op.get_attr("shape"))]


for _t in ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
    register_op(_t, stateful=True)(_assign_infer)

register_op("VarIsInitializedOp", stateful=True)(shape_fns.scalar(_dtypes.bool))


class Variable:
    """A mutable tensor kept by the Session (``tf.Variable``).

    Use it wherever a tensor is expected; ``sess.run(v)`` fetches its value.
    """

    def __init__(self, initial_value=None, trainable=True, name=None, dtype=None,
                 shape=None, validate_shape=True, collections=None, constraint=None):
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        g = get_default_graph()
        with g.name_scope(name or "Variable") as scope:
            self._name = scope[:-1]
            with g.name_scope("Initializer"):
                if callable(initial_value):  # an initializer's ops live under Initializer/
                    initial_value = initial_value()
                init = convert_to_tensor(initial_value, dtype=dtype)
            self._dtype = init.dtype
            self._shape = TensorShape(shape) if shape is not None or not validate_shape \
                else init.shape
            if shape is None and not validate_shape:
                self._shape = TensorShape(None)
            # The handle is created outside any control-flow context and dependency scope:
            # a variable is graph-global state, whichever block declares it.
            with g.control_dependencies(None):
                self._handle = g.create_op("VarHandleOp", [], {
                    "dtype": self._dtype, "shape": self._shape, "shared_name": self._name},
                    name=scope).outputs[0]
            self._initial_value = init
            self._initializer_op = self._assign_op("AssignVariableOp", init, "Assign").op
            with g.name_scope("Read"):
                self._graph_element = self._read(name="ReadVariableOp")
        self._trainable = trainable
        if constraint is not None and not callable(constraint):
            raise ValueError("The `constraint` argument must be a callable.")
        # Optimizers apply it after each update: var.assign(constraint(var)).
        self._constraint = constraint
        # As TF: None means the global collection, [] means none (a variable that
        # global_variables_initializer() does not cover); trainable ones are always listed.
        collections = [GLOBAL_VARIABLES] if collections is None else list(collections)
        if trainable and TRAINABLE_VARIABLES not in collections:
            collections.append(TRAINABLE_VARIABLES)
        for c in collections:
            g.add_to_collection(c, self)

    # -- properties ------------------------------------------------------------------------
    name = property(lambda self: self._name + ":0")
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self._shape)
    graph = property(lambda self: self._handle.graph)
    op = property(lambda self: self._handle.op)
    device = property(lambda self: self._handle.device)
    handle = property(lambda self: self._handle)
    initializer = property(lambda self: self._initializer_op)
    initial_value = property(lambda self: self._initial_value)
    trainable = property(lambda self: self._trainable)
    constraint = property(lambda self: self._constraint)

    def get_shape(self):
        return self._shape

    def _read(self, name="Read"):
        return get_default_graph().create_op(
            "ReadVariableOp", [self._handle], {"dtype": self._dtype, "shape": self._shape},
            name=name).outputs[0]

    def value(self) -> Tensor:
        """A tensor reading the variable where it is used."""
        return self._read()

    def read_value(self) -> Tensor:
        """A new read of the variable (ordered by control dependencies in scope)."""
        return self._read()

    def _as_graph_element(self):
        return self._graph_element

    def _assign_op(self, op_type, value, name, validate_shape=True):
        value = convert_to_tensor(value, dtype=self._dtype)
        attrs = {"shape": self._shape}
        if not validate_shape:
            # The stored value may take another shape (tf.assign(..., validate_shape=False)).
            attrs = {"shape": value.shape, "validate_shape": False}
        elif self._shape.ndims is not None and not self._shape.is_compatible_with(value.shape):
            raise ValueError(f"Shapes {self._shape} and {value.shape} are incompatible "
                             f"(assigning to variable '{self._name}')")
        return get_default_graph().create_op(
            op_type, [self._handle, value], attrs, name=name).outputs[0]

    def assign(self, value, use_locking=False, name=None, read_value=True,
               validate_shape=True):
        """Set the variable to ``value``; returns a tensor holding the new value.
        ``validate_shape=False`` lets the value have another shape than the variable's."""
        return self._assign_op("AssignVariableOp", value, name or "Assign", validate_shape)

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        """Add ``delta``; returns a tensor holding the new value."""
        return self._assign_op("AssignAddVariableOp", delta, name or "AssignAdd")

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        """Subtract ``delta``; returns a tensor holding the new value."""
        return self._assign_op("AssignSubVariableOp", delta, name or "AssignSub")

    def is_initialized(self):
        return get_default_graph().create_op("VarIsInitializedOp", [self._handle],
                                             name="VarIsInitializedOp").outputs[0]

    def initialized_value(self):
        """The variable's value once it is initialized: its current value if it has one in
        the running Session, else its initial value (``tf.Variable.initialized_value``), to
        initialize another variable from this one.

        >>> w = Variable([1.0, 2.0])
        >>> w2 = Variable(w.initialized_value() * 2.0)
        >>> with df.Session() as sess:
        ...     sess.run(w2.initializer)   # w is not initialized: its initial value is used
        ...     sess.run(w2)
        array([2., 4.], dtype=float32)
        """
        g = get_default_graph()
        with g.control_dependencies(None):
            return _COND[0](self.is_initialized(), self.read_value,
                            lambda: self._initial_value)

    def eval(self, session=None):
        return self._graph_element.eval(session=session)

    def load(self, value, session=None):
        (session or get_default_session()).run(self.initializer,
                                               {self._initial_value: value})

    def __repr__(self):
        return f"<df.Variable '{self.name}' shape={self._shape} dtype={self._dtype.name}>"


# ``cond`` is built a layer above (dataflow.control_flow), which installs it here when it
# is imported (``import dataflow`` always does): initialized_value needs it.
_COND = [None]


def set_cond_builder(cond) -> None:
    """Install ``cond(pred, true_fn, false_fn)`` for :meth:`Variable.initialized_value`."""
    _COND[0] = cond


def _variable_to_tensor(var, dtype, name=None):
    t = var.value()
    if dtype is not None and dtype is not t.dtype:
        raise TypeError(f"Tensor conversion requested dtype {dtype.name} for variable "
                        f"{var.name} of dtype {var.dtype.name}")
    return t


register_tensor_conversion(Variable, _variable_to_tensor)


def _forward(name):
    def method(self, *args):
        return getattr(self.value(), name)(*args)
    method.__name__ = name
    return method


# Every Tensor operator (graph.py's list), so a Variable works wherever a tensor does.
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
              "__rmod__", "__pow__", "__rpow__", "__neg__", "__abs__", "__matmul__",
              "__rmatmul__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__",
              "__or__", "__ror__", "__invert__", "__getitem__"):
    setattr(Variable, _name, _forward(_name))
# NumPy scalars and arrays on the left defer to the Variable's reflected operators.
Variable.__array_priority__ = 100


def global_variables(scope=None):
    """Every Variable of the default graph."""
    return get_default_graph().get_collection(GLOBAL_VARIABLES, scope)


def trainable_variables(scope=None):
    """The trainable Variables of the default graph."""
    return get_default_graph().get_collection(TRAINABLE_VARIABLES, scope)


def variables_initializer(var_list, name="init"):
    from .control_flow_ops import group
    return group(*[v.initializer for v in var_list], name=name)


def global_variables_initializer():
    """One op that runs every variable's initializer."""
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer
