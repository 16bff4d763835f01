"""``Optimizer``: the base class of TF1's optimizers (``tf.compat.v1.train.Optimizer``).

A subclass says how one variable moves given its gradient (``_apply_dense``)
and which per-variable state it keeps (``_create_slots``); the base class
computes gradients, creates the state, and groups the updates into one op.

>>> w = df.Variable(1.0)
>>> loss = df.square(w)
>>> opt = df.train.GradientDescentOptimizer(0.1)
>>> grads_and_vars = opt.compute_gradients(loss)          # [(grad, var)]
>>> train_op = opt.apply_gradients(grads_and_vars)        # one op per step
>>> [v is w for _, v in grads_and_vars]
[True]
"""
from __future__ import annotations

import abc

import numpy as np

from .. import dtypes as _dtypes
from ..autodiff.gradients import gradients
from ..autodiff.tape import GradientTape
from ..framework.convert import convert_to_tensor
from ..framework.graph import Tensor, get_default_graph
from ..framework.indexed_slices import IndexedSlices
from ..ops.array_ops import shape_internal
from ..ops.control_flow_ops import group, tuple_
from ..ops.math_ops import cast
from ..ops.state_ops import Variable, trainable_variables
from ..ops.training_ops import unique, unsorted_segment_sum
from ..ops.variable_scope import make_slot_variable as make_variable
from ..ops.variable_scope import variable_scope

# The floating types TF1 optimizes (bfloat16 and complex types do not exist here).
_VALID_DTYPES = (_dtypes.float16, _dtypes.float32, _dtypes.float64)

TRAIN_OP = "train_op"


def _call_if_callable(value):
    """TF1 accepts hyperparameters as zero-argument callables, evaluated at apply time."""
    return value() if callable(value) else value


def _assert_valid_dtypes(tensors):
    for t in tensors:
        if t.dtype.base_dtype not in _VALID_DTYPES:
            raise ValueError(f"Invalid type {t.dtype.name} for {t.name}, expected: "
                             f"{[d.name for d in _VALID_DTYPES]}.")


def _zeros_initial_value(var):
    """Zeros shaped as ``var``: a constant if its shape is known, else built from its value."""
    if var.shape.is_fully_defined():
        return np.zeros(var.shape.as_list(), dtype=var.dtype.as_numpy_dtype)
    from ..ops.array_ops import zeros_like
    return zeros_like(var.initial_value)


# A function that applies gradients in place of ``Optimizer._apply_gradients``, called as
# ``runner(optimizer, pairs, global_step, name, apply)`` (same result); a higher layer
# installs one while it runs a step as a skeleton (df.function reuses the update ops it
# already matched). None: apply them here.
APPLY_RUNNER: list = [None]


