"""RNN cells with TF1's math and variable names (``df.nn.rnn_cell``).

A cell maps ``(inputs, state)`` to ``(output, new_state)`` for one time step;
``dynamic_rnn`` calls it inside its while loop. Cells make their variables with
``get_variable`` at their first call, in a variable scope of their own inside the
enclosing ones, so they get TF1's names and weights line up with TF checkpoints:
``rnn/basic_lstm_cell/kernel``, ``rnn/multi_rnn_cell/cell_1/gru_cell/gates/bias``,
``bidirectional_rnn/fw/lstm_cell/kernel``, ``model/rnn/gru_cell/gates/kernel`` under a
user's ``variable_scope("model")`` ... A cell object owns its variables: calling it
again (another ``dynamic_rnn``) reuses them, as TF1's layer cells do.

The variables are made outside every loop and cond (they are graph-global state),
with TF1's default initial values: the enclosing scope's initializer or
Glorot-uniform kernels and zero biases (GRU gate biases: ones), unless an initializer
is given: an initializer, a callable ``init(shape, dtype)`` returning the initial
value, or a constant.

>>> cell = BasicLSTMCell(64)
>>> x = df.placeholder(df.float32, [8, 10, 5])      # [batch, time, depth]
>>> outputs, state = df.nn.dynamic_rnn(cell, x, dtype=df.float32)
>>> outputs.shape, state.c.shape, state.h.shape
(TensorShape([8, 10, 64]), TensorShape([8, 64]), TensorShape([8, 64]))
"""
from __future__ import annotations

import collections
import contextlib
import re

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import get_default_graph
from ..ops.array_ops import concat, zeros
from ..ops.math_ops import add, matmul, maximum, minimum, multiply, sigmoid, tanh
from ..ops.variable_scope import get_variable, variable_scope
from ..util import nest

__all__ = ["RNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell",
           "LSTMStateTuple"]


@contextlib.contextmanager
def _no_scope():
    yield


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM state: the cell state ``c`` and the output ``h``."""

    __slots__ = ()

    @property
    def dtype(self):
        return self.c.dtype


def _make_variable(name, shape, dtype, initializer):
    """``get_variable(name)`` in the current variable scope, made outside any loop, cond or
    dependency (a cell first called inside ``dynamic_rnn``'s loop builds there)."""
    g = get_default_graph()
    if initializer is not None and not callable(initializer):
        value = initializer
        initializer = lambda shape, dtype=None, **_: np.full(  # noqa: E731
            shape, value, dtype.as_numpy_dtype)
    saved = g._get_control_flow_context()
    g._set_control_flow_context(None)
    try:
        with g.control_dependencies(None):
            return get_variable(name, shape, dtype=dtype, initializer=initializer)
    finally:
        g._set_control_flow_context(saved)


def _snake_case(name: str) -> str:
    """TF's layer names from class names: ``MyLSTMCell`` -> ``my_lstm_cell``."""
    name = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


def _ones(shape, dtype, **_):
    return np.ones(shape, dtype.as_numpy_dtype)


def _zeros(shape, dtype, **_):
    return np.zeros(shape, dtype.as_numpy_dtype)


# -- the cells ---------------------------------------------------------------------------------
class RNNCell:
    """Base class: ``__call__(inputs, state) -> (output, new_state)``, ``state_size``,
    ``output_size``, ``zero_state``. Subclasses define ``build(inputs_shape)`` (making their
    variables with :meth:`add_variable`) and ``call(inputs, state)``, as TF1's layer cells.

    >>> class Doubling(RNNCell):
    ...     state_size = output_size = property(lambda self: 3)
    ...     def build(self, inputs_shape):
    ...         self._w = self.add_variable("w", [inputs_shape[-1], 3])
    ...     def call(self, inputs, state):
    ...         h = matmul(inputs, self._w) + 2.0 * state
    ...         return h, h
    """

    def __init__(self, name=None, dtype=None):
        self._name = name
        self._dtype = _dtypes.as_dtype(dtype) if dtype is not None else None
        self._scope = None
        self._built = False

    @property
    def state_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def variables(self) -> list:
        """The cell's variables (empty before its first call)."""
        return list(getattr(self, "_variables", []))

    trainable_variables = weights = variables

    def add_variable(self, name, shape, dtype=None, initializer=None):
        """A variable ``<cell scope>/name`` of the cell (TF1's ``add_variable``), made with
        ``get_variable`` outside every loop; ``initializer`` is an initializer, a callable
        ``(shape, dtype) -> value`` or a constant (default: the enclosing scope's
        initializer, else Glorot-uniform)."""
        dtype = _dtypes.as_dtype(dtype) if dtype is not None else self._dtype
        with variable_scope(self._scope, reuse=True if self._built else None,
                            auxiliary_name_scope=False):
            v = _make_variable(name, list(shape), dtype, initializer)
        self.__dict__.setdefault("_variables", []).append(v)
        return v

    add_weight = add_variable

    def __call__(self, inputs, state, scope=None):
        """``call(inputs, state)`` in the cell's variable scope, building the cell first.

        As TF1's layer cells: the first call opens the scope ``<enclosing variable
        scope>/<name>`` (the class's snake-case name made unique, ``gru_cell_1``..., when
        no ``name`` was given; under ``scope`` when one is passed), later calls reenter it
        with ``reuse=True``, so a cell used twice shares its variables."""
        if self._scope is None:
            with variable_scope(scope) if scope is not None else _no_scope():
                name = self._name or type(self).__dict__.get("_default_name") or \
                    _snake_case(type(self).__name__)
                with variable_scope(self._name, default_name=name) as vs:
                    self._scope = vs
        with variable_scope(self._scope, reuse=True if self._built else None,
                            auxiliary_name_scope=False) as vs:
            with get_default_graph().name_scope(vs.original_name_scope):
                if not self._built:
                    first = convert_to_tensor(nest.flatten(inputs)[0])
                    if self._dtype is None:
                        self._dtype = first.dtype
                    if not first.shape.ndims or first.shape[-1] is None:
                        raise ValueError(f"Expected inputs.shape[-1] to be known, saw shape: "
                                         f"{first.shape}")
                    self.build(first.shape)
                    self._built = True
                return self.call(inputs, state)

    def build(self, inputs_shape):
        """Make the cell's variables (called once, at the first call, with the static
        shape of the inputs)."""

    def zero_state(self, batch_size, dtype):
        """Zeros of ``[batch_size, size]`` for each entry of ``state_size``."""
        g = get_default_graph()
        with g.name_scope(type(self).__name__ + "ZeroState"):
            return nest.map_structure(lambda s: _zeros_2d(batch_size, s, dtype),
                                      self.state_size)

    get_initial_state = zero_state


def _zeros_2d(batch_size, size, dtype):
    from ..ops.array_ops import stack
    if isinstance(batch_size, (int, np.integer)):
        return zeros([int(batch_size), size], dtype)
    return zeros(stack([batch_size, size]), dtype)


def _linear(inputs, state, kernel, bias):
    return add(matmul(concat([inputs, state], 1), kernel), bias)


class BasicRNNCell(RNNCell):
    """``h = activation(concat([x, h]) @ kernel + bias)`` (TF1's ``BasicRNNCell``)."""

    _default_name = "basic_rnn_cell"

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None):
        super().__init__(name, dtype)
        self._num_units = num_units
        self._activation = activation or tanh

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        input_depth = inputs_shape[-1]
        self._kernel = self.add_variable("kernel", [input_depth + self._num_units,
                                                     self._num_units])
        self._bias = self.add_variable("bias", [self._num_units], initializer=_zeros)

    def call(self, inputs, state):
        output = self._activation(_linear(inputs, state, self._kernel, self._bias))
        return output, output


