"""Graphviz DOT text for graphs and partitioned graphs.

``graph.to_dot()`` (and ``to_dot()`` on a partition result) return DOT text:

* every op is a node labelled with its name and op type, filled with its device's
  colour (a legend lists the devices);
* each while-loop frame is a cluster, nested inside its parent frame's cluster;
* data edges are solid, control edges dashed grey, loop back edges (out of a
  NextIteration) dotted, and Send -> Recv pairs of a partitioned graph bold red.

>>> g = df.Graph()
>>> with g.as_default():
...     i = df.while_loop(lambda i: i < 3, lambda i: i + 1, [0])
>>> text = g.to_dot()
>>> "subgraph \\"cluster_" in text
True

Render with ``dot -Tsvg`` (:func:`render`) or the ``dataflow viz`` command.
"""
from __future__ import annotations

import shutil
import subprocess

from .framework import graph as _graph
from .framework import op_registry as R

__all__ = [
    "DEVICE_COLOURS",
    "DotNotFoundError",
    "frames_of",
    "graph_to_dot",
    "partition_to_dot",
    "render",
]

# Fill colours for devices, in order of the sorted device names (cycled).
DEVICE_COLOURS = ("#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#fb9a99", "#ffff99",
                  "#8dd3c7", "#bebada", "#80b1d3", "#fccde5")
_NO_DEVICE_COLOUR = "#eeeeee"
_SEND_TYPES = ("_Send",)
_RECV_TYPES = ("_Recv",)


class DotNotFoundError(RuntimeError):
    """The Graphviz ``dot`` program is not installed."""


def _role(op):
    return op._op_def.role


def frames_of(ops) -> dict:
    """``{op: frame path}``: the tuple of while-loop frame names from the root down
    (an Enter is counted in the frame it opens, the way it is drawn).

    Inferred as the executor does (an Enter moves into the frame named by its
    ``frame_name``, an Exit back out), but tolerant: ops the walk cannot reach (a
    malformed graph) are put in the root frame instead of raising.
    """
    ops = list(ops)
    members = set(ops)
    consumers = {op: [] for op in ops}
    indegree = {}
    for op in ops:
        preds = [t.op for t in op._inputs if t.op in members]
        preds += [c for c in op._control_inputs if c in members]
        indegree[op] = len(preds)
        for p in preds:
            consumers[p].append(op)
    frame = {op: () for op in ops if indegree[op] == 0}
    queue = list(frame)
    while queue:
        op = queue.pop()
        path = frame[op]
        if _role(op) == R.ENTER:
            path = path + (op.get_attr("frame_name"),)
        elif _role(op) == R.EXIT and path:
            path = path[:-1]
        for c in consumers[op]:
            if c not in frame:
                frame[c] = path
                queue.append(c)
    for op in ops:
        frame.setdefault(op, ())
        if _role(op) == R.ENTER:  # drawn inside the frame it opens
            frame[op] = frame[op] + (op.get_attr("frame_name"),)
    return frame


