"""Read-only subcommands: jobs (read from the repository), show, log, why, stats, status."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from persistent import Persistent
from ZODB.serialize import referencesf

from ganga_like.commands import jobs_cache, table_client
from ganga_like.commands.context import NOTHING, OK, configured_settings, error, session_for
from ganga_like.commands.lookup import find_job, select
from ganga_like.errors import JobError
from ganga_like.gpi.job_table import COLUMNS, job_row, shorten
from ganga_like.gpi.table_text import render_table
from ganga_like.model.base import GangaObject, schema_items
from ganga_like.model.callbacks import DUE_KEY
from ganga_like.model.history import HistoryEntry
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.repository.file_tail import FileStamp
from ganga_like.runtime import postprocessing, retrying
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats import job_stats
from ganga_like.runtime.workflow import index as workflow_index
from ganga_like.runtime.workflow.explain import dependency_line, explain

__all__ = [
    "list_jobs",
    "log_parser",
    "show_parser",
    "snapshot_tid",
    "stats_parser",
    "status_parser",
    "table_of",
]


def list_jobs(args: argparse.Namespace) -> int:
    """``ganga jobs`` read from the repository (:mod:`ganga_like.commands.jobs` first asks
    the cache); the table of the whole registry is then written to the cache when the
    repository is settled."""
    stamp = None if args.query else jobs_cache.stamp_before_opening(configured_settings())
    with session_for(write=False, refresh=True) as session:
        chosen = select(session, args.query)
        found = chosen.jobs
        for missing in chosen.missing:
            error(f"no job {missing}")
        rows = _rows(session, found)
        if found or not args.query or args.json:
            # A selection of nothing says so in one line, not with an empty table too.
            print(json.dumps(rows, indent=1) if args.json else render_table(rows, COLUMNS))
        if args.query and not found:
            if not chosen.missing:
                error(f"no job matches {chosen.text!r}")
            return NOTHING
        if chosen.missing:
            return NOTHING  # the ones found are listed; a script still learns of the others
        if stamp is not None:
            _cache_if_settled(session, stamp, rows)
    if stamp is not None:
        # The next listing after a change asks it instead of reading every job again.
        table_client.start_server(configured_settings())
    return OK


def _rows(session: Session, jobs: list[Any]) -> list[dict[str, Any]]:
    """The rows of ``jobs``; the records a row needs are asked for together first."""
    with contextlib.suppress(Exception):  # only a hint: each is loaded when read anyway
        _prefetch(session.repo.connection(), jobs)
    return [_json_row(job) for job in jobs]


def _prefetch(conn: Any, jobs: list[Any]) -> None:
    """Ask for the records of the jobs not loaded yet, then for those their records
    name (a job's parts: reading a job's record loads them, one by one): through the
    repository's server, two batches of loads that overlap instead of one round trip
    after another per record, most of a cold listing's time."""
    ghosts = [job for job in jobs if isinstance(job, Persistent) and job._p_changed is None]
    if not ghosts:
        return
    conn.prefetch(ghosts)
    snapshot = conn._storage  # the connection's view: loads as of its transaction
    named: list[bytes] = []
    for job in ghosts:
        data, _serial = snapshot.load(job._p_oid)
        named.extend(referencesf(data))
    conn.prefetch(named)


def _json_row(job: object) -> dict[str, Any]:
    """A job's row with, for a job (not a broken object), its id and subjob counts."""
    row: dict[str, Any] = job_row(job)
    if isinstance(job, Job):
        row["id"] = job.id
        row["counts"] = {s.label: n for s, n in job.counts().items()}
    return row


def _cache_if_settled(session: Session, stamp: FileStamp, rows: list[dict[str, Any]]) -> None:
    """Write the jobs-table cache if ``rows`` are the committed state ``stamp`` names and
    that state is settled: nothing the plain path's opening or monitoring cycle would
    change (:mod:`ganga_like.commands.jobs_cache`)."""
    repo = session.repo
    uri = urlparse(repo.uri)
    if repo.read_only or uri.scheme != "file" or Path(unquote(uri.path)) != Path(stamp.path):
        return  # a read-only view, or not the file the stamp is of
    conn = repo.connection()
    if snapshot_tid(conn) != stamp.tid:
        return  # a commit came between the stamp and the read
    if _quiet(session) and not any(_broken(row) for row in rows):
        next_id = conn.root()["ids"].next_id
        jobs_cache.save(repo.gangadir, stamp, session.settings, next_id, COLUMNS, rows)


