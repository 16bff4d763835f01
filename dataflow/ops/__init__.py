"""Op definitions and their Python wrappers, grouped by kind.

``df.ops`` also exposes the raw control-flow primitives under TF's raw-op names:
``switch``, ``merge``, ``enter``, ``exit``, ``next_iteration``, ``loop_cond``,
``control_trigger``.
"""
from . import (array_ops, comm_ops, control_flow_ops, data_flow_ops, grad_ops,  # noqa: F401
               logging_ops, math_ops, nn_ops, state_ops, training_ops)
from . import extra_array_ops  # noqa: F401,E402  (argmax, slice, pad, top_k...)
from . import nn_extra_ops  # noqa: F401,E402  (sparse xent, clipping, moments...)
from . import conv_ops  # noqa: F401,E402  (conv2d, pooling and their backprops)
from . import init_ops, random_ops, variable_scope  # noqa: F401
from . import sequence_ops, tensor_array_ops  # noqa: F401
from .data_flow_ops import stack, stack_pop, stack_push, stack_size  # noqa: F401
from .control_flow_ops import (control_trigger, enter, exit, loop_cond, merge,  # noqa: F401
                               next_iteration, switch)
from ._operators import install as _install_operators

_install_operators()
