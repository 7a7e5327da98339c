"""pip's way in: builds and installs the hvd Python package (hvd, hvd.common,
hvd.torch) with its extension hvd._C, and hvdrun, hvd-bench and hvd-report
as commands, by running this project's CMake build.

    /usr/bin/python3 -m venv --system-site-packages venv
    venv/bin/python -m pip install --no-build-isolation .

Offline, with Debian's setuptools, wheel and pip; Debian's PyTorch and
NumPy come from the system site-packages.  CMake builds in a directory
of setuptools' own (build/pip/...), or in HVD_CMAKE_BUILD_DIR when that
names an existing CMake build of this tree (the tests use theirs).  The
extension carries libhvd's objects (CMakeLists.txt), so nothing else is
needed at run time; the programs are installed inside the package
(hvd/_bin) and started by the console scripts of hvd/_launch.py, and
libhvd.so.0 with hvd.h for C programs in hvd/lib and hvd/include.

hvd._C is on CPython's limited API (_C.abi3.so), so the wheel is tagged
cp39-abi3: one serves CPython 3.9 and newer.  scripts/wheel.sh makes the
binary wheel users install (docs/install.md).
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ["hvdrun", "hvd-bench", "hvd-report"]
# CMake target: (package directory under hvd/, library file).  Not
# hvd_tf_xla (HOROVOD_ENABLE_XLA_OPS): C++ bound to the one TensorFlow it
# was built with, so a source build's alone (docs/tensorflow.md).
FRAMEWORK_LIBS = {"hvd_tf_ops": ("tensorflow", "_hvd_tf_ops.so"),
                  "hvd_jax": ("jax", "_hvd_jax.so"),
                  "hvd_mx": ("mxnet", "_hvd_mx.so")}


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(hvd VERSION ([0-9.]+)", f.read()).group(1)


class CMakeBuild(build_ext):
    """Builds hvd._C and the programs with CMake instead of compiling
    the extension's sources itself."""

    def build_extension(self, ext):
        build = os.environ.get("HVD_CMAKE_BUILD_DIR") or os.path.join(
            os.path.abspath(self.build_temp), "cmake")
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            subprocess.run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                            "-DHVD_BUILD_TESTS=OFF", "-DHVD_SANITIZE=",
                            "-DPython3_EXECUTABLE=" + sys.executable,
                            "-DHVD_VENV_PYTHON=" + sys.executable,
                            "-DHVD_MXNET_PYTHON=" + sys.executable], check=True)
        # The TensorFlow op library, JAX's FFI library and hvd.mxnet's are
        # built when this Python has TensorFlow / JAX / MXNet (CMake asks
        # HVD_VENV_PYTHON and HVD_MXNET_PYTHON).
        libs = [t for t in FRAMEWORK_LIBS if t in cmake_targets(build)]
        subprocess.run(["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target",
                        "hvd_python", "hvd"] + libs + PROGRAMS, check=True)
        built = glob.glob(os.path.join(build, "python", "hvd", "_C*.so"))
        if len(built) != 1:
            raise RuntimeError("CMake built no single hvd._C in %s: %s" % (build, built))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(built[0], target)
        bindir = os.path.join(os.path.dirname(target), "_bin")
        os.makedirs(bindir, exist_ok=True)
        for name in PROGRAMS:
            shutil.copy2(os.path.join(build, name), os.path.join(bindir, name))
        package_dir = os.path.dirname(target)
        for sub, src, name in [("lib", os.path.join(build, "libhvd.so.0"), "libhvd.so.0"),
                               ("include", os.path.join(ROOT, "include", "hvd.h"), "hvd.h")]:
            os.makedirs(os.path.join(package_dir, sub), exist_ok=True)
            shutil.copyfile(src, os.path.join(package_dir, sub, name))
        for target_name in libs:
            package, lib = FRAMEWORK_LIBS[target_name]
            os.makedirs(os.path.join(os.path.dirname(target), package), exist_ok=True)
            shutil.copyfile(os.path.join(build, "python", "hvd", package, lib),
                            os.path.join(os.path.dirname(target), package, lib))


def cmake_targets(build):
    """The targets CMake configured in `build`."""
    out = subprocess.run(["cmake", "--build", build, "--target", "help"], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[1].split(":")[0] for line in out.splitlines()
            if line.startswith("... ")}


setup(
    name="hvd",
    version=version(),
    description="Distributed data-parallel training in C, with horovod.torch's API",
    python_requires=">=3.9",
    package_dir={"": "python"},
    packages=["hvd", "hvd.common", "hvd.torch", "hvd.torch.elastic", "hvd.runner", "hvd.ray",
              "hvd.spark", "hvd.tensorflow", "hvd.tensorflow.keras", "hvd.keras", "hvd.jax",
              "hvd.mxnet"],
    # hvd.run, hvd.ray and hvd.spark move functions and results with cloudpickle.
    extras_require={"run": ["cloudpickle"], "ray": ["cloudpickle", "ray"],
                    "spark": ["cloudpickle", "pyspark"]},
    ext_modules=[Extension("hvd._C", sources=[], py_limited_api=True)],
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["%s = hvd._launch:%s" % (p, p.replace("-", "_"))
                                      for p in PROGRAMS]},
    zip_safe=False,
)
