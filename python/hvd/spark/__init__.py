"""hvd.spark: hvd jobs whose ranks are Spark tasks, as horovod.spark's.

    results = hvd.spark.run(train_fn, args=(...), num_proc=8)   # values by rank

run() submits one barrier stage of num_proc tasks (Spark's scheduler
places them; a barrier stage starts all of them at once or none).  Each
task numbers itself from the stage's task list (ranks of one host
adjacent, hosts in the order Spark lists them), takes hvdrun's variables
and calls fn; its hvd.init() meets at the rendezvous this driver serves
(the server hvdrun runs, hvd._C.rdzv_host).  Ranks on one host talk
through shared memory, hosts over TCP.

The round's secret and the key of the channel errors come back on travel
inside the task's closure, which Spark ships as bytes and never logs or
shows: not in Spark's configuration, environment or job description.

A rank that raises makes run() raise its exception (a note names the rank
and host) at once: the stage is cancelled, so no task is left running.  A
task that dies without a word (its Python worker killed) fails the stage;
run() does not retry it (a retried task could not join the finished
round) and raises a RuntimeError saying so.

run_elastic() is elastic training on the Spark application's executors'
hosts, under hvdrun's elastic driver (see its docstring).
"""
import contextlib
import os
import socket
import threading
import time
import uuid

from hvd.runner import channel
from hvd.runner.rendezvous import Rendezvous, rank_env
from hvd.runner.results import Collector

__all__ = ["run", "run_elastic", "spark_hosts"]


def _driver_addr(sc):
    host = sc.getConf().get("spark.driver.host") or socket.gethostname()
    try:
        return socket.gethostbyname(host)
    except OSError:
        return "127.0.0.1"


def _placement(infos, partition):
    """(rank, per-rank env) of task `partition` of a stage whose tasks run
    at infos[i].address ("host:port"), ranks of a host adjacent."""
    hosts = [i.address.rsplit(":", 1)[0] for i in infos]
    order = list(dict.fromkeys(hosts))
    ranked = sorted(range(len(hosts)), key=lambda p: (order.index(hosts[p]), p))
    rank = ranked.index(partition)
    return rank, rank_env([hosts[p] for p in ranked])[rank]


@contextlib.contextmanager
def _environ(*overlays):
    """os.environ with the overlays while the rank runs, as it was after:
    Spark keeps a task's Python for later tasks (spark.python.worker.reuse),
    and one run's variables (its place, its secret, env) must not reach
    the next run's ranks."""
    saved = dict(os.environ)
    try:
        for o in overlays:
            os.environ.update(o)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _task_fn(fn, args, kwargs, job_env, port, key, addrs):
    """The function each barrier task runs (Spark pickles it whole)."""

    def task(_):
        from pyspark import BarrierTaskContext

        from hvd.runner import channel as ch
        from hvd.runner.task import call

        ctx = BarrierTaskContext.get()
        if ctx.attemptNumber() > 0:
            raise RuntimeError("hvd.spark.run: a task of this job failed before and Spark "
                               "retried the stage; run() does not retry (use run_elastic)")
        rank, place = _placement(ctx.getTaskInfos(), ctx.partitionId())
        sent = []

        def send(message):
            if message[0] == "err":
                ch.request(addrs, port, key, message)
            sent.append(message)

        import cloudpickle

        with _environ(job_env, place):
            call(cloudpickle.dumps((fn, args, kwargs)), rank, send)
        kind, _, _, value = sent[0]
        if kind == "err":
            raise RuntimeError("hvd.spark.run: rank %d failed: %s: %s" % (rank, value[1],
                                                                          value[2]))
        yield rank, value

    return task


@contextlib.contextmanager
def _tasks_python(sc):
    """While the job's stages are made: their tasks' Python is the user's
    PYSPARK_PYTHON (or spark.pyspark.python) where set, else this driver's
    interpreter.  Spark's own default is whatever `python3` the executor's
    PATH finds, not the venv the driver runs from (where hvd, cloudpickle
    and the user's framework are); Horovod starts its ranks with the
    driver's sys.executable too."""
    import sys

    saved = sc.pythonExec
    if not (os.environ.get("PYSPARK_PYTHON") or sc.getConf().get("spark.pyspark.python", None)):
        sc.pythonExec = sys.executable
    try:
        yield
    finally:
        sc.pythonExec = saved


def _job_env(rdzv, env, start_timeout, nics):
    e = {str(k): str(v) for k, v in (env or {}).items()}
    e.update(rdzv.env())
    e["HOROVOD_START_TIMEOUT"] = str(int(start_timeout))
    if nics:
        e["HOROVOD_GLOO_IFACE"] = nics if isinstance(nics, str) else ",".join(sorted(nics))
    return e


