"""Running the ``>>>`` examples of dataflow's docstrings as tests.

Every example runs with ``df`` (and ``tf``) bound to :mod:`dataflow` and ``np`` to
NumPy, besides the module's own names, in a fresh default graph per docstring, so an
example may build ops without creating a graph first. What an example registers (an op
type, say) stays registered: examples use names of their own. Output is compared with
``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``.
"""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import numpy as np

import dataflow as df

OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_names(package, skip=()):
    """Every module under ``package`` (a package object), not descending into names that
    start with one of ``skip`` (so excluded packages are not even imported)."""
    names = [package.__name__]
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        if any(info.name == s or info.name.startswith(s + ".") for s in skip):
            continue
        if info.ispkg:
            names += module_names(importlib.import_module(info.name), skip)
        else:
            names.append(info.name)
    return names


def _find(name):
    module = importlib.import_module(name)
    # Functions an example defines (an op's shape function, say) must not pass for the
    # module's own: they get a __module__ outside the dataflow package.
    extra = {"df": df, "tf": df, "np": np, "__name__": f"doctest of {name}"}
    return doctest.DocTestFinder().find(module, name, extraglobs=extra)


def count_examples(name):
    """How many ``>>>`` examples the docstrings of module ``name`` hold."""
    return sum(len(t.examples) for t in _find(name))


def run_module_doctests(name):
    """Run the examples of module ``name``; returns (attempted, failure report)."""
    tests = _find(name)
    runner = doctest.DocTestRunner(optionflags=OPTIONS)
    report = []
    for test in sorted(tests, key=lambda t: t.name):
        with df.Graph().as_default():
            runner.run(test, out=report.append)
    return runner.tries, "".join(report)
