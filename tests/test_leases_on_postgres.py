"""The monitor lease and the daemon's lock of a repository in PostgreSQL: advisory locks
of the database, which sessions on every host see (a real server; each test a database
of its own)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from ganga_like.repository import advisory_locks
from ganga_like.repository.connection import Repository
from ganga_like.runtime.monitoring.lease import MonitorLease

from .conftest import CHILD_PYTHONPATH
from .test_repository_on_postgres import child_env, ganga
from .waiting import wait_until

HOLDER = """
import sys
from pathlib import Path
from ganga_like.runtime.monitoring.lease import MonitorLease
lease = MonitorLease(Path(sys.argv[1]), uri=sys.argv[2])
assert lease.hold()
print("held", flush=True)
sys.stdin.read()  # until the test kills it
"""


def test_the_lease_is_the_databases_and_passes_on_when_its_holder_is_killed(
    gangadir: Path, postgres_repository: str
) -> None:
    env = {**os.environ, "PYTHONPATH": CHILD_PYTHONPATH}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(gangadir), postgres_repository],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    ours = MonitorLease(gangadir, uri=postgres_repository)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not ours.hold()
        seen = advisory_locks.holder_of(postgres_repository, advisory_locks.MONITOR_KEY)
        assert seen is not None
        assert (seen.pid, seen.kind, seen.host) == (holder.pid, "session", socket.gethostname())
        assert not (gangadir / "monitor.lease").exists()  # no file in the gangadir
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        # Its host closed the connection: the server released the lock at once.
        assert wait_until(ours.hold, timeout=10)
        assert ours.acquisitions == 1 and ours.hold() and ours.acquisitions == 1
    finally:
        ours.release()
        holder.kill()
        holder.wait()
    assert advisory_locks.holder_of(postgres_repository, advisory_locks.MONITOR_KEY) is None


def test_a_dead_hosts_lock_is_freed_by_the_servers_keepalives_in_bounded_time(
    postgres_repository: str,
) -> None:
    lock = advisory_locks.AdvisoryLock(postgres_repository, advisory_locks.DAEMON_KEY, "daemon")
    assert lock.take()
    try:
        conn = lock._conn
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('tcp_keepalives_idle'),"
                " current_setting('tcp_keepalives_interval'),"
                " current_setting('tcp_keepalives_count'), current_setting('tcp_user_timeout')"
            )
            idle, interval, count, user_timeout = cursor.fetchone()
        assert (int(idle), int(interval), int(count)) == (5, 2, 3)
        assert int(user_timeout) == 10_000  # ms
        assert advisory_locks.DEAD_PEER_SECONDS == 11
    finally:
        lock.release()


def test_one_monitor_daemon_per_repository_whichever_gangadir_starts_it(
    gangadir: Path, postgres_repository: str, tmp_path: Path
) -> None:
    """Two gangadirs with one workspace (as two hosts see one shared directory): the
    daemon lock is the database's, so the second is refused in one line."""
    Repository(gangadir, "shared", uri=postgres_repository).close()
    other = tmp_path / "other-host-view"
    other.mkdir(mode=0o700)
    (other / "workspace").symlink_to(gangadir / "workspace")
    first = child_env(gangadir, postgres_repository)
    second = child_env(other, postgres_repository)
    started = ganga(["monitor", "start"], first)
    assert started.returncode == 0, started.stderr
    try:
        refused = ganga(["monitor", "start"], second)
        assert refused.returncode != 0
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, refused.stderr
        assert "a monitor daemon already follows the repository" in lines[0]
        assert socket.gethostname() in lines[0]
        status = ganga(["monitor", "status"], second)
        assert f"(daemon on {socket.gethostname()})" in status.stdout, status.stdout
    finally:
        ganga(["monitor", "stop"], first)
