"""Plain-text job tables from row values: no model, no repository.

The one renderer of ``ganga jobs``, whether its rows were just read from the repository
(:func:`ganga_like.gpi.job_table.table`) or come from the jobs-table cache
(:mod:`ganga_like.commands.jobs_cache`), which must not pay for importing the model. So
the same values always give the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CELL_WIDTH",
    "WAITS_COLUMN",
    "cell",
    "header",
    "render_table",
    "shorten",
    "shown_columns",
]

# What a job waits for (its ``after=``): a column of every row, shown only in tables where
# some job has one, so that tables of jobs waiting for nothing look as they always did.
WAITS_COLUMN = "after"
_HEADERS = {"fqid": "id"}  # headers that differ from their column's name
# Widest a table cell gets: a 5,000-character name must not push the other columns away.
CELL_WIDTH = 40


def header(column: str) -> str:
    """The header of a table column."""
    return _HEADERS.get(column, column)


def shorten(text: str, limit: int) -> str:
    """``text`` if it is at most ``limit`` characters, else cut to that with an ellipsis."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def cell(text: str, limit: int = CELL_WIDTH) -> str:
    """``text`` as one table cell: on one line (a line break shows as ⏎, other control
    characters as a space, so a row stays one line) and at most ``limit`` characters."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else "⏎" if ch == "\n" else " " for ch in text)
    return shorten(text, limit)


def render_table(
    values: Sequence[Mapping[str, Any]], columns: Sequence[str], title: str = "jobs"
) -> str:
    """The table of ``values`` (one mapping per job, holding at least ``columns``)."""
    columns = shown_columns(values, columns)
    rows = [{c: cell(v[c]) for c in columns} for v in values]
    headers = {c: header(c) for c in columns}
    widths = {c: max([len(headers[c])] + [len(r[c]) for r in rows]) for c in columns}
    line = " | ".join(headers[c].ljust(widths[c]) for c in columns)
    out = [f"{title}: {len(rows)}", line, "-+-".join("-" * widths[c] for c in columns)]
    out.extend(" | ".join(r[c].ljust(widths[c]) for c in columns).rstrip() for r in rows)
    return "\n".join(out)


def shown_columns(values: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> list[str]:
    """``columns``, and the waits-for column when one of the rows ``values`` has it set."""
    waits = WAITS_COLUMN not in columns and any(v.get(WAITS_COLUMN) for v in values)
    return [*columns, WAITS_COLUMN] if waits else list(columns)
