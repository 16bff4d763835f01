"""Control-flow contexts: how ops built inside ``cond`` / ``while_loop`` are wired up.

While a branch or loop body is being built, the graph's current context sees
every new op (``AddOp``) and rewrites its inputs:

* :class:`CondContext` routes each tensor captured from outside the branch
  through one ``Switch`` on the branch predicate (cached, so one Switch per
  captured tensor and branch), and gives input-less ops a control edge from
  the branch pivot so they are dead when the branch is not taken.
* :class:`WhileContext` routes each captured tensor through one
  ``Enter(is_constant=True)`` into the loop frame, and gives ops that would
  otherwise be free of the loop's control (no inputs, or only loop
  invariants) a control edge from the loop pivot, so they run only in
  iterations the predicate started.

Captures go through the outer context first, so nesting composes: a tensor
from outside a cond inside a loop is Entered, then Switched.
"""
from __future__ import annotations

from ..framework.graph import Operation, Tensor, get_default_graph

__all__ = ["ControlFlowContext", "CondContext", "WhileContext", "get_output_context",
           "get_while_context", "check_input_from_valid_context", "is_loop_exit",
           "is_loop_constant_enter"]


def is_loop_exit(op: Operation) -> bool:
    return op.type == "Exit"


def is_loop_enter(op: Operation) -> bool:
    return op.type == "Enter"


def is_loop_constant_enter(op: Operation) -> bool:
    return op.type == "Enter" and op.get_attr("is_constant")


def get_output_context(op: Operation):
    """The context the outputs of ``op`` live in (an Exit's outputs leave its loop)."""
    ctx = op._control_flow_context
    if ctx is not None and is_loop_exit(op):
        ctx = ctx.outer_context
    return ctx


def get_while_context(op: Operation):
    ctx = op._control_flow_context
    return ctx.GetWhileContext() if ctx is not None else None


def _is_containing(outer, inner) -> bool:
    """True if while-context ``outer`` is ``inner`` or encloses it (None encloses all)."""
    while inner is not outer:
        if inner is None:
            return False
        inner = inner.outer_context
        inner = inner.GetWhileContext() if inner is not None else None
    return True


def _gradient_loop_may_read(while_ctx, input_while) -> bool:
    """Reads between a gradient loop and its forward loop that autodiff builds (TF's rules):
    a gradient loop reads its forward loop's values (then turned into stack pops) and
    its inner loops' values, and a forward loop's ops feed their gradient loop."""
    if while_ctx is not None and while_ctx.grad_state is not None:
        forward = while_ctx.grad_state.forward_context
        if _is_containing(input_while, forward):
            return True
        if input_while is not None and input_while.outer_context is not None \
                and input_while.outer_context.GetWhileContext() is forward:
            return True
    if input_while is not None and input_while.grad_state is not None:
        if input_while.grad_state.forward_context is while_ctx:
            return True
    return False


def check_input_from_valid_context(op: Operation, input_op: Operation) -> None:
    """Raise ValueError if ``op`` may not consume ``input_op``'s output (TF's rule).

    An op may use a tensor from its own loop or an enclosing one (the capture
    adds the Enter); a tensor from inside another loop is only reachable
    through that loop's Exit.
    """
    op_ctx = op._control_flow_context
    input_ctx = get_output_context(input_op)
    if input_ctx is None or op_ctx is input_ctx:
        return
    while_ctx = op_ctx.GetWhileContext() if op_ctx is not None else None
    input_while = input_ctx.GetWhileContext()
    if while_ctx is None:
        if input_while is None or is_loop_enter(op) or op.type == "Switch":
            return
    elif _is_containing(input_while, while_ctx):
        return
    if _gradient_loop_may_read(while_ctx, input_while):
        return
    loop = input_while.name if input_while is not None else "?"
    raise ValueError(
        f"Cannot use '{input_op.name}' as input to '{op.name}' because '{input_op.name}' is "
        f"in a while loop ('{loop}') that does not contain '{op.name}'. Use the loop's "
        "outputs (its Exit tensors) instead, or return the value from the loop.")


