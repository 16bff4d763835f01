"""examples/imperative: the eight imperative programs of issue 11 (section 3), run
eagerly for a few steps each, and their hand-written TF1 graph versions, which must
give the same losses."""
import re

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import dataflow as df
from examples.imperative import PROGRAMS, common, load, tf1_graphs

STEPS = 16


@pytest.fixture(scope="module", autouse=True)
def _one_blas_thread():
    """The programs' matmuls are small: a multi-threaded BLAS only spins against the
    other processes of a shared machine (several times slower under load)."""
    with threadpool_limits(1, user_api="blas"):
        yield


def _trained(losses, skipped=()):
    """Finite losses whose last quarter averages below the first quarter."""
    losses = np.array([v for i, v in enumerate(losses) if i not in skipped])
    assert np.all(np.isfinite(losses))
    quarter = max(1, len(losses) // 4)
    assert losses[-quarter:].mean() < losses[:quarter].mean(), losses


_RUNS = {}


def _eager(name, steps=STEPS):
    """``(losses, model)`` of the eager program (memoised: several tests read one run)."""
    if (name, steps) not in _RUNS:
        module = load(name)
        model = module.make_model(0)
        _RUNS[name, steps] = module.run(steps, model=model), model
    return _RUNS[name, steps]


@pytest.mark.parametrize("name", [n for n in PROGRAMS if n != "skip_step"])
def test_program_trains(name):
    losses, _ = _eager(name)
    assert len(losses) == STEPS
    _trained(losses)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_tf1_graph_version_gives_the_eager_losses(name):
    eager, _ = _eager(name)
    graph = tf1_graphs.GRAPH_VERSIONS[name](STEPS)
    # Same kernels, same op order within each op: only a reduction's summation order
    # may differ, a few float32 ulps per step.
    np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-6)


def test_wrap_is_called_once_and_its_result_used():
    calls = []

    def wrap(step):
        def wrapped(*args):
            calls.append(len(args))
            return step(*args) * 2.0    # the harness must use what the wrapper returns
        return wrapped
    plain = load("mlp_adam").run(3)
    doubled = load("mlp_adam").run(3, wrap=wrap)
    assert calls == [2, 2, 2]
    np.testing.assert_allclose(doubled, 2 * np.array(plain), rtol=1e-6)


def test_programs_are_deterministic():
    first = load("dropblock").run(16)
    assert load("dropblock").run(16) == first


def test_sdpoint_takes_every_branch_and_the_graph_version_follows():
    _, model = _eager("sdpoint")
    assert set(model.points_taken) == set(load("sdpoint").POINTS)
    graph = tf1_graphs.SDPointGraph(0)
    for images, labels in common.digit_images(STEPS):
        graph.step(images, labels)
    assert graph.points_taken == model.points_taken


def test_dropblock_reads_the_mutated_keep_prob():
    """With the schedule, the losses leave those of a run that keeps DropBlock off
    exactly at the first step whose keep_prob is below 1."""
    dropblock = load("dropblock")
    scheduled, _ = _eager("dropblock")
    with df.eager_mode():
        df.set_random_seed(0)
        model = dropblock.DropBlockNet(0)
        off = [float(model.step(df.constant(x), df.constant(y)))
               for x, y in common.digit_images(STEPS)]
    first_on = next(i for i in range(STEPS) if dropblock.keep_prob_schedule(i, STEPS) < 1)
    assert 0 < first_on < STEPS - 1
    assert scheduled[:first_on] == off[:first_on]
    assert all(a != b for a, b in zip(scheduled[first_on:], off[first_on:]))


def test_bert_cls_scores_every_step_with_scikit_learn():
    _, model = _eager("bert_cls")
    graph = tf1_graphs.BertGraph(0)
    for x, y in common.digit_batches(STEPS):
        graph.step(x, y)
    assert len(model.f1_scores) == STEPS
    assert all(0.0 <= f <= 1.0 for f in model.f1_scores)
    np.testing.assert_allclose(model.f1_scores, graph.f1_scores)
    assert np.mean(model.f1_scores[-4:]) > np.mean(model.f1_scores[:4])


