#!/usr/bin/env bash
# cluster.sh - an emulated cluster of K hosts on this machine, for hvd's
# multi-host tests and benchmarks.  Run as root.
#
#   cluster.sh up K [--rate RATE] [--burst SIZE] [--ssh-port PORT]
#   cluster.sh down
#   cluster.sh exec HOST CMD [ARGS...]     HOST is hI or I
#   cluster.sh ssh-config                  path for `ssh -F`
#   cluster.sh status                      exit 1 if not up
#   cluster.sh check                       exit 0 only if up and fenced off
#   cluster.sh pids [HOST]                 processes running on a host (not its daemons)
#   cluster.sh link HOST down|up           cut or restore a host's link
#   cluster.sh slurm up [--cpus N]         munged, slurmctld on h0, slurmd on every host
#   cluster.sh slurm down                  stops them (`down` does too)
#   cluster.sh ray up [--cpus N] [--python PY]  a Ray head on h0, a Ray node on every other host
#   cluster.sh ray down                    stops every Ray process on the hosts (`down` does too)
#   cluster.sh spark up [--cores N] [--python PY]  a Spark master on h0, a Spark worker on every host
#   cluster.sh spark down                  stops every Spark process on the hosts (`down` does too)
#   cluster.sh spark address               the master's URL, spark://ADDR:7077
#
# Host hI (I in 0..K-1) is the network namespace hvdc-hI.  Its eth0 is one end
# of a veth pair whose other end, hvdc-vI, is a port of the bridge hvdc-br; it
# has 10.231.0.(I+1)/24 and fdc1:7a1::(I+1)/64 (the same digits as the last
# IPv4 byte).  The root namespace has no address on the bridge, and while the
# cluster exists it has "unreachable" routes for both subnets, so a packet for
# a test host can never leave the machine by the default route.
#
# Whatever runs on a host (exec, its sshd and all that sshd starts) also gets
# a UTS namespace named hI and a mount namespace with the cluster's hosts file
# on /etc/hosts and a sysfs of the host's network namespace on /sys.  /tmp,
# /dev/shm, PIDs and the rest of the machine are shared by all hosts.
#
# Each host runs its own sshd (key-only root login) on its two addresses;
# `ssh -F "$(cluster.sh ssh-config)" h2 CMD`, run on any host, reaches h2.
# State lives in /run/hvd-cluster; no system file is changed.
#
# `slurm up` makes the hosts a SLURM cluster (Debian's slurm-wlm and
# munge): a munged of its own in the root namespace (its socket is a path
# every host reaches), slurmctld on h0 and one slurmd per host, each taking
# its node name from the host's name.  Every host sees the cluster's
# /etc/slurm (a copy of the machine's, plus slurm.conf) on /etc/slurm, so
# srun, sbatch and sinfo need no options there.  Two traps this avoids:
# slurmd needs the cgroup mounts under /sys, which `ip netns exec` drops
# (hosts here keep them), and the hosts share /tmp, so each node gets its
# own TmpFS under the state directory (PMIx puts its files there).  Nodes
# have CPUs=N (default 4) whatever the machine has, so a job may put more
# ranks on a node than it has cores.
#
# `ray up` makes the hosts a Ray cluster: `ray start --head` on h0 (GCS on
# port 6390 of h0's address, state and logs under the state directory) and
# `ray start --address` on every other host, each node with its host's
# address and --cpus CPUs (default 2), with the ray of --python (default
# the project's venv).  A driver runs on a host: `ray.init(address=
# "<h0's address>:6390")` (`cluster.sh ray address` prints it).  Ray's
# token authentication and usage reporting are off.  `ray down` stops the
# Ray processes of the hosts (those in a host's network namespace whose
# command line is Ray's), never another Ray on the machine.
#
# `spark up` makes the hosts a Spark standalone cluster with the pyspark
# of --python (default the project's venv) and Java from PATH (or
# JAVA_HOME): a master on h0 (port 7077 of h0's address) and one worker
# per host (h0 included), each with its host's address, --cores cores
# (default 2) and 2 GiB for executors.  Every daemon's configuration,
# logs, work and scratch directories are under the state directory (an
# empty SPARK_CONF_DIR, so no configuration of the machine is read), and
# the workers' environment, hence the executors', is that of `spark up`
# (PYTHONPATH naming hvd) with PYSPARK_PYTHON=--python.  A driver runs on
# a host with master `cluster.sh spark address` and spark.driver.host its
# host's address.  `spark down` stops the Spark processes of the hosts
# (in a host's network namespace and Spark's by their command line: the
# daemons, the executors, the drivers' JVMs, pyspark's Python workers),
# never another Spark on the machine.
#
# HVD_CLUSTER_ID=N (0..63, default 0) selects one of several clusters that
# may be up at once (say, two test runs side by side): N > 0 uses state
# /run/hvd-cluster-N, names hvdcN-*, 10.231.N.0/24 and fdc1:7a1:N::/64.  Its
# hosts are still called h0..hK-1; `exec` and the ssh config of cluster N
# reach only cluster N's.

set -euo pipefail

ID=${HVD_CLUSTER_ID:-0}
if ! [[ $ID =~ ^(0|[1-9][0-9]?)$ ]] || ((ID > 63)); then
  printf 'cluster.sh: HVD_CLUSTER_ID must be 0..63, not %s\n' "$ID" >&2
  exit 2
fi
if ((ID == 0)); then
  readonly STATE=/run/hvd-cluster PREFIX=hvdc NET6=fdc1:7a1:
else
  readonly STATE=/run/hvd-cluster-$ID PREFIX=hvdc$ID NET6=fdc1:7a1:$ID:
fi
readonly BRIDGE=$PREFIX-br
# Says that a cluster made /run/sshd (sshd's privilege separation directory),
# which the last cluster to go removes; outside the state directories, as
# clusters may come and go in any order.
readonly MADE_RUN_SSHD=/run/hvd-cluster.made-run-sshd
readonly NET4=10.231.$ID
readonly SUBNET4=$NET4.0/24
readonly SUBNET6=$NET6:/64
readonly MAX_HOSTS=64
readonly SSHD=/usr/sbin/sshd
SELF=$(readlink -f "${BASH_SOURCE[0]}")
readonly SELF

