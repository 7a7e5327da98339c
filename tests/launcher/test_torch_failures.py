"""hvd.torch under failures, driven through hvdrun: a rank that exits or is
SIGKILLed mid-training turns into a HorovodInternalError naming the lost
rank on the survivors (never a hang), mismatched shapes raise on every
rank with the tensor's name, without a segfault, and SIGINT to a rank that
waits for a tensor nobody sends raises KeyboardInterrupt there at once and
the job stops."""
import os
import re
import signal
import subprocess
import textwrap
import time

import pytest

PY = "/usr/bin/python3"

SCRIPT = textwrap.dedent(r'''
    import os, signal, sys, time
    import torch
    torch.set_num_threads(1)
    import hvd.torch as hvd
    from hvd.common.exceptions import HorovodInternalError

    mode = sys.argv[1]
    hvd.init()
    rank = hvd.rank()
    if mode == "ctrl-c":
        # rank 0 waits for a tensor nobody else sends, until the test sends
        # it SIGINT; the others wait for one rank 0 never sends
        if rank == 0:
            print("rank 0: waiting, pid %d" % os.getpid(), flush=True)
            try:
                hvd.allreduce(torch.ones(3), name="never.sent")
            except KeyboardInterrupt:
                print("rank 0: KeyboardInterrupt at %.6f" % time.monotonic(), flush=True)
                raise
        hvd.allreduce(torch.ones(3), name="never.sent.either")
        sys.exit(0)
    if mode == "mismatch":
        # left uncaught on purpose: the traceback goes to stderr
        hvd.allreduce(torch.ones(rank + 1, 3), name="bad.shape.tensor")
        sys.exit(0)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    victim = hvd.size() - 1
    try:
        for step in range(100000):
            if rank == victim and step == 5:
                print("rank %d: going away (%s)" % (rank, mode), flush=True)
                if mode == "exit":
                    os._exit(1)
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            model(torch.randn(8, 32)).pow(2).mean().backward()
            opt.step()
            hvd.allreduce(torch.ones(4096), name="extra.%d" % step)
    except HorovodInternalError as e:
        print("rank %d: HorovodInternalError: %s" % (rank, e), flush=True)
        sys.exit(3)
    print("rank %d: finished without an error" % rank, flush=True)
''')


@pytest.fixture(scope="module")
def torch_env(build_dir, tmp_path_factory, python_extension):
    script = tmp_path_factory.mktemp("torch") / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"),
               HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    return str(script), env


def run(hvdrun, torch_env, np, mode, limit=120):
    script, env = torch_env
    return subprocess.run([hvdrun, "-np", str(np), PY, script, mode], env=env,
                          capture_output=True, text=True, timeout=limit)


def lines_of(text, stream, rank):
    prefix = "[%d]<%s>:" % (rank, stream)
    return [line[len(prefix):] for line in text.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("mode", ["exit", "kill"])
@pytest.mark.parametrize("np", [2, 3])
def test_lost_rank_mid_training_raises_on_survivors(hvdrun, torch_env, np, mode):
    p = run(hvdrun, torch_env, np, mode)
    out = p.stdout + p.stderr
    victim = np - 1
    assert p.returncode != 0, out
    for r in range(victim):
        errs = [l for l in lines_of(p.stdout, "stdout", r) if "HorovodInternalError" in l]
        assert errs, "rank %d saw no HorovodInternalError:\n%s" % (r, out)
        assert re.search(r"\brank %d\b" % victim, errs[0]), errs[0]
        assert not any("finished without an error" in l for l in lines_of(p.stdout, "stdout", r))
    assert "Segmentation fault" not in out and "SIGSEGV" not in out, out


@pytest.mark.parametrize("np", [2, 4])
def test_mismatched_shapes_every_rank_reports_the_tensor(hvdrun, torch_env, np):
    p = run(hvdrun, torch_env, np, "mismatch")
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    for r in range(np):
        err = "\n".join(lines_of(p.stderr, "stderr", r))
        assert "HorovodInternalError" in err, "rank %d:\n%s" % (r, out)
        assert "bad.shape.tensor" in err, "rank %d:\n%s" % (r, out)
    assert "Segmentation fault" not in out and "signal 11" not in out, out


def test_sigint_interrupts_a_waiting_rank_and_the_job_stops(hvdrun, torch_env):
    script, env = torch_env
    job = subprocess.Popen([hvdrun, "-np", "2", PY, script, "ctrl-c"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = []
        for line in job.stdout:
            seen.append(line)
            m = re.search(r"rank 0: waiting, pid (\d+)", line)
            if m:
                break
        assert m, "".join(seen)
        time.sleep(0.5)  # rank 0 is deep in its wait
        sent = time.monotonic()
        os.kill(int(m.group(1)), signal.SIGINT)
        rest, _ = job.communicate(timeout=30)
        ended = time.monotonic() - sent
    finally:
        job.kill()
    out = "".join(seen) + rest
    m = re.search(r"rank 0: KeyboardInterrupt at ([0-9.]+)", out)
    assert m, out
    latency = float(m.group(1)) - sent
    print("KeyboardInterrupt %.1f ms after SIGINT; the job ended after %.1f s"
          % (latency * 1e3, ended))
    assert latency < 1.0, out  # the design's bound is 100 ms; this machine is shared
    assert job.returncode != 0, out
    assert "Traceback" in out and "KeyboardInterrupt" in out, out
    assert "Segmentation fault" not in out and "signal 11" not in out, out
