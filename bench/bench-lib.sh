# bench-lib.sh -- what bench/compare-openmpi and bench/peers share, so that
# every peer they time is launched and settled alike.  Source it after
# setting $out (the output folder, holding cpu_speed, built from
# bench/cpu_speed.c):
#   . bench/bench-lib.sh
# shellcheck shell=bash

bytes() { # "64M" -> 67108864
  local v=$1
  case $v in *K) echo $((${v%K} << 10)) ;; *M) echo $((${v%M} << 20)) ;;
    *G) echo $((${v%G} << 30)) ;; *) echo "$v" ;; esac
}

# OpenMPI's mpirun as both scripts run it: every rank on this host, no
# binding (the ranks may outnumber the cores), the ob1 PML.
mpirun_flags=(--oversubscribe --bind-to none --mca pml ob1)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)

# Each run starts 3 seconds after the last ended: the previous job's
# processes (OpenMPI's daemons, the ranks' exit) still run for a while,
# long enough to spoil the first size measured after them (with a second,
# hvd's 8-byte allreduce after an OpenMPI job came out at 2.7-3.3 us in
# 2 runs of 4 against 0.8 alone; with 3 seconds, 0.8-1.1 in all 4).
# And then the core's speed (bench/cpu_speed.c), which the table's
# header summarises: on a shared VM it moves by half from minute to
# minute, and a small allreduce's time with it.
settle() { sleep 3; "$out/cpu_speed" >>"$out/cpu.csv"; }
