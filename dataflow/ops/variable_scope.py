"""TF1's variable sharing: ``get_variable``, ``variable_scope``, collections and
``GraphKeys``, plus the variable helpers of ``tf.compat.v1`` (``assign``,
``is_variable_initialized``, ``report_uninitialized_variables``, local variables).

``get_variable(name)`` makes ``<variable scope>/<name>`` once per graph; asking again
needs ``reuse=True`` (or ``AUTO_REUSE``) on the scope and returns the same Variable.
Variable-scope names ignore ``name_scope``; a ``variable_scope`` also opens a name
scope for the ops made inside it, as in TF1::

    with variable_scope("layer1"):
        w = get_variable("w", [784, 100])        # "layer1/w", glorot_uniform values
    with variable_scope("layer1", reuse=True):
        assert get_variable("w") is w

>>> with variable_scope("a", reuse=AUTO_REUSE):
...     v = get_variable("v", [2], initializer=df.zeros_initializer())
>>> v.name
'a/v:0'
"""
from __future__ import annotations

import contextlib
import enum

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import constant, convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape, as_shape
from .state_ops import Variable, variables_initializer

__all__ = ["GraphKeys", "AUTO_REUSE", "VariableScope", "variable_scope", "get_variable",
           "get_local_variable", "get_variable_scope", "get_collection",
           "get_collection_ref", "add_to_collection", "add_to_collections",
           "local_variables", "local_variables_initializer", "model_variables",
           "assign", "assign_add", "assign_sub", "is_variable_initialized",
           "report_uninitialized_variables", "variable_op_scope"]


class GraphKeys:
    """Standard collection names (``tf.GraphKeys``), with TF's string values."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    UPDATE_OPS = "update_ops"
    GLOBAL_STEP = "global_step"
    TRAIN_OP = "train_op"
    SUMMARIES = "summaries"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"


class _ReuseMode(enum.Enum):
    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE
"""``reuse=AUTO_REUSE``: ``get_variable`` creates a variable if absent, else returns it."""

_STORE_KEY = ("__variable_store",)
_SCOPE_KEY = ("__varscope",)


# -- collections -----------------------------------------------------------------------------

def get_collection(key, scope=None):
    """Items of collection ``key`` in the default graph (``scope``: a name prefix regex).

    >>> get_collection(GraphKeys.TRAINABLE_VARIABLES, scope="layer1")
    []
    """
    return get_default_graph().get_collection(key, scope)


def get_collection_ref(key):
    """The default graph's list for collection ``key`` itself (append to change it)."""
    return get_default_graph().get_collection_ref(key)


def add_to_collection(name, value):
    """Append ``value`` to collection ``name`` of the default graph.

    >>> loss = df.constant(0.5, name="loss")
    >>> add_to_collection(GraphKeys.LOSSES, loss)
    >>> df.get_collection(GraphKeys.LOSSES) == [loss]
    True
    """
    get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
    get_default_graph().add_to_collections(names, value)


def local_variables(scope=None):
    """Variables of the ``LOCAL_VARIABLES`` collection (per-Session state such as metric
    counters, left out of ``global_variables``)."""
    return get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return get_collection(GraphKeys.MODEL_VARIABLES, scope)


def local_variables_initializer():
    """One op running the initializer of every local variable."""
    return variables_initializer(local_variables(), name="init")


# -- the variable store and scopes -----------------------------------------------------------

class _VariableStore:
    """The variables made by ``get_variable`` in one graph, by full name, and how many
    times each variable-scope name was opened (for unique default names)."""

    def __init__(self):
        self.vars: dict[str, Variable] = {}
        self.scope_counts: dict[str, int] = {}

    def open_scope(self, name):
        self.scope_counts[name] = self.scope_counts.get(name, 0) + 1

    def close_subscopes(self, name):
        # As TF: leaving a scope forgets how often its subscopes were opened, so a second
        # `with variable_scope("a")` numbers default-named subscopes from scratch.
        for k in self.scope_counts:
            if k.startswith(name + "/"):
                self.scope_counts[k] = 0


def _store(graph=None) -> _VariableStore:
    ref = (graph or get_default_graph()).get_collection_ref(_STORE_KEY)
    if not ref:
        ref.append(_VariableStore())
    return ref[0]


