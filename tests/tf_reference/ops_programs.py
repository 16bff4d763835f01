"""TF1 programs over the array, nn, loss and convolution ops of issue 15, run unchanged on
``tensorflow.compat.v1`` (by ``generate_ops.py``, into ``expected_ops.json``) and on
dataflow (by ``tests/test_tf_reference_ops.py``). Outcomes are encoded as in
:mod:`programs` (values with dtype and shape, or error class names).

Each program fetches forward values and, for the differentiable ops, the gradients of a
weighted sum, so TF's gradient conventions (ties, padding, routing) are recorded too.
"""
from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(15)
X34 = RNG.standard_normal((3, 4)).astype(np.float32)
X235 = RNG.standard_normal((2, 3, 5)).astype(np.float32)


def _grad(tf, y, xs, seed=0, shape=None):
    """Gradients of ``sum(y * w)`` for a fixed random ``w`` (of ``shape``, by default the
    static shape of ``y``)."""
    shape = shape or [int(d) for d in y.shape.as_list()]
    w = np.random.default_rng(seed).standard_normal(shape).astype(y.dtype.as_numpy_dtype)
    return tf.gradients(tf.reduce_sum(y * w), xs)


def prog_argmax_argmin(tf):
    x = tf.constant([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]])
    return [tf.argmax(x, 1), tf.argmin(x, 0), tf.argmax(x, axis=1, output_type=tf.int32),
            tf.argmax(x)], {}


def prog_slice_and_gradient(tf):
    x = tf.placeholder(tf.float32, [3, 4])
    y = tf.slice(x, [1, 1], [2, -1])
    return [y, _grad(tf, y, [x])], {x: X34}


def prog_slice_out_of_range_constant(tf):
    return tf.slice(tf.constant(X34), [2, 0], [2, 1]), {}


def prog_slice_out_of_range_run_error(tf):
    x = tf.placeholder(tf.float32, [None, None])
    return tf.slice(x, [2, 0], [2, 1]), {x: X34}


def prog_split_and_gradient(tf):
    x = tf.placeholder(tf.float32, [2, 3, 5])
    a, b, c = tf.split(x, [2, -1, 1], axis=2)
    d, e, f = tf.split(x, 3, axis=1)
    y = tf.concat([a * 2.0, c, b[:, :, :2]], axis=2) + d
    return [a, b, c, d, e, f, _grad(tf, y, [x])], {x: X235}


def prog_split_uneven_error(tf):
    return tf.split(tf.constant(X235), 2, axis=1), {}


def prog_unstack_and_gradient(tf):
    x = tf.placeholder(tf.float32, [2, 3, 5])
    parts = tf.unstack(x, axis=1)
    y = parts[0] * parts[2]
    return [parts, _grad(tf, y, [x])], {x: X235}


def prog_pad_modes_and_gradients(tf):
    x = tf.placeholder(tf.float32, [3, 4])
    p = [[1, 2], [3, 1]]
    ys = [tf.pad(x, p), tf.pad(x, p, constant_values=-1.5), tf.pad(x, p, "REFLECT"),
          tf.pad(x, [[3, 2], [4, 0]], "symmetric")]
    return [ys, [_grad(tf, y, [x], i) for i, y in enumerate(ys)]], {x: X34}


def prog_pad_reflect_too_large(tf):
    return tf.pad(tf.constant(X34), [[3, 0], [0, 0]], "REFLECT"), {}


def prog_gather_nd_scatter_nd(tf):
    x = tf.placeholder(tf.float32, [2, 3, 5])
    g1 = tf.gather_nd(x, [[1, 2, 3], [0, 0, 4], [1, 2, 3]])
    g2 = tf.gather_nd(x, [[[1], [0]]])
    u = tf.placeholder(tf.float32, [3, 2])
    s = tf.scatter_nd([[1], [3], [1]], u, [4, 2])
    return [g1, g2, s, _grad(tf, g1, [x]), _grad(tf, g2, [x], 1), _grad(tf, s, [u], 2)], \
        {x: X235, u: X34[:, :2]}


def prog_gather_nd_bad_index(tf):
    x = tf.placeholder(tf.int32, [None, 2])
    return tf.gather_nd(tf.constant(X34), x), {x: [[0, 4]]}


