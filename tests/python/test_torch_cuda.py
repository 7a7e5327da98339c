"""hvd.torch on CUDA tensors (docs/gpu.md).

On a machine with a GPU (scripts/gpu-check.sh runs this file through
hvdrun at np 1 and 2, every rank on the one GPU): every op hvd runs on
CUDA tensors against the same op on CPU tensors, bit for bit (the inputs
are small integers, so every sum is exact); the current stream waited
for; DistributedOptimizer and fp16 compression on the GPU.  Without one
those tests skip ("no CUDA device"), and what can be checked on a CPU
is: the device ordinal reaching the engine through hvd._C (the engine's
answer proves it read hvd_opts.device), the routing of CUDA tensors in
hvd.torch with fake CUDA tensors (the current stream and the ordinal
passed with the enqueue; Adasum refused; one device per call), and
devices hvd does not take refused.
"""
import os
import warnings

import pytest
import torch

import hvd.torch as hvd
import hvd.torch.mpi_ops as mpi_ops
from hvd import _C
from conftest import rank_input

HAVE_CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")


def test_gpu_found_where_expected():
    """scripts/gpu-check.sh sets HVD_TEST_EXPECT_GPU=1 where nvidia-smi
    lists a GPU: then a PyTorch that sees none fails instead of skipping."""
    if os.environ.get("HVD_TEST_EXPECT_GPU") == "1":
        assert HAVE_CUDA, ("a GPU is expected, but torch.cuda.is_available() is False "
                           "(PyTorch %s, built for CUDA %s)" % (torch.__version__,
                                                                 torch.version.cuda))


# ---- without a GPU: hvd._C's device argument reaches the engine ----
def _c_calls(t, device):
    """Each hvd._C collective that takes a device, on host tensor t (name
    unique per device value)."""
    p, n, f32 = t.data_ptr(), t.numel(), _C.FLOAT32
    tag = "cdev%d" % device
    return {
        "allreduce": lambda: _C.allreduce_async(p, p, n, (n,), f32, _C.SUM, tag + ".ar", 0,
                                                1.0, 1.0, (t,), device),
        "grouped_allreduce": lambda: _C.grouped_allreduce_async(
            [p], [p], [n], f32, _C.SUM, tag + ".gar", 0, 1.0, 1.0, (t,), device),
        "broadcast": lambda: _C.broadcast_async(p, n, (n,), f32, 0, tag + ".bc", 0, (t,),
                                                device),
        "reducescatter": lambda: _C.reducescatter_async(p, p, n, (n,), f32, _C.SUM,
                                                        tag + ".rs", 0, 1.0, 1.0, (t,), device),
    }


@pytest.mark.skipif(HAVE_CUDA, reason="a CUDA device is here: device 0 would be used")
@pytest.mark.parametrize("op", ["allreduce", "grouped_allreduce", "broadcast", "reducescatter"])
def test_device_ordinal_reaches_the_engine(op):
    """device=0 makes the engine take the tensor as device memory: without
    a GPU every rank fails it naming the missing copier, the buffer
    untouched; device=-2 is refused at the call naming the field; the
    job goes on."""
    n = 4 * hvd.size()
    t = torch.arange(n, dtype=torch.float32)
    with pytest.raises(hvd.HorovodInternalError, match="no copier for device memory"):
        _c_calls(t, 0)[op]().wait()
    assert torch.equal(t, torch.arange(n, dtype=torch.float32))
    with pytest.raises(ValueError, match="opts->device is -2"):
        _c_calls(t, -2)[op]()
    assert torch.equal(hvd.allreduce(torch.ones(3), op=hvd.Sum, name="after." + op),
                       torch.full((3,), float(hvd.size())))


