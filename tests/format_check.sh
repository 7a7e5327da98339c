#!/bin/sh
# Every C file (*.c, *.h) changed since .clang-format came into the
# repository is formatted by it, whole (docs/style.md).  "Changed" is what
# differs from the commit that added .clang-format: on CI's clean checkout
# of main, every file a commit has touched since; in a working tree, its
# uncommitted and untracked files too.  So a file, once touched, stays
# formatted, and nothing else is reformatted for it.
#
# Usage: tests/format_check.sh [--fix] [REPO_ROOT]
#   (ctest: format.changed; a second or two)
#   --fix  formats those files in place instead of checking them
# CLANG_FORMAT names the formatter (default clang-format-14, which
# scripts/deps.sh test installs).
set -eu
fix=0
if [ "${1:-}" = "--fix" ]; then
  fix=1
  shift
fi
root=${1:-$(dirname "$0")/..}
cf=${CLANG_FORMAT:-clang-format-14}
fail() {
  echo "format_check: FAILED: $*" >&2
  exit 1
}

command -v "$cf" >/dev/null 2>&1 || fail "no $cf (scripts/deps.sh test installs clang-format-14)"
git -C "$root" rev-parse --verify -q HEAD >/dev/null 2>&1 ||
  fail "$root is not a git checkout: cannot tell which files changed"
base=$(git -C "$root" log --diff-filter=A --format=%H -- .clang-format | tail -n 1)
[ -n "$base" ] || fail "no commit adds .clang-format in $root's history"
# In a shallow clone the oldest commit fetched seems to add every file: then
# only what differs from it is seen.  Said, not failed (CI clones in full).
if [ "$(git -C "$root" rev-parse --is-shallow-repository)" = true ] &&
  (cd "$root" && grep -q "^$base" "$(git rev-parse --git-path shallow)") 2>/dev/null; then
  echo "format_check: note: shallow clone; only the changes since ${base%"${base#???????}"}, its oldest commit, are seen" >&2
fi

# Relative to root: committed or not since base, not deleted; untracked.
files=$(cd "$root" && {
  git diff --name-only --diff-filter=d "$base" -- '*.c' '*.h'
  git ls-files --others --exclude-standard -- '*.c' '*.h'
} | sort -u)
if [ -z "$files" ]; then
  echo "format_check: ok: no C file changed since .clang-format came in (${base%"${base#???????}"})"
  exit 0
fi
n=$(echo "$files" | wc -l)

if [ "$fix" = 1 ]; then
  # shellcheck disable=SC2086
  (cd "$root" && "$cf" -i --style=file $files)
  echo "format_check: formatted $n file(s)"
  exit 0
fi

# shellcheck disable=SC2086
out=$(cd "$root" && "$cf" --dry-run --Werror --style=file $files 2>&1) && rc=0 || rc=$?
if [ "$rc" != 0 ]; then
  bad=$(echo "$out" | sed -n 's/^\([^ :]*\.[ch]\):[0-9]*:[0-9]*: .*/\1/p' | sort -u)
  [ -n "$bad" ] || bad=$out
  echo "format_check: changed since .clang-format came in, and not formatted by it:" >&2
  echo "$bad" | sed 's/^/  /' >&2
  fail "$(echo "$bad" | wc -l) of $n changed C file(s); tests/format_check.sh --fix formats them"
fi
echo "format_check: ok: the $n C file(s) changed since .clang-format came in are formatted"
