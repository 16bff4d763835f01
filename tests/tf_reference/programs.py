"""Small TF1 graph programs that run unchanged on TensorFlow and on dataflow.

Each ``prog_xxx(tf)`` builds a graph with the module it is given -- either
``tensorflow.compat.v1`` (after ``disable_eager_execution()`` and
``disable_control_flow_v2()``) or ``dataflow`` -- and returns
``(fetches, feeds)``: ``feeds`` is one feed dict, or a list of feed dicts to
run the same fetches several times in one session (variables persist).

Programs use only the API both modules share. The control-flow primitives are
not in ``tf.*`` in TensorFlow, so :func:`primitives` maps them for each side.

:func:`run_program` runs one program and returns a JSON-able outcome:

* ``{"build_error": "ValueError"}`` if building the graph raised;
* ``{"runs": [...]}`` otherwise, one entry per feed dict, each either the
  encoded fetched structure (see :func:`encode`) or ``{"error": "ClassName"}``.

``generate.py`` records the outcomes under TensorFlow in ``expected.json``;
``tests/test_tf_reference.py`` replays them against dataflow.
"""
from __future__ import annotations

import collections
import types

import numpy as np

Point = collections.namedtuple("Point", "x y")


# -- helpers shared by both frameworks -------------------------------------------------------
def is_dataflow(tf) -> bool:
    """True if ``tf`` is the dataflow package rather than TensorFlow."""
    return getattr(tf, "__name__", "") == "dataflow"


def primitives(tf):
    """switch/merge/enter/exit/next_iteration/loop_cond for ``tf``'s framework.

    In TensorFlow they live in private modules; dataflow exposes them in
    ``dataflow.ops.control_flow_ops`` with the same signatures.
    """
    if is_dataflow(tf):
        from dataflow.ops import control_flow_ops
        return control_flow_ops
    from tensorflow.python.ops import control_flow_ops, gen_control_flow_ops
    return types.SimpleNamespace(
        switch=control_flow_ops.switch, merge=control_flow_ops.merge,
        enter=gen_control_flow_ops.enter, exit=control_flow_ops.exit,
        next_iteration=gen_control_flow_ops.next_iteration,
        loop_cond=gen_control_flow_ops.loop_cond)


def encode(value):
    """A fetched structure as JSON: leaves keep their dtype name, shape and values."""
    if value is None:
        return {"none": True}
    if isinstance(value, dict):
        return {"dict": {str(k): encode(v) for k, v in sorted(value.items())}}
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return {"namedtuple": type(value).__name__,
                "fields": {f: encode(getattr(value, f)) for f in value._fields}}
    if isinstance(value, tuple):
        return {"tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return {"list": [encode(v) for v in value]}
    arr = np.asarray(value)
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "value": arr.tolist()}


def run_program(tf, program):
    """Build ``program`` in a fresh graph of ``tf`` and run it; the outcome as JSON."""
    graph = tf.Graph()
    with graph.as_default():
        try:
            fetches, feeds = program(tf)
        except Exception as e:  # noqa: BLE001 - the class name is the recorded result
            return {"build_error": type(e).__name__}
        init = tf.global_variables_initializer()
        runs = []
        with tf.Session(graph=graph) as sess:
            sess.run(init)
            for feed in (feeds if isinstance(feeds, list) else [feeds]):
                try:
                    runs.append(encode(sess.run(fetches, feed_dict=feed)))
                except Exception as e:  # noqa: BLE001
                    runs.append({"error": type(e).__name__})
    return {"runs": runs}


# -- cond and case ---------------------------------------------------------------------------
def prog_cond_design_note(tf):
    """The design note's ``cond(x < y, lambda: add(x, z), lambda: square(y))``, both ways."""
    x = tf.placeholder(tf.float32, [])
    y = tf.placeholder(tf.float32, [])
    z = tf.placeholder(tf.float32, [])
    r = tf.cond(x < y, lambda: tf.add(x, z), lambda: tf.square(y))
    return r, [{x: 1.0, y: 5.0, z: 3.0}, {x: 7.0, y: 5.0, z: 3.0}]


