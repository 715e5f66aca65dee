#!/usr/bin/env bash
# A private Slurm on this machine for `make test-cluster`: one node on the loopback address, or
# (HOSTS given) a controller and several nodes on the hosts of tests/cluster/hosts.sh.
#
#   tests/cluster/slurm.sh start DIR [HOSTS]  install what is missing (Debian, as root), start it
#   tests/cluster/slurm.sh stop DIR           stop exactly the daemons `start` started
#   tests/cluster/slurm.sh env DIR            the line to export so that srun/sbatch/squeue find it
#
# Everything lives in DIR: its own slurm.conf, munge key and socket, state, logs and the pid
# files of its daemons (munged, slurmctld, a slurmd per node), so that nothing of a machine's own
# Slurm or munge is read or changed; clients find it through SLURM_CONF=DIR/slurm.conf. The
# ports (16817, 16818) are not Slurm's usual ones for the same reason. A node declares
# $SLURM_CPUS CPUs (default 8 on one node, more than a laptop's cores, so that jobs of 6-8 ranks
# fit; 4 a node over hosts, so that a job of 5 ranks needs two nodes).
#
# With HOSTS = N (after `tests/cluster/hosts.sh up N`): slurmctld on h0, a slurmd on each of
# h1..h(N-1), its node named after its host, each in its host's network namespace, so that
# `srun -N 2` puts ranks on two hosts that talk over their links. The daemons enter only the
# namespace's network (nsenter --net), not `ip netns exec`'s mounts, whose fresh /sys hides the
# cgroup file systems slurmd needs; clients (srun, sbatch, squeue) reach the controller from
# the hosts (`tests/cluster/hosts.sh exec h0 ...`, or anywhere in a host's namespace). munged's
# socket is a file, which every namespace reaches.
#
# Needs root (slurmd starts job steps as their users) and Debian/Ubuntu's packages slurmctld,
# slurmd, slurm-client, munge and libpmix-dev (Slurm's pmix plugin, for Open MPI), which
# `start` installs with apt-get when they are missing. Every wait has a limit.
set -euo pipefail

cmd=${1:-}; dir=${2:-}; hosts=${3:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start DIR [HOSTS] | stop DIR | env DIR" >&2; exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
prefix=${OMTL_HOSTS_PREFIX:-omtlt}

# the clients' and daemons' network: this machine's, or (over hosts, as DIR/hosts says) HOST's
on() {                  # on HOST CMD...: CMD in HOST's network namespace; on - CMD: here
    local h=$1; shift
    if [ "$h" = - ]; then "$@"; else nsenter --net="/run/netns/$prefix-$h" "$@"; fi
}
ctl=-
# stop: where start put the controller (a start writes DIR/hosts anew)
if [ "$cmd" = stop ] && [ -f "$dir/hosts" ]; then ctl=h0; prefix=$(cut -d' ' -f1 "$dir/hosts"); fi

stop_pid() {            # stop_pid FILE: TERM, then KILL after 10 s, the process FILE names
    local file=$1 pid
    [ -f "$file" ] || return 0
    pid=$(cat "$file" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
}

case "$cmd" in
env)
    printf 'export SLURM_CONF=%q\n' "$(cd "$dir" && pwd)/slurm.conf"; exit 0 ;;
stop)
    # every job of this cluster cancelled and gone first (their steps are not slurmd's
    # children), then the daemons
    if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
        export SLURM_CONF=$dir/slurm.conf
        jobs=$(on $ctl timeout 10 squeue -h -o %A 2>/dev/null | sort -u || true)
        if [ -n "$jobs" ]; then
            on $ctl timeout 10 scancel $jobs 2>/dev/null || true
            for _ in $(seq 30); do
                [ -z "$(on $ctl timeout 10 squeue -h -o %A 2>/dev/null || true)" ] && break; sleep 1
            done
        fi
    fi
    for file in "$dir"/slurmd-*.pid; do stop_pid "$file"; done
    stop_pid "$dir/slurmctld.pid"; stop_pid "$dir/munged.pid"
    exit 0 ;;
start) ;;
*)
    echo "usage: $0 start DIR [HOSTS] | stop DIR | env DIR" >&2; exit 2 ;;
esac
if [ -n "$hosts" ]; then
    case $hosts in *[!0-9]*) hosts=0 ;; esac
    if [ "$hosts" -lt 2 ]; then echo "error: HOSTS must be a number of hosts, at least 2" >&2; exit 2; fi
    "$here/hosts.sh" exec "h$((hosts - 1))" true 2>/dev/null || {
        echo "error: the hosts are not up: run 'tests/cluster/hosts.sh up $hosts' first" >&2; exit 1; }
