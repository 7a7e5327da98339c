"""Elastic hvd.keras across emulated hosts, on each Keras 3 backend whose
binding was built (HVD_KERAS_BACKENDS, from ctest): hvdrun in h0 is the elastic
driver (--min-np/--max-np, a host discovery script), keras_elastic_worker.py
runs model.fit with KerasState and the elastic callbacks on h0..h2, and the
worker on h2 is killed (SIGKILL) mid-epoch.  The job must go on and finish
with every batch of every epoch applied once (the optimizer's iteration
count, which the commits carry, is EPOCHS x STEPS: the interrupted epoch
resumes at its committed batch, not at its start) and the same weights on
every rank."""
import os
import re
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LIMIT = 300  # seconds: TensorFlow's start is slow on a busy machine
BACKENDS = os.environ.get("HVD_KERAS_BACKENDS", "tensorflow").split()


@pytest.mark.parametrize("backend", BACKENDS)
def test_keras_worker_killed_mid_epoch(cluster, build_dir, tmp_path, backend):
    cluster.check()
    hosts = tmp_path / "hosts"
    hosts.write_text("h0:1\nh1:1\nh2:1\n")
    discover = tmp_path / "discover.sh"
    discover.write_text("#!/bin/sh\ncat %s\n" % hosts)
    discover.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"),
               KILL_MARKER=str(tmp_path / "killed"), TF_CPP_MIN_LOG_LEVEL="3",
               CUDA_VISIBLE_DEVICES="", HOROVOD_GLOO_TIMEOUT_SECONDS="20",
               KERAS_BACKEND=backend, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_cpu_multi_thread_eigen=false",
               HOROVOD_START_TIMEOUT="120")
    argv = [os.path.join(build_dir, "hvdrun"), "--ssh-command", "ssh -F %s" % cluster.ssh_config,
            "-np", "3", "--min-np", "2", "--max-np", "3",
            "--host-discovery-script", str(discover),
            os.environ.get("HVD_VENV_PYTHON", "python3"),
            os.path.join(HERE, "keras_elastic_worker.py")]
    proc = cluster.popen("h0", argv, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=LIMIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    log = out + err
    assert proc.returncode == 0, log[-6000:]
    assert os.path.exists(tmp_path / "killed"), log[-6000:]
    assert re.search(r"worker \d+ on h2 \(pid \d+\) was killed by signal 9", err), log[-6000:]
    starts = re.findall(r"start epoch (\d+) batch (\d+) size (\d+)", out)
    assert ("0", "0", "3") in starts, log[-6000:]
    # The survivors resume where they last committed: after batch 3 of
    # epoch 1, i.e. at its batch 4.
    assert any(e == "1" and b == "4" for e, b, _ in starts), log[-6000:]
    done = re.findall(r"done epoch (\d+) batch (\d+) iterations (\d+) size (\d+) same (\w+)", out)
    assert done, log[-6000:]
    size = done[0][3]
    assert len(done) == int(size), log[-6000:]
    assert set(done) == {("3", "0", "18", size, "True")}, log[-6000:]
    left = cluster.wait_no_pids(timeout=10)
    assert not left, "left running on the hosts: %s" % left