# ip, tc and sshd live in sbin, which a caller's PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin ;; esac
case ":$PATH:" in *:/sbin:*) ;; *) PATH=$PATH:/sbin ;; esac

# What `up` is doing right now, for the message if it fails.
STEP=starting

say() { printf 'cluster.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

usage() {
  cat >&2 <<'EOF'
usage: cluster.sh up K [--rate RATE] [--burst SIZE] [--ssh-port PORT]
       cluster.sh down
       cluster.sh exec HOST CMD [ARGS...]
       cluster.sh ssh-config | status | check
       cluster.sh pids [HOST]
       cluster.sh link HOST down|up
       cluster.sh slurm up [--cpus N] | slurm down
       cluster.sh ray up [--cpus N] [--python PY] | ray down | ray address
       cluster.sh spark up [--cores N] [--python PY] | spark down | spark address
HOST is hI or I.  Hosts h0..hK-1 have 10.231.N.(I+1) and fdc1:7a1:N::(I+1)
(fdc1:7a1::(I+1) for N = 0), N being $HVD_CLUSTER_ID (default 0).
EOF
  exit 2
}

# ------------------------------------------------------------------ naming

ns_name() { printf '%s-h%s' "$PREFIX" "$1"; }
addr4() { printf '%s.%s' "$NET4" "$(($1 + 1))"; }
addr6() { printf '%s:%s' "$NET6" "$(($1 + 1))"; }

# setting KEY: a value that `up` recorded in $STATE/settings.
setting() {
  local key val
  while IFS='=' read -r key val; do
    if [[ $key == "$1" ]]; then printf '%s\n' "$val"; return 0; fi
  done < "$STATE/settings"
  return 1
}

is_up() { [[ -e $STATE/ready ]]; }

require_up() {
  is_up || die "no cluster is up (run: cluster.sh up K)"
}

# host_index HOST: hI or I -> I, for a host that exists now.
host_index() {
  local h=$1 i
  case $h in
    h[0-9]*) i=${h#h} ;;
    [0-9]*) i=$h ;;
    *) die "bad host '$h' (use hI or I)" ;;
  esac
  [[ $i =~ ^(0|[1-9][0-9]*)$ ]] || die "bad host '$h' (use hI or I)"
  [[ -e /run/netns/$(ns_name "$i") ]] || die "no host h$i (is the cluster up? with more than $i hosts?)"
  printf '%s\n' "$i"
}

require_root() {
  [[ $(id -u) == 0 ]] || die "must run as root"
}

# Killing every process of the hosts from inside one of them would kill
# ourselves too, so up and down refuse to run on a host.
require_root_netns() {
  local self ino _
  self=$(readlink /proc/self/ns/net)
  while read -r ino _; do
    [[ $self != "net:[$ino]" ]] || die "run this from the root network namespace, not from inside a host"
  done < <(stat -L -c '%i %n' /run/netns/"$PREFIX"-* 2> /dev/null)
}

# ------------------------------------------------------- running on a host

# on_host I CMD...: replace this process with CMD running on host hI.
# nsenter joins the host's network namespace; unshare gives the command a
# fresh UTS and mount namespace, where `__enter` (below) names the host and
# fixes /etc/hosts and /sys before it execs CMD.  `ip netns exec` is not used:
# it remounts /sys without the cgroup mounts under it and keeps the machine's
# host name.  Slave propagation lets mounts made later on the machine show up
# in the host, and never the other way round.
on_host() {
  local i=$1; shift
  exec nsenter --net="/run/netns/$(ns_name "$i")" \
    unshare --uts --mount --propagation slave "$SELF" __enter "$i" "$@"
}

# __enter I CMD...: runs inside the new namespaces, then becomes CMD.
enter_host() {
  local i=$1; shift
  printf 'h%s\n' "$i" > /proc/sys/kernel/hostname
  remount_sys
  mount --bind "$STATE/hosts" /etc/hosts
  if [[ -d /etc/slurm && -d $STATE/etc-slurm ]]; then mount --bind "$STATE/etc-slurm" /etc/slurm; fi
  exec "$@"
}

