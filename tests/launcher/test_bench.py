"""hvd-bench through hvdrun: every op, every power-of-two size, public and
--direct paths, CSV as documented (op,bytes,time_us,algbw_GBps,busbw_GBps)
with nccl-tests' bus factors; every --algorithm; --names (several small
allreduces in turn ride the fast path's exchange: one round per run);
bad flags are refused."""
import os
import subprocess

import pytest

OPS = ["allreduce", "broadcast", "allgather", "reducescatter", "alltoall"]


@pytest.fixture(scope="session")
def bench(build_tool):
    return build_tool("hvd-bench")


def bus_factor(op, n):
    return {"allreduce": 2.0 * (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)


@pytest.mark.parametrize("np,direct", [(2, False), (3, True), (4, False)])
def test_csv_rows(hvdrun, bench, np, direct):
    args = [hvdrun, "-np", str(np), bench, "--csv", "--max-bytes", "64K", "--batches", "2",
            "--iters", "3"] + (["--direct"] if direct else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [l.split(":", 1)[1] for l in out.stdout.splitlines() if l.startswith("[0]<stdout>:")]
    assert lines[0] == "op,bytes,time_us,algbw_GBps,busbw_GBps"
    rows = [l.split(",") for l in lines[1:]]
    sizes = [8 << k for k in range(14)]  # 8 B .. 64 KiB
    assert [(r[0], int(r[1])) for r in rows] == [(op, s) for op in OPS for s in sizes]
    for op, size, t, algbw, busbw in rows:
        t, algbw, busbw = float(t), float(algbw), float(busbw)
        assert t > 0
        assert algbw == pytest.approx(int(size) / t / 1e3, rel=0.02, abs=2e-4)
        assert busbw == pytest.approx(algbw * bus_factor(op, np), rel=0.02, abs=2e-4)
    # only rank 0 prints
    assert not [l for l in out.stdout.splitlines() if l.startswith("[1]<stdout>")]


def test_human_table(hvdrun, bench):
    out = subprocess.run([hvdrun, "-np", "2", bench, "--op", "allreduce", "--max-bytes", "1K"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "# hvd-bench allreduce, np 2, public calls through the engine" in out.stdout
    assert "busbw_GBps" in out.stdout


@pytest.mark.parametrize("algorithm", ["auto", "ring", "recursive_doubling", "rabenseifner", "shm"])
@pytest.mark.parametrize("direct", [False, True])
def test_algorithm(hvdrun, bench, algorithm, direct):
    # Each run checks every output, so a wrong algorithm fails here.
    args = [hvdrun, "-np", "3", bench, "--op", "allreduce", "--max-bytes", "256K",
            "--batches", "1", "--iters", "2", "--algorithm", algorithm]
    out = subprocess.run(args + (["--direct"] if direct else []), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # One host: shared memory is the default transport.
    assert "transport shm, algorithm %s" % algorithm in out.stdout


@pytest.mark.parametrize("args,message", [
    (["--transport", "ib"], "--transport 'ib': expected shm or tcp"),
    (["--algorithm", "tree"], "--algorithm 'tree': expected auto, ring, recursive_doubling, rabenseifner or shm"),
    (["--op", "gather"], "--op 'gather'"),
    (["--max-bytes", "12Q"], "bad size '12Q'"),
    (["--min-bytes", "1M", "--max-bytes", "1K"], "larger than --max-bytes"),
    (["--names", "0"], "--names '0': expected an integer >= 1"),
    (["--names", "9"], "--names 9: at most 8"),
    (["--names", "2", "--direct"], "--names needs the engine"),
])
def test_bad_flags(bench, args, message):
    out = subprocess.run([bench] + args, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert message in out.stderr


@pytest.mark.parametrize("names", [1, 3])
def test_names_in_turn_ride(hvdrun, bench, names):
    # The engine guesses which small tensor rides the fast path's exchange
    # from the order they ran in (engine/rider.c): three names in turn ride
    # as one does, one shared-memory sync per run (two when they did not).
    args = [hvdrun, "-np", "2", bench, "--op", "allreduce", "--csv", "--steps", "--transport",
            "shm", "--max-bytes", "64", "--batches", "3", "--iters", "60", "--names", str(names)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [l.split(":", 1)[1].split(",") for l in out.stdout.splitlines()
            if l.startswith("[0]<stdout>:allreduce,")]
    assert [int(r[1]) for r in rows] == [8, 16, 32, 64]
    for r in rows:
        assert float(r[5]) <= 1.5, "%s B: %s rounds per run" % (r[1], r[5])


def test_direct_agrees_on_rank0s_algorithm(hvdrun, bench):
    # --direct sets up its communicator as hvd_init does (src/startup.c):
    # rank 0's algorithm wins, so ranks whose environments differ still
    # run the same allreduce (every output is checked) and finish.
    pick = ('if [ "$HOROVOD_RANK" != 0 ]; then export HOROVOD_ALLREDUCE_ALGORITHM=ring; fi; '
            'exec "$0" "$@"')
    args = [hvdrun, "-np", "3", "sh", "-c", pick, bench, "--direct", "--op", "allreduce",
            "--min-bytes", "64K", "--max-bytes", "64K", "--batches", "1", "--iters", "2"]
    env = dict(os.environ, HOROVOD_ALLREDUCE_ALGORITHM="recursive_doubling")
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "algorithm recursive_doubling" in out.stdout
