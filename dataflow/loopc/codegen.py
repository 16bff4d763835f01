"""Code generation: one recognized frame (with its nested frames) as one Python function
that Numba compiles.

The function mirrors the interpreter's rules instead of pattern-matching syntax: every
tensor has a value and a *liveness* (a boolean), and every op runs under its liveness,
so a cond inside the loop (Switch/Merge on one predicate) comes out as
``if p: ... else: ...`` and a nested loop as a nested ``while``. What the scalar loop
``while i < n: i += 1`` becomes (names shortened)::

    def frame_fn(a0, flag, par):
        tick = 0
        v1 = a0                      # the loop variable's Merge
        x0 = False                   # its Exit has not fired
        while True:
            v3 = cst((v1 < 100000), 'bool')
            l4 = truth(v3)           # Switch: output 1 live when the predicate holds
            if l4:
                v6 = cst((v1 + 1), 'int32')
            if not l4:               # Exit: live when output 0 is
                ...
            if not l4:               # the NextIterations are dead: the loop is over
                break
            v1 = v6
            ...

Run-time checks hand back to the interpreter (``raise Fallback()``) whatever the
canonical shape does not cover: NextIterations not all live or all dead, an Exit live
twice or before the last iteration, a Merge with two live inputs, Enters of a nested
frame partly dead. ``tick`` counts iterations of every loop; every 4096 the deadline
flag (set by a timer thread) is read. ``par`` is the control block of the GEMM helper
thread that products may share their work with (see ``runner.gemm_helper_block``).
"""
from __future__ import annotations

import re

import numpy as np

from dataflow.framework import op_registry as R

from . import lowering
from .lowering import LOWERINGS, RESOURCE_KINDS

__all__ = ["FrameSource", "Unsupported", "generate"]

_IDENT = re.compile(r"^[A-Za-z_]\w*$")
# A scalar constant as _literal writes it: used in place, not assigned to a variable.
_SCALAR_LITERAL = re.compile(r"^np\.\w+\(-?(\d[\d.e+-]*|np\.nan|np\.inf)\)$")
TICK_MASK = 4095
# The most statements a generated function may have; a larger frame runs interpreted
# (its nested frames are tried on their own). Numba's compile time grows with the
# square of a function's size (LLVM's SROA pass over every variable in every block):
# measured on the loaded 2-core host, about 70 us x statements^2, i.e. 2 s at 150, 6 s
# at 300, 15 s at 520, 62 s at 840; second-order gradient frames of nested loops reach
# 1000 and more. The largest frames of the lowering tests have 580 statements.
MAX_STATEMENTS = 600


class Unsupported(Exception):
    """The frame cannot be generated (the message says why)."""


class FrameSource:
    """The generated function of one top-level frame and how to call it.

    ``params[k]`` describes argument ``k``: ``("value", enter)``, ``("const", array)``,
    ``("stack", enter, mode, rank, dtype)`` (buffer and count, two arguments) or
    ``("variable", enter, dtype)``; ``results``: ``("exit", op)``, ``("stack", k)``,
    ``("variable", k)`` in the returned tuple's order (after a leading 0).
    """

    def __init__(self, name, source, params, results):
        self.name, self.source, self.params, self.results = name, source, params, results


def _and(parts):
    parts = [p for p in parts if p != "True"]
    if "False" in parts:
        return "False"
    parts = list(dict.fromkeys(parts))
    if not parts:
        return "True"
    return parts[0] if len(parts) == 1 else "(" + " and ".join(parts) + ")"


def _or(parts):
    if "True" in parts:
        return "True"
    parts = list(dict.fromkeys(p for p in parts if p != "False"))
    if not parts:
        return "False"
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def _np_dtype(t):
    np_type = t.dtype.as_numpy_dtype
    return None if np_type is None else np.dtype(np_type).name


def _literal(value, dtype):
    v = np.asarray(value).item()
    if isinstance(v, bool) or dtype == "bool":
        return "True" if v else "False"
    if isinstance(v, float):
        if v != v:
            text = "np.nan"
        elif v in (float("inf"), float("-inf")):
            text = "np.inf" if v > 0 else "-np.inf"
        else:
            text = repr(v)
        return f"np.{dtype}({text})"
    return f"np.{dtype}({int(v)})"


