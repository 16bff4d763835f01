"""Step timelines in Chrome trace format (``tf.compat.v1`` ``timeline.Timeline``).

``Timeline(run_metadata.step_stats).generate_chrome_trace_format()`` returns the JSON
text of a trace that ``chrome://tracing`` and Perfetto (ui.perfetto.dev) open:

* one process row per device (``/job:localhost/replica:0/task:0/device:CPU:0
  Compute``: with partitions in several processes or MPI tasks, one per partition);
* one thread row per executor thread that ran nodes (a partition's scheduler, the
  worker threads that ran large kernels);
* one slice per node execution, named after the node, with `` [iter N]`` for a node
  inside a while loop (nested loops: ``[iter 2/1]``, outermost first) and
  `` (dead)`` for a node that received a dead token and computed nothing; its args
  hold the op type, frame, iteration, deadness, output dtypes/shapes/bytes and the
  kernel's own time;
* a flow arrow from each ``_Send`` to the ``_Recv`` that received its value (the
  pair shares a rendezvous key: device pair, tensor, frame and iteration);
* a ``_Recv`` that waited for its value (the scheduler ran other nodes meanwhile) is a
  slice from the value's arrival to its delivery, plus an async "waiting" span from
  when it was scheduled (async spans may overlap, slices of one thread never do).

``show_memory=True`` adds a counter track per device with the bytes each node
output; ``show_dataflow=False`` leaves the arrows out.

>>> import json, dataflow as df
>>> x = df.placeholder(df.float32, [])
>>> y = df.while_loop(lambda v: v < 4.0, lambda v: v * 2.0, [x])
>>> meta = df.RunMetadata()
>>> with df.Session() as sess:
...     _ = sess.run(y, {x: 1.0}, run_metadata=meta,
...                  options=df.RunOptions(trace_level=df.RunOptions.FULL_TRACE))
>>> trace = json.loads(Timeline(meta.step_stats).generate_chrome_trace_format())
>>> sorted(e["name"] for e in trace["traceEvents"] if e["name"].startswith("while/mul"))
['while/mul [iter 0]', 'while/mul [iter 1]', 'while/mul [iter 2] (dead)']
"""
from __future__ import annotations

import json

__all__ = ["Timeline"]


class Timeline:
    """The Chrome trace of one step's :class:`~dataflow.runtime.step_stats.StepStats`."""

    def __init__(self, step_stats, graph=None):
        self._step_stats = step_stats
        self._graph = graph   # accepted as TF's Timeline does; names come from the stats

    def generate_chrome_trace_format(self, show_dataflow=True, show_memory=False) -> str:
        """The trace as a JSON string (``{"traceEvents": [...], "displayTimeUnit": "ns"}``)."""
        return json.dumps(self.trace_events(show_dataflow, show_memory))

    def trace_events(self, show_dataflow=True, show_memory=False) -> dict:
        """The trace as a Python dict (what :meth:`generate_chrome_trace_format` dumps)."""
        events, sends, recvs = [], {}, {}
        all_stats = [n for d in self._step_stats.dev_stats for n in d.node_stats]
        origin = min((n.all_start_nanos for n in all_stats), default=0)
        for pid, dev in enumerate(self._step_stats.dev_stats):
            events.append(_meta("process_name", pid, 0, {"name": f"{dev.device} Compute"}))
            events.append(_meta("process_sort_index", pid, 0, {"sort_index": pid}))
            tids = {}
            for n in sorted(dev.node_stats, key=lambda n: n.all_start_nanos):
                tid = tids.get(n.thread_id)
                if tid is None:
                    tid = tids[n.thread_id] = len(tids)
                    name = dev.thread_names.get(n.thread_id) or f"thread {n.thread_id}"
                    events.append(_meta("thread_name", pid, tid, {"name": name}))
                    events.append(_meta("thread_sort_index", pid, tid, {"sort_index": tid}))
                event = _slice(n, pid, tid, origin)
                events.append(event)
                if n.op_type == "_Recv" and n.op_start_rel_nanos > 0:
                    events.extend(_recv_wait(n, pid, tid, origin, len(events)))
                if n.rendezvous_key and n.op_type == "_Send":
                    sends[n.rendezvous_key] = event
                elif n.rendezvous_key and n.op_type == "_Recv":
                    recvs[n.rendezvous_key] = event
            if show_memory:
                events.extend(_memory_counters(dev, pid, origin))
        if show_dataflow:
            events.extend(_flows(sends, recvs))
        return {"traceEvents": events, "displayTimeUnit": "ns"}


