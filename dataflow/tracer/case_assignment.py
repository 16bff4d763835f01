"""Terra's case assignment (the seed's Algorithm 1) and its coverage condition.

:func:`assign_cases` takes a TraceGraph's edges (a DAG from a unique ``start`` to a
unique ``end``) and returns the ordered list of *switch-cases*; a switch-case is a list
of *cases* ``(basic block, control edges)``: a basic block is a linear chain of nodes
(possibly empty), its control edges the edges that lead into it. Each switch-case with
more than one case becomes a Switch-Case in the generated graph, chosen by a Case Select
that the Python side feeds when it takes one of the control edges.

One extension: the seed's Algorithm 1 never lets an edge into ``end`` be a control
edge, so a path that ends before others (an early return, an empty step) would select
no case of the later switch-cases (its Theorem 1 fails on such graphs, and a graph would
wait forever for that Case Select). Here such edges form an empty "exit" case of each
switch-case made while they are pending. On graphs whose paths all end together the
result is exactly Algorithm 1's.

The seed's walk-through (its Figure 2): node 1 branches to the chains 2-3 and 4-5 and to
node 6; 3 and 5 join at 7; 6 and 7 join at 8, followed by 9.

>>> E = [("s", 1), (1, 2), (1, 4), (1, 6), (2, 3), (4, 5), (3, 7), (5, 7), (6, 8),
...      (7, 8), (8, 9), (9, "e")]
>>> for sc in assign_cases(E, "s", "e"):
...     print([(block, sorted(ctrl)) for block, ctrl in sc])
[([1], [('s', 1)])]
[([2, 3], [(1, 2)]), ([4, 5], [(1, 4)]), ([6], [(1, 6)])]
[([7], [(3, 7), (5, 7)]), ([], [(6, 8)])]
[([8, 9], [(6, 8), (7, 8)])]
"""
from __future__ import annotations

__all__ = ["assign_cases", "covers", "all_paths"]


def _adjacency(edges):
    out, into = {}, {}
    for u, v in edges:
        out.setdefault(u, []).append(v)
        into.setdefault(v, []).append(u)
    return out, into


def assign_cases(edges, start, end, order=None) -> list:
    """Algorithm 1: the ordered list of switch-cases covering every start-end path.

    ``order`` (optional) maps a node to a sort key: cases of one switch-case are listed
    in that order (default: the order nodes first appear in ``edges``).
    """
    edges = list(dict.fromkeys(edges))
    out, into = _adjacency(edges)
    if order is None:
        seen = {}
        for u, v in edges:
            seen.setdefault(u, len(seen))
            seen.setdefault(v, len(seen))
        order = seen.__getitem__
    result = []
    next_edges = {(start, y) for y in out.get(start, ())}                    # line 2
    while any(y != end for _, y in next_edges):                              # line 4
        switch_case = []
        new_next = set()
        for v in sorted({y for _, y in next_edges if y != end}, key=order):  # line 8
            control = frozenset(e for e in next_edges if e[1] == v)         # line 9
            block = []
            if all((u, v) in next_edges for u in into.get(v, ())):          # line 12
                block.append(v)
                while True:                                                  # line 16
                    succ = out.get(v, ())
                    if len(succ) != 1 or succ[0] == end or len(into[succ[0]]) != 1:
                        break
                    v = succ[0]
                    block.append(v)
                new_next |= set((v, y) for y in out.get(v, ()))              # line 20
            else:
                new_next |= control                                          # line 23
            switch_case.append((block, control))                             # line 25
        exits = frozenset(e for e in next_edges if e[1] == end)
        if exits:   # paths that have ended: an empty case, carried to the next ones
            switch_case.append(([], exits))
            new_next |= exits
        result.append(switch_case)
        next_edges = new_next
    return result


def all_paths(edges, start, end) -> list:
    """Every start-end path of a DAG, as lists of edges (for tests: exponential)."""
    out, _ = _adjacency(dict.fromkeys(edges))
    paths = []

    def walk(u, path):
        if u == end:
            paths.append(list(path))
            return
        for v in out.get(u, ()):
            path.append((u, v))
            walk(v, path)
            path.pop()

    walk(start, [])
    return paths


def covers(switch_cases, path, end) -> bool:
    """Definition 5 of the seed: the switch-cases cover the trace whose edge list is
    ``path``. In every switch-case exactly one case has exactly one control edge on the
    path; the chosen blocks are exactly the path's nodes; the path's edges are the
    chosen control edges, the blocks' in-chain edges and the final edge into ``end``."""
    path_edges = set(path)
    nodes, edges = [], set()
    for sc in switch_cases:
        chosen = [(block, ctrl & path_edges) for block, ctrl in sc if ctrl & path_edges]
        if len(chosen) != 1 or len(chosen[0][1]) != 1:
            return False
        block, (d,) = chosen[0][0], tuple(chosen[0][1])
        nodes.extend(block)
        edges.add(d)
        edges.update(zip(block, block[1:]))
    last = [e for e in path if e[1] == end]
    path_nodes = [v for _, v in path if v != end]
    return (sorted(map(repr, nodes)) == sorted(map(repr, path_nodes))
            and len(nodes) == len(set(map(repr, nodes)))
            and edges | set(last) == path_edges)
