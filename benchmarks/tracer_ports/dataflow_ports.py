"""The eight programs as they are (examples/imperative), for the tracer section's
dataflow row: ``COMPILE`` is ``df.function`` when this dataflow has it, else None (the
row then reads "n/a: df.function not built")."""
import functools

import dataflow as df
from examples.imperative import PROGRAMS, load

COMPILE = getattr(df, "function", None)


def _run(name, steps, wrap=None, seed=0):
    module = load(name)
    model = module.make_model(seed)
    losses = module.run(steps, wrap=wrap, seed=seed, model=model)
    return losses, module.observations(model)


PORTS = {name: functools.partial(_run, name) for name in PROGRAMS}
