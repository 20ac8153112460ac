"""How much the repository grows per subjob when subjobs run one after another.

    python scripts/bench/bench_storage_growth.py [N ...] [--program "true"] [--keep]

For each N (default 300, 3000, 30000), a new gangadir and one split job of N subjobs of
``--program`` (default ``true``) on Local with one slot (``Local.max_concurrent = 1``), in
the default repository mode, automatic packing off.  ``true`` ends so fast that the monitor
mostly sees a subjob ended in the cycle that sees it start; ``--program "sleep 0.1"`` lets
it see every subjob running, then the next one waiting: the master's subjobs alternate
between running and waiting, the order that made a master's status flap.

Printed per N: ``Data.fs`` growth per subjob from before ``submit()`` to the master
completed (and from after ``submit()`` returned), the transactions and the records written,
how often the master's own record was written and how many entries its log holds, and where
the bytes went (record bytes by class, with FileStorage's headers).
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

# FileStorage's fixed costs: a data record's header, a transaction's header and trailer.
DATA_HEADER = 42
TXN_HEADER = 23 + 8


def where_the_bytes_go(path: Path, start: int, master_oid: bytes) -> dict[str, Any]:
    """Transactions of ``path`` from byte ``start`` on: their count, records and bytes by
    class, and the writes of the master's record."""
    from ZODB.FileStorage.FileStorage import FileIterator
    from ZODB.utils import get_pickle_metadata

    by_class: collections.Counter[str] = collections.Counter()
    records: collections.Counter[str] = collections.Counter()
    transactions = master_writes = headers = 0
    iterator = FileIterator(str(path), pos=start)
    try:
        for txn in iterator:
            transactions += 1
            headers += TXN_HEADER + len(txn.user) + len(txn.description)
            headers += len(getattr(txn, "extension_bytes", b"") or b"")
            for record in txn:
                name = get_pickle_metadata(record.data)[1] if record.data else "(deleted)"
                by_class[name] += len(record.data) + DATA_HEADER
                records[name] += 1
                if record.oid == master_oid:
                    master_writes += 1
    finally:
        iterator.close()
    return {
        "transactions": transactions,
        "transaction_headers": headers,
        "by_class": by_class,
        "records": records,
        "master_writes": master_writes,
    }


def run(n: int, program: list[str], base: Path) -> None:
    os.environ["GANGA_DIR"] = str(base / "gangadir")
    from ganga_like import ArgSplitter, Executable, Job, Local, config
    from ganga_like.gpi.job import unwrap_job
    from ganga_like.runtime.session import close_session

    config["Local"]["max_concurrent"] = 1
    config["Repository"]["pack_threshold_mb"] = 0
    data_fs = base / "gangadir" / "repository" / "Data.fs"
    j = Job(
        application=Executable(exe=program[0]),
        splitter=ArgSplitter(args=[program[1:]] * n),
        backend=Local(),
    )
    before = data_fs.stat().st_size
    started = time.perf_counter()
    j.submit()
    submitted = data_fs.stat().st_size
    status = j.wait(timeout=24 * 3600, progress=False)
    wall = time.perf_counter() - started
    impl = unwrap_job(j)
    master_oid = impl._p_oid
    entries = len(impl.history)
    close_session()
    after = data_fs.stat().st_size
    found = where_the_bytes_go(data_fs, before, master_oid)
    after_submit = where_the_bytes_go(data_fs, submitted, master_oid)
    print(
        f"{n} x {shlex.join(program)}: {status} in {wall:.0f} s; growth per subjob "
        f"{(after - before) / n:.0f} B from before submit(), "
        f"{(after - submitted) / n:.0f} B after it returned ({(after - before) / 2**20:.1f} MB)"
    )
    print(
        f"  transactions {found['transactions']} ({after_submit['transactions']} after submit); "
        f"master record written {found['master_writes']} times "
        f"({after_submit['master_writes']} after submit), its log {entries} entries"
    )
    total = sum(found["by_class"].values()) + found["transaction_headers"]
    print(f"  where the bytes go ({total / n:.0f} B per subjob):")
    rows = [(name, size, found["records"][name]) for name, size in found["by_class"].items()]
    rows.append(("(transaction headers)", found["transaction_headers"], found["transactions"]))
    for name, size, count in sorted(rows, key=lambda row: -row[1]):
        print(
            f"    {name:<22} {size / n:7.0f} B per subjob  {count / n:6.2f} records per subjob"
            f"  {size / max(count, 1):6.0f} B each"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sizes", nargs="*", type=int, default=[300, 3000, 30000])
    parser.add_argument("--program", default="true", help="the subjobs' command line")
    parser.add_argument("--keep", action="store_true", help="keep the gangadirs")
    args = parser.parse_args()
    program = shlex.split(args.program)
    import subprocess
    import sys

    for n in args.sizes:
        # One process per size: a session per process, each with its own gangadir.
        if len(args.sizes) > 1:
            cmd = [sys.executable, __file__, str(n), "--program", args.program]
            subprocess.run(cmd + (["--keep"] if args.keep else []), check=True)
            continue
        base = Path(tempfile.mkdtemp(prefix="bench-growth-"))
        try:
            run(n, program, base)
        finally:
            if not args.keep:
                stop_server_and_remove(base)
            else:
                print(f"  kept: {base}")


def stop_server_and_remove(base: Path) -> None:
    """Stop the gangadir's repository server and remove it all (the idle runner exits on
    its own)."""
    import shutil

    from ganga_like.repository.zeo.shared import stop_server

    stop_server(base / "gangadir" / "repository")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
