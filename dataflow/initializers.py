"""``df.initializers``: ``tf.compat.v1.initializers`` (initializer classes by their short
names, and the variable-initializer ops).

>>> import dataflow as tf
>>> w = tf.get_variable("w", [3, 4], initializer=tf.initializers.he_normal())
>>> init = tf.initializers.global_variables()
"""
from .ops.init_ops import (Constant as constant, GlorotNormal as glorot_normal,  # noqa: F401
                           GlorotUniform as glorot_uniform, Ones as ones,
                           Orthogonal as orthogonal, RandomNormal as random_normal,
                           RandomUniform as random_uniform, TruncatedNormal as truncated_normal,
                           VarianceScaling as variance_scaling, Zeros as zeros, he_normal,
                           he_uniform, lecun_normal, lecun_uniform)
from .ops.state_ops import global_variables_initializer as global_variables  # noqa: F401
from .ops.state_ops import variables_initializer as variables  # noqa: F401
from .ops.variable_scope import local_variables_initializer as local_variables  # noqa: F401,E501
