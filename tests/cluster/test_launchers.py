"""hvd under the launchers people already have, on emulated hosts
(tests/cluster/cluster.sh, with SLURM): hvdrun over ssh, hvdrun inside a
SLURM allocation (its ranks started by srun), hvdrun --mpi, mpirun, srun
without hvdrun, and srun --mpi=pmix.

Covered: each launcher at 1 and 2 hosts forms the job hvd expects (ranks,
local and cross ranks, hosts) and one program gives the same bits under
all of them (tests/mpi/launch_probe.c prints a digest of its collectives'
results); a rank killed under each launcher is named on every survivor,
the job ends and nothing is left running on any host; srun without
_HOROVOD_SECRET_KEY fails saying how to set it; SLURM variables of
another job step are refused, naming the variable; hvdrun's --mpi,
--mpi-args, --launcher and --make-secret.

Every launcher runs inside h0 (the root namespace has no route to the
hosts) and every test first checks that the cluster is fenced off.
"""
import base64
import os
import re
import subprocess

import pytest

from hvdcluster import assert_nothing_left, program

LIMIT = 120  # seconds for one job here; none should come near it
MPI_BUILT = os.environ.get("HVD_WITH_MPI", "ON").upper() in ("ON", "1", "TRUE", "YES")
# What mpirun must pass on to ranks on other hosts besides hvd's own.
SANITIZER_X = [a for v in ("ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS")
               if v in os.environ for a in ("-x", v)]
SLOTS = 2    # ranks per host


