"""Many hosts (docs/scale.md): 16 emulated hosts x 2 ranks through hvdrun
over ssh, from h0.  hvdrun starts 8 sessions itself (--launch-fanout's
default) and the agents on those start the other 7: a launch tree of two
levels.  The job runs every collective exactly (tests/mpi/scale_probe.c),
each rank's allreduces within 2 log2 n connections (made on first use;
scale_probe checks it), and ends with nothing left on any host.
"""
import os
import re

from hvdcluster import assert_nothing_left, program

from conftest import HOSTS

LIMIT = 180


def run(cluster, build_dir, np, prog, *flags, **env):
    cluster.check()
    hosts = ",".join("h%d:%d" % (h, np // HOSTS) for h in range(HOSTS))
    argv = [os.path.join(build_dir, "hvdrun"), "-np", str(np), "-H", hosts, "--ssh-command",
            "ssh -F %s" % cluster.ssh_config, *flags, *prog]
    e = dict(os.environ, HOROVOD_GLOO_TIMEOUT_SECONDS="30", HOROVOD_START_TIMEOUT="90", **env)
    return cluster.run("h0", argv, env=e, cwd=build_dir, capture_output=True, text=True,
                       timeout=LIMIT)


def test_sixteen_hosts_start_in_a_tree_and_reduce_exactly(cluster, build_dir):
    np = 2 * HOSTS
    p = run(cluster, build_dir, np, [program(build_dir, "scale_probe"), "90000"], "--verbose")
    tail = p.stdout[-3000:] + p.stderr[-3000:]
    assert p.returncode == 0, tail
    ok = re.findall(r"\[(\d+)\]<stdout>:scale_probe rank \d+ of %d: \d+ checks, 0 failed" % np,
                    p.stdout)
    assert sorted(map(int, ok)) == list(range(np)), tail
    # h0 is hvdrun's own host: its ranks fork; the 15 others go over ssh,
    # 8 sessions from hvdrun and 7 from the agents on those.
    assert "starting 15 hosts over ssh in a tree of 2 levels, at most 8 sessions each" in p.stderr
    relayed = re.findall(r"hvdrun: host (h\d+): ssh on (h\d+), through hvdrun's agent there, "
                         r"starts hvdrun's agent", p.stderr)
    direct = re.findall(r"hvdrun: host (h\d+): ssh \(pid \d+\) starts", p.stderr)
    assert len(relayed) == 7 and len(direct) == 8, tail
    assert {h for h, _ in relayed}.isdisjoint(direct)
    assert {via for _, via in relayed} <= set(direct)
    print(re.search(r"scale_probe: .*", p.stdout).group(0))
    # Connections on first use: each rank checked that its allreduces
    # added at most 2 log2 n sockets (a failed check above if not);
    # the counts are here for the log.
    sockets = re.search(r"scale_probe: sockets_init (\d+) sockets_allreduce (\d+) "
                        r"sockets_end (\d+)", p.stdout)
    assert sockets, tail
    print(sockets.group(0))
    assert_nothing_left(cluster)
