"""Whole graphs on /gpu:0 (under the simulator) against the same graphs on the CPU:
control flow, mixed placement, training, fetch types, device creation and errors."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import dataflow as df
from dataflow.kernels.cuda.runtime import is_device_value

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
W = np.random.default_rng(2).standard_normal((6, 6)).astype(np.float32) * 0.3


def _loop_and_cond_graph(gpu, cpu):
    """A while loop whose body runs on ``gpu`` and whose bookkeeping runs on ``cpu``,
    followed by a cond whose branches sit on different devices."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [4, 6], name="x")
        w = df.constant(W)

        def body(i, h):
            with df.device(gpu):
                h = df.tanh(df.matmul(h, w) + 0.5)
            with df.device(cpu):
                i = i + 1
            return i, h

        _, h = df.while_loop(lambda i, h: i < 3, body, [df.constant(0), x])
        with df.device(gpu):
            total = df.reduce_sum(h)
        with df.device(cpu):
            r = df.cond(total > 0.0, lambda: df.reduce_max(h, axis=1) * 2.0,
                        lambda: df.nn.softmax(h)[0] - 1.0)
        with df.device(gpu):
            s = df.reduce_mean(h, axis=0)
    return g, x, [h, total, r, s]


@pytest.mark.parametrize("placement", [("/gpu:0", "/cpu:0"), ("/gpu:0", "/gpu:0"),
                                       ("/cpu:0", "/gpu:0")])
def test_while_loop_and_cond_match_the_cpu_run(placement):
    xv = np.random.standard_normal((4, 6)).astype(np.float32)
    results = []
    for gpu, cpu in (placement, ("/cpu:0", "/cpu:0")):
        g, x, fetches = _loop_and_cond_graph(gpu, cpu)
        with df.Session(graph=g) as sess:
            for sign in (1.0, -1.0):  # both branches of the cond
                results.append(sess.run(fetches, {x: xv * sign}))
    got, want = results[:2], results[2:]
    for run_got, run_want in zip(got, want):
        for a, b in zip(run_got, run_want):
            assert type(a) is type(b)  # NumPy arrays and NumPy scalars, as on the CPU
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _mlp(device, sizes=(5, 7, 3)):
    """The digits example's model at toy size (matmul, bias add, sigmoid, softmax
    cross-entropy, mean, Adam): the simulator runs every CUDA thread in Python."""
    rng = np.random.default_rng(0)
    g = df.Graph()
    with g.as_default(), df.device(device):
        x = df.placeholder(df.float32, [None, sizes[0]])
        labels = df.placeholder(df.float32, [None, sizes[-1]])
        h = x
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            w = df.Variable(rng.uniform(-1, 1, (n_in, n_out)).astype(np.float32))
            b = df.Variable(np.zeros(n_out, np.float32))
            h = df.matmul(h, w) + b
            if i < len(sizes) - 2:
                h = df.sigmoid(h)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=labels, logits=h))
        train = df.train.AdamOptimizer(0.05).minimize(loss)
        init = df.global_variables_initializer()
    return g, x, labels, loss, train, init


def test_mlp_training_on_the_gpu_matches_the_cpu():
    xv = np.random.random((6, 5)).astype(np.float32)
    yv = np.eye(3, dtype=np.float32)[np.random.randint(0, 3, 6)]
    runs = []
    for device in ("/gpu:0", "/cpu:0"):
        g, x, labels, loss, train, init = _mlp(device)
        with df.Session(graph=g) as sess:
            sess.run(init)
            losses = [sess.run([loss, train], {x: xv, labels: yv})[0] for _ in range(3)]
            with g.as_default():
                weights = sess.run(df.trainable_variables())
        runs.append((losses, weights))
    (gpu_loss, gpu_w), (cpu_loss, cpu_w) = runs
    assert all(type(v) is np.float32 for v in gpu_loss)
    np.testing.assert_allclose(gpu_loss, cpu_loss, rtol=1e-5)
    assert gpu_loss[-1] < gpu_loss[0]
    for a, b in zip(gpu_w, cpu_w):
        assert type(a) is np.ndarray
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_gradient_through_a_gpu_while_loop_with_swap_memory(graph):
    w = df.Variable(np.full((3, 3), 0.2, np.float32))
    x = df.constant(np.random.standard_normal((2, 3)).astype(np.float32))

    def build(device):
        with df.device(device):
            _, h = df.while_loop(lambda i, h: i < 3,
                                 lambda i, h: (i + 1, df.tanh(df.matmul(h, w.read_value()))),
                                 [0, x], swap_memory=True)
            return df.gradients(df.reduce_sum(h), [w])[0]
    g_gpu, g_cpu = build("/gpu:0"), build("/cpu:0")
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        got, want = sess.run([g_gpu, g_cpu])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_values_stay_on_the_device_between_gpu_ops(graph):
    x = df.placeholder(df.float32, [3, 4])
    with df.device("/gpu:0"):
        y = df.exp(x) * 2.0
        z = df.reduce_sum(y, axis=1)
    # Unfused, so Exp and Mul are nodes of their own.
    with df.Session(config=df.ConfigProto(fuse_elementwise=False)) as sess:
        plan = sess._plans.get(sess.graph, [z], [], [x])
        outs = {}
        for gid, node in enumerate(plan.nodes):
            fn = node[4]
            if fn is not None:
                outs[plan.ops[gid].type] = fn
        xv = np.random.random((3, 4)).astype(np.float32)
        exp_out = outs["Exp"](xv)
        assert is_device_value(exp_out)          # a host input is copied in once...
        assert is_device_value(outs["Mul"](exp_out, np.float32(2.0)))  # ...and stays there
        np.testing.assert_allclose(sess.run(z, {x: xv}), (np.exp(xv) * 2).sum(1), rtol=1e-5)