def run(fn, args=(), kwargs={}, num_proc=None, start_timeout=None, env=None, stdout=None,
        stderr=None, verbose=1, nics=None, prefix_output_with_timestamp=False):
    """Runs fn(*args, **kwargs) as num_proc Spark tasks (default: the
    context's default parallelism) that form one hvd job; returns the
    values by rank.  start_timeout (HOROVOD_START_TIMEOUT, 600 s as in
    Horovod) bounds both Spark's wait for slots and hvd.init()'s.  The
    ranks' output goes where Spark puts the tasks' (the executors' logs);
    stdout, stderr and prefix_output_with_timestamp are accepted for
    Horovod's signature and change nothing.  The tasks run this
    interpreter (sys.executable) unless PYSPARK_PYTHON or
    spark.pyspark.python says otherwise."""
    import cloudpickle
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("hvd.spark.run: no active SparkContext; create a SparkSession first")
    num_proc = int(num_proc or sc.defaultParallelism)
    if start_timeout is None:
        start_timeout = int(os.environ.get("HOROVOD_SPARK_START_TIMEOUT", "600"))
    addr = _driver_addr(sc)
    key = channel.new_key()
    collector = Collector(b"")
    server = collector.serve(key, timeout=float(start_timeout))
    rdzv = Rendezvous(num_proc, addr)
    group = "hvd.spark.run-" + uuid.uuid4().hex
    task = _task_fn(fn, tuple(args), dict(kwargs or {}), _job_env(rdzv, env, start_timeout, nics),
                    server.port, key, [addr] + channel.local_addresses())
    if verbose >= 2:
        print("hvd.spark.run: %d tasks, rendezvous at %s:%d" % (num_proc, addr, rdzv.port))
    outcome = {}

    def collect():
        sc.setJobGroup(group, "hvd.spark.run: %d ranks" % num_proc, interruptOnCancel=True)
        try:
            rdd = sc.parallelize(range(num_proc), num_proc).barrier().mapPartitions(task)
            outcome["values"] = rdd.collect()
        except BaseException as e:  # noqa: B902 (handed to the caller's thread)
            outcome["error"] = e

    worker = threading.Thread(target=collect, name=group, daemon=True)
    try:
        with _tasks_python(sc):
            worker.start()
            while worker.is_alive():
                worker.join(0.2)
                if collector.errors:  # a rank raised: stop the rest at once
                    sc.cancelJobGroup(group)
                    worker.join()
    finally:
        rdzv.stop(0)
        server.close()
    collector.raise_first_error(num_proc)
    if "error" in outcome:
        raise RuntimeError("hvd.spark.run: the Spark job failed: %s"
                           % _spark_summary(outcome["error"])) from outcome["error"]
    values = dict(outcome["values"])
    return [cloudpickle.loads(values[r]) for r in range(num_proc)]


def _spark_summary(error):
    """The first lines of what Spark said, without its JVM stack."""
    text = str(error)
    lines = [line for line in text.splitlines() if line.strip()
             and not line.lstrip().startswith("at ")]
    return "\n".join(lines[:6])


def spark_hosts(sc):
    """[(host, slots)] of the Spark application's live executors: each
    executor's cores over spark.task.cpus, summed by host, in the order
    Spark lists them.  With a local master the driver is the executor."""
    if sc.master.startswith("local"):
        return [("localhost", sc.defaultParallelism)]
    cpus = max(1, int(sc.getConf().get("spark.task.cpus", "1")))
    executors = sc._jsc.sc().statusStore().executorList(True)
    slots = {}
    for i in range(executors.size()):
        e = executors.apply(i)
        if e.id() == "driver":
            continue
        host = e.hostPort().rsplit(":", 1)[0].strip("[]")
        slots[host] = slots.get(host, 0) + int(e.totalCores()) // cpus
    return list(slots.items())


def _holder_task(key, addrs, port):
    """The function each task of the holders' job runs (Spark pickles it
    whole, key included): a holder of one slot until the job ends."""

    def task(_):
        from hvd.runner.holder import Holder

        Holder(key, addrs, port, 1).serve()
        return iter(())

    return task


