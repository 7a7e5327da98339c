"""Functions the launch-from-Python suites (tests/runner, tests/ray,
tests/spark) run on their ranks, and what to expect of them.  The ranks
cannot import this file: each suite registers it with cloudpickle (and
Ray's and Spark's copies) to travel by value, as a notebook's code does."""
import os
import time


def collectives(scale):
    """Rank r contributes [r * scale, r + 1]: sums, gathers and a broadcast
    every rank can compute alone, and what the rank sees of its job."""
    import torch
    import hvd.torch as ht

    ht.init()
    r, n = ht.rank(), ht.size()
    x = torch.tensor([r * scale, r + 1.0], dtype=torch.float64)
    summed = ht.allreduce(x, op=ht.Sum, name="sum").tolist()
    gathered = ht.allgather(torch.tensor([[r]]), name="gather").flatten().tolist()
    root = ht.broadcast(torch.tensor([r + 10]), root_rank=n - 1, name="bcast").tolist()
    out = dict(rank=r, size=n, local_rank=ht.local_rank(), summed=summed, gathered=gathered,
               root=root, env=os.environ.get("HVD_TEST_VALUE"))
    ht.shutdown()
    return out


def expected(n, scale, env):
    """collectives(scale)'s values on a job of n ranks on one host."""
    return [dict(rank=r, size=n, local_rank=r,
                 summed=[scale * sum(range(n)), float(sum(range(1, n + 1)))],
                 gathered=list(range(n)), root=[n - 1 + 10], env=env) for r in range(n)]