class Optimizer(abc.ABC):
    """Base class of optimizers; use a subclass such as ``GradientDescentOptimizer``.

    Subclasses override ``_create_slots(var_list)``, ``_prepare()``,
    ``_apply_dense(grad, var)``, optionally ``_apply_sparse(grad, var)`` (an IndexedSlices
    gradient, e.g. of a ``gather``, with distinct indices) and ``_finish(update_ops, name)``.

    >>> w, b = df.Variable(1.0), df.Variable(2.0)
    >>> loss = df.square(w * b)
    >>> train_op = df.train.GradientDescentOptimizer(0.5).minimize(loss, var_list=[w])
    """

    # Accepted for TF1 compatibility; gating of ops inside gradients is not modelled.
    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking, name):
        # use_locking is accepted for TF1 compatibility: a Session runs one step at a time.
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        # slot name -> {variable: slot Variable}
        self._slots: dict = {}
        # (graph, name) -> Variable: state shared by all variables (e.g. Adam's beta powers)
        self._non_slot_dict: dict = {}
        # dtype -> tensor of each hyperparameter, rebuilt by every apply_gradients
        self._hyper_cache: dict = {}

    def get_name(self):
        """The optimizer's name, which prefixes its ops and names its slots.

        >>> df.train.AdamOptimizer().get_name()
        'Adam'
        """
        return self._name

    # -- the public API ---------------------------------------------------------------------
    def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
                 aggregation_method=None, colocate_gradients_with_ops=False, name=None,
                 grad_loss=None):
        """Add ops that move ``var_list`` (default: all trainable variables) to lower ``loss``.

        Returns one op; each run does one step (and increments ``global_step`` if given).

        >>> w = df.Variable(1.0)
        >>> train_op = df.train.AdamOptimizer(0.01).minimize(df.square(w))
        >>> train_op.type
        'NoOp'
        """
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
        vars_with_grad = [v for g, v in grads_and_vars if g is not None]
        if not vars_with_grad:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops that do "
                "not support gradients, between variables "
                f"{[str(v) for _, v in grads_and_vars]} and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                          aggregation_method=None, colocate_gradients_with_ops=False,
                          grad_loss=None):
        """Gradients of ``loss`` for each variable: a list of ``(gradient, variable)``.

        The gradient is ``None`` for a variable that ``loss`` does not depend on. ``loss``
        may be a function returning the loss (in eager mode it must be): it is run under a
        :class:`~dataflow.GradientTape`, and ``var_list`` defaults to the trainable
        variables it reads.

        >>> w, b = df.Variable(1.0), df.Variable(2.0)
        >>> opt = df.train.GradientDescentOptimizer(0.1)
        >>> [(dw, w_), (db, b_)] = opt.compute_gradients(df.square(w * b), var_list=[w, b])
        >>> w_ is w and b_ is b
        True
        """
        if gate_gradients not in (self.GATE_NONE, self.GATE_OP, self.GATE_GRAPH):
            raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, "
                             f"Optimizer.GATE_OP, Optimizer.GATE_GRAPH. Not {gate_gradients}")
        if callable(loss):
            # A loss function (what eager mode needs: a tensor has no graph to differentiate
            # afterwards): run it under a tape that watches every trainable variable read.
            with GradientTape() as tape:
                loss = convert_to_tensor(loss())
            if var_list is None:
                var_list = list(tape.watched_variables())
        else:
            loss = convert_to_tensor(loss)
            tape = None
        _assert_valid_dtypes([loss])
        var_list = trainable_variables() if var_list is None else list(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            _check_variable(v)
        grad_ys = None if grad_loss is None else [grad_loss]
        if tape is not None:
            grads = tape.gradient([loss], var_list, output_gradients=grad_ys)
        else:
            grads = gradients(loss, var_list, grad_ys=grad_ys)
        if gate_gradients == self.GATE_GRAPH:
            # No gradient is available before all of them are.
            grads = tuple_(grads)
        grads_and_vars = list(zip(grads, var_list))
        _assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """One op that applies each ``(gradient, variable)`` pair's update.

        Pairs whose gradient is ``None`` are skipped. Slot variables are created
        here, so run ``df.global_variables_initializer()`` built afterwards.

        >>> w = df.Variable(1.0)
        >>> step = df.train.get_or_create_global_step()
        >>> opt = df.train.GradientDescentOptimizer(0.1)
        >>> train_op = opt.apply_gradients(opt.compute_gradients(df.square(w)),
        ...                                global_step=step)
        >>> with df.Session() as sess:
        ...     sess.run(df.global_variables_initializer())
        ...     _ = sess.run(train_op)
        ...     int(sess.run(step))
        1
        """
        runner = APPLY_RUNNER[0]
        if runner is not None:
            return runner(self, list(grads_and_vars), global_step, name,
                          self._apply_gradients)
        return self._apply_gradients(grads_and_vars, global_step, name)

    def _apply_gradients(self, grads_and_vars, global_step=None, name=None):
        pairs = _convert_pairs(grads_and_vars)
        var_list = [v for g, v in pairs if g is not None]
        if not var_list:
            raise ValueError(f"No gradients provided for any variable: "
                             f"{[str(v) for _, v in pairs]}.")
        graph = get_default_graph()
        # Slots are graph-global state: make them outside any dependencies of the caller.
        with graph.control_dependencies(None):
            self._create_slots(var_list)
        with graph.name_scope(name or self._name) as scope:
            self._hyper_cache = {}
            self._prepare()
            update_ops = []
            for grad, var in pairs:
                if grad is None:
                    continue
                with graph.name_scope("update_" + _var_op_name(var)):
                    if isinstance(grad, IndexedSlices):
                        update = self._apply_sparse_duplicate_indices(grad, var)
                    else:
                        update = self._apply_dense(grad, var)
                    if var.constraint is not None:
                        # As TF: the constraint projects the variable after its update.
                        with graph.control_dependencies([update]):
                            update = var.assign(var.constraint(var))
                    update_ops.append(update)
            # As TF, the op a step runs is named after the optimizer's scope ("Adam",
            # "train/Adam"): the final group, or the global step's increment after it.
            if global_step is None:
                train_op = self._finish(update_ops, scope)
            else:
                with graph.control_dependencies([self._finish(update_ops, "update")]):
                    train_op = global_step.assign_add(1, name=scope).op
        graph.add_to_collection(TRAIN_OP, train_op)
        return train_op

    # -- slots ------------------------------------------------------------------------------
    def get_slot(self, var, name):
        """The slot variable ``name`` (e.g. ``"m"``) kept for ``var``, or ``None``.

        >>> w = df.Variable([1.0, 2.0])
        >>> opt = df.train.AdamOptimizer()
        >>> _ = opt.minimize(df.reduce_sum(w * w))
        >>> opt.get_slot(w, "m").shape.as_list()
        [2]
        """
        return self._slots.get(name, {}).get(var)

    def get_slot_names(self):
        """Names of the slots this optimizer creates, sorted.

        >>> opt = df.train.MomentumOptimizer(0.1, 0.9)
        >>> _ = opt.minimize(df.square(df.Variable(1.0)))
        >>> opt.get_slot_names()
        ['momentum']
        """
        return sorted(self._slots)

    def variables(self):
        """The variables this optimizer created in the default graph (slots and others).

        >>> w = df.Variable(1.0)
        >>> opt = df.train.AdamOptimizer()
        >>> _ = opt.minimize(df.square(w))
        >>> sess = df.Session()
        >>> sess.run(df.variables_initializer(opt.variables() + [w]))
        >>> sess.close()
        """
        graph = get_default_graph()
        found = [v for slots in self._slots.values() for v in slots.values()
                 if v.graph is graph]
        found += [v for (g, _), v in self._non_slot_dict.items() if g is graph]
        return sorted(found, key=lambda v: v.name)

    def _zeros_slot(self, var, slot_name, op_name):
        """A zero-initialized, non-trainable slot for ``var``, named as TF's slot creator
        names it: the variable scope ``<var>/<op_name>`` made unique under the current
        variable scope (``W/Adam``, then ``W/Adam_1`` for Adam's second slot)."""
        slots = self._slots.setdefault(slot_name, {})
        if var not in slots:
            with variable_scope(None, default_name=_var_op_name(var) + "/" + op_name) as vs:
                slots[var] = make_variable(vs.name, _zeros_initial_value(var), var.dtype)
        return slots[var]

    def _get_or_make_non_slot(self, initial_value, name, colocate_with):
        """A variable shared by all updates of this optimizer in ``colocate_with``'s graph,
        made in the current name scope (``train/beta1_power`` under ``name_scope("train")``).
        """
        key = (colocate_with.graph, name)
        if key not in self._non_slot_dict:
            # As TF: a Python number makes a float32 variable (Adam's beta powers stay
            # float32 for float64 variables and are cast where they are used).
            self._non_slot_dict[key] = Variable(initial_value, trainable=False, name=name)
        return self._non_slot_dict[key]

    def _get_non_slot(self, name, graph=None):
        return self._non_slot_dict.get((graph or get_default_graph(), name))

    # -- hyperparameters ---------------------------------------------------------------------
    def _hyper(self, name, value, dtype):
        """``value`` as a tensor of ``dtype``, made once per apply_gradients call.

        A Python number is converted straight to ``dtype`` (no float32 rounding of, say,
        a float64 learning rate); a tensor is cast, as TF does.
        """
        key = (name, dtype)
        if key not in self._hyper_cache:
            value = _call_if_callable(value)
            if isinstance(value, (Tensor, Variable)):
                t = cast(value, dtype, name=name)
            else:
                t = convert_to_tensor(value, dtype=dtype, name=name)
            self._hyper_cache[key] = t
        return self._hyper_cache[key]

    # -- what subclasses implement ---------------------------------------------------------
    def _create_slots(self, var_list):
        """Create the per-variable state (zeros slots); nothing by default."""

    def _prepare(self):
        """Build tensors shared by all updates of one apply_gradients call."""

    @abc.abstractmethod
    def _apply_dense(self, grad, var):
        """Return an op or tensor that applies ``grad`` to ``var``."""

    def _apply_sparse_duplicate_indices(self, grad, var):
        """Apply an IndexedSlices ``grad`` whose indices may repeat: as TF1, the rows of
        a repeated index are summed first, then :meth:`_apply_sparse` applies it."""
        return self._apply_sparse(_deduplicate_indexed_slices(grad), var)

    def _apply_sparse(self, grad, var):
        """Apply an IndexedSlices ``grad`` with distinct indices to ``var`` (by default
        as the dense gradient it stands for)."""
        return self._apply_dense(convert_to_tensor(grad), var)

    def _finish(self, update_ops, name_scope):
        """One op running every update (subclasses add follow-up updates)."""
        return group(*update_ops, name=name_scope)


def _var_op_name(var):
    """TF's ``var.op.name``: the variable's name without the output index."""
    # (Variable.op here is the handle op, whose name repeats the scope, e.g. "w/w".)
    return var.name.rsplit(":", 1)[0]


def _deduplicate_indexed_slices(grad):
    """``grad`` with each index once, its rows summed (TF's _deduplicate_indexed_slices)."""
    unique_indices, positions = unique(grad.indices)
    # The number of unique indices depends on the data: queried at run time, as in
    # TF1's graph, not taken from an eager tensor's static shape. A step traced by
    # df.function then keeps it inside the generated graph, where reading it would
    # be an Output Fetching in the middle of every step.
    count = shape_internal(unique_indices, optimize=False)[0]
    summed = unsorted_segment_sum(grad.values, positions, count)
    return IndexedSlices(summed, unique_indices, grad.dense_shape)


def _check_variable(v):
    if not isinstance(v, Variable):
        raise TypeError(f"Trying to optimize unsupported type {v!r}: only df.Variable "
                        "objects can be optimized.")


def _convert_pairs(grads_and_vars):
    """``[(grad, var)]`` with each gradient a tensor of its variable's dtype, or None."""
    pairs = []
    for pair in tuple(grads_and_vars):
        try:
            grad, var = pair
        except (TypeError, ValueError):
            raise TypeError(f"grads_and_vars must hold (gradient, variable) pairs, got "
                            f"{pair!r}") from None
        _check_variable(var)
        if isinstance(grad, IndexedSlices):
            if grad.dtype is not var.dtype:
                raise TypeError(f"Gradient for {var.name} must be a {var.dtype.name} "
                                f"IndexedSlices, got {grad.dtype.name}")
        elif grad is not None:
            try:
                grad = convert_to_tensor(grad, dtype=var.dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"Gradient for {var.name} must be convertible to a "
                                f"{var.dtype.name} tensor, or None: {e}") from None
        pairs.append((grad, var))
    if not pairs:
        raise ValueError("No variables provided.")
    return pairs
