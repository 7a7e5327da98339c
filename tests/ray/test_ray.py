"""hvd.ray.RayExecutor on a local Ray (ray.init with 4 CPUs, started once
for the file): ranks as actors, values by rank, collectives exact, the
executable object, run_remote, a failing or killed rank (its exception
names it; every actor is gone), and the round's secret nowhere in Ray's
logs; ElasticRayExecutor on the one node (its slots, a job of them,
argument errors).  Runs under the venv's python (ray and torch from scripts/venv.sh)."""
import glob
import os
import sys
import time

import cloudpickle
import pytest

ray = pytest.importorskip("ray")  # the venv has it; ctest runs this only there
from hvd.ray import ElasticRayExecutor, RayExecutor  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runner"))
import fn_checks  # noqa: E402

# The actors cannot import this file: its functions travel by value (Ray
# pickles with its own copy of cloudpickle).
for _m in (sys.modules[__name__], fn_checks):
    cloudpickle.register_pickle_by_value(_m)
    ray.cloudpickle.register_pickle_by_value(_m)

NCPUS = 4


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=NCPUS, include_dashboard=False,
             _temp_dir=str(tmp_path_factory.mktemp("ray")))
    try:
        yield ray
    finally:
        ray.shutdown()


def test_run_collectives_by_rank_twice(local_ray):
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=NCPUS)
    ex.start(extra_env_vars={"HVD_TEST_VALUE": "x"})
    try:
        for scale in (2.0, 3.0):  # a second round on the same actors
            assert ex.run(fn_checks.collectives, args=(scale,)) == fn_checks.expected(
                NCPUS, scale, "x")
    finally:
        ex.shutdown()


class _Model:
    def __init__(self, base):
        self.base = base

    def rank_plus_base(self):
        from hvd import _C
        _C.init()
        value = _C.rank() + self.base
        _C.shutdown()
        return value


def test_executable_run_remote_and_hosts(local_ray):
    ex = RayExecutor(RayExecutor.create_settings(), num_hosts=1, num_workers_per_host=2)
    ex.start(executable_cls=_Model, executable_args=(100,))
    try:
        assert ex.execute(lambda m: m.rank_plus_base()) == [100, 101]
        assert ex.execute_single(lambda m: m.base) == 100
        refs = ex.run_remote(lambda a: (os.environ["HOROVOD_RANK"], a), args=("y",))
        assert ray.get(refs) == [("0", "y"), ("1", "y")]
        secret = ex._rounds[-1].secret
        logs = glob.glob(os.path.join(ray._private.worker._global_node.get_session_dir_path(),
                                      "logs", "*"))
        assert logs
        for path in logs:
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    assert secret.encode() not in f.read(), path
    finally:
        ex.shutdown()


def _fail_on(rank, how):
    import signal

    from hvd import _C
    _C.init()
    if _C.rank() == rank:
        if how == "raise":
            raise KeyError("rank %d gives up" % rank)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(300)  # ended by the executor, not waited for


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_failing_rank_ends_the_job(local_ray, how):
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=60), num_workers=3)
    ex.start()
    pids = [p for _, _, p in ray.get([w.node.remote() for w in ex.workers])]
    t0 = time.monotonic()
    expected = KeyError if how == "raise" else ray.exceptions.RayActorError
    with pytest.raises(expected) as info:
        ex.run(_fail_on, args=(1, how))
    assert time.monotonic() - t0 < 200
    assert info.value.hvd_rank == 1
    assert "hvd.ray: raised by rank 1 of 3" in "".join(info.value.__notes__)
    assert ex.workers == []
    deadline = time.monotonic() + 60
    while any(fn_checks.pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [p for p in pids if fn_checks.pid_alive(p)] == []
    with pytest.raises(RuntimeError, match="start\\(\\) first"):
        ex.run(len)


def test_argument_errors():
    with pytest.raises(NotImplementedError, match="ElasticRayExecutor"):
        RayExecutor(None, num_workers=2, min_workers=1)
    with pytest.raises(ValueError, match="num_workers or num_hosts"):
        RayExecutor(None)
    with pytest.raises(ValueError, match="min_np must be at least 1"):
        ElasticRayExecutor.create_settings(min_np=0)
    with pytest.raises(ValueError, match="max_np 1 is below min_np 2"):
        ElasticRayExecutor.create_settings(min_np=2, max_np=1)
    with pytest.raises(ValueError, match="host_discovery_script"):
        ElasticRayExecutor(ElasticRayExecutor.create_settings(), override_discovery=False)
    with pytest.raises(RuntimeError, match="start\\(\\) first"):
        ElasticRayExecutor(ElasticRayExecutor.create_settings()).run(len)


def test_elastic_executor_on_the_local_node(local_ray):
    """The one node's CPUs over cpus_per_slot are the slots; hvdrun's
    elastic driver starts that many workers on it, inside the node's holder
    actor though it is this machine (hvdrun --ssh-this-host: the relay, no
    ssh).  tests/cluster_ray kills a worker and a node mid-job."""
    assert ElasticRayExecutor.__module__ == "hvd.ray.elastic"
    from hvd.ray.elastic import ray_hosts

    assert [s for _, s in ray_hosts(cpus_per_slot=2)] == [NCPUS // 2]
    ex = ElasticRayExecutor(ElasticRayExecutor.create_settings(min_np=1, max_np=4,
                                                               timeout_s=60),
                            cpus_per_slot=2)
    ex.start()
    got = ex.run(fn_checks.rank_and_starters)
    assert [g[:2] for g in got] == [(0, 2), (1, 2)], got
    for _, _, agent, holder in got:
        assert "--agent" in agent and "HvdHolder" in holder, got


def test_fashion_mnist_example_on_ray(local_ray, tmp_path):
    """What examples/torch/fashion_mnist_ray.py runs: the plain example's
    main() on 2 actors, to its usual accuracy (> 0.5 on this subset)."""
    example, argv = fn_checks.fashion_mnist_example(str(tmp_path))
    if example is None:
        pytest.skip("no Fashion-MNIST in %s" % fn_checks.FASHION)
    ray.cloudpickle.register_pickle_by_value(example)
    ex = RayExecutor(RayExecutor.create_settings(timeout_s=120), num_workers=2)
    ex.start(extra_env_vars={"OMP_NUM_THREADS": "1"})
    try:
        accuracy = ex.run(example.main, args=(argv,))
    finally:
        ex.shutdown()
    assert accuracy[0] == accuracy[1] and accuracy[0] > 0.5, accuracy
