"""Eight imperative (TF2-style eager) training programs, one per hard case of a tracer
(Terra, issue 11 section 3). Each module has a model class whose ``step(...)`` method
is one training iteration -- the unit ``df.function`` wraps -- and
``run(steps, wrap=None, seed=0, verbose=False, model=None)``, which trains in eager
mode calling ``wrap(model.step)`` each step and returns the per-step losses.

    python examples/imperative/NAME.py --steps 100

``PROGRAMS`` lists them in the issue's order with the hard case each exercises;
:mod:`examples.imperative.tf1_graphs` has the same steps written by hand as TF1 graphs.
"""
import importlib

PROGRAMS = {
    "mlp_adam": "plain MLP, GradientTape + Adam",
    "sdpoint": "branch chosen by Python randomness (SDPoint)",
    "dropblock": "self.keep_prob mutated on a schedule (DropBlock)",
    "bert_cls": "scikit-learn f1_score on .numpy() every step (BERT-CLS)",
    "faster_rcnn": ".numpy() decides a loop's trip count (Faster R-CNN)",
    "rnn_varlen": "Python for loop over RNN time steps, varying length",
    "music_transformer": "loss stored on self, used next step (Music Transformer)",
    "skip_step": "prints tensors, returns early on a condition",
}


def load(name):
    """The program module ``name`` (a key of PROGRAMS)."""
    if name not in PROGRAMS:
        raise KeyError(f"unknown program {name!r}; choose from {sorted(PROGRAMS)}")
    return importlib.import_module(f"{__name__}.{name}")
