"""``dynamic_rnn`` and ``bidirectional_dynamic_rnn`` (``df.nn``), built as TF1 builds them.

The inputs (time-major inside) are unstacked into TensorArrays; a ``while_loop`` over
time calls the cell on ``input_ta.read(t)`` and writes each output to an output
TensorArray, stacked at the end. With ``sequence_length``, a batch entry whose
sequence has ended (``t >= sequence_length[b]``) gets zero outputs and keeps its last
state (TF's copy-through), and the loop stops after the longest sequence: the
output array's unwritten steps read as zeros. All of it differentiates through the
loop's gradient.

>>> cell = df.nn.rnn_cell.BasicLSTMCell(32)
>>> x = df.ones([2, 5, 3])                     # [batch, time, depth]
>>> lengths = df.constant([5, 2])
>>> outputs, state = df.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=df.float32)
>>> outputs.shape, state.h.shape
(TensorShape([2, 5, 32]), TensorShape([2, 32]))
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     out = sess.run(outputs)
>>> bool((out[1, 2:] == 0).all())                # past its length a sequence outputs zeros
True
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import constant, convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.tensor_shape import TensorShape
from ..ops.array_ops import identity, reshape, shape as shape_of, stack
from ..ops.array_ops import transpose, where, zeros
from ..ops.extra_array_ops import reverse
from ..ops.logging_ops import Assert
from ..ops.math_ops import cast, equal, greater_equal, maximum, minimum, reduce_all
from ..ops.math_ops import reduce_max
from ..ops.sequence_ops import reverse_sequence
from ..ops.tensor_array_ops import TensorArray
from ..util import nest
from ..ops.variable_scope import variable_scope
from .while_loop import while_loop

__all__ = ["dynamic_rnn", "bidirectional_dynamic_rnn"]


def _transpose_batch_time(x):
    """Swap the first two dimensions (batch-major <-> time-major)."""
    x = convert_to_tensor(x)
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"Expected input tensor {x.name} to have known rank")
    if rank < 2:
        raise ValueError(f"Expected input tensor {x.name} to have rank at least 2, but saw "
                         f"shape: {x.shape}")
    return transpose(x, [1, 0] + list(range(2, rank)))


def _batch_size(flat_input):
    """The batch size (dimension 1 of the time-major inputs): static if known."""
    for x in flat_input:
        if x.shape.ndims is not None and x.shape.ndims >= 2 and x.shape[1] is not None:
            return x.shape[1]
    return shape_of(flat_input[0])[1]


def _check_inputs(flat_input):
    for x in flat_input:
        if x.shape.ndims is not None and x.shape.ndims < 3:
            raise ValueError(f"Input {x.name} must have rank at least 3 (time, batch, depth), "
                             f"saw shape: {x.shape}")
        if x.shape.ndims is not None and x.shape[-1] is None:
            raise ValueError(f"Input size (depth of inputs) must be accessible via shape "
                             f"inference, but saw value None ({x.name}).")


def _zero_output(batch_size, size, dtype):
    if isinstance(batch_size, int):
        return zeros([batch_size, size], dtype)
    return zeros(stack([batch_size, size]), dtype)


def _copy_through(done, old, new):
    """``old`` for the batch entries that are done, ``new`` for the others (rows)."""
    rank = new.shape.ndims
    cond = done
    if rank is None or rank > 1:
        cond = reshape(done, [-1] + [1] * ((rank or 2) - 1))
    result = where(cond, old, new)
    result.set_shape(new.shape)
    return result


def _rnn_step(time, sequence_length, zero_output, state, call_cell):
    """One step with copy-through: the cell runs on the whole batch; entries past their
    length take zeros as output and their previous state (TF's ``_rnn_step`` with
    ``skip_conditionals``)."""
    new_output, new_state = call_cell()
    try:
        nest.assert_same_structure(zero_output, new_output)
        nest.assert_same_structure(state, new_state)
    except (TypeError, ValueError) as e:
        raise ValueError(f"The cell's output or state does not match its output_size or "
                         f"state_size: {e}") from None
    done = greater_equal(time, sequence_length)
    flat_out = [_copy_through(done, z, n) for z, n in
                zip(nest.flatten(zero_output), nest.flatten(new_output))]
    flat_state = [n if n.shape.ndims == 0 else _copy_through(done, s, n) for s, n in
                  zip(nest.flatten(state), nest.flatten(new_state))]
    return (nest.pack_sequence_as(zero_output, flat_out),
            nest.pack_sequence_as(state, flat_state))


def _state_dtype(dtype, state):
    if dtype is not None:
        return _dtypes.as_dtype(dtype)
    return nest.flatten(state)[0].dtype


def _dynamic_rnn_loop(cell, inputs, state, parallel_iterations, swap_memory, sequence_length,
                      dtype):
    flat_input = nest.flatten(inputs)
    flat_output_size = nest.flatten(cell.output_size)
    time_steps = shape_of(flat_input[0])[0]
    const_time_steps = flat_input[0].shape[0]
    if const_time_steps is not None:
        time_steps = constant(const_time_steps, name="time_steps")
    batch_size = _batch_size(flat_input)
    const_batch = batch_size if isinstance(batch_size, int) else None
    out_dtype = _state_dtype(dtype, state)
    zero_output = nest.pack_sequence_as(
        cell.output_size, [_zero_output(batch_size, s, out_dtype) for s in flat_output_size])
    if sequence_length is not None:
        max_sequence_length = reduce_max(sequence_length)
    else:
        max_sequence_length = time_steps
    time = constant(0, dtype=_dtypes.int32, name="time")
    g = get_default_graph()
    with g.name_scope("dynamic_rnn") as base_name:
        pass
    output_ta = tuple(
        TensorArray(out_dtype, size=time_steps, tensor_array_name=f"{base_name}output_{k}",
                    element_shape=TensorShape([const_batch, s]))
        for k, s in enumerate(flat_output_size))
    input_ta = tuple(
        TensorArray(x.dtype, size=time_steps, tensor_array_name=f"{base_name}input_{k}",
                    element_shape=x.shape[1:]).unstack(x)
        for k, x in enumerate(flat_input))

    def time_step(time, output_ta_t, state):
        input_t = [ta.read(time) for ta in input_ta]
        for x, original in zip(input_t, flat_input):
            x.set_shape(original.shape[1:])
        input_t = nest.pack_sequence_as(inputs, input_t)

        def call_cell():
            return cell(input_t, state)

        if sequence_length is not None:
            output, new_state = _rnn_step(time, sequence_length, zero_output, state, call_cell)
        else:
            output, new_state = call_cell()
        output_ta_t = tuple(ta.write(time, o) for ta, o in zip(output_ta_t, nest.flatten(output)))
        return time + 1, output_ta_t, new_state

    loop_bound = minimum(time_steps, maximum(1, max_sequence_length))
    _, output_final_ta, final_state = while_loop(
        lambda time, *_: time < loop_bound, time_step, (time, output_ta, state),
        parallel_iterations=parallel_iterations, maximum_iterations=time_steps,
        swap_memory=swap_memory)
    final_outputs = [ta.stack() for ta in output_final_ta]
    for out, size in zip(final_outputs, flat_output_size):
        out.set_shape([const_time_steps, const_batch, size])
    return nest.pack_sequence_as(cell.output_size, final_outputs), final_state


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False, scope=None):
    """Run ``cell`` over the time steps of ``inputs`` (``tf.compat.v1.nn.dynamic_rnn``).

    ``inputs`` is ``[batch, time, ...]`` (``[time, batch, ...]`` with ``time_major``), or a
    nested structure of such tensors. Returns ``(outputs, final_state)``: the outputs of
    every step in the inputs' layout, and the last state (for an entry with a
    ``sequence_length``, the state at its last step; its outputs past it are zeros).
    Without ``initial_state`` the state starts at zeros of ``dtype``. The cell's
    variables are named under the variable scope ``scope`` (a name or a
    ``VariableScope``; default ``rnn``) inside the enclosing ``variable_scope``.

    >>> cell = df.nn.rnn_cell.GRUCell(16)
    >>> x = df.placeholder(df.float32, [None, 4, 3])    # [batch, time, depth]
    >>> outputs, state = df.nn.dynamic_rnn(cell, x, dtype=df.float32)
    >>> outputs.shape, state.shape
    (TensorShape([None, 4, 16]), TensorShape([None, 16]))
    """
    if not callable(cell):
        raise TypeError("cell must be an RNN cell (a callable (inputs, state) -> (output, "
                        "state))")
    g = get_default_graph()
    with variable_scope(scope or "rnn"):
        flat_input = [convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        _check_inputs(flat_input)
        parallel_iterations = parallel_iterations or 32
        if sequence_length is not None:
            sequence_length = convert_to_tensor(sequence_length)
            if sequence_length.dtype is not _dtypes.int32:
                sequence_length = cast(sequence_length, _dtypes.int32)
            if sequence_length.shape.ndims not in (None, 1):
                raise ValueError(f"sequence_length must be a vector of length batch_size, but "
                                 f"saw shape: {sequence_length.shape}")
            sequence_length = identity(sequence_length, name="sequence_length")
        batch_size = _batch_size(flat_input)
        if initial_state is not None:
            state = initial_state
        else:
            if not dtype:
                raise ValueError("If there is no initial_state, you must give a dtype.")
            state = cell.zero_state(batch_size, dtype)
        if sequence_length is not None:
            batch = stack([batch_size]) if not isinstance(batch_size, int) \
                else constant([batch_size])
            check = Assert(reduce_all(equal(shape_of(sequence_length), batch)),
                           ["Expected shape for Tensor sequence_length is ", batch,
                            " but saw shape: ", shape_of(sequence_length)])
            with g.control_dependencies([check]):
                sequence_length = identity(sequence_length, name="CheckSeqLen")
        inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(cell, inputs, state, parallel_iterations,
                                                 swap_memory, sequence_length, dtype)
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _reverse(x, lengths, seq_axis, batch_axis):
    """The sequences of ``x`` reversed: their first ``lengths`` steps, or all of them
    (``reverse`` along the time axis, as TF)."""
    if lengths is not None:
        return reverse_sequence(x, lengths, seq_axis=seq_axis, batch_axis=batch_axis)
    return reverse(x, axis=[seq_axis])


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory=False, time_major=False,
                              scope=None):
    """A forward ``dynamic_rnn`` and a backward one over the reversed sequences
    (``tf.compat.v1.nn.bidirectional_dynamic_rnn``).

    Returns ``((output_fw, output_bw), (state_fw, state_bw))``; ``output_bw`` is reversed
    back, so step ``t`` of both outputs lines up. With ``sequence_length`` only the first
    ``sequence_length[b]`` steps of each entry are reversed. Variables are named under
    ``bidirectional_rnn/fw`` and ``bidirectional_rnn/bw``.

    >>> fw, bw = df.nn.rnn_cell.GRUCell(4), df.nn.rnn_cell.GRUCell(6)
    >>> x = df.placeholder(df.float32, [None, 7, 3])
    >>> (out_fw, out_bw), _ = df.nn.bidirectional_dynamic_rnn(fw, bw, x, dtype=df.float32)
    >>> out_fw.shape, out_bw.shape
    (TensorShape([None, 7, 4]), TensorShape([None, 7, 6]))
    """
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(
                cell_fw, inputs, sequence_length=sequence_length,
                initial_state=initial_state_fw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=fw_scope)
        time_axis, batch_axis = (0, 1) if time_major else (1, 0)
        with variable_scope("bw") as bw_scope:
            reversed_inputs = nest.map_structure(
                lambda x: _reverse(convert_to_tensor(x), sequence_length, time_axis,
                                   batch_axis),
                inputs)
            tmp, state_bw = dynamic_rnn(
                cell_bw, reversed_inputs, sequence_length=sequence_length,
                initial_state=initial_state_bw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=bw_scope)
    output_bw = nest.map_structure(
        lambda x: _reverse(x, sequence_length, time_axis, batch_axis), tmp)
    return (output_fw, output_bw), (state_fw, state_bw)
