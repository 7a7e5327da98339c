"""hvd.jax's XLA FFI library (python/_jax): loaded once, handed hvd._C's
table of libhvd's API (so JAX's collectives run on the process's one
engine), its handlers registered with XLA as custom-call targets.

call() issues one custom call.  It is the same eagerly and under
jax.jit: XLA runs the handler, which enqueues on hvd's engine and waits.
Eagerly, a failure becomes hvd's HorovodInternalError (ValueError for an
argument hvd refuses); under jit it surfaces as the JaxRuntimeError XLA
raises, whose message starts with "HorovodInternalError: ".
"""
import ctypes
import os

import jax
import numpy as np

try:
    from jax import ffi as _jax_ffi
except ImportError:  # jax before 0.5: the same functions in jax.extend.ffi
    from jax.extend import ffi as _jax_ffi

from hvd import _C
from hvd.common import frameworks
from hvd.common.exceptions import HorovodInternalError

TARGETS = ("allreduce", "reducescatter", "allgather", "alltoall", "broadcast", "barrier")
MARK = "HorovodInternalError: "


def _load():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_hvd_jax.so")
    if not os.path.exists(path):
        raise ImportError("hvd.jax: %s is missing: build hvd with HVD_VENV_PYTHON pointing at "
                          "a Python that has jax (cmake -DHVD_VENV_PYTHON=...)" % path)
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise frameworks.load_error("hvd.jax", jax, path, e) from None
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    lib.hvd_jax_set_capi.argtypes = [ctypes.c_void_p]
    lib.hvd_jax_set_capi.restype = ctypes.c_int
    if lib.hvd_jax_set_capi(get(_C._capi, b"hvd._C._capi")) != 0:
        raise ImportError("hvd.jax: hvd._C's API table is older than %s" % path)
    for target in TARGETS:
        _jax_ffi.register_ffi_target("hvd_jax_" + target,
                                     _jax_ffi.pycapsule(getattr(lib, "hvd_jax_" + target)),
                                     platform="cpu")
    return lib


_LIB = _load()


def is_traced(values):
    """True when any of values is a tracer (inside jit, grad, vmap...)."""
    return any(isinstance(v, jax.core.Tracer) for v in values)


def error_of(exc):
    """The hvd exception a failed custom call stands for."""
    msg = str(exc)
    at = msg.find(MARK)
    if at < 0:
        return exc
    return HorovodInternalError(msg[at + len(MARK):])


NAME_MAX = 400  # bytes; the library takes a little more (sub-tensors' ".<i>")


def name_operand(name):
    """A tensor name as the library takes it: NUL-padded uint8, 32 bytes at
    a time, so eager calls under new names share compiled executables."""
    data = name.encode()
    if len(data) > NAME_MAX:
        raise ValueError("tensor name of %d bytes, hvd.jax takes at most %d: %.40s..."
                         % (len(data), NAME_MAX, name))
    return np.frombuffer(data.ljust((len(data) // 32 + 1) * 32, b"\0"), np.uint8)


def call(target, results, operands, name=None, **attrs):
    """Runs custom call hvd_jax_<target> on operands (after the tensor
    name, when given) with attributes attrs; results: the
    ShapeDtypeStructs of its results (a list).  Returns the list of
    results."""
    fn = _jax_ffi.ffi_call("hvd_jax_" + target, list(results), has_side_effect=True)
    if name is not None:
        operands = [name_operand(name)] + list(operands)
    try:
        out = fn(*operands, **attrs)
        return out if is_traced(out) else jax.block_until_ready(out)
    except jax.errors.JaxRuntimeError as e:
        raise error_of(e) from None
