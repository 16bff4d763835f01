"""benchmarks/tracer.py and benchmarks/tracer_compare.py: the comparisons that decide
"equal" and "fails", and a tiny run of the tracer table (no other framework imported)."""
import gc
import time

import numpy as np
import pytest

import dataflow as df
from benchmarks import tracer, tracer_compare
from dataflow.autodiff import tape as _tape


def test_same_output_compares_text_exactly_and_numbers_to_tolerance():
    a = "skipping update: gradient norm 35.68 loss 6.3655\n"
    assert tracer.same_output(a, "skipping update: gradient norm 35.680001 loss 6.3655\n")
    assert not tracer.same_output(a, "skipping update: gradient norm 35.7 loss 6.3655\n")
    assert not tracer.same_output(a, a + a)            # printed twice
    assert not tracer.same_output(a, "")               # never printed
    assert tracer.same_output("", "")


def test_same_observations():
    same = tracer.same_observations
    assert same({"points": [None, "conv1"]}, {"points": [None, "conv1"]})
    assert not same({"points": [None, "conv1"]}, {"points": ["conv1"]})
    assert same({"f1": [0.5, 0.25]}, {"f1": [0.50000001, 0.25]})
    assert not same({"skipped": 3}, {"skipped": 1})
    assert not same({"a": 1}, {"b": 1})


def test_compare_verdicts():
    eager = {"losses": [2.0, 1.5], "printed": "x 1.0\n", "observations": {"n": [3, 4]}}
    assert tracer_compare.verdict(eager, dict(eager)) == "ok"
    assert tracer_compare.verdict(eager, {"error": "TypeError: boom", "where": "p.py:3"}) \
        == "error: TypeError: boom (p.py:3)"
    drifted = dict(eager, losses=[2.0, 1.5 * (1 + 1e-3)])   # compounded rounding
    assert tracer_compare.verdict(eager, drifted) == "ok"
    wrong = dict(eager, losses=[2.0, 1.8], printed="", observations={"n": [3]})
    assert tracer_compare.verdict(eager, wrong) == \
        "wrong: losses (step 1 off by 20%); printed output; observations n"


def test_tracer_table_runs_eager_and_graph_and_says_when_function_is_missing():
    figures = tracer.measure(steps=4, warmup=1, repeats=1, only={"mlp_adam"},
                             with_function=False)
    eager, graph = figures["mlp_adam"]["eager"], figures["mlp_adam"]["graph"]
    assert eager["error"] is None and eager["sps"] > 0
    assert graph["equal"] is True and graph["sps"] > 0
    table = tracer.format_table(figures)
    assert "| mlp_adam |" in table and "| n/a |" in table   # no df.function column


def test_compiler_errors_are_described_by_their_informative_line():
    class InternalTorchDynamoError(RuntimeError):
        pass
    dynamo = InternalTorchDynamoError(
        "NotImplementedError: \n\nfrom user code:\n   File \"/v/site-packages/narwhals/"
        "dependencies.py\", line 62, in is_into_dataframe\n    return f(x)\n\n"
        "Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace")
    assert tracer_compare._describe(dynamo) == (
        "InternalTorchDynamoError: NotImplementedError raised while tracing "
        "is_into_dataframe (narwhals/dependencies.py:62)")
    autograph = AttributeError("in user code:\n\n    File \"p.py\", line 3, in step  *\n"
                               "        x.numpy()\n\n    AttributeError: 'SymbolicTensor' "
                               "object has no attribute 'numpy'\n")
    assert tracer_compare._describe(autograph) == \
        "AttributeError: 'SymbolicTensor' object has no attribute 'numpy'"
    assert tracer_compare._describe(ValueError("bad\nmore")) == "ValueError: bad"


def test_compare_section_lists_failures_per_framework(monkeypatch):
    fake = {"dataflow df.function": {"_error": tracer_compare.NOT_BUILT},
            "TF2 tf.function": {
                "mlp_adam": {"eager_sps": 20.0, "compiled_sps": 500.0, "verdict": "ok"},
                "bert_cls": {"eager_sps": 6.0, "compiled_sps": None,
                             "verdict": "error: AttributeError: numpy (tf2_ports.py:31)"}}}
    monkeypatch.setattr(tracer_compare, "FRAMEWORKS", dict.fromkeys(fake, ""))
    monkeypatch.setattr(tracer_compare, "_isolated",
                        lambda framework, *args: fake[framework])
    table = tracer_compare.section(steps=10, warmup=2).splitlines()
    assert "| TF2 tf.function | mlp_adam | ok | 20.0 | 500.0 | 25.00x |" in table
    assert ("| TF2 tf.function | bert_cls | error: AttributeError: numpy (tf2_ports.py:31) "
            "| 6.0 | - | - |") in table
    assert "TF2 tf.function: 1 of 2 fail (bert_cls)" in table
    assert f"dataflow df.function: {tracer_compare.NOT_BUILT}" in table


def test_divergence_finds_the_first_step_beyond_the_tolerance_and_the_largest():
    d = tracer.divergence([1.0, 2.0, 3.0, 4.4, 5.0], [1.0, 2.0 * (1 + 1e-7), 3.0, 4.0, 5.1])
    assert d["first_diff"] == 1 and d["first_over"] == 3
    assert d["at"] == 3 and abs(d["max_rel"] - 0.1) < 1e-12
    same = tracer.divergence([1.0, 2.0], [1.0, 2.0])
    assert same == {"first_diff": None, "first_over": None, "max_rel": 0.0, "at": 0}
    with pytest.raises(ValueError, match="3 losses against 2"):
        tracer.divergence([1.0, 2.0, 3.0], [1.0, 2.0])


