"""``df.layers``: TF1's ``tf.layers`` (``tf.compat.v1.layers``) -- ``dense``, ``conv2d``,
``max_pooling2d``, ``average_pooling2d``, ``dropout``, ``flatten`` and
``batch_normalization``, as functions and as layer classes.

A layer makes its variables with ``get_variable`` in a variable scope named after it,
made unique the TF1 way (``dense``, ``dense_1``...; ``name=`` gives the scope, and with
``reuse=True`` the same variables), so variables get TF1's names: ``dense/kernel``,
``dense/bias``, ``conv2d/kernel``, ``batch_normalization/gamma``, ``beta``, ``moving_mean``,
``moving_variance``. Its ops live in the name scope opened with that variable scope.
``batch_normalization(training=True)`` puts its moving-average updates in
``GraphKeys.UPDATE_OPS``; run them with the train op::

    h = tf.layers.dense(x, 64, activation=tf.nn.relu)
    h = tf.layers.batch_normalization(h, training=is_training)
    h = tf.layers.dropout(h, rate=0.3, training=is_training)
    logits = tf.layers.dense(h, 10, name="logits")
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train_op = tf.train.AdamOptimizer().minimize(loss)

>>> y = dense(df.placeholder(df.float32, [None, 3]), 2)
>>> [v.name for v in df.trainable_variables()]
['dense/kernel:0', 'dense/bias:0']
"""
from __future__ import annotations

import re

import numpy as np

from . import dtypes as _dtypes
from .control_flow import cond
from .framework.convert import constant_value, convert_to_tensor
from .framework.graph import Tensor, get_default_graph
from .ops import array_ops, conv_ops, math_ops
from .ops.init_ops import Ones, Zeros
from .ops.nn_extra_ops import bias_add
from .ops.random_ops import dropout as _nn_dropout
from .ops.variable_scope import GraphKeys, get_variable, variable_scope

__all__ = ["Layer", "Dense", "Conv2D", "MaxPooling2D", "AveragePooling2D", "Dropout",
           "Flatten", "BatchNormalization", "dense", "conv2d", "max_pooling2d",
           "average_pooling2d", "dropout", "flatten", "batch_normalization"]


def _snake_case(name):
    """A class name as TF's default layer name: ``MaxPooling2D`` -> ``max_pooling2d``."""
    name = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", name).lower()