def prog_boolean_mask(tf):
    x = tf.placeholder(tf.float32, [2, 3, 5])
    m = tf.constant([[True, False, True], [False, False, True]])
    y1 = tf.boolean_mask(x, m)
    y2 = tf.boolean_mask(x, [False, True, True, False, True], axis=2)
    return [y1, y2, _grad(tf, y1, [x], shape=[3, 5])], {x: X235}


def prog_reverse_and_gradient(tf):
    x = tf.placeholder(tf.float32, [2, 3, 5])
    y = tf.reverse(x, [0, -1])
    return [y, tf.reverse(x, []), _grad(tf, y, [x])], {x: X235}


def prog_range_linspace(tf):
    return [tf.range(5), tf.range(3, 18, 3), tf.range(10, 2, -3), tf.range(0.5, 2.0, 0.25),
            tf.range(4, dtype=tf.float64), tf.range(tf.constant(2, tf.int64), 7),
            tf.linspace(-1.0, 2.0, 7), tf.lin_space(tf.constant(0.0, tf.float64), 1.0, 4)], {}


def prog_range_bad_delta(tf):
    d = tf.placeholder(tf.int32, [])
    return tf.range(0, 5, d), {d: 0}


def prog_cumsum_variants_and_gradients(tf):
    x = tf.placeholder(tf.float32, [3, 4])
    ys = [tf.cumsum(x, 1), tf.cumsum(x, 0, exclusive=True), tf.cumsum(x, 1, reverse=True),
          tf.cumsum(x, -1, exclusive=True, reverse=True)]
    return [ys, [_grad(tf, y, [x], i) for i, y in enumerate(ys)]], {x: X34}


def prog_top_k_ties_and_gradient(tf):
    x = tf.placeholder(tf.float32, [2, 5])
    v, i = tf.nn.top_k(x, k=3)
    return [v, i, _grad(tf, v, [x])], {x: [[1.0, 3.0, 3.0, 2.0, 3.0], [0.0, -1.0, 4.0, 4.0, 2.0]]}


def prog_top_k_too_large(tf):
    return tf.nn.top_k(tf.constant(X34), k=5), {}


def prog_in_top_k(tf):
    p = tf.constant([[0.1, 0.5, 0.5, 0.2], [0.9, 0.1, 0.0, 0.0], [np.inf, 0.0, 1.0, 2.0],
                     [0.3, 0.3, 0.3, 0.3]])
    t = tf.constant([2, 1, 3, 0])
    return [tf.nn.in_top_k(p, t, 1), tf.nn.in_top_k(p, t, 2), tf.nn.in_top_k(p, t, 4)], {}




# -- nn, clipping and losses (group 2) -------------------------------------------------------------

LOGITS = RNG.standard_normal((4, 5)).astype(np.float32) * 2.0
LABELS = np.array([0, 4, 2, 2], np.int32)


def prog_sparse_softmax_xent_and_gradient(tf):
    z = tf.placeholder(tf.float32, [4, 5])
    y = tf.placeholder(tf.int32, [4])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)
    return [loss, _grad(tf, loss, [z])], {z: LOGITS, y: LABELS}


def prog_sparse_softmax_xent_bad_label(tf):
    z = tf.placeholder(tf.float32, [4, 5])
    y = tf.placeholder(tf.int64, [4])
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z), \
        {z: LOGITS, y: [0, 5, 1, 1]}


def prog_sparse_softmax_xent_rank_mismatch(tf):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.constant([[1]]), logits=tf.constant(LOGITS)), {}


def prog_sigmoid_xent_l2(tf):
    z = tf.placeholder(tf.float32, [4, 5])
    t = (LOGITS > 0).astype(np.float32) * 0.8
    y = tf.nn.sigmoid_cross_entropy_with_logits(labels=t, logits=z)
    l2 = tf.nn.l2_loss(z)
    n0 = tf.nn.l2_normalize(z, axis=0)
    n1 = tf.nn.l2_normalize(z, 1, epsilon=1e-3)
    return [y, l2, n0, n1, _grad(tf, y, [z]), tf.gradients(l2, z), _grad(tf, n0, [z], 1),
            _grad(tf, n1, [z], 2)], {z: LOGITS}


def prog_moments_batch_norm(tf):
    x = tf.placeholder(tf.float32, [4, 5])
    mean, var = tf.nn.moments(x, axes=[0])
    m2, v2 = tf.nn.moments(x, [0, 1], keep_dims=True)
    gamma = tf.constant(np.linspace(0.5, 1.5, 5).astype(np.float32))
    beta = tf.constant(np.linspace(-1, 1, 5).astype(np.float32))
    y = tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3)
    y2 = tf.nn.batch_normalization(x, m2, v2, None, None, 1e-2)
    return [mean, var, m2, v2, y, y2, _grad(tf, y, [x, gamma, beta]),
            _grad(tf, y2, [x], 1)], {x: LOGITS}


