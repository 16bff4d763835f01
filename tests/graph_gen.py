"""Random dataflow programs for the differential tests (helpers, not a test module).

:func:`programs` is a Hypothesis strategy of :class:`Program` s. A program is
Python *source text* that builds a graph with ``df`` (the builders) and ``cf``
(the raw primitives), so a failing example prints as a ready-to-run
reproduction. Programs mix:

* elementwise arithmetic on float64 / int32 scalars and 2-vectors (``size=n``: vectors
  of n elements, for programs whose memory is their arrays' rather than Python
  objects');
* nests of ``df.cond`` and ``df.while_loop`` (loops in conds in loops ...),
  with random ``parallel_iterations`` and trip counts 0..3 that are bounded by
  an int32 counter, sometimes also by data or ``maximum_iterations``;
* raw ``cf.switch`` / ``cf.merge`` diamonds, half-switches on a random
  predicate (so some values are dead), control dependencies, ControlTrigger,
  and raw Enter/Merge/Switch/NextIteration/Exit loops, possibly entered on a
  dead value;
* captured outer tensors at every nesting depth, placeholders and feeds of
  intermediate tensors.

Programs are valid by construction: only root tensors are fetched, a loop
body never reads a value that may be dead (that would stop one loop variable
mid-loop and leave its Exit without a token), and each Merge sees at most
one live input.

>>> from hypothesis import given
>>> @given(programs())
... def test(p):
...     graph, fetches, feeds = p.build()
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import dataflow as df
from dataflow.ops import control_flow_ops as cf

FLOAT, INT, BOOL = "float64", "int32", "bool"
# A vector literal of more elements than this is written as an expression of two drawn
# values (np.linspace / np.resize), not as a list.
MAX_LIST_LITERAL = 2
MAX_LOOP_DEPTH = 3
MAX_TRIPS = 3


@dataclass(frozen=True)
class Program:
    """Source text defining ``FETCHES`` (a list of tensors) and ``FEEDS`` (a dict)."""

    source: str
    fold_constants: bool = True

    def __repr__(self):
        return f"Program(fold_constants={self.fold_constants}, source='''\n{self.source}''')"

    def build(self):
        """Execute the source in a fresh graph; return ``(graph, fetches, feed_dict)``.

        >>> g, fetches, feeds = Program("FETCHES = [df.constant(1)]\\nFEEDS = {}").build()
        """
        g = df.Graph()
        namespace = {"df": df, "cf": cf, "np": np, "g": g}
        with g.as_default():
            # Running generated source is the point: it is also the printed reproduction.
            exec(compile(self.source, "<generated program>", "exec"), namespace)  # noqa: S102
        return g, namespace["FETCHES"], namespace["FEEDS"]


@dataclass(frozen=True)
class Var:
    """A tensor the program has named: its dtype, static shape, and whether it may be dead."""

    name: str
    dtype: str
    shape: tuple
    maybe_dead: bool = False
    structured: bool = False   # the output of a cond, loop, Switch/Merge or control edge

    @property
    def kind(self):
        return (self.dtype, self.shape)


@dataclass
class Scope:
    """The names a block can see. ``in_loop``: inside some while body or predicate."""

    parent: Scope | None = None
    in_loop: bool = False
    loop_depth: int = 0
    cond_depth: int = 0
    vars: list = field(default_factory=list)

    def child(self, loop=False):
        return Scope(self, self.in_loop or loop, self.loop_depth + loop,
                     self.cond_depth + (not loop))

    def visible(self) -> list:
        """Own names plus captures, most recent first; a loop never captures a value that
        may be dead."""
        out, scope = self.vars[::-1], self.parent
        while scope is not None:
            out.extend(v for v in scope.vars[::-1] if not (self.in_loop and v.maybe_dead))
            scope = scope.parent
        return out

    @property
    def is_root(self):
        return self.parent is None


def numeric_kinds(size=2) -> list:
    """The (dtype, shape) kinds of the programs' numeric values: scalars and vectors of
    ``size`` elements."""
    return [(FLOAT, ()), (FLOAT, (size,)), (INT, ()), (INT, (size,))]


def _literal(draw, dtype, shape) -> str:
    if shape and shape[0] > MAX_LIST_LITERAL:
        return _long_literal(draw, dtype, shape[0])
    if dtype == FLOAT:
        vals = [draw(st.sampled_from([-2.5, -1.0, -0.5, 0.0, 0.25, 1.0, 1.5, 3.0]))
                for _ in range(shape[0] if shape else 1)]
    else:
        vals = [draw(st.integers(-3, 4)) for _ in range(shape[0] if shape else 1)]
    return repr(vals if shape else vals[0])


def _long_literal(draw, dtype, n) -> str:
    """A vector of ``n`` elements from two drawn values (drawing every element would
    make the source as long as the data)."""
    if dtype == FLOAT:
        a, b = (draw(st.sampled_from([-2.5, -1.0, -0.5, 0.0, 0.25, 1.0, 1.5, 3.0]))
                for _ in range(2))
        return f"np.linspace({a!r}, {b!r}, {n})"
    a, b = (draw(st.integers(-3, 4)) for _ in range(2))
    return f"np.resize(np.array([{a}, {b}], np.int32), {n})"


class _Writer:
    """Draws statements and writes them as indented source lines."""

    def __init__(self, draw, budget, nest=(), size=2):
        self.draw = draw
        self.kinds = numeric_kinds(size)
        self.budget = budget
        self.nest = list(nest)   # statement kinds forced first, each inside the previous
        self.lines: list[str] = []
        self.counter = 0
        self.feeds: list[tuple[str, str]] = []

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, text: str):
        self.lines.append("    " * indent + text)

    def choose(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p: float) -> bool:
        return self.draw(st.integers(0, 99)) < p * 100

    # -- expressions -----------------------------------------------------------------------------
    def const(self, dtype, shape) -> str:
        return f"df.constant({_literal(self.draw, dtype, shape)}, df.{dtype})"

    def operand(self, scope, dtype, shape, live=False, prefer=None):
        """An expression of exactly this kind: a visible name (recent ones, and ``prefer``,
        more likely, so that most statements end up feeding the fetches) or a constant."""
        names = [v for v in scope.visible() if v.kind == (dtype, shape)
                 and not (live and v.maybe_dead)]
        if prefer is not None and prefer in names and self.chance(0.5):
            return prefer.name, prefer.maybe_dead
        if names and self.chance(0.85):
            if len(names) > 3 and self.chance(0.6):
                names = names[:3]
            v = self.choose(names)
            return v.name, v.maybe_dead
        return self.const(dtype, shape), False

    def expr(self, scope, dtype, shape, live=False, prefer=None):
        """A small expression of kind ``(dtype, shape)``: ``(source, maybe_dead)``."""
        a, da = self.operand(scope, dtype, shape, live, prefer)
        form = self.draw(st.integers(0, 5))
        if form == 0:
            return a, da
        if form == 1:
            fn = self.choose(["negative", "abs"] + (["square"] if dtype == FLOAT else []))
            return f"df.{fn}({a})", da
        if form == 2 and dtype == FLOAT:
            src, ds = self.operand(scope, INT, shape, live)
            return f"df.add({a}, df.cast({src}, df.float64))", da or ds
        b_shape = shape if not shape or self.chance(0.5) else ()
        b, db = self.operand(scope, dtype, b_shape, live)
        ops = ["add", "subtract", "maximum", "minimum"] + (["multiply"] if dtype == FLOAT else [])
        return f"df.{self.choose(ops)}({a}, {b})", da or db

    def pred(self, scope, live=False):
        """A scalar bool expression."""
        bools = [v for v in scope.visible() if v.kind == (BOOL, ()) and not (live and v.maybe_dead)]
        if bools and self.chance(0.5):
            v = self.choose(bools)
            return (f"df.logical_not({v.name})" if self.chance(0.3) else v.name), v.maybe_dead
        dtype = self.choose([FLOAT, INT])
        a, da = self.operand(scope, dtype, (), live)
        b, db = self.operand(scope, dtype, (), live)
        if a == b:   # x < x is constant: compare with a literal instead
            b, db = self.const(dtype, ()), False
        cmp = self.choose(["less", "greater_equal", "not_equal", "equal"])
        return f"df.{cmp}({a}, {b})", da or db

    # -- statements ------------------------------------------------------------------------------
    def block(self, scope, indent, n):
        if self.nest:
            n = max(n, 1)
        for _ in range(n):
            if self.budget <= 0:
                break
            self.budget -= 1
            self.statement(scope, indent)

    def statement(self, scope, indent):
        kinds = ["arith"] * 4 + ["compare", "diamond", "control_dep", "trigger"]
        if scope.loop_depth < MAX_LOOP_DEPTH:
            kinds += ["while"] * 3
        if scope.loop_depth + scope.cond_depth < 4:
            kinds += ["cond"] * 3
        if not scope.in_loop:
            kinds += ["half_switch"] * 2
        if scope.is_root:
            kinds += ["raw_loop"]
        kind = self.nest.pop(0) if self.nest else self.choose(kinds)
        getattr(self, "stmt_" + kind)(scope, indent)

    def add(self, scope, name, dtype, shape, maybe_dead, structured=True):
        scope.vars.append(Var(name, dtype, shape, maybe_dead, structured))

    def stmt_arith(self, scope, indent):
        dtype, shape = self.choose(self.kinds)
        src, dead = self.expr(scope, dtype, shape)
        if src.isidentifier():   # a new node, not an alias (aliases would hide placeholders)
            src = f"df.identity({src})"
        name = self.fresh("v")
        self.emit(indent, f"{name} = {src}")
        self.add(scope, name, dtype, shape, dead, structured=False)

    def stmt_compare(self, scope, indent):
        src, dead = self.pred(scope)
        if src.isidentifier():
            src = f"df.identity({src})"
        name = self.fresh("b")
        self.emit(indent, f"{name} = {src}")
        self.add(scope, name, BOOL, (), dead, structured=False)

    def stmt_diamond(self, scope, indent):
        """Both arms of one Switch joined by a Merge: live iff the inputs are."""
        dtype, shape = self.choose(self.kinds)
        x, dx = self.operand(scope, dtype, shape)
        p, dp = self.pred(scope)
        n = self.fresh("d")
        arm = {FLOAT: ["df.negative({})", "df.add({}, 0.5)", "df.multiply({}, 2.0)"],
               INT: ["df.negative({})", "df.add({}, 7)", "df.subtract({}, 1)"]}[dtype]
        self.emit(indent, f"{n}_f, {n}_t = cf.switch({x}, {p})")
        left, right = self.choose(arm).format(f"{n}_f"), self.choose(arm).format(f"{n}_t")
        self.emit(indent, f"{n}, {n}_i = cf.merge([{left}, {right}])")
        self.add(scope, n, dtype, shape, dx or dp)
        self.add(scope, f"{n}_i", INT, (), dx or dp)

    def stmt_half_switch(self, scope, indent):
        """One output of a Switch on a random predicate: dead on one side."""
        dtype, shape = self.choose(self.kinds + [(BOOL, ())])
        x, _ = (self.pred(scope) if dtype == BOOL else self.operand(scope, dtype, shape))
        p, _ = self.pred(scope)
        n = self.fresh("h")
        out = self.choose(["_, {}", "{}, _"]).format(n)
        self.emit(indent, f"{out} = cf.switch({x}, {p})")
        self.add(scope, n, dtype, shape, True)

    def stmt_control_dep(self, scope, indent):
        """``y = identity(x)`` after another op: y is dead if either is."""
        dtype, shape = self.choose(self.kinds)
        x, dx = self.operand(scope, dtype, shape)
        others = scope.visible()
        if not others:
            return self.stmt_arith(scope, indent)
        dep = self.choose(others)
        name = self.fresh("c")
        self.emit(indent, f"with df.control_dependencies([{dep.name}.op]):")
        self.emit(indent + 1, f"{name} = df.identity({x})")
        self.add(scope, name, dtype, shape, dx or dep.maybe_dead)

    def stmt_trigger(self, scope, indent):
        """A ControlTrigger after a possibly dead op: never dead itself."""
        others = scope.visible()
        if not others:
            return self.stmt_arith(scope, indent)
        dep = self.choose(others)
        dtype, shape = self.choose(self.kinds)
        x, dx = self.operand(scope, dtype, shape)
        t, name = self.fresh("trig"), self.fresh("c")
        self.emit(indent, f"with df.control_dependencies([{dep.name}.op]):")
        self.emit(indent + 1, f"{t} = df.control_trigger()")
        # The input is built outside the trigger's block: a constant whose only control
        # input is the (never dead) trigger would be live on an untaken cond branch too,
        # and the cond's Merge would then race between two live inputs.
        self.emit(indent, f"{name}_in = {x}")
        self.emit(indent, f"with df.control_dependencies([{t}]):")
        self.emit(indent + 1, f"{name} = df.identity({name}_in)")
        self.add(scope, name, dtype, shape, dx)

    def stmt_cond(self, scope, indent):
        n = self.fresh("")
        p, dp = self.pred(scope)
        kinds = [self.choose(self.kinds) for _ in range(self.draw(st.integers(1, 2)))]
        dead = dp
        for branch in ("t", "f"):
            inner = scope.child(loop=False)
            self.emit(indent, f"def {branch}_{n}():")
            self.block(inner, indent + 1, self.draw(st.integers(0, 3)))
            outs = []
            for dtype, shape in kinds:
                src, d = self.tie_in(inner, *self.expr(inner, dtype, shape), dtype, shape)
                outs.append(src)
                dead = dead or d
            self.emit(indent + 1, f"return ({', '.join(outs)},)")
        names = [f"r{n}_{k}" for k in range(len(kinds))]
        self.emit(indent, f"{', '.join(names)}, = df.cond({p}, t_{n}, f_{n}, strict=True)")
        for name, (dtype, shape) in zip(names, kinds):
            self.add(scope, name, dtype, shape, dead)

    def tie_in(self, scope, src, dead, dtype, shape):
        """Often add a structured result of this block (a nested loop's, say) to the
        block's output ``src``, so that nested structures are not pruned away."""
        local = [v for v in scope.vars if v.structured and v.dtype != BOOL]
        if not local or not self.chance(0.7):
            return src, dead
        v = self.choose(local)
        other = v.name
        if v.shape and not shape:
            other = f"df.reduce_sum({other})"
        if v.dtype != dtype:
            other = f"df.cast({other}, df.{dtype})"
        return f"df.add({src}, {other})", dead or v.maybe_dead

    def loop_limit(self, scope) -> str:
        """A bound on the trip count: a constant 0..3, or min(|live int| + 1, constant)."""
        trips = self.choose([2, 3, 2, 1, 0])   # 0 trips is common anyway (data-dependent bounds)
        ints = [v for v in scope.visible() if v.kind == (INT, ()) and not v.maybe_dead]
        if ints and self.chance(0.4):
            return f"df.minimum(df.add(df.abs({self.choose(ints).name}), 1), {trips})"
        return f"df.constant({trips}, df.int32)"

    def stmt_while(self, scope, indent):
        """``i, xs = while_loop(i < limit [and data], body, (0, inits))``."""
        n = self.fresh("")
        kinds = [self.choose(self.kinds) for _ in range(self.draw(st.integers(1, 2)))]
        gate = None
        if scope.is_root and self.chance(0.2):   # all inits dead together, or all live
            gate, _ = self.pred(scope)
        inits = ["df.constant(0, df.int32)"] + [self.expr(scope, d, s, live=True)[0]
                                                 for d, s in kinds]
        if gate is not None:
            inits = [f"cf.switch({x}, {gate})[1]" for x in inits]
        args = [f"i{n}"] + [f"x{n}_{k}" for k in range(len(kinds))]
        loop_vars = [Var(a, d, s) for a, (d, s) in zip(args, [(INT, ())] + kinds)]

        cond_scope = scope.child(loop=True)
        cond_scope.vars.extend(loop_vars)
        self.emit(indent, f"def c_{n}({', '.join(args)}):")
        test = f"df.less(i{n}, {self.loop_limit(scope)})"   # not bounded by its own vars
        if self.chance(0.2):   # a data-dependent early stop
            test = f"df.logical_and({test}, {self.pred(cond_scope, live=True)[0]})"
        self.emit(indent + 1, f"return {test}")

        body = scope.child(loop=True)
        body.vars.extend(loop_vars)
        self.emit(indent, f"def b_{n}({', '.join(args)}):")
        self.block(body, indent + 1, self.draw(st.integers(0, 3)))
        updates = [f"df.add(i{n}, 1)"]
        for v in loop_vars[1:]:
            src, dead = self.expr(body, v.dtype, v.shape, True, prefer=v)
            updates.append(self.tie_in(body, src, dead, v.dtype, v.shape)[0])
        self.emit(indent + 1, f"return ({', '.join(updates)},)")

        extra = f", parallel_iterations={self.draw(st.integers(1, 10))}"
        if self.chance(0.15):
            extra += f", maximum_iterations={self.choose([2, 1, 0])}"
        outs = [f"w{n}_{k}" for k in range(len(args))]
        self.emit(indent, f"{', '.join(outs)} = df.while_loop(c_{n}, b_{n}, "
                          f"({', '.join(inits)},){extra})")
        for name, var in zip(outs, loop_vars):
            self.add(scope, name, var.dtype, var.shape, gate is not None)

    def stmt_raw_loop(self, scope, indent):
        """A loop from the five primitives: count to a limit, accumulating a value."""
        n = self.fresh("")
        frame = f"raw_frame_{n}"
        dtype, shape = self.choose(self.kinds)
        init, _ = self.expr(scope, dtype, shape, live=True)
        step, _ = self.operand(scope, dtype, shape, live=True)
        count0 = "df.constant(0, df.int32)"
        dead = False
        if self.chance(0.4):   # entered on a possibly dead value: the whole loop dies
            gate, _ = self.pred(scope)
            init, count0, dead = f"cf.switch({init}, {gate})[1]", \
                f"cf.switch({count0}, {gate})[1]", True
        pi = self.draw(st.integers(1, 10))
        op = self.choose(["df.add", "df.subtract", "df.maximum"])
        e = self.emit
        e(indent, f"ei{n} = cf.enter({count0}, {frame!r}, parallel_iterations={pi})")
        e(indent, f"ea{n} = cf.enter({init}, {frame!r}, parallel_iterations={pi})")
        e(indent, f"lim{n} = cf.enter({self.loop_limit(scope)}, {frame!r}, is_constant=True)")
        e(indent, f"one{n} = cf.enter(df.constant(1, df.int32), {frame!r}, is_constant=True)")
        e(indent, f"step{n} = cf.enter({step}, {frame!r}, is_constant=True)")
        e(indent, f"mi{n}, _ = cf.merge([ei{n}, ei{n}])")
        e(indent, f"ma{n}, _ = cf.merge([ea{n}, ea{n}])")
        e(indent, f"p{n} = cf.loop_cond(df.less(mi{n}, lim{n}))")
        e(indent, f"fi{n}, ti{n} = cf.switch(mi{n}, p{n})")
        e(indent, f"fa{n}, ta{n} = cf.switch(ma{n}, p{n})")
        e(indent, f"mi{n}.op.update_input(1, cf.next_iteration(df.add(ti{n}, one{n})))")
        e(indent, f"ma{n}.op._update_input(1, cf.next_iteration({op}(ta{n}, step{n})))")
        e(indent, f"ri{n} = cf.exit(fi{n})")
        e(indent, f"ra{n} = cf.exit(fa{n})")
        self.add(scope, f"ri{n}", INT, (), dead)
        self.add(scope, f"ra{n}", dtype, shape, dead)

    # -- whole programs --------------------------------------------------------------------------
    def choose_fetches(self, names):
        """The first and last structured results (most of the program feeds them) and up
        to 2 others."""
        structured = [v for v in names if v.structured]
        first = [structured[0], structured[-1]] if structured else [names[-1]]
        first = list({v.name: v for v in first}.values())
        others = [v for v in names if v not in first]
        extra = self.draw(st.lists(st.sampled_from(others), max_size=2,
                                   unique_by=lambda v: v.name)) if others else []
        return first + extra

    def placeholders(self, root):
        for _ in range(self.draw(st.integers(0, 2))):
            dtype, shape = self.choose(self.kinds + [(BOOL, ())])
            name = self.fresh("ph")
            self.emit(0, f"{name} = df.placeholder(df.{dtype}, shape={list(shape)})")
            value = repr(self.draw(st.booleans())) if dtype == BOOL else \
                _literal(self.draw, dtype, shape)
            self.feeds.append((name, value))
            self.add(root, name, dtype, shape, False, structured=False)

    def program(self) -> str:
        root = Scope()
        self.placeholders(root)
        self.block(root, 0, self.budget)
        if not root.vars:
            self.stmt_arith(root, 0)
        fetches = self.choose_fetches(root.vars)
        fed = {name for name, _ in self.feeds}
        numeric = [v for v in root.vars if v.dtype != BOOL and v.name not in fed]
        if numeric and self.chance(0.15):   # feed an intermediate tensor: it cuts the graph
            v = self.choose(numeric)
            self.feeds.append((v.name, _literal(self.draw, v.dtype, v.shape)))
        self.emit(0, f"FETCHES = [{', '.join(v.name for v in fetches)}]")
        self.emit(0, "FEEDS = {" + ", ".join(f"{k}: {v}" for k, v in self.feeds) + "}")
        return "\n".join(self.lines) + "\n"


NESTS = [("while", "while"), ("while", "cond", "while"), ("cond", "while", "cond"),
         ("while", "while", "while"), ("while", "cond"), ("cond", "while", "while")]


@st.composite
def programs(draw, max_statements=8, nested=False, size=2):
    """A strategy of small random :class:`Program` s (see the module docstring).

    ``nested=True`` starts each program with a nest of loops and conds, 2-3 deep.
    ``size``: the vectors' length (the same draws for any size, so a program at size
    2 and at size 65536 differ only in their vectors' lengths).
    """
    budget = draw(st.integers(1, max_statements))
    nest = draw(st.sampled_from(NESTS)) if nested else ()
    source = _Writer(draw, budget + len(nest), nest, size).program()
    return Program(source, fold_constants=draw(st.booleans()))


@contextlib.contextmanager
def quiet_numpy():
    """Overflow to inf or wrap-around is fine: both runtimes compute it the same way."""
    with np.errstate(all="ignore"):
        yield
