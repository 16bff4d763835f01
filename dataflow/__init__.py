"""dataflow: a TensorFlow-1.x-style dataflow runtime with real control flow.

Build a graph with TF1 names, then run it in a Session::

    import dataflow as df

    x = df.placeholder(df.float32, shape=[])
    i, acc = df.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * x), (0, 1.0))
    with df.Session() as sess:
        print(sess.run(acc, feed_dict={x: 2.0}))   # 32.0

A TF1 graph program that uses the supported ops runs with ``import dataflow as tf``.
"""
from . import dtypes, errors  # noqa: F401
from .dtypes import (DType, as_dtype, bool, float16, float32, float64, int8,  # noqa: F401,A004
                     int16, int32, int64, resource, string, uint8)
from .framework.convert import constant, convert_to_tensor  # noqa: F401
from .framework.graph import (Graph, Operation, Tensor, control_dependencies,  # noqa: F401
                              device, get_default_graph, name_scope, reset_default_graph)
from .framework.tensor_shape import TensorShape  # noqa: F401
from .framework.indexed_slices import IndexedSlices, IndexedSlicesValue  # noqa: F401
from . import ops  # noqa: F401  (registers op definitions and Tensor operators)
from .ops.array_ops import (concat, expand_dims, fill, gather, identity, one_hot,  # noqa: F401
                            ones, ones_like, placeholder, placeholder_with_default, rank,
                            reshape, shape, size, squeeze, stack, stop_gradient, tile,
                            transpose, where, where_v2, zeros, zeros_like)
from .ops.extra_array_ops import (argmax, argmin, boolean_mask, cumsum, gather_nd,  # noqa: F401
                                  lin_space, linspace, pad, range, reverse, reverse_v2,
                                  scatter_nd, slice, split, unstack)
from .ops.nn_extra_ops import (clip_by_global_norm, clip_by_norm, clip_by_value,  # noqa: F401
                               global_norm)
from .ops.control_flow_ops import control_trigger, group, no_op  # noqa: F401
from .ops.control_flow_ops import tuple_ as tuple  # noqa: F401,A001
from .ops.logging_ops import Assert, Print  # noqa: F401
from .ops.logging_ops import print_ as print  # noqa: F401,A001
from .ops.math_ops import (abs, add, add_n, cast, ceil, cos, divide, equal, exp,  # noqa: F401,A004
                           floor, floordiv, floormod, greater, greater_equal, less,
                           less_equal, log, log1p, logical_and, logical_not, logical_or,
                           matmul, maximum, minimum, multiply, negative, not_equal, pow,
                           realdiv, reciprocal, reduce_all, reduce_any, reduce_max,
                           reduce_mean, reduce_min, reduce_prod, reduce_sum, round, rsqrt,
                           sigmoid, sign, sin, sqrt, square, squared_difference, subtract,
                           tanh, truediv)
from .ops.tensor_array_ops import TensorArray  # noqa: F401
from .ops.state_ops import (Variable, global_variables, global_variables_initializer,  # noqa: F401
                            initialize_all_variables, trainable_variables,
                            variables_initializer)
from .control_flow import case, cond, while_loop  # noqa: F401
from .framework.random_seed import set_random_seed  # noqa: F401
from .ops.random_ops import (multinomial, random_normal, random_shuffle,  # noqa: F401
                             random_uniform, truncated_normal)
from . import random  # noqa: F401
from .ops.init_ops import (constant_initializer, glorot_normal_initializer,  # noqa: F401
                           glorot_uniform_initializer, ones_initializer,
                           orthogonal_initializer, random_normal_initializer,
                           random_uniform_initializer, truncated_normal_initializer,
                           variance_scaling_initializer, zeros_initializer, qr)
from .ops.variable_scope import (AUTO_REUSE, GraphKeys, VariableScope,  # noqa: F401
                                 add_to_collection, add_to_collections, assign, assign_add,
                                 assign_sub, get_collection, get_collection_ref,
                                 get_local_variable, get_variable, get_variable_scope,
                                 is_variable_initialized, local_variables,
                                 local_variables_initializer, model_variables,
                                 report_uninitialized_variables, variable_op_scope,
                                 variable_scope)
from .ops.variable_scope import local_variables_initializer as initialize_local_variables  # noqa: F401,E501
from . import initializers  # noqa: F401
from .control_flow import foldl, foldr, map_fn, scan  # noqa: F401
from .framework.eager import (EagerTensor, eager_mode, enable_eager_execution,  # noqa: F401
                              executing_eagerly)
from .runtime import eager as _eager_runtime  # noqa: F401,E402  (installs eager kernels)
from .runtime.session import (ConfigProto, InteractiveSession, RunMetadata,  # noqa: F401
                              RunOptions, Session, get_default_session)
from . import nn  # noqa: F401
# df.nn is a namespace of op wrappers (the ops layer); the RNNs stand on while_loop, so the
# root package adds them to it.
from .control_flow import rnn_cell as _rnn_cell  # noqa: E402
from .control_flow.rnn import bidirectional_dynamic_rnn as _bidirectional_dynamic_rnn  # noqa: E402
from .control_flow.rnn import dynamic_rnn as _dynamic_rnn  # noqa: E402
nn.rnn_cell = _rnn_cell
nn.dynamic_rnn = _dynamic_rnn
nn.bidirectional_dynamic_rnn = _bidirectional_dynamic_rnn
from . import train  # noqa: F401
from . import losses, metrics  # noqa: F401,E402
from . import layers  # noqa: F401
from .autodiff import (GradientTape, NotDifferentiable, RegisterGradient,  # noqa: F401
                       UnconnectedGradients, gradients)
from .partition import partition  # noqa: F401,E402  (the function shadows the package name)
from . import viz  # noqa: F401,E402  (registers the DOT writer behind Graph.to_dot)
from . import memory  # noqa: F401,E402  (static memory plans: df.memory.plan)
# The runtime may not import the planner (layers): the budget check of
# ConfigProto(memory_budget_bytes=N) is installed here, where both are visible.
from .runtime.memory_budget import register_budget_check  # noqa: E402
register_budget_check(memory.budget_error)
del register_budget_check
from . import loopc as _loopc  # noqa: F401,E402  (installs the loop compiler: compile_loops)
from .runtime.memory_arena import register_arena_builder  # noqa: E402
register_arena_builder(memory.arena.build_arena_step)     # ConfigProto(plan_memory=True)
del register_arena_builder
from . import timeline  # noqa: F401,E402  (df.timeline.Timeline: Chrome traces of step_stats)
from . import distributed  # noqa: F401,E402  (df.distributed: MPI tasks)
from .tracer import function  # noqa: F401,E402  (df.function: Terra's co-execution)

mod = floormod
newaxis = None

__version__ = "0.1.0"
