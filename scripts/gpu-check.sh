#!/usr/bin/env bash
# scripts/gpu-check.sh -- hvd's GPU checks in one command, for the GPU
# machine (one H100 or H200; nothing installable there, no network), and
# harmless anywhere else: without a GPU the GPU tests say why they were
# skipped.  Prints one summary line last:
#   gpu-check: PASS|FAIL|SKIP (...) in N s
# and, where $OUT is set (the device tool), keeps the whole log in
# $OUT/gpu-check.log.  docs/gpu.md says what it checks.
#
#   scripts/gpu-check.sh --pack   on a development machine: build with CUDA
#                                 into build-gpu/ and put the test programs
#                                 and the shared libraries they need that a
#                                 bare machine may lack into build-gpu/carry/,
#                                 with hvd.torch and its hvd._C built for the
#                                 GPU machine's Python (3.12: PY312=python)
#                                 and pytest (carry that folder to the GPU
#                                 machine)
#   scripts/gpu-check.sh          run the checks: from build-gpu/carry/ when
#                                 it is there, else build them here first
#
# JOBS=N: parallel compile jobs (default: every core).  Finishes in well
# under 8 minutes: each step has its own time limit.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
start=$SECONDS
BUILD=build-gpu
CARRY=$BUILD/carry
# The programs, as paths in the build tree.
PROGRAMS=(tests/test_cuda_loader tests/test_gpu_staging tests/test_gpu_nccl
  tests/test_staged_allreduce tests/test_device_staged tests/test_device_nccl hvdrun hvd-bench)
# hvd.torch's CUDA tests (pytest in every rank, through hvdrun).
TORCH_TESTS=tests/python/test_torch_cuda.py
# The GPU machine's Python: hvd._C is a CPython extension, built for it.
PY_CARRIED=3.12

log() { echo "gpu-check: $*"; }
finish() { # finish STATUS DETAIL
  echo "gpu-check: $1 ($2) in $((SECONDS - start)) s"
  [ "$1" = FAIL ] && exit 1
  exit 0
}

