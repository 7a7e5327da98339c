"""The driver's side of an elastic job whose workers start inside holders
(Spark tasks, Ray actors: holder.py) through hvdrun's relay (relay.py).

    with Registry() as reg:
        ...start holders with reg.key, reg.addrs(), reg.port...
        with Discovery(reg.hosts) as d:
            hvd.run(fn, np=..., min_np=..., host_discovery_script=d.script,
                    ssh_command=reg.ssh_command, ssh_this_host=True)

Holders connect, prove the job's key (relay_wire.py), say (host, slots,
port) and then ping; a holder whose connection ends, or that is silent
for SILENCE_S, is gone.  hosts() is the discovery listing: every host
with a live holder, its holders' slots summed, so a holder killed is a
host lost to hvdrun's elastic driver, and a holder started (Spark's task
retry, a new Ray node) a host added.  The registry file, 0600 in a 0700
temporary directory of this user, holds the job's key and where each
host's holders listen: the relay, which hvdrun runs here, reads it.
Closing the registry ends every holder's connection, and so the holders.
"""
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

from hvd.runner import channel
from hvd.runner import relay_wire as wire

SILENCE_S = 10.0
# A host whose last holder went stays out of the listing this long, even
# if a new holder comes at once (Spark retries a task within a second):
# hvdrun runs its discovery script about once a second and must see the
# host lost, so that the workers hear of the change.
LOST_S = 3.0


class Registry:
    def __init__(self, driver_addr=None):
        self.key = channel.new_key()
        self._driver_addr = driver_addr
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._holders = {}  # connection -> (host, slots, port, since)
        self._lost = {}     # host -> when it may be listed again
        self._closed = False
        self._dir = tempfile.mkdtemp(prefix="hvd-relay-")
        self.path = os.path.join(self._dir, "registry.json")
        if " " in self.path or " " in sys.executable:
            raise RuntimeError("hvd relay: hvdrun's --ssh-command is split at blanks, and "
                               "%s has one" % (self.path if " " in self.path else sys.executable))
        self.ssh_command = "%s -m hvd.runner.relay %s" % (sys.executable, self.path)
        self._write()
        self._sock = channel.listen_any()
        self.port = self._sock.getsockname()[1]
        channel.serve_each(self._sock, self._serve, "hvd-registry")

    def addrs(self, nics=None):
        """Where holders may reach this registry: the driver's address
        first, then this machine's."""
        found = channel.local_addresses(nics)
        return ([self._driver_addr] if self._driver_addr else []) + found

    def hosts(self):
        """[(host, slots)]: hosts of this machine first, then by address."""
        here = set(channel.local_addresses())
        now, slots = time.monotonic(), {}
        with self._lock:
            for host, n, _, _ in self._holders.values():
                if self._lost.get(host, 0) <= now:
                    slots[host] = slots.get(host, 0) + n
        return sorted(slots.items(), key=lambda h: (h[0] not in here, h[0]))

    def wait_for_slots(self, n, timeout):
        """Waits until the holders offer n slots, or timeout s; returns
        the slots there are."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                have = sum(s for _, s, _, _ in self._holders.values())
                left = deadline - time.monotonic()
                if have >= n or left <= 0:
                    return have
                self._changed.wait(min(left, 1.0))

    def _write(self):
        """The registry file, replaced whole (a relay never reads half),
        one writer at a time (the holders' threads)."""
        with self._write_lock:
            with self._lock:
                if self._closed:
                    return
                holders = sorted(self._holders.values(), key=lambda h: h[3])
            by_host = {}
            for host, _, port, _ in holders:
                by_host.setdefault(host, []).append([host, port])
            tmp = self.path + ".new"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"key": self.key.hex(), "hosts": by_host}, f)
            os.replace(tmp, self.path)

    def _serve(self, conn):
        try:
            conn.settimeout(SILENCE_S)
            wire.handshake_server(conn, self.key, wire.REGISTER_TAG)
            kind, payload = wire.recv_frame(conn)
            if kind != wire.REGISTER:
                raise wire.WireError("no registration")
            holder = _registration(payload)
            with self._lock:
                if self._closed:
                    raise wire.WireError("closed")
                self._holders[conn] = holder + (time.monotonic(),)
                self._changed.notify_all()
            self._write()
            while wire.recv_frame(conn)[0] == wire.PING:
                pass
        except (OSError, ValueError, wire.WireError):
            pass  # a stranger, a holder gone or silent, or the registry closed
        with self._lock:
            gone = self._holders.pop(conn, None)
            if gone and all(h[0] != gone[0] for h in self._holders.values()):
                self._lost[gone[0]] = time.monotonic() + LOST_S
        if gone:
            self._write()
        conn.close()

    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._holders)
        for s in [self._sock] + conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._sock.close()
        with self._write_lock:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _registration(payload):
    """(host, slots, port) from a holder's REGISTER frame, checked."""
    reg = json.loads(payload)
    host, slots, port = reg["host"], int(reg["slots"]), int(reg["port"])
    if not isinstance(host, str) or not host or any(c.isspace() for c in host):
        raise ValueError("a host name %r" % (host,))
    if not 0 < slots <= 1 << 16 or not 0 < port < 65536:
        raise ValueError("slots %d, port %d" % (slots, port))
    return host, slots, port



def run_held(fn, args, kwargs, registry, np_of, wait_slots, keep_holders=None, interval=1.0,
             **run_opts):
    """hvd.run's elastic job with its workers started in the registry's
    holders: waits up to run_opts' start_timeout for them to offer
    wait_slots, then runs hvdrun with the relay as its ssh-command and
    their hosts as its discovery listing (keep_holders(), when given, is
    called before each listing: the engine's side starts holders on hosts
    that came).  np_of(slots) is the first job's size."""
    from hvd.runner.discovery import run_discovered

    registry.wait_for_slots(wait_slots, float(run_opts.get("start_timeout") or 60))

    def listing():
        if keep_holders:
            keep_holders()
        return registry.hosts()

    return run_discovered(fn, args, kwargs, listing, np_of, interval,
                          ssh_command=registry.ssh_command, ssh_this_host=True, **run_opts)
