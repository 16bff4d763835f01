"""Mapping nested fetch structures to a flat list of graph elements and back."""
from __future__ import annotations

from ..framework.graph import Operation
from ..util import nest


class FetchMapper:
    """Flattens ``fetches`` to unique graph elements; ``build`` puts values back."""

    def __init__(self, fetches, graph):
        self._structure = fetches
        self._leaves = [self._resolve(f, graph) for f in nest.flatten(fetches)]
        seen, unique = set(), []
        for el in self._leaves:
            if el not in seen:
                seen.add(el)
                unique.append(el)
        self.unique = unique

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
        flat = [None if isinstance(el, Operation) else values[el] for el in self._leaves]
        if not nest.is_sequence(self._structure):
            return flat[0]
        return nest.pack_sequence_as(self._structure, flat)
