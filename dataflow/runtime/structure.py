"""Mapping nested fetch structures to a flat list of graph elements and back.

An ``IndexedSlices`` fetch is three graph elements (values, indices, dense_shape) and
comes back as an ``IndexedSlicesValue`` named tuple, as in TF; an Operation fetch
comes back as None.
"""
from __future__ import annotations

from ..framework.graph import Operation
from ..framework.indexed_slices import IndexedSlices, IndexedSlicesValue
from ..util import nest


class _SlicesFetch:
    """The graph elements of one fetched IndexedSlices (``dense_shape`` may be None)."""

    def __init__(self, slices, resolve):
        parts = (slices.values, slices.indices, slices.dense_shape)
        self.parts = tuple(None if p is None else resolve(p) for p in parts)

    def elements(self):
        return [p for p in self.parts if p is not None]

    def build(self, values):
        return IndexedSlicesValue(*(None if p is None else values[p] for p in self.parts))


class FetchMapper:
    """Flattens ``fetches`` to unique graph elements; ``build`` puts values back."""

    def __init__(self, fetches, graph):
        self._structure = fetches
        self._leaves = [self._leaf(f, graph) for f in nest.flatten(fetches)]
        seen, unique = set(), []
        for leaf in self._leaves:
            for el in (leaf.elements() if isinstance(leaf, _SlicesFetch) else [leaf]):
                if el not in seen:
                    seen.add(el)
                    unique.append(el)
        self.unique = unique

    @classmethod
    def _leaf(cls, fetch, graph):
        if isinstance(fetch, IndexedSlices):
            return _SlicesFetch(fetch, lambda t: cls._resolve(t, graph))
        return cls._resolve(fetch, graph)

    @staticmethod
    def _resolve(fetch, graph):
        if fetch is None:
            raise TypeError(f"Fetch argument None has invalid type {type(None)}")
        try:
            return graph.as_graph_element(fetch)
        except TypeError:
            raise TypeError(f"Fetch argument {fetch!r} has invalid type {type(fetch)}, must "
                            "be a string, Tensor, Operation or Variable.") from None
        except (KeyError, ValueError) as e:
            raise ValueError(f"Fetch argument {fetch!r} cannot be interpreted as a Tensor or "
                             f"Operation. ({e})") from None

    def build(self, values: dict):
        flat = [leaf.build(values) if isinstance(leaf, _SlicesFetch)
                else None if isinstance(leaf, Operation) else values[leaf]
                for leaf in self._leaves]
        if not nest.is_sequence(self._structure):
            return flat[0]
        return nest.pack_sequence_as(self._structure, flat)
