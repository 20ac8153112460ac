#!/usr/bin/env bash
# docs_pictures.sh - make the pictures of the docs again, from the tests that take them.
#
# Runs the tests whose screenshots docs/seeing-jobs.md, docs/top.md and docs/web.md show,
# with GANGA_SCREENSHOTS pointing at docs/pictures/ (tests/screenshots.py copies each
# screenshot there), then checks that every picture was written by this run: a test that
# was skipped (no Chromium: bash scripts/install-chromium.sh) fails the script rather than
# leaving an old picture behind.
#
# Usage (from anywhere, in the project's environment):
#   bash scripts/docs_pictures.sh          # then look at them and commit docs/pictures/
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PICTURES="$ROOT/docs/pictures"
# Each picture and the test that takes it.
TESTS=(
    "tests/test_report.py::test_the_report_draws_its_plots_in_a_headless_browser_with_no_network"
    "tests/test_top.py::test_a_job_opens_with_its_failure_groups_output_and_a_confirmed_resubmission"
    "tests/test_web_browser.py::test_the_grid_shows_each_status_in_its_colour_and_follows_another_process"
    "tests/test_web_browser.py::test_the_grid_of_ten_thousand_subjobs_is_one_canvas"
)
MADE=(report.png top-list.svg top-job.svg web-job.png web-grid-10000.png)

log() { printf '[docs_pictures] %s\n' "$*" >&2; }

cd "$ROOT"
mkdir -p "$PICTURES"
started="$(mktemp)"
trap 'rm -f "$started"' EXIT
GANGA_SCREENSHOTS="$PICTURES" python -m pytest -q -p no:randomly "${TESTS[@]}"
for name in "${MADE[@]}"; do
    if [ ! "$PICTURES/$name" -nt "$started" ]; then
        log "docs/pictures/$name was not made by this run (a test skipped?)"
        exit 1
    fi
    log "docs/pictures/$name: $(stat -c %s "$PICTURES/$name") bytes"
done
