"""hvd's relay: what hvdrun runs as its ssh-command when the workers of an
elastic job are to start inside Spark tasks or Ray actors (holders,
holder.py) instead of over ssh.

    hvdrun --ssh-command "python -m hvd.runner.relay REGISTRY" ...

hvdrun runs it as it runs ssh,

    python -m hvd.runner.relay REGISTRY -T -o BatchMode=yes -o ConnectTimeout=S HOST CMD

The relay takes ssh's options it knows the shape of (it uses
ConnectTimeout only), looks HOST up in REGISTRY (a 0600 JSON file the
driver keeps, registry.py: the job's key and where each host's holders
listen), connects to a holder of that host, authenticates both ways
(relay_wire.py), sends CMD, and then pipes: its stdin to the command's,
the command's stdout and stderr to its own, until the command ends.  It
exits with the command's exit status (128 + N for a signal N), or, as ssh
does, 255 when it cannot reach a holder or loses the connection.

A host's holders are tried in the registry's order; one that says it is
busy (as many sessions as slots) is kept as a fallback while the others
are tried, so each worker lands in a holder of its own where there are
enough.
"""
import json
import os
import socket
import sys
import threading

from hvd.runner import relay_wire as wire

CONNECT_EXIT = 255
# ssh's options that take a value: the relay skips them with it.
_WITH_VALUE = set("BbcDEeFIiJLlmOoPpQRSWw")


class RelayError(RuntimeError):
    """Why no session came about (exit 255)."""


def parse_ssh_argv(argv):
    """(host, command, connect_timeout) from the words hvdrun gives ssh."""
    timeout, i = 30.0, 0
    while i < len(argv) and argv[i].startswith("-") and len(argv[i]) > 1:
        flag = argv[i]
        value = None
        if flag[1] in _WITH_VALUE:
            if len(flag) > 2:
                value = flag[2:]
            elif i + 1 < len(argv):
                i += 1
                value = argv[i]
            else:
                raise RelayError("option %s wants a value" % flag)
        if flag[1] == "o" and value and value.lower().startswith("connecttimeout="):
            try:
                timeout = float(value.split("=", 1)[1])
            except ValueError:
                raise RelayError("-o %s: not a number of seconds" % value) from None
        i += 1
    if i >= len(argv):
        raise RelayError("no host given")
    host, command = argv[i], " ".join(argv[i + 1:])
    if not command:
        raise RelayError("no command given for host '%s' (a login shell is not offered)" % host)
    return host, command, timeout


def read_registry(path):
    """(key, {host: [(addr, port), ...]}) from the driver's registry file."""
    try:
        with open(path) as f:
            reg = json.load(f)
        key = bytes.fromhex(reg["key"])
        hosts = {h: [(a, int(p)) for a, p in holders] for h, holders in reg["hosts"].items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise RelayError("cannot read the holders' registry %s: %s" % (path, e)) from None
    return key, hosts


def _open(addr, port, key, timeout):
    """An authenticated connection to a holder, and whether it has a free slot."""
    sock = socket.create_connection((addr, port), timeout=timeout)
    try:
        sock.settimeout(timeout)
        wire.handshake_client(sock, key, wire.RELAY_TAG)
        kind, payload = wire.recv_frame(sock)
        if kind != wire.STATUS:
            raise wire.WireError("the holder sent %r before its status" % kind)
        sock.settimeout(None)
        return sock, payload == b"free"
    except BaseException:
        sock.close()
        raise


def connect(host, holders, key, timeout):
    """A connection to a holder of host: the first free one, else the
    first busy one that answered."""
    if not holders:
        raise RelayError("no holder is registered for host '%s'" % host)
    fallback, errors = None, []
    for addr, port in holders:
        try:
            sock, free = _open(addr, port, key, timeout)
        except (OSError, wire.WireError) as e:
            errors.append("%s:%d: %s" % (addr, port, e))
            continue
        if free:
            if fallback:
                fallback.close()
            return sock
        if fallback:
            sock.close()
        else:
            fallback = sock
    if fallback:
        return fallback
    raise RelayError("cannot reach a holder of host '%s': %s" % (host, "; ".join(errors)))


def _write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def _pump_stdin(sock):
    """hvdrun's frames (our stdin) to the holder; the end of stdin too."""
    try:
        while True:
            data = os.read(0, 1 << 16)
            if not data:
                sock.sendall(wire.frame(wire.STDIN_EOF))
                return
            sock.sendall(wire.frame(wire.STDIN, data))
    except OSError:
        pass  # the connection is gone: the main loop says so


def session(sock, command):
    """Runs command through the holder; returns its exit status."""
    sock.sendall(wire.frame(wire.COMMAND, command.encode()))
    threading.Thread(target=_pump_stdin, args=(sock,), daemon=True).start()
    while True:
        try:
            kind, payload = wire.recv_frame(sock)
        except (OSError, wire.WireError) as e:
            raise RelayError("lost the connection to the holder before the command "
                             "ended: %s" % e) from None
        if kind == wire.STDOUT:
            _write_all(1, payload)
        elif kind == wire.STDERR:
            _write_all(2, payload)
        elif kind == wire.EXIT:
            return wire.exit_code(payload)


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: python -m hvd.runner.relay REGISTRY [ssh options] HOST COMMAND\n")
        return 2
    try:
        host, command, timeout = parse_ssh_argv(argv[2:])
        key, hosts = read_registry(argv[1])
        sock = connect(host, hosts.get(host.strip("[]"), []), key, timeout)  # [v6] too
        with sock:
            return session(sock, command)
    except RelayError as e:
        sys.stderr.write("hvd relay: %s\n" % e)
        return CONNECT_EXIT
    except BrokenPipeError:
        return CONNECT_EXIT  # hvdrun closed our stdout: it is done with the session


if __name__ == "__main__":
    code = main(sys.argv)
    sys.stdout.flush()
    os._exit(code)  # the stdin pump may still block in read()
