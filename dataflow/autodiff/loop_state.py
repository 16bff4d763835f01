"""The state that connects a forward while loop to its gradient loop.

For every forward loop that ``gradients`` passes through, a :class:`GradLoopState`

* adds a counter to the forward loop (``f_count``: how many iterations ran);
* builds the gradient loop's :class:`WhileContext` with a counter running that
  many iterations back down (``b_count``);
* saves forward values the gradient needs: each is pushed onto a stack in the
  forward loop (one entry per iteration, pushes ordered by iteration) and popped
  in the gradient loop (:meth:`GradLoopState.get_real_value`). Loop invariants and
  constants are not stacked; values of an enclosing loop are stacked there.

Nested loops nest the states: an inner loop's iteration count of each outer
iteration is itself a forward value of the outer loop, saved on the outer stack.
A cond inside the loop gets a counterpart cond in the gradient loop, on its
predicate's history (:meth:`GradLoopState.grad_cond_context`), so a gradient loop can
itself be differentiated (``dataflow/spec/SECOND_ORDER.md``).
:class:`ControlFlowState` keeps one state per forward loop.
"""
from __future__ import annotations

from ..control_flow.context import (CondContext, WhileContext, get_output_context,
                                    is_loop_constant_enter, is_loop_exit)
from ..framework.convert import constant
from ..framework.graph import Tensor, get_default_graph
from ..ops import array_ops, data_flow_ops
from ..ops.array_ops import shape as shape_of
from ..ops.array_ops import zeros, zeros_like
from ..ops.control_flow_ops import control_trigger, exit as exit_op, loop_cond, merge
from ..ops.control_flow_ops import next_iteration, switch
from ..ops.math_ops import add, greater_equal, subtract

__all__ = ["GradLoopState", "ControlFlowState", "forward_while_context", "in_context",
           "compute_for_gradient_loop", "stack_pushed_values", "stack_pops_of"]


def compute_for_gradient_loop(x: Tensor, build) -> Tensor:
    """``build(x)`` for a small query of ``x`` (its shape, size or rank).

    Inside a gradient loop, when ``x`` belongs to the forward loop, the query runs in
    the forward loop and only its small result is saved for the gradient loop, not
    ``x`` itself. Everywhere else this is just ``build(x)``. Registered with
    :func:`dataflow.ops.array_ops.set_shape_query_builder`, so ``df.shape`` and its
    kin, built in the op layer, get it.
    """
    g = x.graph
    current = g._get_control_flow_context()
    grad_ctx = current.GetWhileContext() if current is not None else None
    if grad_ctx is None or grad_ctx.grad_state is None:
        return build(x)
    x_ctx = get_output_context(x.op)
    forward = x_ctx.GetWhileContext() if x_ctx is not None else None
    if forward is not grad_ctx.grad_state.forward_context:
        return build(x)
    with g.control_dependencies(None):  # (this also clears the context: set it after)
        g._set_control_flow_context(x_ctx)
        query = build(x)
    g._set_control_flow_context(current)
    return grad_ctx.grad_state.get_real_value(query)


array_ops.set_shape_query_builder(compute_for_gradient_loop)


def forward_while_context(op):
    """The while loop ``op`` belongs to (an Exit belongs to the loop it leaves)."""
    ctx = op._control_flow_context
    return ctx.GetWhileContext() if ctx is not None else None


def in_context(ctx, fn):
    """``fn()`` with control-flow context ``ctx`` entered (as is, when ``ctx`` is None)."""
    if ctx is None:
        return fn()
    ctx.Enter()
    try:
        return fn()
    finally:
        ctx.Exit()


def _add_forward_loop_counter(forward, outer_grad_state):
    """``f_count``: counts the forward loop's iterations; returns (total, next_index)."""
    n = constant(0, name="f_count")
    if outer_grad_state is not None:
        # An inner loop run of outer iteration k starts after that iteration's outer
        # counter step, so its pushes come before those of the run of iteration k+1
        # (they share one stack).
        n.op._add_control_input(outer_grad_state.forward_index.op.inputs[0].op)
    forward.Enter()
    try:
        forward.AddName(n)
        enter_n = forward._enter(n, is_constant=False)
        forward.loop_enters.append(enter_n)
        merge_n = merge([enter_n, enter_n])[0]
        switch_n = switch(merge_n, forward.pivot)
        index = add(switch_n[1], 1)
        next_n = next_iteration(index)
        merge_n.op._update_input(1, next_n)
        total = exit_op(switch_n[0], name="f_count")
        forward.loop_exits.append(total)
        forward.ExitResult([total])
    finally:
        forward.Exit()
    return total, next_n


