#!/usr/bin/env bash
# start-postgres.sh - start a throw-away PostgreSQL cluster on this machine for the tests
# and benchmarks of the repository on PostgreSQL.
#
# The cluster lives in DIR (data in DIR/data, log in DIR/postgres.log, Unix socket in
# DIR/sock) and listens on 127.0.0.1:PORT only.  The superuser `postgres` connects through
# the socket without a password (for this script and stop-postgres.sh); over TCP every
# login needs a password (scram-sha-256).  One role, `ganga` (may create databases), with a
# random password kept in DIR/env.sh (mode 0600), owns the database `ganga`.  fsync is off:
# fast, and NOT crash-safe (a test cluster only).  As root, initdb and the server run as the
# `postgres` user (they refuse root); as another user, as that user.  Installs Debian's
# postgresql package when it is missing (as root).  Idempotent: a cluster already running
# from DIR is reused.
#
# Usage:
#   eval "$(bash scripts/start-postgres.sh)"     # exports GANGA_TEST_POSTGRES
#   bash scripts/start-postgres.sh [--clean] [DIR]
#   psql "$GANGA_TEST_POSTGRES" -c 'select 1'
#   bash scripts/stop-postgres.sh [--purge] [DIR]
#
# stdout carries only the `export` line (also written to DIR/env.sh); progress and errors
# go to stderr.  Exit status 0 = the server answers the `ganga` role's login.
#
# Environment (all optional):
#   PG_TEST_DIR   the cluster's directory (default /tmp/ganga-pg-test; a DIR argument wins)
#   PG_TEST_PORT  the TCP port on 127.0.0.1 (default 55442)
#   PG_TEST_LISTEN  further addresses to listen on, comma-separated (default none); logins
#                 from the subnets the server is directly on are then allowed (password
#                 still needed): for a test that reaches the server from another network
#                 namespace
set -euo pipefail
umask 077

log() { printf '[start-postgres] %s\n' "$*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; }

CLEAN=0
DIR=${PG_TEST_DIR:-/tmp/ganga-pg-test}
while [ $# -gt 0 ]; do
    case $1 in
        --clean) CLEAN=1 ;;
        -h|--help) usage; exit 0 ;;
        -*) log "unknown option: $1"; usage; exit 2 ;;
        *) DIR=$1 ;;
    esac
    shift
done
PORT=${PG_TEST_PORT:-55442}
LISTEN=127.0.0.1${PG_TEST_LISTEN:+,$PG_TEST_LISTEN}
[[ $PORT =~ ^[1-9][0-9]*$ ]] || { log "ERROR: PG_TEST_PORT must be a positive integer, got '$PORT'"; exit 2; }
DIR=$(realpath -m -- "$DIR")
[ "$DIR" != / ] || { log "ERROR: refusing DIR=/"; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$DIR/data SOCK=$DIR/sock LOG=$DIR/postgres.log

die() {
    log "ERROR: $*"
    [ ! -s "$LOG" ] || { printf -- '----- last lines of %s -----\n' "$LOG" >&2; tail -n 20 "$LOG" >&2; }
    exit 1
}

# --- the package ----------------------------------------------------------------------------
if ! ls -d /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] || die "PostgreSQL is not installed: run this script as root once (it installs Debian's postgresql)"
    log "installing postgresql"
    # apt-get update only when the package lists do not know the package (a bare machine).
    apt-cache show postgresql >/dev/null 2>&1 || apt-get update -q >&2 || true
    # The package creates and starts a system cluster on 5432; this one is of its own.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 postgresql >&2 || die "apt-get install failed"
fi
# The test of a lease holder cut off from the server builds its network with iproute2.
if ! command -v ip >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    log "installing iproute2"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 iproute2 >&2 || log "iproute2 not installed: that test skips"
fi
PGBIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -n 1)")
if [ "$(id -u)" = 0 ]; then AS=(runuser -u postgres --); else AS=(); fi
as_owner() { "${AS[@]}" "$@"; }
admin() { as_owner "$PGBIN/psql" -h "$SOCK" -p "$PORT" -U postgres -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
running() { [ -s "$DATA/PG_VERSION" ] && as_owner "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

# --- the cluster ----------------------------------------------------------------------------
if [ $CLEAN = 1 ] && [ -e "$DIR" ]; then
    log "--clean: stopping the cluster of $DIR and wiping it"
    bash "$HERE/stop-postgres.sh" --purge "$DIR"
fi
mkdir -p "$DIR" "$SOCK"
[ "$(id -u)" != 0 ] || chown postgres: "$DIR" "$SOCK"
as_owner test -w "$DIR" || die "the postgres user cannot write $DIR: a parent directory of $DIR is closed to other users"
if [ ! -s "$DATA/PG_VERSION" ]; then
    log "initdb $DATA"
    as_owner "$PGBIN/initdb" -D "$DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
        -E UTF8 --locale=C.UTF-8 --no-sync >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
fi
if [ -n "${PG_TEST_LISTEN:-}" ] && ! grep -q '^host all all samenet' "$DATA/pg_hba.conf"; then
    echo 'host all all samenet scram-sha-256' | as_owner tee -a "$DATA/pg_hba.conf" >/dev/null
fi
if running; then
    log "postgres already running from $DATA"
else
    if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
        die "port $PORT is already in use by another program; set PG_TEST_PORT"
    fi
    log "starting postgres on $LISTEN port $PORT"
    as_owner "$PGBIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 -o "-p $PORT -k $SOCK \
        -c listen_addresses=$LISTEN -c fsync=off -c synchronous_commit=off \
        -c full_page_writes=off -c max_connections=200" start >/dev/null || die "pg_ctl start failed"
fi

# --- the role and its database --------------------------------------------------------------
if [ -s "$DIR/password" ]; then
    PASSWORD=$(cat "$DIR/password")
else
    PASSWORD=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    printf '%s\n' "$PASSWORD" > "$DIR/password"
fi
if [ "$(admin -c "SELECT 1 FROM pg_roles WHERE rolname = 'ganga'" postgres)" != 1 ]; then
    admin -c "CREATE ROLE ganga LOGIN CREATEDB PASSWORD '$PASSWORD'" postgres || die "could not create the role ganga"
fi
if [ "$(admin -c "SELECT 1 FROM pg_database WHERE datname = 'ganga'" postgres)" != 1 ]; then
    admin -c "CREATE DATABASE ganga OWNER ganga" postgres || die "could not create the database ganga"
fi
URL=postgresql://ganga:$PASSWORD@127.0.0.1:$PORT/ganga
PGPASSWORD=$PASSWORD "$PGBIN/psql" -X -q -A -t -h 127.0.0.1 -p "$PORT" -U ganga -c 'SELECT 1' ganga >/dev/null \
    || die "the role ganga cannot log in on 127.0.0.1:$PORT"
line="export GANGA_TEST_POSTGRES=$URL"
printf '%s\n' "$line" > "$DIR/env.sh"
log "postgres up on 127.0.0.1:$PORT ($DIR)   stop: bash $HERE/stop-postgres.sh $DIR"
echo "$line"