def _quote(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _colours(devices) -> dict:
    return {d: DEVICE_COLOURS[i % len(DEVICE_COLOURS)]
            for i, d in enumerate(sorted(d for d in set(devices) if d))}


class _DotWriter:
    """Accumulates the lines of one digraph; node ids are ``n0, n1, ...``."""

    def __init__(self, name):
        self.lines = [f"digraph {_quote(name)} {{",
                      "  compound=true; rankdir=TB;",
                      ('  node [shape=box, style="rounded,filled", fontname="Helvetica", '
                       "fontsize=10];"),
                      '  edge [fontname="Helvetica", fontsize=8];']
        self.ids = {}
        self.clusters = 0

    def node_id(self, key):
        nid = self.ids.get(key)
        if nid is None:
            nid = self.ids[key] = f"n{len(self.ids)}"
        return nid

    def open_cluster(self, indent, label, style):
        self.clusters += 1
        self.lines.append(f"{indent}subgraph {_quote(f'cluster_{self.clusters}')} {{")
        self.lines.append(f"{indent}  label={_quote(label)}; {style}")

    def close(self, indent):
        self.lines.append(f"{indent}}}")

    def text(self):
        return "\n".join(self.lines + ["}"]) + "\n"


def _write_ops(w: _DotWriter, ops, device_of, colours, key_prefix, indent, frame=None,
               highlight=frozenset()):
    """Nodes of ``ops`` grouped into nested frame clusters, then their in-graph edges.
    ``frame`` maps each op to its frame path (default: :func:`frames_of`); ops in
    ``highlight`` (control-loop nodes) get a thick border."""
    frame = frame or frames_of(ops)
    tree: dict = {}     # frame path -> child frame names, and ops per frame
    by_frame: dict = {}
    for op in ops:
        path = frame[op]
        by_frame.setdefault(path, []).append(op)
        for k in range(len(path)):
            tree.setdefault(path[:k], set()).add(path[k])

    def emit(path, pad):
        for op in by_frame.get(path, ()):
            dev = device_of(op)
            colour = colours.get(dev, _NO_DEVICE_COLOUR)
            label = f"{op.name}\n{op.type}" + (f"\n{dev}" if dev else "")
            shape = ", shape=ellipse" if op.type in _SEND_TYPES + _RECV_TYPES else ""
            if op in highlight:
                shape += ", penwidth=2.5"
            w.lines.append(f"{pad}{w.node_id((key_prefix, op))} [label={_quote(label)}, "
                           f"fillcolor={_quote(colour)}{shape}];")
        for name in sorted(tree.get(path, ())):
            w.open_cluster(pad, f"while frame: {name}",
                           'style="dashed,rounded"; color="#555555";')
            emit(path + (name,), pad + "  ")
            w.close(pad)

    emit((), indent)
    members = set(ops)
    for op in ops:
        dst = w.node_id((key_prefix, op))
        for t in op._inputs:
            if t.op not in members:
                continue
            attrs = []
            if _role(t.op) == R.NEXT_ITERATION:
                attrs.append('style=dotted, color="#1f78b4", constraint=false')
            if len(t.op._outputs) > 1:
                attrs.append(f"taillabel={_quote(t._value_index)}")
            w.lines.append(f"  {w.node_id((key_prefix, t.op))} -> {dst}"
                           + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
        for c in op._control_inputs:
            if c in members:
                w.lines.append(f"  {w.node_id((key_prefix, c))} -> {dst} "
                               '[style=dashed, color="#888888", arrowhead=odot];')


def _legend(w: _DotWriter, colours):
    if not colours:
        return
    w.open_cluster("  ", "devices", 'style="rounded"; color="#bbbbbb";')
    for dev, colour in colours.items():
        w.lines.append(f"    {w.node_id(('legend', dev))} [label={_quote(dev)}, "
                       f"fillcolor={_quote(colour)}, shape=note];")
    w.close("  ")


def graph_to_dot(graph, name="dataflow", device_of=None) -> str:
    """DOT text of every op of ``graph``; ``device_of(op)`` gives an op's device
    (default: the device it was placed on with ``df.device``, '' for none).

    >>> print(graph_to_dot(g).splitlines()[0])
    digraph "dataflow" {
    """
    ops = graph.get_operations()
    device_of = device_of or (lambda op: op.device)
    colours = _colours(device_of(op) for op in ops)
    w = _DotWriter(name)
    _write_ops(w, ops, device_of, colours, "g", "  ")
    _legend(w, colours)
    return w.text()


def partition_to_dot(result, name="partitions") -> str:
    """DOT text of a :class:`~dataflow.partition.PartitionResult`: one cluster per
    partition (bordered in its device's colour), its loop frames nested inside, each
    Send joined to its Recv by a bold red edge labelled with the rendezvous key's edge
    name, and control-loop nodes drawn with a thick border."""
    colours = _colours(result.partitions)
    w = _DotWriter(name)
    highlight = {getattr(c, f) for c in result.control_loops
                 for f in ("enter", "merge", "switch", "next_iteration")}
    highlight = {getattr(x, "op", x) for x in highlight if x is not None}
    for device in sorted(result.partitions):
        ops = result.partitions[device].get_operations()
        w.open_cluster("  ", f"partition {device}",
                       f'style="filled,rounded"; fillcolor="#fafafa"; '
                       f'color={_quote(colours[device])}; penwidth=3;')
        frame = {op: _frame_path(result, op) for op in ops}
        _write_ops(w, ops, lambda op, d=device: d, colours, device, "    ", frame, highlight)
        w.close("  ")
    for pair in result.send_recv_pairs:
        src, dst = pair.key[0], pair.key[1]
        style = "bold" if pair.kind == "data" else "bold,dashed"
        w.lines.append(f"  {w.node_id((src, pair.send))} -> {w.node_id((dst, pair.recv))} "
                       f'[style="{style}", color="#e31a1c", '
                       f"label={_quote(_short_key(pair.key[2]))}, constraint=false];")
    _legend(w, colours)
    return w.text()


def _frame_path(result, op) -> tuple:
    """Frame names from the root down for a partition op (an Enter is drawn in the
    frame it opens)."""
    name = op.get_attr("frame_name") if _role(op) == R.ENTER else result.frame_of.get(op, "")
    path = []
    while name:
        path.append(name)
        name = result.frame_parents.get(name, "")
    return tuple(reversed(path))


def _short_key(key) -> str:
    text = key if isinstance(key, str) else str(key)
    return text if len(text) <= 40 else text[:37] + "..."


def render(dot_text: str, out_path: str, fmt: str | None = None) -> str:
    """Render DOT text to ``out_path`` with Graphviz ``dot`` (format from the suffix,
    ``svg`` or ``png``). Raises :class:`DotNotFoundError` if ``dot`` is not on PATH."""
    exe = shutil.which("dot")
    if exe is None:
        raise DotNotFoundError(
            "The Graphviz 'dot' program is not on PATH; install Graphviz (e.g. "
            "'apt-get install graphviz') or write the DOT text with -o FILE.dot")
    fmt = fmt or (out_path.rsplit(".", 1)[-1].lower() if "." in out_path else "svg")
    proc = subprocess.run([exe, f"-T{fmt}", "-o", out_path], input=dot_text.encode(),
                          capture_output=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed ({proc.returncode}): {proc.stderr.decode().strip()}")
    return out_path


# Graph.to_dot draws through this module; registering here keeps the framework free of
# an import of the drawing code (dataflow/__init__ imports viz, so it is always set).
_graph._DOT_WRITER[:] = [graph_to_dot]