class Layer:
    """Base class of the TF1 layers: scopes, weights and update bookkeeping.

    Subclasses implement ``build(input_shape)`` (making weights with
    :meth:`add_weight`) and ``call(inputs, ...)``.
    """

    def __init__(self, trainable=True, name=None, dtype=None, _scope=None, _reuse=None):
        self.trainable = trainable
        self._base_name = name or _snake_case(type(self).__name__)
        self.name = self._base_name
        self.dtype = None if dtype is None else _dtypes.as_dtype(dtype)
        self._reuse = _reuse
        self.built = False
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self._updates: list = []
        self._scope = None
        if _scope:
            with variable_scope(_scope) as scope:
                self._scope = scope

    # -- what subclasses use -------------------------------------------------------------
    def build(self, input_shape):
        """Make the layer's weights for inputs of ``input_shape``."""

    def call(self, inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not implement call")

    def add_weight(self, name, shape, dtype=None, initializer=None, regularizer=None,
                   trainable=True):
        """A weight ``<layer scope>/<name>`` made with ``get_variable``."""
        reuse = True if self.built or self._reuse else None
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
            with get_default_graph().name_scope(self._scope.original_name_scope):
                trainable = trainable and self.trainable
                v = get_variable(name, shape, dtype=dtype or self.dtype,
                                 initializer=initializer, regularizer=regularizer,
                                 trainable=trainable)
        (self._trainable_weights if trainable else self._non_trainable_weights).append(v)
        return v

    def add_update(self, update):
        self._updates.append(update)

    # -- calling ---------------------------------------------------------------------------
    def _set_scope(self):
        if self._scope is None:
            if self._reuse:
                with variable_scope(self._base_name) as scope:
                    self._scope = scope
            else:
                with variable_scope(None, default_name=self._base_name) as scope:
                    self._scope = scope

    def __call__(self, inputs, *args, **kwargs):
        """Build on first call, then apply the layer to ``inputs``."""
        self._set_scope()
        reuse = True if self.built else self._reuse
        n_updates = len(self._updates)
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as scope:
            with get_default_graph().name_scope(scope.original_name_scope):
                inputs = convert_to_tensor(inputs)
                if self.dtype is None:
                    self.dtype = inputs.dtype
                if not self.built:
                    self.build(inputs.shape)
                    self.built = True
                outputs = self.call(inputs, *args, **kwargs)
        graph = get_default_graph()
        for u in self._updates[n_updates:]:
            graph.add_to_collection(GraphKeys.UPDATE_OPS, u)
        return outputs

    apply = __call__

    # -- introspection ---------------------------------------------------------------------
    trainable_weights = property(lambda self: list(self._trainable_weights))
    trainable_variables = trainable_weights
    non_trainable_weights = property(lambda self: list(self._non_trainable_weights))
    non_trainable_variables = non_trainable_weights
    weights = property(lambda self: self._trainable_weights + self._non_trainable_weights)
    variables = weights
    updates = property(lambda self: list(self._updates))
    scope_name = property(lambda self: self._scope.name if self._scope else None)


def _static_bool(value):
    """``value`` as a Python bool when known while building, else None (a tensor)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, Tensor):
        known = constant_value(value)
        return None if known is None else bool(known)
    return bool(value)


def _smart_cond(pred, true_fn, false_fn):
    known = _static_bool(pred)
    if known is None:
        return cond(pred, true_fn, false_fn)
    return true_fn() if known else false_fn()


class Dense(Layer):
    """``outputs = activation(inputs @ kernel + bias)`` (``tf.layers.Dense``); inputs of
    rank > 2 are multiplied along their last dimension.

    >>> x = df.placeholder(df.float32, [None, 4])
    >>> layer = Dense(10, activation=df.nn.relu)
    >>> y = layer(x)
    >>> y.shape, layer.kernel.shape
    (TensorShape([None, 10]), TensorShape([4, 10]))
    >>> layer.kernel.name
    'dense/kernel:0'
    """

    def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None,
                 bias_initializer=Zeros(), kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        self.units = int(units)
        self.activation = activation
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.kernel_regularizer = kernel_regularizer
        self.bias_regularizer = bias_regularizer
        self.activity_regularizer = activity_regularizer
        self.kernel = self.bias = None

    def build(self, input_shape):
        if input_shape.ndims is None or input_shape[-1] is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be defined. "
                             "Found `None`.")
        self.kernel = self.add_weight("kernel", [input_shape[-1], self.units],
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", [self.units],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer)

    def call(self, inputs):
        rank = inputs.shape.ndims
        if rank == 2:
            outputs = math_ops.matmul(inputs, self.kernel, name="MatMul")
        else:  # contract the last axis: [..., n] -> [-1, n] @ kernel -> [..., units]
            flat = array_ops.reshape(inputs, [-1, self.kernel.shape[0]])
            outputs = math_ops.matmul(flat, self.kernel, name="MatMul")
            batch_dims = array_ops.shape(inputs)[:-1]
            outputs = array_ops.reshape(outputs, array_ops.concat(
                [batch_dims, np.array([self.units], np.int32)], 0))
            outputs.set_shape(inputs.shape.as_list()[:-1] + [self.units]
                              if rank is not None else None)
        if self.use_bias:
            outputs = bias_add(outputs, self.bias)
        return _activate(self, outputs)


def _activate(layer, outputs):
    """The layer's activation, then its activity regularizer's loss (to the collection)."""
    if layer.activation is not None:
        outputs = layer.activation(outputs)
    if layer.activity_regularizer is not None:
        loss = layer.activity_regularizer(outputs)
        if loss is not None:
            get_default_graph().add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return outputs


def _pair_arg(value, what):
    """An int or a pair of ints, as TF's layers accept for sizes, strides and rates."""
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) for v in pair):
        raise ValueError(f"The `{what}` argument must be a tuple of 2 integers. "
                         f"Received: {value}")
    return tuple(int(v) for v in pair)


def _layer_padding(padding):
    p = str(padding).lower()
    if p not in ("valid", "same"):
        raise ValueError(f"The `padding` argument must be one of 'valid', 'same'. "
                         f"Received: {padding}")
    return p.upper()


