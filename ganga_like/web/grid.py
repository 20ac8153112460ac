"""The subjob grid's data: one byte per subjob, its status, and the colour of each status.

A master keeps every subjob's status in a few compact records (model.status_column), so
the grid of 100,000 subjobs reads about 100 records and no subjob. The browser draws the
bytes into one canvas, one cell per subjob, coloured from ``COLOURS``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ganga_like.model.status import Status
from ganga_like.model.status_column import CODE_OF, CODES

__all__ = ["COLOURS", "UNKNOWN_CODE", "grid_codes", "grid_payload"]

# By status label: ended well is green, ended badly red, under way blue, not yet started
# grey or pale. Every status has its own colour, told apart on the grid.
COLOURS = {
    Status.NEW.label: "#c7c7c7",
    Status.SUBMITTING.label: "#ffbb78",
    Status.SUBMITTED.label: "#aec7e8",
    Status.RUNNING.label: "#1f77b4",
    Status.COMPLETING.label: "#17becf",
    Status.COMPLETED.label: "#2ca02c",
    Status.FAILED.label: "#d62728",
    Status.KILLED.label: "#9467bd",
    Status.COMPLETED_FROZEN.label: "#98df8a",
    Status.FAILED_FROZEN.label: "#ff9896",
    Status.WAITING.label: "#dbdb8d",
    Status.SKIPPED.label: "#7f7f7f",
}
# A label with no code (a status this version does not know): drawn black.
UNKNOWN_CODE = 255
UNKNOWN_COLOUR = "#000000"


def grid_codes(labels: Sequence[str]) -> bytes:
    """One byte per subjob: its status's code (``CODES``), or ``UNKNOWN_CODE``."""
    code_of = CODE_OF
    return bytes([code_of.get(label, UNKNOWN_CODE) for label in labels])


def grid_payload(job_id: int, labels: Sequence[str]) -> dict[str, Any]:
    """What the page draws: the codes (base64), and the label and colour of each code."""
    return {
        "job": job_id,
        "count": len(labels),
        "codes": base64.b64encode(grid_codes(labels)).decode("ascii"),
        "labels": list(CODES),
        "colours": [COLOURS.get(label, UNKNOWN_COLOUR) for label in CODES],
        "unknown": UNKNOWN_CODE,
    }
