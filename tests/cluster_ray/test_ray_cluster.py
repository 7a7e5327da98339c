"""hvd.ray.RayExecutor on a Ray cluster of the 4 emulated hosts (head on
h0, the driver on h0 too, as launchers run inside a host): 4 hosts x 1
and x 2 actors, numbered host by host with the places hvdrun would give;
at x 2 the core collectives exact across hosts (hvd.torch); an actor killed mid-job makes
run() raise naming its rank, and every actor's process is gone."""
import os
import sys
import textwrap

from hvdcluster import run_driver

DRIVER = textwrap.dedent("""
    import json, os, signal, socket, sys, time
    sys.path.insert(0, %(runner)r)
    import ray, fn_checks
    for m in (fn_checks,):
        ray.cloudpickle.register_pickle_by_value(m)
    ray.init(address=%(address)r)
    from hvd.ray import RayExecutor

    def place():
        from hvd import _C
        _C.init()  # the job forms across the hosts: hvd's view of the place
        got = [_C.rank(), _C.local_rank(), _C.local_size(), _C.cross_rank(), _C.cross_size()]
        _C.barrier()
        _C.shutdown()
        return got + [socket.gethostname()]

    def die_on(rank):
        from hvd import _C
        _C.init()
        if _C.rank() == rank:
            os.kill(os.getpid(), signal.SIGKILL)
        _C.barrier()  # the others wait for the dead rank: hvd names it
        time.sleep(300)

    out = {}
    for per_host in (1, 2):
        ex = RayExecutor(RayExecutor.create_settings(timeout_s=90), num_hosts=4,
                         num_workers_per_host=per_host)
        ex.start(extra_env_vars={"HVD_TEST_VALUE": "c"})
        out["place%%d" %% per_host] = ex.run(place)
        if per_host == 2:  # torch in 8 actors: once, on the larger job
            out["coll"] = ex.run(fn_checks.collectives, args=(1.5,))
            pids = [p for _, _, p in ray.get([w.node.remote() for w in ex.workers])]
            try:
                ex.run(die_on, args=(5,))
                out["killed"] = "returned"
            except ray.exceptions.RayActorError as e:  # ActorDiedError, say
                out["killed"] = ["RayActorError", e.hvd_rank, "".join(e.__notes__)]
            deadline = time.monotonic() + 60
            alive = lambda: [p for p in pids if fn_checks.pid_alive(p)]
            while alive() and time.monotonic() < deadline:
                time.sleep(0.5)
            out["alive"] = alive()
            out["workers"] = len(ex.workers)
        ex.shutdown()
    print("RESULT " + json.dumps(out))
    """)


def test_ray_executor_across_hosts(ray_cluster, build_dir):
    cluster = ray_cluster
    cluster.check()
    address = cluster.cmd("ray", "address", check=True).stdout.strip()
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runner")
    script = DRIVER % dict(runner=os.path.abspath(runner), address=address)
    env = dict(os.environ, PYTHONPATH=os.path.join(build_dir, "python"),
               RAY_AUTH_MODE="disabled")
    _, out = run_driver(cluster, script, env)
    for per_host in (1, 2):
        n = 4 * per_host
        places = out["place%d" % per_host]
        hosts = [p[5] for p in places]
        # Ranks host by host: each host's ranks adjacent, every host used.
        assert sorted(set(hosts)) == ["h0", "h1", "h2", "h3"]
        assert [hosts[i] for i in range(0, n, per_host)] == list(dict.fromkeys(hosts))
        assert [p[:5] for p in places] == [
            [r, r % per_host, per_host, r // per_host, 4] for r in range(n)]
    n = 8
    coll = out["coll"]
    assert [c["rank"] for c in coll] == list(range(n))
    for c in coll:
        assert c["size"] == n and c["env"] == "c"
        assert c["summed"] == [1.5 * sum(range(n)), float(sum(range(1, n + 1)))]
        assert c["gathered"] == list(range(n)) and c["root"] == [n - 1 + 10]
    assert out["killed"][:2] == ["RayActorError", 5], out["killed"]
    assert "hvd.ray: raised by rank 5 of 8" in out["killed"][2]
    assert out["alive"] == [] and out["workers"] == 0
