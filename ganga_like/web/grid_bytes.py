"""The subjob grid as the page draws it: one byte per cell, its status, and the colour of
each status (the figures' colours, ``runtime.plots.figures``).

The cells come from ``runtime.stats.grid``, which reads a master's status column (a few
compact records per 1,024 subjobs, no subjob loaded). The browser draws the bytes into one
canvas, one cell per subjob.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from ganga_like.model.status_column import CODE_OF, CODES
from ganga_like.runtime.plots.figures import STATUS_COLOURS

__all__ = ["UNKNOWN_CODE", "UNKNOWN_COLOUR", "grid_codes", "grid_payload"]

# A label with no code (a status this version does not know): drawn black.
UNKNOWN_CODE = 255
UNKNOWN_COLOUR = "#000000"


def grid_codes(labels: Sequence[str]) -> bytes:
    """One byte per cell: its status's code (``CODES``), or ``UNKNOWN_CODE``."""
    code_of = CODE_OF
    return bytes([code_of.get(label, UNKNOWN_CODE) for label in labels])


def grid_payload(job_id: int, labels: Sequence[str], single: bool) -> dict[str, Any]:
    """What the page draws: the codes (base64), the label and colour of each code, and
    whether the one cell is the job itself (``single``) or cell N is subjob N."""
    return {
        "job": job_id,
        "single": single,
        "count": len(labels),
        "codes": base64.b64encode(grid_codes(labels)).decode("ascii"),
        "labels": list(CODES),
        "colours": [STATUS_COLOURS.get(label, UNKNOWN_COLOUR) for label in CODES],
        "unknown": UNKNOWN_CODE,
    }