def _add_backprop_loop_counter(grad_ctx, count, outer_grad_state):
    """``b_count``: the gradient loop runs while its counter, starting at ``count``, is
    at least 1; returns the counter's NextIteration."""
    one = constant(1, name="b_count")
    grad_ctx.Enter()
    try:
        grad_ctx.AddName(count)
        enter_count = grad_ctx._enter(count, is_constant=False)
        grad_ctx.loop_enters.append(enter_count)
        merge_count = merge([enter_count, enter_count])[0]
        grad_ctx.pivot_for_pred = merge_count
        grad_ctx.pivot = loop_cond(greater_equal(merge_count, one), name="b_count")
        switch_count = switch(merge_count, grad_ctx.pivot)
        index = subtract(switch_count[1], one)
        grad_ctx.pivot_for_body = index
        next_count = next_iteration(index)
        merge_count.op._update_input(1, next_count)
        final_zero = exit_op(switch_count[0], name="b_count")
        grad_ctx.loop_exits.append(final_zero)
        if outer_grad_state is not None:
            # The pops of one run of this inner loop come before those of the next.
            outer_grad_state.grad_sync._add_control_input(final_zero.op)
        grad_ctx.ExitResult([final_zero])
    finally:
        grad_ctx.Exit()
    return next_count


class GradLoopState:
    """The gradient side of one forward while loop (see the module docstring)."""

    def __init__(self, forward: WhileContext, outer_grad_state):
        self.forward_context = forward
        self.outer_grad_state = outer_grad_state
        self.history_map: dict = {}     # forward tensor -> its value in the gradient loop
        self.switch_map: dict = {}      # forward loop Switch op -> gradient Merge
        # (forward cond predicate, branch) -> that branch's CondContext in the gradient
        # loop, and the predicate -> its (false, true) pivots there (see grad_cond_context).
        self.grad_conds: dict = {}
        self._grad_pivots: dict = {}
        if forward.grad_state is not None:
            _add_missing_exits(forward)
        self.forward_loop_exits = list(forward.loop_exits)
        self.pending_exits_count = len(self.forward_loop_exits)
        self.deferred_exits: list = []
        self.unused_exits: list = []
        self._forward_sync = None
        self._grad_sync = None
        self.control_flow_state = None  # the ControlFlowState holding this state
        # True when a second-order gradient reaches this loop through the values it
        # pushed for its gradient loop (its gradient loop then runs even if no Exit of
        # it is differentiated).
        self.reached_through_history = False
        outer_forward = forward.outer_context
        total, self.forward_index = in_context(
            outer_forward, lambda: _add_forward_loop_counter(forward, outer_grad_state))
        name = forward.name.split("/")[-1] if "/" in forward.name else forward.name
        kwargs = dict(name=name, parallel_iterations=forward.parallel_iterations,
                      back_prop=forward.back_prop, swap_memory=forward.swap_memory,
                      maximum_iterations=forward.maximum_iterations, grad_state=self)
        if outer_grad_state is not None:
            # Nested: this loop's trip count of each outer iteration is an outer history.
            outer_forward.AddName(total)
            history = outer_grad_state.add_forward_accumulator(total)
            # Built where the outer gradient loop differentiates this loop's context: a
            # loop inside a cond branch gets its gradient loop inside the gradient cond.
            contexts = outer_grad_state.grad_contexts_for(outer_forward)

            def build_nested():
                self.grad_context = WhileContext(**kwargs)
                real_count = outer_grad_state.add_backprop_accumulated_value(history, total)
                real_count = contexts[-1].AddValue(real_count)
                return _add_backprop_loop_counter(self.grad_context, real_count,
                                                  outer_grad_state)
            self.grad_index = _in_contexts(contexts, build_nested)
        else:
            def build():
                self.grad_context = WhileContext(**kwargs)
                return _add_backprop_loop_counter(self.grad_context, total, None)
            self.grad_index = in_context(outer_forward, build)


    # -- synchronisation -------------------------------------------------------------------
    @property
    def forward_sync(self):
        """A ControlTrigger in the forward loop that the next iteration waits for: pushes
        made inside conds order themselves before it."""
        if self._forward_sync is None:
            g = get_default_graph()
            with g.control_dependencies(None):
                self._forward_sync = control_trigger(name="f_sync")
            self._forward_sync._set_control_flow_context(self.forward_context)
            self.forward_index.op._add_control_input(self._forward_sync)
        return self._forward_sync

    @property
    def grad_sync(self):
        """A ControlTrigger in the gradient loop after all pops of an iteration: the next
        iteration's pops wait for it (pops stay in iteration order)."""
        if self._grad_sync is None:
            g = get_default_graph()
            with g.control_dependencies(None):
                self._grad_sync = control_trigger(name="b_sync")
            self._grad_sync._set_control_flow_context(self.grad_context)
            self.grad_index.op._add_control_input(self._grad_sync)
        return self._grad_sync

    # -- history: push in the forward loop, pop in the gradient loop -----------------------
    def add_forward_accumulator(self, value: Tensor, dead_branch=False) -> Tensor:
        """Push ``value`` in every forward iteration; returns the stack handle."""
        g = get_default_graph()
        current = g._get_control_flow_context()
        with g.control_dependencies(None):
            if current is not None:
                current.Enter()
            try:
                handle = data_flow_ops.stack(value.dtype, name="f_acc")
            finally:
                if current is not None:
                    current.Exit()
            enter_handle = self.forward_context.AddValue(handle)
            value_ctx = get_output_context(value.op)
            swap = self.forward_context.swap_memory
            if value_ctx is self.forward_context:
                self.forward_context.Enter()
                try:
                    with g.device(value.device):  # pushed where the value lives
                        push = data_flow_ops.stack_push(enter_handle, value, swap_memory=swap)
                finally:
                    self.forward_context.Exit()
                # The next iteration starts only after this iteration's push.
                self.forward_index.op._add_control_input(push.op)
            else:
                if not isinstance(value_ctx, CondContext):
                    raise TypeError(f"Cannot save {value.name} for the gradient: it is in "
                                    f"an unexpected context")
                ctx = value_ctx.outer_context if dead_branch else value_ctx
                ctx.Enter()
                try:
                    with g.device(value.device):
                        push = data_flow_ops.stack_push(enter_handle, value, swap_memory=swap)
                finally:
                    ctx.Exit()
                push.op._set_control_flow_context(value_ctx)
                self.forward_sync._add_control_input(push.op)
            # ... and after this iteration's counter increment (pushes in iteration order).
            push.op._add_control_input(self.forward_index.op.inputs[0].op)
        return handle

    def add_backprop_accumulated_value(self, history: Tensor, value: Tensor,
                                       dead_branch=False) -> Tensor:
        """Pop, in the gradient loop, the value pushed by :meth:`add_forward_accumulator`.

        A value saved inside a cond branch is popped behind a Switch on the cond's
        predicate (itself popped from history), so the pop happens exactly in the
        iterations that pushed; for a cond of this loop the pop is a value of the
        branch's gradient cond (:meth:`grad_cond_context`), as the pushed value was of
        the branch.
        """
        history_ctx = history.op._control_flow_context
        cond_ctx = None
        ctx = value.op._control_flow_context
        while ctx is not None and ctx is not history_ctx:
            if isinstance(ctx, CondContext):
                cond_ctx = ctx
                break
            ctx = ctx.outer_context
        g = get_default_graph()
        with g.control_dependencies(None):
            self.grad_context.Enter()
            try:
                if cond_ctx is not None:
                    pred = self.real_pred(cond_ctx)
                    branch = (1 - cond_ctx.branch) if dead_branch else cond_ctx.branch
                    history = switch(history, pred)[branch]
                with g.device(value.device):  # popped where the value lived
                    pop = data_flow_ops.stack_pop(history, value.dtype, shape=value.shape)
            finally:
                self.grad_context.Exit()
        if cond_ctx is not None and cond_ctx.GetWhileContext() is self.forward_context:
            gctx = self.grad_cond_context(cond_ctx, branch)
            pop.op._set_control_flow_context(gctx)
            gctx._mark_outputs(pop.op)
        if self.grad_context.parallel_iterations > 1:
            self.grad_sync._add_control_input(pop.op)
        return pop

    def get_real_value(self, value: Tensor) -> Tensor:
        """The value of forward tensor ``value`` as the gradient loop sees it."""
        real = self.history_map.get(value)
        if real is not None:
            return real
        cur_value, cur_state, history = value, self, None
        while True:
            enter_op = _loop_constant_enter(cur_value)
            if enter_op is not None:
                # A loop invariant: look through the Enter, to the enclosing loop.
                cur_value = enter_op.inputs[0]
                cur_state = cur_state.outer_grad_state
                if cur_state is None:
                    real = self.grad_context.AddValue(cur_value)
                    break
            elif cur_value.op.type == "Const":
                # Constants are rebuilt in the gradient loop instead of stacked.
                real = constant(cur_value.op.get_attr("value"), dtype=cur_value.dtype)
                break
            else:
                history = self.outside(lambda: cur_state.add_forward_accumulator(cur_value))
                break
        if real is None:
            real = cur_state.add_backprop_accumulated_value(history, cur_value)
            if cur_state is not self:
                real = self.grad_context.AddValue(real)
        self.history_map[value] = real
        return real

    def outside(self, fn):
        """``fn()`` built where the gradient walk runs (outside every gradient loop and
        gradient cond), then back in exactly the current context."""
        g = get_default_graph()
        current = g._get_control_flow_context()
        g._set_control_flow_context(self.control_flow_state.base_context)
        try:
            return fn()
        finally:
            g._set_control_flow_context(current)

    # -- conds inside the loop ------------------------------------------------------------
    def _owner_of(self, cond_ctx):
        """The state (this one or an enclosing one) of the loop ``cond_ctx`` is in."""
        forward = cond_ctx.GetWhileContext()
        state = self
        while state is not None and state.forward_context is not forward:
            state = state.outer_grad_state
        return state

    def real_pred(self, cond_ctx) -> Tensor:
        """The predicate of forward cond ``cond_ctx`` as this gradient loop sees it: in
        each iteration, the value it had in the matching forward iteration (history)."""
        owner = self._owner_of(cond_ctx)
        if owner is None:
            return cond_ctx.pred
        real = owner.history_map.get(cond_ctx.pred)
        if real is None:
            g = get_default_graph()
            current = g._get_control_flow_context()
            g._set_control_flow_context(owner.grad_context)
            try:
                real = owner.get_real_value(cond_ctx.pred)
            finally:
                g._set_control_flow_context(current)
        if owner is not self:
            real = self.grad_context.AddValue(real)
        return real

    def grad_cond_context(self, cond_ctx, branch=None) -> CondContext:
        """The gradient loop's counterpart of branch ``branch`` (default: its own) of
        forward cond ``cond_ctx``, a cond inside this loop.

        The gradients of a branch's ops are built in it, so the gradient loop holds a
        cond with the forward one's structure (Switch in, Merge out, on the predicate's
        history) rather than bare Switch/Merge ops: differentiating the gradient loop
        (second order) then sees a cond in a loop, which it already handles. ::

            forward F:   v --Switch(p)--> branch ops --Merge--> v'
            gradient B:  g' --Switch(p_hist)[b] (CondContext b) --> branch grads
                            --Merge--> g       (untaken side: zeros, made in the other
                                                branch's CondContext)
        """
        branch = cond_ctx.branch if branch is None else branch
        key = (cond_ctx.pred, branch)
        gctx = self.grad_conds.get(key)
        if gctx is not None:
            return gctx
        outer = cond_ctx.outer_context
        if isinstance(outer, CondContext):
            enclosing = self.grad_cond_context(outer)
        else:
            enclosing = self.grad_context
        pred = self.real_pred(cond_ctx)
        g = get_default_graph()
        current = g._get_control_flow_context()
        try:
            with g.control_dependencies(None):  # (this clears the context: set it after)
                g._set_control_flow_context(enclosing)
                if isinstance(enclosing, CondContext):
                    # A cond in a cond: its predicate is a value of the enclosing branch
                    # (saved and differentiated with that branch, as in the forward).
                    pred = enclosing.AddValue(pred)
                pivots = self._grad_pivots.get(cond_ctx.pred)
                if pivots is None:
                    p_false, p_true = switch(pred, pred)
                    pivots = self._grad_pivots[cond_ctx.pred] = (
                        array_ops.identity(p_false, name="b_switch_f"),
                        array_ops.identity(p_true, name="b_switch_t"))
                gctx = CondContext(pred, pivots[branch], branch)
        finally:
            g._set_control_flow_context(current)
        self.grad_conds[key] = gctx
        return gctx

    def grad_contexts_for(self, ctx) -> list:
        """The contexts to enter, outermost first, to build in the gradient of forward
        context ``ctx`` (this loop, or a cond inside it)."""
        chain = []
        while isinstance(ctx, CondContext) and ctx.GetWhileContext() is self.forward_context:
            chain.append(self.grad_cond_context(ctx))
            ctx = ctx.outer_context
        return [self.grad_context] + chain[::-1]


