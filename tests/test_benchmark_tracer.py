"""benchmarks/tracer.py and benchmarks/tracer_compare.py: the comparisons that decide
"equal" and "fails", and a tiny run of the tracer table (no other framework imported)."""
from benchmarks import tracer, tracer_compare


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
