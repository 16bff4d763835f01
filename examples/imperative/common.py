"""Data and the small shared pieces of the imperative programs (NumPy and scikit-learn
only, so that the TF2, JAX and PyTorch ports in ``benchmarks/tracer_ports`` feed the
very same batches and initial weights).

Every generator is seeded: a program run twice, or run once per framework, sees the same
batches in the same order.
"""
from __future__ import annotations

import argparse
import functools

import numpy as np

__all__ = [
    "adding_problem",
    "digit_batches",
    "digit_images",
    "digits",
    "glorot",
    "he_normal",
    "main",
    "music_sequences",
]


@functools.lru_cache(maxsize=1)
def digits():
    """scikit-learn's bundled 8x8 digits: ``(x, y)``, x float32 in [0, 1] of shape
    [1797, 64], y int32 labels. Ships with scikit-learn: nothing is downloaded."""
    from sklearn.datasets import load_digits
    data = load_digits()
    return (data.data / 16.0).astype(np.float32), data.target.astype(np.int32)


def digit_batches(steps, batch_size=64, seed=0):
    """``steps`` shuffled mini-batches ``(x [B, 64], y [B])`` of the digits, epoch after
    epoch."""
    x, y = digits()
    rng = np.random.default_rng(seed)
    order = np.empty(0, np.int64)
    for _ in range(steps):
        if len(order) < batch_size:
            order = np.concatenate([order, rng.permutation(len(x))])
        idx, order = order[:batch_size], order[batch_size:]
        yield x[idx], y[idx]


def digit_images(steps, batch_size=32, seed=0):
    """Like :func:`digit_batches`, the images shaped ``[B, 8, 8, 1]`` (NHWC)."""
    for xb, yb in digit_batches(steps, batch_size, seed):
        yield xb.reshape(-1, 8, 8, 1), yb


def glorot(rng, shape):
    """Glorot-uniform float32 weights of ``shape`` (the last two dimensions are fan-in
    and fan-out; leading ones, as in a conv kernel, multiply both)."""
    receptive = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape).astype(np.float32)


def adding_problem(steps, batch_size=32, min_len=8, max_len=24, seed=0):
    """The adding problem (Hochreiter & Schmidhuber): each sequence is ``[T, 2]`` with a
    value in [0, 1) and a marker channel with two ones; the target is the sum of the two
    marked values. Each batch has its own length ``T`` (sequences bucketed by length):
    yields ``(x [B, T, 2], target [B, 1])``."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        length = int(rng.integers(min_len, max_len + 1))
        values = rng.random((batch_size, length)).astype(np.float32)
        markers = np.zeros((batch_size, length), np.float32)
        for row in range(batch_size):
            markers[row, rng.choice(length, 2, replace=False)] = 1.0
        target = (values * markers).sum(axis=1, keepdims=True).astype(np.float32)
        yield np.stack([values, markers], axis=2), target


def music_sequences(steps, batch_size=16, length=17, vocab=24, seed=0):
    """Synthetic melodies as token sequences ``[B, length]`` (int32 pitches < ``vocab``):
    a random motif of four steps on a scale, repeated and transposed, with a few random
    notes; a language model learns the repetition. Yields the token batches."""
    rng = np.random.default_rng(seed)
    scale = np.array([0, 2, 4, 5, 7, 9, 11, 12, 14, 16, 17, 19])
    for _ in range(steps):
        motifs = rng.integers(0, 6, (batch_size, 4))
        shift = rng.integers(0, 5, (batch_size, 1))
        reps = -(-length // 4)
        degrees = np.tile(motifs, reps)[:, :length] + np.repeat(
            np.arange(reps) % 2, 4)[None, :length] + shift
        tokens = scale[np.clip(degrees, 0, len(scale) - 1)]
        noise = rng.random((batch_size, length)) < 0.05
        tokens = np.where(noise, rng.integers(0, vocab, (batch_size, length)), tokens)
        yield np.minimum(tokens, vocab - 1).astype(np.int32)


def main(run, steps, doc):
    """The command line of a program: ``--steps``, ``--seed``; runs ``run`` verbosely
    in eager mode and prints the first and last losses."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    losses = run(steps=args.steps, seed=args.seed, verbose=True)
    print(f"{len(losses)} steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return losses


def he_normal(rng, shape):
    """He-normal float32 weights for a ReLU layer: std sqrt(2 / fan_in), fan_in the
    product of all dimensions but the last (a conv kernel's receptive field times its
    input channels)."""
    fan_in = int(np.prod(shape[:-1]))
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
