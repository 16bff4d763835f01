"""TF1 programs whose variable and op names dataflow must reproduce.

Each ``prog_xxx(tf)`` builds a graph with ``tf`` (``tensorflow.compat.v1`` with resource
variables disabled, or ``dataflow``) and returns a dict of named graph elements;
:func:`describe` turns the graph into JSON: every global, trainable and local variable
(name, shape), the names of the returned elements, and the sizes of the standard
collections. ``generate_names.py`` stores TF's descriptions in ``names.json`` and
``tests/test_tf_names.py`` compares dataflow's with them.
"""
from __future__ import annotations


def prog_scopes(tf):
    with tf.variable_scope("model"):
        with tf.variable_scope("layer1"):
            w = tf.get_variable("w", [4, 3])
            tf.get_variable("b", [3], initializer=tf.zeros_initializer())
        with tf.name_scope("ns"):
            v = tf.get_variable("v", [2])
            y = tf.add(v, 1.0, name="y")
    with tf.variable_scope("model", reuse=True):
        z = tf.identity(tf.get_variable("layer1/w"), name="z")
    for _ in range(2):
        with tf.variable_scope(None, default_name="block"):
            tf.get_variable("k", [1])
    with tf.variable_scope("model/layer1", reuse=tf.AUTO_REUSE):
        tf.get_variable("extra", [1], dtype=tf.int32)
    with tf.name_scope("outer"):
        with tf.variable_scope("inner"):
            t = tf.get_variable("t", [2], trainable=False)
            s = tf.multiply(t, 2.0, name="s")
    tf.get_local_variable("counter", [], initializer=tf.zeros_initializer())
    return {"y": y, "z": z, "s": s, "w": w}


def _model(tf):
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    with tf.variable_scope("layer"):
        w = tf.get_variable("W", [4, 2])
        b = tf.get_variable("b", [2], initializer=tf.zeros_initializer())
    return tf.reduce_mean(tf.square(tf.matmul(x, w) + b))


def prog_adam_in_name_scope(tf):
    loss = _model(tf)
    with tf.name_scope("train"):
        step = tf.train.AdamOptimizer(0.01).minimize(
            loss, global_step=tf.train.get_or_create_global_step())
    return {"train_op": step}


def prog_adam_twice(tf):
    loss = _model(tf)
    a = tf.train.AdamOptimizer(0.01).minimize(loss)
    b = tf.train.AdamOptimizer(0.02, name="Adam2").minimize(loss)
    return {"a": a, "b": b}


def prog_adam_in_variable_scope(tf):
    loss = _model(tf)
    with tf.variable_scope("opt"):
        step = tf.train.AdamOptimizer(0.01).minimize(loss)
    return {"train_op": step}


def prog_momentum_and_sgd(tf):
    loss = _model(tf)
    m = tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
    g = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    return {"momentum": m, "sgd": g}


def prog_plain_variables(tf):
    a = tf.Variable(1.0)
    b = tf.Variable(2.0)
    with tf.name_scope("scope"):
        c = tf.Variable([1.0, 2.0], name="c")
    with tf.variable_scope("vs"):
        d = tf.Variable(0.0, name="d")
    return {"a": a, "b": b, "c": c, "d": d}


def prog_layers(tf):
    x = tf.placeholder(tf.float32, [None, 6], name="x")
    training = tf.placeholder(tf.bool, [], name="training")
    h = tf.layers.dense(x, 5, activation=tf.nn.relu)
    h = tf.layers.dropout(h, rate=0.5, training=training)
    h = tf.layers.batch_normalization(h, training=training)
    logits = tf.layers.dense(h, 3, name="logits")
    again = tf.layers.dense(h, 3, name="logits", reuse=True)
    other = tf.layers.dense(x, 4, kernel_regularizer=lambda w: tf.reduce_sum(w))
    flat = tf.layers.flatten(tf.reshape(x, [-1, 2, 3]))
    with tf.variable_scope("block"):
        inner = tf.layers.dense(x, 2, use_bias=False)
        bn = tf.layers.batch_normalization(inner, training=True)
    frozen = tf.layers.batch_normalization(x, training=False, trainable=False)
    return {"logits": logits, "again": again, "other": other, "flat": flat, "inner": inner,
            "bn": bn, "frozen": frozen}


def prog_conv_layers(tf):
    x = tf.placeholder(tf.float32, [None, 8, 8, 1], name="x")
    h = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling2d(h, 2, 2)
    h2 = tf.layers.conv2d(h, 6, [2, 2], name="second")
    h3 = tf.layers.conv2d(h, 6, [2, 2], name="second", reuse=True, use_bias=False)
    with tf.variable_scope("tower"):
        c = tf.layers.conv2d(h, 2, 1)
        p = tf.layers.average_pooling2d(c, 2, 2, padding="same")
        layer = tf.layers.Conv2D(2, 1, kernel_regularizer=lambda w: tf.reduce_sum(w))
        c2 = layer(p)
        c3 = layer(c)
    q = tf.layers.MaxPooling2D(2, 1)(h3)
    return {"h": h, "h2": h2, "h3": h3, "c": c, "p": p, "c2": c2, "c3": c3, "q": q}


