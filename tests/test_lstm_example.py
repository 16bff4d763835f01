"""examples/lstm_sequence_classifier.py: an LSTM trained through dynamic_rnn on
variable-length sequences (a CI-sized run)."""
import importlib.util
import pathlib

import numpy as np

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / \
    "lstm_sequence_classifier.py"


def _load():
    spec = importlib.util.spec_from_file_location("examples_lstm_sequence_classifier", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_labels_ignore_the_padding():
    example = _load()
    x, lengths, labels = example.make_data(200, np.random.default_rng(1))
    sums = np.array([x[i, :n, 0].sum() for i, n in enumerate(lengths)])
    np.testing.assert_array_equal(labels, (sums > 0).astype(np.int64))
    assert lengths.min() >= example.MIN_STEPS and lengths.max() <= example.MAX_STEPS


def test_short_run_learns_to_classify():
    result = _load().main(epochs=2, train_size=600, test_size=400, verbose=False)
    assert result["losses"][-1] < result["losses"][0]
    assert result["train_accuracy"] >= 0.85   # chance is about 50%
    assert result["test_accuracy"] >= 0.85
