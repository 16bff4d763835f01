"""The CPU kernel of fused elementwise nodes (``FusedElementwise``), generated per expression.

The fusion pass (``dataflow/runtime/fusion.py``) describes a group of elementwise ops
by a :class:`~dataflow.framework.fused_expr.FusedExpr`; the factory registered here turns it
into one callable with two paths:

* **small values** (NumPy scalars, arrays below :data:`NUMBA_MIN_SIZE` elements, or
  :data:`NUMBA_MIN_SIZE_TRANSCENDENTAL` when tanh/exp/log/sigmoid appear: below these
  the compiled path's fixed cost of about 4 µs does not pay): a generated straight-line
  Python function that applies the NumPy reference kernels instruction by instruction,
  so its results are bitwise those of the unfused NumPy graph, and a chain of scalar
  ops costs one executor step instead of one per op;
* **large arrays**: a generated ``@njit(nogil=True, cache=True)`` loop that makes one
  pass over memory with no temporaries: 1-D over the flattened arrays when every array
  input has the output's shape and is C-contiguous, a rows-by-columns loop when the
  others are vectors along the last axis (a bias), else a loop nest over broadcast
  views. ``tanh``, ``exp``, ``log`` and ``sigmoid`` use the vectorizable
  approximations of :mod:`dataflow.kernels.approx` (error bounds in its docstring); arithmetic,
  ``sqrt``, ``abs``, min/max are exact, so arithmetic-only expressions match NumPy bit
  for bit. Big flat arrays are split over the cores (the kernels release the GIL), and
  a large output is reused by the next call once nothing references it (see
  ``_CompiledPath._output``).

Each op's code comes from its row of the elementwise op table
(:mod:`dataflow.framework.elementwise_table`): its NumPy function on the small path
(Python operators inline), its scalar expression in the loop.

Numba's disk cache only works for functions defined in a source file, so the loop's
source is written once into :func:`cache_dir` as a module named by the source's hash
and imported from there; a new process then loads the machine code instead of
compiling (measured in ``benchmarks/fusion_table.py``). Nothing is imported from Numba
until a large array first reaches a fused kernel.

>>> from dataflow.runtime.fusion import FusedExpr
>>> a, b = df.placeholder(df.float32), df.placeholder(df.float32)
>>> expr = FusedExpr((a, b), (("Mul", (("input", 0), ("input", 1))),
...                           ("Tanh", (("value", 0),))), "float32")
>>> bool(python_function(expr)(np.float32(1), np.float32(2)) == np.tanh(np.float32(2)))
True
"""
from __future__ import annotations

import hashlib
import operator
import importlib.util
import os
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...framework.elementwise_table import ELEMENTWISE, square
from ...framework.fused_expr import FUSED_OP_TYPE
from ...util.float_env import in_callers_mode
from ..registry import register_kernel

__all__ = ["NUMBA_MIN_SIZE", "NUMBA_MIN_SIZE_TRANSCENDENTAL", "PARALLEL_MIN_SIZE",
           "REUSE_MIN_BYTES", "cache_dir", "fused_kernel", "loop_source", "numba_kernel",
           "python_function", "set_numba_min_size", "use_approx"]

#: Array sizes (elements) from which the compiled loop runs instead of NumPy calls:
#: for arithmetic-only expressions, and for those with tanh/exp/log/sigmoid (NumPy's
#: are slow there). Measured here (float32, 1-D): the compiled path costs ~4.3 µs at
#: 64 elements; NumPy calls ~1.3 µs for ``a*b + c`` up to 5.4 µs at 16384 elements, but
#: 6.6 µs for ``tanh(a*b + c)*0.5 + a`` at 1024 elements against the loop's 5.2 µs.
NUMBA_MIN_SIZE = 16384
NUMBA_MIN_SIZE_TRANSCENDENTAL = 1024
_TRANSCENDENTAL = frozenset(r.name for r in ELEMENTWISE.values() if r.transcendental)
#: Flat sizes from which the compiled loop is split over the cores. Not lower for
#: tanh/exp/log/sigmoid, although they cost ~1 ns per element: such a loop usually
#: follows a matmul whose BLAS threads keep spinning on the other core for a while, and
#: splitting the MLP's 1797 x 64 ``sigmoid(x @ W + b)`` made the Adam step 0.12 ms slower.
PARALLEL_MIN_SIZE = 1 << 18
#: Outputs from this size (bytes) are kept for reuse once dead (see ``_output``).
REUSE_MIN_BYTES = 1 << 20

