"""A while loop split over two devices, run as partitions on threads and in processes.

    python3 examples/partitioned_loop.py
    dataflow viz examples/partitioned_loop.py --partition -o partitions.svg

The loop's predicate and counter live on ``/cpu:0``; its body (a small matrix
recurrence) on ``/cpu:1``. ``df.partition`` shows what the Session runs: one graph
per device, a Send/Recv pair per value that crosses, and on ``/cpu:1`` a control
loop that receives the predicate each iteration.
"""
import numpy as np

import dataflow as df


def build(steps=10, size=4):
    """The graph: ``h = tanh(h @ W + 0.1)`` for ``steps`` iterations, two devices."""
    w = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32) * 0.5
    h0 = df.placeholder(df.float32, [size, size], name="h0")

    def body(i, h):
        with df.device("/cpu:1"):
            h = df.tanh(df.matmul(h, df.constant(w)) + 0.1)
        with df.device("/cpu:0"):
            i = i + 1
        return i, h

    with df.device("/cpu:0"):
        _, h = df.while_loop(lambda i, h: i < steps, body, [df.constant(0), h0])
    return h0, h


def main():
    h0, h = build()
    feed = {h0: np.eye(4, dtype=np.float32)}
    part = df.partition(df.get_default_graph(), [h], feeds=[h0])
    for device, graph in sorted(part.partitions.items()):
        types = sorted({op.type for op in graph.get_operations()})
        print(f"{device}: {len(graph.get_operations())} ops ({', '.join(types)})")
    print(f"Send/Recv pairs: {len(part.send_recv_pairs)}; control loops: "
          f"{len(part.control_loops)}")
    results = {}
    for mode in ("threads", "processes"):
        with df.Session(config=df.ConfigProto(partition_mode=mode)) as sess:
            results[mode] = sess.run(h, feed_dict=feed)
    np.testing.assert_allclose(results["threads"], results["processes"])
    print("h after 10 steps (threads == processes):")
    print(np.round(results["threads"], 4))
    return results


if __name__ == "__main__":
    main()
