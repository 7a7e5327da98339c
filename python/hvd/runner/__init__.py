"""hvd.run: run a Python function on every rank of a job, from Python.

    results = hvd.run(fn, args=(1,), np=4, hosts="a:2,b:2")

starts hvdrun (the same launcher, backends and rendezvous as on the
command line: this machine, ssh, srun, elastic with min_np/max_np) with
`python -m hvd.runner.task` as the program.  Each rank fetches the
cloudpickled (fn, args, kwargs) from this process over an authenticated
channel (channel.py), calls it and sends back what it returned or raised.
run() returns the values by rank, or raises the exception of the rank
that failed first; hvdrun has then already stopped every other rank.
"""
import os
import subprocess
import sys
import threading
import warnings

from hvd.runner import channel
from hvd.runner.results import Collector, RemoteTraceback  # noqa: F401

__all__ = ["run"]

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _hvdrun():
    from hvd._launch import program_path

    path = os.environ.get("HVD_HVDRUN")
    if path:
        if not os.access(path, os.X_OK):
            raise RuntimeError("hvd.run: HVD_HVDRUN names %s, not a program" % path)
        return path
    path = program_path("hvdrun")
    if not path:
        raise RuntimeError("hvd.run: cannot find hvdrun (not in the hvd package, beside a "
                           "build tree's python/, nor on PATH); set HVD_HVDRUN to its path")
    return path


def _flag(argv, name, value):
    if value is not None and value is not False:
        argv.append(name)
        if value is not True:
            argv.append(str(value))


def _command(opt, np):
    """hvdrun's command line for the options run() was given."""
    argv = [_hvdrun(), "-np", str(np)]
    hosts = opt["hosts"]
    if isinstance(hosts, (list, tuple)):
        hosts = ",".join(hosts)
    _flag(argv, "-H", hosts)
    _flag(argv, "--hostfile", opt["hostfile"])
    _flag(argv, "--ssh-port", opt["ssh_port"])
    _flag(argv, "--ssh-identity-file", opt["ssh_identity_file"])
    _flag(argv, "--ssh-command", opt["ssh_command"])
    _flag(argv, "--ssh-this-host", bool(opt["ssh_this_host"]))
    _flag(argv, "--start-timeout", opt["start_timeout"])
    _flag(argv, "--min-np", opt["min_np"])
    _flag(argv, "--max-np", opt["max_np"])
    _flag(argv, "--slots-per-host", opt["slots"])
    _flag(argv, "--reset-limit", opt["reset_limit"])
    _flag(argv, "--elastic-timeout", opt["elastic_timeout"])
    _flag(argv, "--host-discovery-script", opt["host_discovery_script"])
    if opt["cooldown_range"] is not None:
        argv += ["--blacklist-cooldown-range"] + [str(int(v)) for v in opt["cooldown_range"]]
    _flag(argv, "--output-filename", opt["output_filename"])
    _flag(argv, "--verbose", bool(opt["verbose"]))
    _flag(argv, "--launcher", opt["launcher"])
    nics = opt["nics"]
    if isinstance(nics, (list, tuple, set)):
        nics = ",".join(nics)
    _flag(argv, "--network-interface", nics)
    if opt["use_mpi"]:
        argv.append("--mpi")
        _flag(argv, "--mpi-args", opt["mpi_args"])
    return argv + [opt["executable"] or sys.executable, "-m", "hvd.runner.task"]


def _environment(env, key, port, nics):
    """The environment hvdrun passes to the ranks: this process's, what
    `env` adds, where this process listens, and hvd's package on the path."""
    e = dict(os.environ)
    e.update({str(k): str(v) for k, v in (env or {}).items()})
    path = e.get("PYTHONPATH", "")
    if _PACKAGE_PARENT not in path.split(os.pathsep):
        e["PYTHONPATH"] = _PACKAGE_PARENT + (os.pathsep + path if path else "")
    e[channel.KEY_ENV] = key.hex()
    e["HVD_RUN_PORT"] = str(port)
    e["HVD_RUN_ADDRS"] = ",".join(channel.local_addresses(nics))
    return e


def _pump(src, dst, tail):
    """Copies hvdrun's output to this process's sys.stdout/stderr (a
    notebook shows those, not file descriptors 1 and 2), keeping its tail."""
    for line in iter(src.readline, ""):
        tail.append(line)
        del tail[:-20]
        try:
            dst.write(line)
            dst.flush()
        except Exception:
            pass
    src.close()


def _start(argv, env):
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)
    tail = []
    pumps = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout, []), daemon=True),
             threading.Thread(target=_pump, args=(proc.stderr, sys.stderr, tail), daemon=True)]
    for t in pumps:
        t.start()
    return proc, pumps, tail