class ControlFlowContext:
    """Base class: bookkeeping of known/captured values and the context stack."""

    def __init__(self):
        g = get_default_graph()
        self._graph = g
        self.outer_context = g._get_control_flow_context()
        self._values: set = set()
        self._external_values: dict = {}
        self._saved: list = []

    def Enter(self):  # noqa: N802 - TF's names, kept for readers of control_flow_ops.py
        """Make this the graph's current context (re-entrant: Enter/Exit pairs nest)."""
        self._saved.append(self._graph._get_control_flow_context())
        self._graph._set_control_flow_context(self)

    def Exit(self):  # noqa: N802
        """Restore the context that was current at the matching :meth:`Enter`."""
        self._graph._set_control_flow_context(self._saved.pop())

    def GetWhileContext(self):  # noqa: N802
        return self.outer_context.GetWhileContext() if self.outer_context else None

    def GetControlPivot(self):  # noqa: N802
        return None

    def AddName(self, t: Tensor):  # noqa: N802
        self._values.add(t)

    def IsWhileContext(self):  # noqa: N802
        return False

    def IsCondContext(self):  # noqa: N802
        return False

    def _remove_external_control_edges(self, op: Operation):
        """Split control inputs into those inside the enclosing loop and the rest."""
        while_ctx = self.GetWhileContext()
        if while_ctx is None:
            return list(op._control_inputs), []
        internal, external = [], []
        for c in op._control_inputs:
            c_ctx = get_output_context(c)
            if c_ctx is not None and c_ctx.GetWhileContext() is while_ctx:
                internal.append(c)
            else:
                external.append(c)
        if len(internal) != len(op._control_inputs):
            op._remove_all_control_inputs()
            op._add_control_inputs(internal)
        return internal, external

    def _mark_outputs(self, op: Operation):
        ctx = self
        while ctx is not None:
            ctx._values.update(op._outputs)
            ctx = ctx.outer_context if ctx.IsCondContext() else None


class CondContext(ControlFlowContext):
    """The context of one branch of a ``cond``: ``branch`` 1 (true) or 0 (false)."""

    def __init__(self, pred: Tensor, pivot: Tensor, branch: int):
        super().__init__()
        self.pred = pred
        self.pivot = pivot
        self.branch = branch
        self._values.add(pred)
        self._external_values[pred] = pred
        self._values.add(pivot)
        pivot.op._set_control_flow_context(self)

    def IsCondContext(self):  # noqa: N802
        return True

    def GetControlPivot(self):  # noqa: N802
        return self.pivot

    def AddName(self, t: Tensor):  # noqa: N802
        """``t`` (a loop result made in this branch) is known here and, as the outputs of
        ops built here are, in the enclosing branches and loop (no capture there)."""
        ctx = self
        while ctx is not None:
            ctx._values.add(t)
            ctx = ctx.outer_context if ctx.IsCondContext() else None

    def AddValue(self, val: Tensor) -> Tensor:  # noqa: N802
        """``val`` as seen inside this branch (through a cached Switch if external)."""
        if val in self._values:
            return self._external_values.get(val, val)
        result = val
        if self.outer_context is not None:
            result = self.outer_context.AddValue(val)
            if result in self._values:
                # The enclosing context's view of it is already a value of this branch
                # (autodiff's history of a value saved inside this cond).
                self._values.add(val)
                self._external_values[val] = result
                return result
            self._values.add(result)
            self._external_values[result] = result
        self._values.add(val)
        result = self._switch(result)
        self._external_values[val] = result
        return result

    def _switch(self, val: Tensor) -> Tensor:
        from ..ops.control_flow_ops import switch
        with self._graph.control_dependencies(None):
            saved = self._graph._get_control_flow_context()
            self._graph._set_control_flow_context(self.outer_context)
            try:
                out = switch(val, self.pred)[self.branch]
            finally:
                self._graph._set_control_flow_context(saved)
        out.op._set_control_flow_context(self)
        self._values.add(out)
        return out

    def AddOp(self, op: Operation):  # noqa: N802
        if not op._inputs:
            self._remove_external_control_edges(op)
            if not any(get_output_context(c) is self for c in op._control_inputs):
                op._add_control_input(self.pivot.op)
        else:
            for i, x in enumerate(op._inputs):
                real = self.AddValue(x)
                if real is not x:
                    op._update_input(i, real)
            self._remove_external_control_edges(op)
        self._mark_outputs(op)

    def process_output(self, val: Tensor) -> Tensor:
        """A branch result as a tensor of this branch (``lambda: x`` gets a Switch)."""
        if val not in self._values:
            self._values.add(val)
            real = val
            if self.outer_context is not None:
                real = self.outer_context.AddValue(val)
                self._values.add(real)
                self._external_values[real] = real
            real = self._switch(real)
            self._external_values[val] = real
            return real
        return self._external_values.get(val, val)