def prog_cond_nested_structured(tf):
    """Nested conds returning a tuple with a dict and a namedtuple."""
    a = tf.placeholder(tf.bool, [])
    b = tf.placeholder(tf.bool, [])
    x = tf.constant([1.0, 2.0])

    def inner(scale):
        return tf.cond(b, lambda: (x * scale, {"n": tf.constant(1)}),
                       lambda: (x + scale, {"n": tf.constant(2)}))

    r = tf.cond(a, lambda: inner(10.0), lambda: inner(-1.0))
    p = tf.cond(a, lambda: Point(tf.constant(1), x), lambda: Point(tf.constant(2), -x))
    feeds = [{a: va, b: vb} for va in (True, False) for vb in (True, False)]
    return {"r": r, "p": p}, feeds


def prog_cond_untaken_branch_side_effects(tf):
    """Only the taken branch's assign runs; the false branch's failing Assert fires only
    when that branch is taken, and then its assign does not run."""
    v = tf.Variable(0)
    p = tf.placeholder(tf.bool, [])

    def bad():
        check = tf.Assert(tf.constant(False), [v.read_value()])
        with tf.control_dependencies([check]):
            return v.assign_add(100)

    r = tf.cond(p, lambda: v.assign_add(1), bad)
    return r, [{p: True}, {p: True}, {p: False}, {p: True}]


def prog_case_default_and_order(tf):
    """``case`` with a default; when both predicates hold, the first pair wins."""
    x = tf.placeholder(tf.int32, [])
    r = tf.case([(x > 0, lambda: tf.constant(1)), (x > 1, lambda: tf.constant(2))],
                default=lambda: tf.constant(0))
    return r, [{x: 5}, {x: 1}, {x: -3}]


def prog_case_no_default(tf):
    """Without a default, no true predicate is an Assert failure at run time."""
    x = tf.placeholder(tf.int32, [])
    r = tf.case([(x < 0, lambda: tf.constant(-1)), (x > 10, lambda: tf.constant(1))])
    return r, [{x: -4}, {x: 11}, {x: 5}]


def prog_case_exclusive(tf):
    """``exclusive=True`` with two true predicates fails at run time."""
    x = tf.placeholder(tf.int32, [])
    r = tf.case([(x > 0, lambda: tf.constant(1)), (x > 1, lambda: tf.constant(2))],
                default=lambda: tf.constant(0), exclusive=True)
    return r, [{x: 1}, {x: -1}, {x: 5}]


def prog_cond_pred_not_bool(tf):
    """An int32 predicate is rejected while building."""
    r = tf.cond(tf.constant(1), lambda: tf.constant(1), lambda: tf.constant(2))
    return r, {}


def prog_cond_dtype_mismatch(tf):
    """Branches returning different dtypes are rejected while building."""
    r = tf.cond(tf.constant(True), lambda: tf.constant(1), lambda: tf.constant(2.0))
    return r, {}


# -- while loops -----------------------------------------------------------------------------
def prog_while_design_note(tf):
    """The design note's ``while_loop(lambda i: i < 10, lambda i: add(i, 1), [0])``."""
    return tf.while_loop(lambda i: i < 10, lambda i: tf.add(i, 1), [0]), {}


def prog_while_nested_three_deep(tf):
    """Three nested loops, each capturing outer tensors and outer loop variables."""
    a = tf.placeholder(tf.int32, [])
    b = tf.constant(3)
    c = tf.constant(5.0)

    def level1(i, acc):
        def level2(j, acc):
            def level3(k, acc):
                return k + 1, acc + tf.cast(i * j, tf.float32) + tf.cast(k, tf.float32) * c
            _, acc = tf.while_loop(lambda k, acc: k < j + 2, level3, [0, acc])
            return j + 1, acc + tf.cast(b, tf.float32)
        _, acc = tf.while_loop(lambda j, acc: j < b, level2, [0, acc])
        return i + 1, acc * 0.5 + tf.cast(a, tf.float32)

    return tf.while_loop(lambda i, acc: i < 3, level1, [0, 1.0]), [{a: 2}, {a: -7}]


def prog_while_in_cond(tf):
    """A loop on each branch; the untaken one (infinite if run) must not run."""
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.int32, [])
    r = tf.cond(p, lambda: tf.while_loop(lambda i: i < 20, lambda i: i + x, [x]),
                lambda: tf.while_loop(lambda i: i > 0, lambda i: i + 1, [x]))
    return r, [{p: True, x: 3}, {p: True, x: 50}, {p: False, x: -4}]