def _gates(matrix, n, count):
    return [matrix[:, k * n:(k + 1) * n] for k in range(count)]


class BasicLSTMCell(RNNCell):
    """TF1's ``BasicLSTMCell``: gates ``i, j, f, o`` from one kernel, ``forget_bias`` added to
    ``f``; the state is an :class:`LSTMStateTuple` ``(c, h)``."""

    _default_name = "basic_lstm_cell"

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None):
        super().__init__(name, dtype)
        if not state_is_tuple:
            raise ValueError("state_is_tuple=False is deprecated in TF1 and not supported")
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._activation = activation or tanh

    state_size = property(lambda self: LSTMStateTuple(self._num_units, self._num_units))
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        input_depth = inputs_shape[-1]
        n = self._num_units
        self._kernel = self.add_variable("kernel", [input_depth + n, 4 * n])
        self._bias = self.add_variable("bias", [4 * n], initializer=_zeros)

    def call(self, inputs, state):
        c, h = state
        i, j, f, o = _gates(_linear(inputs, h, self._kernel, self._bias), self._num_units, 4)
        forget = sigmoid(add(f, convert_to_tensor(self._forget_bias, dtype=f.dtype)))
        new_c = add(multiply(c, forget), multiply(sigmoid(i), self._activation(j)))
        new_h = multiply(self._activation(new_c), sigmoid(o))
        return new_h, LSTMStateTuple(new_c, new_h)


