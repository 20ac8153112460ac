"""What every backend does the same way with a (sub)job's run: what it runs, its ``GANGA_*``
environment, its input files copied in, and the earlier run's output kept aside when it
runs again."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ganga_like.model.interfaces import JobPaths, RunSpec
from ganga_like.model.job import Job
from ganga_like.private import copy_private, make_private_dirs

__all__ = ["keep_earlier_output", "run_environment", "run_spec", "stage_inputs"]


def run_spec(job: Job, paths: JobPaths, stage: bool = True) -> RunSpec:
    """What the backend runs for ``job``: its application's command, plus the job's input
    files to stage and its output files to collect.

    ``stage``: write the files the application generates for the run (submission); a
    preview passes False and writes nothing."""
    application = job.application
    if stage:
        application.write_inputs(job, paths)
    spec: RunSpec = application.prepare(job, paths)
    outputs = tuple(f.output_pattern() for f in job.outputfiles)
    inputs = tuple(f.input_path() for f in job.inputfiles)
    if outputs or inputs:
        spec = RunSpec(spec.argv, spec.env, spec.inputs + inputs, spec.output_patterns + outputs)
    return spec


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


def stage_inputs(root: str, inputs: Sequence[str]) -> list[str]:
    """The input files copied into ``root/input``; their paths there. Copies, never
    links: a program writing to its input must not change the user's file."""
    if not inputs:
        return []
    input_dir = os.path.join(root, "input")
    make_private_dirs(input_dir)
    staged = []
    for source in inputs:
        target = os.path.join(input_dir, os.path.basename(source))
        copy_private(source, target)
        staged.append(target)
    return staged
