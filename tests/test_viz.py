"""Graphviz DOT output (``graph.to_dot()``, ``partition(...).to_dot()``) and the
``dataflow viz`` command.

The DOT text is always checked structurally (balanced braces, every edge endpoint
declared, one cluster per loop frame nested like the frames, one colour per device);
where Graphviz ``dot`` is installed the same text is also rendered with ``dot -Tsvg``.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

import dataflow as df
from dataflow import cli, viz

A, B, C = "/cpu:0", "/cpu:1", "/cpu:2"

_NODE = re.compile(r'^\s*(n\d+) \[label="((?:[^"\\]|\\.)*)", fillcolor="([^"]+)"(.*)\];$')
_EDGE = re.compile(r"^\s*(n\d+) -> (n\d+)(?: \[(.*)\])?;$")
_CLUSTER = re.compile(r'^\s*subgraph "(cluster_\d+)" \{$')
_LABEL = re.compile(r'^\s*label="((?:[^"\\]|\\.)*)";')


class Dot:
    """The parts of our DOT text the tests look at: nodes (with their cluster path),
    edges and clusters (with their labels and parents)."""

    def __init__(self, text):
        self.nodes, self.edges, self.clusters = {}, [], {}
        stack = []
        depth = 0
        for line in text.splitlines():
            body = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line)   # braces inside strings
            m = _CLUSTER.match(line)
            if m:
                self.clusters[m.group(1)] = {"parent": stack[-1] if stack else None,
                                             "label": None}
                stack.append(m.group(1))
            elif (m := _LABEL.match(line)) and stack and self.clusters[stack[-1]]["label"] is None:
                self.clusters[stack[-1]]["label"] = m.group(1)
            elif (m := _NODE.match(line)):
                self.nodes[m.group(1)] = {"label": m.group(2).replace("\\n", "\n"),
                                          "colour": m.group(3), "extra": m.group(4),
                                          "cluster": stack[-1] if stack else None}
            elif (m := _EDGE.match(line)):
                self.edges.append((m.group(1), m.group(2), m.group(3) or ""))
            depth += body.count("{") - body.count("}")
            assert depth >= 0, line
            if body.strip() == "}" and stack and depth < len(stack) + 1:
                stack.pop()
        assert depth == 0, "unbalanced braces"
        assert text.startswith("digraph ")

    def node(self, name):
        (nid,) = [k for k, v in self.nodes.items() if v["label"].split("\n")[0] == name]
        return nid

    def frame_clusters(self):
        return {k: v for k, v in self.clusters.items()
                if (v["label"] or "").startswith("while frame: ")}

    def check_edges_declared(self):
        for src, dst, _ in self.edges:
            assert src in self.nodes and dst in self.nodes, (src, dst)


def render_if_possible(text, tmp_path):
    """``dot -Tsvg`` of ``text`` when Graphviz is installed; returns whether it ran."""
    if shutil.which("dot") is None:
        return False
    out = tmp_path / "g.svg"
    viz.render(text, str(out))
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
    return True


def nested_graph():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [], name="x")
        with df.device(B):
            r = df.cond(x < 3.0, lambda: x + 10.0, lambda: df.square(x))

        def outer(i, total):
            def inner_body(j, t):
                with df.device(C):
                    t2 = t + df.cast(j, df.float32) * x
                return j + 1, t2
            _, inner = df.while_loop(lambda j, t: j < i, inner_body, (0, total))
            return i + 1, inner
        with df.device(A):
            _, nested = df.while_loop(lambda i, t: i < 4, outer, (0, 0.0))
        with df.control_dependencies([r]):
            df.identity(nested, name="after_cond")
    return g


def test_graph_dot_has_a_cluster_per_frame_nested_and_colours_per_device(tmp_path):
    g = nested_graph()
    text = g.to_dot()
    dot = Dot(text)
    dot.check_edges_declared()
    ops = g.get_operations()
    assert len(dot.nodes) == len(ops) + 3   # + the legend's three devices
    for op in ops:
        label = dot.nodes[dot.node(op.name)]["label"].split("\n")
        assert label[:2] == [op.name, op.type]
    # one cluster per while-loop frame, the inner one inside the outer one
    frames = {op.get_attr("frame_name") for op in ops if op.type == "Enter"}
    clusters = dot.frame_clusters()
    assert sorted(v["label"][len("while frame: "):] for v in clusters.values()) == sorted(frames)
    by_frame = {v["label"][len("while frame: "):]: k for k, v in clusters.items()}
    outer, inner = sorted(frames, key=len)   # the inner loop's name nests the outer's
    assert inner.startswith("while/while/") and outer.startswith("while/")
    assert clusters[by_frame[inner]]["parent"] == by_frame[outer]
    assert clusters[by_frame[outer]]["parent"] is None
    # independent of the frame inference: the inner body (on C) is in the inner cluster,
    # the cond in none, each LoopCond in its own loop's cluster
    for op in ops:
        cluster = dot.nodes[dot.node(op.name)]["cluster"]
        if op.device == "/device:CPU:2" and op.type != "Enter":
            assert cluster == by_frame[inner], op.name
        if op.name.startswith("cond/"):
            assert cluster is None, op.name
    loop_conds = sorted((op.name, dot.nodes[dot.node(op.name)]["cluster"]) for op in ops
                        if op.type == "LoopCond")
    assert loop_conds == [("while/LoopCond", by_frame[outer]),
                          ("while/while/LoopCond", by_frame[inner])]
    # every op sits in the cluster of its frame (an Enter in the frame it opens)
    frame_of = viz.frames_of(ops)
    for op in ops:
        path = frame_of[op]
        cluster = dot.nodes[dot.node(op.name)]["cluster"]
        assert cluster == (by_frame[path[-1]] if path else None), op.name
    # one colour per device, a different one for each
    colours = {}
    for op in ops:
        colours.setdefault(op.device, set()).add(dot.nodes[dot.node(op.name)]["colour"])
    assert all(len(c) == 1 for c in colours.values())
    assert len({c.pop() for c in colours.values()}) == len(colours) == 4   # 3 + unplaced
    # control edges dashed, loop back edges dotted
    after = dot.node("after_cond")
    (ctrl,) = [e for e in dot.edges if e[1] == after and "dashed" in e[2]]
    assert dot.nodes[ctrl[0]]["label"].startswith("cond/Merge")
    back = [e for e in dot.edges if "dotted" in e[2]]
    assert back and all(dot.nodes[s]["label"].split("\n")[1] == "NextIteration"
                        for s, _, _ in back)
    assert len(back) == sum(op.type == "NextIteration" for op in ops)
    render_if_possible(text, tmp_path)


def test_partition_dot_has_partitions_send_recv_edges_and_control_loops(tmp_path):
    g = nested_graph()
    fetch = g.get_operation_by_name("after_cond").outputs[0]
    x = g.get_tensor_by_name("x:0")
    part = df.partition(g, [fetch], feeds=[x])
    text = part.to_dot()
    dot = Dot(text)
    dot.check_edges_declared()
    partitions = {v["label"][len("partition "):]: k for k, v in dot.clusters.items()
                  if (v["label"] or "").startswith("partition ")}
    assert sorted(partitions) == part.devices
    assert all(dot.clusters[c]["parent"] is None for c in partitions.values())
    total = sum(len(p.get_operations()) for p in part.partitions.values())
    assert len(dot.nodes) == total + len(part.devices)
    # Send -> Recv: one bold red edge per pair, from the sender's to the receiver's cluster
    red = [e for e in dot.edges if "#e31a1c" in e[2]]
    assert len(red) == len(part.send_recv_pairs)

    def partition_of(nid):
        c = dot.nodes[nid]["cluster"]
        while dot.clusters[c]["parent"] is not None:
            c = dot.clusters[c]["parent"]
        return c
    for src, dst, _ in red:
        assert dot.nodes[src]["label"].split("\n")[1] == "_Send"
        assert dot.nodes[dst]["label"].split("\n")[1] == "_Recv"
        assert partition_of(src) != partition_of(dst)
    # frame clusters inside each partition that has nodes of the frame; control loop
    # nodes drawn thick; the devices' colours differ
    for loop in part.control_loops:
        for op in loop.ops:
            (nid,) = [k for k, v in dot.nodes.items() if v["label"].split("\n")[0] == op.name
                      and partition_of(k) == partitions[loop.device]]
            assert "penwidth" in dot.nodes[nid]["extra"]
    per_partition = {}
    for nid, v in dot.nodes.items():
        if v["cluster"] is not None and dot.clusters[v["cluster"]]["label"] != "devices":
            per_partition.setdefault(partition_of(nid), set()).add(v["colour"])
    assert all(len(c) == 1 for c in per_partition.values())
    assert len(set.union(*per_partition.values())) == len(part.devices)
    assert len(dot.frame_clusters()) >= len(part.loop_leaders)
    render_if_possible(text, tmp_path)


SCRIPT = """
import dataflow as df
x = df.placeholder(df.float32, [], name="x")
with df.device("/cpu:1"):
    y = df.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x), (0, 1.0))