def _check_data_format(data_format):
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(f"The `data_format` argument must be one of "
                         f"'channels_first', 'channels_last'. Received: {data_format}")
    return data_format


def _nhwc(layer, inputs, fn):
    """Apply ``fn`` (an NHWC op) to ``inputs`` in the layer's data format: channels-first
    inputs are transposed to NHWC and back (the kernels are NHWC only)."""
    if layer.data_format == "channels_last":
        return fn(inputs)
    out = fn(array_ops.transpose(inputs, [0, 2, 3, 1]))
    return array_ops.transpose(out, [0, 3, 1, 2])


class Conv2D(Layer):
    """2-D convolution layer (``tf.layers.Conv2D``): ``kernel`` of shape
    ``kernel_size + [in_channels, filters]``, ``activation(conv2d(inputs, kernel) + bias)``.

    >>> images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    >>> layer = Conv2D(4, 3, padding="same", activation=tf.nn.relu)
    >>> layer(images).shape.as_list()
    [None, 8, 8, 4]
    >>> layer.kernel.name, layer.kernel.shape.as_list()
    ('conv2d/kernel:0', [3, 3, 1, 4])
    """

    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 data_format="channels_last", dilation_rate=(1, 1), activation=None,
                 use_bias=True, kernel_initializer=None, bias_initializer=Zeros(),
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        self.filters = int(filters)
        self.kernel_size = _pair_arg(kernel_size, "kernel_size")
        self.strides = _pair_arg(strides, "strides")
        self.padding = _layer_padding(padding)
        self.data_format = _check_data_format(data_format)
        self.dilation_rate = _pair_arg(dilation_rate, "dilation_rate")
        if self.strides != (1, 1) and self.dilation_rate != (1, 1):
            raise ValueError("strides > 1 not supported in conjunction with "
                             "dilation_rate > 1")
        self.activation, self.use_bias = activation, use_bias
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer
        self.kernel_regularizer, self.bias_regularizer = kernel_regularizer, bias_regularizer
        self.activity_regularizer = activity_regularizer
        self.kernel = self.bias = None

    def build(self, input_shape):
        if input_shape.ndims != 4:
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected ndim=4, found ndim={input_shape.ndims}. "
                             f"Full shape received: {input_shape}")
        channels = input_shape[-1 if self.data_format == "channels_last" else 1]
        if channels is None:
            raise ValueError("The channel dimension of the inputs should be defined. "
                             "Found `None`.")
        self.kernel = self.add_weight("kernel", list(self.kernel_size) + [channels,
                                                                          self.filters],
                                      initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer)
        if self.use_bias:
            self.bias = self.add_weight("bias", [self.filters],
                                        initializer=self.bias_initializer,
                                        regularizer=self.bias_regularizer)

    def call(self, inputs):
        strides = [1, *self.strides, 1]
        dilations = [1, *self.dilation_rate, 1]
        outputs = _nhwc(self, inputs, lambda x: conv_ops.conv2d(
            x, self.kernel, strides=strides, padding=self.padding, dilations=dilations,
            name="Conv2D"))
        if self.use_bias:
            fmt = "NHWC" if self.data_format == "channels_last" else "NCHW"
            outputs = bias_add(outputs, self.bias, data_format=fmt)
        return _activate(self, outputs)


