"""Named points of a submission where a test can stop the process, to kill it there.

``GANGA_LIKE_TEST_STOP_AT=<point>:<file>`` (``<point>#<n>``: the n-th time it is reached,
default the first) makes the process create ``<file>`` when it reaches ``<point>``, then
wait there (at most ``HOLD_SECONDS``) for the test to ``kill -9`` it: the test decides
its timing by the file, not by a clock. Unset (always, outside tests), each point costs
one look-up of the environment.

The points, in the order a submission reaches them:

* ``scheduler-accepted``: a batch scheduler has accepted a script (sbatch returned its
  id), nothing of it is logged or recorded yet;
* ``handed-over``: a backend's ``submit_bulk`` returned (a user's submission or the
  monitor's retry), its outcome is not recorded;
* ``before-commit``: the outcome is recorded in the transaction, not yet committed.

And those of a monitor handing a waiting job to submission (``runtime/workflow/driver``):

* ``waiting-job-handed``: the hand-over is recorded (the job is new again), the job is
  not submitted yet;
* ``waiting-job-submitted``: it was submitted, the hand-over's entry is still there.

And those of a monitor feeding a streaming map (``runtime/workflow/stream_driver``):

* ``stream-subjobs-made``: the subjobs of the upstream subjobs that completed are made
  (new) with the intent of submitting them, nothing is handed over yet;
* ``stream-subjobs-submitted``: their submission is recorded (``handed-over`` and
  ``before-commit`` come between the two).

And those of a monitor running a job's callback (``runtime/workflow/callbacks``):

* ``callback-due``: the status change and the callback's entry are committed, the
  call is not recorded yet;
* ``callback-calling``: the call is recorded (the entry is ``calling``), the action has
  not run yet.

And those of a monitor starting an Iterate's next iteration (``runtime/workflow/iterate``):

* ``iteration-due``: the end of an iteration is committed with its entry, nothing of the
  next is recorded yet;
* ``iteration-created``: the next iteration's job is stored (the entry is ``starting``),
  not submitted yet;
* ``iteration-submitted``: it was submitted, the entry is still there.

And those of a job's removal (``runtime/submission/removal``):

* ``removal-committed``: the job is gone from the repository, its workspace is still in
  place;
* ``workspace-deleting``: the workspace is set aside and partly deleted, by the
  background thread.

And that of a master's kill (``runtime/submission/master_kill``):

* ``kill-requested``: the backend was asked to kill the subjobs, the kill is not
  recorded yet.
"""

from __future__ import annotations

import os
import time

__all__ = ["STOP_VARIABLE", "stop_point"]

STOP_VARIABLE = "GANGA_LIKE_TEST_STOP_AT"
HOLD_SECONDS = 300.0

_reached: dict[str, int] = {}


def stop_point(name: str) -> None:
    """Stop here if a test asked to (see the module's doc); else return at once."""
    wanted = os.environ.get(STOP_VARIABLE)
    if not wanted:
        return
    point, _, path = wanted.partition(":")
    point, _, nth = point.partition("#")
    if point != name:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if _reached[name] != (int(nth) if nth else 1):
        return
    with open(path, "w", encoding="ascii") as f:
        f.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + HOLD_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
