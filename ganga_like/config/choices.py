"""The closed sets of values some options choose from.

They live here, in the lowest layer, because the configuration validates against them and
the layers above use them: the repository (its modes), the model (how a master's status is
derived) and the displays (table columns, status colours). Plain tuples and dicts: importing
this module costs nothing.
"""

from __future__ import annotations

__all__ = ["COLUMNS", "DEFAULT_STATUS_COLOURS", "MASTER_STATUS_ORDERS", "MODES"]

# How the repository is opened (docs/repository.md).
MODES = ("embedded", "readonly", "shared", "auto")

# How a master's status is derived while some subjobs wait and others run: "running_first"
# (the default) or the splitting design's own order, "submitted_first".
MASTER_STATUS_ORDERS = ("running_first", "submitted_first")

# Columns a job table may show, in their default order.
COLUMNS = ("fqid", "status", "name", "subjobs", "application", "backend")

# The colour of each status label in tables, trees and the toolbar; its keys are every
# status label (tests/test_config.py checks them against the Status enum).
DEFAULT_STATUS_COLOURS = {
    "new": "default",
    "submitting": "yellow",
    "submitted": "yellow",
    "running": "green",
    "completing": "green",
    "completed": "bright_blue",
    "failed": "red",
    "killed": "magenta",
    "completed_frozen": "blue",
    "failed_frozen": "bright_red",
    "waiting": "cyan",
    "skipped": "bright_black",
}
