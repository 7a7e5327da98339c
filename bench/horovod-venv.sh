#!/usr/bin/env bash
# horovod-venv.sh - build real Horovod (horovod==0.28.1, its last release)
# for CPU with Gloo in its own venv, so hvd can be measured against it
# (bench/nohang_horovod.py, docs/reliability.md, docs/benchmarks.md).
# Horovod 0.28.1 predates Python 3.12 and torch 2.x's C++17 headers, so the
# venv is pyenv's Python 3.10 with torch 1.13.1 (the plain PyPI wheel: PyPI
# has no +cpu build; it pulls the CUDA runtime wheels, ~3 GiB).  Prints the
# venv's path.  Build time on 2 busy cores: see docs/reliability.md.
#
#   bench/horovod-venv.sh          env: VENV=~/.cache/hvd/venv-horovod
#                                       PYTHON=~/.pyenv/versions/3.10.13/bin/python
set -euo pipefail
venv=${VENV:-$HOME/.cache/hvd/venv-horovod}
python=${PYTHON:-$HOME/.pyenv/versions/3.10.13/bin/python}

if ! "$venv/bin/python" -c 'import horovod.torch' 2>/dev/null; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  pip=("$venv/bin/python" -m pip --no-cache-dir)
  "${pip[@]}" install -q pip==24.0 setuptools==69.5.1 wheel==0.43.0 \
    cmake==3.27.9 packaging==24.0 pyyaml==6.0.1 psutil==5.9.8 cloudpickle==3.0.0 \
    cffi==1.16.0 numpy==1.26.4 torch==1.13.1
  start=$(date +%s)
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=gloo \
    MAKEFLAGS=-j2 PATH="$venv/bin:$PATH" \
    "${pip[@]}" install -v --no-build-isolation horovod==0.28.1 >&2
  echo "horovod build: $(( $(date +%s) - start )) s" >&2
fi
echo "$venv"
