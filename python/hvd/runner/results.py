"""The driver's side of a function job: serves the pickled function to the
ranks over the channel, gathers what each rank's call returned or raised,
and turns them into a list by rank or the failing rank's exception.

hvd.run, hvd.spark and hvd.ray share it; only how the ranks are started
differs between them.
"""
import threading

from hvd.runner import channel


class RemoteTraceback(Exception):
    """The traceback of an exception raised on a rank, as text (set as the
    re-raised exception's __cause__, as concurrent.futures does)."""

    def __str__(self):
        return self.args[0]


class Collector:
    """One job's function and its results.  handle() answers the ranks:

    ("fn",)                                -> ("fn", cloudpickled (fn, args, kwargs))
    ("ok", rank, host, cloudpickled value)  -> ("ack",)
    ("err", rank, host, error)              -> ("ack",)

    where error is (cloudpickled exception or None, type name, message,
    traceback text).
    """

    def __init__(self, payload):
        self._payload = payload
        self._lock = threading.Lock()
        self.values = {}  # rank -> cloudpickled value
        self.errors = []  # (rank, host, error), in the order they came

    def handle(self, request):
        kind = request[0] if isinstance(request, tuple) and request else None
        if kind == "fn":
            return ("fn", self._payload)
        if kind in ("ok", "err") and len(request) == 4 and isinstance(request[1], int):
            with self._lock:
                if kind == "ok":
                    self.values[request[1]] = request[3]
                else:
                    self.errors.append(request[1:])
            return ("ack",)
        return ("error", "unknown request")

    def serve(self, key, timeout=60.0):
        """A channel.Server answering for this job."""
        return channel.Server(key, self.handle, timeout=timeout)

    def reported(self):
        with self._lock:
            return set(self.values) | {e[0] for e in self.errors}

    def raise_first_error(self, size=None):
        """Raises the exception of the rank that failed first, if any did."""
        with self._lock:
            if not self.errors:
                return
            rank, host, error = self.errors[0]
        raise rank_exception(rank, host, error, size)

    def ordered(self, ranks=None):
        """The values by rank: ranks 0..n-1 where ranks is n, else every
        rank that returned, in rank order.  Values are unpickled here."""
        import cloudpickle

        with self._lock:
            keys = range(ranks) if ranks is not None else sorted(self.values)
            missing = [r for r in keys if r not in self.values]
            if missing:
                raise RuntimeError("ranks %s returned no value" % _ranks_text(missing))
            return [cloudpickle.loads(self.values[r]) for r in keys]


def _ranks_text(ranks):
    return ", ".join(str(r) for r in sorted(ranks))


def rank_exception(rank, host, error, size=None):
    """The exception rank `rank` raised, rebuilt on the driver: its own type
    and message when it unpickles, a RuntimeError naming its type otherwise.
    A note names the rank and the host; __cause__ holds the rank's traceback."""
    import cloudpickle

    pickled, type_name, message, tb = error
    exc = None
    if pickled is not None:
        try:
            exc = cloudpickle.loads(pickled)
        except Exception:  # its class may not import here
            exc = None
    if not isinstance(exc, BaseException):
        exc = RuntimeError("%s: %s" % (type_name, message))
    where = "rank %d%s%s" % (rank, " of %d" % size if size else "",
                             " on host %s" % host if host else "")
    note = "hvd: raised by %s" % where
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    exc.hvd_rank = rank
    exc.hvd_host = host
    exc.__cause__ = RemoteTraceback("\n\n%s\n(%s)" % (tb.rstrip(), note))
    return exc
