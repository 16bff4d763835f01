"""TF1 behaviours that once differed here, as programs run unchanged on TensorFlow and dataflow.

Same conventions as ``programs.py`` (each ``prog_xxx(tf)`` returns ``(fetches, feeds)``,
:func:`programs.run_program` runs it): ops without data inputs in an untaken cond branch
(an unfed placeholder there is no error), gradients of and with respect to integer
tensors, ``gradients`` called inside a while loop's body, the ``IndexedSlices`` gradient
of ``gather`` and the sparse updates of TF1's optimizers, and the structures
``Session.run`` returns.

``generate_tf1_behaviours.py`` records the outcomes under TensorFlow (graph mode, control
flow v1) in ``expected_tf1_behaviours.json``; ``tests/test_tf1_behaviours.py`` replays
them against dataflow.
"""
from __future__ import annotations

import collections

import numpy as np

try:  # imported as ``tests.tf_reference.tf1_behaviour_programs`` by pytest ...
    from .grad_programs import fetchable, variable
    from .programs import run_program
except ImportError:  # ... and as a sibling module by the generator
    from grad_programs import fetchable, variable
    from programs import run_program

__all__ = ["PROGRAMS", "run_program"]

Pair = collections.namedtuple("Pair", "first second")


def c64(tf, value):
    return tf.constant(np.asarray(value, dtype=np.float64))


# -- 1. ops without data inputs in a cond branch ---------------------------------------------
def prog_cond_unfed_placeholder_in_untaken_branch(tf):
    """A placeholder made inside a branch need only be fed when that branch runs."""
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [])

    def uses_own_placeholder():
        q = tf.placeholder(tf.float32, [], name="q")
        return q * 2.0 + x

    r = tf.cond(p, uses_own_placeholder, lambda: x - 1.0)
    return r, [{p: False, x: 3.0}, {p: True, x: 3.0}]


def prog_cond_untaken_constants_and_reads(tf):
    """Constants and variable reads of the untaken branch do not run; an uninitialized
    variable read in that branch is no error."""
    p = tf.placeholder(tf.bool, [])
    v = variable(tf, [1.0, 2.0], name="v")
    never = variable(tf, [5.0, 6.0], name="never_initialized")

    def read_never():
        return never.read_value() + tf.constant([10.0, 20.0])

    r = tf.cond(p, lambda: v.read_value() * tf.constant(3.0), read_never)
    return r, [{p: True}, {p: False}]


def prog_cond_nested_unfed_placeholder(tf):
    """In nested conds an inner branch's placeholder follows the inner predicate."""
    a = tf.placeholder(tf.bool, [])
    b = tf.placeholder(tf.bool, [])

    def inner():
        return tf.cond(b, lambda: tf.placeholder(tf.float32, [], name="inner_q") + 1.0,
                       lambda: tf.constant(7.0))

    r = tf.cond(a, inner, lambda: tf.constant(-1.0))
    return r, [{a: False, b: True}, {a: True, b: False}, {a: True, b: True}]


# -- 2. gradients of and with respect to integer tensors -------------------------------------
def prog_grad_integer_ys_member(tf):
    """An integer loop counter among ``ys`` contributes nothing (no error)."""
    x0 = c64(tf, 0.5)
    i, x = tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 1.5 + 1.0), [0, x0])
    return fetchable(tf, tf.gradients([i, x], [x0])), {}


def prog_grad_integer_xs_is_none(tf):
    """With respect to an integer tensor the gradient is None, even on a path via cast."""
    n = tf.placeholder(tf.int32, [])
    x = c64(tf, 2.0)
    y = tf.cast(n, tf.float64) * x * x
    return fetchable(tf, tf.gradients(y, [n, x])), {n: 3}


def prog_grad_integer_of_itself(tf):
    """``gradients(i, i)`` of an integer tensor is its grad_ys (ones by default)."""
    i = tf.placeholder(tf.int32, [3])
    j = tf.placeholder(tf.int64, [])
    return [tf.gradients(i, i), tf.gradients(j, j, grad_ys=tf.constant(5, tf.int64)),
            tf.gradients([i, i * 2], i)], {i: [1, 2, 3], j: 4}


