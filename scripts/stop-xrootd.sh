#!/usr/bin/env bash
# stop-xrootd.sh - stop the XRootD server that start-xrootd.sh started.
#
# Usage: bash scripts/stop-xrootd.sh [--purge] [DIR]
#   DIR      as for start-xrootd.sh (default $XROOTD_TEST_DIR or /tmp/xrootd-test)
#   --purge  also delete DIR, the served data included (only if start-xrootd.sh made it)
#
# Stops exactly the xrootd recorded in DIR/run/xrootd.pid, checking that this pid is still
# an xrootd started from DIR.  Idempotent: exits 0 when nothing is running.
set -uo pipefail

log() { printf '[stop-xrootd] %s\n' "$*" >&2; }

PURGE=0
DIR=${XROOTD_TEST_DIR:-/tmp/xrootd-test}
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
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=xrootd-common.sh
. "$HERE/xrootd-common.sh"

if pid=$(xrootd_pid); then
    log "stopping xrootd (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
    if [ -d "/proc/$pid" ]; then
        log "still running after 10 s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null
    fi
else
    log "no xrootd of $DIR running"
fi
rm -f "$DIR/run/xrootd.pid"
# Only a directory this project's script made (it holds its generated config) is deleted.
if [ $PURGE = 1 ] && [ -f "$DIR/xrootd.cfg" ] && [ "$DIR" != / ]; then
    rm -rf -- "$DIR"
    log "removed $DIR"
fi
exit 0
