"""``GradientTape``: gradients of eagerly computed values, with the gradient functions of
``df.gradients`` (one registry, :mod:`dataflow.autodiff.registry`, for both modes).

While a tape is active it records each op that eager dispatch runs
(:data:`dataflow.framework.eager.RECORDERS`) if one of the op's inputs is watched: a
watched tensor, a trainable variable read under the tape, or an output of an op recorded
before. An executed op (:class:`~dataflow.framework.eager.EagerOp`) keeps its type,
attributes, inputs and outputs, which is what a gradient function reads of a graph op;
``gradient`` walks the recorded ops backwards calling those functions, whose ops run
eagerly too (and are recorded by an enclosing tape: nested tapes give higher orders).

>>> with df.eager_mode():
...     x = df.constant(3.0)
...     with GradientTape() as outer:
...         outer.watch(x)
...         with GradientTape() as inner:
...             inner.watch(x)
...             y = x * x * x
...         dy = inner.gradient(y, x)             # 3x^2 = 27
...     d2y = outer.gradient(dy, x)               # 6x = 18
...     float(dy), float(d2y)
(27.0, 18.0)

In graph mode a tape records nothing: ``gradient`` builds ``df.gradients`` of its
target, so code written for a tape also builds a graph.
"""
from __future__ import annotations

import contextlib

from .. import dtypes as _dtypes
from ..framework import eager as _eager
from ..framework.convert import convert_to_tensor
from ..ops.array_ops import ones_like, zeros_like
from ..ops.math_ops import add_n
from ..util import nest
from .gradients import gradients as _graph_gradients
from .registry import get_gradient_function, is_not_differentiable

__all__ = ["GradientTape"]


def _source_tensor(x):
    """A differentiation source: a tensor, or a variable's handle (all of its reads)."""
    handle = getattr(x, "handle", None)
    return handle if handle is not None else x


def _backpropagatable(t) -> bool:
    return t.dtype.is_floating or t.dtype is _dtypes.resource


