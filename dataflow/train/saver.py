"""``train.Saver``: save variables to checkpoints and restore them (``tf.train.Saver``).

Format
------
A checkpoint is a *prefix* (``/tmp/model.ckpt-100``) naming two files:

* ``<prefix>.npz``: the values, a NumPy ``.npz`` archive with one array per saved
  variable, keyed by its checkpoint name (the variable's op name, ``layer/W``, or the
  key given in a ``var_list`` dict);
* ``<prefix>.index``: JSON ``{"format": "dataflow-checkpoint", "version": 1,
  "data_file": "<basename>.npz", "data_size": bytes, "data_sha256": hex,
  "tensors": {name: {"dtype": "float32", "shape": [...]}}}``.

Next to them, the directory's state file (``checkpoint`` unless ``latest_filename``)
lists the checkpoints the Saver keeps, in TF's text form::

    model_checkpoint_path: "model.ckpt-100"
    all_model_checkpoint_paths: "model.ckpt-90"
    all_model_checkpoint_paths: "model.ckpt-100"

Every file is written to a temporary file in the same directory, flushed, fsynced and
renamed over its final name, data first, then index, then state: a crash during a save
leaves the previous checkpoints and state file as they were, and a data file that does
not match its index (size or SHA-256) is reported, never read. No meta graph is
written (``write_meta_graph`` is accepted and ignored).

Restoring checks everything before assigning anything: a missing checkpoint (or one
``max_to_keep`` deleted) is ``ValueError``, as TF 1.15; a missing key ``NotFoundError``;
a shape or dtype that does not match the variable ``InvalidArgumentError`` naming it; a
truncated or corrupted file ``DataLossError``. Then one run assigns every variable.

>>> import tempfile
>>> w = df.Variable([1.0, 2.0], name="w")
>>> saver = Saver(max_to_keep=3)
>>> ckpt_dir = tempfile.mkdtemp()
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     path = saver.save(sess, ckpt_dir + "/model.ckpt", global_step=7)
>>> path == ckpt_dir + "/model.ckpt-7"
True
>>> with df.Session() as new_sess:
...     saver.restore(new_sess, latest_checkpoint(ckpt_dir))
...     new_sess.run(w)
array([1., 2.], dtype=float32)
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import time
import zipfile

import numpy as np

from .. import dtypes as _dtypes
from .. import errors
from ..framework.graph import get_default_graph
from ..ops.array_ops import placeholder
from ..ops.control_flow_ops import group
from ..ops.state_ops import Variable, global_variables

__all__ = ["Saver", "latest_checkpoint", "get_checkpoint_state", "checkpoint_exists",
           "CheckpointState", "update_checkpoint_state"]

_FORMAT = "dataflow-checkpoint"
_VERSION = 1


# -- files -----------------------------------------------------------------------------------

def _write_atomic(path, data: bytes):
    """Write ``data`` to ``path`` through a fsynced temporary file renamed over it."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_all(f, data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def _now():
    return time.time()


def _write_all(f, data):
    f.write(data)


def _data_path(prefix):
    return prefix + ".npz"


def _index_path(prefix):
    return prefix + ".index"


def checkpoint_exists(checkpoint_prefix) -> bool:
    """Whether a checkpoint with this prefix exists (its index file is there)."""
    return os.path.isfile(_index_path(os.fspath(checkpoint_prefix)))


class CheckpointState:
    """What a directory's state file says: the latest checkpoint and the kept ones."""

    def __init__(self, model_checkpoint_path, all_model_checkpoint_paths):
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths)

    def __repr__(self):
        return (f"CheckpointState(model_checkpoint_path={self.model_checkpoint_path!r}, "
                f"all_model_checkpoint_paths={self.all_model_checkpoint_paths!r})")


def _state_text(latest, paths):
    lines = [f"model_checkpoint_path: {json.dumps(latest)}"]
    lines += [f"all_model_checkpoint_paths: {json.dumps(p)}" for p in paths]
    return "\n".join(lines) + "\n"


