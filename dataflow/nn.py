"""``df.nn``: neural-network ops under TF's names."""
from .ops.nn_ops import (elu, log_softmax, relu, sigmoid, softmax,  # noqa: F401
                         softmax_cross_entropy_with_logits, softmax_cross_entropy_with_logits_v2,
                         softplus, tanh)
from .control_flow import rnn_cell  # noqa: F401,E402
from .control_flow.rnn import bidirectional_dynamic_rnn, dynamic_rnn  # noqa: F401,E402
