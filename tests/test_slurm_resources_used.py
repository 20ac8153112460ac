"""What each Slurm subjob used (peak memory, CPU, elapsed time), read from sacct in the
monitor's own sacct call: sacct's text read (pure), then real jobs on a real Slurm that
allocate a known amount of memory and burn known CPU, including the accounting of their
steps arriving after their end."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ganga_like import ArgSplitter, Executable, Job, Resources, Slurm
from ganga_like.gpi.proxy import unwrap
from ganga_like.runtime.session import Session
from ganga_like_slurm import slurm_commands
from ganga_like_slurm.accounting import SacctUsage, kibibytes, seconds
from ganga_like_slurm.settings import Slurm as SlurmSection

from .slurm_up import slurm_answers
from .waiting import wait_until

MIB = 1024**2

# sacct -n -P -o JobID,JobIDRaw,State,ExitCode,Reason,Start,End,MaxRSS,UserCPU,SystemCPU,Elapsed
# (Slurm 22.05.8): an element accounted, one whose step has not reached the database yet,
# one still running, and pending ones compressed.
SACCT_WITH_STEPS = """\
7_0|8|COMPLETED|0:0|None|2026-11-29T03:26:28|2026-11-29T03:26:34||00:00.535|00:01.771|00:00:06
7_0.batch|8.batch|COMPLETED|0:0||2026-11-29T03:26:28|2026-11-29T03:26:34|219836K|00:00.535|00:01.771|00:00:06
7_0.extern|8.extern|COMPLETED|0:0||2026-11-29T03:26:28|2026-11-29T03:26:34|1.50M|00:00:00|00:00:00|00:00:06
7_1|9|COMPLETED|0:0|None|2026-11-29T03:26:28|2026-11-29T03:26:34||00:00:00|00:00:00|00:00:06
7_2|10|RUNNING|0:0|None|2026-11-29T03:26:28|Unknown||00:00:00|00:00:00|00:00:06
7_2.batch|10.batch|RUNNING|0:0||2026-11-29T03:26:28|Unknown||00:00:00|00:00:00|00:00:06
7_[3-4]|7|PENDING|0:0|JobArrayTaskLimit|Unknown|Unknown||00:00:00|00:00:00|00:00:00
"""


def test_sacct_durations_and_sizes_are_read_in_seconds_and_kib() -> None:
    assert seconds("00:01.771") == pytest.approx(1.771)
    assert seconds("01:02:03") == 3723
    assert seconds("1-00:00:01") == 86401
    assert seconds("") is None
    assert kibibytes("219836K") == 219836
    assert kibibytes("1.50M") == 1536
    assert kibibytes("2G") == 2 * 1024 * 1024
    assert kibibytes("2048") == 2
    assert kibibytes("") is None


def test_a_job_s_use_is_known_once_one_of_its_steps_has_ended() -> None:
    rows = slurm_commands.parse_sacct(SACCT_WITH_STEPS)
    assert sorted(rows) == ["7_0", "7_1", "7_2", "7_3", "7_4"]  # steps folded in
    assert rows["7_0"].usage == SacctUsage(219836, 0.535, 1.771, 6.0)  # the peak of its steps
    assert rows["7_0"].state == "COMPLETED"
    assert rows["7_1"].state == "COMPLETED" and rows["7_1"].usage is None  # step not there
    assert rows["7_2"].usage is None  # still running
    assert rows["7_4"].usage is None


# -- real Slurm ------------------------------------------------------------------------

FAST: dict[str, Any] = {
    "poll_interval": 0.3,
    "min_poll_interval": 0.2,
    "final_grace_seconds": 30.0,
    "command_timeout": 30.0,
}
SESSION_SETTINGS = {"monitor_max_interval": 0.3}
SESSION_CONFIG = {SlurmSection: FAST}

# Holds $1 MiB for a while and burns $2 CPU seconds. Slurm samples memory every
# --acctg-freq seconds: the job asks for a sample a second and lives long enough.
HUNGRY = (
    "import sys, time\n"
    "block = bytearray(int(sys.argv[1]) * 1024 * 1024)\n"
    "for i in range(0, len(block), 4096): block[i] = 1\n"
    "end = time.process_time() + float(sys.argv[2])\n"
    "while time.process_time() < end: pass\n"
    "time.sleep(1.5)\n"
)


@pytest.fixture
def slurm(session: Session) -> Iterator[Session]:
    if shutil.which("sbatch") is None or not slurm_answers():
        pytest.skip(
            "no Slurm controller answers: start one with scripts/start-slurm.sh "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )
    yield session
    active = [str(data.get("id")) for (_b, _r, data) in session.registry().active.values()]
    if active:
        slurm_commands.scancel({a.split("_")[0] for a in active if a})


def hungry_job(tmp_path: Path, sizes: list[int], cpu: float) -> Job:
    script = tmp_path / "hungry.py"
    script.write_text(HUNGRY)
    return Job(
        application=Executable(exe=sys.executable),
        splitter=ArgSplitter(args=[[str(script), str(mib), str(cpu)] for mib in sizes]),
        backend=Slurm(
            resources=Resources(memory="1G", walltime="10"),
            extra_options=["--acctg-freq=task=1"],
        ),
    )


def used_within(j: Job, timeout: float) -> None:
    """Wait until every subjob's use is recorded (the monitor's cycles record it)."""

    def recorded() -> bool:
        for sj in j.subjobs:
            unwrap(sj)._p_deactivate()  # read what the monitor committed
        return all(sj.resources_used is not None for sj in j.subjobs)

    assert wait_until(recorded, timeout), [sj.resources_used for sj in j.subjobs]


@pytest.mark.slurm
def test_each_subjob_records_the_memory_and_cpu_sacct_accounted_for_it(
    slurm: Session, tmp_path: Path
) -> None:
    j = hungry_job(tmp_path, [150, 300], cpu=2.0)
    j.submit()
    assert j.wait(timeout=180) == "completed"
    used_within(j, 60)
    small, large = (sj.resources_used for sj in j.subjobs)
    assert small is not None and large is not None
    # The block plus Python itself; zeros or a swapped pair cannot pass.
    assert 150 * MIB <= small.max_rss < 250 * MIB, small
    assert 300 * MIB <= large.max_rss < 400 * MIB, large
    for used in (small, large):
        assert 1.9 <= used.cpu <= 8.0, used
        assert used.wall >= 3.0, used  # burn, then sleep 1.5 s
    stats = j.stats()
    assert stats.resources.measured == 2
    assert stats.resources.max_rss == large.max_rss
    assert stats.resources.max_rss_fqid == f"{j.id}.1"
    assert stats.resources.cpu == pytest.approx(small.cpu + large.cpu)
    rows = {row.fqid: row for row in stats.resources.per_subjob}
    assert rows[f"{j.id}.0"].requested.memory == 1024 * MIB
    assert rows[f"{j.id}.0"].requested.walltime == 600
    assert stats.resources.max_memory_share == pytest.approx(large.max_rss / (1024 * MIB))
    assert "of request" in repr(stats)


@pytest.mark.slurm
def test_an_end_accounted_before_its_steps_is_reported_at_once_and_its_use_later(
    slurm: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sacct as it answers while the steps' records are on their way: the allocations'
    # lines only, COMPLETED with no use, until the test lets the steps through.
    real = slurm_commands.sacct
    steps_arrive = threading.Event()
    calls: list[tuple[bool, list[str]]] = []  # (asked for the use, the ids asked about)

    def lagging(job_ids: Any, **kwargs: Any) -> Any:
        calls.append((bool(kwargs.get("usage")), sorted(job_ids)))
        rows = real(job_ids, **kwargs)
        if steps_arrive.is_set():
            return rows
        return {key: replace(row, max_rss_kib=None, step_ended=False) for key, row in rows.items()}

    monkeypatch.setattr(slurm_commands, "sacct", lagging)
    j = hungry_job(tmp_path, [100, 100], cpu=0.5)
    j.submit()
    assert j.wait(timeout=180) == "completed"  # not held back by the missing use
    assert [sj.resources_used for sj in j.subjobs] == [None, None]
    steps_arrive.set()
    used_within(j, 60)
    assert all(sj.resources_used.max_rss >= 100 * MIB for sj in j.subjobs)  # type: ignore[union-attr]
    # The states and the use were asked about the two ended elements only, by name, the
    # use in one call per poll (both followed together), none before they ended.
    array = j.subjobs[0].backend.id.split("_")[0]
    elements = [f"{array}_0", f"{array}_1"]
    assert all(set(ids) <= set(elements) for usage, ids in calls if not usage), calls
    asked_use = [ids for usage, ids in calls if usage]
    assert asked_use and all(set(ids) <= set(elements) for ids in asked_use), calls
    assert set().union(*asked_use) == set(elements)
    # Once both are accounted, sacct is no longer asked.
    done = len(calls)
    slurm.monitor.run_once()
    slurm.monitor.run_once()
    assert len(calls) == done
