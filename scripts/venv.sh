#!/usr/bin/env bash
# Creates (once) and prints the path of the project's virtual environment:
# Debian's /usr/bin/python3 with the PyPI packages pinned in
# scripts/requirements.txt (PyTorch 2.x, TensorFlow, Keras, JAX, optax,
# pyspark, ray).  It lives under the user's cache, shared by every clone:
#   ${HVD_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv}
# HVD_VENV_REQUIREMENTS names another pins file (scripts/venv-mxnet.sh's
# second venv).
# A stamp file holds the hash of requirements.txt; when the pins change the
# packages are installed again.  pip's output goes to a log named on
# stderr, printed in full only when pip fails.  Prints the venv's directory
# on stdout (and nothing else), so:  venv=$(scripts/venv.sh)
# With --path: prints where it is (or would be) and installs nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${HVD_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv}
if [ "${1:-}" = --path ]; then
  echo "$venv"
  exit 0
fi
req=${HVD_VENV_REQUIREMENTS:-$root/scripts/requirements.txt}
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.hvd-requirements" 2>/dev/null)" = "$want" ]; then
  echo "$venv"
  exit 0
fi
log=$(mktemp "${TMPDIR:-/tmp}/hvd-venv.XXXXXX.log")
echo "venv: installing ${req#"$root"/} into $venv (pip output in $log)" >&2
rc=0
{
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip &&
  "$venv/bin/python" -m pip install --progress-bar off -r "$req"
} </dev/null >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  {
    echo "venv: pip failed (exit $rc); its output, from $log:"
    cat "$log"
    echo "venv: pip failed (exit $rc) installing $req into $venv"
  } >&2
  exit "$rc"
fi
echo "$want" >"$venv/.hvd-requirements"
echo "$venv"
