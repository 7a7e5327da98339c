#!/usr/bin/env bash
# Installs the Debian packages hvd needs that this machine lacks; does
# nothing (and prints nothing) when they are all there.
# Usage: scripts/deps.sh [build|test|bench]
# It prints one line saying what it installs; apt-get's own output goes to
# a log file under ${TMPDIR:-/tmp} that the line names, and is printed in
# full only when apt-get fails.
set -euo pipefail

build_pkgs=(build-essential cmake pkg-config libssl-dev libopenblas-dev zlib1g-dev
            dataset-fashion-mnist python3-dev libyaml-dev)
# openssh-server, openssh-client, iproute2: the multi-host tests; gnuplot-nox: hvd-report's
# charts; python3-venv, -pip, -setuptools, -wheel: pip install . into a venv; dpkg-dev: make deb;
# Open MPI (the build's MPI, and mpirun), mpi4py, SLURM and munge: the jobs the multi-host
# tests start under mpirun and srun (tests/cluster/cluster.sh slurm up); clang and its
# runtimes (libFuzzer): the fuzz targets (scripts/fuzz.sh); Java 17: the Spark that pyspark
# starts (python.spark, cluster.sh spark up); clang-format-14: the format check of changed C
# files (tests/format_check.sh).
test_pkgs=(libcmocka-dev python3 python3-pytest procps python3-torch python3-torchvision gnuplot-nox
           python3-numpy python3-cloudpickle openssh-server openssh-client iproute2
           python3-venv python3-pip python3-setuptools python3-wheel dpkg-dev
           openmpi-bin libopenmpi-dev python3-mpi4py slurmd slurmctld slurm-client munge
           clang libclang-rt-14-dev openjdk-17-jre-headless clang-format-14)

# iperf3 and the test set's ssh, iproute2 and SLURM: the benchmarks across emulated hosts.
bench_pkgs=(openmpi-bin libopenmpi-dev gnuplot-nox python3 iperf3 openssh-server openssh-client
            iproute2 slurmd slurmctld slurm-client munge)

want=("${build_pkgs[@]}")
case "${1:-build}" in
  build) ;;
  test) want+=("${test_pkgs[@]}") ;;
  bench) want+=("${bench_pkgs[@]}") ;;
  *) echo "usage: scripts/deps.sh [build|test|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

log=$(mktemp "${TMPDIR:-/tmp}/hvd-deps.XXXXXX.log")
echo "deps: installing ${missing[*]} (apt-get output in $log)" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-q -o Dpkg::Use-Pty=0 -o Dpkg::Progress-Fancy=0)
rc=0
{
  $sudo apt-get "${apt_opts[@]}" update &&
  $sudo apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
} </dev/null >"$log" 2>&1 || rc=$?
if [ "$rc" -ne 0 ]; then
  {
    echo "deps: apt-get failed (exit $rc); its output, from $log:"
    cat "$log"
    echo "deps: apt-get failed (exit $rc) installing ${missing[*]}; output above and in $log"
  } >&2
  exit "$rc"
fi