def _meta(name, pid, tid, args) -> dict:
    return {"name": name, "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": args}


def _iteration_text(path) -> str:
    return "/".join(str(i) for _, i in path)


def _slice(n, pid, tid, origin) -> dict:
    """A complete ('X') event for one node execution; times in microseconds."""
    name = n.node_name
    if n.frame_path:
        name += f" [iter {_iteration_text(n.frame_path)}]"
    if n.is_dead:
        name += " (dead)"
    args = {"name": n.node_name, "op": n.op_type, "frame": n.frame_name,
            "iteration": n.iteration_id, "dead": n.is_dead, "label": n.timeline_label}
    if len(n.frame_path) > 1:
        args["frames"] = [f"{f}:{i}" for f, i in n.frame_path]
    for o in n.output:
        d = o.tensor_description
        args[f"output{o.slot}"] = f"{d.dtype}{list(d.shape)} {d.requested_bytes} B"
    start, end = n.all_start_nanos, n.all_start_nanos + max(n.all_end_rel_nanos, 0)
    if n.op_type == "_Recv":
        # A Recv that waited is drawn from its value's arrival (its wait: _recv_wait).
        start += n.op_start_rel_nanos
        args["waited_us"] = n.op_start_rel_nanos / 1000.0
    elif n.op_end_rel_nanos > n.op_start_rel_nanos:
        args["kernel_us"] = (n.op_end_rel_nanos - n.op_start_rel_nanos) / 1000.0
    if n.rendezvous_key:
        args["rendezvous_key"] = n.rendezvous_key
    return {"name": name, "cat": "Op", "ph": "X", "pid": pid, "tid": tid,
            "ts": (start - origin) / 1000.0, "dur": max(end - start, 0) / 1000.0,
            "args": args}


def _recv_wait(n, pid, tid, origin, async_id) -> list:
    """An async span ('b'/'e') from when a Recv was scheduled until its value came."""
    ts = (n.all_start_nanos - origin) / 1000.0
    common = {"name": f"wait {n.node_name}", "cat": "recv wait", "id": async_id,
              "pid": pid, "tid": tid}
    return [dict(common, ph="b", ts=ts),
            dict(common, ph="e", ts=ts + n.op_start_rel_nanos / 1000.0)]


def _flows(sends, recvs) -> list:
    """A flow arrow ('s' at the Send, 'f' at the Recv) per rendezvous key seen on both
    sides, bound to the enclosing slices."""
    out = []
    for flow_id, key in enumerate(sorted(k for k in sends if k in recvs)):
        s, r = sends[key], recvs[key]
        tensor = key.split(";")[2]
        # Each end sits inside its slice (the middle), where Perfetto binds it.
        out.append({"name": tensor, "cat": "transfer", "ph": "s", "id": flow_id,
                    "pid": s["pid"], "tid": s["tid"], "ts": s["ts"] + s["dur"] / 2})
        out.append({"name": tensor, "cat": "transfer", "ph": "f", "bp": "e", "id": flow_id,
                    "pid": r["pid"], "tid": r["tid"], "ts": r["ts"] + r["dur"] / 2})
    return out


def _memory_counters(dev, pid, origin) -> list:
    """A counter ('C') event per node: the bytes of the outputs it produced."""
    out = []
    for n in sorted(dev.node_stats, key=lambda n: n.all_start_nanos):
        nbytes = sum(o.tensor_description.requested_bytes for o in n.output)
        ts = (n.all_start_nanos + max(n.all_end_rel_nanos, 0) - origin) / 1000.0
        out.append({"name": "output bytes", "ph": "C", "pid": pid, "tid": 0, "ts": ts,
                    "args": {"bytes": nbytes}})
    return out
