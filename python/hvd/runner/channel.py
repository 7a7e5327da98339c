"""The driver's channel: how the ranks of a job started from Python fetch
the function they run and hand back what it returned.

The Python process that called hvd.run (or hvd.spark.run, or a Ray
executor) serves it; every rank makes one connection per request.  Both
directions are authenticated with the job's key (HMAC-SHA256 over a
fresh challenge the server sends first, the direction and the body), so
a stranger on the port can neither feed a rank code to run nor hand the
driver a result to unpickle: nothing is unpickled before its MAC checks.

    server -> client   challenge (16 bytes)
    client -> server   length (8, big-endian) | MAC(key, challenge "req" length body) | body
    server -> client   length | MAC(key, challenge "rep" length body) | body

A body is a pickled tuple (plain pickle of plain values; the function and
the results inside are cloudpickle's bytes).
"""
import hashlib
import hmac
import os
import pickle
import socket
import struct
import threading

CHALLENGE_BYTES = 16
MAC_BYTES = 32
MAX_BODY = 1 << 34  # 16 GiB: a result bigger than this is surely a mistake
KEY_ENV = "HVD_RUN_KEY"


class ChannelError(RuntimeError):
    """The channel failed: unreachable, wrong key, cut short."""


def new_key():
    return os.urandom(32)


def _mac(key, challenge, tag, body):
    length = struct.pack(">Q", len(body))
    return hmac.new(key, challenge + tag + length + body, hashlib.sha256).digest()


def _recv_exact(sock, n):
    parts = []
    while n:
        part = sock.recv(min(n, 1 << 20))
        if not part:
            raise ChannelError("the connection closed %d bytes early" % n)
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _send(sock, key, challenge, tag, body):
    sock.sendall(struct.pack(">Q", len(body)) + _mac(key, challenge, tag, body) + body)


def _recv(sock, key, challenge, tag):
    head = _recv_exact(sock, 8 + MAC_BYTES)
    (n,) = struct.unpack(">Q", head[:8])
    if n > MAX_BODY:
        raise ChannelError("a message of %d bytes (at most %d)" % (n, MAX_BODY))
    body = _recv_exact(sock, n)
    if not hmac.compare_digest(head[8:], _mac(key, challenge, tag, body)):
        raise ChannelError("a message that does not carry the job's key")
    return body


def listen_any(port=0):
    """A listening socket on every address of this machine, IPv6 with IPv4
    where the system has both (port 0: any free one)."""
    if socket.has_dualstack_ipv6():
        return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True)
    return socket.create_server(("", port))


def serve_each(sock, serve, name):
    """Accepts on sock until it is closed, serving each connection with
    serve(conn) on a daemon thread of its own; returns the accepting
    thread (named `name`), started."""
    def accept():
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=serve, args=(conn,), name=name + "-conn", daemon=True).start()

    thread = threading.Thread(target=accept, name=name, daemon=True)
    thread.start()
    return thread


class Server:
    """Serves handler(request_tuple) -> reply_tuple on a thread per
    connection, on every address of this machine (port 0: any free one)."""

    def __init__(self, key, handler, timeout=60.0, port=0):
        self._key, self._handler, self._timeout = key, handler, timeout
        self._sock = listen_any(port)
        self.port = self._sock.getsockname()[1]
        self._closed = False
        self._thread = serve_each(self._sock, self._serve, "hvd-run-channel")

    def _serve(self, conn):
        with conn:
            try:
                conn.settimeout(self._timeout)
                challenge = os.urandom(CHALLENGE_BYTES)
                conn.sendall(challenge)
                request = pickle.loads(_recv(conn, self._key, challenge, b"req"))
                reply = self._handler(request)
                _send(conn, self._key, challenge, b"rep", pickle.dumps(reply, protocol=4))
            except (OSError, ChannelError, pickle.UnpicklingError):
                pass  # a stranger or a rank that died mid-request: the job's exit tells

    def close(self):
        if not self._closed:
            self._closed = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
            self._thread.join(5)


def request(addrs, port, key, message, timeout=60.0):
    """Sends message (a tuple) to the first of addrs that answers on port
    and returns the server's reply tuple."""
    errors = []
    for addr in addrs:
        try:
            sock = socket.create_connection((addr, port), timeout=min(timeout, 10.0))
        except OSError as e:
            errors.append("%s: %s" % (addr, e))
            continue
        with sock:
            sock.settimeout(timeout)
            challenge = _recv_exact(sock, CHALLENGE_BYTES)
            _send(sock, key, challenge, b"req", pickle.dumps(message, protocol=4))
            return pickle.loads(_recv(sock, key, challenge, b"rep"))
    raise ChannelError("cannot reach the driver on port %d at %s" % (port, "; ".join(errors)))


def local_addresses(nics=None):
    """This machine's IPv4 addresses (those of `nics` only, when given),
    loopback last: where a rank may reach the driver."""
    import array
    import fcntl

    found, loop = [], []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            if nics and name not in nics:
                continue
            req = array.array("B", struct.pack("256s", name.encode()[:15]))
            try:
                fcntl.ioctl(s.fileno(), 0x8915, req)  # SIOCGIFADDR
            except OSError:
                continue  # no IPv4 address
            addr = socket.inet_ntoa(req.tobytes()[20:24])
            (loop if addr.startswith("127.") else found).append(addr)
    return found + loop
