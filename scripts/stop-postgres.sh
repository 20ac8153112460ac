#!/usr/bin/env bash
# stop-postgres.sh - stop the PostgreSQL cluster that start-postgres.sh started.
#
# Usage: bash scripts/stop-postgres.sh [--purge] [DIR]
#   DIR      as for start-postgres.sh (default $PG_TEST_DIR or /tmp/ganga-pg-test)
#   --purge  also delete DIR, the databases included (only if start-postgres.sh made it)
#
# Stops the server of DIR/data (pg_ctl, fast: sessions are disconnected).  Idempotent:
# exits 0 when nothing is running.
set -uo pipefail

log() { printf '[stop-postgres] %s\n' "$*" >&2; }

PURGE=0
DIR=${PG_TEST_DIR:-/tmp/ganga-pg-test}
while [ $# -gt 0 ]; do
    case $1 in
        --purge) PURGE=1 ;;
        -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        -*) log "unknown option: $1"; exit 2 ;;
        *) DIR=$1 ;;
    esac
    shift
done
DIR=$(realpath -m -- "$DIR")
DATA=$DIR/data
if [ -s "$DATA/PG_VERSION" ]; then
    PGBIN=/usr/lib/postgresql/$(cat "$DATA/PG_VERSION")/bin
    if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); else AS=(); fi
    if "${AS[@]}" "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        log "stopping postgres ($DATA)"
        "${AS[@]}" "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null \
            || { log "ERROR: pg_ctl stop failed"; exit 1; }
    else
        log "postgres of $DIR is not running"
    fi
fi
# Only a directory this script's partner made (its data, or its socket directory).
if [ $PURGE = 1 ] && { [ -s "$DATA/PG_VERSION" ] || [ -d "$DIR/sock" ]; }; then
    rm -rf -- "$DIR"
fi
exit 0
