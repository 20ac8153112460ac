#!/usr/bin/env bash
# start-sge.sh - start a real single-node Son of Grid Engine on this machine for the
# `sge` tests.
#
# Installs the Debian 12 packages gridengine-master, gridengine-exec and gridengine-client
# when they are missing (debconf preseeded, so nothing is asked), then runs sge_qmaster and
# sge_execd as plain daemons (no systemd) in Debian's layout: SGE_ROOT=/var/lib/gridengine,
# SGE_CELL=default, spool and daemon logs in /var/spool/gridengine. Grid Engine has one
# cell per machine there: this script manages that one.
# Configures this host as admin, submit and exec host, the host group @allhosts, the queue
# all.q (slots, /bin/sh, the parallel environment smp, no load threshold), root allowed
# to submit (min_uid 0), job scripts run by a plain shell (no login shell reading
# profiles), and a scheduler that runs every second with the accounting file flushed
# every second (the defaults are 15 s each).
# Idempotent: running daemons are reused and the configuration is re-applied (about 1 s).
#
# Usage:
#   eval "$(bash scripts/start-sge.sh)"          # exports SGE_ROOT SGE_CELL
#   python -m pytest -m sge                      # qsub, qstat, qacct, qdel
#   bash scripts/stop-sge.sh
#
# stdout carries only `export VAR=value` lines (also written to DIR/env.sh); progress and
# errors go to stderr. Exit status 0 = the queue is ready.
#
# Environment (all optional):
#   SGE_TEST_DIR      this script's own files: execd pid file, qconf input files, the
#                     editor qconf runs, start.log (default /tmp/sge-test)
#   SGE_TEST_SLOTS    slots of all.q on this host (default 8). Jobs are not bound to cores:
#                     a value above `nproc` only lets more small jobs run at once.
#   SGE_TEST_TIMEOUT  seconds to wait for each daemon and for the queue (default 60)
set -euo pipefail
umask 022

log() { printf '[start-sge] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

case ${1-} in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
    '') ;;
    *) log "unknown argument: $1"; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 && exec sudo -E bash "$0" "$@"
    die "must run as root (installs packages, starts the daemons)"
fi

export SGE_ROOT=/var/lib/gridengine SGE_CELL=default
DIR=${SGE_TEST_DIR:-/tmp/sge-test}
SLOTS=${SGE_TEST_SLOTS:-8}
TIMEOUT=${SGE_TEST_TIMEOUT:-60}
HOST=$(hostname)
LOG=$DIR/start.log
SPOOL=/var/spool/gridengine
mkdir -p "$DIR"
# shellcheck source=scripts/sge-common.sh
. "$(dirname "$0")/sge-common.sh"

wait_for() {   # wait_for WHAT CMD...: until CMD succeeds, at most TIMEOUT seconds
    local what=$1 end=$((SECONDS + TIMEOUT)); shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $end ] || die "timed out after ${TIMEOUT}s waiting for $what"
        sleep 0.5
    done
}

# 1. The host name must resolve: both daemons look it up. ------------------------------
if ! getent hosts "$HOST" >/dev/null; then
    log "adding '127.0.0.1 $HOST' to /etc/hosts"
    echo "127.0.0.1 $HOST" >> /etc/hosts
fi

# 2. The packages. Preseeded, the master's postinst creates the cell (bootstrap, spool,
#    manager sgeadmin); a temporary policy-rc.d keeps the postinsts from starting daemons.
missing=()
for p in gridengine-master gridengine-exec gridengine-client; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} (log: $LOG)"
    for package in gridengine-common gridengine-client; do
        printf '%s shared/gridenginemaster string %s\n' "$package" "$HOST"
        printf '%s shared/gridenginecell string %s\n' "$package" "$SGE_CELL"
        printf '%s shared/gridengineconfig boolean true\n' "$package"
    done | debconf-set-selections
    policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy=1
    fi
    # apt-get update only when the package lists do not know the packages.
    apt-cache show gridengine-master >/dev/null 2>&1 || apt-get update -q >> "$LOG" 2>&1 || true
    installed=0
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "${missing[@]}" >> "$LOG" 2>&1 && installed=1
    [ $policy = 0 ] || rm -f /usr/sbin/policy-rc.d
    [ $installed = 1 ] || die "apt-get install failed (see $LOG)"
fi
[ -f "$SGE_ROOT/$SGE_CELL/common/bootstrap" ] \
    || die "no $SGE_ROOT/$SGE_CELL/common/bootstrap: the cell was not created (see $LOG)"

# 3. host_aliases: when the host's address resolves back to another name ("localhost"
#    with `127.0.0.1 localhost` first in /etc/hosts), qmaster refuses every client
#    ("access denied (client IP resolved to host name "localhost"..."). The first name of
#    the line is the one Grid Engine uses. qmaster reads the file when it starts.
ADDR=$(getent ahostsv4 "$HOST" | awk 'NR==1 {print $1}')
ALIASES=$HOST
for name in $(getent hosts "$ADDR" | awk '{print $2}') localhost; do
    [ "$name" = "$HOST" ] || ALIASES="$ALIASES $name"
done
ALIAS_FILE=$SGE_ROOT/$SGE_CELL/common/host_aliases
aliases_changed=0
if [ "$(cat "$ALIAS_FILE" 2>/dev/null)" != "$ALIASES" ]; then
    echo "$ALIASES" > "$ALIAS_FILE"
    aliases_changed=1
