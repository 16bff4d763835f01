"""Higher-order functions over the first dimension: ``map_fn``, ``scan``, ``foldl``, ``foldr``.

Each is TF1's construction: the elements are unstacked into TensorArrays, a
``while_loop`` reads element ``i`` in iteration ``i``, applies ``fn`` and (map_fn,
scan) writes the result to an output TensorArray, which is stacked at the end. So
they run with the loop's ``parallel_iterations``, differentiate through the loop's
gradient (the TensorArray gradients), and accept nested structures of tensors
(tuples, lists, dicts, namedtuples) for ``elems`` and the accumulator.

>>> squares = map_fn(lambda x: x * x, constant([1.0, 2.0, 3.0]))
>>> sums = scan(lambda a, x: a + x, constant([1.0, 2.0, 3.0]))
>>> total = foldl(lambda a, x: a + x, constant([1, 2, 3]), initializer=0)
>>> df.Session().run([squares, sums, total])
[array([1., 4., 9.], dtype=float32), array([1., 3., 6.], dtype=float32), np.int32(6)]
"""
from __future__ import annotations

from ..framework.convert import constant, convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.tensor_shape import TensorShape
from ..ops.array_ops import shape as shape_of
from ..ops.tensor_array_ops import TensorArray
from ..util import nest
from .while_loop import while_loop

__all__ = ["map_fn", "scan", "foldl", "foldr"]


class _Structure:
    """Flattening and packing of a possibly nested argument (a bare tensor stays bare)."""

    def __init__(self, template):
        self.template = template
        self.is_sequence = nest.is_sequence(template)

    def flatten(self, x):
        return nest.flatten(x) if self.is_sequence else [x]

    def pack(self, flat):
        return nest.pack_sequence_as(self.template, list(flat)) if self.is_sequence \
            else flat[0]


def _check_fn(fn):
    if not callable(fn):
        raise TypeError("fn must be callable.")


def _flat_elems(structure, elems):
    flat = [convert_to_tensor(e, name="elem") for e in structure.flatten(elems)]
    if not flat:
        raise ValueError(f"elems must be a Tensor or (possibly nested) sequence of Tensors. "
                         f"Got {elems}")
    for e in flat:
        if e.shape.ndims == 0:
            raise ValueError(f"Elements in elems must be 1+ dimensional Tensors, not scalars: "
                             f"{e.name}")
    return flat


def _length(elems_flat):
    """The number of elements: static if known, else ``shape(elems[0])[0]``."""
    n = elems_flat[0].shape[0]
    static = n
    for e in elems_flat[1:]:
        d = e.shape[0]
        if static is not None and d is not None and d != static:
            raise ValueError(f"All elems must have the same first dimension: {static} != {d}")
        static = static if static is not None else d
    return (static if static is not None else shape_of(elems_flat[0])[0]), static


def _unstacked(elems_flat, n, with_element_shape):
    arrays = []
    for e in elems_flat:
        kwargs = {"element_shape": e.shape[1:]} if with_element_shape else {}
        arrays.append(TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True,
                                  **kwargs).unstack(e))
    return arrays