class OpEmitter:
    """What a lowering sees (see :mod:`.lowering`)."""

    def __init__(self, gen, op, args):
        self.gen, self.op, self.args = gen, op, args
        self.lines = []

    def line(self, text):
        self.lines.append(text)

    def dtype(self, k):
        return _np_dtype(self.op._outputs[k])

    def in_dtype(self, i):
        return _np_dtype(self.op._inputs[i])

    def const(self, value):
        return self.gen.const(value)

    def stack(self, handle):
        return self.gen.stack(handle, self.op)

    def variable(self, handle):
        return self.gen.variable(handle)

    def invariant(self, k):
        """Whether input ``k`` is an invariant Enter of the frame being emitted (its value
        is fixed before the frame's loop starts)."""
        src = self.op._inputs[k].op
        return bool(self.gen.preheaders) and src in self.gen.preheaders[-1][2]

    def hoist(self, expr):
        """A name for ``expr`` computed once before the current frame's loop (``expr``
        may read only the frame's invariants and values from outside it)."""
        return self.gen.hoist(expr)


class _Gen:
    def __init__(self, top):
        self.top = top
        self.lines = []
        self.count = 0
        self.val, self.live, self.node_live = {}, {}, {}
        self.params, self.param_names = [], []
        self.top_enters = {e: k for k, e in enumerate(top.enters)}
        self.slots = {}           # top-level Enter -> (kind, names)
        self.slot_uses = {}       # top-level Enter -> set of op types using it
        # Fewer statements compile faster (Numba's passes cost about 0.3 ms per
        # statement): a Switch on a predicate already tested in this loop body reuses
        # the test, and an op guarded by the same liveness as the block just emitted
        # joins it instead of opening another ``if``.
        self.scope = 0
        self.tests = {}           # (scope, node liveness, predicate) -> (on, off)
        self.open_if = None       # (indent, liveness, len(lines)) of the last guarded block
        # Accumulating Adds (see _accumulators): add op -> (loop variable's name, its
        # "owned" flag's name, which input of the Add the loop variable is).
        self.acc_of = {}
        # Elementwise ops on arrays run as one flat loop each, and an op whose only
        # consumer is another such op is inlined into its consumer's loop (see
        # _fusable_ops): op -> whether it is inlined; inlined values by placeholder name.
        self.fusable = _fusable_ops(top)
        self.inlined = {}
        self.variable_names = set()
        # Per frame being emitted, innermost last: [line index before its loop, indent,
        # its invariant Enters] (OpEmitter.hoist inserts lines there).
        self.preheaders = []

    # -- names -------------------------------------------------------------------------------
    def fresh(self, prefix="v"):
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, ind, text):
        self.lines.append("    " * ind + text)

    def hoist(self, expr):
        name = self.fresh("h")
        at, ind = self.preheaders[-1][:2]
        self.lines.insert(at, "    " * ind + f"{name} = {expr}")
        self.preheaders[-1][0] += 1
        if self.open_if is not None and self.open_if[2] >= at:
            self.open_if = self.open_if[:2] + (self.open_if[2] + 1,)
        return name

    def param(self, desc, name=None):
        name = name or self.fresh("p")
        self.params.append(desc)
        self.param_names.append(name)
        return name

    def const(self, value):
        arr = np.asarray(value)
        if arr.ndim == 0:
            return _literal(arr, arr.dtype.name)
        return self.param(("const", arr))

    def _root(self, handle):
        t = handle
        while True:
            op = t.op
            if op in self.top_enters:
                return op
            if op._op_def.role in (R.ENTER, R.SWITCH) or op._op_def.forwards_input:
                t = op._inputs[0]
                continue
            raise Unsupported(f"resource '{handle.name}' does not come from an Enter of "
                              "the frame")

    def stack(self, handle, user):
        root = self._root(handle)
        kind, names = self.slots[root]
        if kind != "stack":
            raise Unsupported(f"'{handle.name}' is used as a stack and a variable")
        return names

    def variable(self, handle):
        root = self._root(handle)
        kind, names = self.slots[root]
        if kind != "variable":
            raise Unsupported(f"'{handle.name}' is used as a stack and a variable")
        return names

    # -- values and liveness -----------------------------------------------------------------
    def value(self, t):
        try:
            return self.val[t]
        except KeyError:
            raise Unsupported(f"no value for '{t.name}' in the generated code") from None

    def liveness(self, t):
        return self.live.get(t, "True") if t in self.val else self._missing(t)

    def _missing(self, t):
        raise Unsupported(f"no value for '{t.name}' in the generated code")

    def control_live(self, op):
        if op in self.node_live:
            return self.node_live[op]
        raise Unsupported(f"control input '{op.name}' is not computed in the frame")

    def set_live(self, ind, expr):
        """``expr`` as a name or constant (composite expressions get a variable)."""
        if expr in ("True", "False") or _IDENT.match(expr):
            return expr
        name = self.fresh("l")
        self.emit(ind, f"{name} = {expr}")
        return name

    # -- frames ------------------------------------------------------------------------------
    def generate(self):
        top = self.top
        claimed = self._classify_resources()
        for e in top.enters:
            t_in, t_out = e._inputs[0], e._outputs[0]
            if e in self.slots or e in claimed:   # a resource: its ops name the slot
                self.val[t_out], self.live[t_out] = "None", "True"
                self.node_live[e] = "True"
                continue
            name = self.param(("value", e))
            self.val[t_in] = self.val[t_out] = name
            self.live[t_in] = self.live[t_out] = "True"
        self.emit(1, "tick = 0")
        for e, (kind, names) in self.slots.items():
            if kind == "stack":
                self.emit(1, f"{names[0]}_peak = {names[1]}")
        exits = self.frame(top, 1)
        out = ["0"]
        results = []
        for x in top.exits:
            self.emit(1, f"if not {exits[x][1]}: raise Fallback()")
            out.append(exits[x][0])
            results.append(("exit", x))
        for kind in RESOURCE_KINDS.values():   # their parameters came first, see below
            exprs, kind_results = kind.finish(self)
            out += exprs
            results += kind_results
        for e, (kind, names) in self.slots.items():
            if kind == "stack":
                out += [names[0], names[1], f"{names[0]}_peak"]
                results.append(("stack", e))
            else:
                out.append(names)
                results.append(("variable", e))
        self.emit(1, f"return ({', '.join(out)},)")
        head = [f"def frame_fn({', '.join(self.param_names + ['flag', 'par'])}):"]
        return head + self.lines, results

    def _classify_resources(self):
        """Stacks and variables reached from the frame's resource Enters (the other
        resource kinds declare their parameters first); the Enters those kinds took."""
        claimed = set()
        for kind in RESOURCE_KINDS.values():
            claimed |= kind.claim(self)
        uses = {}
        for op in _all_ops(self.top):
            if op.type in ("StackPush", "StackPop", "StackSize", "ReadVariableOp",
                           "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
                uses.setdefault(self._root(op._inputs[0]), set()).add(op)
        for e in self.top.enters:
            if e._inputs[0].dtype.as_numpy_dtype is not None or e in claimed:
                continue
            if not e.get_attr("is_constant"):
                raise Unsupported(f"resource Enter '{e.name}' is a loop variable")
            users = uses.get(e, set())
            types = {op.type for op in users}
            k = len(self.slots)
            if types and types <= {"StackPush", "StackPop", "StackSize"}:
                pushes = "StackPush" in types
                pops = "StackPop" in types
                if pushes and pops:
                    raise Unsupported(f"stack '{e._inputs[0].name}' is pushed and popped in "
                                      "one frame")
                mode = "push" if pushes else "pop"
                value = [op._inputs[1] if op.type == "StackPush" else op._outputs[0]
                         for op in users if op.type != "StackSize"]
                ranks = {t.shape.ndims for t in value}
                dtypes = {_np_dtype(t) for t in value}
                if len(ranks) > 1 or len(dtypes) > 1:
                    raise Unsupported(f"stack '{e._inputs[0].name}' holds mixed entries")
                rank = ranks.pop() if ranks else None
                dtype = dtypes.pop() if dtypes else None
                names = (f"s{k}_buf", f"s{k}_n")
                self.param(("stack", e, mode, rank, dtype), names[0])
                self.param(("stack_count", e), names[1])
                self.slots[e] = ("stack", names)
            elif types and not types & {"StackPush", "StackPop", "StackSize"}:
                reads = [op for op in users if op.type == "ReadVariableOp"]
                dtype = _np_dtype(reads[0]._outputs[0]) if reads else \
                    _np_dtype(next(iter(users))._inputs[1])
                name = f"r{k}"
                self.variable_names.add(name)
                self.param(("variable", e, dtype,
                            any(op.type != "ReadVariableOp" for op in users)), name)
                self.slots[e] = ("variable", name)
            else:
                raise Unsupported(f"resource '{e._inputs[0].name}' is used by "
                                  f"{sorted(types) or 'nothing the compiler lowers'}")
        return claimed

    def frame(self, loop, ind, exit_vars=None):
        """Emit ``loop`` at indentation ``ind``; returns ``{exit op: (value, live)}``."""
        if exit_vars is None:
            exit_vars = self.exit_vars(loop, ind)
        for e in loop.invariants:
            if e in self.top_enters:
                continue
            self.val[e._outputs[0]] = self.value(e._inputs[0])
            self.live[e._outputs[0]] = "True"
            self.node_live[e] = "True"
        outer_scope = self.scope
        self.scope = self.count + 1
        carried = []
        accumulators = _accumulators(loop)
        for e, m, nxt in loop.loop_vars:
            v = self.fresh("m")
            if m in accumulators:
                self.emit(ind, f"{v} = acc_start({self.value(e._inputs[0])})")
                add, index = accumulators[m]
                own = self.fresh("o")
                self.emit(ind, f"{own} = False")
                self.acc_of[add] = (v, own, index)
            else:
                self.emit(ind, f"{v} = {self.value(e._inputs[0])}")
            self.val[m._outputs[0]] = v
            self.live[m._outputs[0]] = "True"
            self.node_live[m] = "True"
            carried.append((v, nxt))
        it = self.fresh("it")
        fired_at = {x: self.fresh("xi") for x in loop.exits}
        self.preheaders.append([len(self.lines), ind, {e for e in loop.invariants}])
        self.emit(ind, f"{it} = 0")
        for x in loop.exits:
            self.emit(ind, f"{fired_at[x]} = -1")
        self.emit(ind, "while True:")
        body = ind + 1
        for unit in _units(loop):
            if isinstance(unit, str):
                self.child(loop.children[unit], body)
            else:
                self.op(unit, body)
        for x in loop.exits:
            value_var, live_var = exit_vars[x]
            t = x._inputs[0]
            lx = _and([self.liveness(t)] + [self.control_live(c) for c in x._control_inputs])
            if lx == "False":
                continue
            inner = body
            if lx != "True":
                self.emit(body, f"if {lx}:")
                inner = body + 1
            self.emit(inner, f"if {live_var}: raise Fallback()")
            self.emit(inner, f"{value_var} = {self.value(t)}")
            self.emit(inner, f"{live_var} = True")
            self.emit(inner, f"{fired_at[x]} = {it}")
            self.node_live[x] = live_var
        lives = [_and([self.liveness(nxt._inputs[0])] +
                      [self.control_live(c) for c in nxt._control_inputs])
                 for _, nxt in carried]
        go = self.set_live(body, lives[0])
        for other in lives[1:]:
            if other != go:
                self.emit(body, f"if ({other}) != {go}: raise Fallback()")
        self.emit(body, f"if not {go}: break")
        temps = []
        for v, nxt in carried:
            tmp = self.fresh("n")
            self.emit(body, f"{tmp} = {self.value(nxt._inputs[0])}")
            temps.append((v, tmp))
        for v, tmp in temps:
            self.emit(body, f"{v} = {tmp}")
        self.emit(body, f"{it} += 1")
        self.emit(body, "tick += 1")
        self.emit(body, f"if (tick & {TICK_MASK}) == 0 and flag[0] != 0: raise Deadline()")
        self.preheaders.pop()
        self.scope = outer_scope
        for x in loop.exits:
            value_var, live_var = exit_vars[x]
            self.emit(ind, f"if {live_var} and {fired_at[x]} != {it}: raise Fallback()")
            self.val[x._outputs[0]] = value_var
            self.live[x._outputs[0]] = live_var
            self.node_live[x] = live_var
        return exit_vars

    def exit_vars(self, loop, ind):
        out = {}
        for x in loop.exits:
            live_var = self.fresh("xl")
            self.emit(ind, f"{live_var} = False")
            out[x] = (self.fresh("x"), live_var)
        return out

    def child(self, loop, ind):
        lives = [_and([self.liveness(e._inputs[0])] +
                      [self.control_live(c) for c in e._control_inputs])
                 for e in loop.enters]
        every, some = _and(lives), _or(lives)
        if _dead_without_loop_variables(loop):
            # Its invariant Enters fire in every iteration of this frame, its loop
            # variables' only when the body runs: the last iteration (the predicate
            # false) gives it live invariants and dead loop variables, and then every
            # op of it is dead and it is never entered. Only loop variables decide.
            some = _or([live for e, live in zip(loop.enters, lives)
                        if not e.get_attr("is_constant")])
        exit_vars = self.exit_vars(loop, ind)
        if every == "False":
            for x in loop.exits:
                self.val[x._outputs[0]], self.live[x._outputs[0]] = exit_vars[x]
                self.node_live[x] = exit_vars[x][1]
            return
        if some != every:
            self.emit(ind, f"if ({some}) and not ({every}): raise Fallback()")
        inner = ind
        if every != "True":
            self.emit(ind, f"if {every}:")
            inner = ind + 1
        for e in loop.enters:
            self.node_live[e] = "True"
        self.frame(loop, inner, exit_vars)
        for x in loop.exits:
            self.node_live[x] = exit_vars[x][1]

    def op(self, op, ind):
        role = op._op_def.role
        if role == R.ENTER:
            return   # emitted with its child frame
        ctrl = [self.control_live(c) for c in op._control_inputs]
        if role == R.CONTROL_TRIGGER:
            self.node_live[op] = "True"
            return
        if role == R.SWITCH:
            data, pred = op._inputs
            node = self.set_live(ind, _and([self.liveness(data), self.liveness(pred)] + ctrl))
            self.node_live[op] = node
            p = self.value(pred)
            key = (self.scope, node, p)
            if key not in self.tests:
                on = self.fresh("l")
                test = f"bool({p})" if pred.shape.ndims == 0 else f"truth({p})"
                self.emit(ind, f"{on} = {node} and {test}" if node != "True"
                          else f"{on} = {test}")
                off = self.fresh("l")
                self.emit(ind, f"{off} = {node} and not {on}" if node != "True"
                          else f"{off} = not {on}")
                self.tests[key] = (on, off)
            on, off = self.tests[key]
            v = self.value(data)
            self.val[op._outputs[0]] = self.val[op._outputs[1]] = v
            self.live[op._outputs[0]], self.live[op._outputs[1]] = off, on
            return
        if role == R.MERGE:
            value, index, live = self.fresh("v"), self.fresh("v"), self.fresh("l")
            self.emit(ind, f"{live} = False")
            for i, t in enumerate(op._inputs):
                lt = self.liveness(t)
                if lt == "False":
                    continue
                inner = ind
                if lt != "True":
                    self.emit(ind, f"if {lt}:")
                    inner = ind + 1
                self.emit(inner, f"if {live}: raise Fallback()")
                self.emit(inner, f"{value} = {self.value(t)}")
                self.emit(inner, f"{index} = np.int32({i})")
                self.emit(inner, f"{live} = True")
            self.val[op._outputs[0]], self.val[op._outputs[1]] = value, index
            self.live[op._outputs[0]] = self.live[op._outputs[1]] = live
            self.node_live[op] = live
            return
        if role != R.NORMAL:
            raise Unsupported(f"op '{op.name}' has role {role}")
        node = _and([self.liveness(t) for t in op._inputs] + ctrl)
        node = self.set_live(ind, node)
        self.node_live[op] = node
        if node == "False":
            for t in op._outputs:
                self.val[t], self.live[t] = "None", "False"
            return
        if op in self.fusable:
            self.elementwise(op, ind, node)
            return
        args = [self.value(t) for t in op._inputs]
        acc = self.acc_of.get(op)
        if acc is not None and args[acc[2]] == acc[0]:
            # ``total + v`` into the loop variable's own buffer (see _accumulators).
            total, own, index = acc
            other = args[1 - index]
            exprs, block = [f"acc_add({total}, {other}, {own}, {index == 0})"], []
        else:
            acc = None
            e = OpEmitter(self, op, args)
            exprs = LOWERINGS[op.type].emit(e)
            if exprs is None:
                raise Unsupported(f"op '{op.name}' ({op.type}) cannot be lowered here")
            block = list(e.lines)
        if _all_scalar(op):
            block, exprs = [_scalar_line(t) for t in block], [_scalar_casts(x) for x in exprs]
        for t, expr in zip(op._outputs, exprs):
            if _IDENT.match(expr) or _SCALAR_LITERAL.match(expr):
                self.val[t] = expr
            else:
                name = self.fresh("v")
                block.append(f"{name} = {expr}")
                self.val[t] = name
            self.live[t] = node
        for t in op._outputs[len(exprs):]:
            self.val[t], self.live[t] = "None", "False"
        if acc is not None:
            block.append(f"{acc[1]} = True")   # the sum is a buffer of this loop's own
        if not block:
            return
        self.emit_guarded(ind, node, block)

    def emit_guarded(self, ind, node, block):
        """Emit ``block`` under ``if node:`` (the op's liveness), joining the guarded block
        emitted just before when it has the same liveness; unguarded when always live."""
        inner = ind
        if node != "True":
            if self.open_if != (ind, node, len(self.lines)):
                self.emit(ind, f"if {node}:")
            inner = ind + 1
        for text in block:
            self.emit(inner, text)
        self.open_if = (ind, node, len(self.lines))

    # -- elementwise loops -------------------------------------------------------------------
    def elementwise(self, op, ind, node):
        """An elementwise op on arrays: inlined into its consumer (when it is its only
        consumer and elementwise too), or one loop over the flattened operands when their
        shapes agree at run time; else the lowering's array expression (broadcasting).
        The loop's element expression is the lowering's own, for scalars, so the values
        are the same bits either way."""
        pieces = [self._piece(t) for t in op._inputs]
        leaves = list(dict.fromkeys(leaf for p in pieces for leaf in p[2]))
        for t in op._outputs:
            self.live[t] = node
        out = op._outputs[0]
        array, scalar = self._render(op, [p[0] for p in pieces], [p[1] for p in pieces])
        if self.fusable[op] and not any(leaf in self.variable_names for leaf, _ in leaves):
            name = f"@inline{len(self.inlined)}"
            self.inlined[name] = (array, scalar, leaves)
            self.val[out] = name
            return
        value = self.fresh("v")
        flat, index = f"{value}_f", f"{value}_i"
        tensors = [leaf for leaf, rank in leaves if rank]
        if not tensors:    # no array among the leaves: nothing to loop over
            block = [f"{value} = {array}"]
        else:
            block = [f"{value} = np.empty({tensors[0]}.shape, np.{_np_dtype(out)})",
                     f"{flat} = {value}.reshape({value}.size)"]
            block += [f"{leaf}_f = {leaf}.ravel()" for leaf in tensors]
            block += [f"for {index} in range({flat}.size):",
                      f"    {flat}[{index}] = {scalar.replace('{i}', index)}"]
        if len(tensors) > 1:   # the loop where the shapes agree, else the broadcasting
            same = " and ".join(f"{tensors[0]}.shape == {leaf}.shape" for leaf in tensors[1:])
            block = [f"if {same}:"] + ["    " + text for text in block] + \
                ["else:", f"    {value} = {array}"]
        self.val[out] = value
        self.emit_guarded(ind, node, block)

    def _piece(self, t):
        """``(array expression, element expression, leaves)`` of an operand; an element
        expression writes ``{i}`` for the loop index; leaves are ``(name, rank)``."""
        v = self.value(t)
        if v in self.inlined:
            return self.inlined[v]
        if t.shape.ndims == 0:
            return v, v, [(v, 0)] if _IDENT.match(v) else []
        return v, f"{v}_f[{{i}}]", [(v, t.shape.ndims)]

    def _render(self, op, arrays, elements):
        """The lowering's expression of ``op`` over array operands and over elements."""
        array = LOWERINGS[op.type].emit(OpEmitter(self, op, arrays))[0]
        element = LOWERINGS[op.type].emit(OpEmitter(self, op, elements))[0]
        return array, _scalar_casts(element)


# -- elementwise loops ------------------------------------------------------------------------
#
# Numba compiles ``a + b`` on two arrays through its broadcasting machinery: about 3x
# slower than NumPy on a 32 x 256 float32 array (2.4 against 0.8 us), where one flat loop
# vectorizes. And ``tanh(h @ W + x)`` would allocate and pass over ``h @ W + x`` only to
# read it once. So a float elementwise op on arrays (every operand of the output's rank,
# or a scalar) is generated as a loop over the flattened operands, guarded by a run-time
# test that their shapes agree (else the broadcasting expression), and an op whose value
# has no other consumer than another such op of the same frame is inlined into that op's
# loop. The element expression is the lowering's own for scalars: the same arithmetic
# and the same approximations as the array code, element by element.

def _elementwise_lowering(op) -> bool:
    lowered = LOWERINGS.get(op.type)
    return lowered is not None and lowered.emit is lowering._elementwise


def _fusable_one(op) -> bool:
    if op._op_def.role != R.NORMAL or not _elementwise_lowering(op) or len(op._outputs) != 1:
        return False
    out = op._outputs[0]
    dtype = _np_dtype(out)
    if dtype not in ("float32", "float64") or not out.shape.ndims:
        return False
    return all(_np_dtype(t) == dtype and t.shape.ndims in (0, out.shape.ndims)
               for t in op._inputs)


def _fusable_ops(top) -> dict:
    """``{op: inlined into its consumer?}`` for the float elementwise array ops of
    ``top`` and its nested frames (see above); an accumulating Add is not one."""
    out = {}

    def visit(loop):
        members = _members(loop)
        accumulating = {add for add, _ in _accumulators(loop).values()}
        ops = [op for op in loop.ops if _fusable_one(op) and op not in accumulating]
        for op in ops:
            users = {c for c in op._outputs[0]._consumers if c in members}
            out[op] = len(users) == 1 and not op._control_outputs and \
                next(iter(users)) in ops
        for child in loop.children.values():
            visit(child)
    visit(top)
    return out


# -- scalar code without helper calls ---------------------------------------------------------
#
# Each distinct (helper, argument types) pair the generated code calls is a function Numba
# compiles on its own (a full pipeline, 50-150 ms), and most ops in a loop's control are
# scalars: for an op whose inputs and outputs are all statically scalar, the lowering's
# ``cst(x, 'dtype')`` becomes the NumPy scalar constructor it stands for and
# ``check_divisor(y)`` an inline test, which Numba types in place.

def _all_scalar(op) -> bool:
    return all(t.shape.ndims == 0 for t in list(op._inputs) + list(op._outputs))


def _call_args(text, start):
    """``(args, end)`` of the call whose ``(`` is at ``text[start]``: the top-level
    arguments as strings and the index after the closing ``)``; None if unbalanced."""
    depth, args, begin, quote = 0, [], start + 1, None
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[begin:i].strip())
                return args, i + 1
        elif ch == "," and depth == 1:
            args.append(text[begin:i].strip())
            begin = i + 1
    return None


