"""make deb's package (scripts/make-deb.sh) installs and removes cleanly on
this Debian: dpkg -i puts hvd under /usr, a client compiles with nothing
but `pkg-config --cflags --libs hvd` and runs alone and under the installed
hvdrun, Debian's python3 imports hvd.torch, the tools answer; then dpkg -r
and dpkg -P leave nothing of the package behind.

This installs into the real /usr: dpkg --root/--instdir would skip what
is worth testing (the default search paths of the compiler, the linker,
pkg-config and python3, ldconfig).  So it runs as root only, never while a
package called hvd is installed (it would be replaced), one at a time
(a lock), and removes the package in a finally, whatever failed.  dpkg
refuses to start while another dpkg or apt-get holds its lock (another
job installing packages): every dpkg call here waits for it, the removal
in the finally longest of all.
"""
import fcntl
import os
import shutil
import subprocess
import time

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LOCK = "/run/lock/hvd-package-test.lock"

pytestmark = [
    pytest.mark.skipif(bool(os.environ.get("HVD_SANITIZE")),
                       reason="a sanitized build is not packaged"),
    pytest.mark.skipif(os.geteuid() != 0, reason="installs a Debian package: root only"),
    pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("dpkg-shlibdeps") is None,
                       reason="dpkg-deb and dpkg-shlibdeps (dpkg-dev) are needed"),
]


def run(args, **kw):
    kw.setdefault("timeout", 300)
    return subprocess.run(args, capture_output=True, text=True, **kw)


def dpkg(args, wait=300):
    """dpkg ARGS, waiting up to `wait` seconds while another process holds
    dpkg's lock."""
    end = time.monotonic() + wait
    while True:
        p = run(["dpkg"] + args)
        if p.returncode == 0 or "lock" not in p.stderr or time.monotonic() > end:
            return p
        time.sleep(2)


def installed():
    p = run(["dpkg-query", "-W", "-f", "${Status}", "hvd"])
    return p.returncode == 0 and "installed" in p.stdout.split()


@pytest.fixture
def lock():
    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    with open(LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


@pytest.fixture
def deb(build_dir, tmp_path):
    p = run([os.path.join(SOURCE, "scripts", "make-deb.sh"), build_dir, str(tmp_path)])
    assert p.returncode == 0, p.stderr
    path = p.stdout.strip().splitlines()[-1]
    assert os.path.basename(path).startswith("hvd_") and os.path.exists(path), p.stdout
    return path


def test_deb_contents(deb):
    info = run(["dpkg-deb", "--field", deb, "Package", "Depends"]).stdout
    assert "Package: hvd" in info and "libssl3" in info and "libopenblas0" in info, info
    files = {line.split()[-1] if "->" not in line else line.split()[-3]
             for line in run(["dpkg-deb", "--contents", deb]).stdout.splitlines()}
    for want in ["./usr/bin/hvdrun", "./usr/bin/hvd-bench", "./usr/bin/hvd-train-fashion-mnist",
                 "./usr/bin/hvd-report", "./usr/include/hvd.h", "./usr/include/hvd_nn.h",
                 "./usr/lib/libhvd.so", "./usr/lib/libhvd.so.0", "./usr/lib/libhvd.a",
                 "./usr/lib/libhvd_nn.so.0", "./usr/lib/pkgconfig/hvd.pc",
                 "./usr/lib/pkgconfig/hvd_nn.pc"]:
        assert want in files, (want, sorted(files))


def check_installed(tmp_path):
    """What a user of the installed package does, with nothing set up."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "PYTHONPATH",
                        "PYTHONDONTWRITEBYTECODE") and not k.startswith("HOROVOD_")}
    env["PATH"] = "/usr/bin:/bin"
    flags = run(["pkg-config", "--cflags", "--libs", "hvd"], env=env)
    assert flags.returncode == 0, flags.stderr
    exe = tmp_path / "demo"
    cc = run(["cc", "-std=c11", os.path.join(SOURCE, "examples", "allreduce_demo.c"), "-o",
              str(exe)] + flags.stdout.split(), env=env)
    assert cc.returncode == 0, cc.stderr
    alone = run([str(exe)], env=env)
    assert alone.returncode == 0 and "rank 0 of 1" in alone.stdout, alone.stderr
    job = run(["hvdrun", "-np", "2", str(exe)], env=env)
    assert job.returncode == 0 and job.stdout.count("0 wrong") == 2, job.stdout + job.stderr
    assert "[X] Gloo" in run(["hvdrun", "--check-build"], env=env).stdout
    assert "usage: hvd-report" in run(["hvd-report", "--help"], env=env).stdout
    if os.path.isdir("/usr/lib/python3/dist-packages/hvd"):
        py = run(["/usr/bin/python3", "-c", "import hvd.torch, hvd; print(hvd.__file__)"],
                 env=env, cwd=str(tmp_path))
        assert py.returncode == 0, py.stderr
        assert py.stdout.startswith("/usr/lib/python3/dist-packages/hvd/"), py.stdout


def test_install_use_and_remove(deb, lock, tmp_path):
    if installed():
        pytest.skip("a package called hvd is installed on this system: not replacing it")
    listed = []
    try:
        existed = {}
        contents = run(["dpkg-deb", "--contents", deb]).stdout.splitlines()
        for line in contents:  # "perms owner size date time ./path[ -> target]"
            path = os.path.normpath("/" + line.split()[5])
            existed[path] = os.path.lexists(path)
        p = dpkg(["-i", deb])
        assert p.returncode == 0, p.stdout + p.stderr
        listed = [os.path.normpath(p) for p in run(["dpkg", "-L", "hvd"]).stdout.split()]
        assert "/usr/bin/hvdrun" in listed and "/usr/include/hvd.h" in listed, listed
        check_installed(tmp_path)
        p = dpkg(["-r", "hvd"])
        assert p.returncode == 0, p.stdout + p.stderr
        assert not installed()
    finally:
        purge = dpkg(["-P", "hvd"], wait=900)  # whatever happened above
        assert not installed(), "hvd is still installed: dpkg -P hvd said %s" % purge.stderr
    assert run(["dpkg-query", "-W", "hvd"]).returncode != 0, "dpkg still knows hvd"
    assert listed and all(p in existed for p in listed), "dpkg -L and the .deb disagree"
    left = [p for p in listed if os.path.lexists(p) and not existed[p]]
    assert not left, "left behind by the package: %s" % left
