"""hvd.run across emulated hosts: the caller in h0 (as a launcher is:
the root namespace has no route to the hosts), ranks on h0 and h1 over
ssh.  The values come back by rank with each rank's host and the sums
of a collective across hosts; a rank on h1 that raises makes run() raise
its exception, naming rank and host, and nothing is left on any host."""
import os
import sys
import textwrap

import pytest

from hvdcluster import assert_nothing_left

SCRIPT = textwrap.dedent("""
    import os, socket, sys
    import hvd

    def fn(fail):
        import torch
        import hvd.torch as ht
        ht.init()
        r = ht.rank()
        if fail and socket.gethostname() == "h1" and ht.local_rank() == 1:
            raise KeyError("on purpose on %s" % socket.gethostname())
        s = ht.allreduce(torch.tensor([float(r + 1)]), op=ht.Sum, name="s")
        return (r, socket.gethostname(), ht.local_rank(), ht.cross_rank(), float(s[0]),
                os.environ.get("HVD_RUN_TEST"))

    print(repr(hvd.run(fn, args=(False,), np=4, hosts="h0:2,h1:2",
                       env={"HVD_RUN_TEST": "passed"})))
    try:
        hvd.run(fn, args=(True,), np=4, hosts="h0:2,h1:2", start_timeout=60)
    except KeyError as e:
        print("raised", type(e).__name__, e, e.hvd_rank, e.hvd_host)
    """)


def test_run_across_hosts(cluster, build_dir):
    if os.environ.get("HVD_SANITIZE"):
        pytest.skip("a sanitizer build's hvd._C cannot load into Debian's python3")
    cluster.check()
    env = cluster.env(PYTHONPATH=os.path.join(build_dir, "python"))
    r = cluster.run("h0", [sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                    text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    values = eval(lines[0])  # noqa: S307 (our own script's repr of tuples)
    assert values == [(0, "h0", 0, 0, 10.0, "passed"), (1, "h0", 1, 0, 10.0, "passed"),
                      (2, "h1", 0, 1, 10.0, "passed"), (3, "h1", 1, 1, 10.0, "passed")]
    assert lines[-1] == "raised KeyError 'on purpose on h1' 3 h1", r.stdout + r.stderr
    assert_nothing_left(cluster, timeout=30)