_CST = re.compile(r"(?<![\w.])cst\(")
_DTYPE_LITERAL = re.compile(r"^'(\w+)'$")


def _scalar_casts(text):
    """``text`` with each ``cst(x, 'dtype')`` (nested ones too) as a scalar cast:
    ``np.dtype(x)``, or ``(x != 0)`` for bool (what ``cst`` does to a scalar).

    >>> _scalar_casts("cst((cst(a + b, 'int32') * c), 'int32')")
    'np.int32((np.int32(a + b) * c))'
    """
    out, pos = [], 0
    for m in _CST.finditer(text):
        if m.start() < pos:
            continue
        parsed = _call_args(text, m.end() - 1)
        literal = _DTYPE_LITERAL.match(parsed[0][1]) if parsed and len(parsed[0]) == 2 \
            else None
        if literal is None:
            return text
        (value, _), end = parsed
        value, dt = _scalar_casts(value), literal.group(1)
        out.append(text[pos:m.start()])
        out.append(f"({value} != 0)" if dt == "bool" else f"np.{dt}({value})")
        pos = end
    return "".join(out) + text[pos:]


def _scalar_line(text):
    m = re.match(r"^check_divisor\((.*)\)$", text)
    if m:
        return f"if ({_scalar_casts(m.group(1))}) == 0: raise Fallback()"
    return _scalar_casts(text)