fi

if [ "$(id -u)" != 0 ]; then
    echo "error: a local Slurm needs root (slurmd starts jobs as their users); run as root, e.g. in CI" >&2
    exit 1
fi
lib=$(dpkg -L libpmix-dev 2>/dev/null | grep -m1 '/libpmix.so$' || true)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
        || ! command -v munged >/dev/null || [ -z "$lib" ]; then
    command -v apt-get >/dev/null || { echo "error: Slurm is not installed and there is no apt-get to install it" >&2; exit 1; }
    echo "installing Debian's slurmctld, slurmd, slurm-client, munge and libpmix-dev" >&2
    timeout 600 apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge libpmix-dev >/dev/null
fi

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
chmod 700 "$dir"
mkdir -p "$dir/ctld" "$dir/d" "$dir/log"
if [ -n "$hosts" ]; then
    echo "$prefix $hosts" > "$dir/hosts"; ctl=h0
    cpus=${SLURM_CPUS:-4}
    control="h0($("$here/hosts.sh" addr h0))"
    nodes=$(for i in $(seq 1 $((hosts - 1))); do
        echo "NodeName=h$i NodeAddr=$("$here/hosts.sh" addr "h$i") CPUs=$cpus RealMemory=4000 State=UNKNOWN"; done)
    names=$(seq -f 'h%g' 1 $((hosts - 1)))
else
    rm -f "$dir/hosts"; ctl=-
    cpus=${SLURM_CPUS:-8}
    names=$(hostname -s)
    control="$names(127.0.0.1)"
    nodes="NodeName=$names NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN"
fi
for name in $names; do mkdir -p "$dir/d/$name"; done
# munge refuses a key or socket folder others may write to, and keys shorter than 32 bytes
[ -f "$dir/munge.key" ] || head -c 1024 /dev/urandom > "$dir/munge.key"
chmod 400 "$dir/munge.key"

first_job=$(( $(date +%s) % 60000000 + 1000 ))
cat > "$dir/slurm.conf" <<CONF
# written by tests/cluster/slurm.sh: one node on the loopback address, or nodes on test hosts
ClusterName=omtl-test
SlurmctldHost=$control
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/d/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# the site default that starts lone copies: what omtl-mpi's guard is tested against
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
# seconds between a step's SIGTERM and SIGKILL, and how long finished jobs stay in squeue
KillWait=10
MinJobAge=600
# job ids that do not start again at 1 with every start: MPICH names its shared-memory segments
# after the job step, and a killed job leaves its segment behind in /dev/shm, which a later step
# of the same id would find (and fail on) if the ids repeated
FirstJobId=$first_job
$nodes
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF=$dir/slurm.conf
running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if ! running "$dir/munged.pid"; then
    munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
        --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munged.seed"
fi
daemon() {              # daemon HOST|- CMD...: start CMD on HOST, with the host's name
    local h=$1; shift
    if [ "$h" = - ]; then "$@"; else on "$h" unshare -u sh -c 'hostname "$0"; exec "$@"' "$h" "$@"; fi
}
running "$dir/slurmctld.pid" || daemon $ctl slurmctld -f "$dir/slurm.conf" -c
for name in $names; do
    running "$dir/slurmd-$name.pid" || daemon "$([ -n "$hosts" ] && echo "$name" || echo -)" slurmd -f "$dir/slurm.conf"
done
# usable once every node is idle (a restarted one may come back down: resume it)
count=$(echo "$names" | wc -w)
for _ in $(seq 60); do
    sleep 0.5; running "$dir/slurmctld.pid" || break     # the controller gave up: see its log
    states=$(on $ctl timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null || true)
    if [ "$(echo "$states" | grep -c ' idle$')" = "$count" ]; then
        echo "slurm: $count node(s) idle ($(echo $names)), $cpus CPUs each, SLURM_CONF=$SLURM_CONF" >&2; exit 0
    fi
    echo "$states" | while read -r node state; do
        case "$state" in down*|drain*) on $ctl timeout 5 scontrol update nodename="$node" state=resume 2>/dev/null || true ;; esac
    done
    sleep 0.5
done
echo "error: the local Slurm did not come up within a minute (or its controller stopped); see $dir/log/" >&2
tail -n 5 "$dir"/log/slurm*.log >&2 || true
exit 1