def update_checkpoint_state(save_dir, model_checkpoint_path, all_model_checkpoint_paths=None,
                            latest_filename=None):
    """Write ``save_dir``'s state file (paths inside ``save_dir`` are stored relative)."""
    def rel(p):
        return os.path.relpath(p, save_dir) if os.path.dirname(p) == save_dir.rstrip("/") \
            else p
    paths = list(all_model_checkpoint_paths or [])
    if not paths or paths[-1] != model_checkpoint_path:
        paths.append(model_checkpoint_path)
    text = _state_text(rel(model_checkpoint_path), [rel(p) for p in paths])
    _write_atomic(os.path.join(save_dir, latest_filename or "checkpoint"), text.encode())


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
    """The :class:`CheckpointState` of ``checkpoint_dir``, or None without a state file.
    Relative paths are returned joined to ``checkpoint_dir``, as TF does."""
    path = os.path.join(checkpoint_dir, latest_filename or "checkpoint")
    if not os.path.isfile(path):
        return None
    latest, kept = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            key, sep, value = line.partition(":")
            if not sep:
                continue
            try:
                value = json.loads(value.strip())
            except ValueError:
                raise errors.DataLossError(None, None, f"Unreadable checkpoint state file "
                                           f"{path}: {line.strip()!r}") from None
            if not os.path.isabs(value):
                value = os.path.join(checkpoint_dir, value)
            if key.strip() == "model_checkpoint_path":
                latest = value
            elif key.strip() == "all_model_checkpoint_paths":
                kept.append(value)
    if latest is None:
        raise errors.DataLossError(None, None, f"Invalid checkpoint state file {path}: "
                                   "no model_checkpoint_path")
    return CheckpointState(latest, kept)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The prefix of the latest checkpoint saved in ``checkpoint_dir``, or None.

    >>> import tempfile
    >>> run_dir = tempfile.mkdtemp()
    >>> latest_checkpoint(run_dir) is None
    True
    >>> saver = Saver([df.Variable(3.0, name="v")])
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     prefix = saver.save(sess, run_dir + "/model", global_step=2)
    >>> latest_checkpoint(run_dir) == run_dir + "/model-2"
    True
    """
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is not None and checkpoint_exists(state.model_checkpoint_path):
        return state.model_checkpoint_path
    return None


def _read_checkpoint(prefix):
    """``(index, {name: array})`` of a checkpoint, every file verified."""
    index_path, data_path = _index_path(prefix), _data_path(prefix)
    try:
        with open(index_path, "rb") as f:
            index = json.loads(f.read().decode("utf-8"))
        if index.get("format") != _FORMAT:
            raise ValueError(f"format {index.get('format')!r}")
        tensors, size, digest = index["tensors"], index["data_size"], index["data_sha256"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise errors.DataLossError(None, None, f"Checkpoint index {index_path} is truncated "
                                   f"or corrupted ({e})") from None
    try:
        with open(data_path, "rb") as f:
            blob = f.read()
    except FileNotFoundError:
        raise errors.DataLossError(None, None, f"Checkpoint data file {data_path} is missing "
                                   f"(its index {index_path} exists)") from None
    if len(blob) != size or hashlib.sha256(blob).hexdigest() != digest:
        raise errors.DataLossError(None, None, f"Checkpoint data file {data_path} is "
                                   f"truncated or corrupted: {len(blob)} bytes, expected "
                                   f"{size} with the SHA-256 its index records")
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in tensors}
    except (zipfile.BadZipFile, ValueError, KeyError, OSError) as e:
        raise errors.DataLossError(None, None, f"Checkpoint data file {data_path} is "
                                   f"unreadable ({e})") from None
    return index, arrays


# -- the Saver -------------------------------------------------------------------------------

def _op_name(var):
    return var.name.rsplit(":", 1)[0]


def _var_list_to_dict(var_list):
    """``{checkpoint name: Variable}`` from a list (names from the variables) or a dict."""
    if isinstance(var_list, dict):
        items = list(var_list.items())
    else:
        items = []
        for v in var_list:
            if not isinstance(v, Variable):
                raise TypeError(f"Variable to save is not a Variable: {v!r}")
            items.append((_op_name(v), v))
    names = {}
    for name, v in items:
        if not isinstance(v, Variable):
            raise TypeError(f"Variable to save is not a Variable: {v!r}")
        if name in names:
            raise ValueError(f"At least two variables have the same name: {name}")
        names[name] = v
    return names


class Saver:
    """Saves and restores variables (``tf.train.Saver``); see the module docstring for
    the file format and the guarantees.

    ``var_list``: variables (saved under their names) or a ``{name: variable}`` dict;
    default every global variable. ``max_to_keep``: how many recent checkpoints to keep
    (older ones are deleted; None or 0 keeps all), except that one checkpoint every
    ``keep_checkpoint_every_n_hours`` is kept for good.

    >>> import tempfile
    >>> w = df.Variable([[1.0, 2.0]], name="w")
    >>> saver = Saver({"weights": w})
    >>> prefix = tempfile.mkdtemp() + "/model"
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     saver.save(sess, prefix) == prefix
    True
    """

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None,
                 restore_sequentially=False, saver_def=None, builder=None,
                 defer_build=False, allow_empty=False, write_version=None,
                 pad_step_number=False, save_relative_paths=False, filename=None):
        if reshape or sharded:
            raise NotImplementedError("Saver: reshape and sharded are not supported")
        if var_list is None:
            var_list = global_variables()
        self._vars = _var_list_to_dict(var_list)
        self._allow_empty = allow_empty
        if not self._vars and not allow_empty:
            raise ValueError("No variables to save")
        self._max_to_keep = max_to_keep
        # As TF: a checkpoint rotated out of max_to_keep is kept anyway when it was saved
        # at least keep_checkpoint_every_n_hours after the last one kept that way.
        self._keep_every_s = keep_checkpoint_every_n_hours * 3600.0
        self._next_keep_time = _now() + self._keep_every_s
        self._save_times: dict = {}
        self._pad_step_number = pad_step_number
        self._filename = filename
        self._last_checkpoints: list[str] = []
        graph = get_default_graph()
        self._graph = graph
        # The save and restore ops are built once, here, as TF's Saver builds them.
        with graph.name_scope(name or "save"), graph.control_dependencies(None):
            self._reads = {}
            self._feeds = {}
            assigns = []
            for key, var in self._vars.items():
                self._reads[key] = var.read_value()
                ph = placeholder(var.dtype, var.shape if var.shape.ndims is not None
                                 else None, name="restore_value")
                self._feeds[key] = ph
                assigns.append(var.assign(ph, name="Assign"))
            self._restore_op = group(*assigns, name="restore_all") if assigns else None

    @property
    def last_checkpoints(self):
        """The prefixes of the checkpoints kept (not deleted yet), oldest first."""
        return list(self._last_checkpoints)

    def set_last_checkpoints(self, last_checkpoints):
        if not isinstance(last_checkpoints, list):
            raise AssertionError("last_checkpoints must be a list")
        self._last_checkpoints = list(last_checkpoints)

    def recover_last_checkpoints(self, checkpoint_paths):
        """Track the existing ones of ``checkpoint_paths`` (e.g. a restarted job's)."""
        self._last_checkpoints = [p for p in checkpoint_paths if checkpoint_exists(p)]

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False):
        """Write the variables' current values; returns the checkpoint prefix
        (``save_path``, with ``-<global_step>`` appended when a step is given)."""
        if latest_filename and os.path.basename(latest_filename) != latest_filename:
            raise ValueError("'latest_filename' collides with 'save_path': "
                             f"'{latest_filename}' and '{save_path}'")
        save_path = os.fspath(save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                global_step = sess.run(global_step)
            fmt = "%s-%08d" if self._pad_step_number else "%s-%d"
            prefix = fmt % (save_path, int(global_step))
        else:
            prefix = save_path
        save_dir = os.path.dirname(prefix) or "."
        if not os.path.isdir(save_dir):
            raise ValueError(f"Parent directory of {save_path} doesn't exist, can't save.")
        values = sess.run(self._reads) if self._reads else {}
        arrays = {k: np.asarray(v) for k, v in values.items()}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        blob = buffer.getvalue()
        index = {"format": _FORMAT, "version": _VERSION,
                 "data_file": os.path.basename(_data_path(prefix)),
                 "data_size": len(blob), "data_sha256": hashlib.sha256(blob).hexdigest(),
                 "tensors": {k: {"dtype": _dtypes.as_dtype(a.dtype).name,
                                 "shape": list(a.shape)} for k, a in arrays.items()}}
        _write_atomic(_data_path(prefix), blob)
        _write_atomic(_index_path(prefix), json.dumps(index, indent=1).encode())
        self._track(prefix)
        if write_state:
            update_checkpoint_state(save_dir, prefix, self._last_checkpoints,
                                    latest_filename)
        return prefix

    def _track(self, prefix):
        if prefix in self._last_checkpoints:
            self._last_checkpoints.remove(prefix)
        self._last_checkpoints.append(prefix)
        self._save_times[prefix] = _now()
        if not self._max_to_keep:
            # As TF: no file is deleted, but only the newest is remembered.
            self._last_checkpoints = self._last_checkpoints[-1:]
            return
        while len(self._last_checkpoints) > self._max_to_keep:
            old = self._last_checkpoints.pop(0)
            if self._save_times.pop(old, 0.0) > self._next_keep_time:
                self._next_keep_time += self._keep_every_s
                continue
            for path in (_index_path(old), _data_path(old)):  # index first: never half-valid
                if os.path.exists(path):
                    os.remove(path)

    def restore(self, sess, save_path):
        """Assign every variable its value in checkpoint ``save_path`` (all or none)."""
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        save_path = os.fspath(save_path)
        if not checkpoint_exists(save_path):
            raise ValueError(f"The passed save_path is not a valid checkpoint: {save_path}")
        index, arrays = _read_checkpoint(save_path)
        feed = {}
        for key, var in self._vars.items():
            if key not in arrays:
                raise errors.NotFoundError(
                    None, None, f"Key {key} not found in checkpoint {save_path} (restoring "
                    f"variable {_op_name(var)})")
            value = arrays[key]
            dtype = _dtypes.as_dtype(value.dtype)
            if dtype is not var.dtype:
                raise errors.InvalidArgumentError(
                    None, var.op, f"Restoring variable {_op_name(var)} from checkpoint "
                    f"{save_path}: the checkpoint holds {key} as {dtype.name}, the variable "
                    f"is {var.dtype.name}")
            if not var.shape.is_compatible_with(value.shape):
                raise errors.InvalidArgumentError(
                    None, var.op, f"Restoring variable {_op_name(var)} from checkpoint "
                    f"{save_path}: shape {list(value.shape)} in the checkpoint does not match "
                    f"the variable's shape {var.shape} (key {key})")
            feed[self._feeds[key]] = value
        if self._restore_op is not None:
            sess.run(self._restore_op, feed)
