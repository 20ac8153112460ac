"""The shape of the repository's root, verified before anything reads through it.

A flipped byte in the root record may leave it well-formed: it unpickles, but into
something of the wrong shape. A key's text changes (``'jobs'`` becomes ``'jObs'``: the
registry would start an empty job table), a class name changes (the table becomes a
``Broken`` object without its methods), or a reference's object id changes (the table's
ghost is then loaded from another object's record; a BTree loaded with a job's state even
aborts the process in the BTrees C code). So at every opening, before a table is loaded,
the root is checked here: a mapping whose keys are the registry's, each table of its type,
each reference pointing at a record of the class it names, no two tables the same record.
Each check reads only the root and the first bytes of each table's record.
"""

from __future__ import annotations

from typing import Any

from BTrees.IIBTree import IITreeSet
from BTrees.IOBTree import IOBTree
from BTrees.OOBTree import OOBTree
from persistent.mapping import PersistentMapping
from ZODB.utils import get_pickle_metadata

from ganga_like.repository.registry import IdAllocator
from ganga_like.repository.templates import TemplateIds

__all__ = ["CREATED_ON_USE", "EXPECTED", "layout_problem", "printable"]

# isinstance, not the exact class: the tables are BTrees subclasses that merge more
# concurrent changes (ganga_like.repository.trees), and older repositories hold the plain
# BTrees (Registry.initialise copies them once).
EXPECTED: dict[str, type] = {
    "jobs": IOBTree,
    "active": OOBTree,
    "ids": IdAllocator,
    "submitting": IOBTree,
    "by_status": OOBTree,
    "status_of": IOBTree,
    "by_name": OOBTree,
    # Created on first use (ganga_like.runtime.postprocessing): completed jobs whose
    # postprocessors are still to run.
    "postprocessing_pending": IITreeSet,
    # Created by the first template (ganga_like.repository.templates).
    "templates": IOBTree,
    "template_ids": TemplateIds,
    # Created on first use (ganga_like.runtime.retrying): failed (sub)jobs the monitor
    # decided to retry and has still to hand to their backends.
    "retry_pending": OOBTree,
    # Created on first use (ganga_like.runtime.workflow.index): who waits for whom, and
    # the waiting jobs a transaction decided on and a driver has still to act on.
    "workflow_dependents": OOBTree,
    "workflow_pending": IOBTree,
    # Created on first use (ganga_like.model.callbacks): the callbacks and iteration steps
    # a status change made due, for the monitor to act on.
    "workflow_due": OOBTree,
    # Created by the first removal (ganga_like.repository.workspace_removal): removed jobs
    # whose workspace may still be there, deleted behind the removal.
    "workspaces_to_delete": IITreeSet,
    # Created by the first kill in bulk (ganga_like.runtime.submission.master_kill):
    # masters whose killed subjobs the monitor has still to stop following.
    "unfollow_killed": IITreeSet,
}
# Every repository that holds anything has these; the others were added later and are
# created by Registry.initialise when missing (the indexes all three at once).
_ALWAYS = ("jobs", "active", "ids")
# Absent until first needed; every other table of EXPECTED a repository in use has.
CREATED_ON_USE = frozenset(
    {
        "postprocessing_pending",
        "templates",
        "template_ids",
        "retry_pending",
        "workflow_dependents",
        "workflow_pending",
        "workflow_due",
        "workspaces_to_delete",
        "unfollow_killed",
    }
)
_INDEXES = ("by_status", "status_of", "by_name")
# "workspace_marker": the workspace a repository on a database server goes with
# (ganga_like.repository.shared_workspace).
_OTHER_KEYS = frozenset({"format", "workspace_marker"})


def layout_problem(conn: Any) -> str | None:
    """What is wrong with the shape of ``conn``'s root, or None when it is sound.

    Only reads: the root record and the class part of each table's record. Reading may
    itself fail (a missing record, a conflict): the caller decides what that means.
    """
    root = conn.root()
    if not isinstance(root, PersistentMapping):
        return f"the root is of class {_full_name(type(root))}, not a persistent mapping"
    keys = list(root.keys())
    unknown = [k for k in keys if k not in EXPECTED and k not in _OTHER_KEYS]
    if unknown:
        return f"the root holds an entry the registry does not have ({printable(repr(unknown[0]))})"
    if not keys:
        return None  # a new repository: the registry creates its layout
    missing = [k for k in _ALWAYS if k not in root]
    indexes = [k for k in _INDEXES if k in root]
    if indexes and len(indexes) != len(_INDEXES):
        missing += [k for k in _INDEXES if k not in root]
    if missing:
        return f"the root lacks the registry's {missing[0]!r}"
    seen: dict[bytes, str] = {}
    for key, kind in EXPECTED.items():
        if key not in root:
            continue
        value = root[key]  # a ghost: its class comes from the reference, nothing loaded
        if not isinstance(value, kind):
            return f"the root's {key!r} is of class {_full_name(type(value))}, not {kind.__name__}"
        oid: bytes | None = getattr(value, "_p_oid", None)
        if oid is None:
            return f"the root's {key!r} is not stored in a record of its own"
        if oid in seen:
            return f"the root's {key!r} and {seen[oid]!r} are the same record"
        seen[oid] = key
        data, _serial = conn._storage.load(oid)
        module, name = get_pickle_metadata(data)
        klass = type(value)
        if (module, name) != (klass.__module__, klass.__name__):
            return (
                f"the root's {key!r} refers to record {int.from_bytes(oid, 'big'):#x}, "
                f"which holds an object of class {printable(name)}, not "
                f"{klass.__name__}"
            )
    return None


def _full_name(klass: type) -> str:
    """``module.Class``: a damaged name may be in either part (the class of a module
    that does not exist loads as a broken object of the same class name)."""
    return printable(f"{klass.__module__}.{klass.__qualname__}")


def printable(name: str) -> str:
    """A class name read from a damaged record, fit for a one-line message (the damage
    may have turned one of its letters into a line break)."""
    shown = "".join(c if c.isprintable() else "?" for c in name)
    return shown if len(shown) <= 60 else shown[:57] + "..."
