"""``df.train``: optimizers, the global step and checkpoints (``tf.compat.v1.train``).

Build a training op from a loss, then run it repeatedly in a Session::

    w = df.Variable(5.0)
    loss = df.square(w - 2.0)
    train_op = df.train.AdamOptimizer(0.1).minimize(loss)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())  # after minimize: covers the slots
        for _ in range(100):
            sess.run(train_op)
        df.train.Saver().save(sess, "/tmp/model.ckpt")   # see train/saver.py
"""
from .adam import AdamOptimizer  # noqa: F401
from .gradient_descent import GradientDescentOptimizer  # noqa: F401
from .momentum import MomentumOptimizer  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .saver import (CheckpointState, Saver, checkpoint_exists,  # noqa: F401
                    get_checkpoint_state, latest_checkpoint, update_checkpoint_state)
from .training_util import (  # noqa: F401
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)
