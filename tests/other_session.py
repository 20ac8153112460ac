"""Another session, in a process of its own, that changes a repository when told to.

Run as ``python -m tests.other_session`` with ``GANGA_DIR`` set: it opens the repository
in the default (shared) mode with no monitoring thread, then reads one JSON command a
line from stdin, applies it in a committed transaction and answers ``ok JOBS FOLLOWED
INTENTS`` (how many of each the repository now holds) or ``error: ...`` on stdout.
:class:`OtherSession` drives it from a test.

Commands (``index`` is a position in the registry's current ids, taken modulo their
number; nothing happens when there is no job):

* ``["nothing"]`` (the other session did nothing between two listings);
* ``["create", name, status, [subjob statuses]]`` a job (a master when it has subjobs);
* ``["rename", index, name]`` through the GPI, which keeps the name index right;
* ``["remove", index]``;
* ``["follow", index]`` / ``["unfollow", index]`` put the job in (take it out of) the
  monitor's index of active jobs, under a backend that is not installed (a monitoring
  cycle then changes nothing);
* ``["intent", index]`` / ``["clear_intent", index]`` record (drop) a submission intent
  owned by this live process, which recovery leaves alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from ganga_like.model.status import Status

# The way to each status from new, for a job without subjobs.
PATHS = {
    "new": [],
    "submitted": [Status.SUBMITTED],
    "running": [Status.SUBMITTED, Status.RUNNING],
    "completed": [Status.SUBMITTED, Status.RUNNING, Status.COMPLETED],
    "failed": [Status.SUBMITTED, Status.RUNNING, Status.FAILED],
    "killed": [Status.SUBMITTED, Status.KILLED],
}
STATUSES = list(PATHS)
MISSING_BACKEND = "NoSuchBackend"


class OtherSession:
    """The other process, driven from a test."""

    def __init__(self, gangadir: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.other_session"],
            env={**env, "GANGA_DIR": str(gangadir)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )

    def do(self, *command: Any) -> tuple[int, int, int]:
        """Apply ``command``; (jobs, jobs followed, submission intents) after it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().split()
        assert answer[:1] == ["ok"], f"{command}: {answer or 'the other session died'}"
        jobs, followed, intents = (int(n) for n in answer[1:])
        return jobs, followed, intents

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _serve() -> None:
    import psutil

    from ganga_like import Executable, Job, jobs
    from ganga_like.gpi.job import unwrap_job
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like.runtime.submission.splitting import build_subjobs

    session = open_session(Settings(gangadir=Path(os.environ["GANGA_DIR"]), monitoring=False))
    started = psutil.Process().create_time()

    def job_at(index: int) -> Any:
        ids = list(session.registry().jobs.keys())
        return session.registry().get(ids[index % len(ids)]) if ids else None

    def create(name: str, status: str, subjob_statuses: list[str]) -> None:
        job = unwrap_job(Job(name=name, application=Executable(exe="true")))

        def shape() -> None:
            if subjob_statuses:
                job.change_status(Status.SUBMITTED, "test")
                variations = [{"application.args": [str(k)]} for k in subjob_statuses]
                job.attach_subjobs(build_subjobs(job, variations))
                for sj, label in zip(job.iter_subjobs(), subjob_statuses, strict=True):
                    for step in PATHS[label]:
                        sj.change_status(step, "test")
            else:
                for step in PATHS[status]:
                    job.change_status(step, "test")
            session.registry().reindex(job)

        session.repo.in_transaction(shape)

    def change(command: list[Any]) -> None:
        op, *args = command
        if op == "nothing":
            return
        if op == "create":
            create(*args)
            return
        job = job_at(args[0])
        if job is None:
            return
        registry = session.registry()
        if op == "rename":
            jobs(job.id).name = args[1]
        elif op == "remove":
            jobs(job.id).remove()
        elif op == "follow":
            session.repo.in_transaction(
                lambda: registry.active.__setitem__((job.id, -1), (MISSING_BACKEND, 1, {}))
            )
        elif op == "unfollow":
            session.repo.in_transaction(lambda: registry.active.pop((job.id, -1), None))
        elif op == "intent":
            intent = ("submit", 0, os.getpid(), started)
            session.repo.in_transaction(lambda: registry.submitting.__setitem__(job.id, intent))
        elif op == "clear_intent":
            session.repo.in_transaction(lambda: registry.submitting.pop(job.id, None))
        else:
            raise ValueError(f"unknown command {op!r}")

    try:
        for line in sys.stdin:
            try:
                change(json.loads(line))
            except Exception as exc:
                print(f"error: {type(exc).__name__}: {exc}", flush=True)
            else:
                registry = session.registry()
                counts = (len(registry.jobs), len(registry.active), len(registry.intents()))
                print("ok", *counts, flush=True)
    finally:
        close_session()


if __name__ == "__main__":
    _serve()
