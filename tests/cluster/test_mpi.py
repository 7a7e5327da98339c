"""hvd and MPI on emulated hosts (tests/cluster/cluster.sh): the MPI
controller (HOROVOD_CPU_OPERATIONS=mpi), programs that initialise MPI
themselves, and hvd.torch's init(comm=...).

Covered: every collective, dtype and op through MPI against the
references of tests/mpi/test_collectives.c, and the same bits on every
rank, under mpirun and srun --mpi=pmix; HOROVOD_CPU_OPERATIONS=mpi refused
where no MPI formed the job; a program at MPI_THREAD_SINGLE (hvd forms the
job through MPI on the calling thread, then uses its own transports; MPI's
collectives are refused, naming MPI_THREAD_MULTIPLE); hvd_init_comm() on a
split of MPI_COMM_WORLD; init(comm=[ranks]) on a 4-rank job under mpirun
(a sub-communicator) and under hvdrun (no MPI), and init(comm=<mpi4py
communicator>).  Tests of what needs MPI in the build are skipped in a
build without it (HVD_WITH_MPI=OFF), which has none of it.
"""
import os
import re

import pytest

from hvdcluster import program
from test_launchers import LIMIT, MPI_BUILT, SANITIZER_X, launch  # noqa: F401  (a fixture)

needs_mpi = pytest.mark.skipif(not MPI_BUILT, reason="built without MPI (HVD_WITH_MPI=OFF)")
PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))


def mpirun(launch, np, prog, **env):
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np",
            str(np), "-x", "PYTHONPATH", "-x", "HOROVOD_CPU_OPERATIONS",
            "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS", "-x", "HOROVOD_START_TIMEOUT",
            *SANITIZER_X] + prog
    launch.cluster.check()
    return launch.cluster.run("h0", argv, env=python_env(launch, "mpirun", **env),
                              cwd=launch.build_dir, capture_output=True, text=True,
                              timeout=LIMIT)


def python_env(launch, name, **env):
    return launch.env(name, PYTHONPATH=os.path.join(launch.build_dir, "python"), **env)


def assert_collectives_pass(r, np):
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ok = re.findall(r"test_collectives rank (\d+) of %d: \d+ checks, 0 failed" % np, r.stdout)
    assert sorted(map(int, ok)) == list(range(np)), r.stdout[-3000:]


@needs_mpi
def test_mpi_collectives_against_references(launch, build_dir):
    """Every dtype and op through MPI's collectives (fp16/bf16 in float32,
    rounded once; MIN/MAX with NaN; integer wrap-around; average): the
    reference results and the same bits everywhere; on one host under
    mpirun (shared memory) and on two under srun --mpi=pmix (TCP)."""
    prog = [program(build_dir, "test_collectives")]
    r = mpirun(launch, 3, prog, HOROVOD_CPU_OPERATIONS="mpi")
    assert_collectives_pass(r, 3)
    r = launch.run("srun--mpi=pmix", 2, [program(build_dir, "launch_probe")],
                   HOROVOD_CPU_OPERATIONS="mpi")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(re.findall(r"launch_probe: rank \d of 4 .* mpi 1 digest", r.stdout)) == 4


def test_mpi_collectives_need_a_job_formed_through_mpi(launch, build_dir):
    r = launch.run("hvdrun", 1, [program(build_dir, "launch_probe")],
                   HOROVOD_CPU_OPERATIONS="mpi")
    assert r.returncode != 0
    want = ("needs a job formed through MPI" if MPI_BUILT else "built without MPI")
    assert r.stderr.count(want) == 2, r.stderr
    r = launch.run("hvdrun", 1, [program(build_dir, "launch_probe")],
                   HOROVOD_CPU_OPERATIONS="nccl")
    assert r.stderr.count("HOROVOD_CPU_OPERATIONS='nccl': expected mpi or gloo") == 2, r.stderr


