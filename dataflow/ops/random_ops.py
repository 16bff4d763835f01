"""Random ops under TF1's names: ``random_normal``, ``truncated_normal``,
``random_uniform``, ``random_shuffle``, ``multinomial`` / ``random.categorical``.

Each op is stateful: it keeps its own generator in the Session, so every run
draws new numbers, and two Sessions of a graph with seeds (``set_random_seed``
or ``seed=``) draw the same sequence. The generator is described in
:mod:`dataflow.kernels.numpy_cpu.random`; the numbers are not TF's.

>>> df.set_random_seed(0)
>>> w = random_normal([3, 2], stddev=0.1)
>>> with df.Session() as s1, df.Session() as s2:
...     bool((s1.run(w) == s2.run(w)).all())
True
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import Tensor, get_default_graph
from ..framework.op_registry import register_op
from ..framework.random_seed import get_seed
from ..framework.tensor_shape import TensorShape
from . import math_ops
from .array_ops import shape_from_tensor

__all__ = ["random_normal", "truncated_normal", "random_uniform", "random_shuffle",
           "multinomial", "categorical", "dropout", "RANDOM_OP_TYPES"]

_FLOATS = (_dtypes.float16, _dtypes.float32, _dtypes.float64)
_INTS = (_dtypes.int32, _dtypes.int64)

# Every random op type: stateful, so never folded, fused, deduplicated or pruned as dead
# weight, and not differentiable.
RANDOM_OP_TYPES = ("RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                   "RandomUniformInt", "RandomShuffle", "Multinomial")


def _from_shape_input(op):
    return [(op.get_attr("dtype"), shape_from_tensor(op.inputs[0]))]


for _t in ("RandomUniform", "RandomStandardNormal", "TruncatedNormal"):
    register_op(_t, stateful=True)(_from_shape_input)


@register_op("RandomUniformInt", stateful=True)
def _uniform_int_infer(op):
    return [(op.inputs[1].dtype, shape_from_tensor(op.inputs[0]))]


@register_op("RandomShuffle", stateful=True)
def _shuffle_infer(op):
    return [(op.inputs[0].dtype, op.inputs[0].shape)]


@register_op("Multinomial", stateful=True)
def _multinomial_infer(op):
    logits, num_samples = op.inputs
    if logits.shape.ndims not in (None, 2):
        raise ValueError(f"logits should be a matrix, got shape {logits.shape} "
                         f"(op '{op.name}')")
    from ..framework.convert import constant_value
    n = constant_value(num_samples)
    batch = logits.shape[0] if logits.shape.ndims == 2 else None
    return [(op.get_attr("output_dtype"),
             TensorShape([batch, None if n is None else int(n)]))]


# -- wrappers --------------------------------------------------------------------------------

def _seed_attrs(seed):
    seed1, seed2 = get_seed(seed)
    return {"seed": seed1 or 0, "seed2": seed2 or 0}


def _shape_tensor(shape):
    """``shape`` (a list, TensorShape or 1-D int tensor) as an int32/int64 tensor."""
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    if isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape):
        from .array_ops import stack
        t = stack([convert_to_tensor(d, dtype=_dtypes.int32) for d in shape], name="shape")
    elif isinstance(shape, Tensor):
        t = shape
    else:
        t = convert_to_tensor(np.asarray(shape, dtype=np.int32), name="shape")
    if t.dtype not in _INTS:
        raise TypeError(f"shape must be an int32 or int64 tensor, got {t.dtype.name}")
    return t


def _check_dtype(dtype, allowed, fn):
    dtype = _dtypes.as_dtype(dtype)
    if dtype not in allowed:
        raise TypeError(f"{fn}: dtype {dtype.name} is not in the allowed types "
                        f"{[d.name for d in allowed]}")
    return dtype


def _standard(op_type, shape, dtype, seed):
    return get_default_graph().create_op(op_type, [_shape_tensor(shape)],
                                         {"dtype": dtype, **_seed_attrs(seed)},
                                         name=op_type).outputs[0]


def _scaled(op_type, default_name, shape, mean, stddev, dtype, seed, name):
    dtype = _check_dtype(dtype, _FLOATS, default_name)
    with get_default_graph().name_scope(name or default_name) as scope:
        shape_t = _shape_tensor(shape)
        mean_t = convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev_t = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = _standard(op_type, shape_t, dtype, seed)
        return math_ops.add(math_ops.multiply(rnd, stddev_t, name="mul"), mean_t, name=scope)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None, name=None):
    """Samples of a normal distribution (``tf.random_normal``).

    >>> x = random_normal([2, 3], mean=1.0, stddev=0.5, seed=7)
    """
    return _scaled("RandomStandardNormal", "random_normal", shape, mean, stddev, dtype, seed,
                   name)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=_dtypes.float32, seed=None,
                     name=None):
    """Normal samples redrawn until within two standard deviations of the mean
    (``tf.truncated_normal``).

    >>> w = truncated_normal([784, 10], stddev=0.1)
    """
    return _scaled("TruncatedNormal", "truncated_normal", shape, mean, stddev, dtype, seed,
                   name)


def random_uniform(shape, minval=0, maxval=None, dtype=_dtypes.float32, seed=None,
                   name=None):
    """Uniform samples in ``[minval, maxval)`` (``tf.random_uniform``); ``maxval``
    defaults to 1 for floats and is required for integers.

    >>> u = random_uniform([4], -1.0, 1.0)
    >>> k = random_uniform([], 0, 10, dtype=df.int32)
    """
    dtype = _check_dtype(dtype, _FLOATS + _INTS, "random_uniform")
    if dtype.is_integer and maxval is None:
        raise ValueError(f"Must specify maxval for integer dtype {dtype.name}")
    g = get_default_graph()
    with g.name_scope(name or "random_uniform") as scope:
        shape_t = _shape_tensor(shape)
        lo = convert_to_tensor(minval, dtype=dtype, name="min")
        hi = convert_to_tensor(1 if maxval is None else maxval, dtype=dtype, name="max")
        if dtype.is_integer:
            return g.create_op("RandomUniformInt", [shape_t, lo, hi], _seed_attrs(seed),
                               name=scope).outputs[0]
        rnd = _standard("RandomUniform", shape_t, dtype, seed)
        return math_ops.add(rnd * math_ops.subtract(hi, lo, name="sub"), lo, name=scope)


def random_shuffle(value, seed=None, name=None):
    """``value`` with its first dimension randomly permuted (``tf.random_shuffle``).

    >>> order = random_shuffle(range(10))
    """
    value = convert_to_tensor(value)
    return get_default_graph().create_op("RandomShuffle", [value], _seed_attrs(seed),
                                         name=name or "RandomShuffle").outputs[0]


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """``num_samples`` class indices per row of ``logits`` ([batch, classes]), drawn with
    probabilities ``softmax(logits)`` (``tf.multinomial``).

    >>> idx = multinomial([[0.0, 1.0, 2.0]], 5)   # int64, shape [1, 5]
    """
    output_dtype = _check_dtype(output_dtype or _dtypes.int64, _INTS, "multinomial")
    g = get_default_graph()
    with g.name_scope(name or "multinomial"):
        logits = convert_to_tensor(logits, name="logits")
        _check_dtype(logits.dtype, _FLOATS, "multinomial logits")
        n = convert_to_tensor(num_samples, dtype=_dtypes.int32, name="num_samples")
        return g.create_op("Multinomial", [logits, n],
                           {"output_dtype": output_dtype, **_seed_attrs(seed)},
                           name="Multinomial").outputs[0]


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """``tf.random.categorical``: :func:`multinomial` with ``dtype`` for the indices.

    >>> idx = categorical([[0.0, 0.0]], 3)
    """
    return multinomial(logits, num_samples, seed=seed, name=name or "categorical",
                       output_dtype=dtype)


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Zero each element of ``x`` with probability ``rate`` (``= 1 - keep_prob``) and
    scale the others by ``1 / (1 - rate)`` (``tf.nn.dropout``; give one of
    ``keep_prob`` and ``rate``). ``noise_shape`` broadcasts one draw over dimensions.

    >>> h = df.ones([10, 10])
    >>> with df.Session() as sess:
    ...     kept = sess.run(dropout(h, keep_prob=0.5))
    >>> sorted(set(kept.ravel().tolist()) - {0.0})   # survivors scaled by 1 / 0.5
    [2.0]
    >>> dropout(h, rate=0.1).shape
    TensorShape([10, 10])
    """
    if (keep_prob is None) == (rate is None):
        raise ValueError("Specify exactly one of keep_prob and rate.")
    g = get_default_graph()
    with g.name_scope(name or "dropout"):
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(f"x has to be a floating point tensor since it's going to be "
                             f"scaled. Got a {x.dtype.name} tensor instead.")
        if rate is None:
            if isinstance(keep_prob, (int, float)) and not 0 < keep_prob <= 1:
                raise ValueError(f"keep_prob must be a scalar tensor or a float in the "
                                 f"range (0, 1], got {keep_prob}")
            rate = 1 - keep_prob if isinstance(keep_prob, (int, float)) else \
                math_ops.subtract(1.0, convert_to_tensor(keep_prob, dtype=x.dtype))
        if isinstance(rate, (int, float)):
            if not 0 <= rate < 1:
                raise ValueError(f"rate must be a scalar tensor or a float in the range "
                                 f"[0, 1), got {rate}")
            if rate == 0:
                return x
        rate = convert_to_tensor(rate, dtype=x.dtype, name="rate")
        if noise_shape is None:
            from .array_ops import shape
            noise_shape = shape(x)
        random = random_uniform(noise_shape, seed=seed, dtype=x.dtype)
        scale = math_ops.divide(1.0, math_ops.subtract(1.0, rate))
        keep = math_ops.cast(math_ops.greater_equal(random, rate), x.dtype)
        # TF 1.15's ops and names: "dropout/mul" (x * scale), "dropout/mul_1" (* mask).
        return x * scale * keep
