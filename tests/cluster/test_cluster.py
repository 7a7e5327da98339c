"""Tests of cluster.sh, the emulated cluster for multi-host tests.

Run as root:  /usr/bin/python3 -m pytest tests/cluster
The tests that take the cluster down and up again come last and leave the
session's cluster up, as they found it.
"""

import errno
import os
import socket
import subprocess
import sys
import time

import pytest

from hvdcluster import (NET4, NET6, PREFIX, STATE, SUBNET4, SUBNET6, root_ssh_dir, sha256_of,
                        snapshot_dir)

PY = '/usr/bin/python3'


def text(cluster, host, argv, **kw):
    """stdout of argv run on a host; fails the test on a non-zero exit."""
    r = cluster.run(host, argv, capture_output=True, text=True, **kw)
    assert r.returncode == 0, '%s on %s: exit %d: %s' % (argv, host, r.returncode, r.stderr)
    return r.stdout


def our_processes():
    """Live (non-zombie) processes whose command line names our state dir:
    the sshd daemons of the cluster show up this way."""
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode(errors='replace')
            with open('/proc/%s/stat' % pid) as f:
                state = f.read().rsplit(')', 1)[1].split()[0]
        except OSError:
            continue
        if STATE + '/' in cmd and state != 'Z':
            found.append((int(pid), cmd))
    return found


def leftovers():
    """Everything of ours still on the machine, as a list of strings."""
    left = []
    ns = subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True).stdout
    left += ['netns ' + l.split()[0] for l in ns.splitlines() if l.startswith(PREFIX)]
    links = subprocess.run(['ip', '-o', 'link', 'show'], capture_output=True, text=True).stdout
    left += ['link ' + l.split(': ')[1] for l in links.splitlines() if ': ' + PREFIX in l]
    # NET6 + ':' ("fdc1:7a1::" for cluster 0) matches only this cluster's,
    # not another one's (fdc1:7a1:1::/64) that may be up beside it.
    for fam, subnet in (('-4', NET4), ('-6', NET6 + ':')):
        routes = subprocess.run(['ip', fam, 'route', 'show', 'table', 'all'],
                                capture_output=True, text=True).stdout
        left += ['route ' + l for l in routes.splitlines() if subnet in l]
    if os.path.exists(STATE):
        left.append(STATE)
    left += ['process %d: %s' % p for p in our_processes()]
    return left