@needs_mpi
def test_mpi_thread_single(launch, build_dir):
    """A program at MPI_THREAD_SINGLE: hvd forms its job through MPI on the
    thread calling hvd_init and then runs on its own transports; asked for
    MPI's collectives, it refuses, saying what is needed."""
    prog = [program(build_dir, "thread_level"), "SINGLE"]
    r = mpirun(launch, 2, prog)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = re.findall(r"thread_level: world \d rank \d of 2 sum 1 mpi 1 threads 0", r.stdout)
    assert len(lines) == 2, r.stdout
    r = mpirun(launch, 2, prog, HOROVOD_CPU_OPERATIONS="mpi")
    assert r.returncode != 0
    said = re.findall(r"thread_level: world \d: (.*)", r.stdout)
    assert len(said) == 2, r.stdout
    for line in said:
        assert "MPI_THREAD_SINGLE" in line and "needs MPI_THREAD_MULTIPLE" in line, line
    r = mpirun(launch, 2, [program(build_dir, "thread_level"), "MULTIPLE"],
               HOROVOD_CPU_OPERATIONS="mpi")
    assert len(re.findall(r"rank \d of 2 sum 1 mpi 1 threads 1", r.stdout)) == 2, r.stdout


@needs_mpi
def test_init_comm_on_a_split(launch, build_dir):
    """hvd_init_comm() on MPI_COMM_WORLD split into even and odd ranks: two
    jobs of two, each summing its own ranks."""
    r = mpirun(launch, 4, [program(build_dir, "thread_level"), "MULTIPLE", "comm"])
    assert r.returncode == 0, r.stdout + r.stderr
    got = sorted(re.findall(r"world (\d) rank (\d) of 2 sum (\d)", r.stdout))
    assert got == [("0", "0", "2"), ("1", "0", "4"), ("2", "1", "2"), ("3", "1", "4")], got


def comm_probe(launch, name, args):
    if os.environ.get("HVD_SANITIZE"):
        pytest.skip("sanitizer builds cannot load into Debian's python3")
    prog = [PYTHON, os.path.join(HERE, "comm_probe.py")] + args
    if name == "mpirun":
        return mpirun(launch, 4, prog)
    launch.cluster.check()
    argv = [launch.hvdrun, "-np", "4", "-H", "h0:2,h1:2", "--ssh-command", launch.ssh] + prog
    return launch.cluster.run("h0", argv, env=python_env(launch, "hvdrun"),
                              cwd=launch.build_dir, capture_output=True, text=True,
                              timeout=LIMIT)


SUB_JOBS = [("hvdrun", "0,1"), ("hvdrun", "3,1")] + ([("mpirun", "0,1")] if MPI_BUILT else [])


@pytest.mark.parametrize("name,ranks", SUB_JOBS)
def test_torch_init_comm_list_of_ranks(launch, name, ranks):
    """hvd.init(comm=[a, b]) on a job of 4: a and b become ranks 0 and 1 of
    a job of two (under mpirun a sub-communicator of MPI_COMM_WORLD); the
    others are told they were left out."""
    r = comm_probe(launch, name, ["ranks", ranks])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    members = [int(x) for x in ranks.split(",")]
    mpi = "1" if name == "mpirun" else "0"
    total = str(sum(m + 1 for m in members))
    got = sorted(re.findall(r"comm_probe: world (\d) rank (\d) of (\d) sum (\d+) mpi (\d)",
                            r.stdout))
    want = sorted((str(w), str(i), "2", total, mpi) for i, w in enumerate(members))
    assert got == want, r.stdout
    out = sorted(re.findall(r"comm_probe: world (\d) left out: .*?not among the ranks", r.stdout))
    assert out == sorted(str(w) for w in range(4) if w not in members), r.stdout


@needs_mpi
def test_torch_init_comm_mpi4py(launch):
    """hvd.init(comm=MPI.COMM_WORLD.Split(rank % 2)): two jobs of two."""
    r = comm_probe(launch, "mpirun", ["split"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    got = sorted(re.findall(r"comm_probe: world (\d) rank (\d) of 2 sum (\d+) mpi 1 threads "
                            r"True", r.stdout))
    assert got == [("0", "0", "4"), ("1", "0", "6"), ("2", "1", "4"), ("3", "1", "6")], r.stdout
