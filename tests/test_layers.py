"""The package's layers, checked on every import statement (lazy ones inside functions too).

Each module belongs to one layer; a layer may import only itself and the layers below it
(``MAY_IMPORT``, closed transitively). The main stack is

    base (dtypes, errors, util) -> framework -> ops -> control_flow -> autodiff -> train

beside it ``kernels`` stands only on ``base``, ``framework.op_registry`` and its own
registry, ``runtime`` and ``spec`` on ``framework`` plus the kernel registry, and
``viz``, ``partition``, the root package, ``cli`` and ``benchmarks`` sit on top. An import
that runs back up is reported with the file, line and both modules, e.g.::

    dataflow/framework/graph.py:84: dataflow.framework.graph (framework) imports
    dataflow.runtime.session (runtime)

Lower layers reach upper ones through registration hooks instead (op definitions,
kernels, gradients, Tensor operators, the DOT writer, the partitioner...). A new
subpackage must be given a layer in ``LAYER_OF``; examples/ and tests/ are exempt.
"""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent

# Module (or package prefix) -> layer; the longest matching prefix wins.
LAYER_OF = {
    "dataflow.dtypes": "base",
    "dataflow.errors": "base",
    "dataflow.util": "base",
    "dataflow.framework.op_registry": "op_registry",
    # Leaf contracts that op definitions and kernels both read (they import only NumPy).
    "dataflow.framework.elementwise_table": "op_registry",
    "dataflow.framework.fused_expr": "op_registry",
    "dataflow.framework": "framework",
    "dataflow.kernels.registry": "kernel_registry",
    "dataflow.kernels.resources": "kernel_registry",   # VariableCell: a leaf both sides hold
    "dataflow.kernels": "kernels",
    "dataflow.ops": "ops",
    "dataflow.nn": "ops",                # df.nn: a namespace of op wrappers
    "dataflow.control_flow": "control_flow",
    "dataflow.autodiff": "autodiff",
    "dataflow.train": "train",
    "dataflow.runtime": "runtime",
    "dataflow.spec": "spec",
    "dataflow.viz": "viz",
    "dataflow.partition": "partition",
    "dataflow.tracer": "partition",      # df.function: stands on runtime, autodiff, train
    "dataflow.memory": "memory",
    "dataflow.loopc": "loopc",           # the loop compiler: runtime + kernels (Numba)
    "dataflow": "api",                   # the root package re-exports everything
    "dataflow.cli": "cli",
    "dataflow.__main__": "cli",
    "benchmarks": "benchmarks",
}

# Layer -> the layers directly below it that it may import (besides itself).
MAY_IMPORT = {
    "base": set(),
    "op_registry": {"base"},
    "kernel_registry": {"base", "op_registry"},
    "kernels": {"kernel_registry"},
    "framework": {"op_registry"},
    "ops": {"framework"},
    "control_flow": {"ops"},
    "autodiff": {"control_flow"},
    "train": {"autodiff"},
    "runtime": {"framework", "kernel_registry"},
    "spec": {"framework", "kernel_registry"},
    "viz": {"train", "runtime", "kernels", "spec"},
    "partition": {"viz"},
    "memory": {"framework", "kernel_registry"},
    "loopc": {"runtime", "kernels"},
    "api": {"partition", "memory", "loopc"},
    "cli": {"api"},
    "benchmarks": {"cli"},
}

# Imports against the layers that are known and tolerated, with the reason for each.
# Keep it small: every entry must still match an import (test_allow_list_is_current).
ALLOWED = {
}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        layer = LAYER_OF.get(".".join(parts[:n]))
        if layer is not None:
            return layer
    return None


def allowed_layers(layer: str) -> set:
    """``layer`` and every layer below it (the closure of MAY_IMPORT)."""
    seen, stack = {layer}, [layer]
    while stack:
        for lower in MAY_IMPORT[stack.pop()]:
            if lower not in seen:
                seen.add(lower)
                stack.append(lower)
    return seen


