"""hvd's binary wheel (scripts/wheel.sh) as a user gets it: what it holds
(no absolute run path, no framework library, auditwheel's policy), a pip
install into a fresh venv with no compiler and no CMake on PATH, what
works there without any framework (hvd, hvd.run, hvdrun --check-build),
what each binding says when its framework is missing or of a version it
does not serve, and one cell of scripts/wheel-matrix.sh (the project's
pinned versions: every binding's smoke test at np 2).

The wheel is built once per session under $HVD_BUILD_DIR/wheel (or
HVD_WHEEL names one already built)."""
import importlib.util
import os
import re
import shutil
import subprocess
import zipfile

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_frameworks():
    """hvd/common/frameworks.py of this tree, without importing hvd (whose
    hvd._C is not built here)."""
    path = os.path.join(SOURCE, "python", "hvd", "common", "frameworks.py")
    spec = importlib.util.spec_from_file_location("hvd_frameworks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


frameworks = load_frameworks()

POLICY = "manylinux_2_34_x86_64"
TOOLS = os.environ.get("HVD_WHEEL_TOOLS", os.path.expanduser("~/.cache/hvd/wheel-tools"))
BINDINGS = ["torch", "tensorflow", "keras", "jax", "mxnet"]
COMPILERS = ["cc", "gcc", "c++", "g++", "clang", "cmake"]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    if os.environ.get("HVD_WHEEL"):
        return os.environ["HVD_WHEEL"]
    build = os.path.join(os.environ.get("HVD_BUILD_DIR", os.path.join(SOURCE, "build")), "wheel")
    dist = tmp_path_factory.mktemp("dist")
    env = dict(os.environ, HVD_WHEEL_BUILD=build, HVD_WHEEL_DIST=str(dist))
    out = subprocess.run([os.path.join(SOURCE, "scripts", "wheel.sh")], env=env,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    path = out.stdout.splitlines()[-1]
    assert path.startswith(str(dist)) and os.path.exists(path), out.stdout
    return path


@pytest.fixture(scope="session")
def unpacked(wheel, tmp_path_factory):
    d = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(d)
    return d


def no_compiler_path(tmp):
    """A PATH holding every program of /usr/bin and /bin but compilers and CMake."""
    d = tmp / "nocc"
    d.mkdir()
    for src in ["/usr/bin", "/bin"]:
        for name in os.listdir(src):
            if re.match(r"^(cc|c\+\+|c89|c99|cpp.*|.*gcc.*|.*g\+\+.*|clang.*|cmake|ccmake|ctest|"
                        r"cpack|ld|ld\..*|as)$", name) or (d / name).exists():
                continue
            (d / name).symlink_to(os.path.join(src, name))
    return str(d)


@pytest.fixture(scope="session")
def venv(wheel, tmp_path_factory):
    """A fresh venv (Debian's python3, no system site-packages: no framework
    at all) with the wheel installed from a PATH without compilers."""
    tmp = tmp_path_factory.mktemp("venv")
    nocc = no_compiler_path(tmp)
    assert not [c for c in COMPILERS if shutil.which(c, path=nocc)]
    v = tmp / "v"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(v)], check=True, timeout=120)
    env = clean_env(v, nocc)
    out = subprocess.run([str(v / "bin" / "python"), "-m", "pip", "install", "--no-index",
                          "--no-deps", wheel], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return v, env


def clean_env(v, path):
    env = {k: val for k, val in os.environ.items()
           if k not in ("PYTHONPATH", "HVD_BUILD_DIR") and not k.startswith("HOROVOD_")}
    env.update(PATH="%s:%s" % (v / "bin", path), PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", TF_CPP_MIN_LOG_LEVEL="3")
    return env


def py(venv, code, extra_env=None, timeout=120):
    v, env = venv
    return subprocess.run([str(v / "bin" / "python"), "-c", code], env=dict(env, **(extra_env or {})),
                          capture_output=True, text=True, timeout=timeout, cwd=str(v))


# ---- the versions each binding serves (no wheel needed) ----

@pytest.mark.parametrize("version,want", [
    ("2.16.0", True), ("2.21.3", True), ("2.16.1rc0", True), ("2.15.1", False), ("2.22.0", False),
    ("3.0.0", False), ("", False), ("nightly", False)])
def test_tensorflow_range(version, want):
    assert frameworks.served(version, (2, 16), (2, 21)) == want


def test_torch_range_takes_local_versions():
    assert frameworks.served("2.15.0+cu132", (1, 13), (2,))
    assert frameworks.served("1.13.0a0+git7c98e70", (1, 13), (2,))
    assert not frameworks.served("1.12.1", (1, 13), (2,))
    assert not frameworks.served("3.0.0", (1, 13), (2,))
    assert frameworks.span((1, 13), (2,)) == "1.13 to 2.x"


# ---- what the wheel holds ----

def test_wheel_is_one_abi3_manylinux_wheel(wheel):
    assert re.match(r"hvd-[0-9.]+-cp39-abi3-%s\.whl$" % POLICY, os.path.basename(wheel)), wheel


def test_wheel_holds_every_library_and_program(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for want in ["hvd/_C.abi3.so", "hvd/_bin/hvdrun", "hvd/_bin/hvd-bench", "hvd/_bin/hvd-report",
                 "hvd/lib/libhvd.so.0", "hvd/include/hvd.h",
                 "hvd/tensorflow/_hvd_tf_ops.so", "hvd/jax/_hvd_jax.so",
                 "hvd/common/frameworks.py", "hvd/torch/__init__.py"]:
        assert want in names, (want, names)
    # What it needs beyond glibc, and nothing else (zlib only were anything
    # in it to need zlib: Debian 12's libcrypto does not).
    bundled = [os.path.basename(n) for n in names if n.startswith("hvd.libs/") and n[9:]]
    for lib in ["libcrypto", "libyaml"]:
        assert [b for b in bundled if b.startswith(lib + "-")], (lib, bundled)
    assert all(re.match(r"lib(crypto|yaml-0|z)-[0-9a-f]{8}\.so", b) for b in bundled), bundled


def test_wheel_bundles_no_framework_library(wheel):
    libs = [n for n in zipfile.ZipFile(wheel).namelist() if ".so" in os.path.basename(n)]
    framework = re.compile(r"lib(tensorflow|torch|c10|jax|xla|mxnet|python|mpi|cudart|nccl|"
                           r"stdc\+\+|gomp|openblas)")
    assert not [n for n in libs if framework.match(os.path.basename(n))], libs


def elves(root):
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    yield p


def test_no_absolute_run_path(unpacked):
    found = list(elves(unpacked))
    assert len(found) >= 8, found
    for elf in found:
        dyn = subprocess.run(["readelf", "-d", elf], capture_output=True, text=True,
                             check=True).stdout
        for paths in re.findall(r"\((?:RPATH|RUNPATH)\)\s+Library r(?:un)?path: \[(.*)\]", dyn):
            for p in paths.split(":"):
                assert p.startswith("$ORIGIN"), (elf, paths)


@pytest.mark.parametrize("lib,api", [("tensorflow/_hvd_tf_ops.so", "TF_"),
                                     ("jax/_hvd_jax.so", None), ("mxnet/_hvd_mx.so", "MX")])
def test_framework_libraries_bind_only_to_the_c_api(unpacked, lib, api):
    """What ties a binding's library to its framework: the functions of its
    C API (TF_*, MX*; XLA's FFI comes through the call frame), bound when
    the binding loads it; no framework library is needed by name."""
    path = unpacked / "hvd" / lib
    if not path.exists():
        pytest.skip("%s is not in the wheel (no MXNet venv where it was built)" % lib)
    dyn = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", dyn)
    assert set(needed) <= {"libstdc++.so.6", "libgcc_s.so.1", "libc.so.6", "libm.so.6",
                           "ld-linux-x86-64.so.2"}, needed
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(path)], capture_output=True,
                               text=True, check=True).stdout.split("\n")
    names = [line.split()[-1] for line in undefined if line.strip()]
    foreign = [n for n in names if "@" not in n and not n.startswith(("_ITM_", "__gmon"))
               and not (api and n.startswith(api))]
    assert not foreign, foreign


def test_auditwheel_show_is_clean(wheel):
    out = subprocess.run([os.path.join(TOOLS, "bin", "auditwheel"), "show", wheel],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert 'consistent with the following platform tag: "%s"' % POLICY in text, out.stdout


# ---- installed, without a compiler and without any framework ----

def test_check_build_lists_every_framework_the_wheel_holds(venv, unpacked):
    v, env = venv
    out = subprocess.run([str(v / "bin" / "hvdrun"), "--check-build"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    mx = (unpacked / "hvd" / "mxnet" / "_hvd_mx.so").exists()
    for name, have in [("TensorFlow", True), ("PyTorch", True), ("Keras", True), ("JAX", True),
                       ("MXNet", mx), ("MPI", False)]:
        assert "    [%s] %s\n" % ("X" if have else " ", name) in out.stdout, out.stdout


def test_hvd_and_hvd_run_work_without_a_framework(venv, tmp_path):
    """import hvd and hvd.run(fn, np=2) in a venv with no framework (only
    cloudpickle, hvd.run's one dependency, on PYTHONPATH)."""
    import cloudpickle
    deps = tmp_path / "deps"
    shutil.copytree(os.path.dirname(cloudpickle.__file__), deps / "cloudpickle")
    v, env = venv
    for name in ["torch", "tensorflow", "jax", "mxnet", "keras", "numpy"]:
        assert py(venv, "import %s" % name).returncode != 0, name
    out = subprocess.run([str(v / "bin" / "python"), os.path.join(SOURCE, "tests", "wheel",
                                                                    "smoke.py"), "run"],
                         env=dict(env, PYTHONPATH=str(deps)), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "smoke run ok" in out.stdout, out.stdout + out.stderr
    assert str(v) in py(venv, "import hvd; print(hvd.run.__module__, hvd.__file__)").stdout


@pytest.mark.parametrize("binding", BINDINGS)
def test_each_binding_says_what_is_missing(venv, binding):
    module, name, _, oldest, newest = frameworks.RANGES["hvd." + binding]
    out = py(venv, "import hvd.%s" % binding)
    assert out.returncode != 0
    assert "ImportError: hvd.%s needs %s %s, which is not installed here: pip install" % (
        binding, name, frameworks.span(oldest, newest)) in out.stderr, out.stderr


@pytest.mark.parametrize("binding,version", [
    ("tensorflow", "2.15.1"), ("tensorflow", "2.22.0"), ("keras", "2.15.0"), ("torch", "1.12.1"),
    ("jax", "0.4.30"), ("jax", "0.11.0"), ("mxnet", "1.8.0")])
def test_a_version_not_served_is_refused(venv, tmp_path, binding, version):
    """A framework of another version (a stand-in package that has only
    __version__): the binding refuses it at import with the version and the
    range, before loading any library of its own."""
    module, name, pip_name, oldest, newest = frameworks.RANGES["hvd." + binding]
    fake = tmp_path / "fake" / module
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = %r\n" % version)
    out = py(venv, "import hvd.%s" % binding, {"PYTHONPATH": str(tmp_path / "fake")})
    assert out.returncode != 0
    want = "ImportError: hvd.%s serves %s %s; this is %s %s (%s)" % (
        binding, name, frameworks.span(oldest, newest), name, version, fake / "__init__.py")
    assert want in out.stderr, out.stderr
    assert "pip install '%s>=" % pip_name in out.stderr


# ---- one cell of the matrix: the project's pinned versions ----

def test_pinned_cell_of_the_matrix(wheel, tmp_path):
    if not os.environ.get("HVD_VENV_PYTHON"):
        pytest.skip("no project venv (configure with -DHVD_VENV_PYTHON=...; scripts/test.sh does)")
    env = dict(os.environ, HVD_WHEEL_VENVS=str(tmp_path))
    env.pop("PYTHONPATH", None)
    out = subprocess.run([os.path.join(SOURCE, "scripts", "wheel-matrix.sh"), wheel, "pinned"],
                         env=env, capture_output=True, text=True, timeout=1500)
    assert out.returncode == 0, out.stdout + out.stderr[-5000:]
    row = [line for line in out.stdout.splitlines() if line.startswith("| pinned |")]
    assert row and "FAIL" not in row[0], out.stdout
    for b in ["torch", "tensorflow", "keras", "jax", "run"]:
        assert "%s pass" % b in row[0], row
