"""``df.nn``: neural-network ops under TF's names."""
from .ops.nn_ops import (elu, log_softmax, relu, sigmoid, softmax,  # noqa: F401
                         softmax_cross_entropy_with_logits, softmax_cross_entropy_with_logits_v2,
                         softplus, tanh)
from .ops.conv_ops import (avg_pool, conv2d, conv2d_backprop_filter,  # noqa: F401
                           conv2d_backprop_input, depthwise_conv2d, depthwise_conv2d_native,
                           depthwise_conv2d_native_backprop_filter,
                           depthwise_conv2d_native_backprop_input, max_pool)
from .ops.extra_array_ops import in_top_k, top_k  # noqa: F401
from .ops.nn_extra_ops import (batch_normalization, bias_add, embedding_lookup,  # noqa: F401
                               l2_loss, l2_normalize, moments,
                               sigmoid_cross_entropy_with_logits,
                               sparse_softmax_cross_entropy_with_logits)
from .ops.random_ops import dropout  # noqa: F401,E402