def prog_cond_in_while(tf):
    """A cond in the body that captures a loop-external tensor."""
    bonus = tf.placeholder(tf.float32, [])

    def body(i, acc):
        even = tf.equal(tf.floormod(i, 2), 0)
        return i + 1, tf.cond(even, lambda: acc + bonus, lambda: acc * 2.0)

    return tf.while_loop(lambda i, a: i < 7, body, [0, 0.5]), {bonus: 1.5}


def prog_while_maximum_iterations(tf):
    """maximum_iterations below, at 0, and above what the predicate allows."""
    m = tf.placeholder(tf.int32, [])
    r = tf.while_loop(lambda i: i < 10, lambda i: i + 1, [0], maximum_iterations=m)
    # A tuple, not a list: with maximum_iterations TF compares the body's result
    # with loop_vars including the container type (a list would be a TypeError).
    pair = tf.while_loop(lambda i, p: i < 100, lambda i, p: (i + 1, p * 3), (0, 1),
                         maximum_iterations=4)
    return [r, pair], [{m: 3}, {m: 0}, {m: 25}]


def prog_while_parallel_iterations(tf):
    """parallel_iterations 1 and 10 give the same results."""
    def build(parallel):
        def body(i, acc, vec):
            x = tf.cast(i, tf.float32)
            return i + 1, acc + x * 0.5, vec * 0.5 + x
        return tf.while_loop(lambda i, a, v: i < 30, body, [0, 0.0, tf.constant([1.0, 2.0])],
                             parallel_iterations=parallel)
    return [build(1), build(10)], {}


def prog_while_structures(tf):
    """Nested tuple/list loop vars, a namedtuple, return_same_structure and a zero-trip loop."""
    nested = tf.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1, [b[0] * 2, b[1] + 1]),
                           (0, [1, 2]))
    named = tf.while_loop(lambda x, y: x < 3, lambda x, y: Point(x + 1, y * 2), Point(0, 1))
    wrapped = tf.while_loop(lambda p: p.x < 3, lambda p: [Point(p.x + 1, p.y + p.x)],
                            [Point(0, 0)])
    same = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [0], return_same_structure=True)
    zero = tf.while_loop(lambda i, a: i < 0, lambda i, a: (i + 1, a * 2.0), [0, 3.0])
    return {"nested": nested, "named": named, "wrapped": wrapped, "same": same,
            "zero": zero}, {}


def prog_while_dict_loop_var(tf):
    """A dict among the loop variables."""
    def body(i, state):
        return i + 1, {"sum": state["sum"] + i, "prod": state["prod"] * 2.0}
    return tf.while_loop(lambda i, s: i < 4, body, [0, {"sum": 0, "prod": 1.0}]), {}


def prog_while_shape_invariants(tf):
    """A tensor that grows with concat, allowed by shape_invariants [None]."""
    i, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.concat([y, y * 2.0], 0)),
                         [0, tf.constant([1.0])],
                         shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
    return [i, y, tf.shape(y)], {}


def prog_while_growing_without_invariant(tf):
    """The same growth without shape_invariants is rejected while building."""
    r = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, tf.concat([y, y], 0)),
                      [0, tf.constant([1.0])])
    return r, {}


def prog_while_body_structure_mismatch(tf):
    """A body that returns fewer values than the loop has is rejected while building."""
    return tf.while_loop(lambda i, j: i < 3, lambda i, j: (i + 1,), [0, 1]), {}


def prog_while_pred_not_bool(tf):
    """A non-boolean loop predicate is rejected while building."""
    return tf.while_loop(lambda i: i, lambda i: i + 1, [0]), {}


def prog_while_tensor_from_other_loop(tf):
    """A tensor made inside one loop cannot feed another loop."""
    leaked = []

    def body(i):
        leaked.append(i * 2)
        return i + 1

    tf.while_loop(lambda i: i < 3, body, [0])
    return tf.while_loop(lambda j: j < 3, lambda j: j + leaked[0], [0]), {}


