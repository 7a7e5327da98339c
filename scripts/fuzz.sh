#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: one per decoder of bytes from
# outside the process) with clang under ASan+UBSan in build-fuzz/, and runs
# each for SECONDS (default 20), starting from the committed seeds
# (tests/fuzz/corpus/<target>) and the inputs that once failed
# (tests/fuzz/regress/<target>).  Fails on the first crash, sanitizer
# report, leak, timeout (an input taking over 10 s: a hang) or allocation
# over 64 MB (a length field trusted before it was checked), leaving the
# input in build-fuzz/artifacts/ and the log in build-fuzz/logs/.
#
#   scripts/fuzz.sh [SECONDS]         each target for SECONDS (the test command: 20)
#   HVD_FUZZ_RUNS=1000000 scripts/fuzz.sh   each target for that many inputs (the long run)
#   HVD_FUZZ_ONLY="frame auth" ...    only those targets
#
# It prints, per target, the inputs run and what failed.  New inputs that
# reach new code go to build-fuzz/corpus/<target> (kept between runs; the
# committed seeds are never written).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
scripts/deps.sh test

dir=build-fuzz
targets=(frame auth tcp rdzv_client rdzv_server message shm_seg agent_proto)
[ -n "${HVD_FUZZ_ONLY:-}" ] && read -r -a targets <<<"$HVD_FUZZ_ONLY"

CC=clang cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=OFF \
  -DHVD_BUILD_FUZZ=ON -DHVD_SANITIZE=address,undefined >/dev/null
cmake --build "$dir" -j "$(nproc)" --target hvd_fuzz >/dev/null
mkdir -p "$dir/logs" "$dir/artifacts"

if [ -n "${HVD_FUZZ_RUNS:-}" ]; then
  limit=(-runs="$HVD_FUZZ_RUNS")
  echo "fuzz: each target for $HVD_FUZZ_RUNS inputs"
else
  limit=(-max_total_time="$seconds")
  echo "fuzz: each target for $seconds s"
fi

# What ended a run, from its log: ok, crash, leak, timeout, oom.
verdict() {
  local log=$1 rc=$2
  if [ "$rc" -eq 0 ]; then echo ok
  elif grep -q "ERROR: LeakSanitizer" "$log"; then echo leak
  elif grep -q "ERROR: libFuzzer: timeout" "$log"; then echo timeout
  elif grep -Eq "ERROR: libFuzzer: (out-of-memory|malloc limit)" "$log"; then echo oom
  else echo crash
  fi
}

printf '%-12s %12s %10s %s\n' target inputs "exec/s" result
failed=0
for t in "${targets[@]}"; do
  log="$dir/logs/$t.log"
  mkdir -p "$dir/corpus/$t"
  corpora=("$dir/corpus/$t" "tests/fuzz/corpus/$t")
  [ -d "tests/fuzz/regress/$t" ] && corpora+=("tests/fuzz/regress/$t")
  rc=0
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "$dir/tests/fuzz/fuzz_$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=64 -print_final_stats=1 -artifact_prefix="$dir/artifacts/$t-" \
    "${corpora[@]}" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  result=$(verdict "$log" "$rc")
  printf '%-12s %12s %10s %s\n' "$t" "${runs:-?}" "${speed:-?}" "$result"
  if [ "$result" != ok ]; then
    failed=1
    grep -E "ERROR|SUMMARY|runtime error|property failed|Test unit written" "$log" | head -20 >&2
    echo "fuzz: $t: $result; the log is $log" >&2
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED" >&2
  exit 1
fi
echo "fuzz: no crash, leak, timeout or oversized allocation"
