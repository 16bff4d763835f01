"""The suite's TF fixture programs with loops, compiled, against the interpreter and TF.

The rest of the suite runs its loops interpreted (tests/conftest.py sets
``DATAFLOW_COMPILE_LOOPS=0``), while users get compilation by default. This module keeps
the compiled path honest in bounded time: a sample of the TF-recorded programs with
while loops (conds and nested loops in loops, variables updated in a loop, second order
through nested loops) runs with ``compile_loops="eager"`` and interpreted; both outcomes
must match TensorFlow's recording, and each other within the fixture's tolerance, and
every frame must really have compiled (the loop compiler's report on every plan the
program builds, as ``RunMetadata.interpreted_frames`` gives it).

The whole suite with ``DATAFLOW_COMPILE_LOOPS=eager`` is the long form of this check
(see benchmarks/RESULTS.md, loop compiler section).
"""
from __future__ import annotations

import collections
import json
import pathlib

import numpy as np
import pytest

import dataflow as df
from dataflow.runtime import loop_hook
from tests.test_rnn import FIXTURE as RNN
from tests.test_tensor_array_reference import FIXTURE as TENSOR_ARRAY
from tests.test_tf_reference import FIXTURE as FORWARD
from tests.tf_reference import (programs, rnn_programs, second_order_nested_programs,
                                tensor_array_programs)
from tests.tf_reference.compare import assert_same_outcome

NESTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                     "expected_second_order_nested.json").read_text())["programs"]


def _fixture_case(fixture, module):
    """Run through the fixture's programs; compare with its tolerance."""
    def run(name):
        return module.run_program(df, fixture.programs[name])

    def check(name, interpreted, compiled):
        assert_same_outcome(name, fixture.expected[name], compiled, fixture.tolerance)
        assert_same_outcome(name, interpreted, compiled, fixture.tolerance)
    return run, check


def _nested_run(name):
    return second_order_nested_programs.run_program(df, name)


def _nested_check(name, interpreted, compiled):
    for want in (NESTED[name], interpreted):
        assert len(compiled) == len(want)
        for i, (got, w) in enumerate(zip(compiled, want)):
            np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=1e-9,
                                       atol=1e-12, err_msg=f"{name}: fetch {i}")


# (run, check, programs): a sample whose loops all compile, TensorArray loops (forward
# and gradient, dynamically sized, nested, in a cond) and dynamic_rnn's among them.
CASES = [
    (*_fixture_case(FORWARD, programs),
     ["prog_cond_in_while", "prog_case_in_while", "prog_while_nested_three_deep",
      "prog_while_in_cond", "prog_while_maximum_iterations", "prog_while_variable_updates"]),
    (_nested_run, _nested_check, ["nested_power", "nested_sin"]),
    (*_fixture_case(TENSOR_ARRAY, tensor_array_programs),
     ["prog_ta_grad_while_loop", "prog_ta_grad_dynamic_size_while", "prog_ta_grad_nested_while",
      "prog_ta_grad_cond_in_while", "prog_ta_write_in_loop_read_outside"]),
    (*_fixture_case(RNN, rnn_programs), ["prog_rnn_grad_lstm_lengths"]),
]
PARAMS = [pytest.param(run, check, name, id=name) for run, check, names in CASES
          for name in names]


@pytest.fixture
def frame_report():
    """``{frame name: reason or None}`` over every plan built while the test runs."""
    report = collections.defaultdict(list)
    attach = loop_hook._COMPILER[0]

    def recording(plan, *args):
        attach(plan, *args)
        for frame, reason in getattr(plan, "loop_report", {}).items():
            report[frame].append(reason)
    loop_hook.register_loop_compiler(recording)
    try:
        yield report
    finally:
        loop_hook.register_loop_compiler(attach)


@pytest.mark.parametrize("run,check,name", PARAMS)
def test_compiled_loops_match_the_interpreter_and_tensorflow(run, check, name, monkeypatch,
                                                             frame_report):
    monkeypatch.setenv("DATAFLOW_COMPILE_LOOPS", "0")
    interpreted = run(name)
    assert not frame_report, "compile_loops off must not compile"
    monkeypatch.setenv("DATAFLOW_COMPILE_LOOPS", "eager")
    compiled = run(name)
    check(name, interpreted, compiled)
    assert frame_report, f"{name} built no loop frame"
    refused = {frame: reasons for frame, reasons in frame_report.items()
               if any(r is not None for r in reasons)}
    assert not refused, refused