def prog_while_variable_updates(tf):
    """assign_add in a loop body under control_dependencies, over several runs."""
    v = tf.Variable(0.0)
    n = tf.placeholder(tf.int32, [])

    def body(i):
        with tf.control_dependencies([v.assign_add(2.5)]):
            return i + 1

    r = tf.while_loop(lambda i: i < n, body, [0], parallel_iterations=1)
    with tf.control_dependencies([r]):
        after = v.read_value()
    return [r, after], [{n: 4}, {n: 2}, {n: 0}]


def prog_while_assert(tf):
    """An Assert in the body fails on the bad iteration only when the limit is low."""
    limit = tf.placeholder(tf.int32, [])

    def body(i):
        check = tf.Assert(i < limit, [i])
        with tf.control_dependencies([check]):
            return i + 1

    return tf.while_loop(lambda i: i < 5, body, [0]), [{limit: 5}, {limit: 3}, {limit: 9}]


# -- raw primitives --------------------------------------------------------------------------
def prog_raw_switch_merge(tf):
    """Switch into two branches, Merge them back with value_index."""
    cf = primitives(tf)
    p = tf.placeholder(tf.bool, [])
    out_false, out_true = cf.switch(tf.constant(2.0), p)
    value, index = cf.merge([out_false * 10.0, out_true * 100.0])
    return [value, index], [{p: True}, {p: False}]


def prog_raw_dead_fetch(tf):
    """Fetching the untaken output of a Switch is an error."""
    cf = primitives(tf)
    p = tf.placeholder(tf.bool, [])
    out_false, out_true = cf.switch(tf.constant(2.0), p)
    return tf.square(out_false), [{p: False}, {p: True}]


def prog_raw_loop(tf):
    """The design note's loop recipe with the primitives, closed with ``_update_input``."""
    cf = primitives(tf)
    frame = "raw_loop"
    start = tf.placeholder(tf.int32, [])
    enter_i = cf.enter(start, frame)
    limit = cf.enter(tf.constant(10), frame, is_constant=True)
    step = cf.enter(tf.constant(3), frame, is_constant=True)
    merged, _ = cf.merge([enter_i, enter_i])
    out_false, out_true = cf.switch(merged, cf.loop_cond(tf.less(merged, limit)))
    merged.op._update_input(1, cf.next_iteration(tf.identity(out_true) + step))
    return cf.exit(out_false), [{start: 0}, {start: 9}, {start: 40}]


# -- math and array ops ----------------------------------------------------------------------
def prog_broadcasting_math(tf):
    """Broadcasting binary ops between shapes [3, 1], [4] and scalars."""
    a = tf.constant([[1.0], [-2.0], [3.5]])
    b = tf.constant([0.5, -1.0, 2.0, 4.0])
    i = tf.constant([[1], [2]])
    j = tf.constant([3, -4, 5])
    return {"add": a + b, "mul": a * b, "sub": b - a, "max": tf.maximum(a, b),
            "min": tf.minimum(a, 1.0), "pow": tf.pow(tf.abs(a), b),
            "sqdiff": tf.squared_difference(a, b), "int_mul": i * j, "int_add": i + 7,
            "cmp": tf.greater_equal(a, b), "neg": -j}, {}


def prog_reductions(tf):
    """Reductions over all axes, one axis, keepdims; integer mean truncates."""
    x = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    n = tf.constant([[1, 2], [4, 4]])
    flags = tf.constant([[True, False], [True, True]])
    return {"sum": tf.reduce_sum(x), "sum0": tf.reduce_sum(x, axis=0),
            "mean1": tf.reduce_mean(x, axis=1, keepdims=True), "max": tf.reduce_max(x, 1),
            "min": tf.reduce_min(x), "prod": tf.reduce_prod(x, axis=[0, 1]),
            "int_mean": tf.reduce_mean(n), "int_mean0": tf.reduce_mean(n, axis=0),
            "all": tf.reduce_all(flags, axis=1), "any": tf.reduce_any(flags),
            "neg_axis": tf.reduce_sum(x, axis=-1)}, {}


