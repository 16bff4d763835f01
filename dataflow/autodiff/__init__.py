"""Reverse-mode autodiff: ``gradients`` and the per-op gradient registry.

Gradient functions live next to the kinds of ops they differentiate
(``math_grad``, ``array_grad``, ``nn_grad``, ``control_flow_grad``, ``state_grad``).
"""
# Importing the *_grad modules registers their gradient functions.
from . import array_grad, control_flow_grad, math_grad, nn_grad, state_grad  # noqa: F401
from . import conv_grad, extra_array_grad, nn_extra_grad  # noqa: F401,E402
from . import linalg_grad  # noqa: F401
from . import sequence_grad, tensor_array_grad  # noqa: F401
from . import stack_grad  # noqa: F401
from .gradients import UnconnectedGradients, gradients  # noqa: F401
from .registry import NotDifferentiable, RegisterGradient, get_gradient_function  # noqa: F401
