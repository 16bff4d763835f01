"""GPU kernels of variables and the Adam update.

A variable on the GPU keeps its value in device memory. Device arrays are never
written in place by any kernel here (every kernel returns a fresh array), so a stored
device value can be shared with readers without a copy; a host value is copied to
the device when stored. Handles and reads only move values, so the CPU kernels run
as they are.

>>> x = df.constant(np.ones(3, np.float32))
>>> with df.device("/gpu:0"):
...     v = df.Variable(np.zeros(3, np.float32))
...     step = v.assign_add(x)              # an elementwise add on the device
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     _ = sess.run(step)
...     sess.run(step).tolist()
[2.0, 2.0, 2.0]
"""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
from ._util import flat, host_kernel, launch, np_dtype
from .runtime import device_empty, serialized, to_device, to_host

__all__ = []

for _t in ("VarHandleOp", "ReadVariableOp", "VarIsInitializedOp"):
    register_kernel(_t, device="GPU")(host_kernel)


@register_kernel("AssignVariableOp", device="GPU")
def _assign(ctx):
    if not ctx.op.attrs.get("validate_shape", True):
        def assign_any_shape(cell, value):  # tf.assign(..., validate_shape=False)
            cell.value = to_device(value)
            return cell.value
        return serialized(assign_any_shape)

    def assign(cell, value):
        return cell.store_owned(to_device(value))
    return serialized(assign)


def _update(op_type):
    def factory(ctx):
        from .device import elementwise as K
        dt = np_dtype(ctx.input_dtypes[1])
        kernel = K.binary_same_kernel(op_type, dt)

        def update(cell, delta):
            old, delta = to_device(cell.read()), to_device(delta)
            if old.shape != delta.shape:
                raise ValueError(f"Cannot update variable {cell.name} of shape "
                                 f"{old.shape} with a value of shape {delta.shape}")
            out = device_empty(old.shape, dt)
            if out.size:
                launch(kernel, out.size, flat(old), flat(delta), flat(out))
            return cell.store_owned(out)
        return serialized(update)
    return factory


# No dtype filter: these ops' first input is a resource handle, so the registry's dtype
# is the handle's; the value dtype comes from the other inputs.
register_kernel("AssignAddVariableOp", device="GPU")(_update("AddV2"))
register_kernel("AssignSubVariableOp", device="GPU")(_update("Sub"))


@register_kernel("ResourceApplyAdam", device="GPU")
def _apply_adam(ctx):
    from .device import training as K
    dt = np_dtype(ctx.input_dtypes[-1])
    kernel = K.adam_kernel(dt)
    scalar = dt.type

    def apply(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        # The bias-corrected step size is one scalar: the host computes it, in the
        # variable's dtype as the CPU kernel does.
        b1p, b2p = scalar(to_host(beta1_power)), scalar(to_host(beta2_power))
        lr_t = scalar(to_host(lr)) * np.sqrt(scalar(1) - b2p) / (scalar(1) - b1p)
        w, mm, vv, g = (to_device(var.read()), to_device(m.read()), to_device(v.read()),
                        to_device(grad))
        outs = [device_empty(w.shape, dt) for _ in range(3)]
        if w.size:
            launch(kernel, w.size, flat(w), flat(mm), flat(vv), flat(g), scalar(lr_t),
                   scalar(to_host(beta1)), scalar(to_host(beta2)), scalar(to_host(epsilon)),
                   *(flat(o) for o in outs))
        var.store_owned(outs[0])
        m.store_owned(outs[1])
        v.store_owned(outs[2])
    return serialized(apply)
