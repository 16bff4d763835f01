"""The elementwise op table: one row per elementwise op type, everything derived from it.

A row says what an elementwise op *is*; every layer that needs to know reads it here
instead of keeping a list of its own:

* ``dataflow.ops.math_ops`` registers the op definition (shape rule from ``shape``, the
  build-time dtype check from ``dtypes``) and, when ``wrapper`` is set, the public
  function of that name;
* ``dataflow.autodiff.math_grad`` registers the gradient from ``grad``;
* ``dataflow.kernels.numpy_cpu`` registers ``numpy`` (and ``numpy_int`` for integer
  inputs) as the reference kernel;
* rows with a ``scalar`` expression get compiled kernels: ``dataflow.kernels.numba_cpu``
  builds its scalar function and loops from it (float32/float64; ``transcendental`` and
  ``numpy_passes`` pick the size threshold below which NumPy is faster), the fused CPU
  loop inlines it, and ``dataflow.kernels.cuda`` builds a device function from it (or
  from ``cuda`` where the GPU needs other code) for the dtypes of :func:`cuda_dtypes`;
* the fusion pass fuses exactly the rows of :func:`fusable_ops`.

So adding an elementwise op is adding one row. The module is a leaf (it imports NumPy
only): ``ops`` and ``autodiff`` above it and ``kernels`` beside ``framework`` all read
it, which is why gradients are functions of an ``ops`` namespace handed in by autodiff
rather than of imported op wrappers.

Scalar expressions are Python expression templates: ``{0}`` and ``{1}`` stand for the
operands, ``_one`` and ``_zero`` for constants of the operands' dtype (a bare ``1.0``
would promote float32 arithmetic to float64), and ``_sqrt``, ``_exp``, ``_log``,
``_tanh``, ``_sigmoid`` for each backend's implementation of those functions (Numba's:
:mod:`dataflow.kernels.approx`; CUDA's: libdevice with the simulator's edge cases).
Arithmetic is written as the NumPy function computes it, so compiled results equal the
reference bit for bit where no approximation is involved.

>>> row = ELEMENTWISE["TanhGrad"]
>>> row.arity, row.scalar
(2, '({1} * (_one - {0} * {0}))')
>>> "Tanh" in fusable_ops() and "Less" not in fusable_ops()
True
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["CUSTOM", "ELEMENTWISE", "ElementwiseOp", "INT_DTYPES", "cuda_dtypes",
           "fusable_ops"]

#: ``grad=CUSTOM``: the gradient is a hand-written function registered in autodiff.
CUSTOM = "custom"

INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
# Dtype kinds a row may name, as TF's kernels allow them (build-time check).
_KINDS = ("float", "numeric", "bool", "any")
# The dtypes the CUDA kernels are built for, per kind.
_CUDA_DTYPES = {"float": ("float32", "float64"),
                "numeric": ("float32", "float64", "int32", "int64"),
                "bool": ("bool",),
                "any": ("float32", "float64", "int32", "int64")}


@dataclass(frozen=True)
class ElementwiseOp:
    """One elementwise op type (see the module docstring for who reads which field).

    ``output`` is ``"same"`` (the inputs' dtype) or ``"bool"``; ``shape`` is
    ``"unchanged"`` (unary), ``"broadcast"`` (binary, NumPy rules) or ``"same"`` (binary
    on one shape: the activation gradients). ``grad(ops, g, *inputs, output)`` returns
    one gradient per input (binary ``"broadcast"`` rows: before summing back to each
    input's shape, which autodiff adds); ``None`` means not differentiable.
    """

    name: str
    arity: int
    dtypes: str
    numpy: Callable
    wrapper: str | None = None
    scalar: str | None = None
    cuda: str | None = None
    transcendental: bool = False
    numpy_passes: int = 1
    numpy_int: Callable | None = None
    grad: Callable | str | None = None
    output: str = "same"
    shape: str = ""
    default_name: str | None = None

    def __post_init__(self):
        assert self.dtypes in _KINDS, self.dtypes
        if not self.shape:
            object.__setattr__(self, "shape", "unchanged" if self.arity == 1 else "broadcast")

    @property
    def cuda_scalar(self) -> str | None:
        """The scalar expression the CUDA device function is built from."""
        return self.cuda or self.scalar

    @property
    def in_place(self) -> bool:
        """The output has the inputs' dtype, so it may take the block of a dying input
        of its size (the memory planner's in-place reuse)."""
        return self.output == "same" or self.dtypes == "bool"

    @property
    def fusable(self) -> bool:
        """Compiled scalar code that maps floats to the same float type."""
        return self.scalar is not None and self.output == "same" and \
            self.dtypes in ("float", "numeric")


# -- NumPy reference functions ---------------------------------------------------------------
# Scalar (0-d) values are NumPy scalars, and Python operators are used where they can be:
# ``np.int32(1) + np.int32(2)`` costs ~60 ns, ``np.add`` on the same scalars over 1 µs.

def square(x):
    return x * x


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _reciprocal(x):
    return 1 / x


def _relu(x):
    return np.maximum(x, 0).astype(np.asarray(x).dtype, copy=False)


def _relu_grad(g, x):
    # A select, not g * (x > 0): inf * 0 would give NaN.
    out = np.where(x > 0, g, np.zeros_like(g))
    return out[()] if out.ndim == 0 else out


def _elu(x):
    with np.errstate(over="ignore"):
        out = np.where(x > 0, x, np.expm1(np.minimum(x, 0)))
    return out[()] if out.ndim == 0 else out   # 0-d results travel as NumPy scalars


def _softplus(x):
    return np.logaddexp(0, x).astype(np.asarray(x).dtype, copy=False)


def _floordiv(x, y):
    return x // y


def _squared_difference(x, y):
    d = x - y
    return d * d


def _maximum(x, y):
    # Scalars compare with Python operators (np.maximum costs ~1 µs on NumPy scalars);
    # ``x != x`` keeps np.maximum's NaN propagation.
    if type(x) is np.ndarray or type(y) is np.ndarray:
        return np.maximum(x, y)
    return x if x >= y or x != x else y


def _minimum(x, y):
    if type(x) is np.ndarray or type(y) is np.ndarray:
        return np.minimum(x, y)
    return x if x <= y or x != x else y


def _tanh_grad(y, dy):
    return dy * (1 - y * y)


def _sigmoid_grad(y, dy):
    return dy * (y * (1 - y))


def _check_divisor(y):
    # NumPy returns 0 (with a warning) for integer division by zero; TF's CPU kernels fail.
    if (not y) if type(y) is not np.ndarray else not y.all():
        raise ZeroDivisionError("Integer division by zero")


def _int_floordiv(x, y):
    _check_divisor(y)
    return x // y


def _int_floormod(x, y):
    _check_divisor(y)
    return x % y


def _int_round(x):
    return x  # rounding an integer is the identity (np.rint would return floats)


def _int_pow(x, y):
    if (y < 0) if type(y) is not np.ndarray else (y < 0).any():
        raise ValueError("Integers to negative integer powers are not allowed.")
    return x ** y


# -- gradients (``ops`` is the namespace autodiff hands in) --------------------------------------

def _maximum_grad(ops, g, x, y, z):
    # Ties go to x, as in TF.
    return ops.select_grads(ops.greater_equal(x, y), g)


def _minimum_grad(ops, g, x, y, z):
    return ops.select_grads(ops.less_equal(x, y), g)


def _squared_difference_grad(ops, g, x, y, z):
    gx = 2.0 * g * (x - y)
    return [gx, -gx]


def _tanh_grad_grad(ops, g, y, dy, z):
    """d/dy of dy (1 - y^2) is -2 y dy; d/d(dy) is (1 - y^2)."""
    return [g * -2.0 * dy * y, ops.activation_grad("TanhGrad", y, g)]


def _sigmoid_grad_grad(ops, g, y, dy, z):
    """d/dy of dy y (1 - y) is dy (1 - 2y); d/d(dy) is y (1 - y)."""
    g_dy = g * dy
    return [g_dy - 2.0 * g_dy * y, ops.activation_grad("SigmoidGrad", y, g)]


def _relu_grad_grad(ops, g, dy, x, z):
    """ReluGrad is linear in the incoming gradient, with the same mask; the features get
    zeros (piecewise constant), as TF's ``_ReluGradGrad``."""
    return [ops.activation_grad("ReluGrad", g, x), ops.zeros_like(x)]


def _sign_grad(ops, g, x, z):
    # Piecewise constant: zero almost everywhere (TF returns zeros, not None).
    return [ops.zeros_like(x)]


# -- the table ---------------------------------------------------------------------------------

_O = ElementwiseOp
_ROWS = [
    # Unary arithmetic and math.
    _O("Neg", 1, "numeric", operator.neg, "negative", "(-{0})",
       grad=lambda ops, g, x, z: [-g]),
    _O("Square", 1, "numeric", square, "square", "({0} * {0})",
       grad=lambda ops, g, x, z: [g * (2.0 * x)]),
    _O("Sqrt", 1, "float", np.sqrt, "sqrt", "_sqrt({0})",
       grad=lambda ops, g, x, z: [g * (0.5 / z)]),
    _O("Rsqrt", 1, "float", _rsqrt, "rsqrt", "(_one / _sqrt({0}))", numpy_passes=2,
       grad=lambda ops, g, x, z: [g * (-0.5 * z * z * z)]),
    _O("Reciprocal", 1, "float", _reciprocal, "reciprocal", "(_one / {0})",
       grad=lambda ops, g, x, z: [g * (-z * z)]),
    _O("Abs", 1, "numeric", operator.abs, "abs", "abs({0})",
       cuda="(-{0} if {0} < _zero else {0})",
       grad=lambda ops, g, x, z: [g * ops.sign(x)]),
    _O("Exp", 1, "float", np.exp, "exp", "_exp({0})", transcendental=True,
       grad=lambda ops, g, x, z: [g * z]),
    _O("Log", 1, "float", np.log, "log", "_log({0})", transcendental=True,
       grad=lambda ops, g, x, z: [g / x]),
    _O("Tanh", 1, "float", np.tanh, "tanh", "_tanh({0})", transcendental=True,
       grad=lambda ops, g, x, z: [ops.activation_grad("TanhGrad", z, g)]),
    _O("Sigmoid", 1, "float", _sigmoid, "sigmoid", "_sigmoid({0})", transcendental=True,
       grad=lambda ops, g, x, z: [ops.activation_grad("SigmoidGrad", z, g)]),
    # np.maximum(x, 0): NaN stays NaN. Bitwise ``|`` keeps the select branch-free. The
    # wrapper is df.nn.relu (dataflow.ops.nn_ops), the gradient in autodiff.nn_grad.
    _O("Relu", 1, "numeric", _relu, None,
       "({0} if ({0} > _zero) | ({0} != {0}) else _zero)",
       cuda="(_zero if {0} < _zero else {0})", numpy_passes=2, grad=CUSTOM),
    # Wrappers df.nn.elu and df.nn.softplus (dataflow.ops.nn_ops), gradients in nn_grad.
    _O("Elu", 1, "float", _elu, None, grad=CUSTOM),
    _O("Softplus", 1, "float", _softplus, None, grad=CUSTOM),
    _O("Log1p", 1, "float", np.log1p, "log1p",
       grad=lambda ops, g, x, z: [g / (1.0 + x)]),
    _O("Sign", 1, "numeric", np.sign, "sign", grad=_sign_grad),
    _O("Floor", 1, "float", np.floor, "floor"),
    _O("Ceil", 1, "float", np.ceil, "ceil"),
    _O("Round", 1, "numeric", np.rint, "round", numpy_int=_int_round),
    _O("Sin", 1, "float", np.sin, "sin", grad=lambda ops, g, x, z: [g * ops.cos(x)]),
    _O("Cos", 1, "float", np.cos, "cos", grad=lambda ops, g, x, z: [g * -ops.sin(x)]),
    # np.logical_not has a fast path for np.bool_ scalars (~160 ns, ``~x`` ~500 ns).
    _O("LogicalNot", 1, "bool", np.logical_not, "logical_not", "(not {0})", output="bool"),
    # Binary arithmetic.
    _O("AddV2", 2, "numeric", operator.add, "add", "({0} + {1})", default_name="add",
       grad=lambda ops, g, x, y, z: [g, g]),
    _O("Sub", 2, "numeric", operator.sub, "subtract", "({0} - {1})", default_name="sub",
       grad=lambda ops, g, x, y, z: [g, -g]),
    _O("Mul", 2, "numeric", operator.mul, "multiply", "({0} * {1})", default_name="mul",
       grad=lambda ops, g, x, y, z: [g * y, x * g]),
    _O("RealDiv", 2, "float", operator.truediv, "realdiv", "({0} / {1})",
       grad=lambda ops, g, x, y, z: [g / y, g * (-x / y / y)]),
    # np.maximum's rule: NaN in either argument wins.
    _O("Maximum", 2, "numeric", _maximum, "maximum",
       "({0} if ({0} >= {1}) | ({0} != {0}) else {1})", grad=_maximum_grad),
    _O("Minimum", 2, "numeric", _minimum, "minimum",
       "({0} if ({0} <= {1}) | ({0} != {0}) else {1})", grad=_minimum_grad),
    _O("SquaredDifference", 2, "numeric", _squared_difference, "squared_difference",
       "(({0} - {1}) * ({0} - {1}))", numpy_passes=2, grad=_squared_difference_grad),
    _O("FloorDiv", 2, "numeric", _floordiv, "floordiv", numpy_int=_int_floordiv,
       default_name="floordiv"),
    _O("FloorMod", 2, "numeric", operator.mod, "floormod", numpy_int=_int_floormod,
       default_name="mod", grad=CUSTOM),
    _O("Pow", 2, "numeric", operator.pow, "pow", numpy_int=_int_pow, default_name="pow",
       grad=CUSTOM),
    # The activation gradients take (y, dy), y the forward output, as TF's kernels do:
    # one node instead of three (backprop through an RNN runs them every iteration).
    # Wrapper: dataflow.ops.grad_ops.activation_grad.
    _O("TanhGrad", 2, "float", _tanh_grad, None, "({1} * (_one - {0} * {0}))",
       numpy_passes=2, shape="same", grad=_tanh_grad_grad),
    _O("SigmoidGrad", 2, "float", _sigmoid_grad, None, "({1} * ({0} * (_one - {0})))",
       numpy_passes=2, shape="same", grad=_sigmoid_grad_grad),
    # TF's ReluGrad(gradients, features): the gradient where the feature (Relu's input or
    # output) is positive, else 0; one node where Greater, ZerosLike and Select were three.
    _O("ReluGrad", 2, "numeric", _relu_grad, None, "({0} if {1} > _zero else _zero)",
       numpy_passes=2, shape="same", grad=_relu_grad_grad),
    # Comparisons and logic.
    _O("Less", 2, "numeric", operator.lt, "less", "({0} < {1})", output="bool"),
    _O("LessEqual", 2, "numeric", operator.le, "less_equal", "({0} <= {1})", output="bool"),
    _O("Greater", 2, "numeric", operator.gt, "greater", "({0} > {1})", output="bool"),
    _O("GreaterEqual", 2, "numeric", operator.ge, "greater_equal", "({0} >= {1})",
       output="bool"),
    _O("Equal", 2, "any", operator.eq, "equal", "({0} == {1})", output="bool"),
    _O("NotEqual", 2, "any", operator.ne, "not_equal", "({0} != {1})", output="bool"),
    _O("LogicalAnd", 2, "bool", operator.and_, "logical_and", "({0} and {1})",
       output="bool"),
    _O("LogicalOr", 2, "bool", operator.or_, "logical_or", "({0} or {1})", output="bool"),
]
del _O

#: Every elementwise op type, by name.
ELEMENTWISE: dict[str, ElementwiseOp] = {row.name: row for row in _ROWS}


def fusable_ops() -> dict:
    """``{op type: arity}`` of the ops the fusion pass may merge (float in, same float
    out, with compiled scalar code)."""
    return {row.name: row.arity for row in ELEMENTWISE.values() if row.fusable}


def cuda_dtypes(row: ElementwiseOp) -> tuple:
    """The input dtypes the CUDA kernel of ``row`` is built for."""
    return _CUDA_DTYPES[row.dtypes]