# -- accumulation in place --------------------------------------------------------------------
#
# A gradient loop sums into a loop variable: ``total = total + v`` each iteration (dW of
# an RNN, 256 x 256 floats). Generated as written, every iteration allocates the sum and
# writes it in a second pass; NumPy's hand-written backprop does ``dw += v``. When the
# loop variable's value goes nowhere but into that Add (and to its Exit, which fires
# only once the body stops), and the Add's result goes nowhere but back into the loop
# variable, nothing can observe the old buffer, so the sum may overwrite it: the same
# IEEE additions, element by element, as ``total + v`` (bit for bit). The buffer the
# loop variable starts with belongs to the caller (an Enter value), so the first
# iteration adds out of place; from then on the loop owns it (the "owned" flag).

_ACCUMULATING = ("AddV2", "AddN")


def _members(loop):
    out = set(loop.ops) | set(loop.exits)
    for _, m, nxt in loop.loop_vars:
        out |= {m, nxt}
    return out


def _through_identities(t, members):
    """``(consumer, tensor it reads)`` at the end of a chain of single-consumer
    Identities from ``t``, or None when some tensor on the way has another consumer."""
    while True:
        users = [c for c in t._consumers if c in members]
        if len(users) != 1:
            return None
        if users[0].type != "Identity":
            return users[0], t
        t = users[0]._outputs[0]


