#!/usr/bin/env bash
# start-slurm.sh - start a real single-node Slurm on this machine for the `slurm` tests.
#
# Runs munged, (mariadbd + slurmdbd), slurmctld and slurmd as plain daemons (no
# systemd), all files under one directory, on ports of their own, so it does not
# touch /etc/slurm, /etc/munge or a system Slurm.  Installs the Debian 12 packages
# it needs when they are missing (apt-get update only when needed), as root.
# Idempotent: daemons already running from DIR are left as they are (restarted
# only when the generated config changed); dead ones are started again.
#
# Usage:
#   eval "$(bash scripts/start-slurm.sh)"          # exports SLURM_CONF
#   bash scripts/start-slurm.sh [--clean] [--no-accounting] [DIR]
#   python -m pytest -m slurm                      # sbatch, squeue, scancel, scontrol, sacct
#   bash scripts/stop-slurm.sh [--purge] [DIR]
#
# stdout carries only `export VAR=value` lines (also written to DIR/env.sh);
# progress and errors go to stderr.  Exit status 0 = node is up and idle.
#
# Environment (all optional):
#   SLURM_TEST_DIR          directory for configs, state, logs, pid files
#                           (default /tmp/slurm-test; a DIR argument wins)
#   SLURM_TEST_ACCOUNTING   1 (default): mariadb + slurmdbd, so plain `sacct` works.
#                           0: no database; `sacct` answers "Slurm accounting
#                           storage is disabled", `sacct -c` reads DIR/log/jobcomp.txt
#   SLURM_TEST_CPUS         CPUs the node advertises (default 16).  Jobs are not
#                           bound to cores (task/none), so a value above `nproc`
#                           only lets more small jobs run at once.  Use $(nproc)
#                           for a truthful node.
#   SLURM_TEST_PORT_BASE    slurmctld port; slurmd +1, slurmdbd +2, mariadb +3
#                           (default 16817, i.e. not Slurm's standard 6817-6819)
#   SLURM_TEST_MIN_JOB_AGE  seconds a finished job stays visible to
#                           `scontrol show job` / `squeue -t all` (default 3600)
#   SLURM_TEST_TIMEOUT      seconds to wait for each daemon and for the node (default 90)
#   SLURM_TEST_CLEAN=1      like --clean: stop daemons of DIR and wipe DIR first
#   SLURM_TEST_MEMORY_LIMITS 0 (default): memory is not a consumable resource and not
#                           enforced (--mem only schedules).  1: memory is allocated
#                           (CR_Core_Memory, DefMemPerCPU = RealMemory / CPUs) and enforced
#                           by cgroups (task/cgroup, proctrack/cgroup, cgroup v1 at
#                           /sys/fs/cgroup): a job over its --mem ends OUT_OF_MEMORY.
#                           Needs a writable cgroup v1 memory controller.
#
# Cluster: ClusterName=testcluster, one node named `hostname -s` at 127.0.0.1,
# partitions `debug` (default, no time limit) and `short` (MaxTime 10 min),
# select/cons_tres (CR_Core), proctrack/linuxproc, task/none (no cgroups).
set -euo pipefail
umask 022

log() { printf '[start-slurm] %s\n' "$*" >&2; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; }

if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E bash "$0" "$@"
    fi
    log "ERROR: must run as root (the Slurm daemons and munged run as root)"
    exit 1
fi

CLEAN=${SLURM_TEST_CLEAN:-0}
MEMORY_LIMITS=${SLURM_TEST_MEMORY_LIMITS:-0}
ACCOUNTING=${SLURM_TEST_ACCOUNTING:-1}
DIR=${SLURM_TEST_DIR:-/tmp/slurm-test}
while [ $# -gt 0 ]; do
    case $1 in
        --clean) CLEAN=1 ;;
        --no-accounting) ACCOUNTING=0 ;;
        --accounting) ACCOUNTING=1 ;;
        -h|--help) usage; exit 0 ;;
        -*) log "unknown option: $1"; usage; exit 2 ;;
        *) DIR=$1 ;;
    esac
    shift
