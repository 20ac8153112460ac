"""What every backend does the same way with a (sub)job's run: what it runs, its ``GANGA_*``
environment, its input files copied in, the earlier run's output kept aside when it runs
again, and the reason a wrapper around the program left when it failed."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ganga_like.errors import JobError
from ganga_like.model.interfaces import IFile, JobPaths, RunSpec
from ganga_like.model.job import Job
from ganga_like.private import copy_private, make_private_dirs

__all__ = [
    "FAILURE_NOTE",
    "keep_earlier_output",
    "read_failure_note",
    "record_outputs",
    "run_environment",
    "run_spec",
    "stage_inputs",
]

# Left in the work directory by a wrapper around the program (``RunSpec.wrapper``) that
# failed (a transfer): JSON with the ``reason`` and the program's ``exit_code`` (null when
# it did not run). Its twin is in the Local runner's protocol, which imports nothing of ours.
FAILURE_NOTE = "__ganga_failure__.json"


def run_spec(job: Job, paths: JobPaths, stage: bool = True) -> RunSpec:
    """What the backend runs for ``job``: its application's command, plus the job's input
    files to stage and its output files to collect.

    ``stage``: write the files the application generates for the run (submission); a
    preview passes False and writes nothing."""
    application = job.application
    if stage:
        application.write_inputs(job, paths)
    spec: RunSpec = application.prepare(job, paths)
    # The stored values, not the attributes: this runs once per subjob, and most have
    # no files, whose defaults a read would build each time.
    stored = job.stored()
    output_files: tuple[IFile, ...] = stored.get("outputfiles", ())
    input_files: tuple[IFile, ...] = stored.get("inputfiles", ())
    outputs = tuple(f.output_pattern() for f in output_files if not f.remote)
    inputs = tuple(f.input_path() for f in input_files if not f.remote)
    if outputs or inputs:
        spec = RunSpec(spec.argv, spec.env, spec.inputs + inputs, spec.output_patterns + outputs)
    dataset = stored.get("inputdata")
    remote_in = [f for f in input_files if f.remote]
    if dataset is not None:
        remote_in.extend(dataset.remote_files())
    remote_out = [f for f in output_files if f.remote]
    if remote_in or remote_out:
        spec = _wrapped(job, spec, remote_in, remote_out)
    return spec


def _wrapped(job: Job, spec: RunSpec, inputs: list[IFile], outputs: list[IFile]) -> RunSpec:
    """``spec`` run by the program of the remote files' kind, which transfers them."""
    kinds = {type(f) for f in (*inputs, *outputs)}
    if len(kinds) > 1:
        names = ", ".join(sorted(k.__name__ for k in kinds))
        raise JobError(f"job {job.fqid}: remote files of one kind per job, not {names}")
    return kinds.pop().wrap_run(job, spec, inputs, outputs)


def read_failure_note(workdir: str) -> tuple[str, int | None] | None:
    """The reason and program exit code a failed wrapper left in ``workdir``, if any."""
    try:
        with open(os.path.join(workdir, FAILURE_NOTE), encoding="utf-8") as handle:
            note = json.load(handle)
        reason, code = note["reason"], note["exit_code"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(reason, str) or not (code is None or isinstance(code, int)):
        return None
    return reason, code


def record_outputs(job: Job, workspace: str) -> None:
    """Once ``job`` ended: its output files as the run left them (a remote file's
    destinations filled in when it completed, none when it did not). A job whose files
    changed then holds its own list, no longer its master's."""
    # The stored value, not the attribute: the monitor asks this of every job that ends,
    # and most have no output files, whose default a read would build each time.
    files: tuple[IFile, ...] = job.stored().get("outputfiles", ())
    if not files or not any(f.remote for f in files):
        return
    master = job.master
    top = f"{job.id}" if master is None else f"{master.id}/{job.id}"
    output_dir = os.path.join(workspace, top, "output")
    recorded = tuple(f.recorded(job, output_dir) if f.remote else f for f in files)
    if any(new is not old for new, old in zip(recorded, files, strict=True)):
        job.outputfiles = recorded


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