class _Pooling2D(Layer):
    """Shared by the 2-D pooling layers: ``pool_size``/``strides`` windows over H and W."""

    _pool = None

    def __init__(self, pool_size, strides, padding="valid", data_format="channels_last",
                 name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.pool_size = _pair_arg(pool_size, "pool_size")
        self.strides = _pair_arg(strides, "strides")
        self.padding = _layer_padding(padding)
        self.data_format = _check_data_format(data_format)

    def call(self, inputs):
        if inputs.shape.ndims not in (None, 4):
            raise ValueError(f"Input 0 of layer {self.name} is incompatible with the layer: "
                             f"expected ndim=4, found ndim={inputs.shape.ndims}.")
        pool = type(self)._pool
        return _nhwc(self, inputs, lambda x: pool(
            x, ksize=[1, *self.pool_size, 1], strides=[1, *self.strides, 1],
            padding=self.padding))


class MaxPooling2D(_Pooling2D):
    """The maximum of each ``pool_size`` window (``tf.layers.MaxPooling2D``).

    >>> images = tf.placeholder(tf.float32, [None, 8, 8, 4])
    >>> MaxPooling2D(2, 2)(images).shape.as_list()
    [None, 4, 4, 4]
    """

    _pool = staticmethod(conv_ops.max_pool)


class AveragePooling2D(_Pooling2D):
    """The mean of each ``pool_size`` window (``tf.layers.AveragePooling2D``; with
    ``padding="same"`` the padding is left out of the mean).

    >>> images = tf.placeholder(tf.float32, [None, 8, 8, 4])
    >>> AveragePooling2D(2, 2)(images).shape.as_list()
    [None, 4, 4, 4]
    """

    _pool = staticmethod(conv_ops.avg_pool)


class Dropout(Layer):
    """``tf.nn.dropout`` with ``rate`` when ``training`` (a bool or a bool tensor), the
    identity otherwise (``tf.layers.Dropout``).

    >>> x = df.ones([4, 25])
    >>> is_training = df.placeholder(df.bool, [])
    >>> y = Dropout(0.3)(x, training=is_training)
    >>> with df.Session() as sess:
    ...     sess.run(y, {is_training: False}).sum()              # the identity
    ...     bool((sess.run(y, {is_training: True}) == 0).any())  # some of 100 dropped
    np.float32(100.0)
    True
    """

    def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed

    def call(self, inputs, training=False):
        return _smart_cond(
            training,
            lambda: _nn_dropout(inputs, noise_shape=self.noise_shape, seed=self.seed,
                                rate=self.rate),
            lambda: array_ops.identity(inputs))


class Flatten(Layer):
    """``[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]`` (``tf.layers.Flatten``).

    >>> images = df.placeholder(df.float32, [None, 8, 8, 1])
    >>> Flatten()(images).shape
    TensorShape([None, 64])
    """

    def __init__(self, data_format="channels_last", name=None, **kwargs):
        super().__init__(name=name, **kwargs)
        if data_format not in ("channels_last", "channels_first"):
            raise ValueError(f"The `data_format` argument must be one of "
                             f"'channels_first', 'channels_last'. Received: {data_format}")
        self.data_format = data_format

    def call(self, inputs):
        if self.data_format == "channels_first" and (inputs.shape.ndims or 0) > 2:
            perm = [0] + list(range(2, inputs.shape.ndims)) + [1]
            inputs = array_ops.transpose(inputs, perm)
        dims = inputs.shape.dims
        if dims is not None and all(d is not None for d in dims[1:]):
            return array_ops.reshape(inputs, [-1, int(np.prod(dims[1:], dtype=np.int64))])
        batch = array_ops.shape(inputs)[:1]
        return array_ops.reshape(inputs, array_ops.concat(
            [batch, np.array([-1], np.int32)], 0))


class BatchNormalization(Layer):
    """Batch normalization over every axis but ``axis`` (``tf.layers.BatchNormalization``).

    Training: ``(x - batch_mean) / sqrt(batch_var + epsilon) * gamma + beta``, and
    ``moving_mean``/``moving_variance`` move towards the batch statistics by
    ``1 - momentum`` (ops in ``GraphKeys.UPDATE_OPS``). Inference uses the moving
    statistics. As TF1, a 4-D input (TF's fused kernel) updates the moving variance
    with the unbiased batch variance, other ranks with the biased one.

    >>> x = df.constant([[1.0, 10.0], [3.0, 30.0]])
    >>> bn = BatchNormalization(momentum=0.9)
    >>> y = bn(x, training=True)
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     out, _ = sess.run([y, df.get_collection(df.GraphKeys.UPDATE_OPS)])
    ...     sess.run(bn.moving_mean)
    array([0.2, 2. ], dtype=float32)
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer=Zeros(), gamma_initializer=Ones(),
                 moving_mean_initializer=Zeros(), moving_variance_initializer=Ones(),
                 beta_regularizer=None, gamma_regularizer=None, renorm=False, fused=None,
                 trainable=True, name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        if renorm:
            raise NotImplementedError("batch_normalization(renorm=True) is not supported")
        if not isinstance(axis, int):
            raise TypeError(f"axis must be an int (one feature axis), got {axis!r}")
        self.axis, self.momentum, self.epsilon = axis, momentum, epsilon
        self.center, self.scale = center, scale
        self.initializers = (gamma_initializer, beta_initializer, moving_mean_initializer,
                             moving_variance_initializer)
        self.beta_regularizer, self.gamma_regularizer = beta_regularizer, gamma_regularizer
        self.fused = fused
        self.gamma = self.beta = self.moving_mean = self.moving_variance = None

    def build(self, input_shape):
        ndims = input_shape.ndims
        if ndims is None:
            raise ValueError("Input has undefined rank.")
        axis = self.axis % ndims
        channels = input_shape[axis]
        if channels is None:
            raise ValueError(f"Input has undefined `axis` dimension. Received input with "
                             f"shape {input_shape}.")
        self._axis, self._ndims = axis, ndims
        if self.fused is None:
            self.fused = ndims == 4
        g_init, b_init, mm_init, mv_init = self.initializers
        if self.scale:
            self.gamma = self.add_weight("gamma", [channels], initializer=g_init,
                                         regularizer=self.gamma_regularizer)
        if self.center:
            self.beta = self.add_weight("beta", [channels], initializer=b_init,
                                        regularizer=self.beta_regularizer)
        self.moving_mean = self.add_weight("moving_mean", [channels], initializer=mm_init,
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", [channels],
                                               initializer=mv_init, trainable=False)

    def _batch_moments(self, inputs):
        axes = [i for i in range(self._ndims) if i != self._axis]
        mean = math_ops.reduce_mean(inputs, axes, name="mean")
        centered = inputs - self._broadcast(mean)
        variance = math_ops.reduce_mean(math_ops.square(centered), axes, name="variance")
        return mean, variance

    def _broadcast(self, v):
        """A per-channel vector shaped to broadcast against the input."""
        if self._axis == self._ndims - 1:
            return v
        shape = [1] * self._ndims
        shape[self._axis] = -1
        return array_ops.reshape(v, shape)

    def _moving_update(self, variable, value):
        with get_default_graph().name_scope("AssignMovingAvg") as scope:
            decay = convert_to_tensor(1.0 - self.momentum, dtype=variable.dtype, name="decay")
            return variable.assign_sub((variable - value) * decay, name=scope)

    def call(self, inputs, training=False):
        mean, variance = self._batch_moments(inputs)
        if self.fused:  # TF's fused kernel keeps the unbiased variance for the average
            n = math_ops.cast(array_ops.size(inputs), inputs.dtype) / \
                math_ops.cast(array_ops.size(variance), inputs.dtype)
            moving_value_var = variance * (n / math_ops.maximum(n - 1.0, 1.0))
        else:
            moving_value_var = variance
        training_known = _static_bool(training)
        if training_known is not False:
            self.add_update(_smart_cond(
                training, lambda: self._moving_update(self.moving_mean, mean),
                lambda: self.moving_mean.read_value()))
            self.add_update(_smart_cond(
                training, lambda: self._moving_update(self.moving_variance, moving_value_var),
                lambda: self.moving_variance.read_value()))
        mean = _smart_cond(training, lambda: mean, lambda: self.moving_mean.read_value())
        variance = _smart_cond(training, lambda: variance,
                               lambda: self.moving_variance.read_value())
        return self._normalize(inputs, mean, variance)

    def _normalize(self, x, mean, variance):
        """``x * inv + (beta - mean * inv)`` with ``inv = gamma / sqrt(variance + eps)``,
        built as TF's ``nn.batch_normalization`` builds it (same op names)."""
        b = self._broadcast
        with get_default_graph().name_scope("batchnorm"):
            inv = math_ops.rsqrt(b(variance) + self.epsilon)
            if self.gamma is not None:
                inv = inv * b(self.gamma)
            scaled = x * inv
            if self.beta is not None:
                return scaled + (b(self.beta) - b(mean) * inv)
            return scaled + -(b(mean) * inv)


# -- functional forms ------------------------------------------------------------------------

def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=Zeros(), kernel_regularizer=None, bias_regularizer=None,
          activity_regularizer=None, trainable=True, name=None, reuse=None):
    """A densely connected layer (``tf.layers.dense``).

    >>> x = df.constant([[1.0, 2.0]])
    >>> h = dense(x, 3, activation=df.nn.relu, kernel_initializer=df.ones_initializer())
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     sess.run(h)
    array([[3., 3., 3.]], dtype=float32)
    """
    layer = Dense(units, activation=activation, use_bias=use_bias,
                  kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                  kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                  activity_regularizer=activity_regularizer, trainable=trainable, name=name,
                  _scope=name, _reuse=reuse)
    return layer.apply(inputs)


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None, use_bias=True,
           kernel_initializer=None, bias_initializer=Zeros(), kernel_regularizer=None,
           bias_regularizer=None, activity_regularizer=None, trainable=True, name=None,
           reuse=None):
    """A 2-D convolution layer (``tf.layers.conv2d``): variables ``conv2d/kernel`` and
    ``conv2d/bias``.

    >>> images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    >>> conv2d(images, 8, [3, 3], padding="same", activation=tf.nn.relu).name
    'conv2d/Relu:0'
    """
    layer = Conv2D(filters, kernel_size, strides=strides, padding=padding,
                   data_format=data_format, dilation_rate=dilation_rate, activation=activation,
                   use_bias=use_bias, kernel_initializer=kernel_initializer,
                   bias_initializer=bias_initializer, kernel_regularizer=kernel_regularizer,
                   bias_regularizer=bias_regularizer,
                   activity_regularizer=activity_regularizer, trainable=trainable, name=name,
                   _scope=name, _reuse=reuse)
    return layer.apply(inputs)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """2-D max pooling (``tf.layers.max_pooling2d``).

    >>> images = tf.placeholder(tf.float32, [None, 8, 8, 4])
    >>> max_pooling2d(images, [2, 2], 2).name
    'max_pooling2d/MaxPool:0'
    """
    return MaxPooling2D(pool_size, strides, padding=padding, data_format=data_format,
                        name=name).apply(inputs)


