"""hvd.ray.ElasticRayExecutor: elastic training on the nodes of a Ray
cluster, as horovod.ray's.

    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=8)
    executor = ElasticRayExecutor(settings, cpus_per_slot=1)
    executor.start()
    results = executor.run(train_fn)   # the final workers' values, by rank

The elastic driver is hvdrun's (the generations, the blacklist, the
commits), run by hvd.run from this process: Ray says which nodes are alive
and how many slots each has (its CPUs over cpus_per_slot, and its GPUs
over gpus_per_slot with use_gpu), through a host discovery script whose
listing a thread here keeps current from ray.nodes().  hvdrun starts the
workers on those nodes as it starts any (ssh to the node's address, an
agent there).  A node Ray loses leaves the listing, and hvdrun treats it
as a lost host; a node that joins adds slots, up to max_np.
"""
from types import SimpleNamespace

from hvd.runner.discovery import Discovery

__all__ = ["ElasticRayExecutor", "ray_hosts"]


def ray_hosts(cpus_per_slot=1, gpus_per_slot=None):
    """[(address, slots)] of Ray's alive nodes, this driver's node first,
    then by address (hvdrun numbers ranks host by host, in this order)."""
    import ray

    me = ray.util.get_node_ip_address()
    hosts = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        res = node.get("Resources") or {}
        slots = int(res.get("CPU", 0) // cpus_per_slot) if cpus_per_slot else None
        if gpus_per_slot:
            gpu_slots = int(res.get("GPU", 0) // gpus_per_slot)
            slots = gpu_slots if slots is None else min(slots, gpu_slots)
        hosts.append((node["NodeManagerAddress"], slots or 0))
    return sorted(hosts, key=lambda h: (h[0] != me, h[0]))


class ElasticRayExecutor:
    """Runs a function as the workers of an elastic hvd job on the nodes
    Ray has alive."""

    @staticmethod
    def create_settings(min_np=1, max_np=None, reset_limit=None, elastic_timeout=600,
                        timeout_s=30, ssh_identity_file=None, nics=None, cooldown_range=None,
                        verbose=None, prefix_output_with_timestamp=False, *,
                        discovery_interval=1.0, host_discovery_script=None):
        """Settings as horovod.ray's: min_np/max_np bound the workers,
        elastic_timeout how long to wait for min_np of them, timeout_s
        hvd.init()'s and ssh's start (HOROVOD_START_TIMEOUT), reset_limit
        how often the job may re-form, cooldown_range a lost host's
        blacklist time; ssh_identity_file is hvdrun's ssh key, nics the
        interfaces the workers use.  discovery_interval: how often Ray is
        asked for its nodes; host_discovery_script: the script
        override_discovery=False uses.  prefix_output_with_timestamp is
        accepted and changes nothing."""
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
                               host_discovery_script=host_discovery_script)

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

    def _discovery(self):
        return Discovery(lambda: ray_hosts(self.cpus_per_slot, self.gpus_per_slot),
                         interval=self.settings.discovery_interval)

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
                   ssh_identity_file=s.ssh_identity_file,
                   network_interfaces=sorted(s.nics) if s.nics else None,
                   cooldown_range=s.cooldown_range, verbose=s.verbose, env=self.env_vars)
        if not self.override_discovery:
            return hvd.runner.run(worker_fn, args, kwargs, np=s.min_np,
                                  host_discovery_script=s.host_discovery_script, **opt)
        with self._discovery() as d:
            # The first job takes every slot Ray has now, up to max_np (hvdrun
            # grows a job only when hosts come, not into slots it had).
            np = max(s.min_np, min(d.slots, s.max_np or d.slots))
            try:
                return hvd.runner.run(worker_fn, args, kwargs, np=np,
                                      host_discovery_script=d.script, **opt)
            except RuntimeError as e:
                if d.errors:  # Ray's API failing explains an empty listing
                    e.add_note("ElasticRayExecutor: asking Ray for its nodes failed: %s"
                               % "; ".join(d.errors))
                raise
