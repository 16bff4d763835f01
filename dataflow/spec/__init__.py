"""``spec``: a small reference interpreter of the dataflow control-flow rules.

The rules are stated in ``dataflow/spec/SEMANTICS.md``; :func:`run` executes a graph by
them, one randomly chosen enabled node at a time, and returns what
``Session.run_tokens`` returns: ``[(value, is_dead), ...]``.

>>> from dataflow import spec
>>> x = df.placeholder(df.float32, [])
>>> y = x * 2.0
>>> [(float(v), dead) for v, dead in spec.run(df.get_default_graph(), [y],
...                                           feed_dict={x: 1.0}, seed=3)]
[(2.0, False)]
"""
from .interpreter import (
    CONTROL,
    ROOT,
    FetchNotComputed,
    Interpreter,
    MergeRace,
    SpecError,
    Token,
    run,
)

__all__ = ["CONTROL", "ROOT", "FetchNotComputed", "Interpreter", "MergeRace", "SpecError",
           "Token", "run"]
