#!/usr/bin/env bash
# tensorflow_vs_mwms.sh - hvd.tensorflow against TensorFlow's own
# MultiWorkerMirroredStrategy (ring collectives over gRPC): the same
# model, batch and loop (examples/tensorflow), N processes each, one after
# the other in the same run.  Prints each side's total line.
#
#   bench/tensorflow_vs_mwms.sh [N] [extra benchmark flags...]
#       N processes on this host.
#   HOSTS=4 RATE=1gbit bench/tensorflow_vs_mwms.sh
#       HOSTS emulated hosts x 1 process (tests/cluster/cluster.sh, every
#       host's egress shaped to RATE; HVD_CLUSTER_ID picks the cluster),
#       hvdrun in h0 over ssh against one MWMS worker per host, ROUNDS
#       times each (alternating); env BATCH=16 ITERS=5 BATCHES=3 WARMUP=2
#       MODEL=small IMAGE=0 (the model's default side).  Prints a
#       Markdown table: total img/s (median of the rounds, and each round)
#       and the share of the link each keeps busy (bytes each host
#       sent per step, from eth0's counters, times steps per second, over
#       RATE; start-up traffic counted in, so an upper bound).  Needs root.
#
# Needs build/ (hvdrun, hvd._C, the op library) and the venv's python
# (HVD_VENV_PYTHON, default /root/.cache/hvd/venv/bin/python).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${HVD_VENV_PYTHON:-/root/.cache/hvd/venv/bin/python}
build=${HVD_BUILD_DIR:-$root/build}
cluster=$root/tests/cluster/cluster.sh

tf_config() { # tf_config INDEX HOST:PORT...: MWMS's TF_CONFIG for worker INDEX
  local i=$1 workers="" w
  shift
  for w in "$@"; do workers+="${workers:+,}\"$w\""; done
  printf '{"cluster":{"worker":[%s]},"task":{"type":"worker","index":%d}}' "$workers" "$i"
}

one_host() {
  local n=${1:-2}
  shift || true
  local flags=("$@") base i peers=() pids=()
  echo "hvd.tensorflow (hvdrun -np $n):"
  PYTHONPATH=$build/python "$build/hvdrun" -np "$n" "$py" \
    "$root/examples/tensorflow/synthetic_benchmark.py" "${flags[@]}" 2>/dev/null | grep -E "Total|Model"
  echo "MultiWorkerMirroredStrategy ($n workers):"
  base=$((20000 + RANDOM % 20000))
  for ((i = 0; i < n; i++)); do peers+=("localhost:$((base + i))"); done
  for ((i = 0; i < n; i++)); do
    TF_CONFIG=$(tf_config "$i" "${peers[@]}") PYTHONPATH=$build/python "$py" \
      "$root/examples/tensorflow/mwms_benchmark.py" "${flags[@]}" 2>/dev/null \
      | grep -E "Total|Model" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || true; done
}

cluster_run() {
  local n=$HOSTS rate=${RATE:-1gbit} rounds=${ROUNDS:-2} id=${HVD_CLUSTER_ID:-0}
  local ssh_cfg hosts i r peers=() out
  local batch=${BATCH:-16} warmup=${WARMUP:-2} iters=${ITERS:-5} per_iter=${BATCHES:-3}
  local loop=(--model "${MODEL:-small}" --batch-size "$batch" --num-warmup-batches "$warmup"
              --num-iters "$iters" --num-batches-per-iter "$per_iter" --image-size "${IMAGE:-0}")
  local steps=$((warmup + iters * per_iter))
  export HVD_CLUSTER_ID=$id
  "$cluster" down >/dev/null
  trap '"$cluster" down >/dev/null' EXIT
  "$cluster" up "$n" --rate "$rate" >/dev/null
  "$cluster" check
  ssh_cfg=$("$cluster" ssh-config)
  hosts=$(seq -s, -f 'h%g:1' 0 $((n - 1)))
  for ((i = 0; i < n; i++)); do peers+=("10.231.$id.$((i + 1)):$((23000 + i))"); done
  out=$(mktemp -d)
  sent() { # bytes all hosts' eth0 has sent so far
    local t=0 i b
    for ((i = 0; i < n; i++)); do
      b=$("$cluster" exec "h$i" cat /sys/class/net/eth0/statistics/tx_bytes)
      t=$((t + b))
    done
    echo "$t"
  }
  record() { # record NAME BYTES_BEFORE < output: "img/s bytes-per-host-per-step"
    local img after
    img=$(sed -n 's/.*Total img\/sec on [0-9]* CPU(s): \([0-9.]*\).*/\1/p' | head -1)
    after=$(sent)
    echo "${img:-0} $(((after - $2) / n / steps))" >>"$out/$1"
  }
  for r in $(seq 1 "$rounds"); do
    echo "round $r/$rounds" >&2
    before=$(sent)
    "$cluster" exec h0 env PYTHONPATH="$build/python" "$build/hvdrun" -np "$n" -H "$hosts" \
      --ssh-command "ssh -F $ssh_cfg" "$py" "$root/examples/tensorflow/synthetic_benchmark.py" \
      "${loop[@]}" 2>/dev/null | record hvd "$before"
    before=$(sent)
    local pids=()
    for ((i = 0; i < n; i++)); do
      "$cluster" exec "h$i" env TF_CONFIG="$(tf_config "$i" "${peers[@]}")" \
        PYTHONPATH="$build/python" "$py" "$root/examples/tensorflow/mwms_benchmark.py" \
        "${loop[@]}" >"$out/mwms.$i" 2>/dev/null &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    record mwms "$before" <"$out/mwms.0"
  done
  local bits
  bits=$(awk -v r="$rate" 'BEGIN { v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u);
    m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1; print v * m }')
  echo
  echo "${MODEL:-small} model, batch $batch per worker, $n hosts x 1 process, links shaped" \
       "to $rate; median of $rounds rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| peer | total img/s | each round | MB sent per host per step | link busy |"
  echo "|---|---:|---|---:|---:|"
  for name in hvd mwms; do
    local each
    each=$(awk '{ printf "%s%s", (NR > 1) ? ", " : "", $1 }' "$out/$name")
    sort -n "$out/$name" | awk -v name="$name" -v n="$n" -v b="$batch" -v bits="$bits" \
      -v each="$each" '
      { img[NR] = $1; by[NR] = $2 }
      END { k = int((NR + 1) / 2); j = int(NR / 2) + 1  # the middle one or two
            i = (img[k] + img[j]) / 2; s = (by[k] + by[j]) / 2
            label = (name == "hvd") ? "hvd.tensorflow" : "MultiWorkerMirroredStrategy"
            printf "| %s | %.1f | %s | %.2f | %.0f%% |\n", label, i, each, s / 1e6,
                   100 * s * 8 * (i / (n * b)) / bits }'
  done
  rm -rf "$out"
}

if [[ -n ${HOSTS:-} ]]; then
  cluster_run
else
  one_host "$@"
fi
