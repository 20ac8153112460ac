"""The backends the conformance suite (tests/test_backend_conformance.py) runs against.

Every backend must pass that suite. Adding a backend is one entry in ``BACKENDS``: how to
build its GPI object for a test, the session settings that make its waits short, the pytest
marks it needs, and a check that skips (saying why) when what it runs on is not there.

A child process (the recovery test's submitter) finds its backend here by name, through
``open_case_session``, so that it runs with the same settings as the test.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ganga_like.runtime.session import Session, open_session
from ganga_like.runtime.settings import Settings


@dataclass(frozen=True)
class BackendCase:
    name: str
    # The GPI backend object a test's jobs use (called once per job).
    make: Callable[[], Any]
    # Settings fields for the session, and keys added to its backend settings.
    settings: dict[str, Any] = field(default_factory=dict)
    backend_settings: dict[str, Any] = field(default_factory=dict)
    marks: tuple[pytest.MarkDecorator, ...] = ()
    # Raises pytest's skip when the backend cannot run here (called in the test).
    available: Callable[[], None] = lambda: None
    # Ends what a test left running: given the gangadir and the backend ids of the
    # subjobs still active when its session closed.
    leftovers: Callable[[Path, list[str]], None] = lambda gangadir, ids: None


class CaseSettings(Settings):
    """Settings whose backend settings carry a case's extra keys."""

    def __init__(self, extra: dict[str, Any], **fields: Any) -> None:
        super().__init__(**fields)
        self.extra = dict(extra)

    def backend_settings(self) -> dict[str, Any]:
        return {**super().backend_settings(), **self.extra}


def _local() -> Any:
    from ganga_like import Local

    return Local()


def _slurm() -> Any:
    from ganga_like import Slurm

    return Slurm(partition="debug")


def _slurm_pilot() -> Any:
    from ganga_like import Pilot, Slurm

    return Slurm(partition="debug", pilot=Pilot(cores=4, walltime="10"))


def _dask() -> Any:
    from ganga_like import Dask

    return Dask(address=os.environ[DASK_ADDRESS])


# The address of the scheduler the Dask case runs against: set by ``_dask_available`` in the
# test process (which starts a scheduler and two workers once, for all its tests) and
# inherited by the child processes a test starts.
DASK_ADDRESS = "GANGA_LIKE_TEST_DASK_ADDRESS"


def _dask_available() -> None:
    """Skip, saying why, unless ``distributed`` is installed; start the test cluster."""
    pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")
    if not os.environ.get(DASK_ADDRESS):
        from .dask_cluster import start_shared_cluster

        os.environ[DASK_ADDRESS] = start_shared_cluster().address


def _dask_leftovers(gangadir: Path, ids: list[str]) -> None:
    from .dask_cluster import kill_keys

    kill_keys(os.environ[DASK_ADDRESS], [i for i in ids if i])


def _local_leftovers(gangadir: Path, ids: list[str]) -> None:
    from ganga_like_local import runner_client
    from ganga_like_local.backend import runner_dir

    runner_client.stop(runner_dir(gangadir))  # and with it whatever it still runs


def _slurm_leftovers(gangadir: Path, ids: list[str]) -> None:
    from ganga_like_slurm import commands

    arrays = sorted({i.split("_")[0] for i in ids if i})
    if arrays:
        commands.scancel(arrays)


def _slurm_available() -> None:
    """Skip, saying why, unless a Slurm controller answers (as tests/test_slurm_backend.py)."""
    from ganga_like_slurm import commands

    if shutil.which("sbatch") is None:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not commands.ping():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )


BACKENDS: list[BackendCase] = [
    BackendCase(
        "Local",
        _local,
        settings={"local_max_concurrent": 4, "local_idle_exit": 5.0},
        leftovers=_local_leftovers,
    ),
    BackendCase(
        "Slurm",
        _slurm,
        settings={"monitor_max_interval": 0.5},
        # Short waits, so that each poll rule concludes within a test's patience.
        backend_settings={
            "slurm_poll_interval": 0.3,
            "slurm_vanish_seconds": 3.0,
            "slurm_vanish_cycles": 3,
            "slurm_final_grace_seconds": 30.0,
            "slurm_submit_attempts": 2,
            "slurm_submit_backoff": 0.5,
            "slurm_submit_patience": 5.0,
            "slurm_command_timeout": 30.0,
        },
        marks=(pytest.mark.slurm,),
        available=_slurm_available,
        leftovers=_slurm_leftovers,
    ),
    BackendCase(
        "SlurmPilot",
        _slurm_pilot,
        settings={"monitor_max_interval": 0.5},
        backend_settings={
            "slurm_poll_interval": 0.3,
            "slurm_vanish_seconds": 3.0,
            "slurm_vanish_cycles": 3,
            "slurm_submit_attempts": 2,
            "slurm_submit_backoff": 0.5,
            "slurm_command_timeout": 30.0,
        },
        marks=(pytest.mark.slurm,),
        available=_slurm_available,
        leftovers=_slurm_leftovers,
    ),
    BackendCase(
        "Dask",
        _dask,
        settings={"monitor_max_interval": 0.5},
        backend_settings={"dask_timeout": 5.0},
        available=_dask_available,
        leftovers=_dask_leftovers,
    ),
]

CASES = {case.name: case for case in BACKENDS}


def case_params() -> list[Any]:
    """One pytest param per backend, with its id and marks."""
    return [pytest.param(case, id=case.name, marks=case.marks) for case in BACKENDS]


def open_case_session(case: BackendCase, gangadir: Path, **fields: Any) -> Session:
    """Open this process's session on ``gangadir`` with the case's settings."""
    return open_session(
        CaseSettings(case.backend_settings, gangadir=gangadir, **{**case.settings, **fields})
    )
