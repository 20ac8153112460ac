"""A streaming map, a callback and an Iterate on Dask (the gangadir's own cluster), each
submitted by a script that exits at once and driven by the monitor daemon alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")

from .test_dask_default_cluster import CONFIG
from .test_job_callbacks_daemon import daemon_env, stop_daemon
from .workflow_backends import (
    MODULE,
    MODULE_TEXT,
    callback_script,
    check_callback,
    check_iterate,
    check_stream,
    iterate_script,
    start_daemon,
    stream_script,
    submitted,
)

PATIENCE = 240


@pytest.fixture
def env(env_for: dict[str, str], gangadir: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The daemon's environment, with a small cluster that leaves 2 s after idling."""
    env = daemon_env(env_for, tmp_path, MODULE, MODULE_TEXT)
    env["CALLBACK_MARKS"] = str(tmp_path)
    config = Path(env["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG)
    yield env
    stop_daemon(env, gangadir)


def test_a_streaming_map_on_dask_is_streamed_by_the_daemon_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    a, b = submitted(env, tmp_path, stream_script("Dask()"), [])
    start_daemon(env, [])
    check_stream(env, a, b, PATIENCE)


def test_a_callback_on_a_dask_job_is_run_by_the_daemon_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    (job_id,) = submitted(env, tmp_path, callback_script("Dask()"), [])
    start_daemon(env, [])
    check_callback(env, tmp_path, job_id, PATIENCE)


def test_an_iterate_on_dask_is_converged_by_the_daemon_alone(
    env: dict[str, str], tmp_path: Path
) -> None:
    (fit,) = submitted(env, tmp_path, iterate_script("Dask()"), [])
    start_daemon(env, [])
    check_iterate(env, fit, PATIENCE)
