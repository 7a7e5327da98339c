"""The wire of hvd's relay (relay.py), its holders (holder.py) and the
registry they join (registry.py): a mutual HMAC handshake, then frames.

Handshake, on every connection, before anything else is read or run
(HMAC-SHA256 with the job's 32-byte key; `tag` names the service, so a
handshake made for one cannot be replayed to the other):

    server -> client   nonce_s (32 bytes)
    client -> server   nonce_c (32) | MAC(key, tag "client" nonce_s nonce_c)
    server -> client   MAC(key, tag "server" nonce_c nonce_s)

Each side checks the other's MAC, so a stranger can neither have a holder
run a command nor pose as a holder to receive hvdrun's session (which
carries the ranks' environment, secrets included).  What follows is not
encrypted nor MAC'd, as with Horovod's task services: a trusted network
between the hosts is assumed.

A frame: kind (1 byte) | length (4, big-endian) | payload.
"""
import hashlib
import hmac
import os
import struct

NONCE_BYTES = 32
MAX_FRAME = 1 << 24

# relay -> holder
COMMAND, STDIN, STDIN_EOF = b"C", b"I", b"E"
# holder -> relay
STATUS, STDOUT, STDERR, EXIT = b"S", b"O", b"R", b"X"
# holder -> registry
REGISTER, PING = b"J", b"P"

RELAY_TAG, REGISTER_TAG = b"hvd-relay", b"hvd-register"


class WireError(RuntimeError):
    """The other side closed early, sent nonsense, or lacks the job's key."""


def recv_exact(sock, n):
    parts = []
    while n:
        part = sock.recv(min(n, 1 << 20))
        if not part:
            raise WireError("the connection closed")
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def _mac(key, tag, side, a, b):
    return hmac.new(key, tag + side + a + b, hashlib.sha256).digest()


def handshake_server(sock, key, tag):
    """The server's half; raises WireError when the client lacks the key."""
    nonce_s = os.urandom(NONCE_BYTES)
    sock.sendall(nonce_s)
    got = recv_exact(sock, NONCE_BYTES + 32)
    nonce_c, mac = got[:NONCE_BYTES], got[NONCE_BYTES:]
    if not hmac.compare_digest(mac, _mac(key, tag, b"client", nonce_s, nonce_c)):
        raise WireError("a peer without the job's key")
    sock.sendall(_mac(key, tag, b"server", nonce_c, nonce_s))


def handshake_client(sock, key, tag):
    """The client's half; raises WireError when the server lacks the key
    (or, having found the client's wrong, closed without a word)."""
    nonce_s = recv_exact(sock, NONCE_BYTES)
    nonce_c = os.urandom(NONCE_BYTES)
    sock.sendall(nonce_c + _mac(key, tag, b"client", nonce_s, nonce_c))
    try:
        mac = recv_exact(sock, 32)
    except WireError:
        raise WireError("the peer closed the connection during the handshake "
                        "(it does not hold this job's key)") from None
    if not hmac.compare_digest(mac, _mac(key, tag, b"server", nonce_c, nonce_s)):
        raise WireError("the peer does not hold this job's key")


def frame(kind, payload=b""):
    return kind + struct.pack(">I", len(payload)) + payload


def recv_frame(sock):
    """(kind, payload); raises WireError at the end of the connection."""
    head = recv_exact(sock, 5)
    (n,) = struct.unpack(">I", head[1:])
    if n > MAX_FRAME:
        raise WireError("a frame of %d bytes (at most %d)" % (n, MAX_FRAME))
    return head[:1], recv_exact(sock, n)


def exit_payload(code):
    return struct.pack(">i", code)


def exit_code(payload):
    return struct.unpack(">i", payload)[0]