def prog_bias_add(tf):
    x = tf.placeholder(tf.float32, [2, 3, 5])
    b = tf.constant(np.arange(5, dtype=np.float32))
    c = tf.constant(np.arange(3, dtype=np.float32))
    y = tf.nn.bias_add(x, b)
    return [y, tf.nn.bias_add(x, c, data_format="NCHW"), _grad(tf, y, [x, b])], {x: X235}


def prog_bias_add_wrong_size(tf):
    return tf.nn.bias_add(tf.constant(X34), tf.constant([1.0, 2.0])), {}


def prog_embedding_lookup(tf):
    table = tf.constant(LOGITS)
    shards = [tf.constant(LOGITS[:2]), tf.constant(LOGITS[2:3]), tf.constant(LOGITS[3:])]
    ids = tf.constant([[3, 0], [1, 1]])
    e = tf.nn.embedding_lookup(table, ids)
    return [e, tf.nn.embedding_lookup(shards, [0, 1, 2, 3], partition_strategy="mod"),
            tf.nn.embedding_lookup(shards, [0, 1, 2, 3], partition_strategy="div"),
            tf.nn.embedding_lookup(table, [1, 2], max_norm=1.0),
            tf.convert_to_tensor(tf.gradients(tf.reduce_sum(e * 3.0), table)[0])], {}


def prog_clip_ops(tf):
    x = tf.placeholder(tf.float32, [4, 5])
    v = tf.clip_by_value(x, -1.0, 1.0)
    n = tf.clip_by_norm(x, 2.0)
    n1 = tf.clip_by_norm(x, 1.5, axes=[1])
    zero = tf.clip_by_norm(tf.zeros([3]), 1.0)
    ties = tf.clip_by_value(tf.constant([-1.0, 0.0, 1.0, 2.0]), -1.0, 1.0)
    gn = tf.global_norm([x, None, x[0]])
    (c0, c1, c2), norm = tf.clip_by_global_norm([x, None, x * 2.0], 3.0)
    (k0,), _ = tf.clip_by_global_norm([x], 1e3)
    return [v, n, n1, zero, ties, gn, c0, c2, norm, k0, _grad(tf, v, [x]), _grad(tf, n, [x], 1),
            _grad(tf, n1, [x], 2),
            _grad(tf, c0, [x], 3), tf.gradients(gn, x)], {x: LOGITS}


def prog_losses(tf):
    z = tf.placeholder(tf.float32, [4, 5])
    y = tf.constant(LABELS)
    onehot = tf.one_hot(y, 5)
    w = tf.constant([1.0, 0.0, 2.0, 0.5])
    ls = [tf.losses.sparse_softmax_cross_entropy(y, z),
          tf.losses.sparse_softmax_cross_entropy(tf.reshape(y, [4, 1]), z, weights=w),
          tf.losses.softmax_cross_entropy(onehot, z),
          tf.losses.softmax_cross_entropy(onehot, z, weights=w, label_smoothing=0.1),
          tf.losses.mean_squared_error(onehot, z),
          tf.losses.mean_squared_error(onehot, z, weights=tf.reshape(w, [4, 1])),
          tf.losses.mean_squared_error(onehot, z, weights=0.0),
          tf.losses.mean_squared_error(onehot, z, reduction=tf.losses.Reduction.SUM),
          tf.losses.mean_squared_error(onehot, z, reduction=tf.losses.Reduction.MEAN,
                                       weights=tf.reshape(w, [4, 1])),
          tf.losses.mean_squared_error(onehot, z, reduction=tf.losses.Reduction.NONE),
          tf.losses.softmax_cross_entropy(onehot, z,
                                          reduction=tf.losses.Reduction.SUM_OVER_BATCH_SIZE)]
    grads = [tf.gradients(loss, z) for loss in ls if loss.shape.ndims == 0]
    return [ls, grads], {z: LOGITS}


# -- convolution and pooling (group 3) -------------------------------------------------------------

IMG = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32)
FILT = RNG.standard_normal((3, 2, 3, 4)).astype(np.float32) * 0.5
DW = RNG.standard_normal((3, 3, 3, 2)).astype(np.float32) * 0.5