# -- the small-value path: NumPy reference kernels, composed ------------------------------

# Operators inline (the reference functions are exactly these operators); the other ops
# call their NumPy function from the elementwise op table, so results are the unfused ones.
_PY_OPERATORS = {
    operator.add: "({0} + {1})", operator.sub: "({0} - {1})", operator.mul: "({0} * {1})",
    operator.truediv: "({0} / {1})", operator.neg: "(-{0})", operator.abs: "abs({0})",
    square: "({0} * {0})",
}

# -- the compiled path: per-element code on typed scalars ---------------------------------

# Each op's code is its table row's scalar expression. ``_one``/``_zero`` are typed
# constants of the expression's dtype (a bare ``1.0`` would promote float32 arithmetic to
# float64 and round differently from NumPy).

# The transcendental functions: kernels.approx's vectorizable ones, or NumPy's (one libm
# call per element, about 20x slower) where that module is missing or switched off.
_APPROX_IMPORT = ("from dataflow.kernels.approx import exp as _exp, log as _log, tanh as _tanh, "
                  "sigmoid as _sigmoid")
_LIBM_DEFS = '''
_exp, _log, _tanh = np.exp, np.log, np.tanh


@njit(inline="always")
def _sigmoid(x):
    return _one / (_one + np.exp(-x))
'''

_use_approx = [importlib.util.find_spec("dataflow.kernels.approx") is not None]


def use_approx(flag: bool) -> bool:
    """Switch the approximations of :mod:`dataflow.kernels.approx` on or off for kernels generated
    from now on (off: NumPy's libm calls); returns the previous setting."""
    old, _use_approx[0] = _use_approx[0], bool(flag)
    return old


def _arg(a) -> str:
    kind, x = a
    if kind == "input":
        return f"a{x}"
    if kind == "value":
        return f"v{x}"
    return f"c_{_const_name(x)}"


def _const_name(hex_value: str) -> str:
    return hashlib.sha1(hex_value.encode()).hexdigest()[:12]


def _consts(program) -> dict:
    return {a[1]: f"c_{_const_name(a[1])}" for _, args in program for a in args
            if a[0] == "const"}


def _body(program, templates, indent="    ") -> list:
    lines = []
    for i, (op_type, args) in enumerate(program):
        lines.append(f"{indent}v{i} = " + templates(op_type).format(*map(_arg, args)))
    return lines


_py_cache: dict = {}
_lock = threading.RLock()


def python_function(expr):
    """The callable of a fused node: ``fn(*input_values) -> value``.

    Small values run generated straight-line code over the NumPy reference kernels;
    when an array input reaches :data:`NUMBA_MIN_SIZE` elements it calls the compiled
    loop instead. Cached by ``expr.key``.
    """
    key = expr.key
    fn = _py_cache.get(key)
    if fn is None:
        with _lock:
            fn = _py_cache.get(key)
            if fn is None:
                fn = _py_cache[key] = _make_python_function(expr.program, expr.dtype,
                                                            expr.num_inputs)
    return fn


def _make_python_function(program, dtype, n, dispatch=True):
    """``def fused(a0, ...)``: straight-line calls of the reference kernels, and with
    ``dispatch`` a first test that hands large arrays to the compiled loop."""
    names = [f"a{k}" for k in range(n)]
    lines = [f"def fused({', '.join(names)}):"]
    if dispatch:
        which = int(any(op in _TRANSCENDENTAL for op, _ in program))
        big = " or ".join(f"(type({a}) is _ndarray and {a}.size >= _min_size[{which}])"
                          for a in names)
        lines += [f"    if {big}:", f"        return _compiled(({', '.join(names)},))"]
    lines += _body(program, _py_template)
    lines.append(f"    return v{len(program) - 1}")
    namespace = {"_ndarray": np.ndarray, "_min_size": _min_size}
    if dispatch:
        namespace["_compiled"] = _CompiledPath(program, dtype)
    namespace.update({f"_ref_{t}": ELEMENTWISE[t].numpy for t in {op for op, _ in program}})
    np_type = np.dtype(dtype).type
    namespace.update({name: np_type(float.fromhex(h)) for h, name in _consts(program).items()})
    exec(compile("\n".join(lines) + "\n", f"<fused {_short(program)}>", "exec"), namespace)
    return namespace["fused"]