def test_faster_rcnn_trip_count_comes_from_the_scores():
    rcnn = load("faster_rcnn")
    _, model = _eager("faster_rcnn")
    counts = model.proposal_counts
    assert len(set(counts)) > 1 and all(1 <= c <= rcnn.MAX_PROPOSALS for c in counts)
    graph = tf1_graphs.RCNNGraph(0)   # selects its proposals in the graph
    for x, y in common.digit_batches(STEPS):
        graph.step(x, y, rcnn.region_objectness(x))
    assert graph.proposal_counts == counts


def test_rnn_unrolls_each_batch_to_its_own_length():
    _, model = _eager("rnn_varlen")
    lengths = [x.shape[1] for x, _ in common.adding_problem(STEPS)]
    assert model.lengths == lengths and len(set(lengths)) > 3


def test_music_transformer_carries_its_loss_tensor_across_steps():
    losses, model = _eager("music_transformer")
    smoothing = load("music_transformer").SMOOTHING
    expected = losses[0]
    for loss in losses[1:]:
        expected = smoothing * expected + (1 - smoothing) * loss
    assert isinstance(model.smoothed_loss, df.EagerTensor)
    np.testing.assert_allclose(float(model.smoothed_loss), expected, rtol=1e-5)


def test_skip_step_prints_and_returns_early_on_glitched_batches(capsys):
    skip_step = load("skip_step")
    model = skip_step.make_model(0)
    snapshots = []

    def wrap(step):
        def wrapped(*args):
            before = [v.numpy() for v in model.variables]
            loss = step(*args)
            snapshots.append(all(np.array_equal(b, v.numpy())
                                 for b, v in zip(before, model.variables)))
            return loss
        return wrapped
    steps = 2 * skip_step.CORRUPT_EVERY
    losses = skip_step.run(steps, wrap=wrap, model=model)
    glitched = [i for i in range(steps) if i % skip_step.CORRUPT_EVERY == 5]
    assert [i for i, unchanged in enumerate(snapshots) if unchanged] == glitched
    assert model.skipped == len(glitched)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(glitched)
    for line, i in zip(printed, glitched):
        assert line.startswith("skipping update: gradient norm df.EagerTensor(")
        norm, loss = map(float, re.findall(r"EagerTensor\(([-\d.e]+)", line))
        assert norm > model.max_norm and loss == pytest.approx(losses[i], rel=1e-6)
    _trained(losses, skipped=set(glitched))


def test_eager_random_ops_restart_with_the_seed_and_keep_their_own_streams():
    with df.eager_mode():
        df.set_random_seed(3)
        a1, b1 = (df.random_uniform([4], seed=s).numpy() for s in (1, 2))
        a2 = df.random_uniform([4], seed=1).numpy()
        df.set_random_seed(3)
        again = df.random_uniform([4], seed=1).numpy()
    assert not np.array_equal(a1, b1)        # two seeds: two streams
    assert not np.array_equal(a1, a2)        # one op seed: the stream goes on
    np.testing.assert_array_equal(again, a1)  # set_random_seed starts it over


def test_tf1_graph_versions_close_their_session_and_leave_numpy_ieee():
    # A graph version left its flushing Session open: the BLAS pool stayed flushing
    # subnormals for the rest of the process (NumPy matmuls outside any step included).
    from dataflow.util.float_env import count_subnormals
    tf1_graphs.GRAPH_VERSIONS["mlp_adam"](2)
    a = np.full((256, 256), 1e-21, np.float32)     # every product subnormal (~2.6e-40)
    with threadpool_limits(2, user_api="blas"):   # a BLAS worker thread besides us
        product = a @ a
    assert count_subnormals(product) == product.size


def test_a_folded_loop_compiled_gives_eagers_losses_bit_for_bit(monkeypatch):
    """rnn_varlen's Python loop runs as a compiled while loop under df.function (compiled
    before the first run, or loaded from the disk cache): a compiled frame computes the
    interpreter's bits, and the gradient sums are added in the tape's order, so every
    loss equals eager's exactly."""
    monkeypatch.setenv("DATAFLOW_COMPILE_LOOPS", "eager")
    name = "rnn_varlen"
    eager, _ = _eager(name)
    module = load(name)
    function = module.run(STEPS, wrap=df.function, model=module.make_model(0))
    np.testing.assert_array_equal(function, eager)