def make_secret(build_dir):
    r = subprocess.run([os.path.join(build_dir, "hvdrun"), "--make-secret"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()


class Launchers:
    """The command lines of every launcher, to be run inside h0."""

    def __init__(self, cluster, build_dir):
        self.cluster = cluster
        self.build_dir = build_dir
        self.hvdrun = os.path.join(build_dir, "hvdrun")
        self.ssh = "ssh -F %s" % cluster.ssh_config
        self.secret = make_secret(build_dir)

    def argv(self, name, hosts, prog):
        np = hosts * SLOTS
        hlist = ",".join("h%d:%d" % (h, SLOTS) for h in range(hosts))
        nodes = "h0" if hosts == 1 else "h[0-%d]" % (hosts - 1)
        slurm = ["-N", str(hosts), "-w", nodes, "--ntasks-per-node=%d" % SLOTS]
        return {
            "hvdrun": [self.hvdrun, "-np", str(np), "-H", hlist, "--ssh-command", self.ssh],
            "hvdrun-in-salloc": ["salloc", "--quiet", *slurm, self.hvdrun, "-np", str(np)],
            "hvdrun--mpi": [self.hvdrun, "--mpi", "-np", str(np), "-H", hlist,
                            "--ssh-command", self.ssh],
            "mpirun": ["mpirun", "--allow-run-as-root", "--bind-to", "none", "-np", str(np),
                       "-H", hlist, "--mca", "plm_rsh_agent", self.ssh,
                       "-x", "_HOROVOD_SECRET_KEY", "-x", "HOROVOD_GLOO_RENDEZVOUS_ADDR",
                       "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS", "-x", "HOROVOD_START_TIMEOUT",
                       "-x", "HOROVOD_CPU_OPERATIONS", *SANITIZER_X],
            "srun": ["srun", *slurm],
            "srun--mpi=pmix": ["srun", "--mpi=pmix", *slurm],
        }[name] + list(prog)

    def env(self, name, **extra):
        env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="10", HOROVOD_START_TIMEOUT="20",
                   _HOROVOD_SECRET_KEY=self.secret, HOROVOD_CPU_OPERATIONS="gloo")
        if name in ("mpirun", "hvdrun--mpi"):
            # Built without MPI, a job mpirun starts on several hosts meets
            # at rank 0's host (with MPI, this is not read).
            env["HOROVOD_GLOO_RENDEZVOUS_ADDR"] = self.cluster.addr(0)
        env.update(extra)
        return env

    def run(self, name, hosts, prog, timeout=LIMIT, **env):
        self.cluster.check()
        return self.cluster.run("h0", self.argv(name, hosts, prog), env=self.env(name, **env),
                                cwd=self.build_dir, capture_output=True, text=True,
                                timeout=timeout)


ALL = ["hvdrun", "hvdrun-in-salloc", "hvdrun--mpi", "mpirun", "srun", "srun--mpi=pmix"]
# Who forms the job through MPI (in a build with MPI).
THROUGH_MPI = {"hvdrun--mpi", "mpirun", "srun--mpi=pmix"}


def launcher_names():
    return [n for n in ALL if MPI_BUILT or n != "srun--mpi=pmix"]


@pytest.fixture
def launch(slurm, build_dir):
    yield Launchers(slurm, build_dir)
    assert_nothing_left(slurm)


PROBE = re.compile(r"launch_probe: rank (\d+) of (\d+) local (\d+) of (\d+) cross (\d+) of "
                   r"(\d+) host (\S+) mpi (\d) digest ([0-9a-f]{16}) start_ns (\d+) "
                   r"init_ns (\d+)")


def probe_lines(text):
    return [PROBE.search(line).groups() for line in text.splitlines() if PROBE.search(line)]


def check_job(name, r, hosts):
    """The ranks hvd formed, as the launcher placed them host by host; the
    digest every rank printed."""
    assert r.returncode == 0, "%s failed (%d):\n%s\n%s" % (name, r.returncode, r.stdout[-3000:],
                                                         r.stderr[-3000:])
    rows = sorted(probe_lines(r.stdout), key=lambda g: int(g[0]))
    n = hosts * SLOTS
    assert [int(g[0]) for g in rows] == list(range(n)), r.stdout[-3000:]
    mpi = int(MPI_BUILT and name in THROUGH_MPI)
    for g in rows:
        rank = int(g[0])
        want = (rank, n, rank % SLOTS, SLOTS, rank // SLOTS, hosts)
        assert tuple(int(x) for x in g[:6]) == want, (name, g)
        assert g[6] == "h%d" % (rank // SLOTS), (name, g)
        assert int(g[7]) == mpi, "%s: hvd_mpi_enabled() says %s" % (name, g[7])
    digests = {g[8] for g in rows}
    assert len(digests) == 1, (name, digests)
    return digests.pop()


@pytest.mark.parametrize("hosts", [1, 2])
def test_same_bits_under_every_launcher(launch, build_dir, hosts):
    prog = [program(build_dir, "launch_probe")]
    digests = {}
    for name in launcher_names():
        r = launch.run(name, hosts, prog)
        digests[name] = check_job(name, r, hosts)
    assert len(set(digests.values())) == 1, digests


# mpirun ends the whole job itself as soon as a rank is killed, racing the
# survivors' own reports (every survivor of the others' launchers reports).
KILLS_THE_JOB = {"mpirun", "hvdrun--mpi"}


def survivors_errors(out):
    return {rank: re.findall(r"launch_probe: rank %d: error: (.*)" % rank, out)
            for rank in range(3)}


@pytest.mark.parametrize("name", launcher_names())
def test_lost_rank_is_named_and_the_job_ends(launch, build_dir, name):
    """Rank 3 (on h1) kills itself after the first collective: hvd's own
    failure detection fails every survivor's next call naming rank 3, each
    exits non-zero, and the launcher ends the job (the fixture checks that
    nothing is left on any host)."""
    r = launch.run(name, 2, [program(build_dir, "launch_probe"), "--die", "3"], timeout=60)
    assert r.returncode != 0, r.stdout[-3000:]
    out = r.stdout + r.stderr
    said = survivors_errors(out)
    for rank, errors in said.items():
        assert errors or name in KILLS_THE_JOB, "%s: rank %d said nothing:\n%s" % (
            name, rank, out[-3000:])
        for e in errors:
            assert re.search(r"\brank 3\b", e), (name, e)
    if name in KILLS_THE_JOB:  # named by a survivor, or by mpirun if it was first
        noticed = re.search(r"mpirun noticed that process rank 3 .* exited on signal 9", out)
        assert noticed or any(said.values()), out


@pytest.mark.parametrize("name", ["mpirun", "hvdrun--mpi"])
def test_lost_rank_under_mpirun_that_does_not_abort(launch, build_dir, name):
    """mpirun told not to end the job on a rank's exit status leaves the
    lost rank (which exits with 3) to hvd: every survivor names it and
    exits, which ends the job."""
    prog = [program(build_dir, "launch_probe"), "--quit", "3"]
    argv = launch.argv(name, 2, prog)
    opts = ["--mca", "orte_abort_on_non_zero_status", "0"]
    if name == "mpirun":
        argv[1:1] = opts
    else:
        argv[2:2] = ["--mpi-args", " ".join(opts)]
    launch.cluster.check()
    r = launch.cluster.run("h0", argv, env=launch.env(name), cwd=build_dir,
                           capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    for rank, errors in survivors_errors(out).items():
        assert errors, "%s: rank %d said nothing:\n%s" % (name, rank, out[-3000:])
        assert re.search(r"\brank 3\b", errors[0]), (name, errors[0])


def test_missing_secret_under_srun(launch, build_dir):
    env = launch.env("srun")
    del env["_HOROVOD_SECRET_KEY"]
    launch.cluster.check()
    r = launch.cluster.run("h0", launch.argv("srun", 2, [program(build_dir, "launch_probe")]),
                           env=env, capture_output=True, text=True, timeout=LIMIT)
    assert r.returncode != 0
    said = re.findall(r"launch_probe: hvd_init: (.*)", r.stderr)
    assert len(said) == 2 * SLOTS, r.stderr
    for line in said:
        assert "_HOROVOD_SECRET_KEY is not set" in line, line
        assert "hvdrun --make-secret" in line, line


@pytest.mark.parametrize("var,value", [("SLURM_STEPID", "99"), ("SLURM_JOBID", "1"),
                                       ("SLURM_STEP_NUM_TASKS", "7")])
def test_slurm_variables_of_another_step_are_refused(launch, build_dir, var, value):
    """A task whose environment mixes in another step's variables (as a
    program started from inside an older step would inherit them) is
    refused before it meets anyone, naming the variable."""
    prog = ["env", "%s=%s" % (var, value), program(build_dir, "launch_probe")]
    r = launch.run("srun", 2, prog)
    assert r.returncode != 0
    said = re.findall(r"launch_probe: hvd_init: (.*)", r.stderr)
    assert len(said) == 2 * SLOTS, r.stderr
    for line in said:
        assert line.startswith(var + "=" + value), line
        assert "another job" in line, line


def test_hvdrun_in_an_allocation_uses_srun(launch, build_dir):
    """hvdrun takes the hosts and slots of the allocation, forks the ranks
    of its own host and starts the others with srun; --launcher ssh inside
    the allocation goes over ssh instead; --launcher local refuses hosts
    that are not this machine."""
    prog = [program(build_dir, "launch_probe")]
    base = ["salloc", "--quiet", "-N", "2", "-w", "h[0-1]", "--ntasks-per-node=2",
            launch.hvdrun, "--verbose", "-np", "4"]
    launch.cluster.check()
    r = launch.cluster.run("h0", base + prog, env=launch.env("hvdrun"), cwd=build_dir,
                           capture_output=True, text=True, timeout=LIMIT)
    check_job("hvdrun-in-salloc", r, 2)
    assert re.search(r"host h1: srun \(pid \d+\) starts hvdrun's agent", r.stderr), r.stderr
    r = launch.cluster.run("h0", base[:-2] + ["--launcher", "ssh", "--ssh-command", launch.ssh,
                                              "-np", "4"] + prog,
                           env=launch.env("hvdrun"), cwd=build_dir, capture_output=True,
                           text=True, timeout=LIMIT)
    check_job("hvdrun-in-salloc", r, 2)
    assert re.search(r"host h1: ssh \(pid \d+\) starts hvdrun's agent", r.stderr), r.stderr
    r = launch.cluster.run("h0", base[:-2] + ["-np", "8"] + prog, env=launch.env("hvdrun"),
                           cwd=build_dir, capture_output=True, text=True, timeout=LIMIT)
    assert r.returncode == 2, r.stderr
    assert "-np 8 needs 8 slots, but SLURM_TASKS_PER_NODE gives only 4" in r.stderr
    r = launch.cluster.run("h0", [launch.hvdrun, "--launcher", "local", "-np", "2", "-H",
                                  "h0:1,h1:1"] + prog, env=launch.env("hvdrun"),
                           capture_output=True, text=True, timeout=LIMIT)
    assert r.returncode == 2 and "host 'h1' is not this machine" in r.stderr, r.stderr


def test_hvdrun_mpi_flags(launch, build_dir):
    """--mpi runs mpirun with hvdrun's hosts, ssh and variables (and
    --mpi-args); --mpi-args alone is a usage error; --gloo undoes --mpi."""
    prog = [program(build_dir, "launch_probe")]
    argv = launch.argv("hvdrun--mpi", 1, prog)
    argv[2:2] = ["--verbose", "--mpi-args", "--mca btl self,vader,tcp",
                 "--fusion-threshold-mb", "2"]
    launch.cluster.check()
    r = launch.cluster.run("h0", argv, env=launch.env("hvdrun--mpi"), cwd=build_dir,
                           capture_output=True, text=True, timeout=LIMIT)
    check_job("hvdrun--mpi", r, 1)
    said = re.search(r"hvdrun: --mpi: running (.*)", r.stderr).group(1)
    assert said.startswith("mpirun --allow-run-as-root --tag-output"), said
    assert "-np 2 -H h0:2" in said and "--mca btl self,vader,tcp" in said, said
    assert "-x HOROVOD_FUSION_THRESHOLD" in said and "-x _HOROVOD_SECRET_KEY" in said, said
    assert launch.secret not in said  # variables go by name
    r = launch.cluster.run("h0", [launch.hvdrun, "--mpi-args", "-v", "-np", "1"] + prog,
                           capture_output=True, text=True, timeout=LIMIT)
    assert r.returncode == 2 and "--mpi-args needs --mpi" in r.stderr, r.stderr
    r = launch.cluster.run("h0", [launch.hvdrun, "--mpi", "--gloo", "-np", "2"] + prog,
                           env=launch.env("hvdrun"), cwd=build_dir, capture_output=True,
                           text=True, timeout=LIMIT)
    check_job("hvdrun", r, 1)


@pytest.mark.parametrize("name", ["hvdrun", "srun"] + (["mpirun"] if MPI_BUILT else []))
def test_a_sub_job_of_listed_ranks(launch, build_dir, name):
    """hvd_init_ranks(3, 1) on 4 ranks of 2 hosts: world rank 3 (on h1) is
    rank 0 of a job of 2, world rank 1 (on h0) rank 1, each alone on its
    host; ranks 0 and 2 are left out."""
    r = launch.run(name, 2, [program(build_dir, "launch_probe"), "--ranks", "3,1"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = sorted(probe_lines(r.stdout))
    assert [g[:7] for g in rows] == [("0", "2", "0", "1", "0", "2", "h1"),
                                     ("1", "2", "0", "1", "1", "2", "h0")], rows
    assert len({g[8] for g in rows}) == 1, rows
    assert len(re.findall(r"launch_probe: left out: .*?not among the ranks", r.stdout)) == 2


def test_make_secret(build_dir):
    a, b = make_secret(build_dir), make_secret(build_dir)
    assert a != b
    for s in (a, b):
        assert len(base64.b64decode(s, validate=True)) == 32, s
