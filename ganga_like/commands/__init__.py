"""`ganga` subcommands that need no shell: fast, scriptable, with exit codes.

    ganga jobs [IDS | QUERY] [--json]     the jobs table
    ganga show ID [--full]                one job or subjob in full
    ganga log ID                          its event log
    ganga status                          counts by status per backend, run time, queue
    ganga kill|resubmit|remove IDS|QUERY  bulk actions, after a confirmation (--yes skips
                                          it; a query selecting every job needs --all)
    ganga export ID FILE.json             a job's definition as JSON
    ganga import FILE.json                a new job from such a file

Exit codes: 0 success, 1 an error (one line on stderr), 2 bad usage, a bad setting or a
malformed query, 3 nothing matched, 4 the confirmation was declined, 141 the output pipe
was closed early. None of these imports IPython. docs/cli.md describes them.
"""

from __future__ import annotations

from ganga_like.commands.dispatch import SUBCOMMANDS, dispatch

__all__ = ["SUBCOMMANDS", "dispatch"]
