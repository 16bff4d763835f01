"""Demo: a cond and a while loop built with dataflow's TF1 API and run in a Session.

    python examples/control_flow_demo.py
"""
import numpy as np

import dataflow as tf  # the TF1 graph API: `import dataflow as tf` works for supported ops


def main():
    # cond(x < y, x + z, y^2): the example of the control-flow design note.
    x = tf.placeholder(tf.float32, shape=[], name="x")
    y = tf.constant(3.0, name="y")
    z = tf.constant(10.0, name="z")
    r = tf.cond(x < y, lambda: tf.add(x, z), lambda: tf.square(y))

    # while_loop(i < 10, i + 1): the design note's loop.
    i = tf.while_loop(lambda i: i < 10, lambda i: tf.add(i, 1), [0])

    # A loop with two variables and a cond in its body: the Collatz sequence length.
    def collatz_body(n, steps):
        n = tf.cond(tf.equal(n % 2, 0), lambda: n // 2, lambda: 3 * n + 1)
        return n, steps + 1

    start = tf.placeholder(tf.int32, shape=[], name="start")
    _, steps = tf.while_loop(lambda n, s: n > 1, collatz_body, (start, 0))

    # Loops nest: sum over i < 4 of sum over j < i of j * w.
    w = tf.placeholder(tf.float32, shape=[], name="w")

    def outer(i, total):
        _, inner = tf.while_loop(lambda j, t: j < i,
                                 lambda j, t: (j + 1, t + tf.cast(j, tf.float32) * w),
                                 (0, total))
        return i + 1, inner

    _, nested = tf.while_loop(lambda i, t: i < 4, outer, (0, 0.0))

    with tf.Session() as sess:
        print("cond(1 < 3, 1 + 10, 3^2)       =", sess.run(r, {x: 1.0}))
        print("cond(5 < 3, 5 + 10, 3^2)       =", sess.run(r, {x: 5.0}))
        print("while i < 10: i += 1           =", sess.run(i))
        print("Collatz steps from 27          =", sess.run(steps, {start: 27}))
        print("nested loops, w = 0.5          =", sess.run(nested, {w: 0.5}))
        print("the same with numpy/python     =",
              sum(j * 0.5 for i_ in range(4) for j in range(i_)))
        v = tf.Variable(np.zeros(3, np.float32), name="v")
        loop = tf.while_loop(lambda k: k < 5, lambda k: _add_then(v, k), [0])
        sess.run(tf.global_variables_initializer())
        sess.run(loop)
        print("variable after 5 assign_adds   =", sess.run(v))


def _add_then(v, k):
    with tf.control_dependencies([v.assign_add(tf.ones([3]))]):
        return k + 1


if __name__ == "__main__":
    main()