def _stacked(arrays, n_static):
    results = [ta.stack() for ta in arrays]
    for r in results:
        if r.shape.ndims is not None:
            r.set_shape(TensorShape([n_static] + r.shape.dims[1:]))
    return results


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True, swap_memory=False,
           infer_shape=True, name=None):
    """``stack([fn(elems[i]) for i in range(n)])`` along the first dimension.

    ``elems`` may be a nested structure of tensors with one first dimension; ``fn``
    then gets the same structure of slices. ``dtype`` gives the structure and dtypes
    of ``fn``'s results when they differ from ``elems``'.

    >>> x = constant([[1.0, 2.0], [3.0, 4.0]])
    >>> sums, prods = map_fn(lambda r: (df.reduce_sum(r), df.reduce_prod(r)), x,
    ...                      dtype=(df.float32, df.float32))
    >>> df.Session().run([sums, prods])
    [array([3., 7.], dtype=float32), array([ 2., 12.], dtype=float32)]
    """
    _check_fn(fn)
    if parallel_iterations is None:
        parallel_iterations = 10
    inputs = _Structure(elems)
    outputs = inputs if dtype is None else _Structure(dtype)
    g = get_default_graph()
    with g.name_scope(name or "map"):
        elems_flat = _flat_elems(inputs, elems)
        if dtype is None:
            dtype = inputs.pack([e.dtype for e in elems_flat])
        dtype_flat = outputs.flatten(dtype)
        n, n_static = _length(elems_flat)
        elems_ta = _unstacked(elems_flat, n, with_element_shape=False)
        accs_ta = [TensorArray(dt, size=n, dynamic_size=False, infer_shape=infer_shape)
                   for dt in dtype_flat]

        def compute(i, tas):
            values = fn(inputs.pack([ta.read(i) for ta in elems_ta]))
            try:
                nest.assert_same_structure(outputs.template if outputs.is_sequence
                                           else dtype_flat[0], values)
            except (TypeError, ValueError) as e:
                raise ValueError(f"The structure of fn's result does not match the "
                                 f"structure of dtype (or elems): {e}") from None
            flat = outputs.flatten(values)
            return i + 1, [ta.write(i, v) for ta, v in zip(tas, flat)]

        _, r_a = while_loop(lambda i, _: i < n, compute, (constant(0), accs_ta),
                            parallel_iterations=parallel_iterations, back_prop=back_prop,
                            swap_memory=swap_memory, maximum_iterations=n)
        return outputs.pack(_stacked(r_a, n_static))


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """The successive accumulator values of ``a = fn(a, elems[i])``, stacked.

    Without ``initializer`` the first element is the initial accumulator (and the
    first output). With ``reverse`` the elements are visited from the last.

    >>> cumsum = scan(lambda a, x: a + x, constant([1.0, 2.0, 3.0]))
    >>> fib = scan(lambda a, _: (a[1], a[0] + a[1]), constant([0, 0, 0, 0]),
    ...            initializer=(constant(0), constant(1)))
    >>> df.Session().run([cumsum, fib])
    [array([1., 3., 6.], dtype=float32),
     (array([1, 1, 2, 3], dtype=int32), array([1, 2, 3, 5], dtype=int32))]
    """
    _check_fn(fn)
    inputs = _Structure(elems)
    outputs = _Structure(initializer) if initializer is not None else inputs
    g = get_default_graph()
    with g.name_scope(name or "scan"):
        elems_flat = _flat_elems(inputs, elems)
        n, n_static = _length(elems_flat)
        elems_ta = _unstacked(elems_flat, n, with_element_shape=True)
        last = n - 1
        if initializer is None:
            a_flat = [ta.read(last if reverse else 0) for ta in elems_ta]
            start = 1
        else:
            a_flat = [convert_to_tensor(a) for a in outputs.flatten(initializer)]
            start = 0
        accs_ta = [TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape,
                               element_shape=a.shape if infer_shape else None)
                   for a in a_flat]
        if initializer is None:
            accs_ta = [ta.write(last if reverse else 0, a) for ta, a in zip(accs_ta, a_flat)]

        def compute(i, a_flat, tas):
            a_out = fn(outputs.pack(a_flat), inputs.pack([ta.read(i) for ta in elems_ta]))
            try:
                nest.assert_same_structure(
                    outputs.template if outputs.is_sequence else a_flat[0], a_out)
            except (TypeError, ValueError) as e:
                raise ValueError(f"The structure of fn's result does not match the "
                                 f"structure of the accumulator: {e}") from None
            flat_out = outputs.flatten(a_out)
            tas = [ta.write(i, v) for ta, v in zip(tas, flat_out)]
            return (i - 1 if reverse else i + 1), flat_out, tas

        if reverse:
            initial_i = last - start
            condition = lambda i, _1, _2: i >= 0  # noqa: E731
        else:
            initial_i = start
            condition = lambda i, _1, _2: i < n  # noqa: E731
        _, _, r_a = while_loop(condition, compute,
                               (convert_to_tensor(initial_i), a_flat, accs_ta),
                               parallel_iterations=parallel_iterations, back_prop=back_prop,
                               swap_memory=swap_memory, maximum_iterations=n)
        return outputs.pack(_stacked(r_a, n_static))


def _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory, name,
          from_right):
    _check_fn(fn)
    inputs = _Structure(elems)
    g = get_default_graph()
    with g.name_scope(name):
        elems_flat = _flat_elems(inputs, elems)
        n, _ = _length(elems_flat)
        elems_ta = _unstacked(elems_flat, n, with_element_shape=False)
        if from_right:
            if initializer is None:
                i = n - 1
                a = inputs.pack([ta.read(i) for ta in elems_ta])
            else:
                i, a = n, initializer

            def compute(i, a):
                i = i - 1
                return i, fn(a, inputs.pack([ta.read(i) for ta in elems_ta]))

            condition = lambda i, a: i > 0  # noqa: E731
        else:
            if initializer is None:
                a = inputs.pack([ta.read(0) for ta in elems_ta])
                i = 1
            else:
                a, i = initializer, 0

            def compute(i, a):
                return i + 1, fn(a, inputs.pack([ta.read(i) for ta in elems_ta]))

            condition = lambda i, a: i < n  # noqa: E731
        _, r_a = while_loop(condition, compute, (convert_to_tensor(i), a),
                            parallel_iterations=parallel_iterations, back_prop=back_prop,
                            swap_memory=swap_memory, maximum_iterations=n)
        return r_a


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``fn(...fn(fn(initializer, elems[0]), elems[1])..., elems[n-1])``.

    Without ``initializer``, ``elems[0]`` starts the accumulation.

    >>> df.Session().run(foldl(lambda a, x: a * 10 + x, constant([1, 2, 3])))
    np.int32(123)
    """
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory,
                 name or "foldl", from_right=False)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``fn(...fn(fn(initializer, elems[n-1]), elems[n-2])..., elems[0])``.

    Without ``initializer``, ``elems[n-1]`` starts the accumulation.

    >>> df.Session().run(foldr(lambda a, x: a * 10 + x, constant([1, 2, 3])))
    np.int32(321)
    """
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, swap_memory,
                 name or "foldr", from_right=True)
