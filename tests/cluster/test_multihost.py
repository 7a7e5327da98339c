"""hvd on several hosts: hvdrun in h0 starts ranks on the emulated hosts
over ssh (tests/cluster/cluster.sh), and the ranks find each other,
share memory within a host and use TCP between hosts.

Covered: the collectives and the engine at 2 hosts x 2 ranks and 4 hosts x
1 and 2 ranks (each program checks its results against references and the
same bits on every rank); the transport each layout gets; the hierarchical
allreduce on real hosts; a launcher's wrong placement caught by the host
check; the rendezvous over IPv6; the interface a rank listens on; the
job's secret on no command line of any host.  Failures: a rank killed on
another host, a host whose link is cut, a host that cannot be reached, a
refused key, a program missing, and hvdrun itself stopped or killed: each
ends the job with a message naming the host, and nothing is left running
on any host.

Every hvdrun here runs inside h0 (the root namespace has no route to the
hosts) and every test first checks that the cluster is fenced off.
"""
import os
import re
import signal
import subprocess
import time

import pytest

from hvdcluster import assert_nothing_left, program, ps

LIMIT = 120  # seconds for one hvdrun run here; none should come near it
TESTS = os.environ.get("HVD_BUILD_DIR", "")


def hosts_arg(hosts, slots):
    return ",".join("h%d:%d" % (h, slots) for h in range(hosts))


class Launcher:
    """hvdrun run inside h0 against the cluster's ssh."""

    def __init__(self, cluster, build_dir):
        self.cluster = cluster
        self.build_dir = build_dir
        self.hvdrun = os.path.join(build_dir, "hvdrun")

    def argv(self, np, hosts, prog, *flags):
        return [self.hvdrun, "-np", str(np), "-H", hosts, "--ssh-command",
                "ssh -F %s" % self.cluster.ssh_config, *flags, *prog]

    def env(self, **extra):
        env = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="10", HOROVOD_START_TIMEOUT="20")
        env.update(extra)
        return env

    def run(self, np, hosts, prog, *flags, timeout=LIMIT, **env):
        self.cluster.check()
        return self.cluster.run("h0", self.argv(np, hosts, prog, *flags), env=self.env(**env),
                                cwd=self.build_dir, capture_output=True, text=True,
                                timeout=timeout)

    def start(self, np, hosts, prog, *flags, **env):
        self.cluster.check()
        return self.cluster.popen("h0", self.argv(np, hosts, prog, *flags), env=self.env(**env),
                                  cwd=self.build_dir, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)


@pytest.fixture
def hvd(cluster, build_dir):
    yield Launcher(cluster, build_dir)
    assert_nothing_left(cluster)


def by_rank(text, stream="stdout"):
    lines = {}
    for line in text.splitlines():
        m = re.fullmatch(r"\[(\d+)\]<%s>:(.*)" % stream, line)
        if m:
            lines.setdefault(int(m.group(1)), []).append(m.group(2))
    return lines


def assert_ok(p, what, np):
    assert p.returncode == 0, "%s failed (%d):\n%s\n%s" % (what, p.returncode, p.stdout[-3000:],
                                                           p.stderr[-3000:])
    ok = re.findall(r"\[(\d+)\]<stdout>:\S+.* rank \d+ of %d: \d+ checks, 0 failed" % np, p.stdout)
    assert sorted(map(int, ok)) == list(range(np)), p.stdout[-3000:]


# ---- the collectives and the engine, on real hosts ----

LAYOUTS = [(2, 2), (4, 1), (4, 2)]  # hosts x ranks per host


@pytest.mark.parametrize("hosts,slots", LAYOUTS, ids=lambda v: str(v))
@pytest.mark.parametrize("name", ["test_collectives", "test_algorithms", "test_engine",
                                  "test_fusion", "test_process_sets", "test_join",
                                  "test_adasum"])
def test_programs_across_hosts(hvd, build_dir, name, hosts, slots):
    np = hosts * slots
    p = hvd.run(np, hosts_arg(hosts, slots), [program(build_dir, name)])
    assert_ok(p, "%s at %d hosts x %d" % (name, hosts, slots), np)


