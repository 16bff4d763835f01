"""Variable and op names of TF1 programs (tf_reference/name_programs.py) match the
names TensorFlow gives them (tf_reference/names.json, made by generate_names.py)."""
from __future__ import annotations

import json
import pathlib

import pytest

import dataflow as df

from .tf_reference import name_programs

EXPECTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                       "names.json").read_text())


def test_every_program_has_a_fixture():
    assert sorted(EXPECTED) == sorted(name_programs.PROGRAMS)


@pytest.mark.parametrize("name", sorted(name_programs.PROGRAMS))
def test_names_match_tensorflow(name):
    with df.Graph().as_default():
        got = name_programs.describe(df, name_programs.PROGRAMS[name](df))
    want = EXPECTED[name]
    assert got["global"] == want["global"]
    assert got["trainable"] == want["trainable"]
    assert got["local"] == want["local"]
    assert got["elements"] == want["elements"]
    assert got["update_ops"] == want["update_ops"]
    assert got["regularization_losses"] == want["regularization_losses"]


SCOPES = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                     "scopes.json").read_text())


@pytest.mark.parametrize("index", range(len(SCOPES)))
def test_random_scope_scripts_name_as_tensorflow(index):
    from .tf_reference import scope_scripts
    case = SCOPES[index]
    with df.Graph().as_default():
        got = scope_scripts.run_script(df, case["script"])
    assert got == case["names"]