def prog_integer_division(tf):
    """Floor division and modulo on negative ints; ``/`` of ints is a float64 division."""
    a = tf.constant([7, -7, 7, -7, 0])
    b = tf.constant([2, 2, -2, -2, 3])
    fa = tf.constant([7.5, -7.5, 7.5])
    fb = tf.constant([2.0, 2.0, -2.0])
    return {"floordiv": tf.floordiv(a, b), "op_floordiv": a // b, "floormod": tf.floormod(a, b),
            "op_mod": a % b, "truediv": tf.truediv(a, b), "op_div": a / b,
            "float_floordiv": fa // fb, "float_mod": tf.floormod(fa, fb),
            "divide": tf.divide(fa, fb)}, {}


def prog_casts_and_rounding(tf):
    """cast truncates toward zero; round is half-to-even; sign, floor, ceil."""
    x = tf.constant([-2.5, -1.5, -0.5, 0.5, 1.5, 2.7, -2.7])
    return {"cast": tf.cast(x, tf.int32), "round": tf.round(x), "sign": tf.sign(x),
            "floor": tf.floor(x), "ceil": tf.ceil(x), "to_bool": tf.cast(x, tf.bool),
            "int_to_float": tf.cast(tf.constant([1, -3]), tf.float64)}, {}


def prog_where_gather_one_hot(tf):
    """where (select and coordinates), gather on two axes, one_hot with options."""
    cond = tf.constant([[True, False], [False, True]])
    x = tf.constant([[1, 2], [3, 4]])
    params = tf.constant([[10.0, 11.0, 12.0], [20.0, 21.0, 22.0], [30.0, 31.0, 32.0]])
    return {"select": tf.where(cond, x, -x), "coords": tf.where(cond),
            "gather0": tf.gather(params, [2, 0, 2]), "gather1": tf.gather(params, [1], axis=1),
            "gather_scalar": tf.gather(params, 1),
            "one_hot": tf.one_hot([0, 2, -1, 5], 3),
            "one_hot_vals": tf.one_hot([1, 0], 2, on_value=5, off_value=-1),
            "one_hot_axis0": tf.one_hot([1, 0], 3, axis=0)}, {}


def prog_softmax_xent(tf):
    """softmax, log_softmax and softmax cross-entropy with soft labels."""
    logits = tf.constant([[2.0, 1.0, 0.1], [0.5, 0.5, 3.0], [100.0, 0.0, -100.0]])
    labels = tf.constant([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 1.0, 0.0]])
    return {"softmax": tf.nn.softmax(logits), "log_softmax": tf.nn.log_softmax(logits),
            "xent": tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits),
            "sigmoid": tf.sigmoid(tf.constant([-1.0, 0.0, 3.0]))}, {}


def prog_matmul_and_shapes(tf):
    """matmul with transposes, reshape/transpose/stack/concat and their shapes."""
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = tf.constant([[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]])
    r = tf.reshape(tf.constant([0, 1, 2, 3, 4, 5]), [3, 2])
    return {"mm": tf.matmul(a, b), "mm_t": tf.matmul(a, a, transpose_b=True),
            "reshape": r, "transpose": tf.transpose(r), "stack": tf.stack([a, a * 2.0], axis=1),
            "concat": tf.concat([a, a], axis=1), "shape": tf.shape(tf.stack([a, a])),
            "size": tf.size(a), "rank": tf.rank(a)}, {}


# -- session feeds ---------------------------------------------------------------------------
def prog_feed_errors(tf):
    """A missing placeholder feed is an InvalidArgumentError; a wrong shape a ValueError."""
    x = tf.placeholder(tf.float32, [2])
    return x * 2.0, [{x: [1, 2]}, {}, {x: [1.0, 2.0, 3.0]}]


def prog_feed_intermediate_tensor(tf):
    """Feeding a non-placeholder tensor prunes what computes it (a failing Assert)."""
    x = tf.placeholder(tf.float32, [])
    check = tf.Assert(x > 100.0, [x])
    with tf.control_dependencies([check]):
        mid = tf.identity(x * 2.0)
    return mid + 1.0, [{mid: 5.0}, {x: 200.0}, {x: 1.0}]


def prog_uninitialized_variable(tf):
    """Reading a variable no initializer covers is a FailedPreconditionError."""
    v = tf.Variable(1.0, collections=[])
    return v.read_value() + 1.0, {}


