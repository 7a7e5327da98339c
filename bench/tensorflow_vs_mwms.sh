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
#       MODEL=small IMAGE=0 (the model's default side).  Each of VARIANTS
#       (default "keras3 tfkeras2 keras3-xla tfkeras2-xla") is a row pair:
#       tf.keras as Keras 3 or as tf-keras 2 (TF_USE_LEGACY_KERAS=1), the
#       step in plain tf.function or compiled by XLA (--xla: hvd's whole
#       step with its allreduce, HOROVOD_ENABLE_XLA_OPS=1; MWMS's forward
#       and backward pass, its all-reduce outside).  Prints a Markdown
#       table: total img/s (median of the rounds, and each round) and the
#       share of the link each keeps busy (bytes each host sent per step,
#       from eth0's counters, times steps per second, over RATE; start-up
#       traffic counted in, so an upper bound).  Needs root.
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

# variant_args VARIANT: the environment and flags of a variant (keras3,
# tfkeras2, keras3-xla, tfkeras2-xla) as `env` arguments, then "--", then
# the flags.
variant_args() {
  local v=$1 legacy=0 xla=()
  case $v in
    keras3*) ;;
    tfkeras2*) legacy=1 ;;
    *) echo "unknown variant $v" >&2; return 1 ;;
  esac
  [[ $v == *-xla ]] && xla=(--xla)
  echo "TF_USE_LEGACY_KERAS=$legacy HOROVOD_ENABLE_XLA_OPS=1 -- ${xla[*]}"
}

variant_label() {
  case $1 in
    keras3) echo "Keras 3, tf.function" ;;
    tfkeras2) echo "tf-keras 2, tf.function" ;;
    keras3-xla) echo "Keras 3, XLA" ;;
    tfkeras2-xla) echo "tf-keras 2, XLA" ;;
  esac
}

one_host() {
  local n=${1:-2}
  shift || true
  local flags=("$@") base i v args envs vflags
  for v in ${VARIANTS:-keras3 tfkeras2 keras3-xla tfkeras2-xla}; do
    args=$(variant_args "$v")
    read -r -a envs <<<"${args%% -- *}"
    read -r -a vflags <<<"${args#* -- }"
    echo "== $(variant_label "$v")"
    echo "hvd.tensorflow (hvdrun -np $n):"
    env "${envs[@]}" PYTHONPATH="$build/python" "$build/hvdrun" -np "$n" "$py" \
      "$root/examples/tensorflow/synthetic_benchmark.py" "${flags[@]}" "${vflags[@]}" \
      2>/dev/null | grep -E "Total|Model" || echo "(failed)"
    echo "MultiWorkerMirroredStrategy ($n workers):"
    base=$((20000 + RANDOM % 20000))
    local peers=() pids=()
    for ((i = 0; i < n; i++)); do peers+=("localhost:$((base + i))"); done
    for ((i = 0; i < n; i++)); do
      env "${envs[@]}" TF_CONFIG="$(tf_config "$i" "${peers[@]}")" PYTHONPATH="$build/python" \
        "$py" "$root/examples/tensorflow/mwms_benchmark.py" "${flags[@]}" "${vflags[@]}" \
        2>/dev/null | grep -E "Total|Model" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
  done
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
  local variants=${VARIANTS:-keras3 tfkeras2 keras3-xla tfkeras2-xla} v args envs vflags
  for r in $(seq 1 "$rounds"); do
    for v in $variants; do
      echo "round $r/$rounds: $(variant_label "$v")" >&2
      args=$(variant_args "$v")
      read -r -a envs <<<"${args%% -- *}"
      read -r -a vflags <<<"${args#* -- }"
      before=$(sent)
      # hvdrun hands the ranks the HOROVOD_* and TF_* variables it was given
      "$cluster" exec h0 env "${envs[@]}" PYTHONPATH="$build/python" "$build/hvdrun" \
        -np "$n" -H "$hosts" --ssh-command "ssh -F $ssh_cfg" "$py" \
        "$root/examples/tensorflow/synthetic_benchmark.py" "${loop[@]}" "${vflags[@]}" \
        2>/dev/null | record "$v.hvd" "$before"
      before=$(sent)
      local pids=()
      for ((i = 0; i < n; i++)); do
        "$cluster" exec "h$i" env "${envs[@]}" TF_CONFIG="$(tf_config "$i" "${peers[@]}")" \
          PYTHONPATH="$build/python" "$py" "$root/examples/tensorflow/mwms_benchmark.py" \
          "${loop[@]}" "${vflags[@]}" >"$out/mwms.$i" 2>/dev/null &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || true; done
      record "$v.mwms" "$before" <"$out/mwms.0"
    done
  done
  local bits
  bits=$(awk -v r="$rate" 'BEGIN { v = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u);
    m = (u ~ /^g/) ? 1e9 : (u ~ /^m/) ? 1e6 : (u ~ /^k/) ? 1e3 : 1; print v * m }')
  echo
  echo "${MODEL:-small} model, batch $batch per worker, $n hosts x 1 process, links shaped" \
       "to $rate; median of $rounds rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "| Keras, step | peer | total img/s | each round | MB sent per host per step | link busy |"
  echo "|---|---|---:|---|---:|---:|"
  for v in $variants; do
    for name in hvd mwms; do
      local each
      each=$(awk '{ printf "%s%s", (NR > 1) ? ", " : "", $1 }' "$out/$v.$name")
      sort -n "$out/$v.$name" | awk -v name="$name" -v n="$n" -v b="$batch" -v bits="$bits" \
        -v each="$each" -v variant="$(variant_label "$v")" '
        { img[NR] = $1; by[NR] = $2 }
        END { k = int((NR + 1) / 2); j = int(NR / 2) + 1  # the middle one or two
              i = (img[k] + img[j]) / 2; s = (by[k] + by[j]) / 2
              label = (name == "hvd") ? "hvd.tensorflow" : "MultiWorkerMirroredStrategy"
              busy = (i > 0) ? sprintf("%.0f%%", 100 * s * 8 * (i / (n * b)) / bits) : "-"
              printf "| %s | %s | %.1f | %s | %.2f | %s |\n", (name == "hvd") ? variant : "",
                     label, i, each, s / 1e6, busy }'
    done
  done
  rm -rf "$out"
}

if [[ -n ${HOSTS:-} ]]; then
  cluster_run
else
  one_host "$@"
fi