class _SparkHolders:
    """A background Spark job of n tasks, each a holder of one slot
    (spark.task.cpus cores): Spark's scheduler places them, tasks beyond
    the free slots wait for one, and a task that fails is retried
    (spark.task.maxFailures), which registers again."""

    def __init__(self, sc, registry, n):
        self._sc, self._n, self._registry = sc, n, registry
        self._group = "hvd.spark.run_elastic-" + uuid.uuid4().hex
        self._task = _holder_task(registry.key, registry.addrs(), registry.port)
        self.error = None
        self._thread = threading.Thread(target=self._job, name=self._group, daemon=True)
        self._thread.start()

    def _job(self):
        sc = self._sc
        sc.setJobGroup(self._group, "hvd.spark.run_elastic: %d holders of the workers"
                       % self._n, interruptOnCancel=True)
        try:
            sc.parallelize(range(self._n), self._n).mapPartitions(self._task).collect()
        except BaseException as e:  # noqa: B902 (said by the caller when it matters)
            self.error = e

    def close(self):
        """Ends the job: its holders end once the registry is closed;
        tasks still waiting for a slot are cancelled."""
        self._registry.close()
        deadline = time.monotonic() + 60
        while self._thread.is_alive() and time.monotonic() < deadline:
            self._sc.cancelJobGroup(self._group)  # again: the job may not be there yet
            self._thread.join(1.0)


def run_elastic(fn, args=(), kwargs={}, num_proc=None, min_np=None, max_np=None,
                start_timeout=None, elastic_timeout=None, reset_limit=None, env=None,
                stdout=None, stderr=None, verbose=1, nics=None,
                prefix_output_with_timestamp=False, *, use_ssh=False):
    """Runs fn(*args, **kwargs) as an elastic hvd job on the Spark
    application's executors; returns the values of the workers that
    finished, by their final rank.

    The elastic driver is hvdrun's, run by hvd.run from this process.
    Its workers start inside Spark tasks: a background Spark job of
    max_np tasks, each holding one slot (spark.task.cpus cores), and
    hvdrun reaches them through the relay it runs as its ssh-command
    (hvd/runner/relay.py, holder.py): no ssh between the hosts.  Its
    discovery listing is the hosts of the tasks that registered, with one
    slot per task: a task killed is a slot (its host, when it was the
    last) lost to hvdrun, its retry a slot added.  num_proc (default the
    context's default parallelism) is the first job's size, min_np and
    max_np (default num_proc) its bounds; start_timeout
    (HOROVOD_SPARK_START_TIMEOUT, 600 s) bounds the wait for the tasks
    and hvd.init()'s, elastic_timeout (HOROVOD_ELASTIC_TIMEOUT, 600 s)
    the wait for min_np workers.  The workers' output goes to stdout and
    stderr (default this process's), prefixed with their rank.  The
    job's key travels in the tasks' closure, as run()'s secret does.
    use_ssh=True: the earlier route, the live executors' hosts as the
    listing (spark_hosts) and the workers started there over ssh."""
    import sys

    from pyspark import SparkContext

    from hvd.runner.discovery import run_discovered
    from hvd.runner.registry import Registry, run_held

    sc = SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("hvd.spark.run_elastic: no active SparkContext; create a "
                           "SparkSession first")
    num_proc = int(num_proc or sc.defaultParallelism)
    min_np, max_np = int(min_np or num_proc), int(max_np or num_proc)
    if not min_np <= num_proc <= max_np:
        raise ValueError("hvd.spark.run_elastic: needs min_np <= num_proc <= max_np, not "
                         "%d <= %d <= %d" % (min_np, num_proc, max_np))
    if start_timeout is None:
        start_timeout = int(os.environ.get("HOROVOD_SPARK_START_TIMEOUT", "600"))
    opt = dict(min_np=min_np, max_np=max_np, start_timeout=start_timeout,
               elastic_timeout=elastic_timeout, reset_limit=reset_limit, env=env,
               network_interfaces=nics, verbose=verbose >= 2)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_tasks_python(sc))
        stack.enter_context(contextlib.redirect_stdout(stdout or sys.stdout))
        stack.enter_context(contextlib.redirect_stderr(stderr or sys.stderr))
        if use_ssh:
            return run_discovered(fn, args, kwargs, lambda: spark_hosts(sc),
                                  lambda _: num_proc, **opt)
        reg = stack.enter_context(Registry(_driver_addr(sc)))
        holders = _SparkHolders(sc, reg, max_np)
        stack.callback(holders.close)
        free = sum(slots for _, slots in spark_hosts(sc))
        try:
            return run_held(fn, args, kwargs, reg, lambda _: num_proc, min(num_proc, free),
                            **opt)
        except RuntimeError as e:
            if holders.error is not None:
                e.add_note("hvd.spark.run_elastic: the holders' Spark job failed: %s"
                           % _spark_summary(holders.error))
            raise