def _py_template(op_type):
    row = ELEMENTWISE[op_type]
    inline = _PY_OPERATORS.get(row.numpy)
    if inline is not None:
        return inline
    return f"_ref_{op_type}(" + ", ".join("{%d}" % i for i in range(row.arity)) + ")"


def _nb_template(op_type):
    return ELEMENTWISE[op_type].scalar


_min_size = [NUMBA_MIN_SIZE, NUMBA_MIN_SIZE_TRANSCENDENTAL]


def set_numba_min_size(n):
    """Set the sizes from which the compiled loop runs: one int for both kinds of
    expression (tests use 1) or the pair returned by an earlier call."""
    old = tuple(_min_size)
    _min_size[:] = (n, n) if isinstance(n, int) else n
    return old


def _short(program) -> str:
    return " ".join(op for op, _ in program)


# -- the compiled path ----------------------------------------------------------------------

class _CompiledPath:
    """Runs a program's compiled loop on argument values of any shapes."""

    def __init__(self, program, dtype):
        self.program, self.dtype = program, np.dtype(dtype)
        self.scalar = self.dtype.type
        self.kernels = {}
        self.plain = None
        self.spare = None     # the last large output, reused once nobody holds it
        self.lock = threading.Lock()

    def __call__(self, args):
        shape, same, contiguous, kinds = None, True, True, ""
        for a in args:
            if type(a) is np.ndarray and a.ndim:
                kinds += "a"
                if shape is None:
                    shape = a.shape
                elif a.shape != shape:
                    same = False
                if not a.flags.c_contiguous:
                    contiguous = False
            else:
                kinds += "s"
        if shape is None:
            return self._plain(args)
        if not same:
            shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        flat = same and contiguous
        if not flat:
            rows = _as_rows(args, kinds, shape, self.scalar)
            if rows is not None:
                out = self._output(shape)
                vals, kinds = rows
                _run_split(self._kernel(kinds, "rows"), out.reshape(-1, shape[-1]), vals,
                           kinds)
                return out
        vals = [self._value(a, k, shape, flat) for a, k in zip(args, kinds)]
        out = self._output(shape)
        kernel = self._kernel(kinds, None if flat else len(shape))
        _run_split(kernel, out.reshape(-1) if flat and len(shape) > 1 else out, vals, kinds)
        return out

    def _value(self, a, kind, shape, flat):
        """``a`` as the loop takes it: a typed scalar, a flat array or a broadcast view."""
        if kind == "s":
            return a if type(a) is self.scalar else self.scalar(a)
        if flat:
            return a if a.ndim == 1 else a.reshape(-1)
        return a if a.shape == shape else np.broadcast_to(a, shape)

    def _output(self, shape):
        """A fresh output array, or the previous one when nothing references it any more.

        A new large array costs a page fault per page on first write (for the chain
        benchmark, more than the loop itself), so the last large output is kept and
        reused once its reference count shows that only this object holds it, as a
        caching allocator would reuse a freed block.
        """
        with self.lock:  # one caller at a time may take the spare
            spare, self.spare = self.spare, None
        # References: ``spare`` and getrefcount's argument; any other is a live user.
        if spare is not None and spare.shape == shape and sys.getrefcount(spare) == 2:
            out = spare
        else:
            out = np.empty(shape, self.dtype)
        if out.nbytes >= REUSE_MIN_BYTES:
            self.spare = out
        return out

    def _plain(self, args):
        """0-d values only (possible when tests lower the size threshold)."""
        if self.plain is None:
            self.plain = _make_python_function(self.program, self.dtype.name, len(args),
                                               dispatch=False)
        return self.plain(*args)

    def _kernel(self, kinds, ndim):
        key = (kinds, ndim, _use_approx[0])
        k = self.kernels.get(key)
        if k is None:
            k = self.kernels[key] = numba_kernel(self.program, self.dtype.name, kinds, ndim)
        return k


