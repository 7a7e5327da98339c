"""An emulated cluster of hosts for tests: the `cluster` fixture and its object.

The session-scoped ``cluster`` fixture brings up four hosts h0..h3 with
``cluster.sh up 4`` (network namespaces on one bridge, one sshd each) and
takes them down again at the end of the session, whether the tests passed or
not.  Tests reach the hosts through the object it yields::

    def test_something(cluster):
        cluster.check()                          # stop at once if not fenced off
        r = cluster.run('h0', ['hostname'], capture_output=True, text=True)
        assert r.stdout == 'h0\\n'
        r = cluster.run('h0', cluster.ssh_argv('h2', 'hostname'),
                        capture_output=True, text=True)

Launchers belong inside a host (``cluster.run('h0', [hvdrun, ...])``): the
root namespace has no route to the hosts.  The fixture fails, never skips,
when the machine cannot run a cluster (not root, no network namespaces, no
sshd), so a CI job that should run these tests cannot pass without them.

The session-scoped ``slurm`` fixture makes the same hosts a SLURM cluster
(``cluster.sh slurm up``: munged, slurmctld on h0, a slurmd per host) once,
for the tests that use it, and yields the cluster; srun, salloc and sbatch
run inside a host like any launcher.

conftest.py in this directory offers the fixtures to the tests here; tests
elsewhere get it with ``sys.path`` holding this directory and
``from hvdcluster import cluster`` in their conftest.py (best in one conftest
above all users, so that one session shares one cluster).
"""

import hashlib
import os
import pwd
import shutil
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, 'cluster.sh')
# HVD_CLUSTER_ID=N picks one of several clusters that may be up at once
# (cluster.sh's own variable): its state, names and subnets.
INSTANCE = int(os.environ.get('HVD_CLUSTER_ID', '0') or '0')
if not 0 <= INSTANCE <= 63:
    raise ValueError('HVD_CLUSTER_ID must be 0..63, not %d' % INSTANCE)
STATE = '/run/hvd-cluster' + ('-%d' % INSTANCE if INSTANCE else '')
PREFIX = 'hvdc%s-' % (INSTANCE or '')          # namespaces and links
NET4 = '10.231.%d.' % INSTANCE                 # + host index + 1
NET6 = 'fdc1:7a1:' + ('%d:' % INSTANCE if INSTANCE else '')  # + ':' + host index + 1
SUBNET4 = NET4 + '0/24'
SUBNET6 = NET6 + ':/64'
NHOSTS = 4
TIMEOUT = 60          # seconds; every command run through the fixture has one


