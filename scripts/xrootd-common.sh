# xrootd-common.sh - what start-xrootd.sh and stop-xrootd.sh share.
# Sourced by them, not run.  Expects DIR (the server's directory, absolute) to be set.

# xrootd_pid: print the pid of the xrootd started from DIR, if it is alive.  Checked by
# name and by DIR in its command line, never by name only: another server is left alone.
xrootd_pid() {
    local pid
    pid=$(tr -dc '0-9' 2>/dev/null < "$DIR/run/xrootd.pid") || return 1
    [ -n "$pid" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = xrootd ] || return 1
    grep -qaF -- "$DIR/" "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}
