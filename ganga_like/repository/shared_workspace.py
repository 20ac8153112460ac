"""The workspace a repository on a database server goes with, checked at every opening.

A repository in PostgreSQL is shared by sessions on several hosts, but the jobs' files
(inputs, outputs) stay in ``<gangadir>/workspace``, which must therefore be one directory
that every host sees (a shared filesystem). The first session writes a marker,
``workspace/.repository-id``, holding a random id, and keeps that id in the repository's
root; a session whose workspace lacks the marker or holds another id sees another
directory (a host's local disk, another gangadir) and is refused in one line, before it
could write a job's files where the other hosts never find them.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from ganga_like.errors import RepositoryError
from ganga_like.repository import postgres

__all__ = ["MARKER", "ROOT_KEY", "check_shared_workspace"]

MARKER = ".repository-id"
ROOT_KEY = "workspace_marker"


def check_shared_workspace(root: Any, workspace: Path, uri: str) -> None:
    """Refuse a workspace that is not the repository's; mark a new one (in the caller's
    transaction, which commits it)."""
    expected = root.get(ROOT_KEY)
    found = _read_marker(workspace)
    if expected is None:
        root[ROOT_KEY] = found if found is not None else _write_marker(workspace)
        return
    if found == expected:
        return
    state = "has no marker" if found is None else "is marked for another repository"
    raise RepositoryError(
        f"the workspace {workspace} is not the one the repository "
        f"{postgres.server_of(uri)} goes with (its {MARKER} {state}): the jobs' files must "
        "be in one directory every host sees; set GANGA_DIR to the gangadir on the "
        "filesystem the hosts share"
    )


def _read_marker(workspace: Path) -> str | None:
    try:
        return (workspace / MARKER).read_text().strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RepositoryError(f"cannot read {workspace / MARKER}: {exc.strerror}") from None


def _write_marker(workspace: Path) -> str:
    """A new marker, unless a session opening at the same moment wrote one first: it is
    written aside and linked into place, so a reader never finds it half written."""
    path = workspace / MARKER
    aside = workspace / f"{MARKER}.{os.getpid()}.{secrets.token_hex(4)}"
    aside.write_text(secrets.token_hex(16) + "\n")
    aside.chmod(0o600)
    try:
        os.link(aside, path)
    except FileExistsError:
        pass
    finally:
        aside.unlink()
    return _read_marker(workspace) or ""
