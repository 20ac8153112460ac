"""What every backend does the same way with a (sub)job's run: its ``GANGA_*`` environment,
and the earlier run's output kept aside when it runs again."""

from __future__ import annotations

import os

from ganga_like.model.interfaces import RunSpec
from ganga_like.model.job import Job

__all__ = ["keep_earlier_output", "run_environment"]


def run_environment(job: Job, spec: RunSpec) -> dict[str, str]:
    """The application's variables, and the ``GANGA_*`` ones that name the (sub)job."""
    master = job.master
    env = dict(spec.env)
    env.update(
        GANGA_JOB_ID=str(job.id),
        GANGA_FQID=job.fqid,
        GANGA_MASTER_ID=str(master.id) if master is not None else "",
        GANGA_SUBJOB_ID=str(job.id) if master is not None else "",
    )
    return env


def keep_earlier_output(root: str, submit_count: int) -> str:
    """``root/output``; on a resubmission the earlier run's output is renamed
    ``output.<n>`` and kept beside the new one."""
    output = os.path.join(root, "output")
    if submit_count > 1 and os.path.exists(output):
        os.rename(output, os.path.join(root, f"output.{submit_count - 1}"))
    return output
