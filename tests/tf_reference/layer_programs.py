"""Numeric programs with tf.layers, run by TF (generate_layers.py -> layers.json) and by
dataflow (tests/test_tf_layers.py): fixed inputs and weights, so the values must agree."""
from __future__ import annotations

import numpy as np


def _data():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((4, 6)).astype(np.float32),
            "k1": rng.standard_normal((6, 5)).astype(np.float32) * 0.5,
            "k2": rng.standard_normal((5, 3)).astype(np.float32) * 0.5,
            "img": rng.standard_normal((2, 3, 3, 4)).astype(np.float32) * 2 + 1}


def run_mlp(tf):
    """dense(relu) -> batch_norm (training placeholder) -> dense; one training step of the
    moving averages, then inference."""
    d = _data()
    x = tf.placeholder(tf.float32, [None, 6])
    training = tf.placeholder(tf.bool, [])
    h = tf.layers.dense(x, 5, activation=tf.nn.relu,
                        kernel_initializer=tf.constant_initializer(d["k1"]),
                        bias_initializer=tf.constant_initializer(0.1))
    h = tf.layers.batch_normalization(h, momentum=0.9, training=training)
    out = tf.layers.dense(h, 3, kernel_initializer=tf.constant_initializer(d["k2"]))
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    mm = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
    mv = [v for v in tf.global_variables() if "moving_variance" in v.name][0]
    loss = tf.reduce_mean(tf.square(out))
    grads = tf.gradients(loss, tf.trainable_variables())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        train_out, _ = sess.run([out, updates], {x: d["x"], training: True})
        g = sess.run(grads, {x: d["x"], training: True})
        stats = sess.run([mm, mv])
        infer_out = sess.run(out, {x: d["x"], training: False})
    return {"train_out": train_out, "moving_mean": stats[0], "moving_variance": stats[1],
            "infer_out": infer_out,
            **{f"grad_{i}": gi for i, gi in enumerate(g)}}


def run_bn4d(tf):
    """batch_normalization of a 4-D input (TF's fused path) with momentum 0.5."""
    d = _data()
    img = tf.constant(d["img"])
    y = tf.layers.batch_normalization(img, momentum=0.5, epsilon=0.01, training=True)
    updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out, _ = sess.run([y, updates])
        stats = sess.run([v for v in tf.global_variables() if "moving" in v.name])
    return {"out": out, "moving_mean": stats[0], "moving_variance": stats[1]}


def run_flatten_dropout(tf):
    d = _data()
    img = tf.constant(d["img"])
    flat = tf.layers.flatten(img)
    first = tf.layers.flatten(img, data_format="channels_first")
    same = tf.layers.dropout(flat, rate=0.5, training=False)
    with tf.Session() as sess:
        f, c, s = sess.run([flat, first, same])
    return {"flat": f, "channels_first": c, "not_training": s}


def run_convnet(tf):
    """conv2d(same, relu) -> max_pooling2d -> conv2d(valid, strided, channels_first) ->
    average_pooling2d -> flatten -> dense: outputs and the gradients of every variable."""
    rng = np.random.default_rng(1)
    img = rng.standard_normal((2, 6, 6, 2)).astype(np.float32)
    k1 = rng.standard_normal((3, 3, 2, 4)).astype(np.float32) * 0.4
    k2 = rng.standard_normal((2, 2, 4, 3)).astype(np.float32) * 0.4
    x = tf.placeholder(tf.float32, [None, 6, 6, 2])
    h = tf.layers.conv2d(x, 4, 3, padding="same", activation=tf.nn.relu,
                         kernel_initializer=tf.constant_initializer(k1),
                         bias_initializer=tf.constant_initializer(0.1))
    h = tf.layers.max_pooling2d(h, 2, 1, padding="same")
    h = tf.transpose(h, [0, 3, 1, 2])
    h = tf.layers.conv2d(h, 3, (2, 2), strides=2, data_format="channels_first",
                         kernel_initializer=tf.constant_initializer(k2),
                         bias_initializer=tf.constant_initializer(-0.2))
    h = tf.layers.average_pooling2d(h, 2, 2, padding="same", data_format="channels_first")
    flat = tf.layers.flatten(h)
    out = tf.layers.dense(flat, 2, kernel_initializer=tf.constant_initializer(
        rng.standard_normal((12, 2)).astype(np.float32) * 0.5))
    loss = tf.reduce_mean(tf.square(out))
    grads = tf.gradients(loss, tf.trainable_variables())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        o, g = sess.run([out, grads], {x: img})
    return {"out": o, **{f"grad_{i}": gi for i, gi in enumerate(g)}}


PROGRAMS = {"mlp": run_mlp, "bn4d": run_bn4d, "flatten_dropout": run_flatten_dropout,
            "convnet": run_convnet}