class LSTMCell(RNNCell):
    """TF1's ``LSTMCell``: :class:`BasicLSTMCell`'s gates with an ``initializer`` for the
    kernel, optional peepholes (``w_f_diag``, ``w_i_diag``, ``w_o_diag``), ``cell_clip``,
    and a projection ``num_proj`` of the output (``projection/kernel``, ``proj_clip``)."""

    _default_name = "lstm_cell"

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None):
        super().__init__(name, dtype)
        if not state_is_tuple:
            raise ValueError("state_is_tuple=False is deprecated in TF1 and not supported")
        self._num_units = num_units
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._activation = activation or tanh

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_proj or self._num_units)

    output_size = property(lambda self: self._num_proj or self._num_units)

    def build(self, inputs_shape):
        input_depth = inputs_shape[-1]
        n, h_depth = self._num_units, self._num_proj or self._num_units
        self._kernel = self.add_variable("kernel", [input_depth + h_depth, 4 * n],
                                          initializer=self._initializer)
        self._bias = self.add_variable("bias", [4 * n], initializer=_zeros)
        if self._use_peepholes:
            self._w_f_diag = self.add_variable("w_f_diag", [n], initializer=self._initializer)
            self._w_i_diag = self.add_variable("w_i_diag", [n], initializer=self._initializer)
            self._w_o_diag = self.add_variable("w_o_diag", [n], initializer=self._initializer)
        if self._num_proj is not None:
            self._proj_kernel = self.add_variable("projection/kernel", [n, self._num_proj],
                                                   initializer=self._initializer)

    def call(self, inputs, state):
        c_prev, m_prev = state
        i, j, f, o = _gates(_linear(inputs, m_prev, self._kernel, self._bias),
                            self._num_units, 4)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        if self._use_peepholes:
            f = add(f, multiply(self._w_f_diag, c_prev))
            i = add(i, multiply(self._w_i_diag, c_prev))
        c = add(multiply(sigmoid(add(f, forget_bias)), c_prev),
                multiply(sigmoid(i), self._activation(j)))
        if self._cell_clip is not None:
            c = _clip(c, self._cell_clip)
        if self._use_peepholes:
            o = add(o, multiply(self._w_o_diag, c))
        m = multiply(sigmoid(o), self._activation(c))
        if self._num_proj is not None:
            m = matmul(m, self._proj_kernel)
            if self._proj_clip is not None:
                m = _clip(m, self._proj_clip)
        return m, LSTMStateTuple(c, m)


def _clip(x, bound):
    bound = convert_to_tensor(bound, dtype=x.dtype)
    return minimum(maximum(x, -bound), bound)


class GRUCell(RNNCell):
    """TF1's ``GRUCell``: reset and update gates ``r, u`` (``gates/kernel``, ``gates/bias``,
    initial bias 1), candidate ``tanh(concat([x, r * h]) @ candidate/kernel + ...)``,
    ``h' = u * h + (1 - u) * candidate``."""

    _default_name = "gru_cell"

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None):
        super().__init__(name, dtype)
        self._num_units = num_units
        self._activation = activation or tanh
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        input_depth = inputs_shape[-1]
        n = self._num_units
        self._gate_kernel = self.add_variable("gates/kernel", [input_depth + n, 2 * n],
                                               initializer=self._kernel_initializer)
        self._gate_bias = self.add_variable("gates/bias", [2 * n],
                                             initializer=self._bias_initializer or _ones)
        self._candidate_kernel = self.add_variable("candidate/kernel", [input_depth + n, n],
                                                    initializer=self._kernel_initializer)
        self._candidate_bias = self.add_variable("candidate/bias", [n],
                                                  initializer=self._bias_initializer or _zeros)

    def call(self, inputs, state):
        value = sigmoid(_linear(inputs, state, self._gate_kernel, self._gate_bias))
        r, u = _gates(value, self._num_units, 2)
        candidate = self._activation(_linear(inputs, multiply(r, state),
                                             self._candidate_kernel, self._candidate_bias))
        one = convert_to_tensor(1.0, dtype=u.dtype)
        new_h = add(multiply(u, state), multiply(one - u, candidate))
        return new_h, new_h


class MultiRNNCell(RNNCell):
    """Cells stacked: cell ``k`` (variables under ``cell_k``) feeds cell ``k + 1``; the state
    is the tuple of the cells' states."""

    _default_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not state_is_tuple:
            raise ValueError("state_is_tuple=False is deprecated in TF1 and not supported")
        self._cells = list(cells)

    state_size = property(lambda self: tuple(c.state_size for c in self._cells))
    output_size = property(lambda self: self._cells[-1].output_size)

    @property
    def variables(self):
        return [v for c in self._cells for v in c.variables]

    trainable_variables = weights = variables

    def zero_state(self, batch_size, dtype):
        g = get_default_graph()
        with g.name_scope("MultiRNNCellZeroState"):
            return tuple(c.zero_state(batch_size, dtype) for c in self._cells)

    def call(self, inputs, state):
        if not nest.is_sequence(state) or len(state) != len(self._cells):
            raise ValueError(f"Expected state to be a tuple of length {len(self._cells)}, but "
                             f"received: {state}")
        new_states = []
        current = inputs
        for k, (cell, s) in enumerate(zip(self._cells, state)):
            with variable_scope(f"cell_{k}"):
                current, new_s = cell(current, s)
            new_states.append(new_s)
        return current, tuple(new_states)
