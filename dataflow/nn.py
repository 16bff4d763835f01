"""``df.nn``: neural-network ops under TF's names."""
from .ops.nn_ops import (elu, log_softmax, relu, sigmoid, softmax,  # noqa: F401
                         softmax_cross_entropy_with_logits, softmax_cross_entropy_with_logits_v2,
                         softplus, tanh)
