#!/usr/bin/env bash
# install-chromium.sh - install a headless browser (Debian 12's Chromium and its driver) for
# the tests of `ganga web`.
#
# Installs the packages `chromium` and `chromium-driver` when /usr/bin/chromium is missing,
# as root (through sudo when not root), with apt-get update only when the package list does
# not know them. Does nothing when /usr/bin/chromium is already there. The browser tests
# are skipped, saying so, where it cannot be found.
#
# Usage:
#   bash scripts/install-chromium.sh     # exit status 0: /usr/bin/chromium is installed
set -euo pipefail

log() { printf '[install-chromium] %s\n' "$*" >&2; }

BROWSER=/usr/bin/chromium
if [ -x "$BROWSER" ]; then
    log "chromium is already installed: $("$BROWSER" --version 2>/dev/null || echo "$BROWSER")"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        exec sudo -E bash "$0" "$@"
    fi
    log "ERROR: must run as root to install chromium"
    exit 1
fi
command -v apt-get >/dev/null || { log "ERROR: apt-get not found; install chromium by hand"; exit 1; }

PKGS=(chromium chromium-driver)
# shellcheck source=scripts/apt-common.sh
. "$(dirname "$0")/apt-common.sh"
t0=$SECONDS
apt_install_packages log "${PKGS[@]}"
[ -x "$BROWSER" ] || { log "ERROR: chromium installed but $BROWSER is missing"; exit 1; }
log "installed ${PKGS[*]} in $((SECONDS - t0)) s: $("$BROWSER" --version 2>/dev/null || echo "$BROWSER")"