def table_of(session: Session) -> tuple[int, list[dict[str, Any]]] | None:
    """(the next job id, the rows of every job) as ``ganga jobs`` reads them in the
    session's current transaction, or None unless the repository is settled."""
    if not _quiet(session):  # asked first: a repository at work is not read in full
        return None
    rows = _rows(session, select(session, []).jobs)
    # A class that does not load now may load later without a stored change (its
    # plugin installed or mended): such a table is read afresh every time.
    if any(_broken(row) for row in rows):
        return None
    return session.repo.connection().root()["ids"].next_id, rows


def _quiet(session: Session) -> bool:
    """Whether opening the repository and a monitoring cycle would change nothing of the
    rows (with no broken row: the jobs-table cache's condition, settled)."""
    root = session.repo.connection().root()
    registry = session.registry()
    return not (
        not registry.jobs
        or registry.active
        or registry.intents()
        or root.get(retrying.PENDING_KEY)
        or root.get(postprocessing.PENDING_KEY)
        or root.get(workflow_index.PENDING_KEY)
        or root.get(DUE_KEY)
    )


def _broken(row: dict[str, Any]) -> bool:
    """Whether ``row`` shows an object, or a part of one, whose class did not load."""
    return row["status"] == "broken" or any(
        row[c].startswith("broken:") for c in job_parts().columns
    )


def snapshot_tid(conn: Any) -> str | None:
    """The id of the last transaction the connection's current snapshot holds, in hex
    (ZODB's MVCC adapter reads "before" the transaction after it); None if unknown."""
    start = getattr(getattr(conn, "_storage", None), "_start", None)
    if not isinstance(start, bytes) or len(start) != 8:
        return None
    return (int.from_bytes(start, "big") - 1).to_bytes(8, "big").hex()


def show_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("id", help="a job or subjob id: 12 or 12.3")
    parser.add_argument("--lines", type=int, default=10, help="last lines of stdout/stderr")
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"show every value in full (otherwise each is cut at {SHOWN_CHARS} characters)",
    )
    return run_show


SHOWN_CHARS = 300  # of one value in `ganga show`: a 20,000-subjob splitter is 200 kB


def run_show(args: argparse.Namespace) -> int:
    with session_for(write=False, refresh=False) as session:
        job = find_job(session, args.id)
        if job is None:
            error(f"no job {args.id}")
            return NOTHING
        paths = session.submit_context().paths(job)
        print(f"job {job.fqid}: {job.current_status()}")
        cut = False
        for name, value in _attributes(job):
            shown = value if args.full else shorten(value, SHOWN_CHARS)
            cut = cut or shown != value
            print(f"  {name:<16} {shown}")
        counts = job.counts()
        if counts:
            detail = ", ".join(
                f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: kv[0].place)
            )
            print(f"  {'subjobs':<16} {sum(counts.values())} ({detail})")
        # A master's current period, from its own log (no subjob read), as its tree shows.
        for status, stamp in sorted(job.own_timeline().items(), key=lambda kv: kv[1]):
            print(f"  {'time.' + status:<16} {HistoryEntry(stamp, '', '', '').__str__()[:19]}")
        print(f"  {'inputdir':<16} {paths.input}")
        print(f"  {'outputdir':<16} {paths.output}")
        if cut:
            print(
                f"  (values longer than {SHOWN_CHARS} characters end in …; "
                f"ganga show {job.fqid} --full shows them whole)"
            )
        for stream in ("stdout", "stderr"):
            path = paths.output / stream
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-args.lines :]
                print(f"--- last {len(lines)} line(s) of {stream}")
                for line in lines:
                    print(line)
    return OK


