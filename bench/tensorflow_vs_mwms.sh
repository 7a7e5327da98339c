#!/usr/bin/env bash
# tensorflow_vs_mwms.sh - hvd.tensorflow against TensorFlow's own
# MultiWorkerMirroredStrategy (ring collectives over gRPC) on one host:
# the same model, batch and loop (examples/tensorflow), N processes each,
# one after the other in the same run.  Prints each side's total line.
#
#   bench/tensorflow_vs_mwms.sh [N] [extra benchmark flags...]
#
# Needs build/ (hvdrun, hvd._C, the op library) and the venv's python
# (HVD_VENV_PYTHON, default /root/.cache/hvd/venv/bin/python).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${1:-2}
shift || true
py=${HVD_VENV_PYTHON:-/root/.cache/hvd/venv/bin/python}
build=${HVD_BUILD_DIR:-$root/build}
flags=("$@")

echo "hvd.tensorflow (hvdrun -np $n):"
PYTHONPATH=$build/python "$build/hvdrun" -np "$n" "$py" \
  "$root/examples/tensorflow/synthetic_benchmark.py" "${flags[@]}" 2>/dev/null | grep -E "Total|Model"

echo "MultiWorkerMirroredStrategy ($n workers):"
base=$((20000 + RANDOM % 20000))
workers=""
for ((i = 0; i < n; i++)); do
  workers+=$(printf '"localhost:%d"' $((base + i)))
  if ((i < n - 1)); then workers+=","; fi
done
pids=()
for ((i = 0; i < n; i++)); do
  TF_CONFIG="{\"cluster\":{\"worker\":[$workers]},\"task\":{\"type\":\"worker\",\"index\":$i}}" \
    PYTHONPATH=$build/python "$py" "$root/examples/tensorflow/mwms_benchmark.py" "${flags[@]}" 2>/dev/null \
    | grep -E "Total|Model" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
