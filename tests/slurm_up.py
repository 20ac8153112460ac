"""Whether the test cluster's Slurm controller answers, for the tests' skip checks.

A module whose tests need Slurm decides once whether to skip them all. A controller that
another test has just stopped and restarted, or that answers slowly on a loaded machine,
fails one ``scontrol ping`` and would skip a whole module; so when a test cluster is
configured, the check waits for an answer for up to a minute before it says no, and says
no at once after it has waited in vain once in this process (no cluster is coming).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ganga_like_slurm import slurm_commands

WAIT = 60.0  # a restart of the test cluster takes a few seconds, 20-30 s at high load
_gave_up = False


def slurm_answers() -> bool:
    global _gave_up
    if slurm_commands.ping():
        return True
    conf = os.environ.get("SLURM_CONF")
    if _gave_up or not conf or not Path(conf).is_file():
        return False
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        time.sleep(1.0)
        if slurm_commands.ping():
            return True
    _gave_up = True
    return False
