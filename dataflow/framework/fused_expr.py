"""What the fusion pass hands to a fused kernel: the ``FusedElementwise`` contract.

The fusion pass (:mod:`dataflow.runtime.fusion`) replaces a group of elementwise ops
by one node whose kernel is the ``FusedElementwise`` kernel registered for its device
type; the kernel factory finds the group's expression as ``ctx.op.expr``, a
:class:`FusedExpr`. This leaf module holds that contract, so the runtime that builds
expressions and the kernels that compile them (``dataflow.kernels.numba_cpu.fused``,
``dataflow.kernels.cuda.fused``) import it without importing each other. The op types
in a program are rows of :mod:`dataflow.framework.elementwise_table`.

>>> expr = FusedExpr((), (("Mul", ((INPUT, 0), (CONST, "0x1.0p+1"))),
...                       ("Tanh", ((VALUE, 0),))), "float32")
>>> expr.key[1], expr.num_inputs
('float32', 0)
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONST", "FUSED_OP_TYPE", "FusedExpr", "INPUT", "VALUE"]

#: The op type a fused node's kernel is registered under.
FUSED_OP_TYPE = "FusedElementwise"

# Argument kinds of a program instruction.
INPUT, VALUE, CONST = "input", "value", "const"


@dataclass(frozen=True)
class FusedExpr:
    """A fused elementwise expression, in SSA form, independent of any backend.

    * ``inputs``: the external :class:`Tensor` inputs, in the order the kernel gets them;
    * ``program``: instructions ``(op_type, args)``; each arg is ``("input", k)`` (the
      k-th external input), ``("value", j)`` (the result of instruction ``j < i``) or
      ``("const", hex)`` (a scalar literal of ``dtype``, ``float.hex`` spelling, so
      NaN and infinities compare equal); the last instruction's result is the output;
    * ``dtype``: the dtype name of every input, literal and the output.

    Backends cache generated code by :attr:`key`, which leaves out the tensors.

    >>> FusedExpr((), (("Neg", (("const", "0x1.0p+0"),)),), "float64").key
    ((('Neg', (('const', '0x1.0p+0'),)),), 'float64')
    """

    inputs: tuple
    program: tuple
    dtype: str

    @property
    def key(self):
        return (self.program, self.dtype)

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)
