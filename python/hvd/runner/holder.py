"""A holder: the long-running process on a host (a Spark task, a Ray
actor) inside which hvdrun's relay (relay.py) starts an elastic job's
workers, in place of ssh.

    Holder(key, registry_addrs, registry_port, slots).serve()

It connects to the driver's registry (registry.py), listens on the
address that connection leaves from (the host's address towards the
driver), and registers (host, slots, port).  For each relay that proves
the job's key (relay_wire.py) it runs the command it is sent (`sh -c`,
hvdrun's agent) with stdin, stdout and stderr piped to that connection,
and reports its exit status.

Its children die with it: each is the leader of its own process group,
with PR_SET_PDEATHSIG (SIGKILL when the thread that started it ends:
that thread lives as long as the child).  The group is killed when the
relay's connection drops, and every group when the registry's
connection ends (the job is over, or the driver died): serve() returns
then.  A holder killed (the Spark task's Python worker, the Ray actor)
takes hvdrun's agent and so the host's workers with it; the registry
sees its connection end, and the host leaves the discovery listing.
"""
import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time

from hvd.runner import channel
from hvd.runner import relay_wire as wire

PING_S = 1.0
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent(parent):
    """preexec_fn: SIGKILL when the starting thread ends, even if it ended
    before this ran."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
        os._exit(1)


def exit_status(returncode):
    """A shell's exit status: 128 + N for a signal N."""
    return 128 - returncode if returncode < 0 else returncode


def kill_group(proc):
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


class Holder:
    def __init__(self, key, registry_addrs, registry_port, slots, timeout=30.0):
        self._key, self.slots = key, int(slots)
        self._reg = self._connect(registry_addrs, registry_port, timeout)
        self.host = self._reg.getsockname()[0]
        self._listen = socket.create_server((self.host, 0), family=self._reg.family)
        self.port = self._listen.getsockname()[1]
        self._lock = threading.Lock()
        self._children = set()
        self._sessions = 0
        self._stopped = False
        self._reg.sendall(wire.frame(wire.REGISTER, json.dumps(
            {"host": self.host, "slots": self.slots, "port": self.port,
             "pid": os.getpid()}).encode()))

    def _connect(self, addrs, port, timeout):
        errors = []
        for addr in addrs:
            try:
                sock = socket.create_connection((addr, port), timeout=timeout)
            except OSError as e:
                errors.append("%s: %s" % (addr, e))
                continue
            try:
                wire.handshake_client(sock, self._key, wire.REGISTER_TAG)
            except (OSError, wire.WireError):
                sock.close()
                raise
            sock.settimeout(None)
            return sock
        raise ConnectionError("hvd holder: cannot reach the driver's registry on port %d at %s"
                              % (port, "; ".join(errors)))

    def serve(self):
        """Serves relays until the registry's connection ends; then kills
        every child and returns."""
        channel.serve_each(self._listen, self._session, "hvd-holder")
        threading.Thread(target=self._ping, name="hvd-holder-ping", daemon=True).start()
        try:
            while self._reg.recv(1 << 10):
                pass  # the registry says nothing; its end is the message
        except OSError:
            pass
        self.stop()

    def stop(self):
        with self._lock:
            self._stopped = True
            children = list(self._children)
        for proc in children:
            kill_group(proc)
        for s in (self._listen, self._reg):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _ping(self):
        try:
            while not self._stopped:
                self._reg.sendall(wire.frame(wire.PING))
                time.sleep(PING_S)
        except OSError:
            pass

    def _session(self, conn):
        with conn:
            try:
                conn.settimeout(30.0)
                wire.handshake_server(conn, self._key, wire.RELAY_TAG)
            except (OSError, wire.WireError):
                return  # a stranger
            # Every session counts from its status on, so that relays
            # asking at once are not all told the same slot is free.
            with self._lock:
                free = self._sessions < self.slots
                self._sessions += 1
            try:
                conn.sendall(wire.frame(wire.STATUS, b"free" if free else b"busy"))
                kind, command = wire.recv_frame(conn)
                conn.settimeout(None)
                if kind == wire.COMMAND:
                    self._run(conn, command.decode(errors="replace"))
            except (OSError, wire.WireError):
                pass  # a relay that went elsewhere
            finally:
                with self._lock:
                    self._sessions -= 1

    def _start(self, command):
        with self._lock:
            if self._stopped:
                return None
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True,
                                    preexec_fn=lambda p=os.getpid(): _die_with_parent(p))
            self._children.add(proc)
        return proc

    def _run(self, conn, command):
        """Runs command for the relay at conn (in this thread, which must
        outlive the child: PR_SET_PDEATHSIG follows the starting thread)."""
        proc = self._start(command)
        if proc is None:
            return
        send_lock = threading.Lock()
        outs = [threading.Thread(target=_pump_out, args=(proc, pipe, kind, conn, send_lock),
                                 daemon=True)
                for pipe, kind in ((proc.stdout, wire.STDOUT), (proc.stderr, wire.STDERR))]
        for t in outs:
            t.start()
        threading.Thread(target=_pump_in, args=(proc, conn), daemon=True).start()
        proc.wait()
        for t in outs:
            t.join(5)
        with self._lock:
            self._children.discard(proc)
        try:
            with send_lock:
                conn.sendall(wire.frame(wire.EXIT, wire.exit_payload(exit_status(proc.returncode))))
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def _pump_in(proc, conn):
    """The relay's frames to the child's stdin.  The connection's end
    before the child's is a relay gone: the child's group is killed."""
    stdin = proc.stdin
    try:
        while True:
            kind, payload = wire.recv_frame(conn)
            if kind == wire.STDIN and stdin:
                try:
                    stdin.write(payload)
                    stdin.flush()
                except OSError:
                    pass  # the child closed its stdin; its exit tells
            elif kind == wire.STDIN_EOF and stdin:
                stdin.close()
                stdin = None
    except (OSError, wire.WireError, ValueError):
        kill_group(proc)
    finally:
        if stdin:
            try:
                stdin.close()
            except OSError:
                pass


def _pump_out(proc, pipe, kind, conn, send_lock):
    try:
        while True:
            data = os.read(pipe.fileno(), 1 << 16)
            if not data:
                return
            with send_lock:
                conn.sendall(wire.frame(kind, data))
    except OSError:
        kill_group(proc)  # the relay is gone
    finally:
        pipe.close()
