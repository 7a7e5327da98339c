"""hvdrun on other hosts: ranks started over ssh by hvdrun's agent.

The "other hosts" are 127.0.0.2 and 127.0.0.3: hvdrun does not count them
as this machine (no interface holds them), so it starts their ranks over
ssh, and they are reachable over loopback.  The ssh is tests/launcher/
fake_ssh, which records its command line and runs the remote command here
as sshd would (clean environment, in $HOME); it can also fail, hang or be
slow for a host.  The cluster tests (tests/cluster) run the same over real
ssh between network namespaces.

Covered: the ranks' variables and a real job across hosts; output (and
--output-filename) of remote ranks; the environment they get and their
working directory; the secret on no command line; ssh's options; one
session per host, all at once, and beyond --launch-fanout hosts the
launch tree (agents starting further agents); failures (a rank's exit or
death, an unreachable, hanging or silent host, a dropped session, a
program or hvdrun missing there, a lost agent in the tree, a bad
protocol) and hvdrun stopped by a signal, each leaving nothing running.
"""
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from test_hvdrun import ENV_SCRIPT, LIMIT, assert_all_gone, by_rank, pids_in, run, stop_job

SLEEPER = 'echo "pid $$"; exec sleep 1000'


@pytest.fixture
def log(tmp_path):
    """fake_ssh's record: the list of its calls so far."""
    path = tmp_path / "ssh.log"

    def calls():
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]
    calls.path = str(path)
    return calls


@pytest.fixture
def remote(hvdrun, fake_ssh, log):
    """remote(np, hosts, argv, flags=(), env=None, **kw): hvdrun run with fake_ssh."""
    def go(np, hosts, argv, flags=(), env=None, timeout=LIMIT, **extra):
        return run(hvdrun, args(fake_ssh, np, hosts, argv, flags),
                   env=ssh_env(log, env, **extra), timeout=timeout)
    return go


def args(fake_ssh, np, hosts, argv, flags=()):
    return ["-np", str(np), "-H", hosts, "--ssh-command", fake_ssh] + list(flags) + list(argv)


def ssh_env(log, env=None, **extra):
    env = dict(os.environ if env is None else env)
    env["FAKE_SSH_LOG"] = log.path
    env.update(extra)
    return env