def _float_rank(t):
    np_type = t.dtype.as_numpy_dtype
    if np_type is None or np.dtype(np_type).name not in ("float32", "float64"):
        return None
    return t.shape.ndims


def _accumulators(loop) -> dict:
    """``{merge: (add op, index of the loop variable among the Add's inputs)}`` for the
    loop variables of ``loop`` that only accumulate (see above)."""
    members = _members(loop)
    out = {}
    for _, m, nxt in loop.loop_vars:
        users = [c for c in m._outputs[0]._consumers if c in members]
        if len(users) != 1 or users[0]._op_def.role != R.SWITCH or \
                users[0]._inputs[0] is not m._outputs[0]:
            continue
        switch = users[0]
        if any(c._op_def.role != R.EXIT for c in switch._outputs[0]._consumers
               if c in members):
            continue
        found = _through_identities(switch._outputs[1], members)
        if found is None:
            continue
        add, read = found
        if add.type not in _ACCUMULATING or len(add._inputs) != 2 or \
                [t is read for t in add._inputs].count(True) != 1:
            continue
        back = _through_identities(add._outputs[0], members)
        if back is None or back[0] is not nxt:
            continue
        ranks = {_float_rank(t) for t in (m._outputs[0], add._inputs[0], add._inputs[1],
                                          add._outputs[0])}
        dtypes = {t.dtype for t in (m._outputs[0], add._inputs[0], add._inputs[1],
                                    add._outputs[0])}
        if len(ranks) != 1 or len(dtypes) != 1 or ranks.pop() in (None, 0):
            continue
        out[m] = (add, 0 if add._inputs[0] is read else 1)
    return out


