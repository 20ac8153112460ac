#!/usr/bin/env bash
# stop-slurm.sh - stop the single-node Slurm cluster that start-slurm.sh started.
#
# Usage: bash scripts/stop-slurm.sh [--purge] [DIR]
#   DIR      as for start-slurm.sh (default $SLURM_TEST_DIR or /tmp/slurm-test)
#   --purge  also delete DIR (only if start-slurm.sh made it)
#
# Stops exactly the daemons recorded in DIR/run/*.pid (checking that each pid
# is still that daemon, started from DIR), after cancelling the cluster's jobs;
# then ends job step daemons (slurmstepd) left over from this cluster, found by
# SLURM_CONF=DIR/etc/slurm.conf in their environment.  Never matches by name only.
# Idempotent: exits 0 when nothing is running.
set -uo pipefail

log() { printf '[stop-slurm] %s\n' "$*" >&2; }

PURGE=0
DIR=${SLURM_TEST_DIR:-/tmp/slurm-test}
while [ $# -gt 0 ]; do
    case $1 in
        --purge) PURGE=1 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        -*) log "unknown option: $1"; exit 2 ;;
        *) DIR=$1 ;;
    esac
    shift
done
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then
    args=("$DIR"); [ $PURGE = 0 ] || args+=(--purge)
    exec sudo -E bash "$0" "${args[@]}"
fi
DIR=$(realpath -m -- "$DIR")
CONF=$DIR/etc/slurm.conf
RUN=$DIR/run

if [ ! -d "$DIR" ]; then
    log "$DIR does not exist: nothing to stop"
    exit 0
fi

# pid_of PIDFILE COMM: pid if alive, named COMM, started from DIR
. "$(cd "$(dirname "$0")" && pwd)/slurm-common.sh"
stop_pids() {   # stop_pids PID...: SIGTERM all, wait up to 30 s, SIGKILL what is left
    local pid _ left
    for pid; do kill -TERM "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 60); do
        left=0
        for pid; do [ -d "/proc/$pid" ] && left=1; done
        [ $left = 1 ] || return 0
        sleep 0.5
    done
    for pid; do
        if [ -d "/proc/$pid" ]; then
            log "pid $pid did not stop in 30s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
}

# 1. cancel this cluster's jobs while slurmctld is still up
if pid_of "$RUN/slurmctld.pid" slurmctld >/dev/null && command -v squeue >/dev/null; then
    export SLURM_CONF=$CONF
    jobs=$(timeout 20 squeue -h -o '%A' 2>/dev/null | sort -u)
    if [ -n "$jobs" ]; then
        log "cancelling $(echo "$jobs" | wc -l) job(s)"
        # shellcheck disable=SC2086
        timeout 30 scancel $jobs 2>/dev/null || true
        for _ in $(seq 1 30); do
            [ -z "$(timeout 10 squeue -h -o '%A' 2>/dev/null)" ] && break
            sleep 0.5
        done
    fi
fi

# 2. the daemons: first the Slurm ones, then the database and munged (each
#    takes ~2 s to exit, so each group is stopped in parallel)
found=0
for group in "slurmd:slurmd slurmctld:slurmctld slurmdbd:slurmdbd" "mariadb:mariadbd munged:munged"; do
    pids=()
    for spec in $group; do
        f=$RUN/${spec%%:*}.pid
        comm=${spec#*:}
        if pid=$(pid_of "$f" "$comm"); then
            log "stopping $comm (pid $pid)"
            pids+=("$pid")
        fi
    done
    if [ ${#pids[@]} -gt 0 ]; then
        found=1
        stop_pids "${pids[@]}"
    fi
    for spec in $group; do rm -f "$RUN/${spec%%:*}.pid"; done
done

# 3. job step daemons (slurmstepd) of this cluster that outlived slurmd, and job
#    processes left behind: found by SLURM_CONF=DIR/etc/slurm.conf in their
#    environment (job processes also by SLURM_JOB_ID); never this script or its callers
ancestors=" $$ "
p=$PPID
while [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != 1 ]; do
    ancestors="$ancestors$p "
    p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
done
for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    case $ancestors in *" $pid "*) continue ;; esac
    env_lines=$(tr '\0' '\n' 2>/dev/null < "$p/environ") || continue
    grep -qxF "SLURM_CONF=$CONF" <<< "$env_lines" || continue
    comm=$(cat "$p/comm" 2>/dev/null)
    if [ "$comm" = slurmstepd ] || grep -q '^SLURM_JOB_ID=' <<< "$env_lines"; then
        log "killing leftover $comm (pid $pid)"
        kill -KILL "$pid" 2>/dev/null || true
    fi
done

[ $found = 1 ] || log "no daemon of $DIR was running"

if [ $PURGE = 1 ]; then
    if [ -e "$DIR/.slurm-test-dir" ]; then
        log "removing $DIR"
        rm -rf -- "$DIR"
    else
        log "not removing $DIR: it was not made by start-slurm.sh"
        exit 1
    fi
fi
exit 0
