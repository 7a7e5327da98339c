"""A rank of a function job: fetch the function from the driver, call it,
hand back its value or its exception.

    python -m hvd.runner.task

is what hvd.run's hvdrun starts on every rank.  The driver's port, its
addresses and the job's key come in the environment (HVD_RUN_PORT,
HVD_RUN_ADDRS, HVD_RUN_KEY); the key is removed from the environment
before the function runs, so nothing it starts inherits it.
"""
import os
import socket
import sys
import traceback

from hvd.runner import channel


def _rank_now(default):
    """The rank the function ended as: an elastic job renumbers its
    workers, so ask the engine while it is up; else what the launcher said."""
    try:
        from hvd import _C

        if _C.is_initialized():
            return int(_C.rank())
    except Exception:
        pass
    return default


def _describe(exc):
    import cloudpickle

    try:
        pickled = cloudpickle.dumps(exc)
        cloudpickle.loads(pickled)  # one that cannot come back goes as text
    except Exception:
        pickled = None
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return (pickled, "%s.%s" % (type(exc).__module__, type(exc).__qualname__), str(exc), tb)


def _sent_away(exc):
    """True when hvdrun's elastic driver turned this worker away (its host
    was removed from the job, or the job is over): hvdrun decided, it stops
    the worker and reports the job's outcome itself, so this is no failure
    of the function.  libhvd says so as "hvdrun refused the registration"
    (src/rdzv/rdzv.c) when the worker tries to join the next job."""
    from hvd.common.exceptions import HorovodInternalError

    return (os.environ.get("HOROVOD_ELASTIC_WORKER_ID") is not None
            and isinstance(exc, HorovodInternalError)
            and "hvdrun refused the registration" in str(exc))


def call(payload, rank, send):
    """Calls the cloudpickled (fn, args, kwargs) and sends ("ok", ...) or
    ("err", ...) through send(message).  Returns True when fn returned, or
    when an elastic worker was sent away (nothing is sent then)."""
    import cloudpickle

    host = socket.gethostname()
    try:
        fn, args, kwargs = cloudpickle.loads(payload)
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: B902 (SystemExit too: the driver must hear)
        if _sent_away(exc):
            return True
        send(("err", _rank_now(rank), host, _describe(exc)))
        return False
    send(("ok", _rank_now(rank), host, cloudpickle.dumps(value)))
    return True


def _addrs():
    addrs = []
    rdzv = os.environ.get("HOROVOD_GLOO_RENDEZVOUS_ADDR")
    if rdzv:
        addrs.append(rdzv)
    addrs += [a for a in os.environ.get("HVD_RUN_ADDRS", "").split(",") if a and a not in addrs]
    return addrs


def main():
    key_hex = os.environ.pop(channel.KEY_ENV, "")
    port = os.environ.get("HVD_RUN_PORT", "")
    if not key_hex or not port.isdigit():
        sys.exit("hvd.runner.task: started without HVD_RUN_KEY and HVD_RUN_PORT "
                 "(hvd.run starts it; it is not for people)")
    key, port, addrs = bytes.fromhex(key_hex), int(port), _addrs()
    rank = int(os.environ.get("HOROVOD_RANK") or os.environ.get("HOROVOD_ELASTIC_WORKER_ID")
               or 0)
    reply = channel.request(addrs, port, key, ("fn",))
    ok = call(reply[1], rank, lambda m: channel.request(addrs, port, key, m))
    sys.stdout.flush()
    sys.stderr.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