def _add_missing_exits(loop: WhileContext) -> None:
    """Give every loop variable of gradient loop ``loop`` an Exit.

    A gradient loop carries the gradient of each forward loop variable, but builds an
    Exit only for those whose gradient was asked for. Differentiating the gradient loop
    needs every loop variable to leave through an Exit (the gradient of a Switch starts
    from its Exit side), so the missing ones are added; their results go unused.
    """
    g = loop._graph
    for op in g.get_operations():
        if op._control_flow_context is not loop or op.type != "Switch":
            continue
        leaving = op.outputs[0]
        if leaving._consumers or not leaving.dtype.is_floating:
            continue
        loop.Enter()
        try:
            result = exit_op(leaving, name="b_unused_exit")
        finally:
            loop.Exit()
        loop.loop_exits.append(result)
        loop.ExitResult([result])


def _loop_constant_enter(t: Tensor):
    """The loop-invariant Enter ``t`` comes from (through Identity ops), if any."""
    op = t.op
    while op.type == "Identity":
        op = op.inputs[0].op
    return op if is_loop_constant_enter(op) else None


class ControlFlowState:
    """One :class:`GradLoopState` per forward while loop the gradient passes through."""

    def __init__(self):
        self._map: dict = {}
        # Where the gradient walk builds (the caller's context): history stacks are
        # made here, outside every gradient loop.
        self.base_context = get_default_graph()._get_control_flow_context()

    def get_grad_state(self, op, before: bool):
        """The state whose gradient context ``op``'s gradient is built in. Before the
        gradient of an Exit is built (while summing its output gradients) that is the
        enclosing loop's; otherwise the loop ``op`` is in."""
        if before and is_loop_exit(op):
            ctx = op._control_flow_context.outer_context
            forward = ctx.GetWhileContext() if ctx is not None else None
        else:
            forward = forward_while_context(op)
        return self._map.get(forward) if forward is not None else None

    def enter_grad_context(self, op, before: bool) -> list:
        """Enter the context ``op``'s gradient is built in; returns the contexts entered
        (for :meth:`exit_grad_context`). In a cond inside a loop that is the gradient
        cond of the op's branch, except for the cond's own Switch (its gradient, a
        Merge, is built around the cond, as the forward Merge was)."""
        state = self.get_grad_state(op, before)
        if state is None:
            return []
        if before and is_loop_exit(op):
            ctx = op._control_flow_context.outer_context
        else:
            ctx = op._control_flow_context
            if not before and op.type == "Switch" and isinstance(ctx, CondContext):
                ctx = ctx.outer_context
        contexts = state.grad_contexts_for(ctx)
        for c in contexts:
            c.Enter()
        return contexts

    @staticmethod
    def exit_grad_context(contexts: list) -> None:
        """Leave what :meth:`enter_grad_context` entered, innermost first."""
        for c in reversed(contexts):
            c.Exit()

    def add_loop(self, forward: WhileContext, differentiated=None):
        """Create (once) the state of ``forward`` and of the enclosing loops that are
        differentiated too (all of them when ``differentiated`` is None).

        An enclosing loop that is not (``gradients`` called inside its body) gets no
        state, as in TF: the gradient loop is built in that loop's body, where
        ``gradients`` was called, and nests in its frame.
        """
        state = self._map.get(forward)
        if state is None:
            outer = forward.outer_context.GetWhileContext() if forward.outer_context else None
            if differentiated is not None and outer not in differentiated:
                outer = None
            outer_state = self.add_loop(outer, differentiated) if outer is not None else None
            state = self._map[forward] = GradLoopState(forward, outer_state)
            state.control_flow_state = self
        return state

    def state_of(self, forward: WhileContext):
        """The state of forward loop ``forward`` in this ``gradients`` call (or None)."""
        return self._map.get(forward)

    def states(self):
        return list(self._map.values())

    def zeros_like_for_exit(self, exit_tensor: Tensor) -> Tensor:
        """A zero gradient for an Exit whose output nothing differentiates."""
        forward = exit_tensor.op._control_flow_context
        outer = forward.outer_context.GetWhileContext() if forward.outer_context else None
        outer_state = self._map.get(outer) if outer is not None else None
        shape = exit_tensor.shape
        if outer_state is None:
            if shape.is_fully_defined():
                return zeros(shape.as_list(), exit_tensor.dtype)
            return zeros_like(exit_tensor)
        # Made where the outer gradient loop differentiates the loop's context (inside
        # the gradient cond of a branch, for a loop in a cond).
        contexts = outer_state.grad_contexts_for(forward.outer_context)
        if shape.is_fully_defined():
            return _in_contexts(contexts, lambda: zeros(shape.as_list(), exit_tensor.dtype))
        forward.outer_context.Enter()
        try:
            dyn_shape = shape_of(exit_tensor)
        finally:
            forward.outer_context.Exit()
        history = outer_state.add_forward_accumulator(dyn_shape)

        def make():
            real_shape = outer_state.add_backprop_accumulated_value(history, dyn_shape)
            return zeros(real_shape, exit_tensor.dtype)
        return _in_contexts(contexts, make)

    def zeros_like(self, op, index: int):
        """A zero gradient for output ``index`` of ``op`` inside a forward loop (None for
        a loop Switch: its missing side is filled in by its second visit)."""
        if op.type == "Switch" and _is_loop_switch(op):
            return None
        forward = forward_while_context(op)
        state = self._map.get(forward) if forward is not None else None
        val = op.outputs[index]
        if state is None:
            return None  # caller falls back to the loop-free zeros
        dead_branch = op.type == "Switch"
        op_ctx = op._control_flow_context
        if val.shape.is_fully_defined():
            if dead_branch:
                # Made in the other branch's gradient cond: live exactly when the
                # forward branch of this Switch was not taken.
                other = state.grad_cond_context(op_ctx, 1 - op_ctx.branch)
                return in_context(other, lambda: zeros(val.shape.as_list(), val.dtype))
            return zeros(val.shape.as_list(), val.dtype)
        if dead_branch:
            op_ctx.outer_context.Enter()
            try:
                other = switch(op.inputs[0], op_ctx.pred)[1 - op_ctx.branch]
                dyn_shape = shape_of(other)
            finally:
                op_ctx.outer_context.Exit()
            other.op._set_control_flow_context(op_ctx)
            dyn_shape.op._set_control_flow_context(op_ctx)
        else:
            op_ctx.Enter()
            try:
                dyn_shape = shape_of(val)
            finally:
                op_ctx.Exit()
        history = state.outside(
            lambda: state.add_forward_accumulator(dyn_shape, dead_branch=dead_branch))
        real_shape = state.add_backprop_accumulated_value(history, dyn_shape, dead_branch)
        if dead_branch:
            other = state.grad_cond_context(op_ctx, 1 - op_ctx.branch)
            return in_context(other, lambda: zeros(real_shape, val.dtype))
        return zeros(real_shape, val.dtype)


