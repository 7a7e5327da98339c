"""Elastic jobs on this machine, through hvdrun's elastic driver: hosts are
this machine under different names (localhost, 127.0.0.1, its host name:
each a host to hvdrun, no ssh), workers are tests/mpi/elastic_worker.c (and
a small hvd.torch script).  A worker killed (rank 0, two at once, inside a
commit, a sync or the re-forming of the job), a host removed and added
back through the discovery script, a host whose workers cannot start, too
few workers for too long, too many resets: each time the job goes on (or
stops, saying why), every job's ranks agree bit for bit, no committed step
is lost, and nothing is left running or in /dev/shm.  Across real
(emulated) hosts: tests/cluster/test_elastic.py."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elastic_check import Run, check, leftovers, shm_segments  # noqa: E402

STEPS = 150
HOSTS = ["localhost", "127.0.0.1", socket.gethostname()]


@pytest.fixture
def worker(test_program):
    return test_program("elastic_worker")


@pytest.fixture
def discovery(tmp_path):
    """A discovery script that prints the file it reads; the test edits
    the file."""
    listing = tmp_path / "hosts"
    script = tmp_path / "discover.sh"
    script.write_text("#!/bin/sh\ncat %s\n" % listing)
    script.chmod(0o755)

    class Discovery:
        path = str(script)

        def set(self, *hosts):
            tmp = listing.with_suffix(".new")
            tmp.write_text("".join(h + "\n" for h in hosts))
            os.replace(tmp, listing)

    return Discovery()


def elastic(hvdrun, worker, args, env=None, timeout=90):
    """Runs hvdrun with args (before the program) and the worker; a Run."""
    e = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="10", HOROVOD_START_TIMEOUT="20",
             ELASTIC_STEPS=str(STEPS))
    e.update(env or {})
    before = shm_segments()
    p = subprocess.run([hvdrun, *args, worker], env=e, capture_output=True, text=True,
                       timeout=timeout)
    alive, segments = leftovers(worker, before)
    assert not alive, "left running: %s\n%s" % (alive, p.stderr[-3000:])
    assert not segments, "left in /dev/shm: %s" % segments
    return Run(p.stdout, p.stderr, p.returncode)


def hosts(n, slots):
    return ",".join("%s:%d" % (h, slots) for h in HOSTS[:n])


def test_no_fault_one_job(hvdrun, worker):
    run = elastic(hvdrun, worker, ["-np", "4", "--min-np", "2", "-H", hosts(2, 2)])
    assert check(run, STEPS, final_size=4) == [4]


@pytest.mark.parametrize("faults", ["1:step:60", "0:step:60", "1:step:50,2:step:50"],
                         ids=["a-worker", "rank-0", "two-at-once"])
def test_killed_workers(hvdrun, worker, faults):
    """The survivors go back to the last commit and go on at once; new
    workers take the free slots and join at a commit."""
    run = elastic(hvdrun, worker, ["-np", "4", "--min-np", "2", "-H", hosts(2, 2)],
                  {"ELASTIC_FAULTS": faults})
    sizes = check(run, STEPS)
    # A new job after the loss; the new workers join it or the next one
    # (a worker of C starts faster than the survivors re-form).
    assert sizes[0] == 4 and len(sizes) >= 2 and min(sizes[1:]) >= 4 - faults.count(",") - 1
    assert run.stderr.count("was killed by signal 9") == faults.count(",") + 1, str(run)


@pytest.mark.parametrize("fault", ["commit:5", "sync:1", "reset:2"])
def test_killed_at_a_bad_moment(hvdrun, worker, fault):
    """Inside a commit, inside the first sync, inside the re-forming of
    the job (its reset callback: worker 1 dies first, then 2 in the
    re-forming)."""
    faults = "2:" + fault if fault != "reset:2" else "1:step:40,2:reset:2"
    run = elastic(hvdrun, worker, ["-np", "3", "--min-np", "1", "-H", hosts(3, 1)],
                  {"ELASTIC_FAULTS": faults})
    check(run, STEPS)
    assert "dying at %s" % fault in run.stdout, str(run)


def test_host_removed_and_added_back(hvdrun, worker, discovery):
    import threading
    import time
    discovery.set(HOSTS[0] + ":2", HOSTS[1] + ":2")
    env = {"ELASTIC_STEPS": "300"}

    def edit():
        time.sleep(2.0)
        discovery.set(HOSTS[0] + ":2")
        time.sleep(2.5)
        discovery.set(HOSTS[0] + ":2", HOSTS[1] + ":2")

    t = threading.Thread(target=edit)
    t.start()
    try:
        run = elastic(hvdrun, worker, ["-np", "4", "--min-np", "2", "--max-np", "4",
                                       "--host-discovery-script", discovery.path], env)
    finally:
        t.join()
    sizes = check(run, 300)
    assert sizes[0] == 4 and 2 in sizes and sizes[-1] == 4, str(run)
    assert "hosts removed" in run.stderr or "elastic: job 2 formed with 2" in run.stderr, str(run)


def test_host_whose_workers_cannot_start(hvdrun, worker):
    run = elastic(hvdrun, worker, ["-np", "3", "--min-np", "2", "-H", hosts(3, 1), "--verbose"],
                  {"ELASTIC_FAIL_HOST": HOSTS[2]})
    sizes = check(run, STEPS, final_size=2)
    assert sizes == [2], str(run)
    assert run.stderr.count("on %s" % HOSTS[2]) >= 2, str(run)  # tried twice, then blacklisted


def test_below_min_np_until_the_elastic_timeout(hvdrun, worker, discovery):
    discovery.set("localhost:1")  # one slot; more may come, for --elastic-timeout
    run = elastic(hvdrun, worker, ["-np", "2", "--min-np", "2", "--host-discovery-script",
                                   discovery.path, "--elastic-timeout", "2"])
    assert run.returncode != 0, str(run)
    assert ("elastic: stopping the job: fewer than --min-np 2 workers for longer than "
            "--elastic-timeout 2 s") in run.stderr, str(run)


def test_workers_failing_before_the_first_job_end_it_at_once(hvdrun, worker):
    # An import error, say: once the hosts left cannot meet --min-np, the
    # job ends with the worker's code, without waiting --elastic-timeout.
    run = elastic(hvdrun, worker, ["-np", "2", "--min-np", "2", "-H", hosts(2, 1)],
                  {"ELASTIC_FAIL_HOST": HOSTS[1]})
    assert run.returncode == 3, str(run)
    assert ("elastic: stopping the job: worker 2 failed before it joined a job (said above), "
            "and the hosts left have 1 slots, fewer than --min-np 2") in run.stderr, str(run)
    assert "worker 1 on %s (pid" % HOSTS[1] in run.stderr, str(run)


def test_reset_limit(hvdrun, worker):
    run = elastic(hvdrun, worker, ["-np", "3", "--min-np", "1", "-H", hosts(3, 1),
                                   "--reset-limit", "0"], {"ELASTIC_FAULTS": "1:step:40"})
    assert run.returncode != 0, str(run)
    assert "the job was re-formed 1 times; --reset-limit is 0" in run.stderr, str(run)


def test_discovery_script_that_fails(hvdrun, worker, tmp_path):
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/sh\necho 'h0:x'\n")
    script.chmod(0o755)
    p = subprocess.run([hvdrun, "-np", "2", "--host-discovery-script", str(script), worker],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p.stderr
    assert "the host discovery script '%s': line 1: host 'h0' has slots 'x'" % script in p.stderr


TORCH_WORKER = textwrap.dedent(r'''
    import os, signal, sys
    import torch
    torch.set_num_threads(1)
    import hvd.torch as hvd
    hvd.init()
    torch.manual_seed(7)
    model = torch.nn.Linear(16, 4)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model=model, optimizer=opt, step=0)
    me = os.environ["HOROVOD_ELASTIC_WORKER_ID"]

    @hvd.elastic.run
    def train(state):
        print("job size %d rank %d step %d" % (hvd.size(), hvd.rank(), state.step), flush=True)
        while state.step < 120:
            if me == "1" and state.step == 50:
                os.kill(os.getpid(), signal.SIGKILL)
            g = torch.Generator().manual_seed(state.step * 100 + hvd.rank())
            x = torch.randn(8, 16, generator=g)
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            state.step += 1
            if state.step % 10 == 0:
                state.commit()

    train(state)
    digest = hvd.allgather_object(sum(float(p.double().sum()) for p in model.parameters()))
    print("done steps %d size %d same %s" % (state.step, hvd.size(), len(set(digest)) == 1),
          flush=True)
''')


def test_torch_worker_killed(hvdrun, tmp_path, build_dir):
    if os.environ.get("HVD_SANITIZE"):
        pytest.skip("sanitizer builds cannot load into Debian's python3")
    script = tmp_path / "train.py"
    script.write_text(TORCH_WORKER)
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"),
               HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    p = subprocess.run([hvdrun, "-np", "3", "--min-np", "1", "-H", hosts(3, 1),
                        "/usr/bin/python3", str(script)], env=env, capture_output=True,
                       text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    done = [l for l in p.stdout.splitlines() if "done steps" in l]
    assert done and all(l.endswith("done steps 120 size %s same True" % done[0].split()[-3])
                        for l in done), out
    assert "was killed by signal 9" in p.stderr, out