def transport_of(hvd, build_dir, np, hosts):
    p = hvd.run(np, hosts, [os.path.join(build_dir, "hvd-bench"), "--op", "allreduce",
                            "--max-bytes", "1K", "--batches", "1"])
    assert p.returncode == 0, p.stdout + p.stderr
    m = re.search(r"transport (\S+),", p.stdout)
    assert m, p.stdout
    return m.group(1)


def test_each_host_shares_memory_and_hosts_talk_tcp(hvd, build_dir):
    assert transport_of(hvd, build_dir, 4, "h0:2,h1:2") == "shm+tcp"
    assert transport_of(hvd, build_dir, 4, hosts_arg(4, 1)) == "tcp"
    assert transport_of(hvd, build_dir, 3, "h1:3") == "shm"  # one remote host alone


def test_placement_reaches_every_rank(hvd):
    p = hvd.run(6, "h0:2,h1:3,h2:1", ["sh", "-c",
                'echo "$(hostname) $HOROVOD_HOSTNAME $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE '
                '$HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE $PWD"'])
    assert p.returncode == 0, p.stderr
    seen = {r: lines[0].split() for r, lines in by_rank(p.stdout).items()}
    want = {0: "h0 h0 0 2 0 3", 1: "h0 h0 1 2 0 2", 2: "h1 h1 0 3 1 3", 3: "h1 h1 1 3 1 2",
            4: "h1 h1 2 3 0 1", 5: "h2 h2 0 1 2 3"}
    assert {r: " ".join(v[:6]) for r, v in seen.items()} == want, p.stdout
    assert {v[6] for v in seen.values()} == {hvd.build_dir}  # hvdrun's working directory


@pytest.mark.parametrize("hosts,slots", [(2, 2), (4, 2)], ids=lambda v: str(v))
def test_hierarchical_on_real_hosts(hvd, build_dir, hosts, slots):
    np = hosts * slots
    for name, args in (("test_hierarchical", ["hier"]), ("test_algorithms", [])):
        p = hvd.run(np, hosts_arg(hosts, slots), [program(build_dir, name), *args],
                    "--hierarchical-allreduce")
        assert_ok(p, "%s, hierarchical, %d hosts x %d" % (name, hosts, slots), np)


def test_a_wrong_placement_falls_back_to_tcp(hvd, build_dir):
    # A launcher that says all four ranks share one host when two run on h0
    # and two on h1 (here /dev/shm is shared between the hosts, so a segment
    # would even "work"): the host check sees the machines differ, warns,
    # and the job runs over TCP with correct results.
    lie = ("HOROVOD_HOSTNAME=one HOROVOD_LOCAL_RANK=$HOROVOD_RANK HOROVOD_LOCAL_SIZE=4 "
           "HOROVOD_CROSS_RANK=0 HOROVOD_CROSS_SIZE=1 exec %s"
           % program(build_dir, "test_collectives"))
    p = hvd.run(4, "h0:2,h1:2", ["sh", "-c", lie])
    assert_ok(p, "test_collectives with a wrong placement", 4)
    assert re.search(r"WARNING: no shared memory among the ranks placed on host 'one', using "
                     r"TCP: ranks 0 and 2 were placed on host 'one' but run on different "
                     r"machines \(h0/\S+ and h1/\S+\)", p.stderr), p.stderr


def test_rendezvous_and_mesh_over_ipv6(hvd, build_dir, cluster):
    p = hvd.run(4, "[%s]:2,[%s]:2" % (cluster.addr6(0), cluster.addr6(1)),
                [program(build_dir, "test_collectives")], "--verbose")
    assert_ok(p, "test_collectives over IPv6", 4)
    assert re.search(r"rendezvous listening on \[?%s\]?:\d+" % re.escape(cluster.addr6(0)),
                     p.stderr), p.stderr


def registered_via(cluster, stderr, iface):
    """How many ranks hvdrun --verbose saw register on the cluster's
    addresses through interface iface."""
    return len(re.findall(r"rank \d registered \(host h\d, listens on %s\d+:\d+ via %s\)"
                          % (re.escape(cluster.addr(0)[:-1]), iface), stderr))