def prog_conv2d_variants_and_gradients(tf):
    x = tf.placeholder(tf.float32, [2, 7, 6, 3])
    w = tf.placeholder(tf.float32, [3, 2, 3, 4])
    ys = [tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME"),
          tf.nn.conv2d(x, w, [1, 2, 2, 1], "SAME"),
          tf.nn.conv2d(x, w, [1, 2, 3, 1], "VALID"),
          tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", dilations=[1, 2, 2, 1]),
          tf.nn.conv2d(x, w, [1, 1, 1, 1], "VALID", dilations=[1, 2, 1, 1])]
    return [ys, [_grad(tf, y, [x, w], i) for i, y in enumerate(ys)]], {x: IMG, w: FILT}


def prog_conv2d_backprop_ops(tf):
    w = tf.constant(FILT)
    dy = tf.constant(RNG.standard_normal((2, 4, 3, 4)).astype(np.float32))
    gi = tf.nn.conv2d_backprop_input([2, 7, 6, 3], w, dy, [1, 2, 2, 1], "SAME")
    gf = tf.nn.conv2d_backprop_filter(tf.constant(IMG), [3, 2, 3, 4], dy, [1, 2, 2, 1], "SAME")
    return [gi, gf], {}


def prog_conv2d_depth_mismatch(tf):
    return tf.nn.conv2d(tf.constant(IMG), tf.constant(FILT[:, :, :2]), [1, 1, 1, 1], "SAME"), {}


def prog_conv2d_valid_too_small(tf):
    return tf.nn.conv2d(tf.constant(IMG), tf.zeros([8, 1, 3, 1]), [1, 1, 1, 1], "VALID"), {}


def prog_depthwise_and_gradients(tf):
    x = tf.placeholder(tf.float32, [2, 7, 6, 3])
    w = tf.placeholder(tf.float32, [3, 3, 3, 2])
    ys = [tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME"),
          tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "VALID"),
          tf.nn.depthwise_conv2d(x, w, [1, 1, 1, 1], "SAME", rate=[2, 2])]
    return [ys, [_grad(tf, y, [x, w], i) for i, y in enumerate(ys)]], {x: IMG, w: DW}


def prog_pools_and_gradients(tf):
    x = tf.placeholder(tf.float32, [2, 7, 6, 3])
    ys = [tf.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
          tf.nn.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),
          tf.nn.max_pool(x, [1, 3, 2, 1], [1, 1, 2, 1], "SAME"),
          tf.nn.avg_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
          tf.nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"),
          tf.nn.avg_pool(x, [1, 3, 2, 1], [1, 1, 2, 1], "SAME")]
    return [ys, [_grad(tf, y, [x], i) for i, y in enumerate(ys)]], {x: IMG}


def prog_max_pool_ties(tf):
    x = tf.placeholder(tf.float32, [1, 4, 4, 1])
    y = tf.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    values = np.array([[1, 1, 0, 2], [1, 1, 2, 2], [0, 3, 3, 0], [3, 3, 0, 0]], np.float32)
    return [y, tf.gradients(y, x)], {x: values.reshape(1, 4, 4, 1)}


def prog_convnet_step(tf):
    """The digits convnet's shapes: conv 3x3x1x16, pool, conv 3x3x16x32, pool, dense."""
    rng = np.random.default_rng(7)
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    y = tf.placeholder(tf.int32, [None])
    w1 = tf.constant(rng.standard_normal((3, 3, 1, 16)).astype(np.float32) * 0.3)
    w2 = tf.constant(rng.standard_normal((3, 3, 16, 32)).astype(np.float32) * 0.1)
    w3 = tf.constant(rng.standard_normal((2 * 2 * 32, 10)).astype(np.float32) * 0.1)
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(x, w1, [1, 1, 1, 1], "SAME")),
                       [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    h = tf.nn.max_pool(tf.nn.relu(tf.nn.conv2d(h, w2, [1, 1, 1, 1], "SAME")),
                       [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    logits = tf.matmul(tf.reshape(h, [-1, 2 * 2 * 32]), w3)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    return [loss, tf.gradients(loss, [w1, w2, w3])], \
        {x: rng.uniform(0, 1, (16, 8, 8, 1)).astype(np.float32), y: rng.integers(0, 10, 16)}


PROGRAMS = {name: fn for name, fn in list(globals().items())
            if name.startswith("prog_") and callable(fn)}
