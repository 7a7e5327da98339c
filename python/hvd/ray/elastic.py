"""hvd.ray.ElasticRayExecutor: elastic training on the nodes of a Ray
cluster, as horovod.ray's.

    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=8)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train_fn)   # the final workers' values, by rank

The elastic driver is hvdrun's (the generations, the blacklist, the
commits), run by hvd.run from this process.  Its workers start inside
Ray: run() places a holder actor on every alive node (hard node
affinity; the node's slots x cpus_per_slot CPUs, and GPUs with use_gpu,
so Ray accounts for what the workers use), and hvdrun reaches them
through the relay it runs as its ssh-command (hvd/runner/relay.py,
holder.py): no ssh between the nodes.  The discovery listing is the
holders that registered: a holder lost (its actor killed, its node gone)
is a host lost to hvdrun, the actor Ray restarts or a node that joins
(a holder is started there) a host added, up to max_np.

create_settings(use_ssh=True) is the earlier route: Ray's alive nodes as
the listing (ray_hosts), the workers started over ssh beside Ray.
"""
from types import SimpleNamespace

from hvd.runner.discovery import run_discovered

__all__ = ["ElasticRayExecutor", "ray_hosts"]


def _node_slots(node, cpus_per_slot, gpus_per_slot):
    res = node.get("Resources") or {}
    slots = int(res.get("CPU", 0) // cpus_per_slot) if cpus_per_slot else None
    if gpus_per_slot:
        gpu_slots = int(res.get("GPU", 0) // gpus_per_slot)
        slots = gpu_slots if slots is None else min(slots, gpu_slots)
    return slots or 0


def ray_hosts(cpus_per_slot=1, gpus_per_slot=None):
    """[(address, slots)] of Ray's alive nodes, this driver's node first,
    then by address (hvdrun numbers ranks host by host, in this order)."""
    import ray

    me = ray.util.get_node_ip_address()
    hosts = [(node["NodeManagerAddress"], _node_slots(node, cpus_per_slot, gpus_per_slot))
             for node in ray.nodes() if node.get("Alive")]
    return sorted(hosts, key=lambda h: (h[0] != me, h[0]))


class HvdHolder:
    """A Ray actor holding a node for an elastic job: its holder (hvd/
    runner/holder.py) serves hvdrun's relay in a thread while the actor
    lives.  Ray restarts it where it died (max_restarts), and the restart
    registers again."""

    def __init__(self, key, addrs, port, slots):
        import threading

        from hvd.runner.holder import Holder

        self._holder = Holder(key, addrs, port, slots)
        threading.Thread(target=self._holder.serve, name="hvd-holder", daemon=True).start()

    def host(self):
        return self._holder.host


class _RayHolders:
    """One HvdHolder per alive Ray node with slots, pinned to it."""

    def __init__(self, registry, cpus_per_slot, gpus_per_slot):
        import ray

        self._registry = registry
        self._cpus, self._gpus = cpus_per_slot, gpus_per_slot
        self._actor_cls = ray.remote(max_restarts=-1, max_task_retries=0)(HvdHolder)
        self._actors = {}  # node id -> actor
        self.expected = 0  # the slots of the nodes holders were started on

    def refresh(self):
        """Starts a holder on each alive node that has none yet."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        for node in ray.nodes():
            slots = _node_slots(node, self._cpus, self._gpus)
            if not node.get("Alive") or slots < 1 or node["NodeID"] in self._actors:
                continue
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            opts = dict(num_cpus=slots * (self._cpus or 0), scheduling_strategy=strategy)
            if self._gpus:
                opts["num_gpus"] = slots * self._gpus
            reg = self._registry
            self._actors[node["NodeID"]] = self._actor_cls.options(**opts).remote(
                reg.key, reg.addrs(), reg.port, slots)
            self.expected += slots

    def close(self):
        import ray

        for actor in self._actors.values():
            ray.kill(actor, no_restart=True)
        self._actors.clear()


class ElasticRayExecutor:
    """Runs a function as the workers of an elastic hvd job on the nodes
    Ray has alive."""

    @staticmethod
    def create_settings(min_np=1, max_np=None, reset_limit=None, elastic_timeout=600,
                        timeout_s=30, ssh_identity_file=None, nics=None, cooldown_range=None,
                        verbose=None, prefix_output_with_timestamp=False, *,
                        discovery_interval=1.0, host_discovery_script=None, use_ssh=False):
        """Settings as horovod.ray's: min_np/max_np bound the workers,
        elastic_timeout how long to wait for min_np of them, timeout_s
        hvd.init()'s and the holders' start (HOROVOD_START_TIMEOUT),
        reset_limit how often the job may re-form, cooldown_range a lost
        host's blacklist time; nics the interfaces the workers use.
        discovery_interval: how often Ray is asked for its nodes;
        host_discovery_script: the script override_discovery=False uses.
        use_ssh: start the workers over ssh beside Ray instead of in
        holder actors (ssh_identity_file is then hvdrun's ssh key).
        prefix_output_with_timestamp is accepted and changes nothing."""
        if min_np is None or int(min_np) < 1:
            raise ValueError("ElasticRayExecutor: min_np must be at least 1, not %r" % (min_np,))
        if max_np is not None and int(max_np) < int(min_np):
            raise ValueError("ElasticRayExecutor: max_np %s is below min_np %s" % (max_np,
                                                                                  min_np))
        return SimpleNamespace(min_np=int(min_np), max_np=max_np, reset_limit=reset_limit,
                               elastic_timeout=elastic_timeout, timeout_s=timeout_s,
                               ssh_identity_file=ssh_identity_file,
                               nics=set(nics) if nics else None, cooldown_range=cooldown_range,
                               verbose=verbose, discovery_interval=discovery_interval,
                               host_discovery_script=host_discovery_script,
                               use_ssh=bool(use_ssh))

    def __init__(self, settings, use_gpu=False, cpus_per_slot=1, gpus_per_slot=None,
                 env_vars=None, override_discovery=True):
        if not override_discovery and not settings.host_discovery_script:
            raise ValueError("ElasticRayExecutor: override_discovery=False needs "
                             "create_settings(host_discovery_script=...)")
        self.settings = settings
        self.cpus_per_slot = cpus_per_slot
        self.gpus_per_slot = (gpus_per_slot or 1) if use_gpu else None
        self.env_vars = dict(env_vars or {})
        self.override_discovery = override_discovery
        self._started = False

    def start(self):
        """Connects to Ray (ray.init() when not yet); the workers start
        with run()."""
        import ray

        if not ray.is_initialized():
            ray.init()
        self._started = True

    def run(self, worker_fn, callbacks=None, args=(), kwargs=None):
        """worker_fn(*args, **kwargs) on every worker of the elastic job
        (it calls hvd.init() and trains under hvd.elastic.run); returns
        the values of the workers that finished, by their final rank.
        callbacks are accepted for Horovod's signature and not called: the
        workers' output comes to this process's stdout/stderr, prefixed
        with their rank as hvdrun prefixes it."""
        import hvd.runner

        if not self._started:
            raise RuntimeError("ElasticRayExecutor: start() first")
        s = self.settings
        opt = dict(min_np=s.min_np, max_np=s.max_np, reset_limit=s.reset_limit,
                   elastic_timeout=s.elastic_timeout, start_timeout=s.timeout_s,
                   network_interfaces=sorted(s.nics) if s.nics else None,
                   cooldown_range=s.cooldown_range, verbose=s.verbose, env=self.env_vars)
        if not self.override_discovery:
            return hvd.runner.run(worker_fn, args, kwargs, np=s.min_np,
                                  host_discovery_script=s.host_discovery_script,
                                  ssh_identity_file=s.ssh_identity_file, **opt)
        if s.use_ssh:
            return self._run_over_ssh(worker_fn, args, kwargs, opt)
        return self._run_in_holders(worker_fn, args, kwargs, opt)

    def _first_np(self, slots):
        """The first job takes every slot there is now, up to max_np
        (hvdrun grows a job only when hosts come, not into slots it had)."""
        s = self.settings
        return max(s.min_np, min(slots, s.max_np or slots))

    def _run_in_holders(self, worker_fn, args, kwargs, opt):
        import ray

        from hvd.runner.registry import Registry, run_held

        s = self.settings
        with Registry(ray.util.get_node_ip_address()) as reg:
            holders = _RayHolders(reg, self.cpus_per_slot, self.gpus_per_slot)
            try:
                holders.refresh()
                wait = min(holders.expected, s.max_np or holders.expected)
                return run_held(worker_fn, args, kwargs, reg, self._first_np, wait,
                                keep_holders=holders.refresh, interval=s.discovery_interval,
                                **opt)
            finally:
                holders.close()

    def _run_over_ssh(self, worker_fn, args, kwargs, opt):
        s = self.settings
        return run_discovered(worker_fn, args, kwargs,
                              lambda: ray_hosts(self.cpus_per_slot, self.gpus_per_slot),
                              self._first_np, s.discovery_interval,
                              ssh_identity_file=s.ssh_identity_file, **opt)
