#!/usr/bin/env bash
# Creates (once) and prints the path of bench/peers' virtual environment,
# kept apart from the project's venv (scripts/venv.sh, pinned, used by CI):
#   ${HVD_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv-peers}
# Debian's /usr/bin/python3 with DeepSpeed and oneCCL's runtime wheels
# from PyPI at the versions bench/peers was measured with (bench/peers-
# requirements.txt).  PyTorch is not installed again (from PyPI it is the
# CUDA build, some GB): a .pth file puts the project venv's site-packages
# (torch 2.15.0, numpy) after this venv's own, so DeepSpeed sees that
# torch.  hvd.torch comes from the build tree (PYTHONPATH=build/python: its
# _C.abi3.so is on CPython's limited API, so any python3 loads it).
# A stamp holds the hash of the pins; when they change pip runs again.
# pip's output goes to a log named on stderr, printed only when pip fails.
# Prints the venv's directory on stdout and nothing else:
#   venv=$(bench/peers-venv.sh)
# Usage: bench/peers-venv.sh [--path]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${HVD_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv-peers}
if [ "${1:-}" = --path ]; then
  echo "$venv"
  exit 0
fi
req=$root/bench/peers-requirements.txt
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.hvd-requirements" 2>/dev/null)" = "$want" ]; then
  echo "$venv"
  exit 0
fi
main=$("$root/scripts/venv.sh")
log=$(mktemp "${TMPDIR:-/tmp}/hvd-venv-peers.XXXXXX.log")
echo "peers-venv: installing bench/peers-requirements.txt into $venv (pip output in $log)" >&2
rc=0
{
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  main_site=$("$main/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$main_site" >"$site/zz-hvd-main-venv.pth"
  "$venv/bin/python" -m pip install --progress-bar off -r "$req"
} </dev/null >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  {
    echo "peers-venv: pip failed (exit $rc); its output, from $log:"
    cat "$log"
    echo "peers-venv: pip failed (exit $rc) installing $req into $venv"
  } >&2
  exit "$rc"
fi
rm -f "$log"
echo "$want" >"$venv/.hvd-requirements"
echo "$venv"
