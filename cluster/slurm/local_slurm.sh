#!/usr/bin/env bash
# A single-node SLURM on this machine, for dkrp's tests and for trying the sbatch scripts.
#
#   cluster/slurm/local_slurm.sh start [DIR]   # idempotent; prints the line to export
#   cluster/slurm/local_slurm.sh stop  [DIR]   # stops the daemons it started, keeps DIR
#   cluster/slurm/local_slurm.sh status [DIR]
#
# Everything lives under DIR (default $DKRP_SLURM_DIR, else /tmp/dkrp-slurm): a munge key
# and munged on its own socket, slurm.conf (one node: this machine's CPUs and memory as
# `slurmd -C` reports them), slurmctld's state, slurmd's spool, pid and log files. No
# system file is touched: clients find the cluster through SLURM_CONF=DIR/slurm.conf.
# Needs root (slurmd starts jobs as their user) and `apt-get install slurm-wlm munge`.
# Ports: DKRP_SLURM_PORT (slurmctld, default 6817) and the next one (slurmd).
set -euo pipefail

action="${1:-}"
dir="${2:-${DKRP_SLURM_DIR:-/tmp/dkrp-slurm}}"
port="${DKRP_SLURM_PORT:-6817}"
conf="$dir/slurm.conf"

die() { echo "local_slurm.sh: $*" >&2; exit 1; }

alive() {  # alive PIDFILE: the process it names is running
    [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

stop_pid() {  # stop_pid PIDFILE: SIGTERM, then SIGKILL after 10 s
    local pidfile=$1 pid i
    alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for i in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
}

write_conf() {
    local node cpus mem
    node=$(hostname -s)
    # slurmd -C: "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 ... RealMemory=24105"
    cpus=$(slurmd -C | sed -n 's/.* CPUs=\([0-9]*\).*/\1/p')
    mem=$(slurmd -C | sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p')
    [[ -n "$cpus" && -n "$mem" ]] || die "slurmd -C did not report CPUs and RealMemory"
    cat > "$conf.tmp" <<CONF
# written by cluster/slurm/local_slurm.sh: a single-node cluster on $node
ClusterName=dkrp
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# no cgroups here: processes are tracked by parentage, no binding to cores
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
# a cancelled job's processes get SIGKILL 5 s after SIGTERM (default 30)
KillWait=5
# finished jobs stay visible to scontrol for 5 minutes (their exit code)
MinJobAge=300
# a job without --mem gets its CPUs' share of the node
DefMemPerCPU=$((mem / cpus))
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
    mv "$conf.tmp" "$conf"
}

start() {
    [[ $EUID -eq 0 ]] || die "needs root (slurmd runs jobs as their user)"
    command -v slurmctld >/dev/null && command -v munged >/dev/null \
        || die "slurmctld or munged not installed: apt-get install -y slurm-wlm munge"
    mkdir -p "$dir"/{munge,state,spool,log}
    chmod 700 "$dir/munge"
    if [[ ! -s "$dir/munge.key" ]]; then
        (umask 077; head -c 1024 /dev/urandom > "$dir/munge.key")
    fi
    if ! alive "$dir/munged.pid"; then
        munged --force --key-file="$dir/munge.key" --socket="$dir/munge/munge.socket" \
            --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" \
            --seed-file="$dir/munge/munged.seed"
    fi
    write_conf
    export SLURM_CONF="$conf"
    alive "$dir/slurmctld.pid" || slurmctld -f "$conf"
    alive "$dir/slurmd.pid" || slurmd -f "$conf"
    # up when the node takes jobs (idle, mixed or allocated)
    local i state=""
    for i in $(seq 150); do
        state=$(sinfo -h -N -o %t 2>/dev/null | head -1 || true)
        [[ "$state" =~ ^(idle|mix|alloc) ]] && break
        sleep 0.2
    done
    [[ "$state" =~ ^(idle|mix|alloc) ]] \
        || die "the node did not come up (state '${state:-none}'); see $dir/log/"
    echo "export SLURM_CONF=$conf"
}

stop() {
    stop_pid "$dir/slurmd.pid"
    stop_pid "$dir/slurmctld.pid"
    stop_pid "$dir/munged.pid"
}

status() {
    local name
    for name in munged slurmctld slurmd; do
        if alive "$dir/$name.pid"; then
            echo "$name: running (pid $(cat "$dir/$name.pid"))"
        else
            echo "$name: stopped"
        fi
    done
}

case "$action" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status [DIR]" >&2; exit 2 ;;
esac