def ssh_all(cluster, src, targets):
    """Run `ssh TARGET hostname` from host SRC to every target at once;
    return {target: (exit, stdout, stderr)}."""
    procs = {t: cluster.popen(src, cluster.ssh_argv(t, 'hostname'),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for t in targets}
    out = {}
    for t, p in procs.items():
        o, e = p.communicate(timeout=60)
        out[t] = (p.returncode, o.strip(), e)
    return out


# ------------------------------------------------------------ while it is up

def test_up_printed_one_summary_line(cluster):
    lines = cluster.up_output.splitlines()
    assert len(lines) == 1, cluster.up_output
    assert 'h0..h3' in lines[0] and 'ssh h0->all ok' in lines[0]


def test_check_and_status(cluster):
    cluster.check()
    r = cluster.cmd('status')
    assert r.returncode == 0, r.stderr
    for i, h in enumerate(cluster.hosts):
        line = next(l for l in r.stdout.splitlines() if l.startswith(h + ' '))
        assert cluster.addr(i) in line and cluster.addr6(i) in line
        assert 'sshd ' in line
    r = cluster.cmd('ssh-config')
    assert r.returncode == 0 and r.stdout.strip() == cluster.ssh_config
    assert os.path.isfile(cluster.ssh_config)
    assert oct(os.stat(STATE).st_mode & 0o777) == '0o700'


@pytest.mark.parametrize('src', ['h0', 'h3'])
def test_every_host_answers_ssh_with_its_name(cluster, src):
    cluster.check()
    for t, (rc, out, err) in ssh_all(cluster, src, cluster.hosts).items():
        assert (rc, out) == (0, t), 'ssh %s -> %s: %s' % (src, t, err)


def test_ssh_by_ipv4_and_ipv6_address(cluster):
    cluster.check()
    targets = [cluster.addr(2), cluster.addr6(2), cluster.addr(0), cluster.addr6(3)]
    got = ssh_all(cluster, 'h1', targets)
    assert [got[t][:2] for t in targets] == [(0, 'h2'), (0, 'h2'), (0, 'h0'), (0, 'h3')], got


def test_ssh_session_runs_in_the_hosts_namespaces(cluster):
    cluster.check()
    out = text(cluster, 'h0', cluster.ssh_argv(
        'h2', 'hostname; ls /sys/class/net; getent hosts h3; echo $SSH_CONNECTION'))
    lines = out.split('\n')
    assert lines[0:3] == ['h2', 'eth0', 'lo']
    assert lines[3].split() == [cluster.addr(3), 'h3']
    assert lines[4].split()[0::2] == [cluster.addr(0), cluster.addr(2)]


def test_exec_gives_the_host_its_name_net_and_hosts_file(cluster):
    for i, h in enumerate(cluster.hosts):
        out = text(cluster, h, ['sh', '-c', 'hostname; ip -4 -o addr show dev eth0; ls /sys/class/net'])
        lines = out.split('\n')
        assert lines[0] == h
        assert cluster.addr(i) + '/24' in lines[1]
        assert lines[2:4] == ['eth0', 'lo']
    assert text(cluster, 2, ['hostname']) == 'h2\n'     # HOST may be I
    # Every name resolves on every host, and the machine's own lines are kept.
    out = text(cluster, 'h1', ['getent', 'ahostsv4', 'localhost'])
    assert '127.0.0.1' in out
    out = text(cluster, 'h3', ['getent', 'hosts', *cluster.hosts])
    assert [l.split() for l in out.splitlines()] == \
        [[cluster.addr(i), h] for i, h in enumerate(cluster.hosts)]
    # The hosts keep the machine's cgroup mounts under their own /sys.
    if os.path.ismount('/sys/fs/cgroup'):
        text(cluster, 'h1', ['mountpoint', '-q', '/sys/fs/cgroup'])


def test_plain_ssh_through_the_path_wrapper(cluster):
    out = text(cluster, 'h2', ['ssh', 'h1', 'hostname'], env=cluster.env())
    assert out == 'h1\n'


def test_exec_passes_stdio_status_and_pid(cluster):
    r = cluster.run('h1', ['sh', '-c', 'cat; echo oops >&2; exit 7'],
                    input='hello\n', capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (7, 'hello\n', 'oops\n')
    p = cluster.popen('h1', ['sh', '-c', 'echo $$'], stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=30)
    assert int(out) == p.pid        # no wrapper process left in between


def test_tcp_from_h1_to_a_listener_in_h0(cluster):
    cluster.check()
    server = cluster.popen('h0', [PY, '-c', '''
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("ADDR0", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
s.settimeout(30)
c, peer = s.accept()
c.sendall(("%s %s " % (socket.gethostname(), peer[0])).encode() + c.recv(100))
'''.replace('ADDR0', cluster.addr(0))], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        out = text(cluster, 'h1', [PY, '-c', '''
import socket, sys
c = socket.create_connection(("h0", %d), timeout=10)
c.sendall(b"ping"); c.shutdown(socket.SHUT_WR)
print(c.recv(100).decode())
''' % port])
        assert out.split() == ['h0', cluster.addr(1), 'ping']
    finally:
        server.kill()
        server.wait(timeout=10)


def test_root_namespace_is_fenced_off(cluster):
    cluster.check()
    r4 = subprocess.run(['ip', '-4', 'route', 'show', 'exact', SUBNET4],
                        capture_output=True, text=True)
    r6 = subprocess.run(['ip', '-6', 'route', 'show', 'exact', SUBNET6],
                        capture_output=True, text=True)
    assert r4.stdout.startswith('unreachable ' + SUBNET4), r4.stdout
    assert r6.stdout.startswith('unreachable ' + SUBNET6), r6.stdout
    # From the root namespace, a host's address fails at once, locally.
    for family, addr in ((socket.AF_INET, (cluster.addr(1), 22)),
                         (socket.AF_INET6, (cluster.addr6(1), 22))):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(5)
        t = time.monotonic()
        with pytest.raises(OSError) as e:
            s.connect(addr)
        s.close()
        assert e.value.errno == errno.EHOSTUNREACH, e.value
        assert time.monotonic() - t < 1.0


def test_machine_files_untouched_while_up(cluster):
    assert sha256_of('/etc/hosts') == cluster.etc_hosts_sha256
    assert snapshot_dir(root_ssh_dir()) == cluster.root_ssh_before
    with open('/etc/hosts') as f:
        assert NET4 not in f.read()


def test_pids(cluster):
    cluster.check()
    assert cluster.wait_no_pids('h2') == []     # ssh sessions of earlier tests end
    p = cluster.popen('h2', ['sleep', '100'])
    try:
        # Until p.pid is sleep: before, it is `cluster.sh exec` on h2, whose
        # helpers (mount, umount, a subshell: its children) come and go one
        # after another, so the host may run only p.pid between two of them
        # and a helper again a moment later.  Once it is sleep, every helper
        # is gone, and nothing else may run on h2.
        assert cluster.wait_exec(p, ['sleep', '100'], timeout=5)
        assert cluster.pids('h2') == [p.pid]
        assert p.pid in cluster.pids()
        assert p.pid not in cluster.pids('h1')
    finally:
        p.kill()
        p.wait(timeout=10)
    assert cluster.wait_no_pids('h2') == []


def test_link_down_and_up(cluster):
    cluster.check()
    cluster.link('h3', 'down')
    try:
        r = cluster.run('h0', ['ping', '-c', '1', '-W', '1', cluster.addr(3)],
                        capture_output=True, text=True)
        assert r.returncode != 0, r.stdout
        assert 'DOWN' in text(cluster, 'h3', ['ip', '-br', 'link', 'show', 'dev', 'eth0'])
    finally:
        cluster.link('h3', 'up')
    # Both addresses survive the cut, and so does sshd.
    got = ssh_all(cluster, 'h0', ['h3', cluster.addr6(3)])
    assert [v[:2] for v in got.values()] == [(0, 'h3'), (0, 'h3')], got


def test_up_while_up_fails_and_leaves_it_running(cluster):
    r = cluster.cmd('up', '2')
    assert r.returncode != 0
    assert 'already up' in r.stderr
    cluster.check()
    assert text(cluster, 'h0', cluster.ssh_argv('h3', 'hostname')) == 'h3\n'


@pytest.mark.parametrize('args', [[], ['frobnicate'], ['link', 'h0', 'sideways']])
def test_usage(cluster, args):
    r = cluster.cmd(*args)
    assert r.returncode == 2
    assert 'usage:' in r.stderr and r.stdout == ''


def test_bad_host(cluster):
    r = cluster.cmd('exec', 'h17', 'true')
    assert r.returncode != 0 and 'no host h17' in r.stderr
    r = cluster.cmd('up', '65')
    assert r.returncode != 0 and '1..64' in r.stderr


# ------------------------------------------- down, failed up, shaping; last

def assert_nothing_left(cluster):
    deadline = time.monotonic() + 3
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() == []
    assert not os.path.exists(STATE)
    assert sha256_of('/etc/hosts') == cluster.etc_hosts_sha256
    assert snapshot_dir(root_ssh_dir()) == cluster.root_ssh_before
    if cluster.root_ssh_before is None:
        assert not os.path.exists(root_ssh_dir())


def test_down_removes_everything_and_up_again(cluster):
    cluster.check()
    sleeper = cluster.popen('h1', ['sleep', '100'])
    try:
        while sleeper.pid not in cluster.pids('h1'):
            time.sleep(0.05)
        t = time.monotonic()
        r = cluster.down()
        took = time.monotonic() - t
        assert r.returncode == 0, r.stderr
        assert took < 3.0
        # down stopped what ran on the hosts
        assert sleeper.wait(timeout=5) < 0
        assert_nothing_left(cluster)
        # check, status and ssh-config say it is not up
        r = cluster.cmd('check')
        assert r.returncode == 1
        assert 'not up' in r.stderr and 'unreachable ' + SUBNET4 in r.stderr
        assert cluster.cmd('status').returncode == 1
        assert cluster.cmd('ssh-config').returncode != 0
        # down again, with nothing up
        r = cluster.down()
        assert r.returncode == 0, r.stderr
        assert_nothing_left(cluster)

        # an `up` that fails half-way removes what it made
        r = cluster.cmd('up', '3', '--rate', 'bogus')
        assert r.returncode != 0
        assert 'up failed while making host h0' in r.stderr, r.stderr
        assert_nothing_left(cluster)

        # shaping and another sshd port
        cluster.up('--rate', '100mbit', '--burst', '1mb', '--ssh-port', '2222', nhosts=2)
        cluster.check()
        out = text(cluster, 'h1', ['tc', 'qdisc', 'show', 'dev', 'eth0'])
        assert 'tbf' in out and 'rate 100Mbit' in out and 'burst 1024Kb' in out, out
        out = text(cluster, 'h0', cluster.ssh_argv('h1', 'echo $SSH_CONNECTION; hostname'))
        assert out.split()[-2:] == ['2222', 'h1'], out
        assert text(cluster, 'h1', cluster.ssh_argv(cluster.addr6(0), 'hostname')) == 'h0\n'
        r = cluster.down()
        assert r.returncode == 0, r.stderr
        assert_nothing_left(cluster)
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        # leave the session's cluster as the fixture made it
        cluster.down()
        cluster.up()
    cluster.check()


if __name__ == '__main__':
    sys.exit(pytest.main([__file__, '-v']))