def _attributes(job: Job) -> list[tuple[str, str]]:
    out = [("name", repr(job.name))]
    if job.comment:
        out.append(("comment", repr(job.comment)))
    parts = job_parts()
    for part in parts.components:
        value = job.stored().get(part.name)
        if value is None and not part.required:
            continue
        out.append((part.name, _describe(value)))
    for part in parts.lists:
        files = getattr(job, part.name)
        if files:
            out.append((part.name, ", ".join(_describe(f) for f in files)))
    waits = dependency_line(job)
    if waits is not None:
        out.append(("after", waits))
    if job.exit_code is not None:
        out.append(("exit_code", str(job.exit_code)))
    out.append(("submitted", f"{job.submit_count} time(s)"))
    return out


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if not isinstance(value, GangaObject):
        cls = type(value)
        return f"<broken: {cls.__module__}.{cls.__name__} (plugin missing)>"
    parts = []
    for name, _trait in schema_items(type(value)):
        shown = getattr(value, name)
        if isinstance(shown, GangaObject):
            parts.append(f"{name}={_describe(shown)}")
        elif isinstance(shown, tuple):
            items = [
                _describe(v) if isinstance(v, GangaObject) else repr(_as_lists(v)) for v in shown
            ]
            parts.append(f"{name}=[{', '.join(items)}]")
        else:
            parts.append(f"{name}={shown!r}")
    return f"{type(value).__name__}({', '.join(parts)})"


def _as_lists(value: Any) -> Any:
    """Stored lists inside lists are tuples: shown as the lists they were given as."""
    return [_as_lists(v) for v in value] if isinstance(value, tuple) else value


def log_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("id", help="a job or subjob id: 12 or 12.3")
    return run_log


def run_log(args: argparse.Namespace) -> int:
    return _about_one_job(
        args.id, lambda _session, job: "\n".join(str(HistoryEntry(*e)) for e in job.history)
    )


def why_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("id", help="a job or subjob id: 14 or 14.3")
    return run_why


def run_why(args: argparse.Namespace) -> int:
    return _about_one_job(
        args.id,
        lambda session, job: explain(
            session.registry(), job, monitored=session.monitor.lease.anyone_holds()
        ),
    )


def _about_one_job(fqid: str, text: Callable[[Session, Job], str]) -> int:
    """Print ``text`` of the job or subjob ``fqid``; NOTHING when there is none."""
    with session_for(write=False, refresh=False) as session:
        job = find_job(session, fqid)
        if job is None:
            error(f"no job {fqid}")
            return NOTHING
        shown = text(session, job)
        if shown:
            print(shown)
    return OK


def stats_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("id", help="a job or subjob id: 12 or 12.3 (a master: its subjobs)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    return run_stats


def run_stats(args: argparse.Namespace) -> int:
    """A job's stats (``j.stats()``): the summary, or ``to_dict()`` as JSON."""

    def shown(_session: Session, job: Job) -> str:
        if not isinstance(job, Job):
            raise JobError(f"job {args.id} cannot be read: {type(job).__name__}")
        stats = job_stats([job], f"job {job.fqid}")
        return stats.to_json(indent=1) if args.json else repr(stats)

    return _about_one_job(args.id, shown)


def status_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    return run_status


def run_status(args: argparse.Namespace) -> int:
    """Counts by status per backend (subjobs counted for split jobs), the time spent
    running, and what is still queued — all from masters' counters, no subjob loaded."""
    with session_for(write=False, refresh=True) as session:
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        seconds: dict[str, float] = defaultdict(float)
        for job in session.registry().jobs.values():
            if not isinstance(job, Job):
                counts["(broken)"]["unknown"] += 1
                continue
            backend = job_row(job)["backend"] or "-"
            by_status = job.counts() or {job.current_status(): 1}
            for status, n in by_status.items():
                counts[backend][status.label] += n
            seconds[backend] += job.run_seconds()
        if args.json:
            print(
                json.dumps(
                    {
                        b: {
                            "counts": dict(c),
                            "run_seconds": round(seconds[b], 1),
                            "queued": c.get("submitted", 0),
                        }
                        for b, c in counts.items()
                    },
                    indent=1,
                )
            )
            return OK
        labels = [s.label for s in Status]
        header = ["backend", *labels, "run time", "queued"]
        rows = [
            [
                b,
                *(str(c.get(s, 0)) for s in labels),
                _duration(seconds[b]),
                str(c.get("submitted", 0)),
            ]
            for b, c in sorted(counts.items())
        ]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            print(
                "  ".join(
                    cell.rjust(w) if i else cell.ljust(w)
                    for i, (cell, w) in enumerate(zip(row, widths, strict=True))
                )
            )
    return OK


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