class WhileContext(ControlFlowContext):
    """The context of one while loop: its frame name, pivots and captured invariants."""

    def __init__(self, name="while_context", parallel_iterations=10, back_prop=True,
                 swap_memory=False, maximum_iterations=None, grad_state=None):
        super().__init__()
        self.name = self._graph.unique_name(name)
        self.parallel_iterations = parallel_iterations
        self.back_prop = back_prop
        self.swap_memory = swap_memory
        self.maximum_iterations = maximum_iterations
        self.pivot = None            # the LoopCond output
        self.pivot_for_pred = None   # first Merge: control pivot while building pred
        self.pivot_for_body = None   # first body Identity: control pivot of the body
        self.loop_enters: list = []
        self.loop_exits: list = []
        # For a gradient loop: the autodiff state linking it to its forward loop.
        self.grad_state = grad_state

    def IsWhileContext(self):  # noqa: N802
        return True

    def GetWhileContext(self):  # noqa: N802
        return self

    def GetControlPivot(self):  # noqa: N802
        return self.pivot_for_body if self.pivot_for_body is not None else self.pivot_for_pred

    def AddValue(self, val: Tensor) -> Tensor:  # noqa: N802
        """``val`` as seen inside the loop (through a cached constant Enter if external)."""
        if val in self._values or val.op._control_flow_context is self:
            return self._external_values.get(val, val)
        self._values.add(val)
        real = self._value_from_forward_loop(val)
        if real is not None:
            self._external_values[val] = real
            return real
        result = val
        if self.outer_context is not None:
            result = self.outer_context.AddValue(val)
        enter = self._enter(result, is_constant=True)
        self._values.add(enter)
        self._external_values[val] = enter
        return enter

    def _value_from_forward_loop(self, val: Tensor):
        """While building a gradient loop, a value of its forward loop is read back from
        the history the forward loop saved (a stack pop), not captured."""
        current = self._graph._get_control_flow_context()
        grad_ctx = current.GetWhileContext() if current is not None else None
        if grad_ctx is None or grad_ctx.grad_state is None:
            return None
        forward = get_output_context(val.op)
        forward = forward.GetWhileContext() if forward is not None else None
        if forward is not grad_ctx.grad_state.forward_context:
            return None
        return grad_ctx.grad_state.get_real_value(val)

    def ExitResult(self, result):  # noqa: N802
        """Make the loop's results known to the enclosing context."""
        if self.outer_context is not None:
            for t in result:
                self.outer_context.AddName(t)

    def _enter(self, val: Tensor, is_constant: bool) -> Tensor:
        from ..ops.control_flow_ops import enter
        g = self._graph
        with g.control_dependencies(None):
            out = enter(val, self.name, is_constant=is_constant,
                        parallel_iterations=self.parallel_iterations)
        out.op._set_control_flow_context(self)
        return out

    def AddOp(self, op: Operation):  # noqa: N802
        if not op._inputs:
            internal, external = self._remove_external_control_edges(op)
            if not internal:
                op._add_control_input(self.GetControlPivot().op)
        else:
            for i, x in enumerate(op._inputs):
                real = self.AddValue(x)
                if real is not x:
                    op._update_input(i, real)
            _, external = self._remove_external_control_edges(op)
            self._maybe_add_control_dependency(op)
        self._values.update(op._outputs)
        if external:
            self._pull_external_control_inputs(op, external)

    def _maybe_add_control_dependency(self, op: Operation):
        """Ops fed only by loop invariants must still wait for the iteration's pivot."""
        if op._control_inputs:
            return
        if all(is_loop_constant_enter(x.op) for x in op._inputs):
            op._add_control_input(self.GetControlPivot().op)

    def _pull_external_control_inputs(self, op: Operation, external):
        """A control input from outside the loop becomes a data edge through an Enter."""
        from ..framework.convert import constant
        from ..ops.array_ops import identity
        g = self._graph
        proxies = []
        for c in external:
            with g.control_dependencies(None):
                saved = g._get_control_flow_context()
                g._set_control_flow_context(get_output_context(c))
                try:
                    if c._outputs:
                        marker = c._outputs[0]
                    else:
                        with g.control_dependencies([c]):
                            marker = constant(0, name="control_marker")
                finally:
                    g._set_control_flow_context(saved)
                self.Enter()
                try:
                    proxies.append(identity(marker).op)
                finally:
                    self.Exit()
        op._add_control_inputs(proxies)

    def fix_enter_control_inputs(self, enters, control_inputs):
        """Loop-variable Enters take the control dependencies active around the loop."""
        outer_while = self.outer_context.GetWhileContext() if self.outer_context else None
        for e in enters:
            for c in control_inputs:
                c_ctx = get_output_context(c)
                c_while = c_ctx.GetWhileContext() if c_ctx is not None else None
                if c_while is outer_while:
                    e.op._add_control_input(c)
