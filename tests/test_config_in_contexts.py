"""What configuration a plugin's context carries: its own sections, as the session has
them now; a runtime change reaches the next submission and the next poll as a new
snapshot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from traitlets.config import Configurable

from ganga_like import ArgSplitter, Executable, Job, config
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.config.store import options
from ganga_like.errors import ConfigError
from ganga_like.model.interfaces import IBackend, PollContext, PostProcessContext
from ganga_like.runtime.session import Session
from ganga_like_dask.backend import Dask as DaskBackend
from ganga_like_dask.settings import Dask as DaskSection
from ganga_like_local.backend import Local as LocalBackend
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client
from ganga_like_slurm.backend import Slurm as SlurmBackend
from ganga_like_slurm.settings import Slurm as SlurmSection
from ganga_like_std.notifier import Notifier
from ganga_like_std.notifier_settings import Notifier as NotifierSection

from .waiting import wait_for

SECRET = "s3cret-smtp-password"
BACKENDS: list[tuple[type[IBackend], type[Configurable]]] = [
    (LocalBackend, LocalSection),
    (SlurmBackend, SlurmSection),
    (DaskBackend, DaskSection),
]


def _values(snapshot: ConfigSnapshot) -> list[Any]:
    return [getattr(snapshot[cls], option) for cls in snapshot for option in options(cls)]


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """What the Local backend was handed: the contexts of its submissions and polls, and
    the limits the runner was started with (each call goes on to the real one)."""
    found: dict[str, list[Any]] = {"submit": [], "poll": [], "runner": []}
    submit_bulk, poll, start = LocalBackend.submit_bulk, LocalBackend.poll, runner_client.submit

    def record_submit(self: LocalBackend, ctx: Any, *args: Any, **kwargs: Any) -> Any:
        found["submit"].append(ctx)
        return submit_bulk(self, ctx, *args, **kwargs)

    def record_poll(cls: type[LocalBackend], ctx: PollContext, refs: Any) -> Any:
        found["poll"].append(ctx.config)
        return poll.__func__(cls, ctx, refs)  # type: ignore[attr-defined]

    def record_runner(*args: Any, **kwargs: Any) -> Any:
        found["runner"].append((kwargs["max_concurrent"], kwargs["idle_exit_seconds"]))
        return start(*args, **kwargs)

    monkeypatch.setattr(LocalBackend, "submit_bulk", record_submit)
    monkeypatch.setattr(LocalBackend, "poll", classmethod(record_poll))
    monkeypatch.setattr(runner_client, "submit", record_runner)
    yield found


def test_a_backend_context_holds_its_own_section_and_never_the_notifiers_password(
    session: Session, seen: dict[str, list[Any]]
) -> None:
    config.Notifier.password = SECRET
    assert session.config[NotifierSection].password == SECRET  # the session has it...
    j = Job(application=Executable(exe="/bin/true"), backend=LocalBackend())
    j.submit()
    assert j.wait(timeout=60) == "completed"
    # ...the contexts the Local backend was handed hold the Local section alone.
    [submitted] = seen["submit"]
    assert list(submitted.config) == [LocalSection]
    assert seen["poll"] and all(list(polled) == [LocalSection] for polled in seen["poll"])
    for backend, section in BACKENDS:
        for config_held in (
            session.submit_context(backend).config,
            session.monitor._context(backend.__name__, backend).config,
        ):
            assert list(config_held) == [section]
            assert NotifierSection not in config_held and SECRET not in _values(config_held)


def test_the_notifier_alone_is_given_its_section(session: Session) -> None:
    from ganga_like.runtime.postprocessing import _for
    from ganga_like_std.postprocessors import TextMerger

    config.Notifier.password = SECRET
    plain = PostProcessContext(Path("."))
    notifier = _for(Notifier(address="me@example.org"), plain, session.config)
    assert list(notifier.config) == [NotifierSection]
    assert notifier.config[NotifierSection].password == SECRET
    assert list(_for(TextMerger(files=["out"]), plain, session.config).config) == []


def test_a_runtime_change_reaches_the_next_submission_and_the_next_poll(
    session: Session, seen: dict[str, list[Any]], tmp_path: Path
) -> None:
    before = session.config
    config.Local.max_concurrent = 1
    config.Local.idle_exit = 7.5
    # A new snapshot in place of the old, which stays as it was.
    assert session.config is not before
    assert before[LocalSection].max_concurrent == 2
    assert session.config[LocalSection].max_concurrent == 1
    gate = tmp_path / "gate"
    j = Job(
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[["-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"]] * 2),
        backend=LocalBackend(),
    )
    j.submit()
    try:
        assert seen["runner"] == [(1, 7.5)]  # the runner was started with the new limits
        polls = len(seen["poll"])
        config.Local.idle_exit = 9.0
        wait_for(lambda: len(seen["poll"]) > polls, 30, "a poll after the change")
        assert seen["poll"][-1][LocalSection].idle_exit == 9.0
    finally:
        gate.touch()
    assert j.wait(timeout=60) == "completed"


def test_a_change_the_session_refuses_leaves_its_snapshot_as_it_was(session: Session) -> None:
    before = session.config
    with pytest.raises(ConfigError, match=r"Local\.max_concurrent"):
        config.Local.max_concurrent = 0
    assert session.config is before
