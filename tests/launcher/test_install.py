"""`make install`'s layout works for a user: hvdrun, hvd.h, libhvd and a
pkg-config file with which `cc prog.c $(pkg-config --cflags --libs hvd)`
builds a program that runs alone and under the installed hvdrun."""
import os
import shutil
import subprocess

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.mark.skipif(bool(os.environ.get("HVD_SANITIZE")),
                    reason="a sanitized libhvd needs the sanitizer runtime in the user's program")
@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_install_and_build_with_pkg_config(build_dir, tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build_dir, "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=120)
    for path in ["bin/hvdrun", "bin/hvd-train-fashion-mnist", "bin/hvd-report", "bin/hvd-bench",
                 "include/hvd.h",
                 "include/hvd_nn.h", "lib/libhvd.so", "lib/libhvd.a", "lib/libhvd_nn.so",
                 "lib/libhvd_nn.a", "lib/pkgconfig/hvd.pc", "lib/pkgconfig/hvd_nn.pc"]:
        assert (prefix / path).exists(), path
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "hvd"], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    exe = tmp_path / "demo"
    subprocess.run(["cc", "-std=c11", os.path.join(SOURCE, "examples", "allreduce_demo.c"),
                    "-o", str(exe)] + flags, check=True, timeout=120)
    alone = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert alone.returncode == 0, alone.stderr
    assert "rank 0 of 1" in alone.stdout
    job = subprocess.run([str(prefix / "bin" / "hvdrun"), "-np", "2", str(exe)],
                         capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stderr
    assert job.stdout.count("0 wrong") == 2, job.stdout


@pytest.mark.skipif(bool(os.environ.get("HVD_SANITIZE")),
                    reason="a sanitized libhvd needs the sanitizer runtime in the user's program")
@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config is not installed")
def test_training_program_builds_against_installed_hvd_nn(build_dir, tmp_path):
    """The Fashion-MNIST trainer is an ordinary user of libhvd_nn: it builds
    from the installed header and pkg-config file alone."""
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build_dir, "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=120)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "hvd_nn"], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    exe = tmp_path / "trainer"
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE",
                    os.path.join(SOURCE, "apps", "train_fashion_mnist.c"), "-o", str(exe)]
                   + flags, check=True, timeout=120)
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--fp16-allreduce" in out.stdout


@pytest.mark.skipif(bool(os.environ.get("HVD_SANITIZE")),
                    reason="a sanitized extension needs the sanitizer runtime preloaded")
