"""Screenshots the tests make are kept as artifacts: in the test's own directory always,
and copied to ``$GANGA_SCREENSHOTS`` when it names a directory (the pictures of the docs
are made so: scripts/docs_pictures.sh)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["keep"]


def keep(shot: Path) -> Path:
    """``shot``, also copied under its own name to ``$GANGA_SCREENSHOTS`` when set."""
    assert shot.stat().st_size > 0, f"an empty screenshot {shot}"
    kept = os.environ.get("GANGA_SCREENSHOTS")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(kept) / shot.name)
    return shot
