"""Record TF1's initializer statistics in ``init_stats.json`` (CI never runs this).

TF's random streams differ from dataflow's (see dataflow/kernels/numpy_cpu/random.py),
so the fixture holds what does not depend on the stream: for each initializer
configuration, the largest absolute value and the standard deviation of a large draw
(which pin the uniform limit and the normal stddev TF computes from scale, mode, fans
and distribution), and the orthogonality error of TF's orthogonal initializer.

    /work/tfvenv/bin/python tests/tf_reference/generate_init.py
"""
from __future__ import annotations

import json
import pathlib

import numpy as np

from generate import load_tensorflow

HERE = pathlib.Path(__file__).resolve().parent

# (name, constructor expression over `tf`, shape): the shapes are big enough for the
# statistics to be within 1 % of their limits.
CONFIGS = [
    ("glorot_uniform_2d", "tf.glorot_uniform_initializer()", [300, 500]),
    ("glorot_normal_2d", "tf.glorot_normal_initializer()", [300, 500]),
    ("glorot_uniform_conv", "tf.glorot_uniform_initializer()", [3, 3, 16, 32]),
    ("he_normal_conv", "tf.initializers.he_normal()", [5, 5, 8, 64]),
    ("he_uniform_2d", "tf.initializers.he_uniform()", [400, 300]),
    ("lecun_normal_2d", "tf.initializers.lecun_normal()", [400, 300]),
    ("vs_default", "tf.variance_scaling_initializer()", [400, 300]),
    ("vs_fan_out_uniform", "tf.variance_scaling_initializer(3.0, 'fan_out', 'uniform')",
     [200, 600]),
    ("vs_fan_avg_untruncated",
     "tf.variance_scaling_initializer(0.5, 'fan_avg', 'untruncated_normal')", [300, 400]),
    ("vs_normal_alias", "tf.variance_scaling_initializer(2.0, 'fan_in', 'normal')",
     [300, 400]),
    ("vs_1d", "tf.variance_scaling_initializer(1.0, 'fan_in', 'uniform')", [100000]),
    ("random_uniform", "tf.random_uniform_initializer(-0.3, 0.7)", [400, 300]),
    ("random_normal", "tf.random_normal_initializer(1.0, 0.5)", [400, 300]),
    ("truncated_normal", "tf.truncated_normal_initializer(0.0, 2.0)", [400, 300]),
]


def main():
    tf = load_tensorflow()
    out = {}
    for name, expr, shape in CONFIGS:
        with tf.Graph().as_default():
            tf.set_random_seed(1)
            init = eval(expr, {"tf": tf})  # noqa: S307 - fixed expressions above
            value = tf.Session().run(init(shape))
        out[name] = {"expr": expr, "shape": shape, "max_abs": float(np.abs(value).max()),
                     "std": float(value.std()), "mean": float(value.mean())}
    for shape in ([6, 4], [4, 6], [3, 3, 4, 8]):
        with tf.Graph().as_default():
            value = tf.Session().run(tf.orthogonal_initializer(gain=2.0)(shape))
        flat = value.reshape(-1, shape[-1])
        gram = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
        out[f"orthogonal_{'x'.join(map(str, shape))}"] = {
            "shape": shape, "gram_diag": float(np.diag(gram).mean())}
    (HERE / "init_stats.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
