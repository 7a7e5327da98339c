"""Host discovery for an elastic hvdrun driven from Python: an engine
(Ray, Spark) says which hosts are alive and how many slots each has;
hvdrun asks a discovery script.

    with Discovery(list_hosts, interval=1.0) as d:
        hvd.run(fn, np=2, min_np=2, host_discovery_script=d.script)

list_hosts() returns [(host, slots), ...].  A thread calls it every
`interval` seconds and replaces a file with its answer; the script hvdrun
runs prints that file.  hvdrun runs the script about once a second, and
the engine's Python API is in this process, not in the script's, so
the file is the meeting point: the script needs nothing but `cat`.
A listing that fails to come (the engine's API raised) leaves the last
one in place, so a hiccup of the engine does not drop every host.
"""
import os
import shutil
import tempfile
import threading


def listing_text(hosts):
    """hvdrun's discovery format: one "host:slots" a line (an IPv6
    address in brackets), hosts with no slot left out."""
    lines = []
    for host, slots in hosts:
        if int(slots) > 0:
            lines.append("%s:%d\n" % ("[%s]" % host if ":" in host else host, int(slots)))
    return "".join(lines)


class Discovery:
    """A discovery script whose listing a thread keeps current."""

    def __init__(self, list_hosts, interval=1.0):
        self._list_hosts = list_hosts
        self._interval = interval
        self._stop = threading.Event()
        self._dir = tempfile.mkdtemp(prefix="hvd-discovery-")  # 0700: ours alone
        self._file = os.path.join(self._dir, "hosts")
        self.script = os.path.join(self._dir, "discover.sh")
        self.errors = []  # the last few failures of list_hosts, for the caller's message
        self.slots = 0    # the slots of the last listing
        self.refresh()
        with open(self.script, "w") as f:
            f.write("#!/bin/sh\nexec cat '%s'\n" % self._file)
        os.chmod(self.script, 0o700)
        self._thread = threading.Thread(target=self._loop, name="hvd-discovery", daemon=True)
        self._thread.start()

    def refresh(self):
        """Asks the engine now and writes its answer (atomically: hvdrun
        never reads half a listing)."""
        try:
            hosts = self._list_hosts()
            text = listing_text(hosts)
            self.slots = sum(max(0, int(slots)) for _, slots in hosts)
        except Exception as e:  # noqa: B902 (keep the last listing; say why later)
            self.errors = (self.errors + ["%s: %s" % (type(e).__name__, e)])[-3:]
            if os.path.exists(self._file):
                return
            text = ""
        tmp = self._file + ".new"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self._file)

    def listing(self):
        with open(self._file) as f:
            return f.read()

    def _loop(self):
        while not self._stop.wait(self._interval):
            self.refresh()

    def close(self):
        self._stop.set()
        self._thread.join(self._interval + 30)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run_discovered(fn, args, kwargs, list_hosts, np_of, interval=1.0, **run_opts):
    """hvd.run's elastic job on the hosts list_hosts() gives, kept current
    every interval s; np_of(slots now) is the first job's size.  A failure
    says what asking the engine for its hosts raised, if it did."""
    import hvd.runner

    with Discovery(list_hosts, interval=interval) as d:
        try:
            return hvd.runner.run(fn, args, kwargs, np=np_of(d.slots),
                                  host_discovery_script=d.script, **run_opts)
        except RuntimeError as e:
            if d.errors:  # the engine's API failing explains missing hosts
                e.add_note("hvd: asking the engine for its hosts failed: %s"
                           % "; ".join(d.errors))
            raise
