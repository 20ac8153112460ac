#!/usr/bin/env bash
# stop-sge.sh - stop the sge_execd and sge_qmaster that start-sge.sh started.
#
# Usage: bash scripts/stop-sge.sh [--qmaster-only]
#   --qmaster-only  stop sge_qmaster alone, as in an outage of the master: the jobs running
#                   go on under sge_execd, which reports their end once a qmaster is back
#                   (start-sge.sh starts it again)
# Asks qmaster to shut down the execd with the jobs running there (qconf -kej), then
# itself (qconf -km); a daemon still there after 30 s gets SIGKILL. Only the pids in
# DIR/execd.pid and the qmaster spool's qmaster.pid are touched, each checked against its
# process name. The configuration and the accounting file stay: after a restart qacct
# still knows the older jobs, and the jobs still queued are still queued.
# Idempotent: exits 0 when nothing is running.
# Environment: SGE_TEST_DIR as for start-sge.sh (default /tmp/sge-test).
set -uo pipefail

log() { printf '[stop-sge] %s\n' "$*" >&2; }

ONLY_QMASTER=0
case ${1-} in
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    --qmaster-only) ONLY_QMASTER=1 ;;
    '') ;;
    *) log "unknown argument: $1"; exit 2 ;;
esac
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then
    exec sudo -E bash "$0" "$@"
fi

export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
DIR=${SGE_TEST_DIR:-/tmp/sge-test}
# shellcheck source=scripts/sge-common.sh
. "$(dirname "$0")/sge-common.sh"

stop() {   # stop NAME QCONF-ARGS...: ask qmaster, wait up to 30 s, then SIGKILL
    local pid
    pid=$(sge_pid "$1") || return 0
    log "stopping sge_$1 (pid $pid)"
    timeout 20 qconf "${@:2}" >&2 || kill -TERM "$pid" 2>/dev/null
    if ! wait_gone "$pid"; then
        log "sge_$1 still running after 30 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null
    fi
    [ "$1" != execd ] || rm -f "$DIR/execd.pid"
}

found=0
{ sge_pid execd || sge_pid qmaster; } >/dev/null && found=1
[ $ONLY_QMASTER = 1 ] || stop execd -kej all   # -kej: the jobs running there are killed with it
stop qmaster -km
[ $found = 1 ] || log "no sge_execd or sge_qmaster of start-sge.sh was running"
exit 0
