#!/usr/bin/env bash
# Creates (once) and prints the path of bench/peers' virtual environment,
# kept apart from the project's venv (scripts/venv.sh, pinned, used by CI):
#   ${HVD_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv-peers}
# Debian's /usr/bin/python3 with DeepSpeed and oneCCL's wheels from PyPI at
# the versions bench/peers was measured with (bench/peers-requirements.txt),
# installed by scripts/venv.sh (same stamp, same log).  PyTorch is not
# installed again (from PyPI it is the CUDA build, some GB): a .pth file
# puts the project venv's site-packages (torch 2.15.0, numpy) after this
# venv's own, so DeepSpeed's pip sees that torch.  hvd.torch comes from the
# build tree (PYTHONPATH=build/python: its _C.abi3.so is on CPython's
# limited API, so this python3 loads it too).
# Prints the venv's directory on stdout (and nothing else):
#   venv=$(bench/peers-venv.sh)
# Usage: bench/peers-venv.sh [--path]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export HVD_VENV=${HVD_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv-peers}
if [ "${1:-}" != --path ] && [ ! -x "$HVD_VENV/bin/python" ]; then
  main=$(HVD_VENV= "$root/scripts/venv.sh")
  /usr/bin/python3 -m venv "$HVD_VENV"
  site=$("$HVD_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  "$main/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' \
    >"$site/zz-hvd-main-venv.pth"
fi
HVD_VENV_REQUIREMENTS=$root/bench/peers-requirements.txt exec "$root/scripts/venv.sh" "$@"
