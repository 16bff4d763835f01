"""The convolution workloads of ``python -m benchmarks.compare`` compute what they claim:
dataflow's conv2d forward equals the hand-written NumPy one, its backward equals the
reference kernels' gradients, and the convnet step (examples/tf1/convnet.py) trains."""
from __future__ import annotations

import numpy as np

import dataflow as df
from benchmarks import compare, workloads


def test_conv_workloads_agree_with_numpy():
    fns = compare.ours_conv_workloads()
    np.testing.assert_allclose(fns["conv2d_fwd"](), workloads.numpy_conv2d_forward()(),
                               rtol=1e-4, atol=1e-4)
    reference = workloads.make_conv2d(df, lambda g: df.Session(
        graph=g, config=df.ConfigProto(use_compiled_kernels=False)), backward=True)()
    for got, want in zip(fns["conv2d_bwd"](), reference):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_convnet_step_trains_the_example_model():
    program = workloads.load_tf1_example("convnet")
    sessions = []

    def session(graph):
        sessions.append(df.Session(graph=graph))
        return sessions[-1]
    step = workloads.make_convnet_step(program, session, keep_prob=1.0)
    graph = sessions[0].graph
    with graph.as_default():
        kernel = [v for v in df.trainable_variables() if v.name == "conv1/weights:0"][0]
    before = sessions[0].run(kernel)
    step()
    after = sessions[0].run(kernel)
    assert after.shape == (3, 3, 1, 16) and not np.allclose(before, after)
    np.testing.assert_allclose(np.abs(after - before).max(), 1e-3, rtol=1e-2)  # Adam's lr
