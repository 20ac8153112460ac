"""The jobs-table cache: ``ganga jobs`` answered without opening the repository, when the
repository has not changed since the table was last read from it.

Opening the repository (importing ZODB and ZEO, connecting to its server) costs more than
the whole budget of the command, and most listings follow one another with nothing
changed. So the plain path, when it has just read the table of a *settled* repository,
writes the rows' values (what :func:`ganga_like.gpi.job_table.job_row` gave, and the ids and
counts ``--json`` adds) to ``<gangadir>/repository/jobs-table.json``, stamped with:

* the repository file's stamp taken *before* the session opened
  (:mod:`ganga_like.repository.file_tail`: inode, size, modification time and the id of
  its last finished transaction) -- kept only if the rows were read from exactly that
  transaction: rows of an older snapshot (a client of the shared server a commit behind
  the file) are never stored under the file's stamp, and a commit between the stamp and
  the read only leaves no cache;
* the settings the rows depend on (how a master's status is derived);
* the code that computed them: every non-standard-library module file the process had
  loaded (path, size, modification time), the interpreter, and ``sys.path`` with each
  directory's modification time (a package installed or removed there changes it).

Settled means opening the repository and the one monitoring cycle of the plain path
change nothing: no job followed by the monitor, no submission intent (recovery), no retry
or postprocessing pending. Those are part of the committed state, so a file with the same
stamp is as settled as when the cache was written, and the plain path would print the
same rows. A table with nothing time-dependent in it (an id, a status, a name, counts,
class names) is then rendered by the same function from the same values. A table showing
an object whose class did not load is not cached (its plugin may come back with no stored
change). What opening checks outside the file (the directories and the file are this
user's, no workspace for the next job id) is checked again before the cache answers.
Bytes of the file changed in place without changing its end, size or mtime (a disk
fault) are not noticed until the next change; a plain read notices them only if it loads
the damaged record.

``ganga jobs`` with no ids or query reads the cache first; anything that does not match,
or cannot be read or parsed, means the plain path, which writes the cache again. A cache
that cannot be written is skipped without a word. Importing this module imports no
ZODB, no model and no repository code beyond two small modules.
"""

from __future__ import annotations

import contextlib
import json
import os
import site
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ganga_like.errors import GangaError
from ganga_like.gpi.table_text import render_table
from ganga_like.repository.file_tail import FileStamp, file_stamp
from ganga_like.repository.options import ensure_private_dir

if TYPE_CHECKING:
    from ganga_like.config.fast_settings import ListingSettings

__all__ = [
    "CACHE_NAME",
    "FORMAT",
    "cache_path",
    "cached_answer",
    "code_unchanged",
    "gangadir_of",
    "loaded_code",
    "opens_as_before",
    "repository_file",
    "running_code",
    "save",
    "settings_key",
    "stamp_before_opening",
    "well_formed",
]

CACHE_NAME = "jobs-table.json"
FORMAT = 1
SERVER_WRITER = "jobs-table server"


def gangadir_of(settings: ListingSettings) -> Path:
    return Path(settings.gangadir).expanduser().resolve()  # as the Repository has it


def repository_file(gangadir: Path) -> Path:
    """The repository file of a (resolved) gangadir, as the default storage URI names it."""
    return (gangadir / "repository" / "Data.fs").resolve()


def cache_path(gangadir: Path) -> Path:
    """Where the cache of a (resolved) gangadir lives; deleting it is always safe."""
    return gangadir / "repository" / CACHE_NAME


def settings_key(settings: ListingSettings) -> dict[str, Any]:
    """The settings the rows depend on."""
    return {"master_status_order": settings.master_status_order}


def stamp_before_opening(settings: ListingSettings) -> FileStamp | None:
    """The stamp to store with rows about to be read, or None when they cannot be cached
    (a read-only view; no finished transaction at the end of the file; a repository in
    a database server, which other hosts change without a file here saying so)."""
    if settings.repository_mode == "readonly" or settings.repository_url:
        return None
    return file_stamp(repository_file(gangadir_of(settings)))


# -- the code that computed the rows ----------------------------------------------------


def _standard_library() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the standard library's directories, the site directories, which may lie inside
    them): the standard library is told by the interpreter's version, not file by file."""
    stdlib = {os.path.dirname(os.__file__), sysconfig.get_path("stdlib")}
    sites = {*site.getsitepackages(), site.getusersitepackages()}
    return tuple(os.path.join(d, "") for d in stdlib), tuple(os.path.join(d, "") for d in sites)


def loaded_code() -> list[list[Any]]:
    """Every loaded module file outside the standard library: (path, size, mtime)."""
    stdlib, sites = _standard_library()
    files: set[str] = set()
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and (not name.startswith(stdlib) or name.startswith(sites)):
            files.add(name)
    found = []
    for name in sorted(files):
        info = os.stat(name)  # an OSError: not cached (the caller skips)
        found.append([name, info.st_size, info.st_mtime_ns])
    return found