print("this goes to stderr, not into the DOT text")
"""


def test_cli_writes_dot_for_a_script_and_an_example(tmp_path, capsys):
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    assert cli.main(["viz", str(script)]) == 0
    out, err = capsys.readouterr()
    dot = Dot(out)
    dot.check_edges_declared()
    assert len(dot.frame_clusters()) == 1 and "stderr" in err
    target = tmp_path / "model.dot"
    assert cli.main(["viz", str(script), "--partition", "-o", str(target)]) == 0
    pdot = Dot(target.read_text())
    assert any((v["label"] or "").startswith("partition ") for v in pdot.clusters.values())
    # an example by name: built by its build_model(), nothing trained
    assert cli.main(["viz", "digits_rnn", "-o", str(tmp_path / "rnn.dot")]) == 0
    rnn = Dot((tmp_path / "rnn.dot").read_text())
    assert len(rnn.frame_clusters()) >= 2      # the RNN loop and its gradient loop
    with pytest.raises(SystemExit, match="neither a script nor an example"):
        cli.main(["viz", "no_such_example"])


def test_cli_renders_svg_or_says_dot_is_missing(tmp_path, capsys, monkeypatch):
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    out = tmp_path / "model.svg"
    if shutil.which("dot") is not None:
        assert cli.main(["viz", str(script), "-o", str(out)]) == 0
        assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert cli.main(["viz", str(script), "-o", str(tmp_path / "other.png")]) == 2
    assert "Graphviz 'dot' program is not on PATH" in capsys.readouterr().err
    assert not (tmp_path / "other.png").exists()


def test_python_dash_m_dataflow_viz(tmp_path):
    script = tmp_path / "model.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, "-m", "dataflow", "viz", str(script)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    Dot(proc.stdout).check_edges_declared()