def prog_grad_integer_ys_only(tf):
    """Only integer ys: every float source gets None."""
    x = c64(tf, 1.5)
    k = tf.cast(x, tf.int32) + 1
    return fetchable(tf, tf.gradients(k, [x])), {}


# -- 3. gradients inside a while loop's body -------------------------------------------------
def prog_grad_inside_while_body(tf):
    """Each outer iteration differentiates an inner loop (x^n by repeated multiplication)
    built in its body and accumulates the derivative n * x^(n-1)."""
    x = tf.placeholder(tf.float64, [])

    def outer_body(k, acc):
        xk = x * tf.cast(k + 1, tf.float64)
        _, p = tf.while_loop(lambda j, p: j < 3, lambda j, p: (j + 1, p * xk),
                             [0, tf.constant(1.0, tf.float64)])
        g, = tf.gradients(p, xk)
        return k + 1, acc + g

    _, total = tf.while_loop(lambda k, a: k < 2, outer_body, [0, tf.constant(0.0, tf.float64)])
    return total, [{x: 0.5}, {x: -1.25}]


def prog_grad_inside_while_body_of_body_value(tf):
    """The gradient of a value computed in the body, through an inner loop and a cond."""
    x = tf.placeholder(tf.float64, [])

    def outer_body(k, acc):
        s = tf.sin(x + tf.cast(k, tf.float64))
        _, q = tf.while_loop(lambda j, q: j < 2, lambda j, q: (j + 1, q * s + s),
                             [0, tf.constant(0.5, tf.float64)])
        q = tf.cond(q > 0.0, lambda: q * q, lambda: -q)
        g, = tf.gradients(q, s)
        return k + 1, acc + g

    _, total = tf.while_loop(lambda k, a: k < 3, outer_body, [0, tf.constant(0.0, tf.float64)])
    return total, [{x: 0.3}, {x: 2.0}]


# -- 4. IndexedSlices: the gradient of gather, its aggregation and sparse updates -------------
def _params(tf):
    return c64(tf, np.arange(12.0).reshape(4, 3) / 10.0 - 0.4)


def prog_gather_grad_is_indexed_slices(tf):
    """Fetching a gather's gradient gives an IndexedSlicesValue; densified, the rows of
    repeated indices add up."""
    params = _params(tf)
    w = c64(tf, [1.0, -2.0, 0.5])
    loss = tf.reduce_sum(tf.gather(params, [3, 0, 3]) * w)
    grad, = tf.gradients(loss, params)
    return {"slices": grad, "dense": tf.convert_to_tensor(grad)}, {}


def prog_gather_grad_of_variable_and_matrix_indices(tf):
    """A variable gathered with 2-D indices: the slices' rows are flattened."""
    v = variable(tf, np.arange(10.0).reshape(5, 2), dtype=tf.float64, name="table")
    idx = tf.placeholder(tf.int32, [2, 2])
    loss = tf.reduce_sum(tf.square(tf.gather(v, idx)))
    grad, = tf.gradients(loss, v)
    return [grad, tf.convert_to_tensor(grad)], [{idx: [[4, 1], [1, 0]]}]


def prog_two_gathers_aggregate_sparse(tf):
    """Two gathers of one tensor: one IndexedSlices, rows and indices concatenated."""
    params = _params(tf)
    loss = tf.reduce_sum(tf.gather(params, [1, 2]) * 2.0) + \
        tf.reduce_sum(tf.square(tf.gather(params, [2])))
    grad, = tf.gradients(loss, params)
    return [grad, tf.convert_to_tensor(grad)], {}


def prog_gather_plus_dense_use_densifies(tf):
    """A gather and a dense use of the same tensor: the sum is a dense tensor."""
    params = _params(tf)
    loss = tf.reduce_sum(tf.gather(params, [0, 0])) + tf.reduce_sum(params * params)
    return tf.gradients(loss, params), {}


def prog_gather_axis1_grad_is_dense(tf):
    """A gather along axis 1 has a dense gradient."""
    params = _params(tf)
    loss = tf.reduce_sum(tf.gather(params, [2, 2, 0], axis=1) * 3.0)
    return tf.gradients(loss, params), {}