def test_python_package_installs(build_dir, tmp_path):
    """make install's layout: PYTHONPATH=DIR/lib/python3/dist-packages
    /usr/bin/python3 -c 'import hvd.torch' works, and the installed package
    runs a job under the installed hvdrun."""
    if not os.path.isdir(os.path.join(build_dir, "python", "hvd")):
        pytest.skip("hvd._C is not built (no Python development files)")
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", build_dir, "--prefix", str(prefix)], check=True,
                   capture_output=True, timeout=120)
    site = prefix / "lib" / "python3" / "dist-packages"
    assert list((site / "hvd").glob("_C*.so")), "no extension installed"
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run(["/usr/bin/python3", "-c", "import hvd.torch"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    script = tmp_path / "job.py"
    script.write_text("import torch, hvd.torch as hvd\n"
                      "hvd.init()\n"
                      "t = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)\n"
                      "print('sum', t.tolist())\n")
    job = subprocess.run([str(prefix / "bin" / "hvdrun"), "-np", "2", "/usr/bin/python3",
                          str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stderr
    assert job.stdout.count("sum [3.0, 3.0, 3.0]") == 2, job.stdout


def copy_source(dst):
    """The source tree without build directories, VCS data or bytecode."""
    shutil.copytree(SOURCE, dst, ignore=shutil.ignore_patterns(
        "build", "build-*", ".git", "*.egg-info", "__pycache__", "*.pyc"))


JOB = ("import torch, hvd.torch as hvd\n"
       "hvd.init()\n"
       "t = hvd.allreduce(torch.ones(3) * (hvd.rank() + 1), op=hvd.Sum)\n"
       "print('sum', t.tolist(), hvd.__file__)\n")


def make_venv(kind, venv):
    """A venv for `pip install .`: "debian" sees Debian's site-packages
    (PyTorch 1.13); "pypi-torch" does not (--system-site-packages off) and
    finds PyPI's PyTorch 2.x, setuptools and wheel in the project's venv
    (HVD_VENV_PYTHON, scripts/venv.sh) through a .pth file, as if pip had
    installed them there, without downloading them again."""
    if kind == "debian":
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)],
                       check=True, capture_output=True, timeout=120)
        return "1."
    project = os.environ.get("HVD_VENV_PYTHON")
    if not project:
        pytest.skip("no project venv (configure with -DHVD_VENV_PYTHON=...; scripts/test.sh does)")
    theirs = subprocess.run([project, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                            check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True,
                   capture_output=True, timeout=120)
    mine = next(venv.glob("lib/python3*/site-packages"))
    (mine / "project_venv.pth").write_text(theirs + "\n")
    return "2."


@pytest.mark.skipif(bool(os.environ.get("HVD_SANITIZE")),
                    reason="the sanitizer build's test run; pip builds a release extension anyway")
@pytest.mark.parametrize("kind", ["debian", "pypi-torch"])
def test_pip_install_into_a_venv(tmp_path, kind):
    """python3 -m pip install --no-build-isolation . into a venv, offline,
    from scratch (setup.py runs CMake), with Debian's PyTorch 1.13 or PyPI's
    2.x: hvd.torch imports from anywhere without PYTHONPATH, the venv's own
    hvdrun runs a 2-rank job, hvd-report and hvd-bench are there, and pip
    uninstall takes it all away."""
    src, venv = tmp_path / "src", tmp_path / "venv"
    copy_source(src)
    torch_major = make_venv(kind, venv)
    py, bindir = str(venv / "bin" / "python"), venv / "bin"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HVD_CMAKE_BUILD_DIR") and not k.startswith("HOROVOD_")}
    env.update(PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", str(src)], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    site = subprocess.run([py, "-c", "import hvd, hvd.torch, torch; print(hvd.__file__); "
                           "print(torch.__version__)"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert site.returncode == 0 and site.stdout.startswith(str(venv)), site.stdout + site.stderr
    assert site.stdout.split()[1].startswith(torch_major), site.stdout
    (tmp_path / "job.py").write_text(JOB)
    job = subprocess.run([str(bindir / "hvdrun"), "-np", "2", py, str(tmp_path / "job.py")],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stdout + job.stderr
    assert job.stdout.count("sum [3.0, 3.0, 3.0] " + str(venv)) == 2, job.stdout
    for tool, args, want in [("hvd-report", ["--help"], "usage: hvd-report"),
                             ("hvd-bench", ["--help"], "usage: hvdrun -np N hvd-bench"),
                             ("hvdrun", ["--check-build"], "[X] PyTorch")]:
        out = subprocess.run([str(bindir / tool)] + args, env=env, capture_output=True, text=True,
                             timeout=60)
        assert want in out.stdout + out.stderr, (tool, out.stdout, out.stderr)
    gone = subprocess.run([py, "-m", "pip", "uninstall", "-y", "hvd"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert gone.returncode == 0, gone.stderr
    site_packages = next(venv.glob("lib/python3*/site-packages"))
    assert not [p.name for p in site_packages.iterdir() if p.name.startswith("hvd")]
    assert not [p.name for p in bindir.iterdir() if p.name.startswith("hvd")]


def test_make_configures_without_the_test_tools(tmp_path):
    """`make install` on a machine without the test suite's tools: its
    configure step (make configure) builds no tests, so it looks for no
    cmocka (nor pytest).  pkg-config here is shown every .pc file of the
    system but cmocka's; a configure with the tests, in the same
    environment, fails for want of it (so the hiding works)."""
    pc = tmp_path / "pc"
    pc.mkdir()
    dirs = subprocess.run(["pkg-config", "--variable", "pc_path", "pkg-config"], check=True,
                          capture_output=True, text=True).stdout.strip().split(":")
    for d in dirs:
        for name in os.listdir(d) if os.path.isdir(d) else []:
            if name.endswith(".pc") and name != "cmocka.pc" and not (pc / name).exists():
                (pc / name).symlink_to(os.path.join(d, name))
    env = dict(os.environ, PKG_CONFIG_LIBDIR=str(pc), PKG_CONFIG_PATH="")
    build = tmp_path / "build"
    out = subprocess.run(["make", "-C", SOURCE, "configure", "BUILD=%s" % build,
                          "PREFIX=%s" % (tmp_path / "prefix")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    cache = (build / "CMakeCache.txt").read_text()
    assert "HVD_BUILD_TESTS:BOOL=OFF" in cache
    assert "cmocka" not in (out.stdout + out.stderr + cache).lower()
    with_tests = subprocess.run(["cmake", "-S", SOURCE, "-B", str(tmp_path / "tests"),
                                 "-DHVD_BUILD_TESTS=ON"], env=env, capture_output=True,
                                text=True, timeout=300)
    assert with_tests.returncode != 0
    assert "cmocka" in with_tests.stdout + with_tests.stderr
