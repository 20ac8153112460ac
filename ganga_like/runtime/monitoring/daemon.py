"""The monitor daemon: follows jobs after every shell has exited (``ganga monitor ...``).

    python -m ganga_like.runtime.monitoring.daemon start|stop|status [GANGADIR]

``start`` launches a detached process that opens the repository in shared mode and runs
the monitor with the daemon's lease (it has priority: sessions give the lease up and only
read while it runs). ``stop`` ends it (SIGTERM; jobs keep running in their backends and
are followed again by the next monitor). ``status`` says whether it runs, who holds the
lease, and what the daemon's last cycles did.

Files in the gangadir: ``monitor-daemon.lock`` (flock held by the live daemon: one per
gangadir), ``monitor-daemon.pid`` (``PID host=NAME boot=ID``, refreshed every heartbeat: on
a gangadir other hosts share, a daemon alive on another host is never started beside nor
stopped from here, see :mod:`ganga_like.hosts`), ``monitor-daemon.json`` (its latest
figures, rewritten every few seconds) and ``monitor-daemon.log``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import all_sections, options, store
from ganga_like.detached import HelperNotReady, send_ready_line, start_detached, stop_detached
from ganga_like.errors import GangaError
from ganga_like.hosts import Heartbeat, Record, live_elsewhere, read_record, write_record
from ganga_like.private import write_private
from ganga_like.repository.storage import ensure_private_dir
from ganga_like.runtime.monitoring.lease import (
    DAEMON_LOCK,
    DAEMON_MODULE,
    MonitorLease,
    lease_holder,
)
from ganga_like.runtime.settings import Settings

__all__ = ["DaemonStatus", "main", "run", "start", "status", "stop"]

PID_NAME = "monitor-daemon.pid"
STATUS_NAME = "monitor-daemon.json"
LOG_NAME = "monitor-daemon.log"
STATUS_EVERY = 2.0

log = logging.getLogger("ganga_like")


class DaemonError(GangaError):
    """The monitor daemon could not be started or stopped."""


@dataclass
class DaemonStatus:
    gangadir: Path
    pid: int | None
    lease: tuple[int, str] | None
    figures: dict[str, Any]
    elsewhere: Record | None = None  # a daemon alive on another host

    @property
    def running(self) -> bool:
        return self.pid is not None

    def __str__(self) -> str:
        if self.elsewhere is not None:
            lines = [f"monitor daemon: running on {self.elsewhere.where()} ({self.gangadir})"]
        elif self.pid is None:
            lines = [f"monitor daemon: not running ({self.gangadir})"]
        else:
            started = self.figures.get("started")
            since = (
                time.strftime(" since %Y-%m-%d %H:%M:%S", time.localtime(started))
                if isinstance(started, int | float)
                else ""
            )
            lines = [f"monitor daemon: running, PID {self.pid}{since} ({self.gangadir})"]
            if self.figures:
                age = time.time() - float(self.figures.get("updated", 0))
                lines.append(
                    f"  {self.figures.get('cycles', 0)} cycles, "
                    f"{self.figures.get('polled', 0)} active job(s) at the last cycle, "
                    f"{self.figures.get('commits', 0)} commits with changes, "
                    f"figures {age:.0f} s old"
                )
                stale = self.figures.get("stale_backends") or {}
                for backend, reason in stale.items():
                    lines.append(f"  {backend}: unreachable ({reason})")
        if self.lease is None:
            lines.append("monitor lease: free (the next session to start monitoring takes it)")
        else:
            lines.append(f"monitor lease: held by PID {self.lease[0]} ({self.lease[1]})")
        return "\n".join(lines)


# -- control (called by `ganga monitor ...`) -------------------------------------------


def daemon_pid(gangadir: Path) -> int | None:
    """PID of the live daemon of ``gangadir``, or None."""
    gangadir = gangadir.expanduser().resolve()
    record = read_record(gangadir / PID_NAME)
    if record is None or not record.here:
        return None  # a pid written on another host means nothing here
    pid = record.pid
    _reap()
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [os.fsdecode(a) for a in f.read().split(b"\0")]
    except OSError:
        return None
    if DAEMON_MODULE not in args or "run" not in args:
        return None
    return pid if str(gangadir) in args else None


def status(gangadir: Path, uri: str = "") -> DaemonStatus:
    """The daemon of ``gangadir``; who holds the lease: of the repository ``uri`` when it
    is in PostgreSQL (its holder may be on another host), else of the gangadir."""
    gangadir = gangadir.expanduser().resolve()
    pid = daemon_pid(gangadir)
    figures: dict[str, Any] = {}
    if pid is not None:
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads((gangadir / STATUS_NAME).read_text())
            if isinstance(loaded, dict) and loaded.get("pid") == pid:
                figures = loaded
    elsewhere = live_elsewhere(gangadir / PID_NAME) if pid is None else None
    return DaemonStatus(gangadir, pid, _lease_holder(gangadir, uri), figures, elsewhere)


def _refuse_if_elsewhere(gangadir: Path, what: str) -> None:
    record = live_elsewhere(gangadir / PID_NAME)
    if record is not None:
        raise DaemonError(
            f"the monitor daemon of {gangadir} runs on {record.where()}; it follows every "
            f"job of this gangadir from there: {what}"
        )


def _lease_holder(gangadir: Path, uri: str) -> tuple[int, str] | None:
    from ganga_like.repository import postgres

    if not (uri and postgres.is_postgres(uri)):
        on_file = lease_holder(gangadir)
        if on_file is None or not on_file.host:
            return None if on_file is None else (on_file.pid, on_file.kind)
        return on_file.pid, f"{on_file.kind} on {on_file.host}"
    from ganga_like.repository.advisory_locks import MONITOR_KEY, holder_of

    holder = holder_of(uri, MONITOR_KEY)
    return None if holder is None else (holder.pid, f"{holder.kind} on {holder.host}")


_spawned: list[subprocess.Popen[bytes]] = []


def _reap() -> None:
    for proc in list(_spawned):
        if proc.poll() is not None:
            _spawned.remove(proc)


def start(settings: Settings, timeout: float = 60.0, config: ConfigSnapshot | None = None) -> int:
    """Start the daemon for ``settings.gangadir`` (shared mode); return its PID. It
    carries ``config`` (the configuration's snapshot unless given), its plugins' sections
    included, as a session opened here would.

    If one runs already, its PID is returned and nothing is started.
    """
    gangadir = settings.gangadir.expanduser().resolve()
    ensure_private_dir(gangadir)
    running = daemon_pid(gangadir)
    if running is not None:
        return running
    _refuse_if_elsewhere(gangadir, "leave it, or stop it there first (ganga monitor stop)")
    fields = dataclasses.asdict(settings)
    fields["gangadir"] = str(gangadir)
    fields["repository_mode"] = "shared"  # sessions must be able to open it beside us
    handed = {
        "settings": fields,
        "config": _sections_as_json(config if config is not None else store.snapshot()),
    }
    try:
        with _handed_over(handed) as handed_fd:
            argv = [sys.executable, "-m", DAEMON_MODULE, "run", str(gangadir)]
            argv += [HANDED_FD_OPTION, str(handed_fd)]
            started = start_detached(
                argv, gangadir / LOG_NAME, ready_timeout=timeout, pass_fds=(handed_fd,)
            )
    except HelperNotReady as exc:
        _spawned.append(exc.proc)  # reaped later, like one that started
        raise DaemonError(
            f"the monitor daemon did not start: {exc.reason}; see {gangadir / LOG_NAME}"
        ) from None
    _spawned.append(started.proc)
    line = started.ready_line or ""
    kind, _, rest = line.partition(" ")
    if kind == "ready":
        return int(rest.split()[0])
    if kind == "running":  # another `start` won the race
        return int(rest.split()[0])
    raise DaemonError(
        f"the monitor daemon did not start: {rest or kind}; see {gangadir / LOG_NAME}"
    )


def stop(gangadir: Path, timeout: float = 15.0) -> bool:
    """Stop the daemon (it finishes its cycle); True if one was running."""
    gangadir = gangadir.expanduser().resolve()
    pid = daemon_pid(gangadir)
    if pid is None:
        _refuse_if_elsewhere(gangadir, "stop it on that host (ganga monitor stop)")
        return False
    if not stop_detached(pid, lambda: daemon_pid(gangadir) == pid, timeout, poll=0.05):
        raise DaemonError(f"the monitor daemon (PID {pid}) did not stop within {timeout:.0f} s")
    return True


# -- the daemon process ---------------------------------------------------------------


def run(settings: Settings, ready_fd: int = -1, config: ConfigSnapshot | None = None) -> int:
    """The daemon's life: hold the daemon lock, monitor with priority, until SIGTERM."""
    from ganga_like.runtime.session import Session
    from ganga_like.runtime.workflow import driver  # noqa: F401 (the daemon drives waiting jobs)

    gangadir = settings.gangadir.expanduser().resolve()
    ensure_private_dir(gangadir)
    lock_fd = os.open(gangadir / DAEMON_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        send_ready_line(ready_fd, f"running {daemon_pid(gangadir) or 0}")
        return 0
    stop_event = threading.Event()
    session: Any = None
    heartbeat = Heartbeat(gangadir / PID_NAME, stop_event.set)
    held: list[Any] = []  # the database's daemon lock, in PostgreSQL
    try:
        try:
            _refuse_if_elsewhere(gangadir, "this one leaves")
            session = Session(
                dataclasses.replace(settings, gangadir=gangadir, monitoring=False), config
            )
        except GangaError as exc:
            send_ready_line(ready_fd, f"error {exc}")
            return 1
        repo = session.repo
        if repo.on_server:
            # One daemon per repository, whichever host it runs on.
            refused = _take_server_lock(repo.uri, held)
            if refused:
                send_ready_line(ready_fd, f"error {refused}")
                return 1
        monitor = session.monitor
        monitor.lease = MonitorLease(
            gangadir, kind="daemon", uri=repo.uri if repo.on_server else None
        )
        last: dict[str, int] = {"polled": 0}
        cycle = monitor.run_once

        def counted_cycle() -> Any:  # remember how many jobs the last cycle followed
            result = cycle()
            last["polled"] = result.polled
            return result

        monitor.run_once = counted_cycle
        signal.signal(signal.SIGTERM, lambda *_: stop_event.set())
        signal.signal(signal.SIGINT, lambda *_: stop_event.set())
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGUSR1, lambda *_: monitor.poke())
        monitor.start()
        started = time.time()
        write_record(gangadir / PID_NAME, os.getpid())
        heartbeat.start()
        log.info("monitor daemon %d started for %s", os.getpid(), gangadir)
        _write_figures(gangadir, monitor, started, 0)
        send_ready_line(ready_fd, f"ready {os.getpid()}")
        while not stop_event.wait(STATUS_EVERY):
            _write_figures(gangadir, monitor, started, last["polled"])
        _write_figures(gangadir, monitor, started, last["polled"])
        log.info("monitor daemon %d stopping", os.getpid())
        return 0
    finally:
        heartbeat.stop()
        if session is not None:
            session.close()
        for lock in held:
            lock.release()
        record = read_record(gangadir / PID_NAME)
        if record is not None and record.pid == os.getpid() and record.here:
            (gangadir / PID_NAME).unlink(missing_ok=True)
        os.close(lock_fd)


def _take_server_lock(uri: str, held: list[Any]) -> str:
    """Take the daemon's lock of a repository in PostgreSQL (appended to ``held``); what
    to say when another host's daemon has it."""
    from ganga_like.repository import advisory_locks, postgres

    lock = advisory_locks.AdvisoryLock(uri, advisory_locks.DAEMON_KEY, "daemon")
    if lock.take():
        held.append(lock)
        return ""
    holder = advisory_locks.holder_of(uri, advisory_locks.DAEMON_KEY)
    return (
        f"a monitor daemon already follows the repository {postgres.server_of(uri)}"
        f" ({holder or 'its holder just left; start again'})"
    )


def _write_figures(gangadir: Path, monitor: Any, started: float, polled: int) -> None:
    figures = {
        "pid": os.getpid(),
        "started": started,
        "updated": time.time(),
        "cycles": monitor.cycles,
        "commits": monitor.commits,
        "polled": polled,
        "cpu_seconds": round(monitor.cpu_seconds, 3),
        "lease_held": monitor.lease.held,
        "stale_backends": dict(monitor.stale_backends),
    }
    tmp = gangadir / f".{STATUS_NAME}.{os.getpid()}"
    with contextlib.suppress(OSError):
        write_private(tmp, json.dumps(figures).encode())
        os.replace(tmp, gangadir / STATUS_NAME)


def _sections_as_json(config: ConfigSnapshot) -> dict[str, dict[str, Any]]:
    """Every option of every section of ``config``, by section name."""
    return {
        cls.__name__: {option: getattr(config[cls], option) for option in options(cls)}
        for cls in config
    }


# The settings and configuration the daemon starts with (the notifier's password among
# them) reach it through an unlinked file it inherits, never its command line, which every
# user of the machine can read in ps.
HANDED_FD_OPTION = "--handed-fd"


@contextlib.contextmanager
def _handed_over(values: dict[str, Any]) -> Iterator[int]:
    """An open descriptor of an anonymous private file holding ``values`` as JSON."""
    with tempfile.TemporaryFile() as handed:
        handed.write(json.dumps(values).encode())
        handed.flush()
        yield handed.fileno()


def _read_handed(fd: int) -> dict[str, Any]:
    size = os.fstat(fd).st_size
    try:
        values: dict[str, Any] = json.loads(os.pread(fd, size, 0))
    finally:
        os.close(fd)
    return values


def _config_from_json(given: dict[str, Any]) -> ConfigSnapshot:
    """The snapshot :func:`_sections_as_json` described: the daemon's own configuration
    with those values (a section the daemon does not know is left out)."""
    known = {cls.__name__: cls for cls in all_sections()}
    values = {known[name]: section for name, section in given.items() if name in known}
    return store.snapshot().replaced(values)


def _settings_from_json(fields: dict[str, Any]) -> Settings:
    known = {f.name for f in dataclasses.fields(Settings)}
    values = {k: v for k, v in fields.items() if k in known}
    values["gangadir"] = Path(values["gangadir"])
    return Settings(**values)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m ganga_like.runtime.monitoring.daemon start|stop|status [GANGADIR]"
    if not args or args[0] not in ("start", "stop", "status", "run"):
        print(usage, file=sys.stderr)
        return 2
    command = args[0]
    if command == "run":
        logging.basicConfig(
            level=logging.INFO,
            stream=sys.stderr,
            format="%(asctime)s %(process)d %(levelname)s %(message)s",
        )
        ready_fd = int(args[args.index("--ready-fd") + 1]) if "--ready-fd" in args else -1
        settings = Settings(gangadir=Path(args[1]), repository_mode="shared")
        config = None
        if HANDED_FD_OPTION in args:
            handed = _read_handed(int(args[args.index(HANDED_FD_OPTION) + 1]))
            settings = _settings_from_json(handed["settings"])
            config = _config_from_json(handed["config"])
        return run(settings, ready_fd, config)
    settings = Settings(repository_mode="shared")
    if len(args) > 1:
        settings = dataclasses.replace(settings, gangadir=Path(args[1]))
    try:
        if command == "start":
            pid = start(settings)
            print(f"monitor daemon running, PID {pid}")
        elif command == "stop":
            print(
                "monitor daemon stopped"
                if stop(settings.gangadir)
                else "monitor daemon was not running"
            )
        else:
            print(status(settings.gangadir))
    except GangaError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