def _sparse_training(tf, make_optimizer):
    """Three steps on a gathered float32 table (float32: TF casts its float32 Python
    hyperparameters to a float64 variable's dtype, dataflow converts them directly)."""
    table = variable(tf, np.arange(12.0).reshape(6, 2) / 4.0 - 1.0, dtype=tf.float32,
                     name="table")
    idx = tf.placeholder(tf.int32, [None])
    target = tf.constant([0.5, -0.5])
    rows = tf.gather(table, idx)
    loss = tf.reduce_sum(tf.square(rows - target) * tf.cast(tf.range(1, tf.size(idx) + 1),
                                                          tf.float32)[:, None])
    opt = make_optimizer()
    train = opt.minimize(loss)
    feeds = [{idx: [1, 4, 1]}, {idx: [0]}, {idx: [4, 4, 5, 1]}]
    with tf.control_dependencies([train]):
        after = tf.identity(table.read_value())
    return after, feeds


def prog_sparse_sgd(tf):
    """GradientDescent on a gathered table: only the gathered rows move."""
    return _sparse_training(tf, lambda: tf.train.GradientDescentOptimizer(0.1))


def prog_sparse_momentum(tf):
    """Momentum on a gathered table: rows not gathered keep their accumulator and value."""
    return _sparse_training(tf, lambda: tf.train.MomentumOptimizer(0.1, 0.9))


def prog_sparse_momentum_nesterov(tf):
    """Nesterov momentum, sparse."""
    return _sparse_training(tf, lambda: tf.train.MomentumOptimizer(0.05, 0.8,
                                                                   use_nesterov=True))


def prog_sparse_adam(tf):
    """Adam on a gathered table: every row's moments decay, so every row moves."""
    return _sparse_training(tf, lambda: tf.train.AdamOptimizer(0.1))


def prog_embedding_lookup_sharded_sparse_momentum(tf):
    """A sharded embedding_lookup: each shard's gradient is sparse, so Momentum moves
    only the rows looked up (the second step's accumulators of others stay put)."""
    shards = [variable(tf, np.arange(6.0).reshape(3, 2) / 5.0 - float(k), dtype=tf.float32,
                       name=f"shard{k}") for k in range(2)]
    ids = tf.placeholder(tf.int32, [None])
    emb = tf.nn.embedding_lookup(shards, ids)
    loss = tf.reduce_sum(tf.square(emb - 0.25))
    grads = [tf.convert_to_tensor(g) for g in tf.gradients(loss, shards)]
    train = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss, var_list=shards)
    with tf.control_dependencies([train]):
        after = [tf.identity(s.read_value()) for s in shards]
    return [grads, after], [{ids: [0, 3, 5, 0]}, {ids: [1]}, {ids: [4, 2]}]


# -- 5. gradient structure and fetch structures -----------------------------------------------
def prog_grad_aggregates_paths(tf):
    """Several paths to one source (through a cond and directly) add up; a source
    reached by no path gets None; grad_ys per y."""
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float64, [2])
    unrelated = tf.placeholder(tf.float64, [])
    a = x * x
    b = tf.cond(p, lambda: tf.sin(x), lambda: x * 3.0)
    grads = tf.gradients([a, b, tf.reduce_sum(a)], [x, unrelated],
                         grad_ys=[c64(tf, [1.0, 2.0]), c64(tf, [0.5, -1.0]), None])
    return fetchable(tf, grads), [{p: True, x: [0.5, 1.5]}, {p: False, x: [0.5, 1.5]}]


def prog_grad_ys_float32(tf):
    """grad_ys of float32 for float32 ys; the gradient keeps float32."""
    x = tf.placeholder(tf.float32, [3])
    y = tf.reduce_sum(x * x)
    return tf.gradients(y, x, grad_ys=tf.constant(2.5)), {x: [1.0, 2.0, -3.0]}


def prog_unconnected_gradients_zero(tf):
    """unconnected_gradients='zero' gives zeros (shaped as the source) instead of None."""
    x = tf.placeholder(tf.float64, [2])
    z = tf.placeholder(tf.float64, [3])
    y = tf.reduce_sum(x * 2.0)
    return tf.gradients(y, [x, z], unconnected_gradients="zero"), {x: [1.0, 2.0],
                                                                   z: [0.0, 1.0, 2.0]}