def _wait(proc, pumps):
    """Waits for hvdrun; on an interrupt (Ctrl-C in a notebook) stops it,
    which stops every rank, before passing the interrupt on."""
    try:
        proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise
    finally:
        for t in pumps:
            t.join(10)


def _deprecated(name, value, new_name, new_value, default):
    if value is None:
        return new_value
    if new_value not in (None, default) and new_value != value:
        raise ValueError("hvd.run: %s and %s say different things" % (name, new_name))
    return value


def run(fn, args=(), kwargs=None, np=1, min_np=None, max_np=None, hosts=None, hostfile=None,
        ssh_port=None, ssh_identity_file=None, network_interfaces=None, start_timeout=None,
        env=None, *, slots=None, reset_limit=None, cooldown_range=None,
        host_discovery_script=None, disable_cache=None, output_filename=None, verbose=None,
        use_gloo=None, use_mpi=None, mpi_args=None, executable=None, launcher=None,
        num_proc=None, min_num_proc=None, max_num_proc=None, network_interface=None,
        elastic_timeout=None, ssh_command=None, ssh_this_host=False):
    """Runs fn(*args, **kwargs) on every rank of a job and returns the
    list of its return values, indexed by rank.

    np ranks are placed on `hosts` ("host:slots,..." or a list of them) or
    `hostfile`, on this machine without either; min_np/max_np make the job
    elastic (hvdrun's --min-np/--max-np; elastic_timeout is its
    --elastic-timeout, how long to wait for min_np workers).  ssh_command
    is hvdrun's --ssh-command (hvd.spark and hvd.ray name their relay
    there, relay.py), and ssh_this_host its --ssh-this-host (this
    machine's ranks through it too, inside the holder here).  `env` adds
    to the ranks' environment (this process's passes through).  When a rank raises,
    run() raises that exception (its type and message; a note names the
    rank and host, and __cause__ holds the rank's traceback) once hvdrun
    has stopped the job.  Horovod's names (num_proc, min_num_proc,
    max_num_proc, network_interface) are accepted too; disable_cache and
    use_gloo are accepted and change nothing (hvd has no check cache, and
    its own collectives are the default).
    """
    np = _deprecated("num_proc", num_proc, "np", np, 1) or 1
    min_np = _deprecated("min_num_proc", min_num_proc, "min_np", min_np, None)
    max_np = _deprecated("max_num_proc", max_num_proc, "max_np", max_np, None)
    nics = _deprecated("network_interface", network_interface, "network_interfaces",
                       network_interfaces, None)
    if hosts is not None and hostfile is not None:
        raise ValueError("hvd.run: give hosts or hostfile, not both")
    if use_gloo and use_mpi:
        raise ValueError("hvd.run: use_gloo and use_mpi exclude each other")
    if not callable(fn):
        raise TypeError("hvd.run: fn must be callable, not %r" % type(fn).__name__)
    if disable_cache:
        warnings.warn("hvd.run: disable_cache changes nothing (hvdrun caches no checks)",
                      stacklevel=2)
    import cloudpickle

    payload = cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))
    opt = dict(hosts=hosts, hostfile=hostfile, ssh_port=ssh_port,
               ssh_identity_file=ssh_identity_file, ssh_command=ssh_command,
               ssh_this_host=ssh_this_host,
               start_timeout=start_timeout, min_np=min_np,
               max_np=max_np, slots=slots, reset_limit=reset_limit,
               elastic_timeout=elastic_timeout,
               cooldown_range=cooldown_range, host_discovery_script=host_discovery_script,
               output_filename=output_filename, verbose=verbose, launcher=launcher, nics=nics,
               use_mpi=use_mpi, mpi_args=mpi_args, executable=executable)
    elastic = min_np is not None or max_np is not None or host_discovery_script is not None
    nic_list = nics.split(",") if isinstance(nics, str) else nics
    key = channel.new_key()
    collector = Collector(payload)
    server = collector.serve(key, timeout=float(start_timeout or 60) + 60)
    try:
        proc, pumps, tail = _start(_command(opt, np),
                                   _environment(env, key, server.port, nic_list))
        _wait(proc, pumps)
    finally:
        server.close()
    collector.raise_first_error(None if elastic else np)
    if proc.returncode != 0:
        missing = sorted(set(range(np)) - collector.reported()) if not elastic else []
        raise RuntimeError("hvd.run: hvdrun exited with code %d%s; its last words:\n%s" % (
            proc.returncode,
            "; ranks %s did not return" % ", ".join(map(str, missing)) if missing else "",
            "".join(tail[-8:]).rstrip() or "(none)"))
    return collector.ordered(None if elastic else np)
