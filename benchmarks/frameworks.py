"""The compare workloads written for the frameworks a user would pick instead.

Each ``<framework>_workloads()`` returns ``{workload name: zero-argument callable}``
for the frameworks that import here, or ``{}`` when the framework is missing; the
callables compute the same thing as the dataflow versions in :mod:`benchmarks.compare`
(same shapes, dtypes and data), each after its own warm-up/compilation.

    pip install ".[compare]"     # TensorFlow (CPU) and JAX; PyTorch is installed apart
"""
from __future__ import annotations

import os

import numpy as np

from . import workloads

CHAIN_N = 10_000_000
MATMUL_N = 2048


def chain_inputs(n=CHAIN_N, seed=0):
    """The three float32 inputs of ``tanh(a*b + c) * 0.5 + a``."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(n, dtype=np.float32) for _ in range(3))


def matmul_inputs(n=MATMUL_N, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))


def mlp_inputs(seed=0):
    """Data, labels and initial weights of the digits-shaped MLP (see workloads)."""
    return workloads.mlp_data(seed)


def rnn_inputs(batch=32, hidden=256, seed=0):
    return workloads.rnn_data(batch, hidden, seed)


def threads():
    """The thread cap of ``compare --threads N`` (``COMPARE_THREADS``), or None: all cores."""
    value = os.environ.get("COMPARE_THREADS")
    return int(value) if value else None


# -- TensorFlow 1.x graph mode (control flow v1), as a TF1 user would write it ----------------
def _tf_session(v1, graph):
    n = threads()
    config = v1.ConfigProto(intra_op_parallelism_threads=n,
                            inter_op_parallelism_threads=n) if n else None
    return v1.Session(graph=graph, config=config)


def tensorflow_workloads():
    try:
        import tensorflow as tf
    except ImportError:
        return {}
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    v1.disable_control_flow_v2()
    out = {}

    g = tf.Graph()
    with g.as_default():
        a, b, c = (v1.placeholder(tf.float32, [CHAIN_N]) for _ in range(3))
        chain = tf.tanh(a * b + c) * 0.5 + a
    sess = _tf_session(v1, g)
    feed = dict(zip((a, b, c), chain_inputs()))
    out["chain"] = lambda: sess.run(chain, feed)

    g = tf.Graph()
    with g.as_default():
        ma, mb = (v1.placeholder(tf.float32, [MATMUL_N, MATMUL_N]) for _ in range(2))
        prod = tf.matmul(ma, mb)
    msess = _tf_session(v1, g)
    mfeed = dict(zip((ma, mb), matmul_inputs()))
    out["matmul"] = lambda: msess.run(prod, mfeed)

    data, labels, init = mlp_inputs()
    g = tf.Graph()
    with g.as_default():
        x = v1.placeholder(tf.float32, [None, 64])
        y = v1.placeholder(tf.float32, [None, 10])
        h = x
        for k, w0 in enumerate(init):
            w = v1.Variable(w0)
            bias = v1.Variable(np.zeros(w0.shape[1], np.float32))
            h = tf.matmul(h, w) + bias
            if k < len(init) - 1:
                h = tf.sigmoid(h)
        loss = tf.reduce_mean(v1.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=h))
        step = v1.train.AdamOptimizer(0.001).minimize(loss)
        init_op = v1.global_variables_initializer()
    tsess = _tf_session(v1, g)
    tsess.run(init_op)
    out["mlp_adam_step"] = lambda: tsess.run(step, {x: data, y: labels})

    w, xin, h0 = rnn_inputs()
    g = tf.Graph()
    with g.as_default():
        wt = tf.constant(w)
        xt = v1.placeholder(tf.float32, list(xin.shape))
        _, hT = v1.while_loop(lambda i, h: i < 1000,
                              lambda i, h: (i + 1, tf.tanh(tf.matmul(h, wt) + xt)),
                              (0, tf.constant(h0)))
    rsess = _tf_session(v1, g)
    out["rnn_loop"] = lambda: rsess.run(hT, {xt: xin})

    g = tf.Graph()
    with g.as_default():
        wp = v1.placeholder(tf.float32, list(w.shape))
        xg = v1.placeholder(tf.float32, list(xin.shape))
        _, hg = v1.while_loop(lambda i, h: i < 1000,
                              lambda i, h: (i + 1, tf.tanh(tf.matmul(h, wp) + xg)),
                              (0, tf.constant(h0)))
        (grad_w,) = v1.gradients(tf.reduce_sum(hg), [wp])
    gsess = _tf_session(v1, g)
    out["rnn_grad"] = lambda: gsess.run(grad_w, {wp: w, xg: xin})

    def session(graph):
        return _tf_session(v1, graph)
    program = workloads.load_tf1_example("convnet", "import tensorflow.compat.v1 as tf")
    out["convnet_step"] = workloads.make_convnet_step(program, session)
    out["conv2d_fwd"] = workloads.make_conv2d(v1, session)
    out["conv2d_bwd"] = workloads.make_conv2d(v1, session, backward=True)
    return out


# -- JAX: jit-compiled functions, results blocked on ----------------------------------------
def jax_workloads():
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return {}
    out = {}
    a, b, c = (jnp.asarray(v) for v in chain_inputs())
    chain = jax.jit(lambda a, b, c: jnp.tanh(a * b + c) * 0.5 + a)
    out["chain"] = lambda: chain(a, b, c).block_until_ready()

    ma, mb = (jnp.asarray(v) for v in matmul_inputs())
    mm = jax.jit(jnp.matmul)
    out["matmul"] = lambda: mm(ma, mb).block_until_ready()

    w, xin, h0 = (jnp.asarray(v) for v in rnn_inputs())

    @jax.jit
    def rnn(h):
        return jax.lax.fori_loop(0, 1000, lambda i, h: jnp.tanh(h @ w + xin), h)
    out["rnn_loop"] = lambda: rnn(h0).block_until_ready()

    @jax.jit
    def rnn_grad(wv):
        def loss(wv):
            return jnp.sum(jax.lax.fori_loop(0, 1000, lambda i, h: jnp.tanh(h @ wv + xin), h0))
        return jax.grad(loss)(wv)
    out["rnn_grad"] = lambda: rnn_grad(w).block_until_ready()
    out["mlp_adam_step"] = _jax_mlp_step(jax, jnp)
    return out


def _jax_mlp_step(jax, jnp):
    data, labels, init = mlp_inputs()
    params = [jnp.asarray(w) for w in init] + [jnp.zeros(w.shape[1], jnp.float32) for w in init]
    x, y = jnp.asarray(data), jnp.asarray(labels)
    nlayers = len(init)

    def loss_fn(ps):
        h = x
        for k in range(nlayers):
            h = h @ ps[k] + ps[nlayers + k]
            if k < nlayers - 1:
                h = jax.nn.sigmoid(h)
        return jnp.mean(-jnp.sum(y * jax.nn.log_softmax(h), axis=-1))

    @jax.jit
    def step(ps, ms, vs, t):
        gs = jax.grad(loss_fn)(ps)
        lr_t = 0.001 * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        ms = [0.9 * m + 0.1 * g for m, g in zip(ms, gs)]
        vs = [0.999 * v + 0.001 * g * g for v, g in zip(vs, gs)]
        ps = [p - lr_t * m / (jnp.sqrt(v) + 1e-8) for p, m, v in zip(ps, ms, vs)]
        return ps, ms, vs

    state = {"p": params, "m": [jnp.zeros_like(p) for p in params],
             "v": [jnp.zeros_like(p) for p in params], "t": 0}

    def run():
        state["t"] += 1
        state["p"], state["m"], state["v"] = step(state["p"], state["m"], state["v"],
                                                  float(state["t"]))
        state["p"][0].block_until_ready()
    return run


# -- PyTorch eager ------------------------------------------------------------------------
def torch_workloads():
    try:
        import torch
    except ImportError:
        return {}
    out = {}
    if threads():
        torch.set_num_threads(threads())
    torch.set_grad_enabled(False)
    a, b, c = (torch.from_numpy(v) for v in chain_inputs())
    out["chain"] = lambda: torch.tanh(a * b + c) * 0.5 + a
    ma, mb = (torch.from_numpy(v) for v in matmul_inputs())
    out["matmul"] = lambda: ma @ mb
    w, xin, h0 = (torch.from_numpy(v) for v in rnn_inputs())

    def rnn():
        h = h0
        for _ in range(1000):
            h = torch.tanh(h @ w + xin)
        return h
    out["rnn_loop"] = rnn

    def rnn_grad():
        with torch.enable_grad():
            wg = w.clone().requires_grad_(True)
            h = h0
            for _ in range(1000):
                h = torch.tanh(h @ wg + xin)
            h.sum().backward()
        return wg.grad
    out["rnn_grad"] = rnn_grad
    out["mlp_adam_step"] = _torch_mlp_step(torch)
    out.update(_torch_conv(torch))
    return out


def _torch_conv(torch):
    """conv2d forward/backward and the convnet's Adam step, in PyTorch's NCHW layout (the
    data are transposed once, outside the timing)."""
    import torch.nn.functional as F
    xn, wn, dyn = workloads.conv_data()
    x, w, dy = (torch.from_numpy(np.ascontiguousarray(a)) for a in (
        xn.transpose(0, 3, 1, 2), wn.transpose(3, 2, 0, 1), dyn.transpose(0, 3, 1, 2)))
    out = {"conv2d_fwd": lambda: F.conv2d(x, w, padding=1)}

    def conv_bwd():
        with torch.enable_grad():
            xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
            F.conv2d(xg, wg, padding=1).backward(dy)
        return xg.grad, wg.grad
    out["conv2d_bwd"] = conv_bwd

    data, labels = workloads.convnet_batch()
    images = torch.from_numpy(data.reshape(-1, 1, 8, 8))
    target = torch.from_numpy(labels)
    rng = np.random.default_rng(0)
    shapes = [(16, 1, 3, 3), (16,), (32, 16, 3, 3), (32,), (128, 128), (128,), (10, 128),
              (10,)]
    params = [torch.tensor((rng.standard_normal(s) * 0.1).astype(np.float32),
                           requires_grad=True) for s in shapes]
    opt = torch.optim.Adam(params, lr=1e-3)

    def convnet_step():
        w1, b1, w2, b2, w3, b3, w4, b4 = params
        with torch.enable_grad():
            h = F.max_pool2d(F.relu(F.conv2d(images, w1, b1, padding=1)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)
            h = F.dropout(F.relu(F.linear(h.reshape(-1, 128), w3, b3)), p=0.25)
            loss = F.cross_entropy(F.linear(h, w4, b4), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
    out["convnet_step"] = convnet_step
    return out


def _torch_mlp_step(torch):
    data, labels, init = mlp_inputs()
    x, y = torch.from_numpy(data), torch.from_numpy(labels)
    ws = [torch.tensor(w, requires_grad=True) for w in init]
    bs = [torch.zeros(w.shape[1], requires_grad=True) for w in init]
    opt = torch.optim.Adam(ws + bs, lr=0.001)

    def run():
        with torch.enable_grad():
            h = x
            for k, (w, b) in enumerate(zip(ws, bs)):
                h = h @ w + b
                if k < len(ws) - 1:
                    h = torch.sigmoid(h)
            loss = torch.mean(-torch.sum(y * torch.log_softmax(h, dim=-1), dim=-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return run


FRAMEWORKS = {"TF1": tensorflow_workloads, "JAX": jax_workloads, "PyTorch": torch_workloads}

__all__ = ["FRAMEWORKS", "chain_inputs", "matmul_inputs", "mlp_inputs", "rnn_inputs"]