class GradientTape:
    """Record eager ops to differentiate them (``tf.GradientTape``).

    ``persistent=True`` allows several ``gradient`` calls; ``watch_accessed_variables``
    (default) watches every trainable variable read inside the block.

    >>> with df.eager_mode():
    ...     w = df.Variable([1.0, 2.0])
    ...     with GradientTape() as tape:
    ...         loss = df.reduce_sum(w * w)
    ...     tape.gradient(loss, w).numpy().tolist()
    [2.0, 4.0]
    """

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self._persistent = persistent
        self._watch_accessed = watch_accessed_variables
        self._watched: dict = {}    # id(tensor) -> tensor: kept alive while the tape lives
        self._variables: dict = {}  # id(variable) -> variable watched
        self._ops: list = []        # recorded ops, in execution order
        self._recording = False
        self._used = False

    # -- recording ---------------------------------------------------------------------------
    def __enter__(self):
        if self._recording:
            raise ValueError("This GradientTape is already recording.")
        self._push()
        return self

    def __exit__(self, *exc):
        if self._recording:
            self._pop()
        return False

    def _push(self):
        self._recording = True
        _eager.RECORDERS.append(self._record)
        if self._watch_accessed:
            _eager.VARIABLE_WATCHERS.append(self._watch_variable)

    def _pop(self):
        self._recording = False
        _remove(_eager.RECORDERS, self._record)
        if self._watch_accessed:
            _remove(_eager.VARIABLE_WATCHERS, self._watch_variable)

    def _record(self, op):
        watched = self._watched
        for t in op._inputs:
            if id(t) in watched:
                break
        else:
            return
        self._ops.append(op)
        for t in op._outputs:
            watched[id(t)] = t

    def _watch_variable(self, variable):
        self._variables[id(variable)] = variable
        self._watched[id(variable.handle)] = variable.handle

    def watch(self, tensor):
        """Record the ops that use ``tensor`` (a tensor, a variable, or a nested structure
        of them) from now on."""
        for t in nest.flatten(tensor):
            if hasattr(t, "handle") and hasattr(t, "assign"):
                self._variables[id(t)] = t
            t = _source_tensor(t)
            if not isinstance(t, _eager.EagerTensor) and _eager.executing_eagerly():
                raise ValueError(f"GradientTape.watch expects eager tensors or variables, "
                                 f"got {t!r}")
            self._watched[id(t)] = t

    def watched_variables(self):
        """The variables this tape watches, in the order it first saw them."""
        return tuple(self._variables.values())

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops run inside the block are not recorded.

        >>> with df.eager_mode():
        ...     x = df.constant(2.0)
        ...     with GradientTape(persistent=True) as tape:
        ...         tape.watch(x)
        ...         y = x * x
        ...         with tape.stop_recording():
        ...             z = x * x
        ...     tape.gradient(y, x) is not None, tape.gradient(z, x) is None
        (True, True)
        """
        if not self._recording:
            raise ValueError("Cannot stop recording: this tape is not recording.")
        self._pop()
        try:
            yield
        finally:
            self._push()

    def reset(self):
        """Forget everything recorded so far (the tape keeps recording)."""
        self._watched.clear()
        self._variables.clear()
        self._ops.clear()

    # -- gradients ---------------------------------------------------------------------------
    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients="none"):
        """The gradients of ``sum(target)`` with respect to ``sources`` (same nesting as
        ``sources``; ``None`` for an unconnected source, or zeros with
        ``unconnected_gradients="zero"``). ``output_gradients`` weight the targets."""
        if unconnected_gradients not in ("none", "zero"):
            raise ValueError(f"Unknown unconnected_gradients value "
                             f"{unconnected_gradients!r}: use 'none' or 'zero'")
        if self._used and not self._persistent:
            raise RuntimeError("A non-persistent GradientTape can only be used to compute "
                               "one set of gradients (or jacobians); use persistent=True.")
        targets = nest.flatten(target)
        flat_sources = nest.flatten(sources)
        if output_gradients is not None:
            output_gradients = nest.flatten(output_gradients)
            if len(output_gradients) != len(targets):
                raise ValueError(f"Passed {len(output_gradients)} output_gradients for "
                                 f"{len(targets)} targets")
        if not _eager.executing_eagerly():
            grads = _graph_gradients(targets, flat_sources, grad_ys=output_gradients)
        else:
            recording = self._recording
            if recording:  # the gradient's own ops are not recorded on this tape
                self._pop()
            try:
                runner = GRADIENT_RUNNER[0]
                if runner is None:
                    grads = self._eager_gradients(targets, flat_sources, output_gradients)
                else:
                    grads = runner(self, targets, flat_sources, output_gradients)
            finally:
                if recording:
                    self._push()
        self._used = True
        if not self._persistent:
            self._ops = []
            self._watched = {}
        if unconnected_gradients == "zero":
            grads = [g if g is not None else _zeros_for_source(s)
                     for g, s in zip(grads, flat_sources)]
        return nest.pack_sequence_as(sources, grads)

    def _eager_gradients(self, targets, sources, output_gradients):
        targets = [convert_to_tensor(t) for t in targets]
        grads: dict = {}
        for i, y in enumerate(targets):
            gy = None if output_gradients is None else output_gradients[i]
            grads.setdefault(id(y), []).append(_initial_grad(y, gy))
        for op in reversed(self._ops):
            outputs = op._outputs
            if not any(id(t) in grads for t in outputs):
                continue
            in_grads = _op_input_grads(op, [_sum(grads.get(id(t))) for t in outputs])
            for t, gi in zip(op._inputs, in_grads):
                if gi is not None and _backpropagatable(t):
                    grads.setdefault(id(t), []).append(gi)
        return [_sum(grads.get(id(_source_tensor(s)))) for s in sources]


# A function that computes an eager tape's gradients in place of ``_eager_gradients``,
# called as ``runner(tape, targets, flat_sources, output_gradients)`` (same result); a
# higher layer installs one while it runs a step as a skeleton (df.function reuses the
# gradient ops it already matched). None: compute them here.
GRADIENT_RUNNER: list = [None]


def _remove(hooks: list, fn) -> None:
    for i in range(len(hooks) - 1, -1, -1):
        if hooks[i] == fn:
            del hooks[i]
            return


def _sum(grads):
    if not grads:
        return None
    return grads[0] if len(grads) == 1 else add_n(grads)


def _initial_grad(y, gy):
    if gy is None:
        if not y.dtype.is_floating:
            raise TypeError(f"Gradients of non-float tensor {y.name} ({y.dtype.name}) need "
                            "explicit output_gradients")
        return ones_like(y)
    gy = convert_to_tensor(gy, dtype=y.dtype)
    if not y.shape.is_compatible_with(gy.shape):
        raise ValueError(f"output_gradients shape {gy.shape} is incompatible with the "
                         f"target's shape {y.shape}")
    return gy


def _zeros_for_source(source):
    handle = getattr(source, "handle", None)
    return zeros_like(source.value() if handle is not None else source)


def _op_input_grads(op, out_grads):
    """The input gradients of recorded ``op`` from its output gradients: the registered
    gradient function, called as ``df.gradients`` calls it (zeros for float outputs that
    received none)."""
    fn = get_gradient_function(op)
    if fn is None:
        if is_not_differentiable(op.type):
            return [None] * len(op._inputs)
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: "
                          f"{op.type}). Register one with df.RegisterGradient('{op.type}') "
                          f"or declare it with df.NotDifferentiable('{op.type}').")
    out_grads = [g if g is not None or not t.dtype.is_floating else zeros_like(t)
                 for t, g in zip(op._outputs, out_grads)]
    result = fn(op, *out_grads)
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(result) != len(op._inputs):
        raise ValueError(f"Gradient function of '{op.name}' ({op.type}) returned "
                         f"{len(result)} gradients for {len(op._inputs)} inputs")
    return result