# -- more probes -----------------------------------------------------------------------------
def prog_slicing(tf):
    """Python slicing of tensors: ranges, steps, negative indices, new axes, ellipsis."""
    x = tf.constant([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]])
    return {"row": x[1], "col": x[:, -1], "block": x[1:, 1:3], "rev": x[::-1, ::2],
            "newaxis": x[:, tf.newaxis, 0], "ellipsis": x[..., 2], "scalar": x[-1, -2],
            "tensor_index": x[tf.constant(2)]}, {}


def prog_array_ops(tf):
    """expand_dims, squeeze, tile, fill, zeros/ones(_like), stack on axis -1, where_v2."""
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    return {"expand": tf.expand_dims(x, 1), "squeeze": tf.squeeze(tf.constant([[[5]], [[6]]])),
            "tile": tf.tile(x, [1, 2]), "fill": tf.fill([2, 3], 7),
            "zeros": tf.zeros([2], tf.int32), "ones_like": tf.ones_like(x),
            "zeros_like": tf.zeros_like(tf.constant([True, False])),
            "stack": tf.stack([x, -x], axis=-1),
            "where_v2": tf.where_v2(tf.constant([True, False]), x, tf.constant(0.0))}, {}


def prog_unary_math(tf):
    """Elementwise math with float32 results."""
    x = tf.constant([0.25, 1.0, 4.0])
    return {"exp": tf.exp(x), "log": tf.log(x), "log1p": tf.log1p(x), "sqrt": tf.sqrt(x),
            "rsqrt": tf.rsqrt(x), "reciprocal": tf.reciprocal(x), "tanh": tf.tanh(x),
            "sin": tf.sin(x), "cos": tf.cos(x), "square": tf.square(x),
            "logic": tf.logical_and(tf.logical_not(x > 0.5), tf.logical_or(x < 2.0, x > 3.0)),
            "add_n": tf.add_n([x, x, x]), "realdiv": tf.realdiv(x, 2.0),
            "ne": tf.not_equal(x, 1.0)}, {}


def prog_mixed_dtypes_rejected(tf):
    """An int32 tensor plus a float tensor is rejected while building."""
    return tf.constant(1) + tf.constant(1.5), {}


def prog_nested_loop_exit_in_cond(tf):
    """The Exit of an inner loop feeds a cond in the outer body; maximum_iterations from
    an outer loop variable."""
    def outer(i, total):
        inner = tf.while_loop(lambda j: j < 100, lambda j: j + 1, [0], maximum_iterations=i)
        picked = tf.cond(inner > 2, lambda: inner * 10, lambda: inner)
        return i + 1, total + picked

    return tf.while_loop(lambda i, t: i < 6, outer, [0, 0]), {}


def prog_group_tuple_and_print(tf):
    """group runs its inputs; tuple gates values; Print is an identity."""
    v = tf.Variable(0)
    a = v.assign_add(1)
    b = tf.Print(tf.constant([1.0, 2.0]), [tf.constant(1)], message="")
    g = tf.group(a, name="incr")
    t = tf.tuple([tf.constant(1), tf.constant(2.0)])
    with tf.control_dependencies([g]):  # without it the read could race the increment
        after = v.read_value()
    return [g, t, b, after], [{}, {}]


def prog_feed_conversions_tf_accepts(tf):
    """Feeds TF converts without loss: ints and bools into numeric placeholders."""
    f = tf.placeholder(tf.float32, [None])
    i = tf.placeholder(tf.int32, [])
    return [f * 1.0, i + 0], [{f: [1, 2, 3], i: 4}, {f: [True, False], i: True},
                              {f: [0.1], i: 2.0}]


def prog_while_with_variable_read_each_iteration(tf):
    """Reads of a variable inside the body see the previous iteration's assignment."""
    v = tf.Variable(1)

    def body(i, seen):
        new = v.assign(v.read_value() * 2)
        return i + 1, seen + new

    _, seen = tf.while_loop(lambda i, s: i < 5, body, [0, 0], parallel_iterations=1)
    return seen, [{}, {}]