class VariableScope:
    """The defaults of one variable scope: name, reuse, initializer, regularizer, dtype.

    >>> with variable_scope("x") as scope:
    ...     pass
    >>> with variable_scope(scope, reuse=True):   # reenter by object
    ...     pass
    """

    def __init__(self, reuse, name="", initializer=None, regularizer=None, dtype=None,
                 name_scope="", constraint=None):
        self._reuse = reuse
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._dtype = _dtypes.float32 if dtype is None else _dtypes.as_dtype(dtype)
        self._name_scope = name_scope
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    regularizer = property(lambda self: self._regularizer)
    dtype = property(lambda self: self._dtype)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self):
        """From now on, ``get_variable`` in this scope returns existing variables."""
        self._reuse = True

    def set_initializer(self, initializer):
        self._initializer = initializer

    def set_regularizer(self, regularizer):
        self._regularizer = regularizer

    def set_dtype(self, dtype):
        self._dtype = _dtypes.as_dtype(dtype)

    def _copy(self, **changes):
        args = dict(reuse=self._reuse, name=self._name, initializer=self._initializer,
                    regularizer=self._regularizer, dtype=self._dtype,
                    name_scope=self._name_scope, constraint=self._constraint)
        args.update(changes)
        return VariableScope(**args)

    def get_variable(self, name, shape=None, dtype=None, initializer=None,
                     regularizer=None, reuse=None, trainable=None, collections=None,
                     validate_shape=True, constraint=None):
        """:func:`get_variable` in this scope."""
        full_name = f"{self._name}/{name}" if self._name else name
        if dtype is not None and initializer is not None and not callable(initializer):
            init_dtype = convert_to_tensor(initializer).dtype
            if init_dtype is not _dtypes.as_dtype(dtype):
                raise ValueError(f"Initializer type '{init_dtype.name}' and explicit dtype "
                                 f"'{_dtypes.as_dtype(dtype).name}' don't match.")
        return _get_or_make(
            full_name, shape=shape, dtype=self._dtype if dtype is None else dtype,
            initializer=self._initializer if initializer is None else initializer,
            regularizer=self._regularizer if regularizer is None else regularizer,
            reuse=self._reuse if reuse is None else reuse,
            trainable=True if trainable is None else trainable, collections=collections,
            validate_shape=validate_shape,
            constraint=self._constraint if constraint is None else constraint)


def get_variable_scope() -> VariableScope:
    """The current variable scope of the default graph (the root scope has name "")."""
    ref = get_default_graph().get_collection_ref(_SCOPE_KEY)
    if not ref:
        ref.append(VariableScope(False))
    return ref[0]


def _set_variable_scope(scope):
    ref = get_default_graph().get_collection_ref(_SCOPE_KEY)
    if ref:
        ref[0] = scope
    else:
        ref.append(scope)


def _unique_scope_name(prefix):
    """``prefix`` under the current scope made unique among opened scopes: dense, dense_1."""
    store, current = _store(), get_variable_scope()
    full = f"{current.name}/{prefix}" if current.name else prefix
    if store.scope_counts.get(full, 0) == 0:
        return prefix
    i = 1
    while store.scope_counts.get(f"{full}_{i}", 0) > 0:
        i += 1
    return f"{prefix}_{i}"


@contextlib.contextmanager
def variable_scope(name_or_scope, default_name=None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None,
                   custom_getter=None, reuse=None, dtype=None, use_resource=None,
                   constraint=None, auxiliary_name_scope=True):
    """A context for ``get_variable`` names and defaults (``tf.variable_scope``).

    ``name_or_scope``: a name (nested under the current variable scope; reentering a
    name reaches the same variables) or a :class:`VariableScope` (reentered as is). With
    ``name_or_scope=None``, ``default_name`` made unique (``dense``, ``dense_1``...).
    ``reuse``: True (variables must exist), ``AUTO_REUSE`` (made if absent), or None
    (inherit); sub-scopes inherit reuse. ``initializer``/``regularizer``/``dtype``
    become the defaults of ``get_variable`` inside. The block also runs in a name scope
    (made unique: a second ``variable_scope("a")`` names its ops ``a_1/...``), unless
    ``auxiliary_name_scope=False``.

    >>> with variable_scope("rnn", initializer=df.constant_initializer(0.5)):
    ...     w = get_variable("w", [2])
    >>> w.name
    'rnn/w:0'
    >>> with df.Session() as sess:
    ...     sess.run(w.initializer)
    ...     sess.run(w)
    array([0.5, 0.5], dtype=float32)
    """
    if custom_getter is not None or partitioner is not None:
        raise NotImplementedError("variable_scope: custom_getter and partitioner are not "
                                  "supported")
    if reuse is False:
        reuse = None  # as TF: False means "inherit", only True and AUTO_REUSE change it
    graph = get_default_graph()
    old = get_variable_scope()
    store = _store(graph)
    if name_or_scope is None and default_name is None:
        raise TypeError("If default_name is None then name_or_scope is required")
    if name_or_scope is not None and not isinstance(name_or_scope, (str, VariableScope)):
        raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
    if name_or_scope is None and reuse:
        raise ValueError("reuse=True cannot be used without a name_or_scope")

    if not auxiliary_name_scope:
        current = graph.get_name_scope()
        name_scope_cm = graph.name_scope(current + "/" if current else "")
    elif isinstance(name_or_scope, VariableScope):
        name_scope_cm = graph.name_scope(name_or_scope.name.split("/")[-1] or None)
    else:
        name_scope_cm = graph.name_scope(name_or_scope if name_or_scope is not None
                                         else default_name)
    with name_scope_cm as name_scope:
        if isinstance(name_or_scope, VariableScope):
            new = name_or_scope._copy(reuse=name_or_scope.reuse if not reuse else reuse)
        else:
            leaf = name_or_scope if name_or_scope is not None \
                else _unique_scope_name(default_name)
            full = f"{old.name}/{leaf}" if old.name else leaf
            new = old._copy(reuse=reuse or old.reuse, name=full, name_scope=name_scope)
        if initializer is not None:
            new.set_initializer(initializer)
        if regularizer is not None:
            new.set_regularizer(regularizer)
        if dtype is not None:
            new.set_dtype(dtype)
        if constraint is not None:
            new._constraint = constraint
        store.open_scope(new.name)
        if isinstance(name_or_scope, VariableScope):
            # Saved after opening, as TF: reentering a scope object counts as a use of its
            # name that outlives the block (a layer cell reused under another scope keeps
            # a later default-named cell from taking its name).
            saved_counts = dict(store.scope_counts)
        _set_variable_scope(new)
        try:
            yield new
        finally:
            _set_variable_scope(old)
            if isinstance(name_or_scope, VariableScope):
                store.scope_counts = saved_counts
            else:
                store.close_subscopes(new.name)


