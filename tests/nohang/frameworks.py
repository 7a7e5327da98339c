"""What each rank does for tests/nohang/test_frameworks.py: the C cases of
tests/mpi/nohang.c through a framework binding.

    python frameworks.py FRAMEWORK MODE[,MODE...] [SECONDS]

FRAMEWORK: torch, jax (the collective inside jax.jit: desync or frozen),
tensorflow.  MODE, one after the other:
    desync   even ranks wait on allreduce 'grad.a', odd ranks on 'grad.b'
             (in tensorflow, whose eager ops hvd names by call order: even
             ranks wait on an allreduce, odd ranks on an allgather)
    graph    the same inside a tf.function (tensorflow)
    async    rank 0 submits 'a' and, SECONDS later, 'b' (asynchronously);
             rank 1 submits 'b' and then 'a' and waits on both; the others
             submit both: out of order, never ended (torch only)
    slow     rank 0 computes SECONDS before its allreduce, the others wait
             in theirs: a stall, never ended (tensorflow)
    frozen   every rank loops on an allreduce 'step' (eager; under jax.jit
             in jax); the last rank stops itself (SIGSTOP) at the 20th:
             the others must name it (every framework; the last mode)
    loop     every rank loops on an allreduce 'step' until it raises
             (eager; under jax.jit in jax; the last mode): tests/cluster
             cuts a host's link under it
    graphloop  the same inside a tf.function (tensorflow)

Each rank prints one line per mode: "rank R: ended EXCEPTION after T s: MESSAGE" or
"rank R: completed after T s", T from the last collective that completed.
"""
import os
import signal
import sys
import time


def frozen(step, rank, size, before_stop=None):
    """Loops on step(); the last rank stops itself at the 20th call (after
    calling before_stop, if given)."""
    return loop(step, rank, rank == size - 1, before_stop)


def loop(step, rank, stop=False, before_stop=None):
    """Says "rank R: running", then loops on step() until it raises; with
    stop, this rank stops itself at the 20th call (after calling
    before_stop, if given)."""
    print("rank %d: running" % rank, flush=True)
    t0 = time.monotonic()
    for it in range(1 << 30):
        if stop and it == 20:
            if before_stop:
                before_stop()
            os.kill(os.getpid(), signal.SIGSTOP)
        try:
            step()
        except Exception as e:  # noqa: BLE001 -- the class is what the test checks
            return ended(rank, e, t0)
        t0 = time.monotonic()
    return 0


def torch_program(modes, seconds, hvd=None):
    """hvd: the module to run (hvd.torch by default; bench/nohang_horovod.py
    passes Horovod's own horovod.torch, whose API is the same)."""
    import torch
    if hvd is None:
        import hvd.torch as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    total = size * (size + 1) / 2
    mine = torch.full((1,), float(rank + 1))
    for mode in modes:
        hvd.allreduce(torch.ones(1), name="start." + mode, op=hvd.Sum)
        if mode in ("frozen", "loop"):
            step = lambda: hvd.allreduce(mine, name="step", op=hvd.Sum)  # noqa: E731
            return frozen(step, rank, size) if mode == "frozen" else loop(step, rank)
        t0 = time.monotonic()
        try:
            if mode == "desync":
                outs = [hvd.allreduce(mine, name="grad.%s" % "ab"[rank % 2], op=hvd.Sum)]
            else:
                names = ["b", "a"] if rank == 1 else ["a", "b"]
                handles = []
                for i, n in enumerate(names):
                    if rank == 0 and i == 1:
                        time.sleep(seconds)
                    handles.append(hvd.allreduce_async(mine, name=n, op=hvd.Sum))
                outs = [hvd.synchronize(h) for h in handles]
        except Exception as e:  # noqa: BLE001 -- the class is what the test checks
            return ended(rank, e, t0)
        assert all(float(o[0]) == total for o in outs), outs
        completed(rank, t0)
    return 0


def jax_program(modes, seconds):
    import jax
    import jax.numpy as jnp
    import hvd.jax as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    hvd.allreduce(jnp.ones(1), name="start", op=hvd.Sum)
    mine = jnp.full((1,), float(rank + 1))
    if modes in (["frozen"], ["loop"]):
        jitted = jax.jit(lambda x: hvd.allreduce(x, name="step", op=hvd.Sum))
        step = lambda: jax.block_until_ready(jitted(mine))  # noqa: E731
        return frozen(step, rank, size) if modes == ["frozen"] else loop(step, rank)
    name = "grad.%s" % "ab"[rank % 2]
    step = jax.jit(lambda x: hvd.allreduce(x, name=name, op=hvd.Sum) * 2)
    t0 = time.monotonic()
    try:
        jax.block_until_ready(step(mine))
    except Exception as e:  # noqa: BLE001
        return ended(rank, e, t0)
    return completed(rank, t0)


def tensorflow_program(modes, seconds):
    import tensorflow as tf
    import hvd.tensorflow as hvd
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    mine = tf.fill([1], float(rank + 1))
    name = "grad.%s" % "ab"[rank % 2]
    graph = tf.function(lambda x: hvd.allreduce(x, name=name, op=hvd.Sum))
    for mode in modes:
        hvd.allreduce(tf.ones([1]), name="start." + mode, op=hvd.Sum)
        if mode in ("frozen", "loop"):
            step = lambda: hvd.allreduce(mine, name="step", op=hvd.Sum)  # noqa: E731
            return frozen(step, rank, size) if mode == "frozen" else loop(step, rank)
        if mode == "graphloop":
            return loop(tf.function(lambda: hvd.allreduce(mine, name="step", op=hvd.Sum)), rank)
        t0 = time.monotonic()
        try:
            if mode == "slow":
                if rank == 0:
                    time.sleep(seconds)
                out = hvd.allreduce(mine, name="slow", op=hvd.Sum)
                assert float(out[0]) == size * (size + 1) / 2, out
            elif mode == "desync":  # eager ops are matched by call order, not name
                if rank % 2 == 0:
                    hvd.allreduce(mine, op=hvd.Sum)
                else:
                    hvd.allgather(mine)
            else:
                graph(mine)
        except Exception as e:  # noqa: BLE001
            return ended(rank, e, t0)
        completed(rank, t0)
    return 0


def ended(rank, exc, t0):
    msg = " ".join(str(exc).split())
    print("rank %d: ended %s after %.2f s: %s" % (rank, type(exc).__name__,
                                                   time.monotonic() - t0, msg), flush=True)
    return 3


def completed(rank, t0):
    print("rank %d: completed after %.2f s" % (rank, time.monotonic() - t0), flush=True)
    return 0


if __name__ == "__main__":
    framework, modes = sys.argv[1], sys.argv[2].split(",")
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 7
    programs = {"torch": torch_program, "jax": jax_program, "tensorflow": tensorflow_program}
    sys.exit(programs[framework](modes, secs))
