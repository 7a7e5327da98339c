"""hvd.ray.ElasticRayExecutor on the Ray cluster of the 4 emulated hosts
(the driver on h0): a node's CPUs over cpus_per_slot give one slot per
node.

- use_ssh=True (Ray's alive nodes as the listing, the workers over ssh):
  the worker of rank 1 killed mid-job; the others re-form and finish.
- The default route from here on: the workers start inside a holder actor
  per node, through the relay hvdrun runs as its ssh-command; no ssh is
  run (an `ssh` first in PATH that only records being run is never run).
- min_np above what the nodes give: run() raises within elastic_timeout,
  saying so.
- h3's holder actor killed (the parent of hvdrun's agent there) while the
  workers wait at step 4: its worker dies with it, the others re-form and
  finish (Ray restarts the actor, which may bring h3 back).
- A Ray node lost mid-job (h3's raylet killed while the workers wait for
  it): its holder goes with it, hvdrun takes the host away as it takes a
  lost host, and the job finishes on h0..h2.

Each time the final workers' values come back by rank, agreeing on every
committed step (fn_checks.check_elastic).  Nothing of the jobs is left
on any host.  This file runs after test_ray_cluster.py: it leaves Ray
with a node fewer."""
import os
import sys
import textwrap
import uuid

from hvdcluster import run_driver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runner"))
import fn_checks  # noqa: E402

STEPS, DIE_AT = 12, 4

DRIVER = textwrap.dedent("""
    import json, os, shutil, signal, sys, tempfile, threading, time
    sys.path.insert(0, %(runner)r)
    import cloudpickle, ray, fn_checks
    cloudpickle.register_pickle_by_value(fn_checks)
    ray.init(address=%(address)r)
    from hvd.ray import ElasticRayExecutor
    from hvd.ray.elastic import ray_hosts

    out = {"hosts": ray_hosts(cpus_per_slot=2)}
    tmp = tempfile.mkdtemp(prefix="hvd-ray-elastic-")  # /tmp: the hosts share it
    marker = os.path.join(tmp, "died")

    def executor(min_np, max_np, elastic_timeout, use_ssh=False):
        settings = ElasticRayExecutor.create_settings(min_np=min_np, max_np=max_np,
                                                      elastic_timeout=elastic_timeout,
                                                      timeout_s=60, use_ssh=use_ssh)
        ex = ElasticRayExecutor(settings, cpus_per_slot=2, env_vars={%(token)r: "1"})
        ex.start()
        return ex

    out["values"] = executor(2, 4, 60, use_ssh=True).run(fn_checks.elastic_steps,
                                                         args=(%(steps)d, %(die_at)d, marker))
    out["died"] = int(open(marker).read())

    ssh_called = fn_checks.poisoned_ssh(tmp)
    os.environ["PATH"] = tmp + ":" + os.environ["PATH"]
    try:  # min_np above the nodes' slots: hvdrun waits elastic_timeout, then says why
        executor(5, 5, 5).run(fn_checks.elastic_steps, args=(1, 9, marker))
        out["short"] = "returned"
    except RuntimeError as e:
        out["short"] = str(e)

    def run_losing_h3(kill, name):  # kill() once the workers wait at step die_at
        hold = os.path.join(tmp, name)
        t = threading.Thread(target=lambda: out.update(
            {name: fn_checks.lose_host(hold, kill, %(token)r, %(h3)r)}))
        t.start()
        values = executor(2, 4, 60).run(fn_checks.elastic_steps,
                                        args=(%(steps)d, %(die_at)d, marker, hold))
        t.join()
        return values

    out["holder_values"] = run_losing_h3(lambda: fn_checks.kill_holder(%(token)r, %(h3)r),
                                         "holder")
    out["node_values"] = run_losing_h3(lambda: os.kill(%(raylet)d, signal.SIGKILL), "node")
    deadline = time.monotonic() + 120  # Ray's health check marks the node dead
    while %(h3)r in [h for h, _ in ray_hosts(2)] and time.monotonic() < deadline:
        time.sleep(0.5)
    out["node_gone"] = %(h3)r not in [h for h, _ in ray_hosts(2)]
    out["ssh_called"] = os.path.exists(ssh_called)
    shutil.rmtree(tmp)
    print("RESULT " + json.dumps(out))
    """)


def raylet_of(cluster, host):
    pid = cluster.pid_of(host, b"/raylet")
    assert pid, "no raylet running in %s" % host
    return pid


def test_elastic_ray_executor(ray_cluster, build_dir):
    cluster = ray_cluster
    cluster.check()
    address = cluster.cmd("ray", "address", check=True).stdout.strip()
    token = "HVD_TEST_ELASTIC_RAY_" + uuid.uuid4().hex
    script = DRIVER % dict(runner=os.path.dirname(os.path.abspath(fn_checks.__file__)),
                           address=address, token=token, steps=STEPS, die_at=DIE_AT,
                           raylet=raylet_of(cluster, "h3"), h3=cluster.addr(3))
    env = cluster.env(PYTHONPATH=os.path.join(build_dir, "python"), RAY_AUTH_MODE="disabled",
                      HOROVOD_GLOO_TIMEOUT_SECONDS="10")
    _, out = run_driver(cluster, script, env)
    assert sorted(out["hosts"]) == [[cluster.addr(i), 1] for i in range(4)], out["hosts"]
    fn_checks.check_elastic(out["values"], STEPS, DIE_AT, first_size=4)
    assert not fn_checks.pid_alive(out["died"])
    assert "fewer than --min-np 5" in out["short"], out["short"]
    # h3's holder lost: it was the Ray actor, and hvdrun's agent (the
    # worker's parent) ran under it; the job went on.
    holder, agent = out["holder"]
    assert "HvdHolder" in (holder or "") and "--agent" in (agent or ""), out
    fn_checks.check_elastic(out["holder_values"], STEPS, DIE_AT, first_size=4)
    assert out["node_gone"]
    fn_checks.check_elastic(out["node_values"], STEPS, DIE_AT, first_size=4)
    assert sorted(v["host"] for v in out["node_values"]) == ["h0", "h1", "h2"], out
    assert not out["ssh_called"], "the jobs without ssh ran ssh"
    assert fn_checks.procs_left(token) == []  # the workers, hvdrun's agents
