#!/usr/bin/env bash
# Creates (once) and prints the path of the project's second virtual
# environment, for hvd.mxnet: Debian's /usr/bin/python3 with MXNet 1.9.1
# and NumPy 1.23 (scripts/requirements-mxnet.txt).  MXNet 1.9.1 needs a
# NumPy older than the first venv's, so it cannot live there.  It is made
# by scripts/venv.sh (same stamp, same log) under
#   ${HVD_VENV_MXNET:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv-mxnet}
# Prints the venv's directory on stdout (and nothing else); --path as venv.sh's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
HVD_VENV=${HVD_VENV_MXNET:-${XDG_CACHE_HOME:-$HOME/.cache}/hvd/venv-mxnet} \
  HVD_VENV_REQUIREMENTS=$root/scripts/requirements-mxnet.txt exec "$root/scripts/venv.sh" "$@"
