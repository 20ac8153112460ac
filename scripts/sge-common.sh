# sge-common.sh - what start-sge.sh and stop-sge.sh share (sourced, needs DIR).

# sge_pid NAME: the pid of the running sge_NAME (qmaster, execd), if any. sge_qmaster
# ignores SGE_MASTER_PIDFILE: its pid is always in the spool; sge_execd's is in DIR.
# Each pid is checked against its process name.
sge_pid() {
    local file=$DIR/$1.pid pid
    [ "$1" = execd ] || file=/var/spool/gridengine/qmaster/qmaster.pid
    pid=$(cat "$file" 2>/dev/null) || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "sge_$1" ] && echo "$pid"
}

# wait_gone PID: wait up to 30 s for PID to exit (qmaster takes seconds after SIGTERM).
wait_gone() {
    local _
    for _ in $(seq 60); do
        [ -d "/proc/$1" ] || return 0
        sleep 0.5
    done
    return 1
}
