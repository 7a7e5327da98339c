#!/usr/bin/env bash
# Runs every test: first the README's two commands in the README's order
# from a fresh clone of the committed HEAD (tests/readme_order.sh), then
# the whole suite in a release build, again under AddressSanitizer +
# UndefinedBehaviorSanitizer, the multi-threaded unit tests under
# ThreadSanitizer, every fuzz target for HVD_FUZZ_SECONDS (10) each
# (scripts/fuzz.sh), and the fault sweep over every call site
# (scripts/fault-sweep.sh).  Installs what it needs.
#
# Every suite sets the options it depends on explicitly, whatever its build
# directory cached before (scripts/train.sh configures build/ with
# HVD_BUILD_TESTS=OFF), and a suite that finds no tests fails.
#
# HVD_TEST_ONLY=list: configure the release suite in build/, list its tests
# (ctest -N) and stop; nothing is built or run, and the venv is not made:
# without it, the suites that need it are not listed (said on stderr).
# tests/readme_order.sh uses it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test
jobs=$(nproc)
# The PyPI packages (PyTorch 2.x, TensorFlow, JAX, ...) in the project's
# venv (scripts/venv.sh); the suites that need them run its python.
# MXNet 1.9.1 needs an older NumPy: a second venv (scripts/venv-mxnet.sh)
# for hvd.mxnet and its suites.
venv_python=
mxnet_python=
# configure_suite BUILD_DIR [CMAKE ARGS...]
configure_suite() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=ON \
    -DHVD_VENV_PYTHON="$venv_python" -DHVD_MXNET_PYTHON="$mxnet_python" "$@" >/dev/null
}
# run_suite BUILD_DIR "CMAKE ARGS" [CTEST ARGS...]
run_suite() {
  local dir=$1 cmake_args=$2
  shift 2
  # shellcheck disable=SC2086
  configure_suite "$dir" $cmake_args
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --no-tests=error --output-on-failure --timeout 900 "$@")
}

case "${HVD_TEST_ONLY:-}" in
  "") ;;
  list)
    echo "== release build: the suite's tests (HVD_TEST_ONLY=list) =="
    venv=$(scripts/venv.sh --path) # where it is; listing makes nothing
    if [ -x "$venv/bin/python" ]; then
      venv_python=$venv/bin/python
    else
      echo "test.sh: no venv at $venv (scripts/venv.sh makes it, and scripts/test.sh" \
        "without HVD_TEST_ONLY): its suites (PyTorch 2.x, TensorFlow, JAX, Spark, Ray)" \
        "are not listed" >&2
    fi
    venv=$(scripts/venv-mxnet.sh --path)
    if [ -x "$venv/bin/python" ]; then
      mxnet_python=$venv/bin/python
    else
      echo "test.sh: no MXNet venv at $venv (scripts/venv-mxnet.sh makes it): hvd.mxnet's" \
        "suites are not listed" >&2
    fi
    configure_suite build -DHVD_SANITIZE=
    listing=$(cd build && ctest -N)
    echo "$listing"
    # ctest -N does not honour --no-tests=error: check the count here.
    if ! grep -Eq '^Total Tests: [1-9]' <<<"$listing"; then
      echo "test.sh: the release suite has no tests" >&2
      exit 1
    fi
    exit 0 ;;
  *) echo "test.sh: unknown HVD_TEST_ONLY='$HVD_TEST_ONLY' (known: list)" >&2; exit 2 ;;
esac
venv_python=$(scripts/venv.sh)/bin/python
mxnet_python=$(scripts/venv-mxnet.sh)/bin/python

# section TITLE: ends the section before (its seconds, so that CI's budget
# can be read from the log) and starts the next.
section_start=$SECONDS
section() {
  [ -n "${section_title:-}" ] && echo "== took $((SECONDS - section_start)) s: $section_title =="
  section_title=$1 section_start=$SECONDS
  [ -n "$1" ] && echo "== $1 =="
  return 0
}
trap 'section ""' EXIT

section "the README's two commands, in order, from a fresh clone of HEAD"
tests/readme_order.sh
section "release build"
run_suite build "-DHVD_SANITIZE="
section "ASan + UBSan build"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite build-asan "-DHVD_SANITIZE=address,undefined"
section "TSan build: the engine and the threaded unit tests"
TSAN_OPTIONS=halt_on_error=1 run_suite build-tsan "-DHVD_SANITIZE=thread" \
  -R '^unit\.|^mpi\.test_(engine|join|process_sets|fusion|collectives|cache_path|autotune_ranks|device_staged)\.'
section "fuzz: every decoder of outside bytes, ${HVD_FUZZ_SECONDS:-10} s each"
scripts/fuzz.sh "${HVD_FUZZ_SECONDS:-10}"
section "fault injection: every call site of libhvd.so failed in turn"
scripts/fault-sweep.sh sites