def sha256_of(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def root_ssh_dir():
    """ssh takes ~ from the passwd entry, not from $HOME."""
    return os.path.join(pwd.getpwuid(0).pw_dir, '.ssh')


def snapshot_dir(path):
    """What is in a directory, with mtimes; None if it does not exist."""
    if not os.path.isdir(path):
        return None
    return sorted((name, os.stat(os.path.join(path, name)).st_mtime_ns)
                  for name in os.listdir(path))


def host_name(host):
    """'h2', 2 or '2' -> 'h2'."""
    if isinstance(host, int):
        return 'h%d' % host
    return host if host.startswith('h') else 'h' + host


class Cluster:
    """A running cluster of hosts h0..h(n-1), driven through cluster.sh."""

    def __init__(self, script=SCRIPT, nhosts=NHOSTS):
        self.script = script
        self.nhosts = nhosts
        self.ssh_config = os.path.join(STATE, 'ssh_config')
        self.up_output = ''
        # What the machine looked like before the first `up`, for tests
        # that check nothing was changed.
        self.etc_hosts_sha256 = sha256_of('/etc/hosts')
        self.root_ssh_before = snapshot_dir(root_ssh_dir())

    @property
    def hosts(self):
        return ['h%d' % i for i in range(self.nhosts)]

    @staticmethod
    def addr(i):
        return NET4 + str(i + 1)

    @staticmethod
    def addr6(i):
        return NET6 + ':' + str(i + 1)

    # -- the script itself

    def cmd(self, *args, timeout=TIMEOUT, check=False, env=None):
        """Run `cluster.sh ARGS...` in the root namespace; text output."""
        return subprocess.run([self.script, *args], capture_output=True,
                              text=True, timeout=timeout, check=check, env=env)

    def service(self, name, *options, env=None, timeout=TIMEOUT, clean_first=False):
        """A session fixture's body for `cluster.sh NAME up OPTIONS...`
        (slurm, ray, spark): yields the cluster, `NAME down` after; fails
        the test, saying why, when it does not come up.  clean_first:
        `NAME down` before, for whatever a crashed run left behind."""
        if clean_first:
            self.cmd(name, 'down')
        r = self.cmd(name, 'up', *options, env=env, timeout=timeout)
        if r.returncode != 0:
            pytest.fail('cluster.sh %s up failed (exit %d):\n%s%s'
                        % (name, r.returncode, r.stdout, r.stderr), pytrace=False)
        try:
            yield self
        finally:
            self.cmd(name, 'down')

    def up(self, *options, nhosts=NHOSTS):
        r = self.cmd('up', str(nhosts), *options)
        if r.returncode != 0:
            pytest.fail('cluster.sh up %d %s failed (exit %d):\n%s%s'
                        % (nhosts, ' '.join(options), r.returncode,
                           r.stdout, r.stderr), pytrace=False)
        self.nhosts = nhosts
        self.up_output = r.stdout
        self.ssh_config = self.cmd('ssh-config', check=True).stdout.strip()
        return r

    def down(self):
        return self.cmd('down')

    def check(self):
        """Assert the cluster is up and the root namespace fenced off."""
        r = self.cmd('check')
        assert r.returncode == 0, 'cluster.sh check: ' + r.stderr.strip()

    # -- the hosts

    def _argv(self, host, argv):
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        return [self.script, 'exec', host_name(host), *argv]

    def run(self, host, argv, **kw):
        """subprocess.run(argv) on a host; always with a timeout."""
        kw.setdefault('timeout', TIMEOUT)
        return subprocess.run(self._argv(host, argv), **kw)

    def popen(self, host, argv, **kw):
        """subprocess.Popen(argv) on a host.  Its pid is argv's own: exec
        leaves no wrapper process behind.  Until then that pid is `cluster.sh
        exec`, already on the host, whose helpers (a subshell, mount, umount:
        its children) run on the host too, one at a time, each with a higher
        pid; wait_exec waits for argv to have replaced it."""
        return subprocess.Popen(self._argv(host, argv), **kw)

    @staticmethod
    def wait_exec(proc, argv, timeout=5.0):
        """Wait until a process from popen(HOST, ARGV) runs argv (its command
        line is argv's), so that `cluster.sh exec` and all its helpers are
        done.  True if it does; False if it exited first or the time ran
        out.  Not for a program that rewrites its own command line."""
        if isinstance(argv, (str, bytes)):
            argv = [argv]
        want = b''.join(os.fsencode(a) + b'\0' for a in argv)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with open('/proc/%d/cmdline' % proc.pid, 'rb') as f:
                    if f.read() == want:
                        return proc.poll() is None
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def ssh_argv(self, target, *command):
        """argv of an ssh, to be run on a host, that runs COMMAND on TARGET
        (a host name or an address)."""
        return ['ssh', '-F', self.ssh_config, target, *command]

    @property
    def ssh_bin(self):
        """A directory whose `ssh` is `ssh -F <ssh_config>`."""
        return os.path.join(STATE, 'bin')

    def env(self, **extra):
        """os.environ with ssh_bin first in PATH, plus EXTRA: for launchers
        that run a plain `ssh HOST CMD` (pass as env= to run/popen)."""
        env = dict(os.environ)
        env['PATH'] = self.ssh_bin + ':' + env.get('PATH', '/usr/bin:/bin')
        env.update(extra)
        return env

    def pids(self, host=None):
        """PIDs running on a host (all hosts if None), its sshd excluded."""
        args = ['pids'] if host is None else ['pids', host_name(host)]
        r = self.cmd(*args, check=True)
        return [int(p) for p in r.stdout.split()]

    def pid_of(self, host, program):
        """The first PID on a host whose argv[0] contains program (bytes),
        or None (one PID namespace: its /proc is visible here)."""
        for pid in self.pids(host):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if program in f.read().split(b"\0")[0]:
                        return pid
            except OSError:
                pass
        return None

    def wait_no_pids(self, host=None, timeout=5.0):
        """Wait until nothing runs on the host(s); return what is left."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids(host)
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def link(self, host, state):
        assert state in ('up', 'down')
        self.cmd('link', host_name(host), state, check=True)


def preflight():
    """Why this machine cannot run a cluster, or None if it can."""
    if os.geteuid() != 0:
        return 'the cluster tests must run as root (uid is %d)' % os.geteuid()
    for tool, package in (('ip', 'iproute2'), ('tc', 'iproute2'),
                          ('nsenter', 'util-linux'), ('unshare', 'util-linux'),
                          ('ssh', 'openssh-client'),
                          ('ssh-keygen', 'openssh-client')):
        path = os.environ.get('PATH', '') + ':/usr/sbin:/sbin'
        if shutil.which(tool, path=path) is None:
            return 'no %s on PATH: apt-get install %s' % (tool, package)
    if not os.access('/usr/sbin/sshd', os.X_OK):
        return 'no /usr/sbin/sshd: apt-get install openssh-server'
    probe = 'hvdc-probe%d' % os.getpid()
    r = subprocess.run(['ip', 'netns', 'add', probe], capture_output=True,
                       text=True, timeout=TIMEOUT)
    if r.returncode != 0:
        return ('cannot make network namespaces here (`ip netns add` said: %s)'
                % r.stderr.strip())
    subprocess.run(['ip', 'netns', 'del', probe], capture_output=True,
                   timeout=TIMEOUT)
    return None


# ---- the build under test, for the tests that run its programs ----

@pytest.fixture(scope='session')
def build_dir():
    """HVD_BUILD_DIR (ctest sets it), or build/ of this checkout."""
    path = os.path.abspath(os.environ.get(
        'HVD_BUILD_DIR', os.path.join(HERE, '..', '..', 'build')))
    if not os.access(os.path.join(path, 'hvdrun'), os.X_OK):
        pytest.fail('no hvdrun in %s: build it, or set HVD_BUILD_DIR' % path)
    return path


def program(build_dir, name):
    """A test program of the build (tests/NAME); fails if it is missing."""
    path = os.path.join(build_dir, 'tests', name)
    if not os.access(path, os.X_OK):
        pytest.fail('%s is not built (looked for %s)' % (name, path))
    return path


def ps(pids):
    """`ps` of the pids, for the message of a test that found them left."""
    out = subprocess.run(['ps', '-o', 'pid,args', '-p', ','.join(map(str, pids))],
                         capture_output=True, text=True)
    return out.stdout


def run_driver(cluster, script, env, host='h0', timeout=600):
    """Runs a driver program (python -c SCRIPT) in a host, as launchers
    run; returns its run and the JSON it printed after 'RESULT ', failing
    with its output's tail where it failed or printed none."""
    import json
    import sys

    r = cluster.run(host, [sys.executable, '-c', script], env=env, capture_output=True,
                    text=True, timeout=timeout)
    tail = r.stdout[-4000:] + r.stderr[-4000:]
    assert r.returncode == 0, tail
    line = [l for l in r.stdout.splitlines() if l.startswith('RESULT ')]
    assert line, tail
    r.result_line = line[0]
    return r, json.loads(line[0][len('RESULT '):])


def assert_nothing_left(cluster, timeout=10.0):
    """Nothing of a job may outlive it on any host (daemons aside)."""
    left = cluster.wait_no_pids(timeout=timeout)
    assert not left, 'left running on the hosts: %s' % ps(left)


def slurm_preflight():
    """Why this machine cannot run SLURM here, or None if it can."""
    path = os.environ.get('PATH', '') + ':/usr/sbin:/sbin'
    for tool, package in (('munged', 'munge'), ('slurmctld', 'slurmctld'),
                          ('slurmd', 'slurmd'), ('srun', 'slurm-client'),
                          ('sinfo', 'slurm-client')):
        if shutil.which(tool, path=path) is None:
            return 'no %s on PATH: apt-get install %s' % (tool, package)
    return None


@pytest.fixture(scope='session')
def slurm(cluster):
    why = slurm_preflight()
    if why:
        pytest.fail('cannot run SLURM on the cluster: ' + why, pytrace=False)
    yield from cluster.service('slurm')


def cluster_session(nhosts=NHOSTS):
    """A session fixture's body: a cluster of nhosts up for the session,
    down after (and before, for whatever a crashed run left behind)."""
    why = preflight()
    if why:
        pytest.fail('cannot run the cluster tests: ' + why, pytrace=False)
    c = Cluster(nhosts=nhosts)
    c.down()
    try:
        c.up(nhosts=nhosts)
        yield c
    finally:
        r = c.down()
        if r.returncode != 0:
            print('cluster.sh down failed:', r.stderr)


@pytest.fixture(scope='session')
def cluster():
    yield from cluster_session()
