#!/usr/bin/env bash
# install-mpi.sh - install an MPI (Debian 12's MPICH) for the tests of the mpirun launcher.
#
# Installs the packages `mpich` (mpirun, mpiexec: the Hydra process manager) when
# `mpirun` is missing, as root (through sudo when not root), with apt-get update only when
# the package list does not know the package. Does nothing when an `mpirun` is already on
# PATH. The launcher tests are skipped, saying so, where no mpirun can be found.
#
# Usage:
#   bash scripts/install-mpi.sh          # exit status 0: mpirun is on PATH
set -euo pipefail

log() { printf '[install-mpi] %s\n' "$*" >&2; }

if command -v mpirun >/dev/null 2>&1; then
    log "mpirun is already installed: $(command -v mpirun)"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E bash "$0" "$@"
    fi
    log "ERROR: must run as root to install mpich"
    exit 1
fi
command -v apt-get >/dev/null || { log "ERROR: apt-get not found; install an MPI by hand"; exit 1; }

PKGS=(mpich)
# shellcheck source=scripts/apt-common.sh
. "$(dirname "$0")/apt-common.sh"
t0=$SECONDS
apt_install_packages log "${PKGS[@]}"
command -v mpirun >/dev/null || { log "ERROR: mpich installed but mpirun is not on PATH"; exit 1; }
log "installed ${PKGS[*]} in $((SECONDS - t0)) s: $(command -v mpirun)"