def test_other_devices_refused():
    meta = torch.ones(2, device="meta")
    for call in (lambda: hvd.allreduce(meta), lambda: hvd.broadcast(meta, 0),
                 lambda: hvd.allgather(meta), lambda: hvd.reducescatter(meta)):
        with pytest.raises(ValueError, match="supports CPU and CUDA tensors only, got a "
                                             "tensor on meta"):
            call()


# ---- without a GPU: hvd.torch's routing of CUDA tensors ----
def _fake_cuda(shape, index=0):
    """A tensor whose device is cuda:index, without a GPU (PyTorch's fake
    tensors: no data; hvd.torch reads only its device, shape and dtype
    before the enqueue)."""
    try:
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            return torch.zeros(shape, device="cuda:%d" % index)
    except Exception as e:  # PyTorch 1.13 asserts it has no CUDA
        pytest.skip("PyTorch %s cannot make a fake CUDA tensor (%s)"
                    % (torch.__version__, str(e).splitlines()[0]))


class _Enqueued(Exception):
    pass


FAKE_STREAM = 0xC0DE


@pytest.fixture
def recorded(monkeypatch):
    """Replaces the stream lookup and the enqueues of mpi_ops with
    recorders (the enqueue stops the call): the events in order, each
    enqueue with its last two arguments (device, stream)."""
    events = []

    def stream(device):
        events.append(("stream", device))
        return FAKE_STREAM
    monkeypatch.setattr(mpi_ops, "_stream", stream)

    class FakeC:
        DEVICE_CPU = _C.DEVICE_CPU
        UINT8 = _C.UINT8

        def __getattr__(self, name):
            def enqueue(*args):
                events.append((name,) + args[-2:])
                raise _Enqueued()
            return enqueue
    monkeypatch.setattr(mpi_ops, "_C", FakeC())
    # What is recorded is the general path's: the fast path (which takes
    # CPU tensors) stays out of it.
    monkeypatch.setattr(mpi_ops, "_fast_enabled", False)
    return events


@pytest.mark.parametrize("call,native", [
    (lambda t: hvd.allreduce_async(t, op=hvd.Sum), "allreduce_async"),
    (lambda t: hvd.allreduce_async_(t), "allreduce_async"),
    (lambda t: hvd.grouped_allreduce_async([t, t]), "grouped_allreduce_async"),
    (lambda t: hvd.broadcast_async(t, 0), "broadcast_async"),
    (lambda t: hvd.broadcast_async_(t, 0), "broadcast_async"),
    (lambda t: hvd.reducescatter_async(t), "reducescatter_async"),
    (lambda t: hvd.grouped_reducescatter_async([t]), "grouped_reducescatter_async"),
])
def test_cuda_tensor_routed_with_its_ordinal_and_stream(recorded, call, native):
    t = _fake_cuda((2 * hvd.size(), 3), index=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fake tensor's data_ptr() warns
        with pytest.raises(_Enqueued):
            call(t)
    assert recorded == [("stream", 1), (native, 1, FAKE_STREAM)]


def test_cpu_tensor_routed_as_host_memory(recorded):
    with pytest.raises(_Enqueued):
        hvd.allreduce_async(torch.ones(3))
    assert recorded == [("stream", _C.DEVICE_CPU),
                        ("allreduce_async", _C.DEVICE_CPU, FAKE_STREAM)]


def test_adasum_on_cuda_refused():
    t = _fake_cuda((4,))
    for call in (lambda: hvd.allreduce_async(t, op=hvd.Adasum),
                 lambda: hvd.grouped_allreduce_async([t], op=hvd.Adasum)):
        with pytest.raises(NotImplementedError,
                           match="allreduce: Adasum is not supported on CUDA tensors yet"):
            call()


def test_one_device_per_call():
    with pytest.raises(ValueError, match="grouped_allreduce: tensors on cpu, cuda:0: one call "
                                         "takes tensors of one device"):
        hvd.grouped_allreduce_async([torch.ones(2), _fake_cuda((2,))])


# ---- on a GPU: every op against the CPU path, bit for bit ----
@pytest.fixture(scope="module")
def gpu():
    """The rank's GPU, pinned as the seed tutorial does
    (torch.cuda.set_device(hvd.local_rank())) where the machine has one
    per local rank; otherwise every rank shares GPU 0."""
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    index = hvd.local_rank() if hvd.local_size() <= torch.cuda.device_count() else 0
    torch.cuda.set_device(index)
    assert torch.cuda.current_device() == index
    return torch.device("cuda", index)


def assert_same(got_cuda, want_cpu, dev):
    assert got_cuda.device == dev, (got_cuda.device, dev)
    got = got_cuda.cpu()
    assert got.dtype == want_cpu.dtype and got.shape == want_cpu.shape, (got, want_cpu)
    assert torch.equal(got, want_cpu), (got, want_cpu)


DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16]


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opname", ["Sum", "Average", "Min", "Max", "Product"])
def test_allreduce_cuda_matches_cpu(gpu, dtype, opname):
    op = getattr(hvd, opname)
    if opname == "Average" and not dtype.is_floating_point:
        pytest.skip("integer Average rounds the same way; covered by Sum")
    high = 3 if opname == "Product" else 10
    x = rank_input((257, 3), dtype, hvd.rank(), seed=40, low=1, high=high)
    want = hvd.allreduce(x, op=op, name="cpu.ar.%s.%s" % (opname, dtype))
    assert_same(hvd.allreduce(x.to(gpu), op=op, name="gpu.ar.%s.%s" % (opname, dtype)),
                want, gpu)
    h = hvd.allreduce_async(x.to(gpu), op=op, name="gpu.ara.%s.%s" % (opname, dtype))
    assert_same(hvd.synchronize(h), want, gpu)