# The GPU build: CUDA and NCCL on, the GPU tests, nothing optional
# (MPI off) so that the programs need few libraries.
# PY_OPTS: the Python hvd._C is for, decided before the first configure
# (FindPython3 does not always take a changed one at once).
PY_OPTS=()
build() {
  timeout 120 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=ON \
    -DHVD_WITH_CUDA=ON -DHVD_WITH_MPI=OFF -DHVD_SANITIZE= "${PY_OPTS[@]}" >/dev/null &&
    timeout 240 cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" \
      --target "${PROGRAMS[@]##*/}" >/dev/null
}

# hvd._C and the package into $BUILD/python for Python $1 (CUDA on, as
# above; needs that Python's headers).
build_python() {
  timeout 120 cmake -S . -B "$BUILD" -DPython3_EXECUTABLE="$1" >/dev/null &&
    timeout 240 cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" \
      --target hvd_python hvd_python_files >/dev/null
}

# pytest and what it imports, from a Python that has it ($1), into $2:
# pure Python, for a machine whose Python lacks it.  Of pygments (which
# pytest imports) only the lexers pytest loads.
carry_pytest() {
  local site
  site=$("$1" -c 'import os, pytest; print(os.path.dirname(os.path.dirname(pytest.__file__)))') ||
    return 1
  mkdir -p "$2" &&
    cp -r "$site"/{pytest,_pytest,pluggy,iniconfig,packaging,pygments,py.py} "$2"/ &&
    find "$2" -name __pycache__ -prune -exec rm -rf {} + &&
    find "$2/pygments/lexers" -mindepth 1 -not -name __init__.py -not -name _mapping.py \
      -not -name python.py -not -name diff.py -exec rm -rf {} +
}

# The libraries a program loads, beyond the C library's own (those must
# be the machine's): what a bare machine may lack.
libs_to_carry() {
  ldd "$1" | awk '$3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so'
}

pack() {
  local py="" p
  for p in ${PY312:-} python$PY_CARRIED "$HOME/.pyenv/versions/$PY_CARRIED"*/bin/python; do
    py=$("$p" -c 'import sys; print(sys.executable)' 2>/dev/null) && break
  done
  [ -n "$py" ] || { echo "gpu-check.sh --pack: no python$PY_CARRIED (set PY312)" >&2; exit 1; }
  PY_OPTS=(-DPython3_EXECUTABLE="$py")
  build || { echo "gpu-check.sh --pack: the build failed" >&2; exit 1; }
  rm -rf "$CARRY" && mkdir -p "$CARRY/bin" "$CARRY/lib"
  for p in "${PROGRAMS[@]}"; do
    cp "$BUILD/$p" "$CARRY/bin/"
    libs_to_carry "$BUILD/$p" | xargs -r cp -L -t "$CARRY/lib/"
  done
  # for bench/shm-ceiling on the GPU machine's cores (docs/algorithms.md)
  cc -O2 -o "$CARRY/bin/memcpy_bw" bench/memcpy_bw.c ||
    { echo "gpu-check.sh --pack: bench/memcpy_bw.c failed" >&2; exit 1; }
  rm -f "$BUILD"/python/hvd/_C*.so # one built for another Python before
  build_python "$py" || { echo "gpu-check.sh --pack: hvd._C for $py failed" >&2; exit 1; }
  mkdir -p "$CARRY/python"
  cp -r "$BUILD/python/hvd" "$CARRY/python/"
  find "$CARRY/python" -name __pycache__ -prune -exec rm -rf {} +
  libs_to_carry "$CARRY"/python/hvd/_C*.so | xargs -r cp -L -t "$CARRY/lib/"
  LD_LIBRARY_PATH=$CARRY/lib PYTHONPATH=$CARRY/python "$py" -c 'import hvd._C' ||
    { echo "gpu-check.sh --pack: the carried hvd._C does not load in $py" >&2; exit 1; }
  carry_pytest "${HVD_VENV_PYTHON:-/root/.cache/hvd/venv/bin/python}" "$CARRY/pylib" ||
    echo "gpu-check.sh --pack: no pytest carried (the GPU machine's Python must have it)" >&2
  du -sh "$CARRY"
  echo "carry $CARRY to the GPU machine and run scripts/gpu-check.sh there"
  exit 0
}

[ "${1:-}" = --pack ] && pack
[ $# -eq 0 ] || { echo "usage: scripts/gpu-check.sh [--pack]" >&2; exit 2; }

logfile=/dev/null
[ -n "${OUT:-}" ] && logfile=$OUT/gpu-check.log
exec > >(tee "$logfile") 2>&1

# ---- the programs: carried, or built here ----
pkg=""
if [ -x "$CARRY/bin/hvdrun" ]; then
  bin=$CARRY/bin
  pkg=$CARRY/python
  export LD_LIBRARY_PATH="$PWD/$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  log "programs from $CARRY (built elsewhere, carried)"
else
  log "no $CARRY: building with CUDA into $BUILD"
  build ||
    finish FAIL "cannot build here (cmake, cmocka and OpenSSL's headers are needed); run scripts/gpu-check.sh --pack on a development machine and carry $CARRY"
  mkdir -p "$BUILD/bin"
  for p in "${PROGRAMS[@]}"; do ln -sf "$PWD/$BUILD/$p" "$BUILD/bin/"; done
  bin=$BUILD/bin
fi

# Where the machine may keep CUDA's libraries and tools besides the
# loader's usual places: the toolkit, and the NVIDIA wheels of its Python
# (PyTorch's libcudart.so.13 and libnccl.so.2), after everything else.
export PATH="$PATH:/usr/local/cuda/bin"
pyprefix=$(python3 -c 'import sys; print(sys.prefix)' 2>/dev/null)
for d in /usr/local/cuda/lib64 "$pyprefix"/lib/python3*/site-packages/nvidia/*/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
export LD_LIBRARY_PATH

# ---- the card, if any ----
card=""
if command -v nvidia-smi >/dev/null 2>&1; then
  card=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
fi
if [ -n "$card" ]; then
  log "card: $card"
  export HVD_TEST_EXPECT_GPU=1 # a GPU is here: a test that finds none fails
else
  log "no GPU visible (nvidia-smi lists none): the GPU tests will skip"
fi

# ---- the tests ----
results=()
failed=0
skipped=0
run_step() { # run_step NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 rc
  shift 2
  log "== $name =="
  timeout "$limit" "$@"
  rc=$?
  case $rc in
    0) results+=("$name ok") ;;
    77) results+=("$name skipped"); skipped=$((skipped + 1)) ;;
    124) results+=("$name TIMED OUT after ${limit} s"); failed=$((failed + 1)) ;;
    *) results+=("$name FAILED ($rc)"); failed=$((failed + 1)) ;;
  esac
}
run_step loader 60 "$bin/test_cuda_loader"
run_step staging 120 "$bin/test_gpu_staging"
run_step nccl 120 "$bin/test_gpu_nccl"
# hvd's allreduce on staged chunks against the host path, every rank on
# the one GPU (on the host stand-in where there is none).
copier=host
[ -n "$card" ] && copier=cuda
for np in 1 2 4; do
  run_step "staged-allreduce-np$np" 120 env HVD_STAGING_COPIER=$copier \
    HOROVOD_GLOO_TIMEOUT_SECONDS=30 "$bin/hvdrun" -np "$np" "$bin/test_staged_allreduce"
done
# The engine's device path (hvd_opts.device): cudaMalloc'd tensors through
# the engine's CUDA copier, bitwise against the host path.
for np in 1 2 4; do
  run_step "device-staged-np$np" 120 env HVD_STAGING_COPIER=$copier \
    HOROVOD_GLOO_TIMEOUT_SECONDS=30 "$bin/hvdrun" -np "$np" "$bin/test_device_staged"
done
# The engine's NCCL path (HOROVOD_GPU_OPERATIONS=NCCL): the same ops
# bitwise against the host path.  np 1 only: NCCL refuses two ranks on
# one GPU.  Skips (77) without a GPU.
run_step nccl-engine-np1 120 env HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_GLOO_TIMEOUT_SECONDS=30 \
  "$bin/hvdrun" -np 1 "$bin/test_device_nccl"

# ---- hvd.torch on CUDA tensors: the machine's PyTorch, every op against
# the CPU path, pytest in every rank through hvdrun ----
# The first Python with PyTorch whose version hvd._C is built for.
torch_python() {
  local p v want=$1
  for p in ${TORCH_PYTHON:-} python3 python /usr/bin/python3; do
    v=$("$p" -c 'import sys, torch; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) ||
      continue
    [ -z "$want" ] || [ "$v" = "$want" ] && { command -v "$p"; return 0; }
  done
  return 1
}
# pytest, exit 77 where every CUDA test skipped for want of a device.
# shellcheck disable=SC2317 # run through bash -c (run_step times it out)
torch_cuda_tests() {
  local out rc
  out=$(mktemp)
  "$@" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] && grep -q "no CUDA device" "$out" && rc=77
  rm -f "$out"
  return "$rc"
}
export -f torch_cuda_tests
# torch_step sets these for the bench step: the Python with PyTorch, the
# folder holding the hvd package built for it, or why there is none.
torch_py="" torch_pkg="" torch_why=""
torch_step() {
  local py why=""
  if [ -n "$pkg" ]; then
    py=$(torch_python "$PY_CARRIED") ||
      why="no Python $PY_CARRIED with PyTorch here for the carried hvd._C"
  elif py=$(torch_python ""); then
    log "building hvd._C for $py"
    if build_python "$py" || build_python "$py"; then # the second: FindPython3, see PY_OPTS
      pkg=$BUILD/python
    else
      why="cannot build hvd._C for $py here (its headers?)"
    fi
  else
    why="no Python with PyTorch here"
  fi
  if [ -n "$why" ]; then
    torch_why=$why
    [ -n "$card" ] && { results+=("torch-cuda FAILED ($why)"); failed=$((failed + 1)); return; }
    results+=("torch-cuda skipped ($why)"); skipped=$((skipped + 1)); return
  fi
  torch_py=$py torch_pkg=$PWD/$pkg
  local pypath=$PWD/$pkg
  "$py" -c 'import pytest' 2>/dev/null || pypath=$pypath:$PWD/$CARRY/pylib
  log "torch: $py, $("$py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)')"
  for np in 1 2; do
    run_step "torch-cuda-np$np" 180 env PYTHONPATH="$pypath" HOROVOD_GLOO_TIMEOUT_SECONDS=30 \
      bash -c 'torch_cuda_tests "$@"' _ "$bin/hvdrun" -np "$np" "$py" -m pytest -q \
      -p no:cacheprovider -rs "$TORCH_TESTS"
  done
}
torch_step

# ---- the GPU benchmark (bench/torch-cuda-allreduce): hvd's staged
# allreduce against gloo on CUDA tensors at np 2 and 4, the NCCL ceilings
# at np 1; its tables stay in the log.  The torch step's Python and hvd
# package; skipped (77) where PyTorch sees no GPU ----
if [ -n "$torch_py" ]; then
  run_step bench 200 env PY="$torch_py" PKG="$torch_pkg" HVDRUN="$bin/hvdrun" \
    HOROVOD_GLOO_TIMEOUT_SECONDS=60 bench/torch-cuda-allreduce
elif [ -n "$card" ]; then
  results+=("bench FAILED ($torch_why)"); failed=$((failed + 1))
else
  results+=("bench skipped ($torch_why)"); skipped=$((skipped + 1))
fi

# compute-sanitizer over the C GPU tests: the pipeline alone, and the
# engine's device path at np 1 (the sanitizer inside the rank).
if [ -n "$card" ] && command -v compute-sanitizer >/dev/null 2>&1; then
  sanitize=(compute-sanitizer --tool memcheck --error-exitcode 1)
  run_step compute-sanitizer-staging 120 "${sanitize[@]}" "$bin/test_gpu_staging"
  run_step compute-sanitizer-device-staged 180 env HVD_STAGING_COPIER=cuda \
    HOROVOD_GLOO_TIMEOUT_SECONDS=60 "$bin/hvdrun" -np 1 "${sanitize[@]}" "$bin/test_device_staged"
elif [ -n "$card" ]; then
  results+=("compute-sanitizer not installed")
fi

joined=$(IFS=';'; echo "${results[*]}")
detail="${card:-no GPU}; ${joined//;/, }"
if [ "$failed" -gt 0 ]; then
  finish FAIL "$detail"
elif [ -z "$card" ] || [ "$skipped" -gt 0 ]; then
  finish SKIP "$detail"
fi
finish PASS "$detail"