def prog_rnn_cells_in_scopes(tf):
    x = tf.placeholder(tf.float32, [None, 3, 4], name="x")
    cells = tf.nn.rnn_cell
    with tf.variable_scope("model", initializer=tf.constant_initializer(0.1)):
        gru = cells.GRUCell(5)
        out, _ = tf.nn.dynamic_rnn(gru, x, dtype=tf.float32)
        with tf.variable_scope("encoder"):
            lstm = cells.LSTMCell(3, use_peepholes=True, num_proj=2)
            out2, _ = tf.nn.dynamic_rnn(lstm, x, dtype=tf.float32, scope="enc")
        stacked = cells.MultiRNNCell([cells.BasicLSTMCell(2), cells.GRUCell(2)])
        out3, _ = tf.nn.dynamic_rnn(stacked, x, dtype=tf.float32)
    with tf.variable_scope("model", reuse=True):
        shared, _ = tf.nn.dynamic_rnn(gru, x, dtype=tf.float32)
    with tf.variable_scope("bi"):
        (fw, bw), _ = tf.nn.bidirectional_dynamic_rnn(
            cells.BasicRNNCell(2), cells.BasicRNNCell(2, name="back"), x, dtype=tf.float32)
    with tf.variable_scope("tied", reuse=tf.AUTO_REUSE):
        one, _ = tf.nn.dynamic_rnn(cells.BasicRNNCell(2, name="tied_cell"), x,
                                   dtype=tf.float32)
        two, _ = tf.nn.dynamic_rnn(cells.BasicRNNCell(2, name="tied_cell"), x,
                                   dtype=tf.float32)
    again, _ = tf.nn.dynamic_rnn(gru, x, dtype=tf.float32, scope="again")
    other, _ = tf.nn.dynamic_rnn(cells.GRUCell(5), x, dtype=tf.float32)
    return {"out": out, "out2": out2, "out3": out3, "shared": shared, "fw": fw, "bw": bw,
            "one": one, "two": two, "again": again, "other": other}


def prog_layer_objects(tf):
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    layer = tf.layers.Dense(3, name="shared")
    a = layer(x)
    b = layer(x)
    c = tf.layers.Dense(2)(a)
    d = tf.layers.Dense(2)(b)
    return {"a": a, "b": b, "c": c, "d": d}


def prog_random_and_initializer_ops(tf):
    x = tf.placeholder(tf.float32, [None, 5], name="x")
    out = {
        "normal": tf.random_normal([2, 3], 1.0, 2.0),
        "truncated": tf.truncated_normal([3], stddev=0.1),
        "uniform": tf.random_uniform([4], -1.0, 1.0),
        "uniform_int": tf.random_uniform([2], 0, 10, dtype=tf.int32),
        "shuffle": tf.random_shuffle(tf.constant([1, 2, 3])),
        "multinomial": tf.multinomial(tf.constant([[0.0, 1.0]]), 3),
        "categorical": tf.random.categorical(tf.constant([[0.0, 1.0]]), 3),
        "named": tf.random_normal([1], name="noise"),
    }
    # (nn.dropout is left out: TF 2.21 builds it with SelectV2, TF 1.15 with Mul ops, as
    # dataflow does, so their names differ.)
    tf.nn.dropout(x, keep_prob=0.5)
    with tf.variable_scope("init"):
        out["glorot"] = tf.get_variable("glorot", [3, 2])
        out["he"] = tf.get_variable("he", [3, 2], initializer=tf.initializers.he_normal())
        out["ortho"] = tf.get_variable("ortho", [3, 3],
                                       initializer=tf.orthogonal_initializer())
        out["const"] = tf.get_variable("const", [2], initializer=tf.constant_initializer(1.0))
    return out


PROGRAMS = {name[5:]: fn for name, fn in sorted(globals().items())
            if name.startswith("prog_")}


def describe(tf, result):
    """The JSON description of the default graph after a program ran."""
    def var(v):
        return [v.name, v.shape.as_list()]
    return {
        "global": [var(v) for v in tf.global_variables()],
        "trainable": [v.name for v in tf.trainable_variables()],
        "local": [var(v) for v in tf.local_variables()],
        "elements": {k: v.name for k, v in sorted(result.items())},
        "update_ops": len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)),
        "regularization_losses": len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)),
    }