def test_cpu_kernels_get_host_copies_only_where_a_gpu_value_may_arrive(graph):
    x = df.placeholder(df.float32, [3])
    with df.device("/gpu:0"):
        on_gpu = df.square(x)
    with df.device("/cpu:0"):
        from_gpu = df.gather(on_gpu, [2, 0])      # reads a GPU value: wrapped
        host_only = df.gather(x, [1])             # reads a feed: the kernel as registered
    with df.Session() as sess:
        plan = sess._plans.get(sess.graph, [from_gpu, host_only], [], [x])
        # Two devices: one plan per partition (a Recv brings the GPU value over).
        fns = {p.ops[g].name: n.fn for p in plan.plans.values()
               for g, n in enumerate(p.nodes) if n.fn is not None}
        got = sess.run([from_gpu, host_only], {x: np.arange(3, dtype=np.float32)})
    assert hasattr(fns[from_gpu.op.name], "__wrapped__")
    assert not hasattr(fns[host_only.op.name], "__wrapped__")
    np.testing.assert_array_equal(got[0], [4.0, 0.0])
    np.testing.assert_array_equal(got[1], [1.0])


def test_device_count_limits_the_gpus(graph):
    with df.device("/gpu:0"):
        y = df.constant(1.0) + df.placeholder(df.float32, [])
    with df.Session(config=df.ConfigProto(device_count={"GPU": 0})) as sess:
        with pytest.raises(df.errors.InvalidArgumentError, match="GPU:0"):
            sess.run(y, {y.op.inputs[1]: 1.0})
    with df.Session() as sess:
        assert "/device:GPU:0" in sess.list_devices() or sess.run(
            y, {y.op.inputs[1]: 1.0}) == 2.0
        assert "/device:GPU:0" in sess.list_devices()
    with df.device("/gpu:1"):
        z = df.constant(1.0) * 2.0
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError, match="GPU:1"):
        sess.run(z)


def test_no_gpu_error_without_the_simulator():
    code = (
        "import dataflow as df, sys\n"
        "with df.device('/gpu:0'):\n"
        "    y = df.add(df.constant(1.0), 2.0, name='on_gpu')\n"
        "try:\n"
        "    df.Session().run(y)\n"
        "except df.errors.InvalidArgumentError as e:\n"
        "    print(type(e).__name__, e)\n"
        "cfg = df.ConfigProto(allow_soft_placement=True)\n"
        "print('soft', df.Session(config=cfg).run(y))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    # Hide any real GPU too: the point is the message on a machine without one.
    env["CUDA_VISIBLE_DEVICES"] = ""
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "InvalidArgumentError" in out.stdout
    assert "on_gpu (op type AddV2)" in out.stdout
    assert "NUMBA_ENABLE_CUDASIM=1" in out.stdout
    assert "soft 3.0" in out.stdout


def test_two_threads_run_gpu_graphs_at_once():
    # Shared-memory kernels from two host threads: the simulator needs the launch lock.
    def graph_and_feed(seed):
        g = df.Graph()
        with g.as_default():
            x = df.placeholder(df.float32, [8, 40])
            with df.device("/gpu:0"):
                y = df.reduce_sum(df.nn.softmax(x) * x, axis=1)
        return g, x, y, np.random.default_rng(seed).standard_normal((8, 40)).astype(np.float32)

    results, errors = {}, []

    def worker(seed):
        try:
            g, x, y, xv = graph_and_feed(seed)
            with df.Session(graph=g) as sess:
                results[seed] = [(sess.run(y, {x: xv}), xv) for _ in range(3)]
        except Exception as exc:  # reported below
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(s,)) for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for runs in results.values():
        for got, xv in runs:
            e = np.exp(xv - xv.max(1, keepdims=True))
            want = (e / e.sum(1, keepdims=True) * xv).sum(1)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_variables_on_the_gpu_keep_device_values_across_runs(graph):
    init = np.arange(6, dtype=np.float32).reshape(2, 3)
    delta = df.placeholder(df.float32, [2, 3])
    with df.device("/gpu:0"):
        v = df.Variable(init)
        add, sub = v.assign_add(delta), v.assign_sub(delta * 3.0)
        read = v.read_value() * 1.0
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        stored = sess._resources[v.handle.op.get_attr("shared_name")].value
        assert is_device_value(stored)            # the initial value was copied in once
        sess.run(add, {delta: np.ones((2, 3), np.float32)})
        sess.run(sub, {delta: np.full((2, 3), 0.5, np.float32)})
        got = sess.run(read)
    np.testing.assert_array_equal(got, init + 1.0 - 1.5)
    assert type(got) is np.ndarray and got.dtype == np.float32