def test_interface_chosen_by_the_route_to_hvdrun(hvd, build_dir, cluster):
    """No --network-interface: each rank takes the interface whose route
    reaches the rendezvous, hvdrun listens where the routes to the other
    hosts lead, and --verbose says which."""
    p = hvd.run(4, "h0:2,h1:2", [program(build_dir, "test_collectives")], "--verbose")
    assert_ok(p, "test_collectives, interfaces by route", 4)
    assert registered_via(cluster, p.stderr, "eth0") == 4, p.stderr
    assert re.search(r"rendezvous listening on %s:\d+ \(eth0\)" % re.escape(cluster.addr(0)),
                     p.stderr), p.stderr


def test_network_interface(hvd, build_dir, cluster):
    p = hvd.run(4, "h0:2,h1:2", [program(build_dir, "test_collectives")], "--verbose",
                "--network-interface", "eth0")
    assert_ok(p, "test_collectives --network-interface eth0", 4)
    assert registered_via(cluster, p.stderr, "eth0") == 4, p.stderr
    p = hvd.run(2, "h0:1,h1:1", [program(build_dir, "test_collectives")],
                "--network-interface", "ib7", timeout=60)
    assert p.returncode != 0
    assert re.search(r"HOROVOD_GLOO_IFACE on host h[01]: no network interface 'ib7' with an "
                     r"address here \(this host has: lo, eth0\)", p.stdout + p.stderr), \
        p.stdout + p.stderr


def test_secret_on_no_command_line(hvd, cluster):
    proc = hvd.start(4, "h0:2,h1:2", ["sh", "-c", 'echo "key $_HOROVOD_SECRET_KEY"; sleep 3'])
    try:
        key = None
        deadline = time.monotonic() + 30
        for line in proc.stdout:
            m = re.search(r"<stdout>:key (\S+)", line)
            if m:
                key = m.group(1)
                break
            assert time.monotonic() < deadline
        assert key and len(key) == 44, key
        for host in cluster.hosts[:2]:
            args = cluster.run(host, ["ps", "-eo", "args"], capture_output=True, text=True)
            assert args.returncode == 0
            assert "hvdrun" in args.stdout  # the agent is there to be seen
            assert key not in args.stdout, "the secret is on a command line on %s" % host
        out, err = proc.communicate(timeout=LIMIT)
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# ---- training across hosts ----

DATA = "/usr/share/datasets/fashion-mnist"


def test_c_trainer_across_two_hosts(hvd, build_dir):
    if not os.path.isdir(DATA):
        pytest.fail("Debian's dataset-fashion-mnist is not installed (scripts/deps.sh test)")
    p = hvd.run(4, "h0:2,h1:2", [os.path.join(build_dir, "hvd-train-fashion-mnist"),
                                 "--epochs", "1", "--train-limit", "20000", "--val-size",
                                 "1000"], timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    acc = re.findall(r"test_accuracy=(0\.\d+)", p.stdout)
    assert len(acc) == 1, p.stdout[-3000:]
    assert float(acc[0]) > 0.8, acc


def test_torch_example_across_two_hosts(hvd, build_dir, tmp_path):
    if os.environ.get("HVD_SANITIZE"):
        pytest.skip("sanitizer builds cannot load into Debian's python3")
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    p = hvd.run(4, "h0:2,h1:2", ["/usr/bin/python3",
                                 os.path.join(root, "examples/torch/fashion_mnist.py"),
                                 "--epochs", "1", "--train-limit", "8000", "--test-limit", "2000",
                                 "--lr", "0.05", "--batch-size", "32",
                                 "--data-dir", str(tmp_path)],
                timeout=600, PYTHONPATH=os.path.join(build_dir, "python"), OMP_NUM_THREADS="1")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    acc = re.findall(r"\[0\]<stdout>:test_accuracy=(0\.\d+)", p.stdout)
    assert len(acc) == 1, p.stdout[-3000:]
    assert float(acc[0]) > 0.6, acc


# ---- failures ----

SLEEPER = 'echo "pid $$ on $(hostname)"; exec sleep 1000'


def read_until(proc, pattern, count, end):
    """{int(first group): match} of the first `count` distinct lines of
    hvdrun's stdout that match pattern, read until the time `end`."""
    found = {}
    while len(found) < count:
        assert time.monotonic() < end, "ranks did not start: %s" % sorted(found)
        line = proc.stdout.readline()
        assert line, "hvdrun ended early: " + proc.stderr.read()
        m = re.search(pattern, line)
        if m:
            found[int(m.group(1))] = m
    return found


def read_pids(proc, count, timeout=30):
    """{pid: host} of the ranks' announcements on hvdrun's stdout."""
    found = read_until(proc, r"<stdout>:pid (\d+) on (h\d)", count, time.monotonic() + timeout)
    return {pid: m.group(2) for pid, m in found.items()}


def finish(proc, within):
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=within + 5)
    return proc.returncode, out, err, time.monotonic() - t0


