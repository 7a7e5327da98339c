"""Forming a job whose ranks no hvdrun starts (hvd.ray's actors, hvd.spark's
tasks): the driver serves one round of hvd's rendezvous (hvd._C's
rdzv_host, the server hvdrun runs) and gives each rank hvdrun's variables.

    rdzv = Rendezvous(size, addr)          # serving on addr, a fresh secret
    env = rdzv.env() | rank_env(hosts)[r]  # what rank r needs before hvd.init()
    ...                                    # the ranks call hvd.init()
    rdzv.stop(timeout)

The secret is new for every round and travels only inside those
environments, which the caller hands to its ranks over a channel that its
engine does not log (a Ray method's arguments, a Spark task's closure).
"""
import base64
import os
import socket

from hvd import _C


def _free_port(addr):
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


class Rendezvous:
    """One round of `size` ranks, served on `addr` (an address of this
    host the ranks reach) from now until stop()."""

    def __init__(self, size, addr, tries=5):
        self.size, self.addr = size, addr
        self.secret = base64.b64encode(os.urandom(32)).decode()
        for attempt in range(tries):
            self.port = _free_port(addr)
            try:
                self._host = _C.rdzv_host_start(addr, self.port, size, self.secret)
                return
            except OSError:
                if attempt == tries - 1:  # another process took each port we chose
                    raise

    def env(self):
        return {"HOROVOD_SIZE": str(self.size), "HOROVOD_GLOO_RENDEZVOUS_ADDR": self.addr,
                "HOROVOD_GLOO_RENDEZVOUS_PORT": str(self.port),
                "_HOROVOD_SECRET_KEY": self.secret}

    def stop(self, timeout=0.0):
        """Waits at most `timeout` seconds for ranks still to be served."""
        if self._host is not None:
            _C.rdzv_host_stop(self._host, float(timeout))
            self._host = None


def rank_env(hosts):
    """Each rank's place, as hvdrun sets it, from the host of every rank
    (a list in rank order; a host's ranks should be adjacent).  Local
    ranks count within a host; cross rank r of local rank l is the host's
    place among the hosts that have a local rank l (Horovod's meaning)."""
    local_rank, per_host = [], {}
    for h in hosts:
        local_rank.append(per_host.get(h, 0))
        per_host[h] = local_rank[-1] + 1
    order = list(dict.fromkeys(hosts))
    out = []
    for r, h in enumerate(hosts):
        lr = local_rank[r]
        with_lr = [x for x in order if per_host[x] > lr]
        out.append({"HOROVOD_RANK": str(r), "HOROVOD_LOCAL_RANK": str(lr),
                    "HOROVOD_LOCAL_SIZE": str(per_host[h]),
                    "HOROVOD_CROSS_RANK": str(with_lr.index(h)),
                    "HOROVOD_CROSS_SIZE": str(len(with_lr)), "HOROVOD_HOSTNAME": str(h)})
    return out


def route_address(peer):
    """This host's address on the route to `peer` (no packet is sent)."""
    family = socket.AF_INET6 if ":" in peer else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.connect((peer, 9))
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"
