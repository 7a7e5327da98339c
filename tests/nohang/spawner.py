"""What each rank does for test_leftovers.py: after hvd_init and an
allreduce (so its listener, accept thread, watch connections and peer
connections exist), starts a child the way a training script may start a
helper daemon, with every inheritable descriptor passed on (fork and exec,
close_fds=False), and prints what of hvd's the child holds:

    rank R child holds: [...]

(sockets, eventfds and hvd's /dev/shm segments among the child's open
descriptors).  Nothing of hvd's may survive exec: a port or segment that
a long-lived child held would outlive the job."""
import os
import subprocess

import torch

import hvd.torch as hvd


def held_by(pid):
    held = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:") or "eventfd" in target or "/dev/shm/hvd" in target:
            held.append("%s -> %s" % (fd, target))
    return held


hvd.init()
hvd.allreduce(torch.ones(1000), name="connect")
child = subprocess.Popen(["sleep", "60"], close_fds=False)
try:
    print("rank %d child holds: %s" % (hvd.rank(), held_by(child.pid)), flush=True)
finally:
    child.kill()
    child.wait()
hvd.shutdown()
