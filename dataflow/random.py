"""``df.random``: random ops under ``tf.compat.v1.random``'s names.

>>> import dataflow as tf
>>> tf.random.set_random_seed(3)
>>> x = tf.random.normal([2, 2])
>>> idx = tf.random.categorical([[0.0, 1.0]], 4)
"""
from .framework.random_seed import set_random_seed  # noqa: F401
from .ops.random_ops import categorical, multinomial, random_shuffle as shuffle  # noqa: F401
from .ops.random_ops import random_normal as normal  # noqa: F401
from .ops.random_ops import random_uniform as uniform  # noqa: F401
from .ops.random_ops import truncated_normal  # noqa: F401
