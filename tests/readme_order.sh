#!/usr/bin/env bash
# The README's two commands, in the README's order, as a new user runs them:
# a fresh clone of this repository's committed HEAD, scripts/train.sh (one
# short epoch), then scripts/test.sh as far as the release suite's test
# listing (HVD_TEST_ONLY=list), without a venv (it must not make one).
# Fails unless the release suite still holds
# the whole suite (more than 100 tests, the launcher's and hvd.torch's
# among them) after train.sh configured build/ with HVD_BUILD_TESTS=OFF.
#
# It checks what is committed, not uncommitted edits of this working tree.
# Outside a git checkout (a tarball; no git) it says so and skips (exit 0).
# Its output goes to a log, printed when it fails.  About 2-3 minutes on
# 2 cores (a release build of hvdrun and the trainer, one epoch over 2000
# images, a configure).  Run by scripts/test.sh; alone:
#   tests/readme_order.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
min_tests=100

if ! command -v git >/dev/null 2>&1 || ! git -C "$root" rev-parse --verify -q HEAD >/dev/null; then
  echo "readme_order: skipped: $root is not a git checkout (or git is missing)"
  exit 0
fi
head=$(git -C "$root" rev-parse HEAD)

work=$(mktemp -d "${TMPDIR:-/tmp}/hvd-readme-order.XXXXXX")
log=$work/log
clone=$work/hvd
keep=1
trap '[ "$keep" = 1 ] || rm -rf "$work"' EXIT

fail() {
  {
    echo "readme_order: FAILED: $*"
    echo "---- output (from $log) ----"
    cat "$log"
    echo "---- end of output; the clone is kept in $clone ----"
    echo "readme_order: FAILED: $*"
  } >&2
  exit 1
}

start=$SECONDS
echo "readme_order: clone of $head in $clone; output in $log"
git clone -q --no-checkout "$root" "$clone" >"$log" 2>&1 ||
  fail "git clone $root"
git -C "$clone" checkout -q --detach "$head" >>"$log" 2>&1 || fail "git checkout $head"
[ ! -e "$clone/build" ] || fail "the fresh clone already has a build/"

echo "\$ scripts/train.sh --epochs 1 --train-limit 2000" >>"$log"
(cd "$clone" && scripts/train.sh --epochs 1 --train-limit 2000) >>"$log" 2>&1 ||
  fail "scripts/train.sh --epochs 1 --train-limit 2000 exited $?"
# rank 0's lines come through hvdrun as "[0]<stdout>:test_accuracy=0.52".
grep -Eq '(^|:)test_accuracy=[0-9]' "$log" || fail "scripts/train.sh printed no test_accuracy"

# An older scripts/test.sh ignores HVD_TEST_ONLY and would run everything.
grep -q 'HVD_TEST_ONLY' "$clone/scripts/test.sh" ||
  fail "the committed scripts/test.sh has no HVD_TEST_ONLY=list mode"
# A new user has no venv yet, and listing must not make one (8 GB).
echo "\$ HVD_VENV=$work/venv HVD_TEST_ONLY=list scripts/test.sh" >>"$log"
listing=$(cd "$clone" && HVD_VENV=$work/venv HVD_TEST_ONLY=list scripts/test.sh 2>&1) || {
  echo "$listing" >>"$log"
  fail "HVD_TEST_ONLY=list scripts/test.sh exited non-zero"
}
echo "$listing" >>"$log"
[ ! -e "$work/venv" ] || fail "HVD_TEST_ONLY=list scripts/test.sh made the venv"
grep -q "^test.sh: no venv at $work/venv " <<<"$listing" ||
  fail "HVD_TEST_ONLY=list scripts/test.sh did not say that the venv's suites are not listed"

total=$(sed -n 's/^Total Tests: \([0-9][0-9]*\)$/\1/p' <<<"$listing")
[ -n "$total" ] || fail "no 'Total Tests:' line in the release suite's listing"
[ "$total" -gt "$min_tests" ] ||
  fail "the release suite has $total tests after scripts/train.sh (want more than $min_tests)"
grep -Eq 'Test +#[0-9]+: launcher$' <<<"$listing" ||
  fail "the release suite has no launcher test"
py=$(grep -Ec 'Test +#[0-9]+: python\.torch\.' <<<"$listing" || true)
[ "$py" -ge 3 ] || fail "the release suite has $py python.torch tests (want 3: alone, np2, np4)"
acc=$(grep -Eo 'test_accuracy=[0-9.]+' "$log" | tail -n 1)

keep=0
echo "readme_order: ok: train.sh ($acc), then test.sh's release suite: $total tests" \
     "(launcher and $py python.torch among them) in $((SECONDS - start))s"