def start(hvdrun, fake_ssh, log, np, hosts, script, flags=(), **extra):
    return subprocess.Popen([hvdrun] + args(fake_ssh, np, hosts, ["sh", "-c", script], flags),
                            env=ssh_env(log, **extra), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def fields(text):
    return {r: dict(kv.split("=", 1) for kv in lines[0].split()) for r, lines in
            by_rank(text).items()}


@contextlib.contextmanager
def running(hvdrun, fake_ssh, log, np, hosts, script, flags=()):
    """A job of np ranks that each announce "pid N": yields (hvdrun, pids,
    its output so far) once all did, and leaves nothing behind."""
    p = start(hvdrun, fake_ssh, log, np, hosts, script, flags)
    pids, text, end = [], "", time.monotonic() + 10
    try:
        while len(pids_in(text)) < np:
            assert time.monotonic() < end, "ranks did not start: %r" % text
            line = p.stdout.readline().decode()
            assert line, "hvdrun ended early: %r" % text
            text += line
        pids.extend(pids_in(text))
        yield p, pids, text
    finally:
        stop_job(p, pids)


def parent(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read()


# ---- the ranks and the job ----

def test_remote_ranks_see_their_environment(remote):
    p = remote(5, "localhost:2,127.0.0.2:2,127.0.0.3:1", ["sh", "-c", ENV_SCRIPT])
    assert p.returncode == 0, p.stderr
    envs = fields(p.stdout)
    want = {0: ("localhost", 0, 2, 0, 3), 1: ("localhost", 1, 2, 0, 2),
            2: ("127.0.0.2", 0, 2, 1, 3), 3: ("127.0.0.2", 1, 2, 1, 2),
            4: ("127.0.0.3", 0, 1, 2, 3)}
    for r, (host, lr, ls, cr, cs) in want.items():
        e = envs[r]
        assert (e["R"], e["S"], e["H"]) == (str(r), "5", host), e
        assert (e["LR"], e["LS"], e["CR"], e["CS"]) == tuple(map(str, (lr, ls, cr, cs))), e
        assert e["A"] == "127.0.0.1" and e["IN"] == "0", e  # the route to 127.0.0.x
    assert len({(e["A"], e["P"], e["K"]) for e in envs.values()}) == 1


@pytest.mark.parametrize("hosts", ["localhost:2,127.0.0.2:2", "127.0.0.2:2,127.0.0.3:2"])
def test_a_job_across_hosts(remote, test_program, hosts):
    p = remote(4, hosts, [test_program("test_collectives")],
               env=dict(os.environ, HOROVOD_START_TIMEOUT="20", HOROVOD_GLOO_TIMEOUT_SECONDS="10"))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    ok = re.findall(r"\[(\d)\]<stdout>:test_collectives rank \d of 4: \d+ checks, 0 failed",
                    p.stdout)
    assert sorted(map(int, ok)) == [0, 1, 2, 3], p.stdout[-2000:]


def test_verbose_says_where_it_listens_and_what_ssh_runs(remote, hvdrun):
    p = remote(2, "localhost:1,127.0.0.2:1", ["true"], flags=["--verbose"])
    assert p.returncode == 0, p.stderr
    assert re.search(r"hvdrun: rendezvous listening on 127\.0\.0\.1:\d+ \(lo\) for hosts "
                     r"localhost, 127\.0\.0\.2\n", p.stderr), p.stderr
    assert "hvdrun: host 127.0.0.2: ssh (pid " in p.stderr
    assert "starts hvdrun's agent: exec '%s' --agent" % hvdrun in p.stderr
    assert re.search(r"hvdrun: rank 1 on 127\.0\.0\.2 \(pid \d+\) exited with code 0", p.stderr)


def test_network_interface(remote):
    script = 'echo "$HOROVOD_GLOO_IFACE $HOROVOD_GLOO_RENDEZVOUS_ADDR"'
    p = remote(2, "localhost:1,127.0.0.2:1", ["sh", "-c", script],
               flags=["--network-interface", "nosuch0,lo", "--verbose"])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["nosuch0,lo 127.0.0.1"], 1: ["nosuch0,lo 127.0.0.1"]}
    assert re.search(r"rendezvous listening on 127\.0\.0\.1:\d+ \(lo\) for hosts localhost, "
                     r"127\.0\.0\.2\n", p.stderr), p.stderr
    # None of them here: where the routes lead, and --verbose says so.
    p = remote(1, "127.0.0.2:1", ["true"], flags=["--network-interface", "ib7", "--verbose"])
    assert p.returncode == 0, p.stderr
    assert ("hvdrun: --network-interface: no network interface 'ib7' with an address here (this "
            "host has: ") in p.stderr
    assert re.search(r"rendezvous listening on 127\.0\.0\.1:\d+ \(lo\) for host 127\.0\.0\.2\n",
                     p.stderr), p.stderr


# ---- output ----

def test_output_files_hold_every_byte(remote, tmp_path):
    out = tmp_path / "out"
    script = ("printf 'o%s\\0\\001\\nsecond' $HOROVOD_RANK; printf 'e%s\\r\\n' $HOROVOD_RANK >&2;"
              " head -c 100000 /dev/zero | tr '\\0' x")
    p = remote(3, "localhost:1,127.0.0.2:2", ["sh", "-c", script],
               flags=["--output-filename", str(out / "deeper")])
    assert p.returncode == 0, p.stderr
    for r in range(3):
        d = out / "deeper" / ("rank.%d" % r)
        assert (d / "stdout").read_bytes() == b"o%d\0\1\nsecond" % r + b"x" * 100000
        assert (d / "stderr").read_bytes() == b"e%d\r\n" % r
    assert sorted(os.listdir(out / "deeper")) == ["rank.0", "rank.1", "rank.2"]
    # The terminal still gets the prefixed lines.
    assert by_rank(p.stdout)[2][0] == "o2\0\1"


def test_output_directory_that_cannot_be_made(remote, tmp_path):
    (tmp_path / "file").write_text("")
    p = remote(1, "127.0.0.2:1", ["true"], flags=["--output-filename", str(tmp_path / "file")])
    assert p.returncode == 1
    assert "hvdrun: --output-filename: cannot create '%s/rank.0'" % (tmp_path / "file") in p.stderr


# ---- what the remote ranks get ----

def test_environment_of_remote_ranks(remote):
    mine = dict(os.environ, DISPLAY=":7", SSH_AUTH_SOCK="/tmp/agent.sock", HOSTNAME="here",
                XDG_RUNTIME_DIR="/run/user/7", MY_SETTING="kept value", TERM="xterm")
    p = remote(2, "localhost:1,127.0.0.2:1", ["sh", "-c", "env"], env=mine)
    assert p.returncode == 0, p.stderr
    env = {r: dict(line.split("=", 1) for line in lines if "=" in line)
           for r, lines in by_rank(p.stdout).items()}
    local, far = env[0], env[1]
    for name in ("DISPLAY", "SSH_AUTH_SOCK", "HOSTNAME", "XDG_RUNTIME_DIR", "TERM"):
        assert local[name] == mine[name]  # this machine's ranks keep everything
        assert far.get(name) != mine[name], name
    assert "SSH_AUTH_SOCK" not in far and "DISPLAY" not in far
    assert far["MY_SETTING"] == "kept value" and far["PATH"] == mine["PATH"]
    assert far["SSH_CONNECTION"].endswith(" 127.0.0.2 22")  # what sshd gave the agent
    assert far["HOROVOD_HOSTNAME"] == "127.0.0.2"


def test_remote_ranks_run_in_hvdrun_directory(hvdrun, fake_ssh, log, tmp_path):
    here = tmp_path / "a dir with 'quotes'"
    here.mkdir()
    (here / "marker").write_text("")
    p = subprocess.run([hvdrun] + args(fake_ssh, 1, "127.0.0.2:1", ["sh", "-c", "pwd; ls"]),
                       cwd=here, env=ssh_env(log), stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=LIMIT)
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: [str(here), "marker"]}


