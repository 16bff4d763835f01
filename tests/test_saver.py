"""train.Saver: round trips, var_list forms, global_step suffixes, max_to_keep and the
state file, atomic writes under a crash, and every restore error (never a partial
restore)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df
from dataflow.train import saver as saver_module


def _model():
    with df.variable_scope("layer"):
        w = df.get_variable("W", [3, 2])
        b = df.get_variable("b", [2], initializer=df.zeros_initializer())
    step = df.train.get_or_create_global_step()
    return w, b, step


def test_save_and_restore_in_a_new_session(graph, tmp_path):
    w, b, step = _model()
    saver = df.train.Saver()
    prefix = str(tmp_path / "model.ckpt")
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        sess.run([b.assign([1.0, 2.0]), step.assign(7)])
        saved = sess.run([w, b])
        path = saver.save(sess, prefix, global_step=step)
    assert path == prefix + "-7"
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "model.ckpt-7.index",
                                            "model.ckpt-7.npz"]
    index = json.loads((tmp_path / "model.ckpt-7.index").read_text())
    assert index["tensors"] == {"layer/W": {"dtype": "float32", "shape": [3, 2]},
                                "layer/b": {"dtype": "float32", "shape": [2]},
                                "global_step": {"dtype": "int64", "shape": []}}
    assert df.train.latest_checkpoint(str(tmp_path)) == path
    with df.Session() as sess:  # nothing initialized: restore gives every value
        saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w), saved[0])
        np.testing.assert_array_equal(sess.run(b), [1.0, 2.0])
        assert sess.run(step) == 7
        assert len(sess.run(df.report_uninitialized_variables())) == 0


@settings(max_examples=15, deadline=None)
@given(value=hnp.arrays(st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
                        hnp.array_shapes(min_dims=0, max_dims=3, max_side=4)))
def test_round_trip_of_any_array(value, tmp_path_factory):
    directory = tmp_path_factory.mktemp("rt")
    with df.Graph().as_default():
        v = df.Variable(value, name="v")
        saver = df.train.Saver([v])
        with df.Session() as sess:
            sess.run(v.initializer)
            path = saver.save(sess, str(directory / "m"))
        with df.Session() as sess:
            saver.restore(sess, path)
            got = sess.run(v)
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)


def test_var_list_as_dict_maps_names(graph, tmp_path):
    a = df.Variable([1.0, 2.0], name="a")
    b = df.Variable([0.0, 0.0], name="b")
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        path = df.train.Saver({"weights": a}).save(sess, str(tmp_path / "m"))
        df.train.Saver({"weights": b}).restore(sess, path)  # a's value into b
        np.testing.assert_array_equal(sess.run(b), [1.0, 2.0])
        with pytest.raises(df.errors.NotFoundError, match="Key b not found"):
            df.train.Saver([b]).restore(sess, path)
    with pytest.raises(ValueError, match="same name"):
        df.train.Saver([a, a])
    with pytest.raises(ValueError, match="No variables to save"):
        with df.Graph().as_default():
            df.train.Saver()


def test_max_to_keep_and_the_state_file(graph, tmp_path):
    v = df.Variable(0, name="v")
    saver = df.train.Saver(max_to_keep=2)
    prefix = str(tmp_path / "ckpt")
    with df.Session() as sess:
        sess.run(v.initializer)
        for step in range(4):
            sess.run(v.assign(step * 10))
            saver.save(sess, prefix, global_step=step)
        assert saver.last_checkpoints == [prefix + "-2", prefix + "-3"]
        assert not os.path.exists(prefix + "-0.npz") and not os.path.exists(prefix + "-1.index")
        state = df.train.get_checkpoint_state(str(tmp_path))
        assert state.model_checkpoint_path == prefix + "-3"
        assert state.all_model_checkpoint_paths == [prefix + "-2", prefix + "-3"]
        text = (tmp_path / "checkpoint").read_text()
        assert text == ('model_checkpoint_path: "ckpt-3"\n'
                        'all_model_checkpoint_paths: "ckpt-2"\n'
                        'all_model_checkpoint_paths: "ckpt-3"\n')
        with pytest.raises(ValueError, match="not a valid checkpoint"):
            saver.restore(sess, prefix + "-1")  # deleted by max_to_keep, as TF 1.15
        saver.restore(sess, prefix + "-2")
        assert sess.run(v) == 20
    keep_all = df.train.Saver([v], max_to_keep=None)
    with df.Session() as sess:
        sess.run(v.initializer)
        for step in (5, 6):
            keep_all.save(sess, prefix, global_step=step)
    assert os.path.exists(prefix + "-5.npz") and keep_all.last_checkpoints == [prefix + "-6"]


def test_missing_checkpoints_and_directories(graph, tmp_path):
    v = df.Variable(1.0, name="v")
    saver = df.train.Saver()
    assert df.train.latest_checkpoint(str(tmp_path)) is None
    with df.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(ValueError, match="not a valid checkpoint"):
            saver.restore(sess, str(tmp_path / "nothing"))
        with pytest.raises(ValueError, match="None"):
            saver.restore(sess, None)
        with pytest.raises(ValueError, match="doesn't exist"):
            saver.save(sess, str(tmp_path / "no" / "dir" / "m"))


def test_mismatched_shape_or_dtype_is_invalid_argument_and_restores_nothing(graph,
                                                                            tmp_path):
    with df.variable_scope("net"):
        a = df.get_variable("a", initializer=np.ones(3, np.float32))
        b = df.get_variable("b", initializer=np.ones(2, np.float32))
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        path = df.train.Saver().save(sess, str(tmp_path / "m"))
    with df.Graph().as_default():
        with df.variable_scope("net"):
            a2 = df.get_variable("a", initializer=np.zeros(3, np.float32))
            df.get_variable("b", initializer=np.zeros(4, np.float32))  # another shape
        saver = df.train.Saver()
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            with pytest.raises(df.errors.InvalidArgumentError, match="net/b") as e:
                saver.restore(sess, path)
            assert "[2]" in str(e.value) and "(4,)" in str(e.value)
            np.testing.assert_array_equal(sess.run(a2), [0, 0, 0])  # not partially restored
    with df.Graph().as_default():
        with df.variable_scope("net"):
            df.get_variable("a", initializer=np.zeros(3, np.float64))
            df.get_variable("b", initializer=np.zeros(2, np.float32))
        with df.Session() as sess:
            with pytest.raises(df.errors.InvalidArgumentError, match="net/a.*float64"):
                df.train.Saver().restore(sess, path)
    assert a is not None and b is not None


@pytest.mark.parametrize("damage", ["truncate_data", "flip_byte", "truncate_index",
                                    "delete_data"])
def test_damaged_checkpoints_are_data_loss(graph, tmp_path, damage):
    v = df.Variable(np.arange(100, dtype=np.float32), name="v")
    saver = df.train.Saver()
    with df.Session() as sess:
        sess.run(v.initializer)
        path = saver.save(sess, str(tmp_path / "m"))
        data, index = tmp_path / "m.npz", tmp_path / "m.index"
        if damage == "truncate_data":
            data.write_bytes(data.read_bytes()[:200])
        elif damage == "flip_byte":
            blob = bytearray(data.read_bytes())
            blob[-300] ^= 0xFF
            data.write_bytes(bytes(blob))
        elif damage == "truncate_index":
            index.write_bytes(index.read_bytes()[:40])
        else:
            data.unlink()
        sess.run(v.assign(np.zeros(100, np.float32)))
        with pytest.raises(df.errors.DataLossError, match="m\\.(npz|index)"):
            saver.restore(sess, path)
        np.testing.assert_array_equal(sess.run(v), np.zeros(100))


def test_a_crash_mid_save_leaves_the_previous_checkpoint_intact(graph, tmp_path,
                                                                monkeypatch):
    v = df.Variable(1.0, name="v")
    saver = df.train.Saver()
    prefix = str(tmp_path / "m")
    with df.Session() as sess:
        sess.run(v.initializer)
        first = saver.save(sess, prefix)
        before = {p: (tmp_path / p).read_bytes() for p in os.listdir(tmp_path)}
        sess.run(v.assign(2.0))

        def crash(f, data):
            f.write(data[:len(data) // 2])
            raise OSError("disk full")
        monkeypatch.setattr(saver_module, "_write_all", crash)
        with pytest.raises(OSError, match="disk full"):
            saver.save(sess, prefix)  # the same prefix: overwriting is what could lose it
        with pytest.raises(OSError, match="disk full"):
            saver.save(sess, prefix, global_step=1)
        monkeypatch.undo()
        after = {p: (tmp_path / p).read_bytes() for p in os.listdir(tmp_path)}
        assert after == before  # no temporary file left behind, nothing changed
        assert df.train.latest_checkpoint(str(tmp_path)) == first
        saver.restore(sess, first)
        assert sess.run(v) == 1.0


def test_restore_into_a_trained_model_matches_training(graph, tmp_path):
    df.set_random_seed(0)
    x = np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    with df.variable_scope("lin"):
        w = df.get_variable("w", [3, 1])
    loss = df.reduce_mean(df.square(df.matmul(x, w) - y))
    train = df.train.AdamOptimizer(0.1).minimize(loss)
    saver = df.train.Saver(max_to_keep=1)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        for _ in range(20):
            sess.run(train)
        path = saver.save(sess, str(tmp_path / "m"))
        continued = [sess.run([train, loss])[1] for _ in range(5)]
    with df.Session() as sess:  # Adam's slots and beta powers come back too
        saver.restore(sess, path)
        again = [sess.run([train, loss])[1] for _ in range(5)]
    np.testing.assert_allclose(again, continued, rtol=1e-6)


def test_keep_checkpoint_every_n_hours(graph, tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(saver_module, "_now", lambda: clock[0])
    v = df.Variable(0, name="v")
    saver = df.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1.0)
    prefix = str(tmp_path / "m")
    with df.Session() as sess:
        sess.run(v.initializer)
        for step, minutes in enumerate([10, 20, 70, 80, 200]):
            clock[0] = 1000.0 + 60 * minutes
            saver.save(sess, prefix, global_step=step)
    kept = sorted(p for p in os.listdir(tmp_path) if p.endswith(".index"))
    # Step 2 (70 min, past the first hour) is kept for good; the next keep is after 2 h.
    assert kept == ["m-2.index", "m-4.index"]
    assert saver.last_checkpoints == [prefix + "-4"]