@needs_cuda
def test_allreduce_in_place_scaled_and_large(gpu):
    x = rank_input(((1 << 20) + 3,), torch.float32, hvd.rank(), seed=41)  # several 1 MiB chunks
    want = hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    d = x.to(gpu)
    assert hvd.allreduce_(d, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5) is d
    assert_same(d, want, gpu)
    # not contiguous: reduced from a copy, the result copied back
    m = rank_input((6, 5), torch.float32, hvd.rank(), seed=42)
    want = hvd.allreduce(m.t(), op=hvd.Sum)
    dm = m.to(gpu).t()
    hvd.allreduce_(dm, op=hvd.Sum)
    assert_same(dm, want, gpu)


@needs_cuda
def test_grouped_allreduce_cuda_matches_cpu(gpu):
    xs = [rank_input((5, 7), torch.float32, hvd.rank(), seed=43),
          rank_input((3000,), torch.int64, hvd.rank(), seed=44),
          rank_input((11,), torch.float32, hvd.rank(), seed=45)]
    want = hvd.grouped_allreduce(xs, op=hvd.Sum, name="cpu.gar")
    for got, w in zip(hvd.grouped_allreduce([x.to(gpu) for x in xs], op=hvd.Sum,
                                            name="gpu.gar"), want):
        assert_same(got, w, gpu)
    ds = [x.to(gpu) for x in xs]
    hvd.synchronize(hvd.grouped_allreduce_async_(ds, op=hvd.Sum, name="gpu.gar_"))
    for got, w in zip(ds, want):
        assert_same(got, w, gpu)


@needs_cuda
@pytest.mark.parametrize("root", [0, -1])
def test_broadcast_cuda_matches_cpu(gpu, root):
    root = root % hvd.size()
    x = rank_input((1000, 3), torch.float64, hvd.rank(), seed=46)
    want = hvd.broadcast(x, root, name="cpu.bc.%d" % root)
    assert_same(hvd.broadcast(x.to(gpu), root, name="gpu.bc.%d" % root), want, gpu)
    d = x.to(gpu)
    hvd.broadcast_(d, root, name="gpu.bc_.%d" % root)
    assert_same(d, want, gpu)


