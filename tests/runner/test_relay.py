"""hvd's relay and holders on this one machine (hvd/runner/relay.py,
holder.py, registry.py): what hvd.spark.run_elastic and
ElasticRayExecutor start their workers through instead of ssh.  A holder
here is a plain Python process (in Spark it is a task, in Ray an actor);
the relay is run exactly as hvdrun runs its ssh-command.

- a command's stdin, stdout, stderr and exit status (a signal's too) come
  through the relay; the holder's host and slots are the registry's listing
- a relay or a holder without the job's key is refused, nothing run
- a host with no holder, a holder gone: exit 255 saying why (ssh's code)
- the holder killed: its child dies, the relay exits 255, the host leaves
  the listing (for LOST_S at least, a new holder there notwithstanding); the relay killed (the connection dropped): the child dies
- sessions spread over a host's holders while they have free slots
- the registry closed: the holders return and their children die
"""
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from fn_checks import pid_alive
from hvd.runner import relay_wire as wire
from hvd.runner.relay import parse_ssh_argv
from hvd.runner.registry import LOST_S, Registry

HOLDER = textwrap.dedent("""
    import os, sys
    from hvd.runner.holder import Holder
    h = Holder(bytes.fromhex(os.environ.pop("HOLDER_KEY")), sys.argv[1].split(","),
               int(sys.argv[2]), int(sys.argv[3]))
    print(h.host, h.port, flush=True)
    h.serve()
    print("served", flush=True)
    """)