def test_rank_killed_on_another_host(hvd):
    proc = hvd.start(4, "h0:2,h1:2", ["sh", "-c", SLEEPER])
    pids = read_pids(proc, 4)
    victim = next(p for p, h in pids.items() if h == "h1")
    os.kill(victim, signal.SIGKILL)  # one PID namespace: visible from here
    rc, out, err, took = finish(proc, 10)
    assert rc == 128 + 9, err
    assert re.search(r"hvdrun: rank [23] on h1 \(pid %d\) was killed by signal 9 \(Killed\)"
                     % victim, err), err
    assert took < 10, took


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_hvdrun_stopped_or_killed_leaves_nothing(hvd, cluster, sig):
    proc = hvd.start(6, "h0:2,h1:2,h2:2", ["sh", "-c", SLEEPER])
    pids = read_pids(proc, 6)
    sent = time.monotonic()
    proc.send_signal(sig)
    finish(proc, 10)
    end = sent + 10  # the bound, from the signal on
    while any(os.path.exists("/proc/%d" % p) and not zombie(p) for p in pids):
        assert time.monotonic() < end, "ranks still running 10 s after signal %d: %s" % (
            sig, ps([p for p in pids if os.path.exists("/proc/%d" % p)]))
        time.sleep(0.1)


def zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_host_whose_link_is_cut(hvd, cluster, build_dir):
    # A job that keeps reducing; h2's link goes down under it.
    loop = ("i=0; while [ $i -lt 600 ]; do echo tick; i=$((i+1)); sleep 0.1; done")
    proc = hvd.start(3, "h0:1,h1:1,h2:1", ["sh", "-c", 'echo "pid $$ on $(hostname)"; ' + loop])
    try:
        read_pids(proc, 3)
        cluster.link("h2", "down")
        rc, out, err, took = finish(proc, 10)
    finally:
        cluster.link("h2", "up")
    assert rc == 255, err  # a host failed (docs/hvdrun.md: exit statuses)
    assert re.search(r"hvdrun: host h2: lost contact with hvdrun's agent", err), err
    assert took < 10, took


FRAMEWORKS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "nohang",
                                          "frameworks.py"))


def partition_jobs(build_dir):
    """{binding: (argv, env, the error its ranks must raise)}: C, hvd.torch
    on Debian's python3, and hvd.jax (under jit) and hvd.tensorflow (eager
    and in a tf.function) on the project's venv when there is one."""
    jobs = {"c": ([program(build_dir, "nohang"), "loop"], {}, "HVD_E_PEER_LOST")}
    if os.environ.get("HVD_SANITIZE"):
        return jobs  # sanitizer builds cannot load into python
    env = {"PYTHONPATH": os.path.join(build_dir, "python"), "OMP_NUM_THREADS": "1",
           "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "",
           "HOROVOD_START_TIMEOUT": "120"}  # five jobs importing frameworks on 2 cores
    jobs["torch"] = (["/usr/bin/python3", FRAMEWORKS, "torch", "loop"], env,
                     "HorovodInternalError")
    venv = os.environ.get("HVD_VENV_PYTHON")
    if venv:
        jobs["jax"] = ([venv, FRAMEWORKS, "jax", "loop"], env, r"\w*RuntimeError")
        jobs["tensorflow"] = ([venv, FRAMEWORKS, "tensorflow", "loop"], env, "UnknownError")
        jobs["tf.function"] = ([venv, FRAMEWORKS, "tensorflow", "graphloop"], env,
                               "UnknownError")
    return jobs


