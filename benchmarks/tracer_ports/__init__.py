"""The eight imperative programs of examples/imperative ported to TF2, JAX and PyTorch,
for ``python -m benchmarks.compare --only tracer`` (run with an interpreter that has
those frameworks). Each port keeps the program's Python-side behaviour -- the Python
random draw, the mutated attribute, scikit-learn on NumPy values, the data-dependent
trip count, the tensor kept on ``self``, the print and the early return -- written as
that framework's own eager code; the compiler under test (``tf.function``, ``jax.jit``,
``torch.compile``) is applied to the step, as ``df.function`` is to ours.

Each module has ``PORTS = {name: run}``, ``run(steps, wrap=None, seed=0)`` returning
``(per-step losses, observations)`` as the dataflow programs' ``run`` and
``observations`` do, and ``COMPILE``: the compiler, as a wrap.
"""