def prog_control_dependencies_around_control_flow(tf):
    """A loop and a cond built under control_dependencies wait for the assign; a body
    op depends on an op from outside the loop."""
    v = tf.Variable(1)
    set_v = v.assign(5)
    with tf.control_dependencies([set_v]):
        looped = tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v.read_value()),
                               [0, 0])
        chosen = tf.cond(tf.constant(True), lambda: v.read_value() * 2, lambda: v.read_value())
    marker = tf.constant(7) * 1

    def body(i, acc):
        with tf.control_dependencies([marker]):
            return i + 1, acc + tf.identity(i)

    gated = tf.while_loop(lambda i, a: i < 4, body, [0, 0])
    return [looped, chosen, gated], {}


def prog_cond_branch_returns_operation(tf):
    """A branch may return an op; the cond's value is then the predicate, after the op."""
    v = tf.Variable(0)
    p = tf.placeholder(tf.bool, [])
    r = tf.cond(p, lambda: tf.group(v.assign_add(1)), lambda: tf.group(v.assign_add(10)))
    with tf.control_dependencies([r]):
        after = v.read_value()
    return [r, after], [{p: True}, {p: False}]


def prog_case_in_while(tf):
    """case inside a loop body, predicates on the loop variable."""
    def body(i, acc):
        step = tf.case([(i < 2, lambda: tf.constant(1)), (i < 5, lambda: tf.constant(10))],
                       default=lambda: tf.constant(100))
        return i + 1, acc + step

    return tf.while_loop(lambda i, a: i < 7, body, [0, 0]), {}


def prog_cond_in_cond_in_while(tf):
    """Two levels of cond inside a loop, all capturing a placeholder from outside."""
    scale = tf.placeholder(tf.float32, [])

    def body(i, acc):
        x = tf.cast(i, tf.float32)
        inner = lambda: tf.cond(i > 3, lambda: acc + x * scale, lambda: acc - scale)  # noqa: E731
        return i + 1, tf.cond(tf.equal(tf.floormod(i, 2), 0), inner, lambda: acc * 1.5)

    return tf.while_loop(lambda i, a: i < 8, body, [0, 1.0]), {scale: 2.0}


def prog_while_in_while_in_cond(tf):
    """Nested loops on a cond branch, using a vector of fed length."""
    p = tf.placeholder(tf.bool, [])
    vec = tf.placeholder(tf.float32, [None])

    def nested():
        def outer(i, total):
            inner = tf.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + vec * 0.5),
                                  [0, tf.zeros_like(vec)])[1]
            return i + 1, total + tf.reduce_sum(inner)
        return tf.while_loop(lambda i, t: i < tf.size(vec), outer, [0, 0.0])[1]

    r = tf.cond(p, nested, lambda: tf.reduce_max(vec))
    return r, [{p: True, vec: [1.0, 2.0, 3.0]}, {p: False, vec: [1.0, 2.0, 3.0]},
               {p: True, vec: [4.0]}]


def prog_while_in_cond_with_branch_local_values(tf):
    """A loop inside a branch starting from branch-local values, bounded by a fed
    maximum_iterations from outside the cond, with a cond inside its body."""
    p = tf.placeholder(tf.bool, [])
    m = tf.placeholder(tf.int32, [])
    base = tf.constant(2.0)

    def branch():
        start = base * 3.0
        def body(i, x):
            return i + 1, tf.cond(x > 20.0, lambda: x - 5.0, lambda: x * base)
        return tf.while_loop(lambda i, x: i < 10, body, (0, start), maximum_iterations=m)[1]

    r = tf.cond(p, branch, lambda: base)
    return r, [{p: True, m: 4}, {p: True, m: 0}, {p: True, m: 50}, {p: False, m: 4}]


def prog_branch_returns_loop_exit(tf):
    """Inside a loop in a cond: a cond in a cond whose branch returns a loop's Exit."""
    p = tf.placeholder(tf.bool, [])

    def loop():
        def body(i, acc):
            def inner_loop():
                return tf.while_loop(lambda j: j < i, lambda j: j + 1, [0])

            def middle():
                return tf.cond(i > 1, inner_loop, lambda: i * 100)

            return i + 1, acc + tf.cond(i > 0, middle, lambda: tf.constant(-1))
        return tf.while_loop(lambda i, a: i < 5, body, [0, 0])[1]

    return tf.cond(p, loop, lambda: tf.constant(7)), [{p: True}, {p: False}]


PROGRAMS = {name: fn for name, fn in list(globals().items())
            if name.startswith("prog_") and callable(fn)}
