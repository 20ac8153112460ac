# apt-common.sh - sourced by the install-*.sh scripts: install Debian packages as root,
# with apt-get update only when the package list does not know them, and once more after
# a failed install (a stale list).
# shellcheck shell=bash

apt_install() {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        -o DPkg::Lock::Timeout=300 "$@" >&2
}

# apt_install_packages LOG_FUNCTION PKG...
apt_install_packages() {
    local log=$1
    shift
    if ! apt-cache show "$@" >/dev/null 2>&1; then
        apt-get update -q -o DPkg::Lock::Timeout=300 >&2 || true  # a stale list may still do
    fi
    if ! apt_install "$@"; then
        "$log" "apt-get install failed; running apt-get update and trying again"
        apt-get update -q -o DPkg::Lock::Timeout=300 >&2 || true
        apt_install "$@"
    fi
}
