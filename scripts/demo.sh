#!/usr/bin/env bash
# The main job: builds hvd and runs a 4-process allreduce demo on this host
# through hvdrun.  Installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DHVD_BUILD_TESTS=OFF >/dev/null
cmake --build build -j "$(nproc)" --target hvdrun allreduce_demo
exec build/hvdrun -np 4 build/allreduce_demo