done

case $ACCOUNTING in 0|1) ;; *) log "ERROR: SLURM_TEST_ACCOUNTING must be 0 or 1"; exit 2 ;; esac
case $MEMORY_LIMITS in 0|1) ;; *) log "ERROR: SLURM_TEST_MEMORY_LIMITS must be 0 or 1"; exit 2 ;; esac
DIR=$(realpath -m -- "$DIR")
[ "$DIR" != / ] || { log "ERROR: refusing DIR=/"; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)

CPUS=${SLURM_TEST_CPUS:-16}
PORT_BASE=${SLURM_TEST_PORT_BASE:-16817}
MIN_JOB_AGE=${SLURM_TEST_MIN_JOB_AGE:-3600}
TIMEOUT=${SLURM_TEST_TIMEOUT:-90}
for v in CPUS PORT_BASE MIN_JOB_AGE TIMEOUT; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { log "ERROR: SLURM_TEST_$v must be a positive integer, got '${!v}'"; exit 2; }
done
CTLD_PORT=$PORT_BASE
SLURMD_PORT=$((PORT_BASE + 1))
DBD_PORT=$((PORT_BASE + 2))
DB_PORT=$((PORT_BASE + 3))
CLUSTER=testcluster

CONF=$DIR/etc/slurm.conf
DBD_CONF=$DIR/etc/slurmdbd.conf
MUNGE_SOCK=$DIR/munge/munge.socket
DB_SOCK=$DIR/mysql/mysqld.sock
RUN=$DIR/run
LOGD=$DIR/log
export SLURM_CONF=$CONF