def average_pooling2d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):
    """2-D average pooling (``tf.layers.average_pooling2d``).

    >>> images = tf.placeholder(tf.float32, [None, 8, 8, 4])
    >>> average_pooling2d(images, [2, 2], 2).name
    'average_pooling2d/AvgPool:0'
    """
    return AveragePooling2D(pool_size, strides, padding=padding, data_format=data_format,
                            name=name).apply(inputs)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Dropout applied only when ``training`` (``tf.layers.dropout``; note: ``rate`` is the
    fraction dropped, and ``training`` defaults to False).

    >>> h = df.ones([2, 3])
    >>> df.Session().run(dropout(h, rate=0.5))      # training defaults to False
    array([[1., 1., 1.],
           [1., 1., 1.]], dtype=float32)
    """
    layer = Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)
    return layer.apply(inputs, training=training)


def flatten(inputs, name=None, data_format="channels_last"):
    """Flatten every dimension but the first (``tf.layers.flatten``).

    >>> images = df.zeros([2, 4, 4, 3])
    >>> flatten(images).shape
    TensorShape([2, 48])
    """
    return Flatten(name=name, data_format=data_format).apply(inputs)


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True,
                        scale=True, beta_initializer=Zeros(), gamma_initializer=Ones(),
                        moving_mean_initializer=Zeros(), moving_variance_initializer=Ones(),
                        beta_regularizer=None, gamma_regularizer=None, training=False,
                        trainable=True, name=None, reuse=None, renorm=False, fused=None):
    """Batch normalization (``tf.layers.batch_normalization``); with ``training`` the
    moving averages' updates go to ``GraphKeys.UPDATE_OPS``.

    >>> h = df.constant([[0.0], [2.0]])
    >>> y = batch_normalization(h, training=False)   # moving mean 0, variance 1
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     sess.run(y)
    array([[0.       ],
           [1.9990008]], dtype=float32)
    """
    layer = BatchNormalization(axis=axis, momentum=momentum, epsilon=epsilon, center=center,
                               scale=scale, beta_initializer=beta_initializer,
                               gamma_initializer=gamma_initializer,
                               moving_mean_initializer=moving_mean_initializer,
                               moving_variance_initializer=moving_variance_initializer,
                               beta_regularizer=beta_regularizer,
                               gamma_regularizer=gamma_regularizer, renorm=renorm,
                               fused=fused, trainable=trainable, name=name, _scope=name,
                               _reuse=reuse)
    return layer.apply(inputs, training=training)