def _in_contexts(contexts, fn):
    """``fn()`` with ``contexts`` (outermost first) entered."""
    for c in contexts:
        c.Enter()
    try:
        return fn()
    finally:
        for c in reversed(contexts):
            c.Exit()


def _is_loop_switch(op) -> bool:
    ctx = op._control_flow_context
    return op.type == "Switch" and ctx is not None and ctx.IsWhileContext()


def is_loop_switch(op) -> bool:
    """A Switch of a while loop (processed twice by the gradient walk)."""
    return _is_loop_switch(op)


def maybe_create_control_flow_state(between_ops):
    """A ControlFlowState if any op between sources and targets leaves a while loop.

    Only the loops being differentiated get state: those left through an Exit between
    the sources and the targets, and (second order) those whose saved history a
    gradient reaches through a stack. An enclosing loop that is neither (``gradients``
    called inside its body) gets none, so the gradient loop nests in its frame, as TF.
    """
    state = None
    differentiated = set()
    reached = []
    base = get_default_graph()._get_control_flow_context()
    base_loop = base.GetWhileContext() if base is not None else None
    for op in between_ops:
        if is_loop_exit(op):
            forward = op._control_flow_context
        elif op.type == "StackPush" and forward_while_context(op) is not None:
            # A second-order gradient: the gradient reaches the loop that saved this
            # history through the stack, not through the loop's Exits. The loops
            # around it that the first gradient differentiated are differentiated too.
            forward = forward_while_context(op)
            differentiated.update(_loops_around(forward, base_loop))
        else:
            continue
        differentiated.add(forward)
        reached.append((op, forward))
    for op, forward in reached:
        if state is None:
            state = ControlFlowState()
        loop = state.add_loop(forward, differentiated)
        while op.type == "StackPush" and loop is not None:
            # The loops around it run their gradient loops too (this one's nests there).
            loop.reached_through_history = True
            loop = loop.outer_grad_state
    return state


