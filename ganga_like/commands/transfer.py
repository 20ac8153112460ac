"""export and import: a job's definition as JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ganga_like.commands.context import ERROR, NOTHING, OK, error, session_for
from ganga_like.commands.lookup import find_job
from ganga_like.runtime.job_json import from_json, to_json

__all__ = ["export_parser", "import_parser"]


def export_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("id", help="the job (or subjob) to export")
    parser.add_argument("file", help="where to write the JSON ('-' for stdout)")
    return run_export


def run_export(args: argparse.Namespace) -> int:
    with session_for(write=False, refresh=False) as session:
        job = find_job(session, args.id)
        if job is None:
            error(f"no job {args.id}")
            return NOTHING
        text = json.dumps(to_json(job), indent=1) + "\n"
    if args.file == "-":
        print(text, end="")
    else:
        Path(args.file).write_text(text)
    return OK


def import_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument("file", help="a file written by `ganga export`")
    return run_import


def run_import(args: argparse.Namespace) -> int:
    try:
        document = json.loads(Path(args.file).read_text())
    except (OSError, ValueError) as exc:
        error(f"cannot read {args.file}: {exc}")
        return ERROR
    except RecursionError:  # the JSON parser recurses once per nested bracket
        error(f"cannot read {args.file}: its JSON is nested too deeply to be a job export")
        return ERROR
    job = from_json(document)
    with session_for(write=True, refresh=True) as session:
        session.repo.in_transaction(lambda: session.registry().add(job), what="importing a job")
        print(f"imported as job {job.id}")
    return OK