def variable_op_scope(values, name_or_scope, default_name=None, **kwargs):
    """TF1's deprecated spelling of :func:`variable_scope` with ``values`` first."""
    return variable_scope(name_or_scope, default_name=default_name, values=values, **kwargs)


def _default_initializer(name, dtype):
    from .init_ops import GlorotUniform, Zeros
    if dtype.is_floating:
        return GlorotUniform()
    if dtype.is_integer or dtype in (_dtypes.bool, _dtypes.string):
        return Zeros()
    raise ValueError(f"An initializer for variable {name} of {dtype.name} is required")


def _get_or_make(name, shape, dtype, initializer, regularizer, reuse, trainable,
                 collections, validate_shape, constraint):
    # A name ending in "/" (a slot, made inside the variable scope of its own name, whose
    # name scope is taken already) reenters that name scope verbatim, as TF's "" does.
    scope_name, name = name, name.rstrip("/")
    store = _store()
    from_value = initializer is not None and not callable(initializer)
    if shape is not None and from_value:
        raise ValueError("If initializer is a constant, do not specify shape.")
    dtype = _dtypes.as_dtype(dtype)
    shape = as_shape(shape)
    if name in store.vars:
        found = store.vars[name]
        if reuse is False or reuse is None:
            raise ValueError(f"Variable {name} already exists, disallowed. Did you mean to "
                             "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?")
        if not shape.is_compatible_with(found.get_shape()):
            raise ValueError(f"Trying to share variable {name}, but specified shape "
                             f"{shape} and found shape {found.get_shape()}.")
        if not from_value and dtype is not found.dtype:
            raise ValueError(f"Trying to share variable {name}, but specified dtype "
                             f"{dtype.name} and found dtype {found.dtype.name}.")
        return found
    if reuse is True:
        raise ValueError(f"Variable {name} does not exist, or was not created with "
                         "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                         "VarScope?")
    if initializer is None:
        initializer = _default_initializer(name, dtype)
    if from_value:
        init_val, var_dtype = initializer, None
    else:
        if isinstance(initializer, type):
            initializer = initializer()
        if not shape.is_fully_defined():
            raise ValueError(f"Shape of a new variable ({name}) must be fully defined, but "
                             f"instead was {shape}.")
        dims = shape.as_list()

        def init_val():
            return initializer(dims, dtype=dtype)
        var_dtype = dtype
    graph = get_default_graph()
    # The variable is named by its scope alone (name scopes do not apply), made outside any
    # control-flow context and control dependencies: it is graph-global state.
    with graph.name_scope(None), graph.control_dependencies(None):
        v = Variable(init_val, trainable=trainable, name=scope_name, dtype=var_dtype,
                     collections=collections, validate_shape=validate_shape,
                     constraint=constraint)
    # (If a name scope took the name already, the variable is called "<name>_1" while the
    # store knows it as <name>, exactly as in TF.)
    store.vars[name] = v
    if regularizer is not None:
        with graph.name_scope(name + "/Regularizer/"):
            loss = regularizer(v)
        if loss is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return v


def make_slot_variable(full_name, initial_value, dtype):
    """A non-trainable variable called exactly ``full_name`` (an optimizer's slot),
    recorded in the graph's variable store as ``get_variable`` records its variables."""
    from .init_ops import Zeros
    value_is_zeros = isinstance(initial_value, np.ndarray) and not initial_value.any()
    if value_is_zeros:  # TF builds a known-shape zeros slot from zeros_initializer
        return _get_or_make(full_name + "/", shape=initial_value.shape, dtype=dtype,
                            initializer=Zeros(), regularizer=None, reuse=False,
                            trainable=False, collections=None, validate_shape=True,
                            constraint=None)
    return _get_or_make(full_name + "/", shape=None, dtype=dtype, initializer=initial_value,
                        regularizer=None, reuse=False, trainable=False, collections=None,
                        validate_shape=True, constraint=None)


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None,
                 constraint=None, synchronization=None, aggregation=None):
    """The variable ``<scope>/<name>``: made on first use, shared under ``reuse``
    (``tf.get_variable``).

    ``initializer``: an initializer (called with the shape and dtype; default
    ``glorot_uniform_initializer`` for floats, zeros for ints and bools), or a value or
    tensor (then no ``shape``). ``regularizer(v)``'s result goes to
    ``REGULARIZATION_LOSSES``. ``collections`` default to ``GLOBAL_VARIABLES`` (and
    ``TRAINABLE_VARIABLES`` when trainable).

    >>> w = get_variable("w", [3, 2], initializer=df.truncated_normal_initializer(0.0, 0.1))
    >>> b = get_variable("b", initializer=np.zeros(2, np.float32))
    """
    if partitioner is not None or custom_getter is not None:
        raise NotImplementedError("get_variable: partitioner and custom_getter are not "
                                  "supported")
    return get_variable_scope().get_variable(
        name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
        trainable=trainable, collections=collections, validate_shape=validate_shape,
        constraint=constraint)