def prog_fetch_structures(tf):
    """Session.run keeps lists, tuples, named tuples and dicts (nested), an op gives
    None, and an IndexedSlices comes back as an IndexedSlicesValue."""
    x = tf.constant([1.0, 2.0])
    params = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    grad, = tf.gradients(tf.reduce_sum(tf.gather(params, [1])), params)
    noop = tf.no_op()
    fetches = {"list": [x, (x * 2.0, noop)], "pair": Pair(first=x, second={"g": grad}),
               "op": noop, "nested": ((x,), [[x + 1.0]])}
    return fetches, {}

def prog_grad_ys_python_float_for_float64(tf):
    """A Python float grad_ys for a float64 y."""
    x = tf.placeholder(tf.float64, [2])
    return tf.gradients(tf.reduce_sum(x * x), x, grad_ys=3.0), {x: [1.0, -2.0]}


def prog_grad_ys_integer_tensor_for_float(tf):
    """An int32 grad_ys tensor for a float32 y."""
    x = tf.placeholder(tf.float32, [])
    return tf.gradients(x * x, x, grad_ys=tf.constant(2)), {x: 3.0}


def prog_grad_of_source_itself_and_list_ys(tf):
    """gradients(x, x) is grad_ys (ones); a y listed twice counts twice."""
    x = tf.placeholder(tf.float64, [2])
    y = x * 3.0
    return [tf.gradients(x, x), tf.gradients([y, y], x),
            tf.gradients(y, [x, y])], {x: [1.0, 2.0]}


def prog_grad_while_integer_and_float_exits(tf):
    """A loop with int and float loop variables: the int exit in ys adds nothing."""
    x0 = tf.placeholder(tf.float64, [])
    i, x, n = tf.while_loop(lambda i, x, n: i < 4,
                            lambda i, x, n: (i + 1, x * x * 0.5 + 0.1, n + 2),
                            [0, x0, tf.constant(1)])
    return fetchable(tf, tf.gradients([i, x, n], [x0])), {x0: 0.8}


def prog_gather_grad_through_cond_and_while(tf):
    """A gather in a cond branch (the other branch dense: the cond's gradient is dense)
    and in a while loop body (TF accumulates IndexedSlices; compared densified)."""
    p = tf.placeholder(tf.bool, [])
    params = _params(tf)
    r = tf.cond(p, lambda: tf.reduce_sum(tf.gather(params, [2, 2])),
                lambda: tf.reduce_sum(params[0] * 2.0))
    g_cond, = tf.gradients(r, params)

    def body(i, acc):
        return i + 1, acc + tf.reduce_sum(tf.square(tf.gather(params, [i, 3 - i])))

    _, acc = tf.while_loop(lambda i, a: i < 3, body, [0, tf.constant(0.0, tf.float64)])
    g_loop, = tf.gradients(acc, params)
    return [g_cond, tf.convert_to_tensor(g_loop)], [{p: True}, {p: False}]


def prog_clip_by_global_norm_sparse(tf):
    """clip_by_global_norm keeps an IndexedSlices (its rows scaled) and counts its rows,
    repeated indices unsummed, in the global norm; Adam then applies it sparsely."""
    table = variable(tf, np.arange(8.0).reshape(4, 2) / 3.0, dtype=tf.float32, name="t")
    dense_w = variable(tf, [0.5, -1.0], dtype=tf.float32, name="w")
    loss = tf.reduce_sum(tf.square(tf.gather(table, [1, 1, 2]))) + \
        tf.reduce_sum(tf.square(dense_w))
    grads = tf.gradients(loss, [table, dense_w])
    clipped, norm = tf.clip_by_global_norm(grads, 2.0)
    opt = tf.train.AdamOptimizer(0.05)
    train = opt.apply_gradients(zip(clipped, [table, dense_w]))
    with tf.control_dependencies([train]):
        after = tf.identity(table.read_value())
    return [clipped[0], norm, tf.global_norm(grads), after], [{}, {}]



PROGRAMS = {name[len("prog_"):]: fn for name, fn in sorted(globals().items())
            if name.startswith("prog_")}