def pid_alive(pid):
    """True while pid runs (a zombie, or one reaped while we look, counts
    as gone).  The state follows the name's closing parenthesis: a name
    may hold spaces."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "torch")
FASHION = "/usr/share/datasets/fashion-mnist"


def fashion_mnist_example(data_dir):
    """examples/torch/fashion_mnist.py as a module (its main() is what the
    Spark and Ray versions run on their ranks) and the quick arguments the
    plain example's test uses, or None without Debian's data set."""
    import importlib
    import sys

    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        return None, None
    sys.path.insert(0, os.path.abspath(EXAMPLES))
    try:
        example = importlib.import_module("fashion_mnist")
    finally:
        sys.path.pop(0)
    return example, ["--epochs", "1", "--train-limit", "6000", "--test-limit", "1000",
                     "--lr", "0.05", "--batch-size", "32", "--data-dir", data_dir]


def elastic_steps(steps, die_at, marker, hold=None):
    """An elastic training loop (hvd.elastic.run, ObjectState, a commit
    every step): each step adds the job's size, summed by an allreduce of
    ones, to state.total and the size to state.sizes.  The worker of rank
    1 kills itself (SIGKILL) as step die_at begins, once: it writes its
    pid to `marker` first (in /tmp, which the emulated hosts share), and a
    worker that finds the marker does not die.  With `hold` (a path), the
    workers stop at step die_at instead until hvdrun announces a change of
    hosts (rank 0 creates `hold` first, for the test to take a host away
    then); at most 300 s.  Returns what the final workers agree on, and
    what each saw."""
    import signal
    import socket

    import torch
    import hvd.torch as ht

    ht.init()
    state = ht.elastic.ObjectState(step=0, total=0.0, sizes=())
    resets = []
    state.register_reset_callbacks([lambda: resets.append(ht.size())])

    @ht.elastic.run
    def train(state):
        while state.step < steps:
            if state.step == die_at and ht.rank() == 1 and not os.path.exists(marker):
                with open(marker, "w") as f:
                    f.write(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
            if state.step == die_at and hold and not os.path.exists(hold + ".seen"):
                _wait_for_host_update(hold, ht.rank() == 0)
            s = ht.allreduce(torch.ones(1, dtype=torch.float64), op=ht.Sum, name="ones")
            state.total += float(s[0])
            state.sizes = state.sizes + (ht.size(),)  # a new tuple: commit/restore copy
            state.step += 1
            state.commit()
        return dict(rank=ht.rank(), size=ht.size(), step=state.step, total=state.total,
                    sizes=list(state.sizes), resets=resets, host=socket.gethostname())

    return train(state)


def _wait_for_host_update(hold, first):
    """Until hvdrun announces a change of hosts, or the test says go
    (`hold`.go: a host whose workers died with it is no change the
    survivors are told of; they find out in their next collective)."""
    from hvd import _C

    stamp, deadline = _C.elastic_updates()[0], time.monotonic() + 300
    if first:
        open(hold, "w").close()
    while (_C.elastic_updates()[0] == stamp and not os.path.exists(hold + ".go")
           and time.monotonic() < deadline):
        time.sleep(0.1)
    if first:
        open(hold + ".seen", "w").close()  # once: a re-formed job goes on


def check_elastic(values, steps, die_at, first_size):
    """What elastic_steps' final workers must say: ranks 0..n-1 in order,
    one size n, every committed step there once, the total the sum of the
    sizes the allreduces saw, the first job whole until die_at, and a job
    re-formed after the kill (the survivors' reset callbacks ran)."""
    n = len(values)
    assert [v["rank"] for v in values] == list(range(n)), values
    assert n >= 1 and all(v["size"] == n for v in values), values
    ref = values[0]
    for v in values:
        assert (v["step"], v["total"], v["sizes"]) == (ref["step"], ref["total"],
                                                       ref["sizes"]), values
    assert ref["step"] == steps and len(ref["sizes"]) == steps, values
    assert ref["total"] == float(sum(ref["sizes"])), values
    assert ref["sizes"][:die_at] == [first_size] * die_at, values
    assert min(ref["sizes"][die_at:]) < first_size, values  # a job without the dead one
    assert any(v["resets"] for v in values), values


def procs_with(marker):
    """The processes whose environment holds `marker` (a job's variable):
    the emulated hosts share this machine's process table."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                pass
    return found


def procs_left(marker, timeout=30.0):
    """procs_with(marker) once they are gone or timeout s have passed."""
    import time

    deadline = time.monotonic() + timeout
    while procs_with(marker) and time.monotonic() < deadline:
        time.sleep(0.5)
    return procs_with(marker)


def _ppid(pid):
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _argv(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace").strip()


def rank_and_starters():
    """On a rank: (rank, size, its parent's argv, its grandparent's argv):
    for an elastic worker started through the relay, hvdrun's agent and
    the holder that started it."""
    from hvd import _C

    _C.init()
    agent = _ppid(os.getpid())
    return (_C.rank(), _C.size(), _argv(agent), _argv(_ppid(agent)))


def holder_of(marker, host):
    """What started the worker on `host` (its HOROVOD_HOSTNAME) of the
    job whose variable is `marker`: (the holder's pid, the holder's argv,
    the argv of the process between them, hvdrun's agent), or None."""
    for pid in procs_with(marker):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                if b"HOROVOD_HOSTNAME=" + host.encode() not in f.read().split(b"\0"):
                    continue
            agent = _ppid(pid)
            holder = _ppid(agent)
            return holder, _argv(holder), _argv(agent)
        except OSError:
            continue
    return None


def lose_host(hold, kill, marker, host, timeout=300):
    """For elastic_steps(hold=...): once its workers wait at step die_at,
    kill() (which takes `host`'s worker with it), and once that worker is
    gone, lets the others go on.  Returns what kill() did."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(hold) and time.monotonic() < deadline:
        time.sleep(0.1)
    did = kill()
    while holder_of(marker, host) and time.monotonic() < deadline:
        time.sleep(0.1)
    open(hold + ".go", "w").close()
    return did


def kill_holder(marker, host, timeout=60):
    """SIGKILLs the holder of the job's worker on `host`; returns the
    holder's and the agent's argv, (None, None) when none was found."""
    import signal

    deadline = time.monotonic() + timeout
    found = holder_of(marker, host)
    while not found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = holder_of(marker, host)
    if not found:
        return None, None
    os.kill(found[0], signal.SIGKILL)
    return found[1:]


def poisoned_ssh(directory):
    """A directory whose `ssh` only records that it was run (in
    directory/ssh-called) and fails: first in PATH, it proves a job
    started no ssh."""
    path = os.path.join(directory, "ssh")
    with open(path, "w") as f:
        f.write('#!/bin/sh\necho "$@" >> "%s-called"\nexit 255\n' % path)
    os.chmod(path, 0o700)
    return path + "-called"