def _loops_around(loop, base_loop) -> list:
    """The loops enclosing ``loop`` out to (not including) the loop ``gradients`` is
    called in (``base_loop``; None: outside every loop). A value saved in ``loop`` is
    differentiated by a gradient nest that differentiates all of them."""
    loops = []
    ctx = loop.outer_context
    while ctx is not None:
        outer = ctx.GetWhileContext()
        if outer is None or _encloses(outer, base_loop):
            break
        loops.append(outer)
        ctx = outer.outer_context
    return loops


def _encloses(loop, inner) -> bool:
    """True if while loop ``loop`` is ``inner`` or contains it."""
    while inner is not None:
        if inner is loop:
            return True
        inner = inner.outer_context.GetWhileContext() if inner.outer_context else None
    return False


# -- the history edge: a stack's pushes feed its pops --------------------------------------
_HANDLE_FORWARDERS = ("Enter", "Switch", "Identity")


def _stack_of(handle: Tensor):
    """The Stack op behind ``handle`` (through Enter, Switch and Identity), or None."""
    op = handle.op
    while op.type in _HANDLE_FORWARDERS and op.inputs:
        op = op.inputs[0].op
    return op if op.type == "Stack" else None


def _stack_uses(stack_op, op_type: str) -> list:
    """The ``op_type`` ops (StackPush or StackPop) that reach ``stack_op``'s handle."""
    found, seen, todo = [], set(), [stack_op.outputs[0]]
    while todo:
        for consumer in todo.pop()._consumers:
            if consumer in seen:
                continue
            seen.add(consumer)
            if consumer.type == op_type:
                found.append(consumer)
            elif consumer.type in _HANDLE_FORWARDERS:
                todo.extend(consumer._outputs)
    return found


