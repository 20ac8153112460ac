"""The repository's subclasses of ZEO and ZODB classes override and use their private
members (``repository/zeo/``, ``file_storage``, ``savepoints``, ``writer``), which those
projects change without notice between versions. pyproject pins both to the minor
version the subclasses were written against; these tests fail loudly, in one line, when
another version is installed, or when a private member they rely on is gone or takes
other arguments.

Moving the pin: install the new version, run these tests and the repository's (sessions,
shared mode, disk full, recovery), read the new version's code of every member listed
here, then update ``TESTED`` and pyproject together.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Distribution -> the minor version the subclasses were written against.
TESTED = {"ZEO": "6.2", "ZODB": "6.4"}

# (module, class): {method: its parameters, as inspect.signature shows them}; the
# methods our subclasses override or call.
METHODS: dict[tuple[str, str], dict[str, str]] = {
    ("ZEO.ClientStorage", "ClientStorage"): {
        "notify_connected": "(self, conn, info)",
        "notify_disconnected": "(self)",
        "new_oid": "(self)",
        "tpc_begin": "(self, txn, tid=None, status=' ')",
        "store": "(self, oid, serial, data, version, txn)",
        "checkCurrentSerialInTransaction": "(self, oid, serial, transaction)",
        "deleteObject": "(self, oid, serial, txn)",
        "storeBlob": "(self, oid, serial, data, blobfilename, version, txn)",
        "tpc_vote": "(self, txn)",
        "tpc_abort": "(self, txn, timeout=None)",
        "_check_trans": "(self, trans, meth)",
        "_update_blob_cache": "(self, tbuf, tid)",
        "_iterator_gc": "(self, disconnected=False)",
    },
    ("ZEO.cache", "ClientCache"): {
        "_initfile": "(self, fsize)",
        "load": "(self, oid, before_tid=None)",
        "loadBefore": "(self, oid, before_tid)",
        "store": "(self, oid, start_tid, end_tid, data)",
        "invalidate": "(self, oid, tid)",
        "clear": "(self)",
        "setLastTid": "(self, tid)",
        "getLastTid": "(self)",
        "close": "(self)",
    },
    ("ZEO.StorageServer", "ZEOStorage"): {
        "setup_delegation": "(self)",
        "get_info": "(self)",
        "getInvalidations": "(self, tid)",
        "new_oids": "(self, n=100)",
        "tpc_begin": "(self, id, user, description, ext, tid=None, status=' ')",
        "_check_tid": "(self, tid, exc=None)",
        "_vote": "(self, delay=None)",
        "_invalidate": "(self, tid)",
        "_clear_transaction": "(self)",
        "notify_disconnected": "(self)",
        "log": "(self, msg, level=20, exc_info=False)",
    },
    ("ZEO.StorageServer", "StorageServer"): {
        "create_client_handler": "(self)",
        "invalidate": "(self, zeo_storage, storage_id, tid, invalidated)",
        "start_thread": "(self, daemon=True)",
        "close_conn": "(self, zeo_storage)",
    },
    ("ZEO.asyncio.client", "ClientIO"): {"invalidateTransaction": "(self, tid, oids)"},
    ("ZEO.asyncio.client", "Protocol"): {"load_before": "(self, oid, tid)"},
    ("ZODB.FileStorage.FileStorage", "FileStorage"): {
        "lastInvalidations": "(self, count)",
        "store": "(self, oid, oldserial, data, version, transaction)",
        "tpc_vote": "(self, transaction)",
        "_clear_temp": "(self)",
        "_save_index": "(self)",
    },
    ("ZODB.serialize", "ObjectWriter"): {"_dump": "(self, classmeta, state)"},
    ("ZODB.Connection", "Connection"): {"_commit_savepoint": "(self, transaction)"},
    ("ZODB.Connection", "TmpStore"): {"__init__": "(self, storage)", "close": "(self)"},
    ("ZODB.mvccadapter", "MVCCAdapter"): {
        "_invalidate_finish": "(self, tid, oids, committing_instance)"
    },
}

# (module, class): the attributes our subclasses read or set (set in the class's code,
# or class attributes).
ATTRIBUTES: dict[tuple[str, str], tuple[str, ...]] = {
    ("ZEO.ClientStorage", "ClientStorage"): (
        "_oids",
        "_is_read_only",
        "_call",
        "_async",
        "_connection_generation",
        "_commit_lock",
        "_tbuf",
        "_server",
        "_cache",
    ),
    ("ZEO.cache", "ClientCache"): (
        "f",
        "path",
        "maxsize",
        "tid",
        "current",
        "currentofs",
        "noncurrent",
        "_len",
        "_lock",
        "_lock_file",
    ),
    ("ZEO.StorageServer", "ZEOStorage"): (
        "connection",
        "client_conflict_resolution",
        "server",
        "storage_id",
        "storage",
        "read_only",
        "stats",
        "lock_manager",
        "locked",
        "transaction",
        "serials",
        "conflicts",
        "invalidated",
        "txnlog",
        "blob_log",
        "tid",
        "status",
        "connected",
        "async_",
        "async_threadsafe",
    ),
    ("ZEO.StorageServer", "StorageServer"): (
        "invq",
        "invq_bound",
        "zeo_storages_by_storage_id",
        "__thread",
        "acceptor",
    ),
    ("ZODB.FileStorage.FileStorage", "FileStorage"): (
        "_file",
        "_lock",
        "_pos",
        "_file_name",
        "_tindex",
        "_tfile",
        "_tfmt",
        "_files",
        "_is_read_only",
    ),
    ("ZEO.asyncio.client", "ClientRunner"): ("io_call", "client", "timeout"),
    ("ZEO.asyncio.client", "ClientIO"): ("protocol", "operational", "cache"),
    ("ZODB.Connection", "TmpStore"): ("index", "creating", "_file", "position"),
    ("ZODB.Connection", "Connection"): (
        "_savepoint_storage",
        "_normal_storage",
        "_storage",
        "_modified",
        "_readCurrent",
        "_creating",
    ),
    ("ZODB.mvccadapter", "MVCCAdapterInstance"): ("_base", "_modified", "_ltid", "_storage"),
    ("ZODB.serialize", "ObjectWriter"): ("_file", "_p"),
}

# Module-level names imported.
NAMES = {
    "ZEO.StorageServer": ("registered_methods",),
    "ZEO.cache": ("ZEC_HEADER_SIZE", "magic"),
    "ZODB.FileStorage.FileStorage": ("TempFormatter", "FileIterator"),
}


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


@pytest.mark.parametrize("distribution", sorted(TESTED))
def test_the_installed_zeo_and_zodb_are_the_versions_the_subclasses_were_written_for(
    distribution: str,
) -> None:
    installed = importlib.metadata.version(distribution)
    assert _minor(installed) == TESTED[distribution], (
        f"{distribution} {installed} is installed, but the repository's subclasses of its "
        f"private members were written against {distribution} {TESTED[distribution]}: "
        f"see {Path(__file__).name} before moving the pin"
    )


@pytest.mark.parametrize("distribution", sorted(TESTED))
def test_pyproject_pins_zeo_and_zodb_to_the_tested_minor_version(distribution: str) -> None:
    tested = TESTED[distribution]
    major, minor = tested.split(".")
    wanted = f"{distribution}>={tested},<{major}.{int(minor) + 1}"
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = [d for d in dependencies if re.match(rf"{distribution}\b", d)]
    assert pins == [wanted], f"pyproject pins {pins}, expected [{wanted!r}]"


def _cls(module: str, name: str) -> type:
    found: type = getattr(importlib.import_module(module), name)
    return found


@pytest.mark.parametrize(("where", "method"), [(w, m) for w, ms in METHODS.items() for m in ms])
def test_each_private_method_relied_on_exists_with_the_parameters_expected(
    where: tuple[str, str], method: str
) -> None:
    cls = _cls(*where)
    name = f"{where[0]}.{where[1]}.{method}"
    assert hasattr(cls, method), f"{name} no longer exists"
    found = str(inspect.signature(getattr(cls, method)))
    assert found == METHODS[where][method], (
        f"{name} takes {found}, expected {METHODS[where][method]}"
    )


def _sets(cls: type, attribute: str) -> bool:
    """Whether ``cls`` (or a class it derives from) has ``attribute`` or sets it on its
    instances in its code (``self.name = ...``, ``+=``)."""
    if hasattr(cls, attribute):
        return True
    assignment = re.compile(rf"self\.{re.escape(attribute)}\s*(=[^=]|\+=)")
    for klass in cls.__mro__:
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue  # a builtin or C class
        if assignment.search(source):
            return True
    return False


@pytest.mark.parametrize(
    ("where", "attribute"), [(w, a) for w, attrs in ATTRIBUTES.items() for a in attrs]
)
def test_each_private_attribute_relied_on_is_still_set(
    where: tuple[str, str], attribute: str
) -> None:
    assert _sets(_cls(*where), attribute), (
        f"{where[0]}.{where[1]} no longer sets {attribute} on its instances"
    )


@pytest.mark.parametrize(("module", "name"), [(m, n) for m, ns in NAMES.items() for n in ns])
def test_each_module_name_relied_on_still_exists(module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{module}.{name} no longer exists"