@needs_cuda
@pytest.mark.parametrize("opname", ["Sum", "Average"])
def test_reducescatter_cuda_matches_cpu(gpu, opname):
    op = getattr(hvd, opname)
    n = hvd.size()
    xs = [rank_input((2 * n + 1, 3), torch.float32, hvd.rank(), seed=47),
          rank_input((n, 4), torch.int32, hvd.rank(), seed=48)]
    for i, x in enumerate(xs):
        want = hvd.reducescatter(x, op=op, name="cpu.rs.%s.%d" % (opname, i))
        assert_same(hvd.reducescatter(x.to(gpu), op=op, name="gpu.rs.%s.%d" % (opname, i)),
                    want, gpu)
    want = hvd.grouped_reducescatter(xs[:1], op=op, name="cpu.grs." + opname)
    got = hvd.grouped_reducescatter([xs[0].to(gpu)], op=op, name="gpu.grs." + opname)
    assert_same(got[0], want[0], gpu)


@needs_cuda
def test_allgather_alltoall_through_the_host(gpu):
    n = hvd.size()
    x = rank_input((hvd.rank() + 1, 3), torch.float32, hvd.rank(), seed=49)
    assert_same(hvd.allgather(x.to(gpu)), hvd.allgather(x), gpu)
    for got, w in zip(hvd.grouped_allgather([x.to(gpu), x[:, :1].to(gpu)]),
                      hvd.grouped_allgather([x, x[:, :1]])):
        assert_same(got, w, gpu)
    y = rank_input((2 * n, 2), torch.int64, hvd.rank(), seed=50)
    assert_same(hvd.alltoall(y.to(gpu)), hvd.alltoall(y), gpu)


@needs_cuda
def test_adasum_cuda_refused(gpu):
    with pytest.raises(NotImplementedError, match="Adasum is not supported on CUDA tensors"):
        hvd.allreduce(torch.ones(4, device=gpu), op=hvd.Adasum)


@needs_cuda
def test_current_stream_waited_for(gpu):
    """The tensor is written on a side stream behind a long kernel; the
    allreduce, issued on that stream without synchronising (hvd passes the
    stream: its copies wait for an event there), must see the written
    values."""
    s = torch.cuda.Stream(device=gpu)
    t = torch.zeros(1 << 16, device=gpu)
    torch.cuda.synchronize(gpu)
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time
        t.fill_(hvd.rank() + 1)
        got = hvd.allreduce(t, op=hvd.Sum, name="gpu.stream")
    n = hvd.size()
    assert_same(got, torch.full((1 << 16,), float(n * (n + 1) // 2)), gpu)


@needs_cuda
def test_fp16_compression_on_gpu(gpu):
    x = rank_input((33,), torch.float32, hvd.rank(), seed=51)
    want = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    got = hvd.allreduce(x.to(gpu), op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got.dtype == torch.float32
    assert_same(got, want, gpu)


@needs_cuda
def test_distributed_optimizer_on_gpu(gpu):
    """loss = sum(w * x) with integer x: the gradient is x exactly, so two
    SGD steps (lr 0.5) averaged over the ranks are exact, and equal on
    every rank to the CPU reference."""
    n, me = hvd.size(), hvd.rank()
    w = torch.nn.Parameter(torch.zeros(64, device=gpu))
    opt = hvd.DistributedOptimizer(torch.optim.SGD([w], lr=0.5), named_parameters=[("w", w)])
    hvd.broadcast_parameters([("w", w)], root_rank=0)
    want = torch.zeros(64)
    for step in range(2):
        xs = [rank_input((64,), torch.float32, r, seed=60 + step) for r in range(n)]
        opt.zero_grad()
        (w * xs[me].to(gpu)).sum().backward()
        opt.step()
        want = want - 0.5 * (sum(xs) / n)
        assert_same(w.detach(), want, gpu)
