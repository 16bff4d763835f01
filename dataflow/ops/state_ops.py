"""Variables: state that lives in a Session across runs (``df.Variable``).

Variables are resource handles, as TF's resource variables: a ``VarHandleOp``
yields the handle, every read is a ``ReadVariableOp`` created where the value
is used (so a read inside a loop body sees the value of that iteration), and
``assign``/``assign_add``/``assign_sub`` return the new value.

>>> v = Variable(0.0, name="counter")
>>> inc = v.assign_add(1.0)
>>> with Session() as sess:
...     sess.run(global_variables_initializer())
...     sess.run(inc), sess.run(inc)
(1.0, 2.0)
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
                 shape=None, validate_shape=True, collections=None):
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        g = get_default_graph()
        with g.name_scope(name or "Variable") as scope:
            self._name = scope[:-1]
            if callable(initial_value):
                initial_value = initial_value()
            with g.name_scope("Initializer"):
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

    def _assign_op(self, op_type, value, name):
        value = convert_to_tensor(value, dtype=self._dtype)
        if self._shape.ndims is not None and not self._shape.is_compatible_with(value.shape):
            raise ValueError(f"Shapes {self._shape} and {value.shape} are incompatible "
                             f"(assigning to variable '{self._name}')")
        return get_default_graph().create_op(
            op_type, [self._handle, value], {"shape": self._shape}, name=name).outputs[0]

    def assign(self, value, use_locking=False, name=None, read_value=True):
        """Set the variable to ``value``; returns a tensor holding the new value."""
        return self._assign_op("AssignVariableOp", value, name or "Assign")

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        """Add ``delta``; returns a tensor holding the new value."""
        return self._assign_op("AssignAddVariableOp", delta, name or "AssignAdd")

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        """Subtract ``delta``; returns a tensor holding the new value."""
        return self._assign_op("AssignSubVariableOp", delta, name or "AssignSub")

    def is_initialized(self):
        return get_default_graph().create_op("VarIsInitializedOp", [self._handle],
                                             name="VarIsInitializedOp").outputs[0]

    def eval(self, session=None):
        return self._graph_element.eval(session=session)

    def load(self, value, session=None):
        (session or get_default_session()).run(self.initializer,
                                               {self._initial_value: value})

    def __repr__(self):
        return f"<df.Variable '{self.name}' shape={self._shape} dtype={self._dtype.name}>"


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
