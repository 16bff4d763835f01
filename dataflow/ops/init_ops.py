"""Initializers (``tf.initializers`` / ``tf.*_initializer``), as TF1's ``init_ops``.

An initializer is a callable ``init(shape, dtype=None, partition_info=None)``
returning a tensor of that shape; ``get_variable`` calls it inside the variable's
``Initializer`` name scope. Random ones draw from the random ops of
:mod:`dataflow.ops.random_ops` (so their values follow the graph and op seeds).

>>> init = glorot_uniform_initializer(seed=1)
>>> w = init([784, 10])                      # uniform in +-sqrt(6 / (784 + 10))
>>> b = constant_initializer(0.1)([10])
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import constant
from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import array_ops, math_ops, random_ops

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomUniform", "RandomNormal",
           "TruncatedNormal", "VarianceScaling", "Orthogonal", "GlorotUniform",
           "GlorotNormal", "zeros_initializer", "ones_initializer", "constant_initializer",
           "random_uniform_initializer", "random_normal_initializer",
           "truncated_normal_initializer", "variance_scaling_initializer",
           "glorot_uniform_initializer", "glorot_normal_initializer",
           "orthogonal_initializer", "he_normal", "he_uniform", "lecun_normal",
           "lecun_uniform", "qr"]

# scipy.stats.truncnorm.std(a=-2, b=2): the standard deviation of a standard normal cut
# at two standard deviations, which TF divides out so truncated draws keep the variance.
TRUNCATED_NORMAL_STDDEV = .87962566103423978


def _float_dtype(dtype, who):
    dtype = _dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype.name} ({who})")
    return dtype


class Initializer:
    """Base class: ``__call__(shape, dtype=None, partition_info=None)`` returns a tensor."""

    dtype = _dtypes.float32

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class Zeros(Initializer):
    """All zeros (``tf.zeros_initializer``).

    >>> df.Session().run(Zeros()([2, 3], dtype=df.int32))
    array([[0, 0, 0],
           [0, 0, 0]], dtype=int32)
    """

    def __init__(self, dtype=_dtypes.float32):
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.zeros(_dims(shape), dtype or self.dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Ones(Zeros):
    """All ones (``tf.ones_initializer``)."""

    def __call__(self, shape, dtype=None, partition_info=None):
        return array_ops.ones(_dims(shape), dtype or self.dtype)


class Constant(Initializer):
    """A given value (``tf.constant_initializer``): a scalar fills the shape; a list with
    fewer elements than the shape is padded with its last element, as TF1 does.

    >>> df.Session().run(Constant([1, 2])([2, 2]))
    array([[1., 2.],
           [2., 2.]], dtype=float32)
    """

    def __init__(self, value=0, dtype=_dtypes.float32, verify_shape=False):
        self.value = value
        self.dtype = _dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dtype = _dtypes.as_dtype(dtype or self.dtype)
        dims = _dims(shape)
        flat = np.ravel(np.asarray(self.value, dtype=dtype.as_numpy_dtype))
        n = int(np.prod(dims))
        verify = self._verify_shape if verify_shape is None else verify_shape
        if verify and np.shape(self.value) != tuple(dims):
            raise TypeError(f"Expected Tensor's shape: {tuple(dims)}, got "
                            f"{np.shape(self.value)}.")
        if flat.size > n:
            raise ValueError(f"Too many elements provided. Needed at most {n}, but "
                             f"received {flat.size}")
        if 0 < flat.size < n:
            flat = np.concatenate([flat, np.repeat(flat[-1:], n - flat.size)])
        return constant(flat.reshape(dims), dtype=dtype)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name,
                "verify_shape": self._verify_shape}


class RandomUniform(Initializer):
    """Uniform in ``[minval, maxval)`` (``tf.random_uniform_initializer``)."""

    def __init__(self, minval=0, maxval=None, seed=None, dtype=_dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return random_ops.random_uniform(_dims(shape), self.minval, self.maxval,
                                         dtype or self.dtype, seed=self.seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}


class RandomNormal(Initializer):
    """Normal samples (``tf.random_normal_initializer``)."""

    _draw = staticmethod(random_ops.random_normal)

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=_dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _float_dtype(dtype, type(self).__name__)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype, type(self).__name__)
        return self._draw(_dims(shape), self.mean, self.stddev, dtype, seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class TruncatedNormal(RandomNormal):
    """Normal samples within two standard deviations (``tf.truncated_normal_initializer``)."""

    _draw = staticmethod(random_ops.truncated_normal)


def compute_fans(shape):
    """``(fan_in, fan_out)`` of a weight shape, as TF: a conv kernel ``[..., in, out]``
    counts its receptive field in both."""
    shape = list(shape)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[:-2]))
    return shape[-2] * receptive, shape[-1] * receptive


class VarianceScaling(Initializer):
    """Samples scaled to the weight's fan (``tf.variance_scaling_initializer``).

    With ``n`` the fan in, fan out or their average (``mode``) and ``s = scale / max(1, n)``:
    ``"truncated_normal"`` (and ``"normal"``, its TF1 alias) draws a truncated normal with
    stddev ``sqrt(s) / 0.87962566103423978``; ``"untruncated_normal"`` a normal with
    stddev ``sqrt(s)``; ``"uniform"`` draws in ``+-sqrt(3 s)``.

    >>> he = VarianceScaling(2.0, "fan_in", "truncated_normal")
    """

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=_dtypes.float32):
        if scale <= 0.:
            raise ValueError("`scale` must be positive float.")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
        self.dtype = _float_dtype(dtype, "VarianceScaling")

    def _scaled(self, dims):
        fan_in, fan_out = compute_fans(dims)
        fan = {"fan_in": fan_in, "fan_out": fan_out,
               "fan_avg": (fan_in + fan_out) / 2.}[self.mode]
        return self.scale / max(1., fan)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype, "VarianceScaling")
        dims = _dims(shape)
        scale = self._scaled(dims if partition_info is None else partition_info.full_shape)
        if self.distribution in ("normal", "truncated_normal"):
            return random_ops.truncated_normal(dims, 0.0,
                                               math.sqrt(scale) / TRUNCATED_NORMAL_STDDEV,
                                               dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(dims, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(dims, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Uniform in ``+-sqrt(6 / (fan_in + fan_out))`` (``tf.glorot_uniform_initializer``,
    ``get_variable``'s default for floats)."""

    def __init__(self, seed=None, dtype=_dtypes.float32):
        super().__init__(1.0, "fan_avg", "uniform", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev ``sqrt(2 / (fan_in + fan_out)) / 0.8796...``
    (``tf.glorot_normal_initializer``)."""

    def __init__(self, seed=None, dtype=_dtypes.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed=None):
    """``VarianceScaling(2.0, "fan_in", "truncated_normal")``."""
    return VarianceScaling(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    """``VarianceScaling(2.0, "fan_in", "uniform")``."""
    return VarianceScaling(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    """``VarianceScaling(1.0, "fan_in", "truncated_normal")``."""
    return VarianceScaling(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    """``VarianceScaling(1.0, "fan_in", "uniform")``."""
    return VarianceScaling(1.0, "fan_in", "uniform", seed)


# -- QR, for the orthogonal initializer ------------------------------------------------------

@register_op("Qr")
def _qr_infer(op):
    x = op.inputs[0]
    if x.shape.ndims is not None and x.shape.ndims < 2:
        raise ValueError(f"Qr '{op.name}': input must have rank >= 2, got {x.shape}")
    if x.shape.ndims is None:
        return [(x.dtype, TensorShape(None))] * 2
    *batch, m, n = x.shape.dims
    k = None if m is None or n is None else min(m, n)
    full = op.get_attr("full_matrices")
    return [(x.dtype, TensorShape(batch + [m, m if full else k])),
            (x.dtype, TensorShape(batch + [m if full else k, n]))]


@register_op("QrGrad")
def _qr_grad_infer(op):
    return [(op.inputs[0].dtype, TensorShape(None))]


def qr(input, full_matrices=False, name=None):  # noqa: A002
    """``(q, r)`` with ``input = q @ r``, ``q`` orthonormal columns, ``r`` upper
    triangular (``tf.qr``), over the last two dimensions.

    >>> q, r = qr([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    """
    from ..framework.convert import convert_to_tensor
    x = convert_to_tensor(input, name="input")
    _float_dtype(x.dtype, "qr")
    op = get_default_graph().create_op("Qr", [x], {"full_matrices": bool(full_matrices)},
                                       name=name or "Qr")
    return op.outputs[0], op.outputs[1]


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix times ``gain`` (``tf.orthogonal_initializer``): the Q of
    the QR decomposition of a normal matrix, column signs fixed by R's diagonal, for the
    shape flattened to ``[prod(shape[:-1]), shape[-1]]``.

    >>> w = Orthogonal(gain=1.0, seed=2)([4, 4])
    """

    def __init__(self, gain=1.0, seed=None, dtype=_dtypes.float32):
        self.gain, self.seed = gain, seed
        self.dtype = _float_dtype(dtype, "Orthogonal")

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype, "Orthogonal")
        dims = _dims(shape)
        if len(dims) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        rows, cols = int(np.prod(dims[:-1])), dims[-1]
        flat = (cols, rows) if rows < cols else (rows, cols)
        a = random_ops.random_normal(list(flat), dtype=dtype, seed=self.seed)
        q, r = qr(a, full_matrices=False)
        k = min(flat)
        diag = array_ops.gather(array_ops.reshape(r, [-1]),
                                np.arange(k, dtype=np.int32) * (flat[1] + 1))
        q = q * math_ops.sign(diag)
        if rows < cols:
            q = array_ops.transpose(q)
        return math_ops.multiply(constant(self.gain, dtype=dtype),
                                 array_ops.reshape(q, dims))

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


def _dims(shape):
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    dims = [int(d) for d in np.ravel(np.asarray(shape, dtype=np.int64))]
    return dims


# TF1's lowercase spellings.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
orthogonal_initializer = Orthogonal