# Mount a sysfs of our network namespace over /sys, so /sys/class/net shows
# the host's own interfaces.  The mounts under the old /sys (the cgroup
# hierarchies, above all) are moved onto the new one first, since programs
# such as slurmd refuse to start without /sys/fs/cgroup.
remount_sys() {
  local fresh=$STATE/mnt sys_id="" id parent _ mnt
  local -a subs=()
  # mountinfo: ID PARENT MAJ:MIN ROOT MOUNTPOINT ...; the last /sys wins.
  while read -r id parent _ _ mnt _; do
    if [[ $mnt == /sys ]]; then sys_id=$id; fi
  done < /proc/self/mountinfo
  while read -r id parent _ _ mnt _; do
    if [[ -n $sys_id && $parent == "$sys_id" && $mnt == /sys/* ]]; then subs+=("$mnt"); fi
  done < /proc/self/mountinfo
  mount -t sysfs sysfs "$fresh"
  for mnt in "${subs[@]}"; do
    # A mount point that the new sysfs lacks cannot be kept; it is dropped.
    if [[ -d $fresh/${mnt#/sys/} ]]; then mount --move "$mnt" "$fresh/${mnt#/sys/}"; fi
  done
  umount -l /sys
  mount --move "$fresh" /sys
}

# --------------------------------------------------- processes of the hosts

# host_procs: "PID I" for every process whose network namespace is one of the
# hosts', from a single pass over /proc (a zombie has no namespace left, so
# it is never listed).
host_procs() {
  local ino name pid link
  local -A host_of=()
  while read -r ino name; do
    host_of[$ino]=${name#/run/netns/"$PREFIX"-h}
  done < <(stat -L -c '%i %n' /run/netns/"$PREFIX"-* 2>/dev/null)
  ((${#host_of[@]})) || return 0
  while read -r pid link; do
    ino=${link#net:[}
    ino=${ino%]}
    [[ -n $ino && -n ${host_of[$ino]:-} ]] || continue
    pid=${pid#/proc/}
    printf '%s %s\n' "${pid%%/*}" "${host_of[$ino]}"
  done < <(find /proc/[0-9]*/ns/net -maxdepth 0 -printf '%p %l\n' 2>/dev/null)
}

# The PIDs in the pid files of the daemons we started: the sshds of `up`
# and the SLURM daemons (munged included) of `slurm up`.
pidfile_pids() {
  local f pid
  for f in "$@"; do
    [[ -s $f ]] || continue
    read -r pid < "$f" || continue
    if [[ $pid =~ ^[0-9]+$ ]]; then printf '%s\n' "$pid"; fi
  done
  return 0
}
sshd_daemons() { pidfile_pids "$STATE"/h*/sshd.pid; }

# slurmctld's helper (slurmscriptd) is a daemon too; slurmd's children
# (slurmstepd) are job steps, which are not.
slurm_daemons() {
  local pid ppid ctld="" p
  pidfile_pids "$STATE"/slurm/*.pid
  [[ -s $STATE/slurm/slurmctld.pid ]] && read -r ctld < "$STATE/slurm/slurmctld.pid"
  [[ $ctld =~ ^[0-9]+$ ]] || return 0
  for p in /proc/[0-9]*/stat; do
    read -r pid _ _ ppid _ < "$p" 2> /dev/null || continue
    if [[ $ppid == "$ctld" ]]; then printf '%s\n' "$pid"; fi
  done
  return 0
}

# A daemon is ours only while its command line names our state directory:
# a pid file may be stale and its number reused by someone else's process.
is_our_daemon() {
  local cmd
  cmd=$(tr '\0' ' ' < "/proc/$1/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *"$STATE/"* ]]
}

# Stop every process on the hosts: TERM, up to 2 s for them to go, then KILL.
# Only processes that are in a host's namespace at the moment of the signal
# are signalled, so a reused PID is never hit.  sshd daemons whose host is
# already gone (a crashed run) are found by their pid files.
stop_host_procs() {
  local pid tries
  local -a pids
  mapfile -t pids < <(host_procs | cut -d' ' -f1)
  if [[ -d $STATE ]]; then
    for pid in $(sshd_daemons) $(slurm_daemons); do
      if is_our_daemon "$pid"; then pids+=("$pid"); fi
    done
  fi
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((tries = 0; tries < 20; tries++)); do
    [[ -n $(host_procs) ]] || break
    sleep 0.1
  done
  # Whatever is left (or was forked meanwhile) gets KILL, until none is left.
  for ((tries = 0; tries < 20; tries++)); do
    mapfile -t pids < <(host_procs | cut -d' ' -f1)
    ((${#pids[@]})) || break
    kill -KILL "${pids[@]}" 2>/dev/null || true
    sleep 0.05
  done
  if [[ -d $STATE ]]; then
    for pid in $(sshd_daemons) $(slurm_daemons); do
      if is_our_daemon "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
  fi
  return 0
}

# ---------------------------------------------------------------------- up

# Routes that answer "No route to host" for the test subnets in the root
# namespace.  This machine's default route leads off the machine: without
# them a packet for 10.231.0.x sent from the root namespace would go there.
fence_on() {
  ip route replace unreachable "$SUBNET4"
  ip -6 route replace unreachable "$SUBNET6"
}

fence_off() {
  ip route del unreachable "$SUBNET4" 2>/dev/null || true
  ip -6 route del unreachable "$SUBNET6" 2>/dev/null || true
}

fence_missing() {
  local missing=""
  [[ -n $(ip -4 route show exact "$SUBNET4" type unreachable) ]] ||
    missing+=", unreachable $SUBNET4"
  [[ -n $(ip -6 route show exact "$SUBNET6" type unreachable) ]] ||
    missing+=", unreachable $SUBNET6"
  printf "%s" "${missing#, }"
}

make_bridge() {
  # No IPv6 link-local address either: the root namespace stays off the
  # bridge.  Multicast snooping off, so neighbour discovery always floods.
  ip link add "$BRIDGE" type bridge mcast_snooping 0
  ip link set "$BRIDGE" addrgenmode none
  ip link set "$BRIDGE" up
}

# make_host I RATE BURST: namespace, veth to the bridge, addresses, shaping.
make_host() {
  local i=$1 rate=$2 burst=$3 ns veth
  ns=$(ns_name "$i")
  veth=$PREFIX-v$i
  ip netns add "$ns"
  ip -b - <<EOF
link add $veth type veth peer name eth0 netns $ns
link set $veth addrgenmode none
link set $veth master $BRIDGE
link set $veth up
EOF
  # nodad: the IPv6 address is usable at once, not after duplicate detection.
  ip -n "$ns" -b - <<EOF
link set lo up
addr add $(addr4 "$i")/24 dev eth0
addr add $(addr6 "$i")/64 dev eth0 nodad
link set eth0 up
EOF
  # Keep the IPv6 address across `link HOST down` (the kernel drops it
  # otherwise, and sshd would lose its IPv6 listener).
  nsenter --net="/run/netns/$ns" \
    sysctl -q -w net.ipv6.conf.eth0.keep_addr_on_down=1 > /dev/null
  if [[ -n $rate ]]; then
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 20ms
  fi
}

# The hosts' /etc/hosts: the machine's own, plus one line per host.
write_hosts_file() {
  local k=$1 i
  {
    cat /etc/hosts
    # (a last line without its newline must not swallow ours)
    [[ -z $(tail -c 1 /etc/hosts) ]] || echo
    echo "# hosts of the hvd test cluster $ID (cluster.sh)"
    for ((i = 0; i < k; i++)); do printf '%s h%s\n' "$(addr4 "$i")" "$i"; done
  } > "$STATE/hosts"
  chmod 644 "$STATE/hosts"
}

# The client key, the host keys, known_hosts and the `ssh -F` config.
write_ssh_client() {
  local k=$1 port=$2 i names key
  ssh-keygen -q -t ed25519 -N '' -C hvd-cluster -f "$STATE/id_ed25519"
  cp "$STATE/id_ed25519.pub" "$STATE/authorized_keys"
  : > "$STATE/known_hosts"
  for ((i = 0; i < k; i++)); do
    mkdir -m 700 "$STATE/h$i"
    ssh-keygen -q -t ed25519 -N '' -C "h$i" -f "$STATE/h$i/host_key"
    names="h$i,$(addr4 "$i"),$(addr6 "$i")"
    if [[ $port != 22 ]]; then
      names+=",[h$i]:$port,[$(addr4 "$i")]:$port,[$(addr6 "$i")]:$port"
    fi
    read -r key < "$STATE/h$i/host_key.pub"
    printf '%s %s\n' "$names" "${key% h"$i"}" >> "$STATE/known_hosts"
  done
  {
    echo "# ssh -F for the hvd test cluster; works from inside its hosts only"
    for ((i = 0; i < k; i++)); do
      printf 'Host h%s\n    HostName %s\n' "$i" "$(addr4 "$i")"
    done
    # Also for addresses typed as such (ssh -F ... 10.231.0.3, fdc1:7a1::3).
    cat <<EOF
Host *
    User root
    Port $port
    IdentityFile $STATE/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $STATE/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    ConnectTimeout 5
    LogLevel ERROR
EOF
  } > "$STATE/ssh_config"
  # For launchers that run a plain `ssh`: put $STATE/bin first in PATH.
  mkdir -m 700 "$STATE/bin"
  printf '#!/bin/sh\nexec /usr/bin/ssh -F %s "$@"\n' "$STATE/ssh_config" > "$STATE/bin/ssh"
  chmod 700 "$STATE/bin/ssh"
}

write_sshd_config() {
  local i=$1 port=$2 d=$STATE/h$1
  cat > "$d/sshd_config" <<EOF
# sshd of test host h$i (cluster.sh)
ListenAddress $(addr4 "$i"):$port
ListenAddress [$(addr6 "$i")]:$port
HostKey $d/host_key
PidFile $d/sshd.pid
AuthorizedKeysFile $STATE/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
# Launchers open many sessions at once.
MaxStartups 200:30:400
MaxSessions 100
Subsystem sftp internal-sftp
EOF
  "$SSHD" -t -f "$d/sshd_config"
}

start_sshd() {
  local i=$1 d=$STATE/h$1
  # sshd forks into the background once it has bound its addresses; its own
  # messages go to the log, never to our caller's pipes.
  ( on_host "$i" "$SSHD" -f "$d/sshd_config" -E "$d/sshd.log" ) \
    < /dev/null > /dev/null 2>> "$d/sshd.err"
}

# sshd writes its pid file after it listens.
wait_sshd() {
  local i=$1 f=$STATE/h$1/sshd.pid tries
  for ((tries = 0; tries < 100; tries++)); do
    [[ -s $f ]] && return 0
    sleep 0.05
  done
  say "sshd on h$i did not start; its log says:"
  tail -n 5 "$STATE/h$i/sshd.err" "$STATE/h$i/sshd.log" >&2 || true
  return 1
}

# From h0, ssh to every host at once; each must answer with its own name.
check_ssh_all() {
  local k=$1 i out failed=0
  local -a jobs=()
  for ((i = 0; i < k; i++)); do
    (
      out=$( (on_host 0 ssh -F "$STATE/ssh_config" "h$i" hostname) 2> "$STATE/h$i/check.err") || true
      [[ $out == "h$i" ]] || { say "ssh h0 -> h$i: expected 'h$i', got '$out'"; exit 1; }
    ) &
    jobs+=($!)
  done
  for i in "${!jobs[@]}"; do
    wait "${jobs[$i]}" || failed=1
  done
  return "$failed"
}

# Anything of ours on the machine, whether or not the state directory says so.
leftovers() {
  local what=""
  [[ -e $STATE ]] && what+=" $STATE"
  compgen -G "/run/netns/$PREFIX-*" > /dev/null && what+=" namespaces"
  [[ -n $(our_links) ]] && what+=" links"
  printf '%s' "${what# }"
}

our_links() {
  ip -o link show | awk -F': ' -v p="$PREFIX-" \
    '{ sub(/@.*/, "", $2); if (index($2, p) == 1) print $2 }'
}

# shaping RATE BURST: how the links are shaped, in words.
shaping() {
  if [[ -n $1 ]]; then printf 'rate %s burst %s' "$1" "$2"; else printf 'unshaped'; fi
}

# On a failed `up`: say what failed, remove everything, keep the exit status.
up_failed() {
  local rc=$1
  trap - EXIT INT TERM
  ((rc != 0)) || rc=1
  say "up failed while $STEP (exit $rc); removing what it made"
  teardown > /dev/null 2>&1 || true
  exit "$rc"
}

cmd_up() {
  local k=${1:-} rate="" burst=256kb port=22 i t0
  [[ -n $k ]] || usage
  shift
  while (($#)); do
    case $1 in
      --rate | --burst | --ssh-port) (($# >= 2)) || die "up: $1 needs a value" ;;&
      --rate) rate=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      --ssh-port) port=$2; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  if ! [[ $k =~ ^[1-9][0-9]*$ ]] || ((k > MAX_HOSTS)); then
    die "up: K must be in 1..$MAX_HOSTS, not '$k'"
  fi
  if ! [[ $port =~ ^[1-9][0-9]*$ ]] || ((port > 65535)); then
    die "up: bad --ssh-port '$port'"
  fi
  [[ -n $burst ]] || die "up: empty --burst"
  require_root
  require_root_netns
  [[ -x $SSHD ]] || die "up: no $SSHD (apt-get install openssh-server)"
  command -v ssh-keygen > /dev/null || die "up: no ssh-keygen (apt-get install openssh-client)"
  command -v ssh > /dev/null || die "up: no ssh (apt-get install openssh-client)"
  for i in ip tc nsenter unshare; do
    command -v "$i" > /dev/null || die "up: no $i (apt-get install iproute2 util-linux)"
  done
  # sshd without PAM refuses every login, keys included, to a locked account.
  [[ $(getent shadow root | cut -d: -f2) != '!'* ]] ||
    die "up: root's password is locked ('!' in /etc/shadow): sshd (UsePAM no) would refuse key logins"
  if is_up; then
    die "up: a cluster is already up ($(setting hosts) hosts); run 'cluster.sh down' first"
  fi
  local left
  left=$(leftovers)
  [[ -z $left ]] || die "up: leftovers of an earlier cluster ($left); run 'cluster.sh down' first"
  # mkdir is the lock: of two `up`s at once, one fails here.
  mkdir -m 700 "$STATE" 2> /dev/null || die "up: $STATE exists; another 'up' running? else run 'cluster.sh down'"

  t0=$(date +%s%N)
  trap 'up_failed $?' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  printf 'hosts=%s\nport=%s\nrate=%s\nburst=%s\n' "$k" "$port" "$rate" "$burst" > "$STATE/settings"
  mkdir "$STATE/mnt" "$STATE/etc-slurm"
  # The hosts' /etc/slurm: the machine's (its plugin configuration), and
  # later `slurm up`'s slurm.conf.
  if [[ -d /etc/slurm ]]; then
    cp -a /etc/slurm/. "$STATE/etc-slurm/"
    rm -f "$STATE/etc-slurm/slurm.conf"
  fi

  STEP="adding the unreachable routes"
  fence_on
  STEP="making bridge $BRIDGE"
  make_bridge
  for ((i = 0; i < k; i++)); do
    STEP="making host h$i"
    make_host "$i" "$rate" "$burst"
  done
  STEP="writing the hosts file and ssh keys"
  write_hosts_file "$k"
  write_ssh_client "$k" "$port"
  if [[ ! -d /run/sshd ]]; then
    mkdir -m 755 /run/sshd
    touch "$MADE_RUN_SSHD"
  fi
  for ((i = 0; i < k; i++)); do
    STEP="starting sshd on h$i"
    write_sshd_config "$i" "$port"
    start_sshd "$i"
  done
  for ((i = 0; i < k; i++)); do
    STEP="waiting for sshd on h$i"
    wait_sshd "$i"
  done
  STEP="checking ssh from h0 to every host"
  check_ssh_all "$k"
  touch "$STATE/ready"
  trap - EXIT INT TERM

  local ms=$((($(date +%s%N) - t0) / 1000000))
  printf 'cluster.sh: up: h0..h%s = %s..%s, %s..%s, sshd port %s, %s, ssh h0->all ok, %s ms; ssh -F %s\n' \
    "$((k - 1))" "$(addr4 0)" "$(addr4 $((k - 1)))" "$(addr6 0)" "$(addr6 $((k - 1)))" "$port" \
    "$(shaping "$rate" "$burst")" "$ms" "$STATE/ssh_config"
}

# -------------------------------------------------------------------- down

# Remove everything of ours; quiet about what is already gone.  The fence
# goes last, after the last way to reach the hosts is gone.
teardown() {
  local link ns
  slurm_stop
  spark_stop
  stop_host_procs
  # Deleting one end of a veth deletes both, at once; a namespace that goes
  # away only frees its end later, asynchronously.
  for link in $(our_links); do
    [[ $link == "$BRIDGE" ]] || ip link del "$link" 2> /dev/null || true
  done
  for ns in /run/netns/"$PREFIX"-*; do
    if [[ -e $ns ]]; then ip netns del "${ns##*/}" 2> /dev/null || true; fi
  done
  ip link del "$BRIDGE" 2> /dev/null || true
  # /run/sshd goes with the last cluster whose sshd may still need it.
  if [[ -e $MADE_RUN_SSHD ]] && ! others_up; then
    rmdir /run/sshd 2> /dev/null || true
    rm -f "$MADE_RUN_SSHD"
  fi
  rm -rf "$STATE"
  fence_off
}

# Another cluster (another HVD_CLUSTER_ID) is up, or being made.
others_up() {
  local d
  for d in /run/hvd-cluster /run/hvd-cluster-[0-9]*; do
    [[ $d != "$STATE" && -d $d ]] && return 0
  done
  return 1
}

cmd_down() {
  require_root
  require_root_netns
  teardown
  local left
  left=$(leftovers)
  [[ -z $left ]] || die "down: could not remove: $left"
  echo "cluster.sh: down"
}

# ------------------------------------------------------------ the others

cmd_exec() {
  (($# >= 2)) || usage
  local i
  i=$(host_index "$1")
  shift
  on_host "$i" "$@"
}

cmd_ssh_config() {
  require_up
  printf '%s\n' "$STATE/ssh_config"
}

cmd_status() {
  if ! is_up; then
    local left
    left=$(leftovers)
    echo "not up${left:+ (leftovers: $left; run 'cluster.sh down')}"
    return 1
  fi
  local k i ns qdisc pid rate
  k=$(setting hosts)
  rate=$(setting rate)
  printf 'up: %s hosts, sshd port %s, %s, ssh -F %s\n' "$k" "$(setting port)" \
    "$(shaping "$rate" "$(setting burst)")" "$STATE/ssh_config"
  for ((i = 0; i < k; i++)); do
    ns=$(ns_name "$i")
    qdisc=$(tc -n "$ns" qdisc show dev eth0 2> /dev/null | head -n 1) || qdisc="?"
    pid=$(cat "$STATE/h$i/sshd.pid" 2> /dev/null) || pid="?"
    printf 'h%s  %s  %s  eth0 %s  sshd %s  qdisc: %s\n' "$i" "$(addr4 "$i")" "$(addr6 "$i")" \
      "$(ip -n "$ns" -br link show dev eth0 2> /dev/null | awk '{print $2}')" "$pid" "$qdisc"
  done
}

cmd_check() {
  local missing="" k i pid
  if is_up; then
    k=$(setting hosts)
    for ((i = 0; i < k; i++)); do
      [[ -e /run/netns/$(ns_name "$i") ]] || missing+="; namespace of h$i"
      pid=$(cat "$STATE/h$i/sshd.pid" 2> /dev/null) || pid=""
      [[ -n $pid ]] && is_our_daemon "$pid" || missing+="; sshd of h$i"
    done
  else
    missing+="; the cluster (not up)"
  fi
  local fence
  fence=$(fence_missing)
  [[ -z $fence ]] || missing+="; route(s) $fence in the root namespace"
  [[ -z $missing ]] || die "check failed, missing: ${missing#; }"
}

cmd_pids() {
  (($# <= 1)) || usage
  local want="" pid h
  local -A daemon=()
  [[ $# == 0 ]] || want=$(host_index "$1")
  for pid in $(sshd_daemons 2> /dev/null) $(slurm_daemons 2> /dev/null); do daemon[$pid]=1; done
  host_procs | while read -r pid h; do
    [[ -z $want || $h == "$want" ]] || continue
    [[ -z ${daemon[$pid]:-} ]] || continue
    printf '%s\n' "$pid"
  done | sort -n
}

cmd_link() {
  (($# == 2)) || usage
  local i
  i=$(host_index "$1")
  case $2 in
    down | up) ip -n "$(ns_name "$i")" link set eth0 "$2" ;;
    *) usage ;;
  esac
}

# ------------------------------------------------------------------- SLURM

readonly SLURM_CPUS_DEFAULT=4

slurm_conf() {
  local k=$1 cpus=$2 d=$STATE/slurm i
  cat <<EOF
# SLURM of the hvd test cluster $ID (cluster.sh slurm up)
ClusterName=hvdc$ID
SlurmctldHost=h0($(addr4 0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge.socket
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$d/ctld
SlurmdSpoolDir=$d/spool/%n
TmpFS=$d/tmp/%n
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=2
MinJobAge=10
SlurmctldTimeout=30
SlurmdTimeout=30
EOF
  for ((i = 0; i < k; i++)); do
    printf 'NodeName=h%s NodeAddr=%s CPUs=%s State=UNKNOWN\n' "$i" "$(addr4 "$i")" "$cpus"
  done
  echo "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
}

# Waits for every node to be idle in sinfo, as h0 sees it.
slurm_wait_idle() {
  local k=$1 idle=0 tries
  for ((tries = 0; tries < 200; tries++)); do
    idle=$( (on_host 0 sinfo -h -N -t idle -o '%N' 2> /dev/null || true) | sort -u | wc -l)
    ((idle >= k)) && return 0
    sleep 0.1
  done
  say "slurm up: only $idle of $k nodes idle after 20 s; logs in $STATE/slurm/log"
  return 1
}

slurm_up_failed() {
  local rc=$1
  trap - EXIT INT TERM
  ((rc != 0)) || rc=1
  say "slurm up failed while $STEP (exit $rc); stopping it (logs were in $STATE/slurm/log)"
  tail -n 5 "$STATE"/slurm/log/* >&2 2> /dev/null || true
  slurm_stop > /dev/null 2>&1 || true
  exit "$rc"
}

cmd_slurm_up() {
  local cpus=$SLURM_CPUS_DEFAULT k i b d=$STATE/slurm t0
  while (($#)); do
    case $1 in
      --cpus) (($# >= 2)) || die "slurm up: --cpus needs a value"; cpus=$2; shift 2 ;;
      *) die "slurm up: unknown option '$1'" ;;
    esac
  done
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "slurm up: bad --cpus '$cpus'"
  require_root
  require_root_netns
  require_up
  for b in munged slurmctld slurmd srun sinfo; do
    command -v "$b" > /dev/null ||
      die "slurm up: no $b (apt-get install munge slurmctld slurmd slurm-client)"
  done
  [[ -d $STATE/etc-slurm && -d /etc/slurm ]] ||
    die "slurm up: no /etc/slurm (install slurm-client before 'cluster.sh up')"
  if [[ -e $d ]]; then die "slurm up: SLURM is already up; run 'cluster.sh slurm down' first"; fi
  k=$(setting hosts)
  t0=$(date +%s%N)
  trap 'slurm_up_failed $?' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  STEP="making $d"
  # munged wants every directory above its socket open to all for search
  # (not reading), its key private.
  chmod 711 "$STATE"
  mkdir -m 755 "$d"
  mkdir -p "$d/ctld" "$d/log"
  for ((i = 0; i < k; i++)); do mkdir -p "$d/spool/h$i" "$d/tmp/h$i"; done
  (umask 077 && head -c 1024 /dev/urandom > "$d/munge.key")
  STEP="starting munged"
  munged --key-file="$d/munge.key" --socket="$d/munge.socket" --pid-file="$d/munged.pid" \
    --log-file="$d/log/munged.log" --seed-file="$d/munged.seed" < /dev/null > /dev/null
  slurm_conf "$k" "$cpus" > "$STATE/etc-slurm/slurm.conf"
  STEP="starting slurmctld on h0"
  ( on_host 0 slurmctld -f "$STATE/etc-slurm/slurm.conf" ) \
    < /dev/null > /dev/null 2>> "$d/log/start.err"
  for ((i = 0; i < k; i++)); do
    STEP="starting slurmd on h$i"
    ( on_host "$i" slurmd -f "$STATE/etc-slurm/slurm.conf" ) \
      < /dev/null > /dev/null 2>> "$d/log/start.err"
  done
  STEP="waiting for the nodes to be idle"
  slurm_wait_idle "$k"
  touch "$d/ready"
  trap - EXIT INT TERM
  printf 'cluster.sh: slurm up: slurmctld on h0, slurmd on h0..h%s, %s CPUs each, %s ms\n' \
    "$((k - 1))" "$cpus" "$((($(date +%s%N) - t0) / 1000000))"
}

# A process that is gone, or a zombie waiting to be reaped.
is_gone() {
  local st
  st=$(sed 's/^.*) //' "/proc/$1/stat" 2> /dev/null | cut -c1) || return 0
  [[ -z $st || $st == Z ]]
}

# Stops the SLURM daemons (by their pid files, while they are still ours:
# TERM, up to 3 s, then KILL) and removes SLURM's state.  Job steps still
# running are processes of the hosts, which `down` stops.
slurm_stop() {
  local pid tries left
  local -a pids=()
  [[ -d $STATE/slurm ]] || return 0
  for pid in $(slurm_daemons); do
    if is_our_daemon "$pid"; then pids+=("$pid"); fi
  done
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2> /dev/null || true
    for ((tries = 0; tries < 30; tries++)); do
      left=0
      for pid in "${pids[@]}"; do is_gone "$pid" || left=1; done
      ((left)) || break
      sleep 0.1
    done
    for pid in "${pids[@]}"; do
      if is_our_daemon "$pid"; then kill -KILL "$pid" 2> /dev/null || true; fi
    done
  fi
  rm -f "$STATE/etc-slurm/slurm.conf"
  rm -rf "$STATE/slurm"
  chmod 700 "$STATE"
}

cmd_slurm() {
  local sub=${1:-}
  (($#)) && shift
  case $sub in
    up) cmd_slurm_up "$@" ;;
    down)
      require_root
      require_root_netns
      slurm_stop
      echo "cluster.sh: slurm down" ;;
    *) usage ;;
  esac
}

# --------------------------------------------------------------------- Ray

readonly RAY_PORT=6390
readonly RAY_PYTHON_DEFAULT=/root/.cache/hvd/venv/bin/python

# The Ray processes of the hosts: in a host's namespace, and Ray's by their
# command line (its daemons, its workers "ray::...", ray start itself).
ray_procs() {
  local pid h cmd
  host_procs | while read -r pid h; do
    cmd=$({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2> /dev/null) || continue
    case $cmd in
      ray::* | *"/ray/"* | *" -m ray."* | *"$STATE/ray"*) printf '%s\n' "$pid" ;;
    esac
  done
}

ray_stop() {
  local tries
  local -a pids
  mapfile -t pids < <(ray_procs)
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2> /dev/null || true
    for ((tries = 0; tries < 30; tries++)); do
      [[ -n $(ray_procs) ]] || break
      sleep 0.1
    done
    for ((tries = 0; tries < 20; tries++)); do
      mapfile -t pids < <(ray_procs)
      ((${#pids[@]})) || break
      kill -KILL "${pids[@]}" 2> /dev/null || true
      sleep 0.05
    done
  fi
  rm -rf "$STATE/ray"
}

ray_up_failed() {
  local rc=$1
  trap - EXIT INT TERM
  ((rc != 0)) || rc=1
  say "ray up failed while $STEP (exit $rc); stopping it (logs were in $STATE/ray)"
  tail -n 5 "$STATE"/ray/start-*.log >&2 2> /dev/null || true
  ray_stop > /dev/null 2>&1 || true
  exit "$rc"
}

cmd_ray_up() {
  local cpus=2 py=$RAY_PYTHON_DEFAULT k i d=$STATE/ray t0 ray
  while (($#)); do
    case $1 in
      --cpus) (($# >= 2)) || die "ray up: --cpus needs a value"; cpus=$2; shift 2 ;;
      --python) (($# >= 2)) || die "ray up: --python needs a value"; py=$2; shift 2 ;;
      *) die "ray up: unknown option '$1'" ;;
    esac
  done
  [[ $cpus =~ ^[1-9][0-9]*$ ]] || die "ray up: bad --cpus '$cpus'"
  require_root
  require_root_netns
  require_up
  ray=$(dirname "$py")/ray
  [[ -x $ray ]] || die "ray up: no $ray (scripts/venv.sh installs ray; --python names another)"
  if [[ -e $d ]]; then die "ray up: Ray is already up; run 'cluster.sh ray down' first"; fi
  k=$(setting hosts)
  t0=$(date +%s%N)
  trap 'ray_up_failed $?' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$d/tmp"
  STEP="starting the head on h0"
  ( on_host 0 env RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 "$ray" start --head --node-ip-address="$(addr4 0)" --port="$RAY_PORT" \
      --num-cpus="$cpus" --temp-dir="$d/tmp" --include-dashboard=false \
      --disable-usage-stats ) < /dev/null > "$d/start-h0.log" 2>&1
  for ((i = 1; i < k; i++)); do
    STEP="starting the node on h$i"
    ( on_host "$i" env RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 "$ray" start --address="$(addr4 0):$RAY_PORT" \
        --node-ip-address="$(addr4 "$i")" --num-cpus="$cpus" --disable-usage-stats ) \
      < /dev/null > "$d/start-h$i.log" 2>&1
  done
  touch "$d/ready"
  trap - EXIT INT TERM
  printf 'cluster.sh: ray up: head on h0 (%s:%s), nodes on h0..h%s, %s CPUs each, %s ms\n' \
    "$(addr4 0)" "$RAY_PORT" "$((k - 1))" "$cpus" "$((($(date +%s%N) - t0) / 1000000))"
}

cmd_ray() {
  local sub=${1:-}
  (($#)) && shift
  case $sub in
    up) cmd_ray_up "$@" ;;
    down)
      require_root
      require_root_netns
      ray_stop
      echo "cluster.sh: ray down" ;;
    address) require_up; printf '%s:%s\n' "$(addr4 0)" "$RAY_PORT" ;;
    *) usage ;;
  esac
}

# ------------------------------------------------------------------- Spark

readonly SPARK_PORT=7077
SPARK_CLASS=

# The Spark processes of the hosts: in a host's namespace, and Spark's by
# their command line (the JVMs run org.apache.spark classes; pyspark's
# Python workers run `-m pyspark.daemon` or `-m pyspark.worker`).
spark_procs() {
  local pid h cmd
  host_procs | while read -r pid h; do
    cmd=$({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2> /dev/null) || continue
    case $cmd in
      *org.apache.spark.* | *" -m pyspark.daemon"* | *" -m pyspark.worker"* | *"$STATE/spark"*)
        printf '%s\n' "$pid" ;;
    esac
  done
}

spark_stop() {
  local tries
  local -a pids
  mapfile -t pids < <(spark_procs)
  if ((${#pids[@]})); then
    kill -TERM "${pids[@]}" 2> /dev/null || true
    for ((tries = 0; tries < 50; tries++)); do
      [[ -n $(spark_procs) ]] || break
      sleep 0.1
    done
    for ((tries = 0; tries < 20; tries++)); do
      mapfile -t pids < <(spark_procs)
      ((${#pids[@]})) || break
      kill -KILL "${pids[@]}" 2> /dev/null || true
      sleep 0.05
    done
  fi
  rm -rf "$STATE/spark"
}

spark_up_failed() {
  local rc=$1
  trap - EXIT INT TERM
  ((rc != 0)) || rc=1
  say "spark up failed while $STEP (exit $rc); stopping it (logs were in $STATE/spark)"
  tail -n 5 "$STATE"/spark/*.log >&2 2> /dev/null || true
  spark_stop > /dev/null 2>&1 || true
  exit "$rc"
}

# spark_daemon I NAME CLASS ARGS...: starts a Spark daemon on host hI,
# detached, its output in $STATE/spark/NAME.log.
spark_daemon() {
  local i=$1 name=$2 d=$STATE/spark
  shift 2
  mkdir -p "$d/work-$name" "$d/local-$name"
  ( export SPARK_WORKER_DIR="$d/work-$name" SPARK_LOCAL_DIRS="$d/local-$name"
    on_host "$i" setsid "$SPARK_CLASS" "$@" ) < /dev/null > "$d/$name.log" 2>&1 &
}

# spark_wait NAME TEXT: waits (at most 180 s) for TEXT in NAME's log.
spark_wait() {
  local f=$STATE/spark/$1.log tries
  for ((tries = 0; tries < 1800; tries++)); do
    grep -q -- "$2" "$f" 2> /dev/null && return 0
    sleep 0.1
  done
  say "spark up: no '$2' in $f after 180 s"
  return 1
}

cmd_spark_up() {
  local cores=2 py=$RAY_PYTHON_DEFAULT k i d=$STATE/spark t0 home master
  while (($#)); do
    case $1 in
      --cores) (($# >= 2)) || die "spark up: --cores needs a value"; cores=$2; shift 2 ;;
      --python) (($# >= 2)) || die "spark up: --python needs a value"; py=$2; shift 2 ;;
      *) die "spark up: unknown option '$1'" ;;
    esac
  done
  [[ $cores =~ ^[1-9][0-9]*$ ]] || die "spark up: bad --cores '$cores'"
  require_root
  require_root_netns
  require_up
  home=$("$py" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2> /dev/null) ||
    die "spark up: $py has no pyspark (scripts/venv.sh installs it; --python names another)"
  [[ -x $home/bin/spark-class ]] || die "spark up: no $home/bin/spark-class"
  command -v java > /dev/null || [[ -x ${JAVA_HOME:-/nonexistent}/bin/java ]] ||
    die "spark up: no java on PATH and no JAVA_HOME (Spark needs Java 17)"
  if [[ -e $d ]]; then die "spark up: Spark is already up; run 'cluster.sh spark down' first"; fi
  k=$(setting hosts)
  master="spark://$(addr4 0):$SPARK_PORT"
  t0=$(date +%s%N)
  trap 'spark_up_failed $?' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  mkdir -p "$d/conf"
  export SPARK_HOME=$home SPARK_CONF_DIR=$d/conf PYSPARK_PYTHON=$py SPARK_DAEMON_MEMORY=256m
  SPARK_CLASS=$home/bin/spark-class
  STEP="starting the master on h0"
  spark_daemon 0 master org.apache.spark.deploy.master.Master --host "$(addr4 0)" \
    --port "$SPARK_PORT" --webui-port 8080
  spark_wait master "ALIVE"
  for ((i = 0; i < k; i++)); do
    STEP="starting the worker on h$i"
    spark_daemon "$i" "worker-h$i" org.apache.spark.deploy.worker.Worker "$master" \
      --host "$(addr4 "$i")" --cores "$cores" --memory 2g --webui-port 8081 \
      --work-dir "$d/work-worker-h$i"
  done
  for ((i = 0; i < k; i++)); do
    STEP="waiting for the worker on h$i to register"
    spark_wait "worker-h$i" "Successfully registered with master"
  done
  touch "$d/ready"
  trap - EXIT INT TERM
  printf 'cluster.sh: spark up: master on h0 (%s), workers on h0..h%s, %s cores each, %s ms\n' \
    "$master" "$((k - 1))" "$cores" "$((($(date +%s%N) - t0) / 1000000))"
}

cmd_spark() {
  local sub=${1:-}
  (($#)) && shift
  case $sub in
    up) cmd_spark_up "$@" ;;
    down)
      require_root
      require_root_netns
      spark_stop
      echo "cluster.sh: spark down" ;;
    address) require_up; printf 'spark://%s:%s\n' "$(addr4 0)" "$SPARK_PORT" ;;
    *) usage ;;
  esac
}

main() {
  local cmd=${1:-}
  (($#)) && shift
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    exec) cmd_exec "$@" ;;
    ssh-config) cmd_ssh_config ;;
    status) cmd_status ;;
    check) cmd_check ;;
    pids) cmd_pids "$@" ;;
    link) cmd_link "$@" ;;
    slurm) cmd_slurm "$@" ;;
    ray) cmd_ray "$@" ;;
    spark) cmd_spark "$@" ;;
    __enter) enter_host "$@" ;;
    *) usage ;;
  esac
}

main "$@"
