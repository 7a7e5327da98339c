"""hvd.ray: hvd jobs whose ranks are Ray actors, as horovod.ray's.

    settings = RayExecutor.create_settings(timeout_s=30)
    executor = RayExecutor(settings, num_workers=4, cpus_per_worker=1)
    executor.start()
    results = executor.run(train_fn, args=(...))   # values by rank
    executor.shutdown()

Ray places the actors (a placement group: packed for num_workers, one
bundle per host for num_hosts x num_workers_per_host).  The ranks are
numbered host by host (ranks of one node adjacent) and get hvdrun's
variables; each run/execute/run_remote call is one job round: this driver
serves hvd's rendezvous (the server hvdrun runs, hvd._C.rdzv_host) with a
fresh secret, which reaches the actors only as a method argument, and the
function's hvd.init() meets there.  Ranks on one node talk through shared
memory, nodes over TCP, as under hvdrun.

A failing rank makes run()/execute() raise its exception (a note names the
rank and node; an actor that died wins over its peers' "rank R lost")
after every actor of the executor is killed: the others may
be inside a collective with it, and nothing of a failed job is left; call
start() again to go on.  Elastic training on Ray is ElasticRayExecutor
(elastic.py); Horovod's elastic form of RayExecutor (min_workers,
max_workers) raises NotImplementedError and points there.
"""
import os
import socket
from types import SimpleNamespace

from hvd.ray.elastic import ElasticRayExecutor
from hvd.runner.rendezvous import Rendezvous, rank_env

__all__ = ["RayExecutor", "ElasticRayExecutor"]


class _Worker:
    """One rank: an actor holding the optional executable object."""

    def __init__(self):
        self.executable = None

    def node(self):
        import ray

        return ray.util.get_node_ip_address(), socket.gethostname(), os.getpid()

    def setup(self, env, executable_cls, args, kwargs):
        os.environ.update(env)
        if executable_cls is not None:
            self.executable = executable_cls(*args, **(kwargs or {}))

    def call(self, env, fn, args, kwargs, with_executable):
        os.environ.update(env)
        if with_executable:
            return fn(self.executable)
        return fn(*args, **(kwargs or {}))


