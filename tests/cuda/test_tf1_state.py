"""TF1 variable helpers and random ops placed on the GPU (simulator)."""
import numpy as np

import dataflow as df


def test_assign_without_shape_validation_on_the_gpu(graph):
    with df.device("/gpu:0"):
        v = df.Variable(np.zeros((2, 2), np.float32), name="v")
        grow = df.assign(v, np.arange(3, dtype=np.float32), validate_shape=False)
        same = df.assign(v, np.ones((2, 2), np.float32))
    with df.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(grow), [0, 1, 2])
        np.testing.assert_array_equal(sess.run(v.read_value() * 1.0), [0, 1, 2])
        np.testing.assert_array_equal(sess.run(same), np.ones((2, 2)))


def test_random_ops_on_the_gpu_draw_the_cpu_streams(graph):
    def build(device):
        with df.Graph().as_default():
            df.set_random_seed(5)
            with df.device(device):
                u = df.random_uniform([5]) * 2.0
                d = df.nn.dropout(df.ones([8]), rate=0.5)
            with df.Session() as sess:
                return [sess.run([u, d]) for _ in range(2)]
    for (gu, gd), (cu, cd) in zip(build("/gpu:0"), build("/cpu:0")):
        np.testing.assert_allclose(gu, cu, rtol=1e-6)
        np.testing.assert_array_equal(gd, cd)