def test_agreement_accepts_a_divergence_no_earlier_than_reordered_eager():
    assert tracer.agreement({"first_over": None}, None) == "yes"
    assert tracer.agreement({"first_over": 9}, None) == "NO"          # nothing to excuse it
    assert tracer.agreement({"first_over": 9}, {"first_over": None}) == "NO"
    assert tracer.agreement({"first_over": 9}, {"first_over": 9}) == "rounding"
    assert tracer.agreement({"first_over": 12}, {"first_over": 9}) == "rounding"
    assert tracer.agreement({"first_over": 8}, {"first_over": 9}) == "NO"


def _sum_order_gradient():
    """A gradient of three terms whose float32 sum depends on their order."""
    x = df.constant(2.0)
    with df.GradientTape() as tape:
        tape.watch(x)
        y = x * -1.0 + x * 1.0 + x * 1e-8
    return float(tape.gradient(y, x))


def test_reordered_gradient_sums_change_only_the_order_and_are_undone():
    original = _tape._sum
    with df.eager_mode():
        plain = _sum_order_gradient()
        with tracer.reordered_gradient_sums():
            reordered = _sum_order_gradient()
        with pytest.raises(RuntimeError), tracer.reordered_gradient_sums():
            raise RuntimeError("boom")
        again = _sum_order_gradient()
    # NumPy's float32 sums in the two orders the tape's add_n takes.
    terms = [np.float32(1e-8), np.float32(1.0), np.float32(-1.0)]
    assert plain == float((terms[0] + terms[1]) + terms[2]) == 0.0
    assert reordered == float((terms[2] + terms[1]) + terms[0]) == float(np.float32(1e-8))
    assert again == plain and _tape._sum is original


class _SumOrderProgram:
    """A stand-in program whose step-i loss is ``1 + g * 10**i``, ``g`` the gradient of
    :func:`_sum_order_gradient`: eager's losses are all 1.0, and with the gradient sums
    reordered they leave rtol 1e-4 at step 5 (1 + 1e-3)."""

    @staticmethod
    def make_model(seed):
        return {}

    @staticmethod
    def observations(model):
        return {"seen": [1, 2]}

    @staticmethod
    def run(steps, wrap=None, model=None):
        with df.eager_mode():
            step = wrap(_sum_order_gradient) if wrap else _sum_order_gradient
            return [1.0 + step() * 10.0 ** i for i in range(steps)]


@pytest.mark.parametrize("graph_leaves_at, verdict", [(None, "yes"), (6, "rounding"),
                                                       (5, "rounding"), (2, "NO")])
def test_measure_program_compares_a_diverged_way_with_reordered_eager(
        monkeypatch, graph_leaves_at, verdict):
    def graph_version(steps, wrap):
        step = wrap(lambda i: 1.5 if i == graph_leaves_at else 1.0)
        return [step(i) for i in range(steps)]
    monkeypatch.setattr(tracer, "load", lambda name: _SumOrderProgram)
    monkeypatch.setitem(tracer.tf1_graphs.GRAPH_VERSIONS, "mlp_adam", graph_version)
    figures = tracer.measure_program("mlp_adam", steps=8, warmup=1, repeats=1,
                                     with_function=False)
    assert figures["graph"]["agreement"] == verdict
    assert figures["graph"]["equal"] is (verdict == "yes")
    table = tracer.format_table({"mlp_adam": figures})
    if graph_leaves_at is None:
        assert "reordered" not in figures and "losses beyond" not in table
        return
    assert figures["reordered"]["divergence"]["first_over"] == 5
    assert (f"- mlp_adam: TF1 graph from step {graph_leaves_at} (largest 5.0e-01, step "
            f"{graph_leaves_at}); eager with its gradient sums reordered from step 5 "
            f"(largest 1.0e-01, step 7)") in table
    assert f"| {verdict} |" in table


def test_prefix_observations_keeps_per_step_lists_up_to_the_divergence():
    seen = {"proposal_counts": [3, 2, 2, 4], "smoothed_loss": 1.25}
    assert tracer._prefix_observations(seen, 2) == {"proposal_counts": [3, 2]}


def _collection_between_two_steps(timer):
    """Two calls of a no-op step through ``timer`` with a full collection between
    them; returns how long the collector itself ran (from its own callbacks)."""
    spans = []

    def measure(phase, info):
        spans.append(time.perf_counter())
    step = timer(lambda: None)
    try:
        step()
        gc.callbacks.append(measure)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(measure)
        step()
    finally:
        timer.close()
    return spans[1] - spans[0]


def test_timed_adds_collections_between_steps_to_the_next_step_when_asked():
    counted = tracer.Timed(count_collections=True)
    spent = _collection_between_two_steps(counted)
    assert counted._on_collection not in gc.callbacks      # close() stopped counting
    assert counted.seconds[1] >= spent * 0.99
    assert counted.seconds[0] < spent
    plain = tracer.Timed()
    spent = _collection_between_two_steps(plain)
    assert plain.seconds[1] < spent                        # a no-op step, not the collection
