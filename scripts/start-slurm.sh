#!/usr/bin/env bash
# Start the real single-node Slurm used by the tests (delegates to the shared CI script when
# it is beside this checkout). Prints `export SLURM_CONF=...` lines for eval.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
for candidate in "$here/../shared/ci/start-slurm.sh" "$here/../../shared/ci/start-slurm.sh"; do
    if [ -f "$candidate" ]; then
        exec bash "$candidate" "$@"
    fi
done
echo "start-slurm.sh: the shared Slurm start script was not found beside this checkout" >&2
exit 1