class RayExecutor:
    """A group of Ray actors that run functions as the ranks of hvd jobs."""

    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """Settings as horovod.ray's: timeout_s bounds hvd.init()'s wait for
        the ranks (HOROVOD_START_TIMEOUT); ssh is not used (Ray starts the
        ranks); nics names the interfaces the ranks use (HOROVOD_GLOO_IFACE)."""
        return SimpleNamespace(timeout_s=timeout_s, ssh_identity_file=ssh_identity_file,
                               ssh_str=ssh_str,
                               placement_group_timeout_s=placement_group_timeout_s,
                               nics=set(nics) if nics else None)

    def __init__(self, settings, num_workers=None, num_hosts=None, num_workers_per_host=1,
                 cpus_per_worker=1, use_gpu=False, gpus_per_worker=None,
                 use_current_placement_group=True, min_workers=None, max_workers=None,
                 reset_limit=None, cooldown_range=None, elastic_timeout=1200,
                 override_discovery=True, cpus_per_slot=None, gpus_per_slot=None):
        if min_workers is not None or max_workers is not None:
            raise NotImplementedError("hvd.ray: RayExecutor(min_workers=..., max_workers=...) "
                                      "is not there; elastic training on Ray is "
                                      "hvd.ray.ElasticRayExecutor")
        if (num_workers is None) == (num_hosts is None):
            raise ValueError("RayExecutor: give num_workers or num_hosts (with "
                             "num_workers_per_host), one of them")
        self.settings = settings or self.create_settings()
        self.num_hosts = num_hosts
        self.per_host = num_workers_per_host if num_hosts else None
        self.num_workers = num_workers if num_workers else num_hosts * num_workers_per_host
        self.cpus = cpus_per_slot if cpus_per_slot is not None else cpus_per_worker
        gpus = gpus_per_slot if gpus_per_slot is not None else gpus_per_worker
        self.gpus = (gpus or 1) if use_gpu else 0
        self.use_current_placement_group = use_current_placement_group
        self.workers, self.hosts, self._pg, self._rounds = [], [], None, []
        self._env = []

    # ---- placement

    def _placement_group(self):
        from ray.util.placement_group import placement_group

        res = {"CPU": self.cpus}
        if self.gpus:
            res["GPU"] = self.gpus
        if self.num_hosts:
            per = {k: v * self.per_host for k, v in res.items()}
            pg = placement_group([per] * self.num_hosts, strategy="STRICT_SPREAD")
        else:
            pg = placement_group([res] * self.num_workers, strategy="PACK")
        import ray

        ready, _ = ray.wait([pg.ready()], timeout=self.settings.placement_group_timeout_s)
        if not ready:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(pg)
            raise TimeoutError("RayExecutor: Ray could not place %d workers (%s CPU%s each) "
                               "within %s s" % (self.num_workers, self.cpus,
                                                 ", %s GPU" % self.gpus if self.gpus else "",
                                                 self.settings.placement_group_timeout_s))
        return pg

    def _actor(self, index):
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = index // self.per_host if self.num_hosts else index
        strategy = PlacementGroupSchedulingStrategy(placement_group=self._pg,
                                                    placement_group_bundle_index=bundle)
        cls = ray.remote(num_cpus=self.cpus, num_gpus=self.gpus)(_Worker)
        return cls.options(scheduling_strategy=strategy).remote()

    def start(self, executable_cls=None, executable_args=None, executable_kwargs=None,
              extra_env_vars=None):
        """Places the actors, numbers them host by host and gives each its
        place (hvdrun's HOROVOD_* variables) and the executable object."""
        import ray

        if not ray.is_initialized():
            ray.init()
        self.shutdown()
        self._pg = self._placement_group()
        actors = [self._actor(i) for i in range(self.num_workers)]
        nodes = ray.get([a.node.remote() for a in actors])
        order = list(dict.fromkeys(n[0] for n in nodes))
        ranked = sorted(range(len(actors)), key=lambda i: (order.index(nodes[i][0]), i))
        self.workers = [actors[i] for i in ranked]
        self.hosts = [nodes[i][0] for i in ranked]
        common = {"HOROVOD_START_TIMEOUT": str(int(self.settings.timeout_s))}
        if self.settings.nics:
            common["HOROVOD_GLOO_IFACE"] = ",".join(sorted(self.settings.nics))
        common.update({str(k): str(v) for k, v in (extra_env_vars or {}).items()})
        self._env = [dict(common, **e) for e in rank_env(self.hosts)]
        ray.get([w.setup.remote(env, executable_cls, executable_args or (), executable_kwargs)
                 for w, env in zip(self.workers, self._env)])

    # ---- one job round per call

    def _round(self, kind, fn, args, kwargs):
        if not self.workers:
            raise RuntimeError("RayExecutor: start() first")
        self._stop_rounds(self.settings.timeout_s)
        import ray

        rdzv = Rendezvous(len(self.workers), ray.util.get_node_ip_address())
        self._rounds.append(rdzv)
        common = rdzv.env()
        return [w.call.remote(common, fn, args, kwargs, kind == "execute")
                for w in self.workers]

    def _stop_rounds(self, timeout):
        for r in self._rounds:
            r.stop(timeout)
        self._rounds = []

    def _gather(self, refs):
        """The values in rank order; on the first failure every actor is
        killed and the failing rank's exception raised."""
        import ray

        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                ray.get(done[0])
            except BaseException as exc:
                self._fail(refs, [(refs.index(done[0]), exc)] + self._failures(refs, pending))
        values = ray.get(refs)
        self._stop_rounds(self.settings.timeout_s)
        return values

    @staticmethod
    def _failures(refs, pending, wait_s=5.0):
        """The other ranks' failures within wait_s: when an actor dies, its
        peers' collectives fail too ("rank R lost"), often first."""
        import ray

        done, _ = ray.wait(pending, num_returns=len(pending), timeout=wait_s)
        out = []
        for ref in done:
            try:
                ray.get(ref)
            except BaseException as exc:
                out.append((refs.index(ref), exc))
        return out

    def _fail(self, refs, failures):
        """Kills the actors and raises the cause: a dead actor's error
        before its peers' reports of losing it, else the first."""
        import ray

        dead = [f for f in failures if isinstance(f[1], ray.exceptions.RayActorError)]
        rank, exc = (dead or failures)[0]
        host = self.hosts[rank] if rank < len(self.hosts) else "?"
        self.shutdown()
        note = "hvd.ray: raised by rank %d of %d on node %s" % (rank, len(refs), host)
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        exc.hvd_rank, exc.hvd_host = rank, host
        raise exc

    def run(self, fn, args=None, kwargs=None, callbacks=None):
        """fn(*args, **kwargs) on every rank; the values by rank."""
        return self._gather(self._round("run", fn, tuple(args or ()), kwargs))

    def execute(self, fn, callbacks=None):
        """fn(executable) on every rank; the values by rank."""
        return self._gather(self._round("execute", fn, (), None))

    def run_remote(self, fn, args=None, kwargs=None):
        """Like run, but returns the Ray object refs at once (rank order)."""
        return self._round("run", fn, tuple(args or ()), kwargs)

    def execute_single(self, fn):
        """fn(executable) on rank 0 alone (no job round: for set-up and
        reading results, not for collectives)."""
        import ray

        if not self.workers:
            raise RuntimeError("RayExecutor: start() first")
        return ray.get(self.workers[0].call.remote({}, fn, (), None, True))

    def shutdown(self):
        """Kills the actors and frees their placement group."""
        import ray

        self._stop_rounds(0)
        for w in self.workers:
            try:
                ray.kill(w)
            except Exception:
                pass
        self.workers, self.hosts, self._env = [], [], []
        if self._pg is not None:
            from ray.util.placement_group import remove_placement_group

            try:
                remove_placement_group(self._pg)
            except Exception:
                pass
            self._pg = None
