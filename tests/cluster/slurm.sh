#!/usr/bin/env bash
# A private one-node Slurm on this machine, on the loopback address, for `make test-cluster`.
#
#   tests/cluster/slurm.sh start DIR    install what is missing (Debian, as root), start it
#   tests/cluster/slurm.sh stop DIR     stop exactly the daemons `start` started
#   tests/cluster/slurm.sh env DIR      the line to export so that srun/sbatch/squeue find it
#
# Everything lives in DIR: its own slurm.conf, munge key and socket, state, logs and the pid
# files of the three daemons (munged, slurmctld, slurmd), so that nothing of a machine's own
# Slurm or munge is read or changed; clients find it through SLURM_CONF=DIR/slurm.conf. The
# ports (16817, 16818) are not Slurm's usual ones for the same reason. The node declares
# $SLURM_CPUS CPUs (default 8, more than a laptop's cores) so that jobs of 6-8 ranks fit.
#
# Needs root (slurmd starts job steps as their users) and Debian/Ubuntu's packages slurmctld,
# slurmd, slurm-client, munge and libpmix-dev (Slurm's pmix plugin, for Open MPI), which
# `start` installs with apt-get when they are missing. Every wait has a limit.
set -euo pipefail

cmd=${1:-}; dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
    echo "usage: $0 start|stop|env DIR" >&2; exit 2
fi
cpus=${SLURM_CPUS:-8}
host=$(hostname -s)

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
    echo "export SLURM_CONF=$dir/slurm.conf"; exit 0 ;;
stop)
    # every job of this cluster cancelled and gone first (their steps are not slurmd's
    # children), then the daemons
    if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
        export SLURM_CONF=$dir/slurm.conf
        jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u || true)
        if [ -n "$jobs" ]; then
            timeout 10 scancel $jobs 2>/dev/null || true
            for _ in $(seq 30); do
                [ -z "$(timeout 10 squeue -h -o %A 2>/dev/null || true)" ] && break; sleep 1
            done
        fi
    fi
    stop_pid "$dir/slurmd.pid"; stop_pid "$dir/slurmctld.pid"; stop_pid "$dir/munged.pid"
    exit 0 ;;
start) ;;
*)
    echo "usage: $0 start|stop|env DIR" >&2; exit 2 ;;
esac

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
# munge refuses a key or socket folder others may write to, and keys shorter than 32 bytes
[ -f "$dir/munge.key" ] || head -c 1024 /dev/urandom > "$dir/munge.key"
chmod 400 "$dir/munge.key"

first_job=$(( $(date +%s) % 60000000 + 1000 ))
cat > "$dir/slurm.conf" <<CONF
# written by tests/cluster/slurm.sh: one node, loopback only
ClusterName=omtl-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmdPort=16818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/d
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF

export SLURM_CONF=$dir/slurm.conf
if ! { [ -f "$dir/munged.pid" ] && kill -0 "$(cat "$dir/munged.pid")" 2>/dev/null; }; then
    munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
        --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munged.seed"
fi
if ! { [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; }; then
    slurmctld -f "$dir/slurm.conf" -c
fi
if ! { [ -f "$dir/slurmd.pid" ] && kill -0 "$(cat "$dir/slurmd.pid")" 2>/dev/null; }; then
    slurmd -f "$dir/slurm.conf"
fi
# the node is usable once it is idle (a restarted one may come back down: resume it)
for _ in $(seq 60); do
    state=$(timeout 10 sinfo -h -n "$host" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && { echo "slurm: node $host idle, $cpus CPUs, SLURM_CONF=$SLURM_CONF" >&2; exit 0; }
    case "$state" in down*|drain*) timeout 10 scontrol update nodename="$host" state=resume 2>/dev/null || true ;; esac
    sleep 1
done
echo "error: the local Slurm did not come up within a minute; see $dir/log/" >&2
tail -n 5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log" >&2 || true
exit 1