def _dead_without_loop_variables(loop) -> bool:
    """Whether every op of ``loop`` (nested frames included, their invariant Enters
    aside) is downstream, by data or control edges inside the frame, of a loop
    variable's Enter. Then an instance of the frame whose loop-variable Enters are dead
    runs nothing live, whatever its invariant Enters are: the interpreter gives dead
    Exits and no effect. Graphs built by ``while_loop`` have this shape (an op reading
    only invariants gets a control input from the loop's pivot, as in TF1); a raw
    frame with an op fed by invariants alone does not, and keeps the run-time check."""
    members = set()

    def gather(frame):
        members.update(_all_ops(frame))
        members.update(op for var in frame.loop_vars for op in var[1:])
        for child in frame.children.values():
            gather(child)
    gather(loop)
    reached = set()
    todo = [e for e in loop.enters if not e.get_attr("is_constant")]
    while todo:
        op = todo.pop()
        for c in [c for t in op._outputs for c in t._consumers] + op._control_outputs:
            if c in members and c not in reached:
                reached.add(c)
                todo.append(c)
    return all(op in reached for op in members
               if not (op._op_def.role == R.ENTER and op.get_attr("is_constant")))


def _all_ops(loop):
    yield from loop.ops
    yield from loop.exits
    for child in loop.children.values():
        yield from _all_ops(child)