def code_unchanged(files: Any) -> bool:
    if not isinstance(files, list):
        return False
    for entry in files:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
            return False
        try:
            info = os.stat(entry[0])
        except OSError:
            return False
        if [info.st_size, info.st_mtime_ns] != entry[1:]:
            return False
    return True


def running_code() -> dict[str, Any]:
    """What a table computed by another process (the jobs-table server) is checked
    against: the interpreter and the ``ganga_like`` package (with the files it loaded,
    :func:`loaded_code`, unchanged); the import path may differ, as a script's does."""
    return {
        "interpreter": [os.path.realpath(sys.executable), sys.version],
        "package": str(Path(__file__).resolve().parents[1]),
    }


def _interpreter() -> list[Any]:
    """The interpreter and where it finds modules, with each directory's mtime."""
    places: list[list[Any]] = []
    for entry in sys.path:
        try:
            mtime: int | None = os.stat(entry or ".").st_mtime_ns
        except OSError:
            mtime = None
        places.append([entry, mtime])
    return [os.path.realpath(sys.executable), sys.version, places]


# -- reading ----------------------------------------------------------------------------


def cached_answer(settings: ListingSettings, *, as_json: bool) -> str | None:
    """What ``ganga jobs`` (``--json``) prints, from the cache; None when the cache cannot
    say (then the plain path answers). Never raises for a bad or stale cache."""
    if settings.repository_mode == "readonly" or settings.repository_url:
        return None
    gangadir = gangadir_of(settings)
    try:
        cached = json.loads(cache_path(gangadir).read_bytes())
    except (OSError, ValueError, RecursionError):  # missing, unreadable, cut, not JSON
        return None
    if not isinstance(cached, dict) or cached.get("format") != FORMAT:
        return None
    columns: Any = cached.get("columns")
    rows: Any = cached.get("rows")
    if not (well_formed(columns, rows) and isinstance(cached.get("next_id"), int)):
        return None
    data = repository_file(gangadir)
    stamp = file_stamp(data)
    if stamp is None or stamp.as_list() != cached.get("stamp"):
        return None
    if cached.get("settings") != settings_key(settings):
        return None
    if cached.get("writer") == SERVER_WRITER:
        computed_here = {k: cached.get(k) for k in ("interpreter", "package")} == running_code()
    else:
        computed_here = cached.get("interpreter") == _interpreter()
    if not computed_here or not code_unchanged(cached.get("code")):
        return None
    if not opens_as_before(gangadir, data, cached["next_id"]):
        return None
    if as_json:
        return json.dumps(rows, indent=1)
    return render_table(rows, columns)


def well_formed(columns: Any, rows: Any) -> bool:
    return (
        isinstance(columns, list)
        and all(isinstance(c, str) for c in columns)
        and isinstance(rows, list)
        and all(
            isinstance(r, dict) and all(isinstance(r.get(c), str) for c in columns) for r in rows
        )
    )


def opens_as_before(gangadir: Path, data: Path, next_id: int) -> bool:
    """The checks opening the repository makes of things outside its file: the plain
    path would refuse to open (and say why) if one of them failed now."""
    workspace = gangadir / "workspace"
    try:
        for directory in (gangadir, workspace, data.parent):
            ensure_private_dir(directory)
        if data.stat().st_uid != os.getuid():
            return False  # refused by the opening (storage.py)
    except (GangaError, OSError):
        return False
    # A workspace for the next job id means the repository lost jobs (repository/checks/orphans.py).
    return not (workspace / str(next_id)).exists()


# -- writing ----------------------------------------------------------------------------


def save(
    gangadir: Path,
    stamp: FileStamp,
    settings: ListingSettings,
    next_id: int,
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    *,
    by_server: bool = False,
) -> None:
    """Write the cache atomically (a temporary file renamed over it); skip silently when
    it cannot be written (read-only directory, full disk). ``by_server``: written by the
    jobs-table server, whose import path is not a listing's (:func:`running_code`)."""
    target = cache_path(gangadir)
    temporary = target.with_name(f".{CACHE_NAME}.{os.getpid()}.tmp")
    try:
        content = {
            "format": FORMAT,
            "stamp": stamp.as_list(),
            "settings": settings_key(settings),
            **(
                {"writer": SERVER_WRITER, **running_code()}
                if by_server
                else {"interpreter": _interpreter()}
            ),
            "code": loaded_code(),
            "next_id": next_id,
            "columns": list(columns),
            "rows": list(rows),
        }
        text = json.dumps(content, separators=(",", ":"))
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(text)
        os.replace(temporary, target)
    except (OSError, ValueError, TypeError):
        with contextlib.suppress(OSError):
            os.unlink(temporary)
