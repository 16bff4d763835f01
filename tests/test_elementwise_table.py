"""The elementwise op table (dataflow/framework/elementwise_table.py) and what is derived
from it: op definitions, wrappers, gradients, NumPy, Numba, fused and CUDA kernels, and
the fusion pass's fusable set. A new row, added in a fresh process, must get all of them.
"""
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

import dataflow as df
from dataflow.autodiff import registry as grad_registry
from dataflow.framework import op_registry
from dataflow.framework.elementwise_table import CUSTOM, ELEMENTWISE, cuda_dtypes, fusable_ops
from dataflow.kernels import registry
from dataflow.kernels.numba_cpu import _dispatch
from dataflow.ops import math_ops
from dataflow.runtime import fusion

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _op(row, dtype=df.float32):
    """A node of ``row``'s op type on placeholders (in the current default graph)."""
    ins = [df.placeholder(dtype, [4]) for _ in range(row.arity)]
    return df.get_default_graph().create_op(row.name, ins).outputs[0].op


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_every_row_is_defined_differentiated_and_has_a_reference_kernel(graph, name):
    row = ELEMENTWISE[name]
    assert op_registry.get_op_def(name) is not None
    if row.wrapper:
        assert getattr(math_ops, row.wrapper).__name__ == row.wrapper
    if row.grad is None:
        assert grad_registry.is_not_differentiable(name)
    else:  # CUSTOM ones are written out in autodiff (Relu's in nn_grad)
        assert grad_registry.get_gradient_function(SimpleNamespace(type=name)) is not None
    dtype = {"bool": df.bool, "float": df.float32}.get(row.dtypes, df.float32)
    op = _op(row, dtype)
    assert registry.reference_kernel(op)(registry.KernelContext(op=op)) is row.numpy


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_compiled_kernels_exist_exactly_for_rows_with_scalar_code(graph, name):
    row = ELEMENTWISE[name]
    has_gpu = registry._find_entry(_op(row, df.bool if row.dtypes == "bool" else df.float32),
                                   "GPU") is not None
    assert has_gpu == (row.cuda_scalar is not None)
    if row.dtypes in ("float", "numeric"):
        factory = registry.find_kernel(_op(row), "CPU")
        assert getattr(factory, "numba_cpu", False) == (row.fusable and _dispatch.ENABLED)
    assert (name in fusion.FUSABLE) == row.fusable
    if row.cuda_scalar is not None:
        assert "float32" in cuda_dtypes(row) or row.dtypes == "bool"


_WRONG_DTYPE = {"float": df.int32, "numeric": df.bool, "bool": df.float32}


@pytest.mark.parametrize("name", sorted(n for n, r in ELEMENTWISE.items()
                                        if r.wrapper and r.dtypes in _WRONG_DTYPE))
def test_wrappers_reject_the_dtypes_their_row_does_not_take(graph, name):
    row = ELEMENTWISE[name]
    wrong = _WRONG_DTYPE[row.dtypes]
    args = [df.placeholder(wrong, [2]) for _ in range(row.arity)]
    with pytest.raises(TypeError, match=f"of {name} has DataType {wrong.name}"):
        getattr(math_ops, row.wrapper)(*args)


def test_fusable_set_is_the_table_rows_with_float_scalar_code():
    assert fusion.FUSABLE == fusable_ops()
    assert {"Tanh", "Sigmoid", "TanhGrad", "SquaredDifference", "Relu"} <= set(fusion.FUSABLE)
    assert not {"Less", "LogicalNot", "Pow", "Log1p"} & set(fusion.FUSABLE)


def test_custom_gradients_are_registered():
    for row in ELEMENTWISE.values():
        if row.grad is CUSTOM:
            assert grad_registry.get_gradient_function(SimpleNamespace(type=row.name)), row.name


# A row added before dataflow is imported: the table module is loaded on its own, given
# one more op (x cubed), and put in sys.modules so that every importer sees that table.
_NEW_ROW_PROBE = r'''
import importlib.util, sys
import numpy as np
spec = importlib.util.spec_from_file_location(
    "dataflow.framework.elementwise_table", "dataflow/framework/elementwise_table.py")
T = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = T
spec.loader.exec_module(T)


def cube(x):
    return x * x * x


T.ELEMENTWISE["Cube"] = T.ElementwiseOp(
    "Cube", 1, "float", cube, "cube", "({0} * {0} * {0})",
    grad=lambda ops, g, x, z: [g * (3.0 * x * x)])

import dataflow as df
from dataflow.kernels import registry
from dataflow.kernels.numba_cpu import fused
from dataflow.ops import math_ops
from dataflow.runtime import fusion
from dataflow.runtime.plan import build_plan

x = df.placeholder(df.float32, [None])
c = math_ops.cube(x)
y = df.tanh(c * 2.0)
gx = df.gradients(df.reduce_sum(c), x)[0]
ctx = registry.KernelContext(op=c.op)
numba_fn = registry.find_kernel(c.op, "CPU")(ctx)
gpu = registry.find_kernel(c.op, "GPU")
v = np.linspace(-2, 2, 40000, dtype=np.float32)
fused.set_numba_min_size(1)
with df.Session() as sess:
    got_y, got_g = sess.run([y, gx], {x: v})
plan = build_plan(df.get_default_graph(), [y], [], [x], lambda op: None, fuse_elementwise=True)
checks = {
    "fusable": fusion.FUSABLE.get("Cube") == 1,
    "numba": getattr(registry.find_kernel(c.op, "CPU"), "numba_cpu", False),
    "numba_exact": np.array_equal(numba_fn(v), v * v * v),
    "cuda": gpu is not None and gpu.__module__ == "dataflow.kernels.cuda.elementwise",
    "value": bool(np.allclose(got_y, np.tanh(v * v * v * 2), rtol=1e-6, atol=1e-6)),
    "gradient": bool(np.allclose(got_g, 3 * v * v, rtol=1e-6)),
    "fused": c.op in plan.fusion.absorbed,
}
print(sorted(k for k, ok in checks.items() if not ok))
'''


def test_a_new_row_gets_definition_wrapper_gradient_kernels_and_fusion():
    out = subprocess.run([sys.executable, "-c", _NEW_ROW_PROBE], cwd=REPO, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": REPO})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("path", ["dataflow/framework/elementwise_table.py",
                                  "dataflow/framework/fused_expr.py"])
def test_the_contract_modules_are_leaves(path):
    # ops, autodiff, kernels and runtime all import them: they import no dataflow module.
    import ast
    with open(os.path.join(REPO, path)) as f:
        tree = ast.parse(f.read())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "." for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)
                 and (node.level or not node.module.startswith("__future__"))}
    assert {m.split(".")[0] for m in imported} <= {"operator", "dataclasses", "typing", "numpy"}