def _as_rows(args, kinds, shape, scalar):
    """The arguments as a rows loop takes them, or None when some input does not fit.

    The common broadcast of a training graph is a bias: a matrix plus a vector that
    runs along its last axis. Seen as ``(rows, cols)``, full-shape inputs are C-contiguous
    matrices (kind ``"a"``) or column slices of a wider matrix (kind ``"w"``, see
    :func:`_strided_rows`) and the bias a contiguous vector read at the column index
    (kind ``"r"``), so the inner loop has unit stride everywhere and vectorizes (the
    general loop nest over broadcast views does not).
    """
    if len(shape) < 2:
        return None
    cols = shape[-1]
    vals, out_kinds = [], ""
    for a, k in zip(args, kinds):
        if k == "s":
            vals.append(a if type(a) is scalar else scalar(a))
            out_kinds += "s"
        elif not a.flags.c_contiguous:
            view = _strided_rows(a, shape)
            if view is None:
                return None
            vals.append(view)
            out_kinds += "w"
        elif a.shape == shape:
            vals.append(a.reshape(-1, cols))
            out_kinds += "a"
        elif a.size == cols and a.shape[-1] == cols:
            vals.append(a.reshape(cols))
            out_kinds += "r"
        else:
            return None
    return vals, out_kinds


def _strided_rows(a, shape):
    """``a`` as a ``(rows, cols)`` view whose rows are contiguous but spaced apart, or None.

    Column slices of a wider matrix (an LSTM's four gates cut from one ``[batch, 4H]``
    matmul, a ``split`` along the last axis) are such views. Numba cannot vectorize a
    loop over a non-contiguous array (its strides are only known at run time), which made
    the LSTM cell's fused gates 12x slower than on copies; the rows loop tests that their
    last stride is one element, under which LLVM vectorizes (see :func:`loop_source`).
    """
    if a.shape != shape or a.strides[-1] != a.itemsize:
        return None
    strides = a.strides
    for d in range(len(shape) - 2):  # leading axes must merge into one row axis
        if strides[d] != strides[d + 1] * shape[d + 1]:
            return None
    if strides[-2] < 0 or strides[-2] % a.itemsize:
        return None
    return a.reshape(-1, shape[-1]) if len(shape) > 2 else a


_pool = None


def _workers():
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=_CPUS,
                                           thread_name_prefix="dataflow-fused")
    return _pool


def _num_cpus() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_CPUS = _num_cpus()


