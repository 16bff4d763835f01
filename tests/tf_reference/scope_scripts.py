"""Random nestings of variable_scope / name_scope / get_variable / ops, interpreted with
either ``tensorflow.compat.v1`` or ``dataflow``: the names each produces must agree.

A script is a list of actions:

* ``["vs", name_or_null, default_name_or_null, reuse, auxiliary, [actions]]``: a
  variable_scope (reuse ``null``, ``true`` or ``"auto"``);
* ``["vsobj", index, reuse, [actions]]``: reenter the ``index``-th scope object captured;
* ``["ns", name, [actions]]``: a name_scope;
* ``["var", name, trainable]``: ``get_variable(name, [1])``;
* ``["op", name]``: ``identity`` of a constant, named ``name``.

:func:`run_script` returns one entry per leaf action: the variable's or op's name, or the
class name of the error it raised.
"""
from __future__ import annotations

import random

NAMES = ["a", "b", "w", "dense", "x"]


def random_script(rng: random.Random, depth=0):
    actions = []
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        if depth < 3 and kind < 0.35:
            named = rng.random() < 0.7
            actions.append(["vs", rng.choice(NAMES) if named else None,
                            None if named else rng.choice(["dense", "blk"]),
                            rng.choice([None, None, True, "auto"]) if named else None,
                            rng.random() < 0.85, random_script(rng, depth + 1)])
        elif depth < 3 and kind < 0.45:
            actions.append(["vsobj", rng.randint(0, 3), rng.choice([None, True, "auto"]),
                            random_script(rng, depth + 1)])
        elif depth < 3 and kind < 0.6:
            actions.append(["ns", rng.choice(NAMES), random_script(rng, depth + 1)])
        elif kind < 0.85:
            actions.append(["var", rng.choice(NAMES), rng.random() < 0.8])
        else:
            actions.append(["op", rng.choice(NAMES)])
    return actions


def run_script(tf, script):
    out, captured = [], []

    def reuse_arg(r):
        return tf.AUTO_REUSE if r == "auto" else r

    def run(actions):
        for action in actions:
            kind = action[0]
            if kind == "vs":
                _, name, default, reuse, aux, body = action
                try:
                    cm = tf.variable_scope(name, default_name=default, reuse=reuse_arg(reuse),
                                           auxiliary_name_scope=aux)
                    with cm as scope:
                        captured.append(scope)
                        out.append("scope " + scope.name)
                        run(body)
                except ValueError as e:
                    out.append(type(e).__name__)
            elif kind == "vsobj":
                _, index, reuse, body = action
                if index >= len(captured):
                    continue
                with tf.variable_scope(captured[index], reuse=reuse_arg(reuse)) as scope:
                    out.append("scope " + scope.name)
                    run(body)
            elif kind == "ns":
                with tf.name_scope(action[1]):
                    run(action[2])
            elif kind == "var":
                try:
                    v = tf.get_variable(action[1], [1], trainable=action[2])
                    out.append(v.name)
                except ValueError as e:
                    out.append(type(e).__name__)
            else:
                out.append(tf.identity(tf.constant(1.0), name=action[1]).name)
    run(script)
    return out
