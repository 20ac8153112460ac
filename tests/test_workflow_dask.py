"""A three-stage chain on Dask (the gangadir's own cluster), submitted by a script that
exits at once: the cluster belongs to the gangadir, not to the script's session, so the
first stage runs on after the script is gone; the monitor daemon alone completes the chain,
each later stage starting a new cluster when the last one left once idle; no stage is
submitted twice (their event logs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")

from ganga_like_dask import default_cluster

from .test_cli import ganga
from .test_dask_default_cluster import CONFIG, _alive
from .test_workflow_daemon import chain_script, env, statuses, submits  # noqa: F401 (the fixture)
from .waiting import wait_for

CHAIN = chain_script("Dask()", 2)


@pytest.fixture
def dask_env(env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:  # noqa: F811
    """The daemon test's environment, with a small cluster that leaves 2 s after idling;
    the first stage's gate is opened at the end whatever happened (nothing left waiting)."""
    config = Path(env["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG)
    yield env
    (tmp_path / "gate").touch()


def test_a_chain_on_dask_outlives_the_script_that_submitted_it_and_the_daemon_ends_it(
    dask_env: dict[str, str], gangadir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "chain.py"
    script.write_text(CHAIN)
    gate = tmp_path / "gate"
    done = ganga([str(script), str(gate)], dask_env, timeout=180)
    assert done.returncode == 0, done.stderr
    a, b, m = (int(word) for word in done.stdout.split())
    # The script is gone; the cluster its submission started is not, nor the first stage.
    record = default_cluster.alive_record(gangadir)
    assert record is not None and _alive(record.pid)
    shown = statuses(dask_env)
    assert shown[a] in ("submitted", "running") and (shown[b], shown[m]) == ("waiting", "waiting")

    assert ganga(["monitor", "start"], dask_env).returncode == 0
    wait_for(lambda: statuses(dask_env)[a] == "running", 120, "the first stage to run")
    gate.touch()
    wait_for(lambda: statuses(dask_env)[m] == "completed", 240, "the daemon to end the chain")
    assert statuses(dask_env) == {a: "completed", b: "completed", m: "completed"}
    assert [submits(dask_env, j) for j in (a, b, m)] == [1, 1, 1]