fi
echo "$HOST" > "$SGE_ROOT/$SGE_CELL/common/act_qmaster"

# 4. qmaster (started as root, it switches to the admin user sgeadmin itself). ----------
chown sgeadmin: "$DIR"   # sge_execd writes its pid file there as sgeadmin
if pid=$(sge_pid qmaster) && [ $aliases_changed = 1 ]; then
    log "host_aliases changed: restarting sge_qmaster"
    kill "$pid"
    wait_gone "$pid"
fi
if pid=$(sge_pid qmaster); then
    log "sge_qmaster already running (pid $pid)"
else
    log "starting sge_qmaster"
    /usr/sbin/sge_qmaster >> "$LOG" 2>&1 || die "sge_qmaster failed (see $SPOOL/qmaster/messages)"
fi
wait_for sge_qmaster qconf -sh

# 5. The configuration, re-applied each time (every step is idempotent). ---------------
# qconf -m*/-a* run $EDITOR on a temporary file, without a shell: a script edits it.
EDIT=$DIR/edit.sh
printf '#!/bin/sh\nexec sed -i -e "$SGE_EDIT" "$1"\n' > "$EDIT"
chmod 755 "$EDIT"
qedit() { SGE_EDIT=$1 EDITOR=$EDIT qconf "${@:2}" >&2; }
qconf -sh | grep -qx "$HOST" || qconf -ah "$HOST" >&2
qconf -ss 2>/dev/null | grep -qx "$HOST" || qconf -as "$HOST" >&2
# Root may submit (min_uid/min_gid are 1000 by default); the accounting file qacct reads
# is written every second. No login shells: with bash in login_shells (Debian's default)
# every job script runs as `-bash`, reading the user's profile first; a slow profile (or
# one waiting on a lock, as `pyenv init` does on pyenv's, which a job deleted in the middle
# leaves behind) then delays every task's start, by a minute each. sge_execd reports
# every 10 s (40 s by default): after a qmaster restart it is known again that much sooner.
qedit 's/^min_uid .*/min_uid 0/;s/^min_gid .*/min_gid 0/;s/flush_time=[0-9:]*/flush_time=00:00:01/;s/^login_shells .*/login_shells NONE/;s/^load_report_time .*/load_report_time 00:00:10/' \
    -mconf global
qedit 's/^schedule_interval .*/schedule_interval 0:0:1/;s/^flush_submit_sec .*/flush_submit_sec 1/;s/^flush_finish_sec .*/flush_finish_sec 1/' \
    -msconf
if ! qconf -se "$HOST" >/dev/null 2>&1; then
    printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' \
        "$HOST" > "$DIR/exechost"
    qconf -Ae "$DIR/exechost" >&2
fi
if ! qconf -shgrp @allhosts >/dev/null 2>&1; then
    printf 'group_name @allhosts\nhostlist %s\n' "$HOST" > "$DIR/hostgroup"
    qconf -Ahgrp "$DIR/hostgroup" >&2
fi
if ! qconf -sq all.q >/dev/null 2>&1; then
    # The template's pe_list names parallel environments (smp) that do not exist.
    qedit "s/^hostlist .*/hostlist @allhosts/;s/^slots .*/slots $SLOTS/;s/^pe_list .*/pe_list NONE/;s|^shell .*|shell /bin/sh|" \
        -aq all.q
fi
[ "$(qconf -sq all.q | awk '$1=="slots" {print $2}')" = "$SLOTS" ] \
    || qconf -mattr queue slots "$SLOTS" all.q >&2
# A parallel environment giving a job several slots of this host (qsub -pe smp N), for
# the jobs of process_count above 1.
if ! qconf -sp smp >/dev/null 2>&1; then
    printf 'pe_name smp\nslots %s\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args NONE\nstop_proc_args NONE\nallocation_rule $pe_slots\ncontrol_slaves FALSE\njob_is_first_task TRUE\nurgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n' \
        "$SLOTS" > "$DIR/pe"
    qconf -Ap "$DIR/pe" >&2
fi
[ "$(qconf -sq all.q | awk '$1=="pe_list" {print $2}')" = smp ] \
    || qconf -mattr queue pe_list smp all.q >&2
# The template's np_load_avg=1.75 puts the queue in alarm (state "a": nothing is
# scheduled) whenever the machine is busy, which a machine running tests often is.
[ "$(qconf -sq all.q | awk '$1=="load_thresholds" {print $2}')" = NONE ] \
    || qconf -rattr queue load_thresholds NONE all.q >&2

# 6. execd; ready once the queue instance has a load value and no state flag. -----------
if pid=$(sge_pid execd); then
    log "sge_execd already running (pid $pid)"
else
    log "starting sge_execd"
    SGE_EXECD_PIDFILE=$DIR/execd.pid /usr/sbin/sge_execd >> "$LOG" 2>&1 \
        || die "sge_execd failed (see $SPOOL/execd/*/messages)"
fi
queue_ready() {
    qstat -f -q "all.q@$HOST" \
        | awk -v q="all.q@$HOST" '$1==q && NF==5 && $4!="-NA-" {ok=1} END {exit !ok}'
}
wait_for "queue all.q@$HOST" queue_ready
qstat -f >&2
echo "export SGE_ROOT=$SGE_ROOT SGE_CELL=$SGE_CELL" | tee "$DIR/env.sh"
