#!/usr/bin/env python3
"""Gradient averaging of a ResNet-50-sized pytree (161 float32 arrays,
25.6 M parameters, 102 MB) inside a jitted step: hvd.jax's
allreduce_gradients vs mpi4jax's allreduce (one per leaf, Open MPI) vs
jax.distributed with a cross-process pmean (shard_map over one CPU device
per process), in one job.

Run under mpirun (see bench/jax-allreduce): MPI starts the ranks, hvd
joins the job from the MPI environment, mpi4jax uses MPI_COMM_WORLD, and
jax.distributed is initialised with rank 0's coordinator port (shared
over MPI) before JAX starts its backend.  Every step is compiled first;
then the three are timed alternately (drifts of this shared machine hit
all three), each call after a barrier.  A call's time is the slowest
rank's; rank 0 prints one Markdown row per method with the median.
"""
import argparse
import os
import socket
import statistics
import sys
import time

from mpi4py import MPI

parser = argparse.ArgumentParser()
parser.add_argument("--reps", type=int, default=7)
parser.add_argument("--scale", type=float, default=1.0, help="shrink the model (tests)")
args = parser.parse_args()

comm = MPI.COMM_WORLD
me, n = comm.Get_rank(), comm.Get_size()


# Rank 0's address for jax.distributed's coordinator: loopback on one
# host, the emulated host's eth0 address across hosts (bench/jax-allreduce).
HOST = os.environ.get("HVD_BENCH_COORDINATOR", "127.0.0.1")


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# jax.distributed must be initialised before anything starts JAX's backend.
import jax  # noqa: E402

psum_error = None
try:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    where = comm.bcast("%s:%d" % (HOST, free_port()) if me == 0 else None, root=0)
    jax.distributed.initialize(where, num_processes=n, process_id=me,
                               local_device_ids=[0])
except Exception as e:  # noqa: BLE001 -- reported in the table
    psum_error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:80])

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import hvd.jax as hvd  # noqa: E402

try:
    import mpi4jax  # noqa: E402
    mpi4jax_error = None
except ImportError as e:
    mpi4jax, mpi4jax_error = None, str(e)


def resnet50_shapes(scale):
    """The parameter shapes of torchvision's ResNet-50 (conv weights HWIO,
    batch-norm scales and biases, the classifier)."""
    c = lambda k: max(1, int(k * scale))  # noqa: E731
    shapes = [(7, 7, 3, c(64)), (c(64),), (c(64),)]
    cin = c(64)
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            w, out = c(width), c(4 * width)
            for k, i, o in ((1, cin, w), (3, w, w), (1, w, out)):
                shapes += [(k, k, i, o), (o,), (o,)]
            if b == 0:
                shapes += [(1, 1, cin, out), (out,), (out,)]
            cin = out
    return shapes + [(cin, 1000), (1000,)]


shapes = resnet50_shapes(args.scale)
rng = np.random.default_rng(me)
grads = [jnp.asarray(rng.standard_normal(s, dtype=np.float32)) for s in shapes]
count = sum(int(np.prod(s)) for s in shapes)

steps = {}
steps["hvd.jax allreduce_gradients"] = jax.jit(
    lambda g: hvd.allreduce_gradients(g, name="bench.grads"))
if mpi4jax is not None:
    def mpi4jax_average(g):
        out = []
        for x in g:
            r = mpi4jax.allreduce(x, op=MPI.SUM, comm=comm)
            out.append((r[0] if isinstance(r, tuple) else r) / n)
        return out
    steps["mpi4jax allreduce (per leaf)"] = jax.jit(mpi4jax_average)

global_grads = None
if psum_error is None:
    try:
        from jax.sharding import NamedSharding, PartitionSpec as P
        try:
            from jax import shard_map
        except ImportError:
            from jax.experimental.shard_map import shard_map
        mesh = jax.make_mesh((n,), ("ranks",))
        sharding = NamedSharding(mesh, P("ranks"))
        global_grads = [jax.make_array_from_process_local_data(sharding, np.asarray(x)[None])
                        for x in grads]
        steps["jax.distributed pmean"] = jax.jit(shard_map(
            lambda g: [jax.lax.pmean(x, "ranks") for x in g], mesh=mesh,
            in_specs=P("ranks"), out_specs=P("ranks")))
    except Exception as e:  # noqa: BLE001
        psum_error = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:80])


def inputs(name):
    return global_grads if name.startswith("jax.distributed") else grads


def timed(name):
    comm.Barrier()
    t0 = time.perf_counter()
    jax.block_until_ready(steps[name](inputs(name)))
    return comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)


# Compile and check: every method's result is the average.
hvd.init(comm=comm)
want = comm.allreduce(np.asarray(grads[-1], np.float64), op=MPI.SUM) / n
for name in steps:
    got = steps[name](inputs(name))[-1]
    got = np.asarray(got.addressable_data(0) if hasattr(got, "addressable_data") else got)
    assert np.allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5), name
times = {name: [] for name in steps}
for _ in range(args.reps):
    for name in steps:
        times[name].append(timed(name))

if me == 0:
    mb = count * 4 / 1e6
    print("| np | method | median s | GB/s (algbw) |")
    print("|---:|---|---:|---:|")
    for name, ts in times.items():
        t = statistics.median(ts)
        print("| %d | %s | %.4f | %.2f |" % (n, name, t, mb / 1e3 / t))
    if mpi4jax is None:
        print("| %d | mpi4jax | n/a: %s | |" % (n, mpi4jax_error))
    if psum_error is not None:
        print("| %d | jax.distributed pmean | n/a: %s | |" % (n, psum_error))
    print("(%d arrays, %.1f M parameters, %.0f MB)" % (len(shapes), count / 1e6, mb),
          file=sys.stderr)
hvd.shutdown()
