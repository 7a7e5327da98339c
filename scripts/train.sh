#!/usr/bin/env bash
# The main job: builds hvd and trains a CNN on Fashion-MNIST with 4
# processes on this host through hvdrun (the data set from Debian's
# dataset-fashion-mnist).  Installs what it needs.  Extra arguments go to
# hvd-train-fashion-mnist (e.g. --epochs 1, --model mlp, --fp16-allreduce).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
# Only what the job needs (no test suite, no cmocka): scripts/test.sh sets
# HVD_BUILD_TESTS=ON again for build/ whatever this left in its cache.
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)" --target hvdrun hvd-train-fashion-mnist
exec build/hvdrun -np 4 build/hvd-train-fashion-mnist --epochs 3 "$@"
