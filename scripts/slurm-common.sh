# slurm-common.sh - functions shared by start-slurm.sh and stop-slurm.sh.
# Sourced by them, not run.  Expects DIR (the cluster's directory, absolute) to be set.

# The daemons (munged, slurmctld, slurmd, slurmdbd, mariadbd) are installed in sbin
# directories, which a non-login or minimal environment may leave off PATH.
for sbin in /usr/local/sbin /usr/sbin /sbin; do
    case ":$PATH:" in *":$sbin:"*) ;; *) PATH="$PATH:$sbin" ;; esac
done
export PATH

# pid_of PIDFILE COMM: print the pid if that process is alive, named COMM and
# started from this DIR (its command line or environment mentions DIR).  Never
# matches by name only, so a system Slurm or another test cluster is left alone.
pid_of() {
    local f=$1 comm=$2 pid
    [ -s "$f" ] || return 1
    pid=$(tr -dc '0-9' < "$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$comm" ] || return 1
    grep -qaF -- "$DIR/" "/proc/$pid/cmdline" "/proc/$pid/environ" 2>/dev/null || return 1
    echo "$pid"
}