def test_partition_is_named_by_every_rank(hvd, cluster, build_dir):
    """The ranks' own verdict on a host cut off with its connections open
    (issue 42): h2's link goes down under jobs looping on an allreduce, one
    job per binding (C, hvd.torch, hvd.jax under jit, hvd.tensorflow eager
    and in a tf.function),
    started together; in each the ranks on h0 and h1 raise what the
    binding raises for a lost peer, naming rank 2 on h2, within 10 s of
    its last sign of life (bound 20 s).  hvdrun's agent window is raised
    past that (HOROVOD_AGENT_TIMEOUT_SECONDS) so that the launcher's
    verdict, which test_host_whose_link_is_cut checks, does not end the
    ranks first."""
    jobs = partition_jobs(build_dir)
    procs = {}
    try:
        for name, (argv, env, _) in jobs.items():
            procs[name] = hvd.start(3, "h0:1,h1:1,h2:1", argv,
                                    HOROVOD_AGENT_TIMEOUT_SECONDS="25", **env)
        end = time.monotonic() + 180
        for proc in procs.values():
            read_until(proc, r"<stdout>:rank (\d+): running", 3, end)
        cluster.link("h2", "down")
        results = {name: finish(proc, 60) for name, proc in procs.items()}
    finally:
        cluster.link("h2", "up")
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    for name, (rc, out, err, _) in results.items():
        ended = {int(r): (code, float(t), msg) for r, code, t, msg in re.findall(
            r"<stdout>:rank (\d+): ended (\w+) after ([\d.]+) s: (.*)", out)}
        assert sorted(ended) == [0, 1], (name, out + err)
        for r, (code, t, msg) in ended.items():
            assert re.fullmatch(jobs[name][2], code), (name, r, code, msg)
            assert t < 20, "%s: rank %d took %.1f s (bound 20 s)" % (name, r, t)
            assert "rank 2" in msg, (name, msg)
        assert any("rank 2 on host h2" in m for _, _, m in ended.values()), (name, ended)
        assert rc != 0, (name, err)
    # h2's agents heard nothing from hvdrun while cut off: each gives up
    # after its window (25 s) and stops its rank
    assert_nothing_left(cluster, timeout=60)


def test_unreachable_host(hvd, cluster):
    # .99 is in the cluster's subnet, but no host has it.
    nobody = cluster.addr(98)
    p = hvd.run(2, "h1:1,%s:1" % nobody, ["sh", "-c", SLEEPER], timeout=60)
    assert p.returncode == 255, p.stderr
    assert re.search(r"hvdrun: host '%s': cannot start its ranks: ssh exited with "
                     r"code 255: .*(No route to host|timed out)" % re.escape(nobody),
                     p.stderr), p.stderr


def test_refused_key(hvd, cluster, tmp_path):
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    cluster.check()
    p = cluster.run("h0", [hvd.hvdrun, "-np", "2", "-H", "h0:1,h1:1", "--ssh-command",
                           "ssh -F /dev/null -o UserKnownHostsFile=%s -o IdentitiesOnly=yes"
                           % os.path.join(os.path.dirname(cluster.ssh_config), "known_hosts"),
                           "-i", str(key), "sh", "-c", SLEEPER],
                    env=hvd.env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 255, p.stderr
    assert re.search(r"hvdrun: host 'h1': cannot start its ranks: .*Permission denied",
                     p.stderr), p.stderr


def test_program_missing_on_another_host(hvd):
    p = hvd.run(2, "h0:1,h1:1", ["/nonexistent/prog"], timeout=60)
    assert p.returncode == 127, p.stderr
    assert "hvdrun: cannot run '/nonexistent/prog' on h1: No such file or directory" in p.stderr
