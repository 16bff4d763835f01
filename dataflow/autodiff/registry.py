"""Gradient functions, registered per op type (as TF's ``RegisterGradient``).

A gradient function takes the forward op and the gradients of its outputs
(``None`` for outputs nobody differentiates) and returns one gradient per input
(``None`` where an input gets none)::

    @RegisterGradient("Square")
    def _square_grad(op, grad):
        return [grad * 2.0 * op.inputs[0]]

Ops whose outputs carry no gradient are declared with ``NotDifferentiable("Less")``.
"""
from __future__ import annotations

__all__ = ["RegisterGradient", "NotDifferentiable", "get_gradient_function",
           "is_not_differentiable", "AcceptsIndexedSlices", "accepts_indexed_slices"]

_GRADIENTS: dict = {}
_NOT_DIFFERENTIABLE: set = set()
_ACCEPTS_INDEXED_SLICES: set = set()


class RegisterGradient:
    """Decorator registering the gradient function of ``op_type``."""

    def __init__(self, op_type: str):
        if not isinstance(op_type, str):
            raise TypeError("op_type must be a string")
        self._op_type = op_type

    def __call__(self, fn):
        if self._op_type in _GRADIENTS or self._op_type in _NOT_DIFFERENTIABLE:
            raise KeyError(f"A gradient for op type '{self._op_type}' is already registered")
        _GRADIENTS[self._op_type] = fn
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TF's name
    """Declare that ``op_type`` has no gradient: its inputs receive ``None``."""
    if op_type in _GRADIENTS:
        raise KeyError(f"Op type '{op_type}' already has a gradient function")
    _NOT_DIFFERENTIABLE.add(op_type)


def is_not_differentiable(op_type: str) -> bool:
    return op_type in _NOT_DIFFERENTIABLE


def get_gradient_function(op):
    """The registered gradient function of ``op``'s type, or None if it has none."""
    return _GRADIENTS.get(op.type)


def AcceptsIndexedSlices(op_type: str) -> None:  # noqa: N802 - as RegisterGradient
    """Declare that the gradient function of ``op_type`` takes an ``IndexedSlices``
    output gradient as it is; other gradient functions get it densified."""
    _ACCEPTS_INDEXED_SLICES.add(op_type)


def accepts_indexed_slices(op_type: str) -> bool:
    return op_type in _ACCEPTS_INDEXED_SLICES
