"""The global step: an int64 counter variable that ``apply_gradients`` can increment.

>>> step = get_or_create_global_step()
>>> w = df.Variable(1.0)
>>> train_op = df.train.GradientDescentOptimizer(0.1).minimize(df.square(w),
...                                                            global_step=step)
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..framework.graph import get_default_graph
from ..ops.state_ops import GLOBAL_VARIABLES, Variable

GLOBAL_STEP = "global_step"


def get_global_step(graph=None):
    """The graph's global step variable, or ``None`` if it has none.

    >>> get_global_step() is None
    True
    """
    g = graph or get_default_graph()
    found = g.get_collection(GLOBAL_STEP)
    if len(found) > 1:
        raise TypeError("There are multiple items in collection 'global_step'; "
                        "there should be only one.")
    return found[0] if found else None


def create_global_step(graph=None):
    """Create the graph's global step (int64, starting at 0, not trainable).

    >>> step = create_global_step()
    """
    g = graph or get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("'global_step' already exists.")
    # The step is graph-global: made at the root scope, outside any control dependencies.
    with g.as_default(), g.name_scope(""), g.control_dependencies(None):
        return Variable(np.int64(0), trainable=False, name="global_step", dtype=_dtypes.int64,
                        collections=[GLOBAL_VARIABLES, GLOBAL_STEP])


def get_or_create_global_step(graph=None):
    """The graph's global step, created on first use.

    >>> step = get_or_create_global_step()
    >>> step is get_or_create_global_step()
    True
    """
    g = graph or get_default_graph()
    step = get_global_step(g)
    return step if step is not None else create_global_step(g)


def global_step(sess, global_step_tensor):
    """The current value of the global step, as a Python int.

    >>> step = get_or_create_global_step()
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     global_step(sess, step)
    0
    """
    return int(sess.run(global_step_tensor))
