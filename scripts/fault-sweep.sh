#!/usr/bin/env bash
# The fault sweep: builds libhvd.so with fault injection under ASan+UBSan
# (build-fault/, HVD_FAULT_INJECTION=ON) and runs tests/fault/scenario.c
# once per failure point (tests/fault/sweep.py): alone, and as a job of 2
# ranks with the fault in rank 0, then in rank 1; each with the realistic
# failure of every wrapped call (ENOMEM, ECONNRESET, EMFILE, ...), then
# with EINTR and with EAGAIN where those can happen, then with every call
# failing from some point on (persistent).  Every run must end
# with success or an error and its message on every rank: no crash, hang,
# leak or sanitizer report, and hvd_init works again afterwards.
#
#   scripts/fault-sweep.sh          every call site failed at least once (the test command)
#   scripts/fault-sweep.sh calls    every n-th call, n = 1, 2, ... (the long run)
set -euo pipefail
cd "$(dirname "$0")/.."
by=${1:-sites}
case "$by" in sites|calls) ;; *) echo "usage: scripts/fault-sweep.sh [sites|calls]" >&2; exit 2 ;; esac
scripts/deps.sh test

dir=build-fault
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=OFF \
  -DHVD_FAULT_INJECTION=ON -DHVD_SANITIZE=address,undefined >/dev/null
cmake --build "$dir" -j "$(nproc)" --target hvdrun fault_scenario >/dev/null

failed=0
sweep() {
  /usr/bin/python3 tests/fault/sweep.py --build "$dir" --by "$by" --hvd-timeout 1 "$@" || failed=1
}
for errno in hard eintr eagain; do
  [ "$errno" != eagain ] && sweep --np 1 --errno "$errno" # alone: no socket to say EAGAIN
  sweep --np 2 --rank 0 --errno "$errno"
  sweep --np 2 --rank 1 --errno "$errno"
done
# Persistent faults (every call after the first fails too): the error
# paths themselves under failure.  Alone every n takes seconds; a job of
# 2 ranks only in the long run.
sweep --np 1 --persist --by calls
if [ "$by" = calls ]; then
  sweep --np 2 --rank 0 --persist
  sweep --np 2 --rank 1 --persist
fi
if [ "$failed" -ne 0 ]; then
  echo "fault sweep: FAILED (the lines starting FAIL say how to run each again)" >&2
  exit 1
fi
echo "fault sweep: every failure point forced was handled"
