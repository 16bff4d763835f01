"""Graph-level and op-level random seeds, with TF1's rules (``tf.set_random_seed``).

A random op gets two seeds ``(seed, seed2)`` when it is built:

* graph seed set, op seed given: ``(graph_seed, op_seed)``;
* graph seed set, no op seed: ``(graph_seed, n)`` where ``n`` is the number of ops in
  the graph when the op is made (TF's ``graph._last_id``), so every new op draws a
  different, but reproducible, sequence;
* no graph seed, op seed given: ``(87654321, op_seed)`` (TF's default graph seed);
* neither: ``(0, 0)``, which the kernels read as "seed from the operating system".

``(0, 0)`` produced by the rules above becomes ``(0, 2**31 - 1)``, as in TF, so a
seeded op is never mistaken for an unseeded one.

>>> g = df.Graph()
>>> with g.as_default():
...     set_random_seed(1)
...     get_seed(7)
(1, 7)
"""
from __future__ import annotations

from .graph import get_default_graph

__all__ = ["get_seed", "set_random_seed", "DEFAULT_GRAPH_SEED"]

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2 ** 31 - 1


def _truncate_seed(seed):
    return int(seed) % _MAXINT32  # TF truncates seeds to int32 range the same way


def set_random_seed(seed):
    """Set the default graph's seed: random ops built afterwards become reproducible.

    >>> set_random_seed(42)
    >>> a = df.random_uniform([2])
    >>> first = df.Session().run(a)
    >>> bool((df.Session().run(a) == first).all())   # the same values in every new Session
    True
    """
    graph = get_default_graph()
    graph.seed = None if seed is None else int(seed)
    reset = getattr(graph, "reset_random_streams", None)  # eager: restart the sequences
    if reset is not None:
        reset()


def get_seed(op_seed):
    """The ``(seed, seed2)`` pair a random op built now gets (None, None when unseeded)."""
    graph = get_default_graph()
    global_seed = getattr(graph, "seed", None)
    if global_seed is not None:
        if op_seed is None:
            op_seed = len(graph._ops)
        seeds = _truncate_seed(global_seed), _truncate_seed(op_seed)
    elif op_seed is not None:
        seeds = DEFAULT_GRAPH_SEED, _truncate_seed(op_seed)
    else:
        return None, None
    if seeds == (0, 0):
        return 0, _MAXINT32
    return seeds
