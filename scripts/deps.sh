#!/usr/bin/env bash
# Installs the Debian packages hvd needs that this machine lacks; does
# nothing when they are all there.  Usage: scripts/deps.sh [build|test|bench]
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libssl-dev libopenblas-dev zlib1g-dev
            dataset-fashion-mnist python3-dev)
test_pkgs=(libcmocka-dev python3 python3-pytest procps python3-torch python3-torchvision
           python3-numpy)

bench_pkgs=(openmpi-bin libopenmpi-dev gnuplot-nox python3)

want=("${build_pkgs[@]}")
case "${1:-build}" in
  test) want+=("${test_pkgs[@]}") ;;
  bench) want+=("${bench_pkgs[@]}") ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
