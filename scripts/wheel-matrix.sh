#!/usr/bin/env bash
# Installs hvd's binary wheel (scripts/wheel.sh) into a fresh venv per cell
# of a matrix of Pythons and framework versions, with no compiler and no
# CMake on PATH, and runs each binding's smoke test (tests/wheel/smoke.py)
# at np 2 there.  Prints a Markdown table: per cell, each smoke test's
# result, the wheel's install time; the wheel's size above it
# (docs/install.md keeps the last full run's).
#
# Usage: scripts/wheel-matrix.sh WHEEL [CELL...]      (no CELL: every cell)
#   env: HVD_WHEEL_VENVS=~/.cache/hvd/wheel-matrix   the cells' venvs (wheel-CELL)
#        HVD_WHEEL_CACHE=~/.cache/hvd/wheel-matrix/wheels   frameworks' wheels,
#        downloaded once (pip download), then installed offline from there
# Exits non-zero when any smoke test failed.  The cell `pinned` is what the
# test suite runs (ctest wheel.pinned): the project's venv's packages
# (scripts/requirements.txt) seen through a .pth file, nothing downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
whl=$(realpath "$1")
shift
venvs=${HVD_WHEEL_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/wheel-matrix}
cache=${HVD_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/wheel-matrix/wheels}
pyenv=${PYENV_ROOT:-$HOME/.pyenv}/versions
project_venv=$("$root/scripts/venv.sh" --path)

# cell: "python | how its packages come | smoke tests".  How: pip pins
# (downloaded to the cache once), "debian" (Debian's site-packages:
# PyTorch 1.13) or "project" (the project's venv through a .pth file).
declare -A CELLS=(
  [py3.9]="$pyenv/3.9.18/bin/python | cloudpickle==3.1.3 | run"
  [debian-torch1.13]="/usr/bin/python3 | debian | torch"
  [pinned]="/usr/bin/python3 | project | torch tensorflow keras jax run"
  [py3.10-tf2.16-torch2.0]="$pyenv/3.10.13/bin/python | tensorflow-cpu==2.16.2 torch==2.0.1 | tensorflow keras torch"
  [py3.10-jax0.4.38]="$pyenv/3.10.13/bin/python | jax==0.4.38 jaxlib==0.4.38 optax==0.2.4 | jax"
  [py3.12-tf2.21-jax0.10]="$pyenv/3.12.1/bin/python | tensorflow-cpu==2.21.0 jax==0.10.2 jaxlib==0.10.2 optax==0.2.8 | tensorflow keras jax"
  [py3.13-tf2.21-jax0.10]="$pyenv/3.13.0/bin/python | tensorflow-cpu==2.21.0 jax==0.10.2 jaxlib==0.10.2 optax==0.2.8 | tensorflow keras jax"
  [mxnet1.9.1]="/usr/bin/python3 | mxnet==1.9.1 numpy==1.23.5 | mxnet"
)
ORDER=(py3.9 debian-torch1.13 pinned py3.10-tf2.16-torch2.0 py3.10-jax0.4.38
       py3.12-tf2.21-jax0.10 py3.13-tf2.21-jax0.10 mxnet1.9.1)

field() { echo "$1" | cut -d'|' -f"$2" | xargs; }

# PATH without a compiler or CMake: every program of /usr/bin and /bin but those.
nocc=$(mktemp -d)
trap 'rm -rf "$nocc"' EXIT
for d in /usr/bin /bin; do
  for p in "$d"/*; do
    case $(basename "$p") in
      cc|c++|c89|c99|cpp*|gcc*|g++*|*-gcc*|*-g++*|clang*|cmake*|ccmake|ctest|cpack|ld|ld.*|as) ;;
      *) [ -e "$nocc/$(basename "$p")" ] || ln -s "$p" "$nocc/$(basename "$p")" ;;
    esac
  done
done

# make_venv CELL: a fresh venv with the cell's frameworks (not hvd yet).
make_venv() {
  local py how venv=$venvs/wheel-$1
  py=$(field "${CELLS[$1]}" 1)
  how=$(field "${CELLS[$1]}" 2)
  rm -rf "$venv"
  case $how in
    debian) "$py" -m venv --system-site-packages "$venv" ;;
    project)
      "$py" -m venv "$venv"
      "$project_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))' \
        >"$(echo "$venv"/lib/python3*/site-packages)/project_venv.pth" ;;
    *)
      "$py" -m venv "$venv"
      mkdir -p "$cache"
      # shellcheck disable=SC2086
      "$venv/bin/python" -m pip download -q --progress-bar off -d "$cache" $how pytest >&2
      # shellcheck disable=SC2086
      "$venv/bin/python" -m pip install -q --progress-bar off --no-index --find-links "$cache" \
        $how >&2 ;;
  esac
}

# run_cell CELL: prints its table row; 1 when a smoke test failed.
run_cell() {
  local cell=$1 venv=$venvs/wheel-$1 t0 t1 results="" failed=0 out
  make_venv "$cell" || { echo "| $cell | venv failed | | |"; return 1; }
  t0=$(date +%s%N)
  PATH=$venv/bin:$nocc "$venv/bin/python" -m pip install -q --no-index --no-deps "$whl" >&2
  t1=$(date +%s%N)
  local env=(env -u PYTHONPATH PATH="$venv/bin:$nocc" TF_CPP_MIN_LOG_LEVEL=3)
  for b in $(field "${CELLS[$cell]}" 3); do
    if [ "$b" = run ]; then
      out=$("${env[@]}" timeout 300 "$venv/bin/python" "$root/tests/wheel/smoke.py" run 2>&1) || true
      want=1
    else
      out=$("${env[@]}" timeout 600 "$venv/bin/hvdrun" -np 2 "$venv/bin/python" \
              "$root/tests/wheel/smoke.py" "$b" 2>&1) || true
      want=2
    fi
    # hvdrun prefixes each rank's lines with [rank]<stdout>:
    if [ "$(grep -cE "(^|:)smoke $b ok " <<<"$out")" -eq "$want" ]; then
      results+="$b pass ($(grep -m1 -E "(^|:)smoke $b ok " <<<"$out" | awk '{print $NF}')), "
    else
      results+="$b FAIL, "
      failed=1
      echo "wheel-matrix.sh: $cell: $b failed:" >&2
      tail -20 <<<"$out" >&2
    fi
  done
  local ver
  ver=$("$venv/bin/python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  printf '| %s | %s | %s | %d.%d s |\n' "$cell" "$ver" "${results%, }" \
         $(( (t1 - t0) / 1000000000 )) $(( (t1 - t0) / 100000000 % 10 ))
  return $failed
}

cells=("$@")
[ ${#cells[@]} -gt 0 ] || cells=("${ORDER[@]}")
mkdir -p "$venvs"
echo "wheel: $(basename "$whl"), $(du -k "$whl" | cut -f1) KiB"
echo
echo "| cell | Python | smoke tests at np 2 (framework version) | hvd install |"
echo "| --- | --- | --- | --- |"
rc=0
for c in "${cells[@]}"; do
  [ -n "${CELLS[$c]:-}" ] || { echo "wheel-matrix.sh: no cell $c (${ORDER[*]})" >&2; exit 2; }
  run_cell "$c" || rc=1
done
exit $rc