def _units(loop):
    """The frame's ops in an order that respects data and control edges within one
    iteration; a nested frame is one unit (its name) placed after its Enters' inputs."""
    child_of = {}
    for name, child in loop.children.items():
        for e in child.enters:
            child_of[e] = name
        for x in child.exits:
            child_of[x] = name
    members = [op for op in loop.ops if op not in child_of] + \
        [name for name in loop.children]
    order_key = {}
    deps = {}
    for op in loop.ops:
        if op in child_of:
            continue
        order_key[op] = op._id
        deps[op] = {_unit_of(p, child_of, loop) for p in _preds(op)} - {None}
    for name, child in loop.children.items():
        order_key[name] = min(e._id for e in child.enters)
        deps[name] = set()
        for e in child.enters:
            deps[name] |= {_unit_of(p, child_of, loop) for p in _preds(e)} - {None}
    done, out = set(), []
    pending = sorted(members, key=lambda u: order_key[u])
    while pending:
        progressed = False
        rest = []
        for u in pending:
            if deps[u] <= done:
                done.add(u)
                out.append(u)
                progressed = True
            else:
                rest.append(u)
        if not progressed:
            raise Unsupported("a cycle inside one iteration")
        pending = rest
    return out


def _preds(op):
    return [t.op for t in op._inputs] + list(op._control_inputs)


def _unit_of(p, child_of, loop):
    if p in child_of:
        return child_of[p]
    if p in loop.ops:
        return p
    return None


def generate(loop) -> FrameSource:
    """The generated source of ``loop`` (a top-level :class:`~.frames.LoopFrame`);
    raises :class:`Unsupported` naming what it cannot express."""
    gen = _Gen(loop)
    lines, results = gen.generate()
    if len(lines) - 1 > MAX_STATEMENTS:
        raise Unsupported(
            f"too large to compile: {len(lines) - 1} statements, over the limit of "
            f"{MAX_STATEMENTS} (dataflow.loopc.codegen.MAX_STATEMENTS; Numba's compile "
            "time grows with the square of a function's size)")
    source = "\n".join(lines) + "\n"
    return FrameSource(loop.name, source, list(zip(gen.param_names, gen.params)), results)
