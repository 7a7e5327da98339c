"""hvd._C._capi: libhvd's API as a table of function pointers for bindings
in other shared objects (python/_C/hvd_capi.h).  Read here through ctypes,
as the TensorFlow and JAX bindings' Python side hands it to their
libraries: the table's queries must answer what hvd.torch answers, and an
allreduce enqueued through it must run on the same engine."""
import ctypes

import torch

import hvd.torch as hvd
from hvd import _C

handle_t = ctypes.c_int64
query = ctypes.CFUNCTYPE(ctypes.c_int)


class Capi(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_int),
        ("is_initialized", query),
        ("rank", query),
        ("size_of_job", query),
        ("local_rank", query),
        ("local_size", query),
        ("process_set_rank", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)),
        ("process_set_size", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)),
        ("reducescatter_count", ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int)),
        ("allreduce_async_opts",
         ctypes.CFUNCTYPE(handle_t, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                          ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)),
        ("broadcast_async_opts", ctypes.c_void_p),
        ("allgather_async", ctypes.c_void_p),
        ("alltoall_async", ctypes.c_void_p),
        ("reducescatter_async", ctypes.c_void_p),
        ("grouped_allreduce_async", ctypes.c_void_p),
        ("grouped_allgather_async", ctypes.c_void_p),
        ("grouped_reducescatter_async", ctypes.c_void_p),
        ("poll", ctypes.CFUNCTYPE(ctypes.c_int, handle_t)),
        ("wait", ctypes.CFUNCTYPE(ctypes.c_int, handle_t)),
    ]


def table():
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return Capi.from_address(get(_C._capi, b"hvd._C._capi"))


def test_capi_queries_match_the_module():
    t = table()
    assert t.version == 1
    assert t.size >= ctypes.sizeof(Capi)
    assert t.is_initialized() == 1
    assert (t.rank(), t.size_of_job()) == (hvd.rank(), hvd.size())
    assert (t.local_rank(), t.local_size()) == (hvd.local_rank(), hvd.local_size())
    assert t.process_set_size(0) == hvd.size()
    assert t.reducescatter_count(10, hvd.rank()) == hvd.reducescatter(
        torch.zeros(10), op=hvd.Sum).numel()


def test_capi_allreduce_runs_on_the_same_engine():
    t = table()
    x = torch.full((5,), float(hvd.rank() + 1), dtype=torch.float32)
    out = torch.empty_like(x)
    h = t.allreduce_async_opts(x.data_ptr(), out.data_ptr(), 5, _C.FLOAT32, _C.SUM,
                               b"capi.allreduce", None)
    assert h >= 0
    assert t.wait(h) == 0
    n = hvd.size()
    assert torch.equal(out, torch.full((5,), float(n * (n + 1) // 2)))
