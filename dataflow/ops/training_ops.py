"""Fused optimizer updates, as TF's ``ResourceApplyAdam``: one op updates a variable
and its slots, instead of a dozen elementwise ops per variable."""
from __future__ import annotations

from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op
from . import shape_fns

register_op("ResourceApplyAdam", stateful=True)(shape_fns.no_outputs)


def resource_apply_adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
                        name="ResourceApplyAdam"):
    """``m, v, var`` updated in place by one Adam step (TF1's formulas, see AdamOptimizer).

    ``var``, ``m`` and ``v`` are variable handles; the scalars are tensors of the
    variable's dtype.
    """
    inputs = [var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad]
    return get_default_graph().create_op("ResourceApplyAdam", inputs, name=name)
