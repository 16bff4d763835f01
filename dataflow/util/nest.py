"""Nested structures (lists, tuples, namedtuples, dicts) of leaves: flatten and rebuild.

>>> flatten({"b": [1, 2], "a": 3})
[3, 1, 2]
>>> pack_sequence_as({"b": [0, 0], "a": 0}, [3, 1, 2])
{'b': [1, 2], 'a': 3}
"""
from __future__ import annotations

__all__ = ["flatten", "pack_sequence_as", "map_structure", "assert_same_structure",
           "is_sequence"]


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_sequence(x) -> bool:
    """True for the containers this module recurses into."""
    return isinstance(x, (list, tuple, dict))


def _children(x):
    if isinstance(x, dict):
        return [x[k] for k in sorted(x, key=_sort_key)]
    return list(x)


def _sort_key(k):
    return (type(k).__name__, k) if not isinstance(k, str) else ("str", k)


def flatten(structure) -> list:
    """The leaves of ``structure`` in order (dicts by sorted key, as in TF's nest)."""
    if not is_sequence(structure):
        return [structure]
    out = []
    for c in _children(structure):
        out.extend(flatten(c))
    return out


def _pack(structure, it):
    if not is_sequence(structure):
        return next(it)
    if isinstance(structure, dict):
        keys = sorted(structure, key=_sort_key)
        vals = {k: _pack(structure[k], it) for k in keys}
        return type(structure)((k, vals[k]) for k in structure)
    items = [_pack(c, it) for c in structure]
    if _is_namedtuple(structure):
        return type(structure)(*items)
    return type(structure)(items)


def pack_sequence_as(structure, flat_sequence):
    """Rebuild ``structure`` with leaves taken from ``flat_sequence``."""
    flat_sequence = list(flat_sequence)
    n = len(flatten(structure))
    if n != len(flat_sequence):
        raise ValueError(f"Structure had {n} leaves but flat_sequence had "
                         f"{len(flat_sequence)} elements.")
    return _pack(structure, iter(flat_sequence))


def map_structure(fn, *structures):
    """Apply ``fn`` to corresponding leaves of same-shaped structures."""
    for s in structures[1:]:
        assert_same_structure(structures[0], s)
    flats = [flatten(s) for s in structures]
    return pack_sequence_as(structures[0], [fn(*xs) for xs in zip(*flats)])


def _shape_of(x):
    if not is_sequence(x):
        return "leaf"
    if isinstance(x, dict):
        return ("dict", tuple((k, _shape_of(x[k])) for k in sorted(x, key=_sort_key)))
    kind = type(x).__name__ if _is_namedtuple(x) else "seq"
    return (kind, tuple(_shape_of(c) for c in x))


def assert_same_structure(a, b, check_types=False) -> None:
    """Raise ValueError (TypeError for differing container types) if the nests differ."""
    if _shape_of(a) != _shape_of(b):
        raise ValueError("The two structures don't have the same nested structure.\n\n"
                         f"First structure: {_describe(a)}\n\nSecond structure: {_describe(b)}")
    if check_types:
        _check_types(a, b)


def _check_types(a, b):
    if is_sequence(a):
        if type(a) is not type(b):
            raise TypeError(f"The two structures don't have the same sequence type: "
                            f"{type(a).__name__} vs {type(b).__name__}")
        for x, y in zip(_children(a), _children(b)):
            _check_types(x, y)


def _describe(x):
    return repr(map_structure_leaves(lambda _: ".", x))


def map_structure_leaves(fn, x):
    return pack_sequence_as(x, [fn(v) for v in flatten(x)])
