"""Control-flow builders: ``cond``, ``case`` and ``while_loop``, compiled to the primitives,
and the functional loops ``map_fn``, ``scan``, ``foldl``, ``foldr`` built on them."""
from ..framework import graph as _graph
from .cond import case, cond  # noqa: F401
from .context import CondContext, WhileContext, check_input_from_valid_context  # noqa: F401
from .while_loop import while_loop  # noqa: F401
from .functional_ops import foldl, foldr, map_fn, scan  # noqa: F401

if check_input_from_valid_context not in _graph._INPUT_CHECKS:
    _graph._INPUT_CHECKS.append(check_input_from_valid_context)