def _run_split(kernel, out, vals, kinds):
    """Run ``kernel(out, *vals)``, split along axis 0 over the cores when it is big."""
    if out.size < PARALLEL_MIN_SIZE or _CPUS < 2 or out.shape[0] < _CPUS:
        kernel(out, *vals)
        return
    n, parts = out.shape[0], _CPUS
    bounds = [n * i // parts for i in range(parts + 1)]
    futures = []
    for lo, hi in zip(bounds[1:-1], bounds[2:]):
        chunk = [v[lo:hi] if k in "aw" else v for v, k in zip(vals, kinds)]
        # in the calling thread's floating-point mode (flush to zero or not)
        futures.append(_workers().submit(in_callers_mode(kernel), out[lo:hi], *chunk))
    hi0 = bounds[1]
    kernel(out[:hi0], *[v[:hi0] if k in "aw" else v for v, k in zip(vals, kinds)])
    for f in futures:
        f.result()


# -- generating and loading the loop modules ---------------------------------------------

_modules: dict = {}


def cache_dir() -> str:
    """Where generated kernel modules (and Numba's cache of them) live:
    ``$DATAFLOW_CACHE_DIR``, else ``$XDG_CACHE_HOME/dataflow/fused`` (``~/.cache``),
    else a per-user directory under the system's temporary directory."""
    explicit = os.environ.get("DATAFLOW_CACHE_DIR")
    candidates = [explicit] if explicit else []
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidates += [os.path.join(base, "dataflow", "fused"),
                   os.path.join(tempfile.gettempdir(),
                                f"dataflow-fused-{getattr(os, 'getuid', lambda: 0)()}")]
    for path in candidates:
        try:
            os.makedirs(path, exist_ok=True)
            if os.access(path, os.W_OK):
                return path
        except OSError:
            continue
    raise OSError(f"No writable directory for fused kernels among {candidates}")


def numba_kernel(program, dtype, kinds, ndim):
    """The compiled loop ``kernel(out, *args)`` of ``program``.

    ``kinds[k]`` is ``"a"`` (array), ``"r"`` (a row vector, read at the column index),
    ``"w"`` (a matrix of strided rows, see :func:`_strided_rows`) or ``"s"`` (scalar) for argument ``k``; ``ndim`` None means flat 1-D arrays of the output's
    size, ``"rows"`` a ``(rows, cols)`` loop over C-contiguous matrices, strided rows and
    row vectors (see :func:`_as_rows`), else a loop nest over ``ndim`` axes (arrays
    already broadcast to the output's shape).
    """
    source = loop_source(program, dtype, kinds, ndim)
    digest = hashlib.sha1(source.encode()).hexdigest()[:20]
    name = f"dataflow_fused_{digest}"
    with _lock:
        module = _modules.get(name)
        if module is None:
            module = _modules[name] = _load(name, source)
    return module.kernel


def _load(name, source):
    directory = cache_dir()
    path = os.path.join(directory, name + ".py")
    if not os.path.exists(path):
        # Write under a private name and rename: another process may be loading it.
        fd, tmp = tempfile.mkstemp(suffix=".py", dir=directory)
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _approx_fingerprint() -> str:
    """A hash of dataflow/kernels/approx.py: Numba keys cached callers on their own file only, so
    an edited approx module must change the generated file's name."""
    spec = importlib.util.find_spec("dataflow.kernels.approx")
    with open(spec.origin, "rb") as f:
        return hashlib.sha1(f.read()).hexdigest()[:16]


def loop_source(program, dtype, kinds, ndim) -> str:
    """Python source of the module holding the compiled loop (see :func:`numba_kernel`)."""
    approx = _use_approx[0]
    lines = [f"# Generated by dataflow/kernels/numba_cpu/fused.py: {_short(program)} ({dtype}).",
             f"# approx: {_approx_fingerprint() if approx else 'off'}",
             "import numpy as np", "from numba import njit",
             _APPROX_IMPORT if approx else "", "",
             f"_one = np.{dtype}(1.0)", f"_zero = np.{dtype}(0.0)"]
    for h, name in sorted(_consts(program).items(), key=lambda kv: kv[1]):
        lines.append(f"{name} = np.{dtype}(float.fromhex({h!r}))")
    lines.append("_sqrt = np.sqrt")
    if not approx:
        lines.append(_LIBM_DEFS)
    n = len(kinds)
    args = [f"a{k}" for k in range(n)]
    lines += ["", "@njit(inline=\"always\")", f"def _element({', '.join(args)}):"]
    lines += _body(program, _nb_template)
    lines.append(f"    return v{len(program) - 1}")
    lines += ["", "", "@njit(nogil=True, cache=True, error_model=\"numpy\")",
              f"def kernel(out, {', '.join(args)}):"]
    if ndim is None:
        index, indent = "i", "        "
        lines.append("    for i in range(out.shape[0]):")
    elif ndim == "rows":
        index, indent = "i0, i1", "            "
        rows_loop = ["for i0 in range(out.shape[0]):", "    for i1 in range(out.shape[1]):"]
        strided = [a for a, kind in zip(args, kinds) if kind == "w"]
        if strided:
            # Strided rows: under this test (always true, see _strided_rows) LLVM knows
            # their last stride and vectorizes the inner loop; the else is a safe copy.
            itemsize = np.dtype(dtype).itemsize
            test = " and ".join(f"{a}.strides[1] == {itemsize}" for a in strided)
            indent += "    "
            lines += [f"    if {test}:"] + ["        " + line for line in rows_loop]
            lines.append(indent + _store(args, kinds, index))
            lines.append("    else:")
            lines += ["        " + line for line in rows_loop]
        else:
            lines += ["    " + line for line in rows_loop]
    else:
        index = ", ".join(f"i{d}" for d in range(ndim))
        indent = "    "
        for d in range(ndim):
            lines.append(f"{indent}for i{d} in range(out.shape[{d}]):")
            indent += "    "
    lines.append(indent + _store(args, kinds, index))
    return "\n".join(lines) + "\n"


def _store(args, kinds, index) -> str:
    """The loop body: one output element from the arguments' elements at ``index``."""
    at = {"a": f"[{index}]", "w": f"[{index}]", "r": "[i1]", "s": ""}
    elems = [a + at[kind] for a, kind in zip(args, kinds)]
    return f"out[{index}] = _element({', '.join(elems)})"


# -- the registered kernel --------------------------------------------------------------

def fused_kernel(ctx):
    """Kernel factory of ``FusedElementwise`` on the CPU: ``ctx.op.expr`` is the
    :class:`~dataflow.framework.fused_expr.FusedExpr` of the node."""
    return python_function(ctx.op.expr)


register_kernel(FUSED_OP_TYPE, device="CPU", dtypes=["float32", "float64"])(fused_kernel)
