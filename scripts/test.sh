#!/usr/bin/env bash
# Runs every test: the whole suite in a release build, again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the multi-threaded
# unit tests under ThreadSanitizer.  Installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh test

jobs=$(nproc)
# run_suite BUILD_DIR "CMAKE ARGS" [CTEST ARGS...]
run_suite() {
  local dir=$1 cmake_args=$2
  shift 2
  # shellcheck disable=SC2086
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release $cmake_args >/dev/null
  cmake --build "$dir" -j "$jobs"
  (cd "$dir" && ctest --output-on-failure --timeout 900 "$@")
}

echo "== release build =="
run_suite build ""
echo "== ASan + UBSan build =="
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_suite build-asan "-DHVD_SANITIZE=address,undefined"
echo "== TSan build: the engine and the threaded unit tests =="
TSAN_OPTIONS=halt_on_error=1 run_suite build-tsan "-DHVD_SANITIZE=thread" \
  -R '^unit\.|^mpi\.test_(engine|join|process_sets|fusion|collectives)\.'