def stack_pushed_values(pop_op) -> list:
    """The float values pushed onto the stack a StackPop reads (the push ops' outputs,
    which pass the pushed value through). A gradient loop's history is such a stack, so
    these are the forward values a pop in a gradient loop depends on.

    >>> from dataflow.ops.data_flow_ops import stack, stack_pop, stack_push
    >>> h = stack(df.float32)
    >>> pushed = stack_push(h, df.constant(1.0))
    >>> stack_pushed_values(stack_pop(h, df.float32).op) == [pushed]
    True
    """
    if not pop_op.outputs[0].dtype.is_floating:
        return []
    stack_op = _stack_of(pop_op.inputs[0])
    if stack_op is None:
        return []
    return [push.outputs[0] for push in _stack_uses(stack_op, "StackPush")]


def stack_pops_of(push_op) -> list:
    """The StackPop ops reading the stack a float StackPush writes.

    >>> from dataflow.ops.data_flow_ops import stack, stack_pop, stack_push
    >>> h = stack(df.float32)
    >>> pushed = stack_push(h, df.constant(1.0))
    >>> stack_pops_of(pushed.op)
    []
    >>> popped = stack_pop(h, df.float32)
    >>> stack_pops_of(pushed.op) == [popped.op]
    True
    """
    if not push_op.outputs[0].dtype.is_floating:
        return []
    stack_op = _stack_of(push_op.inputs[0])
    return _stack_uses(stack_op, "StackPop") if stack_op is not None else []