def test_directory_missing_on_the_remote_host(hvdrun, fake_ssh, log, tmp_path):
    # hvdrun starts in a directory that is gone by the time the agent
    # (slow to connect) changes to it.
    gone = tmp_path / "gone"
    gone.mkdir()
    p = subprocess.Popen([hvdrun] + args(fake_ssh, 1, "127.0.0.2:1", ["true"]), cwd=gone,
                         env=ssh_env(log, FAKE_SSH_DELAY="1.5"), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    gone.rmdir()
    out, err = p.communicate(timeout=LIMIT)
    assert p.returncode == 255, err
    assert ("hvdrun: host '127.0.0.2': cannot change to directory '%s': No such file or "
            "directory\n" % gone) in err


def all_cmdlines():
    found = []
    for d in os.listdir("/proc"):
        try:
            found.append(cmdline(int(d)))
        except (OSError, ValueError):
            pass
    return found


def test_secret_on_no_command_line(hvdrun, fake_ssh, log):
    script = 'echo "key $_HOROVOD_SECRET_KEY"; ' + SLEEPER
    with running(hvdrun, fake_ssh, log, 2, "localhost:1,127.0.0.2:1", script) as (p, _, text):
        cmdlines = all_cmdlines()
    keys = set(re.findall(r"<stdout>:key (\S+)", text))
    assert len(keys) == 1
    key = keys.pop()
    assert len(key) == 44 and any(b"--agent" in c for c in cmdlines)  # the agent was there
    assert not [c for c in cmdlines if key.encode() in c]
    assert log() and all(key not in " ".join(c["argv"]) for c in log())


# ---- ssh ----

def test_ssh_command_line(remote, log, fake_ssh, tmp_path):
    key = tmp_path / "id_test"
    key.write_text("")
    p = remote(2, "127.0.0.2:1,127.0.0.3:1", ["true"],
               flags=["--ssh-command", fake_ssh + " -F /dev/null  -x", "-p", "2222", "-i",
                      str(key), "--start-timeout", "17"])
    assert p.returncode == 0, p.stderr
    calls = sorted(log(), key=lambda c: c["host"])
    assert [c["host"] for c in calls] == ["127.0.0.2", "127.0.0.3"]
    for c in calls:
        assert c["argv"][1:] == ["-F", "/dev/null", "-x", "-T", "-o", "BatchMode=yes", "-o",
                                 "ConnectTimeout=17", "-p", "2222", "-i", str(key), c["host"],
                                 c["command"]], c
        assert re.fullmatch(r"exec '/\S+/hvdrun' --agent", c["command"]), c


def test_one_session_per_host_all_at_once(remote, log):
    t0 = time.monotonic()
    p = remote(6, "127.0.0.2:3,127.0.0.3:3", ["true"], FAKE_SSH_DELAY="1")
    took = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert sorted(c["host"] for c in log()) == ["127.0.0.2", "127.0.0.3"]
    assert took < 1.8, took  # both slow sessions at once, not one after the other


def test_hosts_beyond_np_are_not_contacted(remote, log):
    p = remote(2, "localhost:1,127.0.0.2:1,127.0.0.3:4,nosuch.invalid:1",
               ["sh", "-c", "echo $HOROVOD_HOSTNAME"])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["localhost"], 1: ["127.0.0.2"]}
    assert [c["host"] for c in log()] == ["127.0.0.2"]