def _env():
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__import__("hvd").__file__)))
    return dict(os.environ, PYTHONPATH=parent + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.fixture
def registry():
    reg = Registry()
    yield reg
    reg.close()


def start_holder(reg, slots=1, key=None, addrs=None):
    env = dict(_env(), HOLDER_KEY=(key or reg.key).hex())
    p = subprocess.Popen([sys.executable, "-c", HOLDER, ",".join(addrs or reg.addrs()),
                          str(reg.port),
                          str(slots)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    p.host = p.stdout.readline().split()[0] if key is None else None
    return p


def wait_until(cond, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)
    return cond()


def relay(reg, host, command, path=None, **kw):
    """The relay as hvdrun runs it: its ssh-command words, ssh's options,
    the host, the command."""
    argv = reg.ssh_command.split() if path is None else [sys.executable, "-m",
                                                          "hvd.runner.relay", path]
    argv += ["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host, command]
    return subprocess.Popen(argv, env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def read_pid(path):
    assert wait_until(lambda: os.path.exists(path) and open(path).read().strip()), path
    return int(open(path).read())


def sleeping_session(registry, holder, tmp_path):
    """Once the holder is listed, a session through the relay whose command
    sleeps: (the relay's process, the pid of its command)."""
    assert wait_until(lambda: registry.hosts() == [(holder.host, 1)])
    pidfile = tmp_path / "pid"
    r = relay(registry, holder.host, "echo $$ > %s; exec sleep 300" % pidfile)
    return r, read_pid(pidfile)


def test_parse_ssh_argv():
    assert parse_ssh_argv(["-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=7", "-p", "22",
                           "-i", "/k", "h1", "exec", "'/a b/hvdrun'", "--agent"]) == (
        "h1", "exec '/a b/hvdrun' --agent", 7.0)
    assert parse_ssh_argv(["-oConnectTimeout=3", "h", "true"]) == ("h", "true", 3.0)


def test_command_through_the_relay(registry, tmp_path):
    holder = start_holder(registry, slots=2)
    try:
        assert wait_until(lambda: registry.hosts() == [(holder.host, 2)])
        r = relay(registry, holder.host, "cat; echo to-stderr >&2; exit 7")
        out, err = r.communicate(b"hello\x00" * 50000, timeout=60)
        assert (r.returncode, out, err) == (7, b"hello\x00" * 50000, b"to-stderr\n")
        r = relay(registry, holder.host, "kill -TERM $$")
        assert r.communicate(timeout=60)[0] == b"" and r.returncode == 128 + signal.SIGTERM
        r = relay(registry, "no-such-host", "true")
        err = r.communicate(timeout=60)[1].decode()
        assert r.returncode == 255 and "no holder is registered for host 'no-such-host'" in err
        # The registry file: this user's alone.
        assert os.stat(registry.path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(registry.path)).st_mode & 0o777 == 0o700
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.skipif(not socket.has_dualstack_ipv6(), reason="no IPv6 here")
def test_ipv6(registry):
    """A holder that reaches the registry over IPv6 listens there; hvdrun
    may name its host in brackets."""
    holder = start_holder(registry, addrs=["::1"])
    try:
        assert holder.host == "::1"
        assert wait_until(lambda: registry.hosts() == [("::1", 1)])
        r = relay(registry, "[::1]", "echo v6")
        assert r.communicate(timeout=60)[0] == b"v6\n" and r.returncode == 0
    finally:
        holder.kill()
        holder.wait()


def test_a_wrong_key_is_refused(registry, tmp_path):
    holder = start_holder(registry)
    stranger = start_holder(registry, key=os.urandom(32))
    try:
        assert wait_until(lambda: registry.hosts() == [(holder.host, 1)])
        assert stranger.wait(30) != 0  # the registry did not let it in
        assert "does not hold this job's key" in stranger.stderr.read()
        # A relay with another key: the holder runs nothing.
        with open(registry.path) as f:
            reg = json.load(f)
        reg["key"] = os.urandom(32).hex()
        wrong = tmp_path / "wrong.json"
        wrong.write_text(json.dumps(reg))
        marker = tmp_path / "ran"
        r = relay(registry, holder.host, "touch %s" % marker, path=str(wrong))
        err = r.communicate(timeout=60)[1].decode()
        assert r.returncode == 255, err
        assert "cannot reach a holder of host '%s'" % holder.host in err
        assert "does not hold this job's key" in err
        assert not marker.exists()
        assert registry.hosts() == [(holder.host, 1)]  # and the holder goes on
    finally:
        holder.kill()
        holder.wait()


def test_holder_killed(registry, tmp_path):
    holder = start_holder(registry)
    r, child = sleeping_session(registry, holder, tmp_path)
    holder.kill()
    holder.wait()
    assert wait_until(lambda: not pid_alive(child), 10), "the holder's child outlived it"
    err = r.communicate(timeout=60)[1].decode()
    assert r.returncode == 255 and "lost the connection to the holder" in err, err
    assert wait_until(lambda: registry.hosts() == [], 10)  # a host lost to hvdrun
    r = relay(registry, holder.host, "true")
    assert r.wait(60) == 255
    # A holder there again at once (Spark's retry): the host stays out of
    # the listing for LOST_S, long enough for hvdrun to see it lost.
    again = start_holder(registry)
    try:
        t0 = time.monotonic()
        assert wait_until(lambda: registry.wait_for_slots(1, 0) == 1)
        listed = registry.hosts()
        assert listed == [] or time.monotonic() - t0 >= LOST_S - 1, listed
        assert wait_until(lambda: registry.hosts() == [(holder.host, 1)], LOST_S + 10)
    finally:
        again.kill()
        again.wait()


def test_connection_dropped(registry, tmp_path):
    holder = start_holder(registry)
    try:
        r, child = sleeping_session(registry, holder, tmp_path)
        r.kill()
        r.wait()
        assert wait_until(lambda: not pid_alive(child), 10), "the child outlived its relay"
        assert registry.hosts() == [(holder.host, 1)]  # the holder serves on
        r = relay(registry, holder.host, "exit 3")
        assert r.wait(60) == 3
    finally:
        holder.kill()
        holder.wait()


def test_sessions_spread_over_free_holders(registry, tmp_path):
    holders = [start_holder(registry) for _ in range(2)]
    try:
        host = holders[0].host
        assert wait_until(lambda: registry.hosts() == [(host, 2)])
        runs = [relay(registry, host, "echo $PPID; exec sleep 300") for _ in range(2)]
        parents = sorted(int(r.stdout.readline()) for r in runs)
        assert parents == sorted(h.pid for h in holders)
        # Both busy: a third session still runs, in the first that answered.
        r = relay(registry, host, "echo $PPID")
        assert int(r.communicate(timeout=60)[0]) in parents and r.returncode == 0
        for r in runs:
            r.kill()
            r.wait()
    finally:
        for h in holders:
            h.kill()
            h.wait()


def test_registry_closed_ends_the_holders(tmp_path):
    reg = Registry()
    holder = start_holder(reg)
    try:
        r, child = sleeping_session(reg, holder, tmp_path)
        reg.close()
        assert holder.wait(30) == 0 and holder.stdout.read() == "served\n"
        assert wait_until(lambda: not pid_alive(child), 10)
        # The holder kills the session's command as it ends: the relay may
        # hear that status (128 + SIGKILL) before the connection goes, or
        # only the connection going (255); either way not a success.
        assert r.wait(60) in (255, 128 + signal.SIGKILL)
        assert not os.path.exists(reg.path)
    finally:
        holder.kill()
        holder.wait()


def _handshake(client_key, server_key, client_tag=wire.RELAY_TAG, server_tag=wire.RELAY_TAG):
    """Both halves over a socket pair; the client's error, if any."""
    a, b = socket.socketpair()

    def serve():
        with a:
            try:
                wire.handshake_server(a, server_key, server_tag)
            except wire.WireError:
                pass

    t = threading.Thread(target=serve)
    t.start()
    try:
        with b:
            wire.handshake_client(b, client_key, client_tag)
        return None
    except wire.WireError as e:
        return str(e)
    finally:
        t.join()


def test_handshake_needs_the_key_both_ways():
    key = os.urandom(32)
    assert _handshake(key, key) is None
    assert "does not hold this job's key" in _handshake(key, os.urandom(32))
    assert "does not hold this job's key" in _handshake(os.urandom(32), key)
    # The right key, but a handshake made for the registry: refused.
    assert _handshake(key, key, server_tag=wire.REGISTER_TAG) is not None
