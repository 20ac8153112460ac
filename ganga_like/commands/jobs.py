"""``ganga jobs``: the jobs table, from the jobs-table cache when it can answer.

Only the listing of every job can come from the cache (:mod:`ganga_like.commands.jobs_cache`),
or else from the jobs-table server (:mod:`ganga_like.commands.table_client`); ids and
queries, and any answer that does not match the repository, take the plain path
(:func:`ganga_like.commands.listing.list_jobs`), which imports the model and opens the
repository. The cache and the server are asked with the few settings they need, read
without the configuration machinery when that reading can decide
(:func:`ganga_like.commands.context.listing_settings`): a listing they answer imports
neither traitlets nor the plugins' entry points.
"""

from __future__ import annotations

import argparse
from typing import Any

from ganga_like.commands.context import OK, listing_settings

__all__ = ["jobs_parser", "run_jobs"]


def jobs_parser(parser: argparse.ArgumentParser) -> Any:
    parser.add_argument(
        "query",
        nargs="*",
        metavar="ID|QUERY",
        help='job ids (3, 3.1, "1,4") or a query, e.g. "status=failed; name~scan*"',
    )
    parser.add_argument("--json", action="store_true", help="print JSON for machines")
    return run_jobs


def run_jobs(args: argparse.Namespace) -> int:
    if not args.query:
        from ganga_like.commands.jobs_cache import cached_answer

        settings = listing_settings()
        shown = cached_answer(settings, as_json=args.json)
        if shown is None:
            from ganga_like.commands.table_client import asked_answer

            shown = asked_answer(settings, as_json=args.json)
        if shown is not None:
            print(shown)
            return OK
    from ganga_like.commands.listing import list_jobs

    return list_jobs(args)