def get_local_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable=False, collections=None, validate_shape=True, **kwargs):
    """:func:`get_variable` in the ``LOCAL_VARIABLES`` collection (not trainable).

    >>> count = get_local_variable("count", [], initializer=df.zeros_initializer())
    """
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                        regularizer=regularizer, trainable=False, collections=collections,
                        validate_shape=validate_shape, **kwargs)


# -- assignment and initialization queries ---------------------------------------------------

def assign(ref, value, validate_shape=None, use_locking=None, name=None):
    """Set variable ``ref`` to ``value``; returns the new value (``tf.assign``).

    ``validate_shape=False`` lets ``value`` have another shape than the variable's.

    >>> v = df.Variable([0.0, 0.0])
    >>> update = assign(v, [1.0, 2.0])
    >>> with df.Session() as sess:
    ...     sess.run(v.initializer)
    ...     sess.run(update)
    array([1., 2.], dtype=float32)
    """
    return ref.assign(value, name=name, validate_shape=validate_shape is not False)


def assign_add(ref, value, use_locking=None, name=None):
    """``ref += value``; returns the new value (``tf.assign_add``)."""
    return ref.assign_add(value, name=name)


def assign_sub(ref, value, use_locking=None, name=None):
    """``ref -= value``; returns the new value (``tf.assign_sub``)."""
    return ref.assign_sub(value, name=name)


def is_variable_initialized(variable):
    """A bool tensor: has ``variable`` been given a value in this Session yet?"""
    return variable.is_initialized()


@register_op("ReportUninitializedVariables")
def _report_infer(op):
    return [(_dtypes.string, TensorShape([None]))]


def report_uninitialized_variables(var_list=None, name="report_uninitialized_variables"):
    """A 1-D string tensor of the names (without ``:0``) of the variables of ``var_list``
    (default: global and local variables) not initialized in the running Session.

    >>> w = df.Variable(1.0, name="w")
    >>> b = df.Variable(2.0, name="b")
    >>> with df.Session() as sess:
    ...     sess.run(w.initializer)
    ...     sess.run(report_uninitialized_variables())
    array([b'b'], dtype=object)
    """
    graph = get_default_graph()
    if var_list is None:
        var_list = graph.get_collection(GraphKeys.GLOBAL_VARIABLES) + \
            graph.get_collection(GraphKeys.LOCAL_VARIABLES)
    with graph.name_scope(name) as scope, graph.control_dependencies(None):
        if not var_list:
            return constant(np.array([], dtype=object), dtype=_dtypes.string, name=scope)
        flags = [v.is_initialized() for v in var_list]
        names = [v.name.rsplit(":", 1)[0] for v in var_list]
        return graph.create_op("ReportUninitializedVariables", flags, {"names": names},
                               name=scope).outputs[0]
