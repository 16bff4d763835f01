"""Random differentiable programs with control flow: df.gradients vs finite differences.

A small Hypothesis generator (simpler than ``tests/graph_gen.py``) writes Python
*source* that builds a scalar ``Y`` from 2-3 float64 placeholders ``x0..x2`` (shapes
(), (2,) or (2, 2)) using:

* nests (depth up to 3) of ``df.while_loop`` with an int32 counter (trip counts 0..3,
  a constant or an outer loop's counter as the bound), random ``parallel_iterations``
  1..10, 1-3 float64 loop variables (some ignored by the body: passed through
  unchanged or overwritten without being read), tensors captured from every
  enclosing level;
* ``df.cond`` on constant predicates, on the loop counter, or on float data
  (``GT(e, t)``: ``reduce_sum(e) > t``), branches being small blocks (possibly
  holding loops and conds) that use different captured tensors;
* smooth float64 ops: add, subtract, multiply, sin, cos, tanh, sigmoid, exp of
  small values, square, reduce_sum, matmul of 2x2 matrices, casts of the counter.

Loop variable updates are squashed (tanh, sin, sigmoid, ...) so values stay
bounded. ``GT`` also reports its margin ``reduce_sum(e) - t`` through ``df.print``
to a recorder; examples where some predicate is within ``MARGIN`` of its
threshold are rejected, so the finite differences never straddle a jump.

Examples whose numeric gradients exceed ``MAX_GRAD`` (chaotic nests, where central
differences are not accurate to ``RTOL``) or whose output is huge are rejected too.
Each example compares ``df.gradients(Y, xs)`` (None counting as zero) with central
differences. The failing program is printed (``note``) as ready-to-run source;
``run_program(source, values)`` rebuilds it.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import dataflow as df

from .op_harness import numeric_gradient

MAX_DEPTH = 3
MARGIN = 1e-3
MAX_GRAD = 100.0
RTOL, ATOL = 1e-5, 1e-6
SHAPES = [(), (2,), (2, 2)]
UNARY = ["df.sin", "df.cos", "df.tanh", "df.sigmoid", "df.square", "EXP"]
SQUASH = ["df.tanh", "df.sin", "df.sigmoid", "df.cos"]


class _MarginRecorder:
    """A file-like ``output_stream`` for ``df.print``: collects the printed margins."""

    def __init__(self):
        self.values = []

    def write(self, text):
        for word in text.split():
            self.values.append(float(word))

    def flush(self):
        pass


_MARGINS = _MarginRecorder()

PRELUDE = '''\
def GT(e, t):
    """reduce_sum(e) > t; the margin is printed to MARGINS each time it runs."""
    m = df.reduce_sum(e) - t
    with df.control_dependencies([df.print(m, output_stream=MARGINS)]):
        return df.greater(df.identity(m), 0.0)
'''


# -- the generator ---------------------------------------------------------------------------


class _Scope:
    def __init__(self, parent=None, counter=None):
        self.parent = parent
        self.vars = []          # (name, shape) of float64 tensors
        self.locals = []        # those defined by statements of this block
        self.counter = counter  # name of this loop's int32 counter, if a loop body
        self.depth = (parent.depth if parent else 0) + (counter is not None)

    def floats(self):
        out, s = [], self
        while s is not None:
            out.extend(s.vars[::-1])
            s = s.parent
        return out

    def counters(self):
        out, s = [], self
        while s is not None:
            if s.counter:
                out.append(s.counter)
            s = s.parent
        return out


class _Writer:
    def __init__(self, draw):
        self.draw = draw
        self.lines = []
        self.n = 0
        self.budget = draw(st.integers(3, 12))

    def fresh(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"

    def emit(self, indent, text):
        self.lines.append("    " * indent + text)

    def choose(self, options):
        return self.draw(st.sampled_from(options))

    def chance(self, p):
        return self.draw(st.integers(0, 99)) < p * 100

    # expressions
    def leaf(self, scope, shape):
        """A visible tensor of this shape, a counter (scalars) or a constant."""
        names = [n for n, s in scope.floats() if s == shape]
        if names and self.chance(0.8):
            return self.choose(names[:4] if self.chance(0.6) else names)
        if shape == () and scope.counters() and self.chance(0.4):
            return f"df.cast({self.choose(scope.counters())}, df.float64)"
        c = self.choose([-0.7, -0.3, 0.4, 0.9, 1.3])
        if shape == ():
            return f"df.constant({c}, df.float64)"
        return f"df.constant(np.full({shape}, {c}), df.float64)"

    def expr(self, scope, shape, depth=2):
        if depth == 0:
            return self.leaf(scope, shape)
        form = self.draw(st.integers(0, 6))
        if form == 0:
            return self.leaf(scope, shape)
        if form == 1:
            fn = self.choose(UNARY)
            inner = self.expr(scope, shape, depth - 1)
            if fn == "EXP":
                return f"df.exp(0.3 * df.tanh({inner}))" if self.chance(0.5) \
                    else f"df.exp(0.2 * {inner})"
            return f"{fn}({inner})"
        if form in (2, 3):
            op = self.choose(["df.add", "df.subtract", "df.multiply"])
            a = self.expr(scope, shape, depth - 1)
            b_shape = shape if self.chance(0.6) else self.choose(SHAPES[:len(shape) + 1])
            b = self.expr(scope, b_shape, depth - 1)
            return f"{op}({a}, {b})" if self.chance(0.5) else f"{op}({b}, {a})"
        if form == 4 and shape == ():
            src = self.choose([(2,), (2, 2)])
            return f"df.reduce_sum({self.expr(scope, src, depth - 1)})"
        if form == 4 and shape == (2,):
            return f"df.reduce_sum({self.expr(scope, (2, 2), depth - 1)}, axis={self.choose([0, 1])})"
        if form == 5 and shape == (2, 2):
            a, b = self.expr(scope, (2, 2), depth - 1), self.expr(scope, (2, 2), depth - 1)
            return f"df.matmul({a}, {b})"
        return f"{self.choose(UNARY[:4])}({self.expr(scope, shape, depth - 1)})"

    def use_locals(self, scope, shape, e):
        """``e`` plus (most of) the values this block defined, so they are not dead code."""
        for name, s in scope.locals:
            if self.chance(0.8):
                x = name if len(s) <= len(shape) else f"df.reduce_sum({name})"
                e = f"df.add({e}, {x})"
        return e

    def pred(self, scope):
        counters = scope.counters()
        kind = self.draw(st.integers(0, 3))
        if kind == 0:
            return f"df.constant({self.choose([True, False])})"
        if kind == 1 and counters:
            i = self.choose(counters)
            return self.choose([f"df.equal({i} % 2, 0)", f"df.less({i}, 1)",
                                f"df.greater_equal({i}, 2)"])
        shape = self.choose(SHAPES)
        t = self.choose([-0.45, -0.15, 0.05, 0.35, 0.8])
        return f"GT({self.expr(scope, shape, 1)}, {t})"

    # statements
    def block(self, scope, indent, n):
        for _ in range(n):
            if self.budget <= 0:
                break
            self.budget -= 1
            kind = self.draw(st.integers(0, 9))
            if kind <= 3 and scope.depth < MAX_DEPTH:
                self.loop(scope, indent)
            elif kind <= 6:
                self.cond(scope, indent)
            else:
                shape = self.choose(SHAPES)
                name = self.fresh("t")
                self.emit(indent, f"{name} = {self.expr(scope, shape)}")
                scope.vars.append((name, shape))
                scope.locals.append((name, shape))

    def cond(self, scope, indent):
        k = self.fresh("")
        shape = self.choose(SHAPES)
        pred = self.pred(scope)
        for branch in ("true", "false"):
            self.emit(indent, f"def {branch}_fn{k}():")
            inner = _Scope(scope)
            self.block(inner, indent + 1, self.draw(st.integers(0, 2)))
            self.emit(indent + 1, f"return {self.use_locals(inner, shape, self.expr(inner, shape))}")
        name = f"c{k}"
        self.emit(indent, f"{name} = df.cond({pred}, true_fn{k}, false_fn{k})")
        scope.vars.append((name, shape))
        scope.locals.append((name, shape))

    def loop(self, scope, indent):
        k = self.fresh("")
        i = f"i{k}"
        nvars = self.draw(st.integers(1, 3))
        shapes = [self.choose(SHAPES) for _ in range(nvars)]
        lvs = [f"v{k}_{j}" for j in range(nvars)]
        # "read": body reads and updates it; "pass": returned unchanged; "overwrite":
        # replaced by a value that does not depend on it.
        modes = [self.choose(["read", "read", "read", "pass", "overwrite"]) for _ in lvs]
        inits = [self.expr(scope, s, 1) for s in shapes]
        bound = str(self.draw(st.integers(0, 3)))
        if scope.counters() and self.chance(0.25):
            bound = self.choose(scope.counters())
        self.emit(indent, f"def cond{k}({i}, {', '.join(lvs)}):")
        if self.chance(0.15):   # also stop on data
            cscope = _Scope(scope, counter=i)
            cscope.vars.extend(zip(lvs, shapes))
            self.emit(indent + 1, f"return df.logical_and(df.less({i}, {bound}), "
                                  f"{self.pred(cscope)})")
        else:
            self.emit(indent + 1, f"return df.less({i}, {bound})")
        self.emit(indent, f"def body{k}({i}, {', '.join(lvs)}):")
        body = _Scope(scope, counter=i)
        body.vars.extend((v, s) for v, s, m in zip(lvs, shapes, modes) if m == "read")
        self.block(body, indent + 1, self.draw(st.integers(0, 2)))
        if body.locals and all(m == "pass" for m in modes):
            modes[-1] = "overwrite"   # not read by the body: still ignores that variable
        outs = []
        for v, s, m in zip(lvs, shapes, modes):
            if m == "pass":
                outs.append(v)
                continue
            e = self.use_locals(body, s, self.expr(body, s))
            if m == "read" and self.chance(0.7):
                e = f"{self.choose(['df.add', 'df.multiply', 'df.subtract'])}({v}, {e})"
            if m == "read" and self.chance(0.3):
                outs.append(f"{v} + 0.5 * df.tanh({e})")
            else:
                outs.append(f"{self.choose(SQUASH)}({e})")
        self.emit(indent + 1, f"return ({i} + 1, {', '.join(outs)})")
        p = self.draw(st.integers(1, 10))
        names = [f"w{k}_{j}" for j in range(nvars)]
        self.emit(indent, f"_, {', '.join(names)} = df.while_loop(cond{k}, body{k}, "
                          f"(0, {', '.join(inits)}), parallel_iterations={p})")
        scope.vars.extend(zip(names, shapes))
        scope.locals.extend(zip(names, shapes))


@st.composite
def programs(draw):
    """``(source, values)``: source defining ``Y`` from placeholders ``x0..``, and their values."""
    n_inputs = draw(st.integers(2, 3))
    shapes = [draw(st.sampled_from(SHAPES)) for _ in range(n_inputs)]
    w = _Writer(draw)
    root = _Scope()
    for j, s in enumerate(shapes):
        w.emit(0, f"x{j} = df.placeholder(df.float64, {list(s)})")
        root.vars.append((f"x{j}", s))
    # Put a loop or cond first so that every example has control flow.
    if w.chance(0.7):
        w.loop(root, 0)
    else:
        w.cond(root, 0)
    w.block(root, 0, draw(st.integers(1, 4)))
    # Y sums the most recent values (loop and cond outputs among them) and every input.
    terms = [f"df.reduce_sum({n})" for n, _ in root.locals]
    terms.append(f"0.1 * df.reduce_sum({' + '.join(f'df.reduce_sum(x{j})' for j in range(n_inputs))})")
    w.emit(0, f"Y = {' + '.join(terms)}")
    floats = st.floats(-1.0, 1.0, allow_nan=False).map(lambda v: round(v, 3))
    values = [np.array(draw(st.lists(floats, min_size=int(np.prod(s)), max_size=int(np.prod(s)))),
                       dtype=np.float64).reshape(s) for s in shapes]
    return "\n".join(w.lines) + "\n", values


# -- the check -------------------------------------------------------------------------------


def build_program(source):
    """Execute ``source`` in the default graph; returns ``(Y, [x0, x1, ...])``."""
    namespace = {"df": df, "np": np, "MARGINS": _MARGINS}
    exec(compile(PRELUDE + source, "<generated program>", "exec"), namespace)  # noqa: S102
    xs = []
    while f"x{len(xs)}" in namespace:
        xs.append(namespace[f"x{len(xs)}"])
    return namespace["Y"], xs


def run_program(source, values):
    """``(Y, analytic gradients, numeric gradients)`` of the program at ``values``."""
    with df.Graph().as_default():
        y, xs = build_program(source)
        grads = df.gradients(y, xs)
        with df.Session() as sess:
            feed = dict(zip(xs, values))
            _MARGINS.values.clear()
            y_value = float(sess.run(y, feed))
            margins = list(_MARGINS.values)
            analytic = sess.run([g for g in grads if g is not None], feed)
            analytic = iter(analytic)
            analytic = [None if g is None else next(analytic) for g in grads]

            def f_of(i):
                def f(v):
                    return float(sess.run(y, {**feed, xs[i]: v}))
                return f
            numeric = [numeric_gradient(f_of(i), v) for i, v in enumerate(values)]
    return y_value, margins, analytic, numeric


def _values_source(values):
    return "[" + ", ".join(f"np.array({v.tolist()!r})" for v in values) + "]"


@settings(max_examples=200, deadline=None, derandomize=False,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(programs())
def test_random_program_gradients_match_finite_differences(program):
    source, values = program
    note(f"PROGRAM (with GT from PRELUDE):\n{source}\nVALUES = {_values_source(values)}")
    y, margins, analytic, numeric = run_program(source, values)
    assume(np.isfinite(y) and abs(y) < 1e4)
    # A predicate near its threshold would make the finite differences straddle a jump.
    assume(all(abs(m) > MARGIN for m in margins))
    # Chaotic programs (huge derivatives) have finite-difference truncation errors above
    # RTOL (e.g. 1349.363 vs 1349.348 at EPS=1e-6, converging as EPS shrinks): skip them.
    assume(max(float(np.max(np.abs(n))) for n in numeric) < MAX_GRAD)
    for i, (g, expected) in enumerate(zip(analytic, numeric)):
        where = f"gradient of x{i}"
        if g is None:
            np.testing.assert_allclose(expected, 0.0, atol=ATOL, err_msg=f"None {where}")
            continue
        assert np.shape(g) == values[i].shape, where
        np.testing.assert_allclose(g, expected, rtol=RTOL, atol=ATOL, err_msg=where)