def imported_modules(module: str, source: str, is_package: bool, known) -> list:
    """``[(line, imported module)]`` of every import in ``source``, at any depth.

    ``from X import name`` counts as importing ``X.name`` when that is a module in
    ``known`` (a submodule), else ``X``; relative imports resolve against ``module``.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((node.lineno, sub if sub in known else base))
    return found


def back_imports(module: str, source: str, is_package: bool = False, known=(),
                 path: str = "") -> list:
    """The imports in ``source`` (module ``module``) that go against the layers, as
    messages; imports outside the package and allow-listed ones are not reported."""
    layer = layer_of(module)
    if layer is None:
        return [f"{path or module}: module {module} has no layer in LAYER_OF"]
    ok = allowed_layers(layer)
    out = []
    for line, target in imported_modules(module, source, is_package, known):
        target_layer = layer_of(target)
        if target_layer is None or target_layer in ok or (module, target) in ALLOWED:
            continue
        out.append(f"{path or module}:{line}: {module} ({layer}) imports {target} "
                   f"({target_layer})")
    return out


def package_modules() -> list:
    """``[(module, path, is_package)]`` of every module under dataflow/ and benchmarks/."""
    mods = []
    for top in ("dataflow", "benchmarks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            mods.append((".".join(parts), path, is_package))
    return mods


def all_back_imports() -> list:
    mods = package_modules()
    known = {m for m, _, _ in mods}
    out = []
    for module, path, is_package in mods:
        out += back_imports(module, path.read_text(encoding="utf-8"), is_package, known,
                            str(path.relative_to(ROOT)))
    return out


def test_no_import_goes_against_the_layers():
    assert all_back_imports() == []


def test_allow_list_is_current():
    """Every allow-listed import still exists (a fixed one must leave the list)."""
    mods = package_modules()
    known = {m for m, _, _ in mods}
    present = set()
    for module, path, is_package in mods:
        for _, target in imported_modules(module, path.read_text(encoding="utf-8"),
                                          is_package, known):
            present.add((module, target))
    assert set(ALLOWED) - present == set()


def test_a_lazy_back_import_is_reported():
    source = ("def eval(self):\n"
              "    from ..runtime.session import Session\n"
              "    return Session\n")
    assert back_imports("dataflow.framework.fake", source, known={"dataflow.runtime.session"}) \
        == ["dataflow.framework.fake:2: dataflow.framework.fake (framework) imports "
            "dataflow.runtime.session (runtime)"]


def test_back_imports_at_every_level_are_reported():
    known = {m for m, _, _ in package_modules()}
    cases = [  # (module, import statement, is it a back-import?)
        ("dataflow.framework.convert", "from ..ops.array_ops import stack", True),
        ("dataflow.ops.array_ops", "from ..control_flow.context import WhileContext", True),
        ("dataflow.ops.comm_ops", "from ..runtime import plan", True),
        ("dataflow.ops.comm_ops", "from ..autodiff.registry import NotDifferentiable", True),
        ("dataflow.control_flow.cond", "from ..autodiff import gradients", True),
        ("dataflow.runtime.partitioned", "from ..partition import partition", True),
        ("dataflow.runtime.plan", "from ..ops import comm_ops", True),
        ("dataflow.runtime.plan", "import dataflow", True),
        ("dataflow.kernels.numpy_cpu.math", "from dataflow.framework.graph import Tensor", True),
        ("dataflow.kernels.numpy_cpu.math", "from dataflow.runtime import executor", True),
        ("dataflow.kernels.registry", "from . import numpy_cpu", True),
        ("dataflow.runtime.session", "from dataflow.kernels.numba_cpu import fused", True),
        ("dataflow.runtime.session", "from ..spec import interpret", True),
        ("dataflow.spec.interpreter", "from dataflow.runtime import session", True),
        ("dataflow.framework.graph", "from .. import viz", True),
        ("dataflow.viz", "from . import partition", True),
        ("dataflow.partition.partition", "import dataflow.cli", True),
        ("dataflow.framework.graph", "from .device_spec import canonical_device", False),
        ("dataflow.kernels.numpy_cpu.math", "from dataflow.framework import op_registry", False),
        ("dataflow.kernels.cuda.fused", "from ..registry import find_kernel", False),
        ("dataflow.kernels.numpy_cpu.math", "from dataflow import errors, dtypes", False),
        ("dataflow.runtime.plan", "from dataflow.kernels.registry import find_kernel", False),
        ("dataflow.runtime.plan", "from ..framework.graph import Operation", False),
        ("dataflow.autodiff.gradients", "from ..ops.array_ops import shape", False),
        ("dataflow.partition.partition", "from ..runtime.partitioned import run_on_threads",
         False),
        ("dataflow.cli", "import dataflow as df", False),
        ("benchmarks.compare", "from dataflow.kernels.numba_cpu import _dispatch", False),
        ("dataflow.framework.graph", "import numpy as np", False),
    ]
    for module, statement, expected in cases:
        found = back_imports(module, f"def f():\n    {statement}\n", known=known)
        assert bool(found) == expected, (module, statement, found)


def test_every_module_has_a_layer():
    assert [m for m, _, _ in package_modules() if layer_of(m) is None] == []
    assert set(MAY_IMPORT) == set(LAYER_OF.values())


def test_from_import_resolves_submodules_and_names():
    known = {"dataflow.framework.op_registry", "dataflow.framework.graph", "dataflow.errors"}
    got = imported_modules("dataflow.runtime.plan",
                           "from ..framework import op_registry as R\n"
                           "from ..framework.graph import Operation\n"
                           "from .. import errors\n", False, known)
    assert got == [(1, "dataflow.framework.op_registry"), (2, "dataflow.framework.graph"),
                   (3, "dataflow.errors")]
    # In a package's __init__, "." is the package itself.
    assert imported_modules("dataflow.ops", "from .array_ops import stack", True, known) \
        == [(1, "dataflow.ops.array_ops")]