def test_this_host_through_the_ssh_command(remote, log, test_program):
    """--ssh-this-host: this machine's ranks go through the ssh command too
    (the relay the Spark and Ray elastic executors name), and still meet
    the others: an allreduce across both."""
    hosts, prog = "localhost:2,127.0.0.2:1", [test_program("test_fast_rider")]
    env = dict(os.environ, HOROVOD_START_TIMEOUT="20", HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    p = remote(3, hosts, prog, flags=["--ssh-this-host"], env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert sorted(c["host"] for c in log()) == ["127.0.0.2", "localhost"]
    assert len(re.findall(r"test_fast_rider rank \d of 3: \d+ checks, 0 failed", p.stdout)) == 3
    p = remote(3, hosts, prog, env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert sorted(c["host"] for c in log()) == ["127.0.0.2", "127.0.0.2", "localhost"]


def test_a_host_named_twice_is_one_host(remote, log):
    p = remote(3, "127.0.0.2:1,localhost:1,127.0.0.2:1",
               ["sh", "-c", 'echo "$HOROVOD_HOSTNAME $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE"'])
    assert p.returncode == 0, p.stderr
    assert by_rank(p.stdout) == {0: ["127.0.0.2 0 2"], 1: ["127.0.0.2 1 2"],
                                 2: ["localhost 0 1"]}
    assert len(log()) == 1


@pytest.mark.parametrize("hosts,host", [("[::1]:2", None),
                                        ("localhost:1,[fd00::99]:1", "fd00::99")])
def test_ipv6_hosts(remote, log, hosts, host):
    if host:  # hvdrun needs a route to it (to choose where to listen), nothing more
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
                s.connect((host, 9))
        except OSError:
            pytest.skip("no IPv6 route to %s here" % host)
    p = remote(2, hosts, ["sh", "-c", "echo $HOROVOD_HOSTNAME"],
               env=dict(os.environ, FAKE_SSH_FAIL=host or ""))
    if host is None:
        assert p.returncode == 0, p.stderr
        assert by_rank(p.stdout) == {0: ["::1"], 1: ["::1"]} and log() == []
    else:  # the bracketed form reached ssh as the bare address
        assert p.returncode == 255, p.stderr
        assert "hvdrun: host '%s': cannot start its ranks" % host in p.stderr
        assert [c["host"] for c in log()] == [host]


def test_unresolvable_host(remote, log):
    p = remote(2, "localhost:1,nosuch.invalid:1", ["true"])
    assert p.returncode == 2
    assert p.stderr.startswith("hvdrun: host 'nosuch.invalid': cannot resolve: "), p.stderr
    assert log() == []


# ---- failures ----

def test_failing_remote_rank_is_named_with_its_host(remote):
    script = 'if [ $HOROVOD_RANK = 2 ]; then sleep 0.3; exit 3; fi; ' + SLEEPER
    t0 = time.monotonic()
    p = remote(3, "localhost:1,127.0.0.2:2", ["sh", "-c", script])
    assert p.returncode == 3, p.stderr
    assert re.search(r"hvdrun: rank 2 on 127\.0\.0\.2 \(pid \d+\) exited with code 3\n", p.stderr)
    assert time.monotonic() - t0 < 10
    assert_all_gone(pids_in(p.stdout))


def test_remote_rank_killed_by_a_signal(remote):
    p = remote(2, "127.0.0.2:1,127.0.0.3:1",
               ["sh", "-c", 'if [ $HOROVOD_RANK = 1 ]; then kill -9 $$; fi; ' + SLEEPER])
    assert p.returncode == 128 + 9, p.stderr
    assert re.search(r"hvdrun: rank 1 on 127\.0\.0\.3 \(pid \d+\) was killed by signal 9 "
                     r"\(Killed\)", p.stderr), p.stderr
    assert_all_gone(pids_in(p.stdout))


def test_program_missing_on_a_remote_host(remote):
    p = remote(2, "127.0.0.2:1,127.0.0.3:1", ["/nonexistent/prog"])
    assert p.returncode == 127, p.stderr
    for host in ("127.0.0.2", "127.0.0.3"):  # said once per host
        assert p.stderr.count("hvdrun: cannot run '/nonexistent/prog' on %s: No such file or "
                              "directory\n" % host) == 1, p.stderr


def test_hvdrun_missing_on_a_remote_host(remote):
    p = remote(2, "localhost:1,127.0.0.2:1", ["sh", "-c", SLEEPER],
               FAKE_SSH_NO_HVDRUN="127.0.0.2")
    assert p.returncode == 255, p.stderr
    assert re.search(r"hvdrun: hvdrun's agent could not start on 127\.0\.0\.2: .*"
                     r"/nonexistent/hvdrun.*not found; hvdrun must be installed at the same "
                     r"path on every host", p.stderr), p.stderr
    assert_all_gone(pids_in(p.stdout))


def test_unreachable_host(remote):
    t0 = time.monotonic()
    p = remote(3, "localhost:1,127.0.0.2:1,127.0.0.3:1", ["sh", "-c", SLEEPER],
               FAKE_SSH_FAIL="127.0.0.3")
    assert p.returncode == 255, p.stderr
    assert ("hvdrun: host '127.0.0.3': cannot start its ranks: ssh exited with code 255: "
            "ssh: connect to host 127.0.0.3 port 22: No route to host\n") in p.stderr
    assert time.monotonic() - t0 < 10
    assert_all_gone(pids_in(p.stdout))


def test_ssh_that_cannot_be_run(remote):
    p = remote(2, "localhost:1,127.0.0.2:1", ["sh", "-c", SLEEPER],
               flags=["--ssh-command", "/nonexistent/ssh -x"])
    assert p.returncode == 255, p.stderr
    assert ("hvdrun: host '127.0.0.2': cannot start its ranks: cannot run '/nonexistent/ssh': "
            "No such file or directory\n") in p.stderr
    assert_all_gone(pids_in(p.stdout))


def test_hanging_ssh_fails_at_the_start_timeout(remote):
    t0 = time.monotonic()
    p = remote(2, "localhost:1,127.0.0.2:1", ["sh", "-c", SLEEPER],
               flags=["--start-timeout", "3"], FAKE_SSH_HANG="127.0.0.2")
    took = time.monotonic() - t0
    assert p.returncode == 255, p.stderr
    assert "hvdrun: host '127.0.0.2': cannot start its ranks: no answer within 3 s\n" in p.stderr
    assert 3 <= took < 9, took
    assert_all_gone(pids_in(p.stdout))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_signal_to_hvdrun_stops_every_host(hvdrun, fake_ssh, log, sig):
    with running(hvdrun, fake_ssh, log, 4, "localhost:2,127.0.0.2:1,127.0.0.3:1",
                 "trap '' TERM; " + SLEEPER) as (p, pids, _):
        t0 = time.monotonic()
        p.send_signal(sig)
        rc = p.wait(timeout=LIMIT)
        assert rc == (-9 if sig == signal.SIGKILL else 128 + sig)
        assert_all_gone(pids, within=10 - (time.monotonic() - t0))
        assert_all_gone([c["pid"] for c in log()], within=1)


def test_dropped_session_stops_the_hosts_ranks(hvdrun, fake_ssh, log):
    with running(hvdrun, fake_ssh, log, 3, "localhost:1,127.0.0.2:2", SLEEPER) as (p, pids, _):
        os.kill(log()[0]["pid"], signal.SIGKILL)  # the session: the agent's stdin ends
        out, err = p.communicate(timeout=LIMIT)
        assert p.returncode == 255, err
        assert re.search(r"hvdrun: host 127\.0\.0\.2: lost contact with hvdrun's agent \(the "
                         r"ssh session ended: ssh was killed by signal 9 \(Killed\)\); ranks 1-2 "
                         r"did not report an exit\n", err.decode()), err
        assert_all_gone(pids, within=5)


@pytest.mark.parametrize("window", [None, 7])
def test_silent_agent_is_lost(hvdrun, fake_ssh, log, monkeypatch, window):
    """After 4 s, or HOROVOD_AGENT_TIMEOUT_SECONDS."""
    if window:
        monkeypatch.setenv("HOROVOD_AGENT_TIMEOUT_SECONDS", str(window))
    with running(hvdrun, fake_ssh, log, 2, "localhost:1,127.0.0.2:1", SLEEPER) as (p, pids, _):
        agent = next(parent(pid) for pid in pids if b"--agent" in cmdline(parent(pid)))
        t0 = time.monotonic()
        os.kill(agent, signal.SIGSTOP)  # as good as a cut link
        out, err = p.communicate(timeout=LIMIT)
        took = time.monotonic() - t0
        assert p.returncode == 255, err
        assert ("hvdrun: host 127.0.0.2: lost contact with hvdrun's agent (no word for %d s); "
                "rank 1 did not report an exit\n" % (window or 4)) in err.decode()
        assert (window or 4) - 0.5 < took
        assert_all_gone(pids + [agent], within=5)


@pytest.mark.parametrize("window", [None, 7])
def test_agent_gives_up_on_silent_hvdrun(hvdrun, fake_ssh, log, monkeypatch, window):
    """The agent ends its host's ranks when hvdrun says nothing for 4 s, or
    for the HOROVOD_AGENT_TIMEOUT_SECONDS that hvdrun's job carries."""
    if window:
        monkeypatch.setenv("HOROVOD_AGENT_TIMEOUT_SECONDS", str(window))
    with running(hvdrun, fake_ssh, log, 2, "localhost:1,127.0.0.2:1", SLEEPER) as (p, pids, _):
        remote = [pid for pid in pids if b"--agent" in cmdline(parent(pid))]
        assert len(remote) == 1, pids
        t0 = time.monotonic()
        os.kill(p.pid, signal.SIGSTOP)
        try:
            assert_all_gone(remote, within=(window or 4) + 10)
            took = time.monotonic() - t0
        finally:
            os.kill(p.pid, signal.SIGCONT)
        assert (window or 4) - 0.5 < took


def test_agent_timeout_is_checked(hvdrun, fake_ssh, log, monkeypatch):
    monkeypatch.setenv("HOROVOD_AGENT_TIMEOUT_SECONDS", "1")
    p = subprocess.run([hvdrun, "-np", "1", "true"], capture_output=True, text=True,
                       timeout=LIMIT)
    assert p.returncode != 0
    assert "HOROVOD_AGENT_TIMEOUT_SECONDS must be a whole number of seconds in 2..86400, " \
        "not '1'" in p.stderr, p.stderr


# ---- the launch tree: agents start further agents ----

TREE_HOSTS = ["127.0.0.%d" % i for i in range(2, 9)]  # 7 hosts; with --launch-fanout 2:
# hvdrun starts .2 and .6; .2 starts .3 and .5, .3 starts .4; .6 starts .7 and .8
TREE_BY = {"127.0.0.2": "hvdrun", "127.0.0.6": "hvdrun"}


def tree_hosts(ranks_each=1):
    return ",".join("%s:%d" % (h, ranks_each) for h in TREE_HOSTS)


def test_launch_tree_starts_hosts_through_agents(remote, log, test_program):
    """Beyond --launch-fanout hosts, hvdrun starts sessions to that many
    and their agents start the rest (3 levels here): every host runs its
    ranks, which meet and reduce exactly, and the job ends cleanly."""
    env = dict(os.environ, HOROVOD_START_TIMEOUT="20", HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    p = remote(7, tree_hosts(), [test_program("test_fast_rider")],
               flags=["--launch-fanout", "2", "--verbose"], env=env)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert len(re.findall(r"test_fast_rider rank \d of 7: \d+ checks, 0 failed", p.stdout)) == 7
    assert "starting 7 hosts over ssh in a tree of 3 levels, at most 2 sessions each" in p.stderr
    assert "host 127.0.0.4: ssh on 127.0.0.3, through hvdrun's agent there, starts" in p.stderr
    calls = log()
    assert sorted(c["host"] for c in calls) == TREE_HOSTS
    assert {c["host"]: c["by"] for c in calls} == {h: TREE_BY.get(h, "agent") for h in TREE_HOSTS}
    assert_all_gone([c["pid"] for c in calls], within=5)


def test_launch_fanout_zero_starts_every_session_from_hvdrun(remote, log):
    p = remote(7, tree_hosts(), ["true"], flags=["--launch-fanout", "0"])
    assert p.returncode == 0, p.stderr
    assert [c["by"] for c in log()] == ["hvdrun"] * 7


def test_host_unreachable_from_its_starter(remote):
    """A host that the agent starting its session cannot reach is named,
    with where its ssh ran and how to start every session from hvdrun."""
    p = remote(7, tree_hosts(), ["sh", "-c", SLEEPER], flags=["--launch-fanout", "2"],
               FAKE_SSH_FAIL="127.0.0.4")
    assert p.returncode == 255, p.stderr
    assert ("hvdrun: host '127.0.0.4': cannot start its ranks: ssh exited with code 255: "
            "ssh: connect to host 127.0.0.4 port 22: No route to host (its session started "
            "on 127.0.0.3, through hvdrun's agent there: beyond --launch-fanout hosts, the "
            "hosts start each other's sessions; --launch-fanout 0 starts every session from "
            "here)\n") in p.stderr, p.stderr
    assert_all_gone(pids_in(p.stdout), within=5)


def test_hanging_session_in_the_tree_fails_at_the_start_timeout(remote, log):
    p = remote(7, tree_hosts(), ["sh", "-c", SLEEPER],
               flags=["--launch-fanout", "2", "--start-timeout", "3"], FAKE_SSH_HANG="127.0.0.8")
    assert p.returncode == 255, p.stderr
    assert "hvdrun: host '127.0.0.8': cannot start its ranks: no answer within 3 s\n" in p.stderr
    assert_all_gone(pids_in(p.stdout) + [c["pid"] for c in log()], within=5)


def test_lost_agent_takes_the_hosts_it_started(hvdrun, fake_ssh, log):
    """The agent on 127.0.0.3 relays 127.0.0.4's session: killing it
    loses both hosts, each named, and nothing is left on any."""
    with running(hvdrun, fake_ssh, log, 7, tree_hosts(), SLEEPER,
                 flags=["--launch-fanout", "2"]) as (p, pids, text):
        rank1 = pids[[int(r) for r in re.findall(r"\[(\d)\]<stdout>:pid", text)].index(1)]
        agent = parent(rank1)
        assert b"--agent" in cmdline(agent)
        os.kill(agent, signal.SIGKILL)
        out, err = p.communicate(timeout=LIMIT)
        err = err.decode()
        assert p.returncode == 255, err
        assert re.search(r"hvdrun: host 127\.0\.0\.3: lost contact with hvdrun's agent \(the "
                         r"ssh session ended: .*\); rank 1 did not report an exit\n", err), err
        assert ("hvdrun: host 127.0.0.4: lost contact with hvdrun's agent (its session ran "
                "through the agent on 127.0.0.3, which is gone); rank 2 did not report an "
                "exit\n") in err
        assert_all_gone(pids + [c["pid"] for c in log()], within=5)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_to_hvdrun_stops_the_whole_tree(hvdrun, fake_ssh, log, sig):
    with running(hvdrun, fake_ssh, log, 7, tree_hosts(), "trap '' TERM; " + SLEEPER,
                 flags=["--launch-fanout", "2"]) as (p, pids, _):
        p.send_signal(sig)
        rc = p.wait(timeout=LIMIT)
        assert rc == (-9 if sig == signal.SIGKILL else 128 + sig)
        assert_all_gone(pids + [c["pid"] for c in log()], within=10)


def test_a_stall_of_the_whole_machine_loses_no_host(hvdrun, fake_ssh, log):
    """hvdrun, the session and the agent all stopped for 6 s (as a machine
    too loaded to run them does): once they run again, the silence was
    nobody's, and the job goes on."""
    with running(hvdrun, fake_ssh, log, 2, "localhost:1,127.0.0.2:1", SLEEPER) as (p, pids, _):
        agent = next(parent(pid) for pid in pids if b"--agent" in cmdline(parent(pid)))
        stopped = [p.pid, agent] + [c["pid"] for c in log()]
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(6)
        for pid in reversed(stopped):
            os.kill(pid, signal.SIGCONT)
        time.sleep(3)
        assert p.poll() is None, p.communicate(timeout=LIMIT)[1]
        assert all(os.path.exists("/proc/%d" % pid) for pid in pids)


# ---- the agent by itself ----

def test_agent_refuses_garbage(hvdrun):
    p = subprocess.run([hvdrun, "--agent"], input=b"hello there, this is not a frame\n",
                       capture_output=True, timeout=LIMIT)
    assert p.returncode == 1
    assert p.stdout[:4] == b"HVDF"  # its HELLO came first, then an ERROR frame saying why
    assert b"protocol error from hvdrun: the stream does not begin with a frame but with " \
        b"'hello there, this is not'" in p.stdout


def test_agent_without_hvdrun_exits(hvdrun):
    t0 = time.monotonic()
    p = subprocess.run([hvdrun, "--agent"], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=LIMIT)
    assert p.returncode == 1 and time.monotonic() - t0 < 3
    assert b"its input from hvdrun ended (hvdrun stopped, or is gone): stopping the ranks" \
        in p.stderr