dump_logs() {
    local f
    for f in "$LOGD"/install.log "$LOGD"/munged.log "$LOGD"/mariadb.log "$LOGD"/slurmdbd.log \
             "$LOGD"/slurmctld.log "$LOGD"/slurmd.log "$LOGD"/*.out; do
        [ -s "$f" ] || continue
        printf '\n----- last lines of %s -----\n' "$f" >&2
        tail -n 40 "$f" >&2
    done
}
die() { log "ERROR: $*"; dump_logs; exit 1; }

# --- helpers --------------------------------------------------------------
# pid_of PIDFILE COMM (from slurm-common.sh)
. "$HERE/slurm-common.sh"
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() {   # wait_for DESCRIPTION COMMAND...
    local desc=$1 end=$((SECONDS + TIMEOUT)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || die "timed out after ${TIMEOUT}s waiting for $desc"
        sleep 0.5
    done
}
stop_pid() {   # stop_pid PID: TERM, wait, KILL
    local pid=$1 _
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 60); do [ -d "/proc/$pid" ] || return 0; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null || true
}
check_port_free() {   # check_port_free PORT WHAT
    if port_busy "$1"; then
        die "port $1 (for $2) is already in use by another program; set SLURM_TEST_PORT_BASE"
    fi
}

# --- clean ------------------------------------------------------------------
if [ "$CLEAN" = 1 ] && [ -e "$DIR" ]; then
    log "--clean: stopping daemons of $DIR and wiping it"
    bash "$HERE/stop-slurm.sh" --purge "$DIR" >&2 || die "stop-slurm.sh --purge $DIR failed"
    [ ! -e "$DIR" ] || die "$DIR still exists after purge (not made by this script? remove it by hand)"
fi
if [ -e "$DIR" ] && [ ! -e "$DIR/.slurm-test-dir" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
    die "$DIR exists, is not empty and was not made by this script"
fi
mkdir -p "$DIR"/{etc,state,spool,munge,mysql,run,log}
touch "$DIR/.slurm-test-dir"
chmod 755 "$DIR" "$DIR"/{etc,state,spool,munge,mysql,run,log}
for p in "$MUNGE_SOCK" "$DB_SOCK"; do
    [ ${#p} -lt 100 ] || die "socket path $p is too long for a unix socket; use a shorter DIR"
done

# --- ports: fail before starting anything if one is taken by someone else ---
preflight_port() {   # preflight_port PIDNAME COMM PORT
    pid_of "$RUN/$1.pid" "$2" >/dev/null && return 0    # ours, already running
    check_port_free "$3" "$2"
}
preflight_port slurmctld slurmctld "$CTLD_PORT"
preflight_port slurmd slurmd "$SLURMD_PORT"
if [ "$ACCOUNTING" = 1 ]; then
    preflight_port slurmdbd slurmdbd "$DBD_PORT"
    preflight_port mariadb mariadbd "$DB_PORT"
fi

# --- packages ---------------------------------------------------------------
PKGS=(slurmctld slurmd slurm-client munge)
[ "$ACCOUNTING" = 0 ] || PKGS+=(slurmdbd mariadb-server)
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -x 'install ok installed' >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null || die "apt-get not found; install ${missing[*]} by hand"
    log "installing ${missing[*]} (log: $LOGD/install.log)"
    t0=$SECONDS
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        # keep the packages' postinst scripts from starting system-wide daemons
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt_install() {
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            -o DPkg::Lock::Timeout=300 "$@" >> "$LOGD/install.log" 2>&1
    }
    updated=0
    for p in "${missing[@]}"; do
        if ! apt-cache show "$p" >/dev/null 2>&1; then
            apt-get update -q -o DPkg::Lock::Timeout=300 >> "$LOGD/install.log" 2>&1 || true
            updated=1
            break
        fi
    done
    ok=0
    apt_install "${missing[@]}" && ok=1
    if [ $ok = 0 ] && [ $updated = 0 ]; then
        log "apt-get install failed; running apt-get update and trying again"
        apt-get update -q -o DPkg::Lock::Timeout=300 >> "$LOGD/install.log" 2>&1 || true
        apt_install "${missing[@]}" && ok=1
    fi
    [ $made_policy = 0 ] || rm -f /usr/sbin/policy-rc.d
    [ $ok = 1 ] || die "could not install ${missing[*]}"
    log "installed in $((SECONDS - t0))s"
fi

# --- configs ----------------------------------------------------------------
NODE=$(hostname -s 2>/dev/null || uname -n)
NODE=${NODE%%.*}
MEM=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' | head -n1) || true
[ -n "$MEM" ] || MEM=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)

write_if_changed() {   # write_if_changed FILE MODE < content; returns 0 if it changed
    local f=$1 mode=$2 tmp
    tmp=$(mktemp "$f.XXXXXX")
    cat > "$tmp"
    chmod "$mode" "$tmp"
    if [ -f "$f" ] && cmp -s "$tmp" "$f"; then rm -f "$tmp"; return 1; fi
    mv -f "$tmp" "$f"
    return 0
}

if [ "$ACCOUNTING" = 1 ]; then
    ACCT_LINES="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# with auth/munge, AccountingStoragePass names the munge socket used towards slurmdbd
AccountingStoragePass=$MUNGE_SOCK"
else
    ACCT_LINES="AccountingStorageType=accounting_storage/none"
fi

PROCTRACK=proctrack/linuxproc
TASK_PLUGIN=task/none
SELECT_PARAMS=CR_Core
MEM_LINES=""
if [ "$MEMORY_LIMITS" = 1 ]; then
    PROCTRACK=proctrack/cgroup
    TASK_PLUGIN=task/cgroup
    SELECT_PARAMS=CR_Core_Memory
    # Without a default, a job that asks no memory would take the whole node.
    MEM_LINES=$'\n'"DefMemPerCPU=$((MEM / CPUS))"
fi

slurm_conf_changed=0
if [ "$MEMORY_LIMITS" = 1 ]; then
    write_if_changed "$DIR/etc/cgroup.conf" 644 <<EOF && slurm_conf_changed=1 || true
# generated by start-slurm.sh - edits are overwritten
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
EOF
fi
write_if_changed "$CONF" 644 <<EOF && slurm_conf_changed=1 || true
# generated by start-slurm.sh - edits are overwritten
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
MpiDefault=none
ProctrackType=$PROCTRACK
TaskPlugin=$TASK_PLUGIN
SelectType=select/cons_tres
SelectTypeParameters=$SELECT_PARAMS$MEM_LINES
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=$MIN_JOB_AGE
MaxJobCount=100000
MaxArraySize=100001
KillWait=5
InactiveLimit=0
SlurmdTimeout=300
JobCompType=jobcomp/filetxt
JobCompLoc=$LOGD/jobcomp.txt
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
$ACCT_LINES
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
PartitionName=short Nodes=$NODE Default=NO MaxTime=00:10:00 State=UP
EOF

dbd_conf_changed=0
if [ "$ACCOUNTING" = 1 ]; then
    # slurmdbd refuses a slurmdbd.conf readable by others
    write_if_changed "$DBD_CONF" 600 <<EOF && dbd_conf_changed=1 || true
# generated by start-slurm.sh - edits are overwritten
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$LOGD/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
fi

# --- munged -----------------------------------------------------------------
if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
fi
chmod 600 "$DIR/munge/munge.key"
munge_ok() { munge -S "$MUNGE_SOCK" -n | unmunge -S "$MUNGE_SOCK"; }
if pid=$(pid_of "$RUN/munged.pid" munged); then
    log "munged already running (pid $pid)"
else
    log "starting munged"
    rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock"
    munged --socket="$MUNGE_SOCK" --key-file="$DIR/munge/munge.key" \
        --pid-file="$RUN/munged.pid" --log-file="$LOGD/munged.log" \
        --seed-file="$DIR/munge/munged.seed" --num-threads=4 \
        >> "$LOGD/munged.log" 2>&1 < /dev/null || die "munged failed to start"
fi
wait_for "munged" munge_ok

# --- mariadb + slurmdbd -----------------------------------------------------
if [ "$ACCOUNTING" = 1 ]; then
    DBDATA=$DIR/mysql/data
    db() { mariadb --no-defaults -S "$DB_SOCK" -uroot "$@"; }
    if pid=$(pid_of "$RUN/mariadb.pid" mariadbd); then
        log "mariadbd already running (pid $pid)"
    else
        check_port_free "$DB_PORT" mariadb
        if [ ! -d "$DBDATA/mysql" ]; then
            log "initialising the database in $DBDATA"
            rm -rf "$DBDATA"
            mariadb-install-db --no-defaults --datadir="$DBDATA" --user=root \
                --auth-root-authentication-method=socket --skip-test-db \
                > "$LOGD/mariadb-install.out" 2>&1 || die "mariadb-install-db failed (see $LOGD/mariadb-install.out)"
        fi
        log "starting mariadbd on 127.0.0.1:$DB_PORT"
        rm -f "$DB_SOCK"
        setsid nohup mariadbd --no-defaults --datadir="$DBDATA" --user=root \
            --port="$DB_PORT" --bind-address=127.0.0.1 --socket="$DB_SOCK" \
            --pid-file="$RUN/mariadb.pid" --log-error="$LOGD/mariadb.log" \
            --skip-name-resolve --innodb-buffer-pool-size=256M \
            --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
            > "$LOGD/mariadb.out" 2>&1 < /dev/null &
    fi
    wait_for "mariadbd" mariadb-admin --no-defaults -S "$DB_SOCK" -uroot ping
    db -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
           CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
           CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
           GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" \
        || die "could not create the slurm database user"

    if pid=$(pid_of "$RUN/slurmdbd.pid" slurmdbd) && [ "$dbd_conf_changed" = 1 ]; then
        log "slurmdbd.conf changed: restarting slurmdbd (pid $pid)"
        stop_pid "$pid"
    fi
    if pid=$(pid_of "$RUN/slurmdbd.pid" slurmdbd); then
        log "slurmdbd already running (pid $pid)"
    else
        check_port_free "$DBD_PORT" slurmdbd
        log "starting slurmdbd on port $DBD_PORT"
        slurmdbd >> "$LOGD/slurmdbd.log" 2>&1 < /dev/null || die "slurmdbd failed to start"
    fi
    wait_for "slurmdbd" timeout 10 sacctmgr -n -P list cluster format=cluster
fi

if [ "$ACCOUNTING" = 0 ]; then
    # accounting was on for this DIR before: its database daemons are not needed now
    for spec in slurmdbd:slurmdbd mariadb:mariadbd; do
        if pid=$(pid_of "$RUN/${spec%%:*}.pid" "${spec#*:}"); then
            log "accounting off: stopping ${spec#*:} (pid $pid)"
            stop_pid "$pid"
        fi
    done
fi

# --- slurmctld + slurmd -----------------------------------------------------
if [ "$slurm_conf_changed" = 1 ]; then
    for d in slurmd slurmctld; do
        if pid=$(pid_of "$RUN/$d.pid" "$d"); then
            log "slurm.conf changed: restarting $d (pid $pid)"
            stop_pid "$pid"
        fi
    done
fi

if pid=$(pid_of "$RUN/slurmctld.pid" slurmctld); then
    log "slurmctld already running (pid $pid)"
else
    check_port_free "$CTLD_PORT" slurmctld
    log "starting slurmctld on port $CTLD_PORT"
    slurmctld -i -f "$CONF" >> "$LOGD/slurmctld.log" 2>&1 < /dev/null || die "slurmctld failed to start"
fi
ctld_up() { scontrol ping | grep 'is UP' >/dev/null; }
wait_for "slurmctld" ctld_up

if pid=$(pid_of "$RUN/slurmd.pid" slurmd); then
    log "slurmd already running (pid $pid)"
else
    check_port_free "$SLURMD_PORT" slurmd
    log "starting slurmd for node $NODE on port $SLURMD_PORT"
    slurmd -f "$CONF" -N "$NODE" >> "$LOGD/slurmd.log" 2>&1 < /dev/null || die "slurmd failed to start"
fi

node_state() { sinfo -h -N -n "$NODE" -o '%T' 2>/dev/null | head -n1 || true; }
log "waiting for node $NODE to become idle"
end=$((SECONDS + TIMEOUT))
while :; do
    state=$(node_state) || true
    case $state in
        idle|mixed|allocated|completing) break ;;
        *'*') ;;   # not responding (yet)
        drain*|down*|fail*)
            # state kept from an earlier run: put the node back in service
            scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
    esac
    if [ $SECONDS -ge $end ]; then
        sinfo -N -l >&2 || true
        scontrol show node "$NODE" >&2 || true
        die "node $NODE not ready after ${TIMEOUT}s (state '${state:-unknown}')"
    fi
    sleep 0.5
done

# --- report -----------------------------------------------------------------
cat > "$DIR/env.sh" <<EOF
export SLURM_CONF=$CONF
export SLURM_TEST_DIR=$DIR
EOF
# What a restart by a test (this script run again, from the same environment) needs to
# bring back the same cluster: its ports and its memory limits, when not the defaults.
[ "$PORT_BASE" = 16817 ] || echo "export SLURM_TEST_PORT_BASE=$PORT_BASE" >> "$DIR/env.sh"
[ "$MEMORY_LIMITS" = 0 ] || echo "export SLURM_TEST_MEMORY_LIMITS=$MEMORY_LIMITS" >> "$DIR/env.sh"
if [ "$ACCOUNTING" = 1 ]; then acct="slurmdbd+mariadb (sacct works)"; else acct="none (use sacct -c)"; fi
log "cluster $CLUSTER up: node $NODE, $CPUS CPUs, partitions debug* short, accounting: $acct"
log "logs: $LOGD   stop: bash $HERE/stop-slurm.sh $DIR"
sinfo >&2
cat "$DIR/env.sh"
