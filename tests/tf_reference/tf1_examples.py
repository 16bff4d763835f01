"""Run the TF1 programs of ``examples/tf1/`` under TensorFlow or dataflow, for
``generate_tf1_examples.py`` (-> ``tf1_examples.json``) and ``tests/test_tf1_examples.py``.

:func:`load_program` loads a program as a module; for TensorFlow its one
``import dataflow as tf`` line becomes ``import tensorflow.compat.v1 as tf`` (graph mode,
control flow v1, TF 1.15's reference variables): the rest of the source runs unchanged.

:func:`first_steps` builds a program's model, sets every trainable variable to the
same fixed NumPy values (sorted by name; the frameworks' random initializers differ),
and runs its first training steps on its first mini-batches with dropout off (the
programs' dropout placeholders default to off), recording the loss of each step.
"""
from __future__ import annotations

import importlib.util
import pathlib
import types

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "tf1"
PROGRAMS = ("softmax_regression", "mlp_layers", "convnet", "rnn_classifier")
FIRST_STEPS = 5
# Steps of the end-to-end runs compared with TF's accuracy: short enough for CI, long
# enough that the test accuracy has settled to within a few points of its final value.
END_STEPS = {"softmax_regression": 300, "mlp_layers": 300, "convnet": 250,
             "rnn_classifier": 300}

DATAFLOW_IMPORT = "import dataflow as tf\n"
TENSORFLOW_IMPORT = ("import tensorflow.compat.v1 as tf\n"
                     "tf.disable_eager_execution()\n"
                     "tf.disable_control_flow_v2()\n"
                     "tf.disable_resource_variables()\n")


def load_program(name, tensorflow=False) -> types.ModuleType:
    """``examples/tf1/<name>.py`` as a module (importing TensorFlow instead with
    ``tensorflow=True``)."""
    path = EXAMPLES / f"{name}.py"
    if not tensorflow:
        spec = importlib.util.spec_from_file_location(f"tf1_example_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    source = path.read_text()
    assert source.count(DATAFLOW_IMPORT) == 1, f"{path}: one '{DATAFLOW_IMPORT.strip()}'"
    module = types.ModuleType(f"tf1_example_{name}_tensorflow")
    module.__file__ = str(path)
    exec(compile(source.replace(DATAFLOW_IMPORT, TENSORFLOW_IMPORT), str(path), "exec"),
         module.__dict__)
    return module


def fixed_values(variables) -> dict:
    """Deterministic values for ``variables``, drawn in the order of their sorted names."""
    values = {}
    for k, v in enumerate(sorted(variables, key=lambda v: v.name)):
        rng = np.random.default_rng(1000 + k)
        shape = [int(d) for d in v.shape]
        values[v.name] = rng.uniform(-0.2, 0.2, shape).astype(np.float32)
    return values


def first_steps(program, steps=FIRST_STEPS) -> dict:
    """The trainable variables' names and shapes, and the losses of the first ``steps``
    training steps from :func:`fixed_values` (then the loss after them)."""
    tf = program.tf
    tf.reset_default_graph()
    x_train, _, y_train, _ = program.load_data()
    model = program.build_model()
    variables = tf.trainable_variables()
    values = fixed_values(variables)
    assigns = [tf.assign(v, values[v.name]) for v in variables]
    batches = program.batches(len(x_train), program.BATCH_SIZE, 0)
    feeds = [{model["x"]: x_train[idx], model["labels"]: y_train[idx]}
             for _, idx in zip(range(steps + 1), batches)]
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(assigns)
        for feed in feeds[:steps]:
            loss, _ = sess.run([model["loss"], model["train_op"]], feed)
            losses.append(float(loss))
        losses.append(float(sess.run(model["loss"], feeds[steps])))
    return {"variables": [[v.name, [int(d) for d in v.shape]] for v in variables],
            "losses": losses}
