"""Jobs whose ``inputdata`` is ``JobOutput(job, pattern)``: what they wait for, the checks
made when the dataset is given and at submit, and its files found once the condition
holds.

A job with such a dataset waits for the dataset's job (added to ``after`` at submit,
unless ``after`` names it already); ``when`` and ``allow_failed`` apply as to any
dependency. When the condition holds the dataset's files are found, in the transaction
that hands the job over to submission (``driver.py``) or, when it holds at ``submit()``
already, in the one that records the submit: the output files matching the pattern of
each completed subjob of the upstream (in subjob order), or of the upstream itself when
it is not split. A job whose dataset finds no file is skipped, naming why.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Iterator

from ganga_like.errors import JobError
from ganga_like.model.dependencies import fqid_parts
from ganga_like.model.job import Job
from ganga_like.model.job_output import JobOutput, pattern_can_match
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry

__all__ = [
    "check_before_waiting",
    "check_dataset",
    "dataset_of",
    "matching_files",
    "no_file_cause",
    "output_dir",
    "resolve",
    "shown",
]

_DONE = (Status.COMPLETED, Status.COMPLETED_FROZEN)


def dataset_of(job: Job) -> JobOutput | None:
    """The job's ``JobOutput`` dataset, if it has one."""
    dataset = job.stored().get("inputdata")
    return dataset if isinstance(dataset, JobOutput) else None


def shown(dataset: JobOutput) -> str:
    """The dataset as its refusals name it."""
    return f"JobOutput({dataset.job}, {dataset.pattern!r})"


def check_dataset(registry: Registry, job: Job | None, dataset: JobOutput) -> None:
    """JobError (one line) unless ``dataset``'s job exists, is not ``job`` itself, and
    has output files that can match its pattern."""
    job_id, sub = fqid_parts(dataset.job)
    own = None if job is None or job._p_jar is None else job.id
    if own is not None and job_id == own:
        raise JobError(f"{shown(dataset)}: a job cannot read its own outputs")
    top = registry.get(job_id)
    if not isinstance(top, Job):
        raise JobError(f"{shown(dataset)}: job {dataset.job} does not exist (removed?)")
    upstream = top if sub is None else top.find_subjob(sub)
    if upstream is None:
        raise JobError(f"{shown(dataset)}: job {job_id} has no subjob {sub}")
    patterns = [f.output_pattern() for f in upstream.outputfiles if not f.remote]
    if not pattern_can_match(dataset.pattern, patterns):
        listed = ", ".join(repr(p) for p in patterns) or "none"
        raise JobError(
            f"{shown(dataset)}: job {dataset.job}'s output files ({listed}, with stdout "
            f"and stderr) cannot match {dataset.pattern!r}"
        )


def check_before_waiting(registry: Registry, job: Job) -> None:
    """At ``submit()`` of ``job``, in the transaction that records it: its dataset checked
    again (its job may have been removed since), and that job added to what ``job``
    waits for, unless ``after`` names it already."""
    dataset = dataset_of(job)
    if dataset is None:
        return
    check_dataset(registry, job, dataset)
    if dataset.job not in job.after:
        job._assign("after", (*job.after, dataset.job))


def output_dir(workspace: str, fqid: str) -> str:
    """Where the run of (sub)job ``fqid`` left its output files (read from its id alone:
    no job is loaded)."""
    return os.path.join(workspace, fqid.replace(".", os.sep), "output")


def matching_files(workspace: str, fqid: str, pattern: str) -> list[str]:
    """The output files of (sub)job ``fqid``'s run matching ``pattern``, sorted: what
    ``glob`` finds in its output directory that is a file."""
    directory = output_dir(workspace, fqid)
    if os.sep in pattern:
        found = glob.glob(os.path.join(glob.escape(directory), pattern))
        return sorted(path for path in found if os.path.isfile(path))
    # One directory read, file types from it: a streaming map asks this once per piece,
    # and glob then a stat per name cost it twice as much.
    hidden = pattern.startswith(".")  # as glob: a leading dot is matched explicitly
    try:
        with os.scandir(directory) as entries:
            names = [
                entry.name
                for entry in entries
                if (hidden or not entry.name.startswith(".")) and entry.is_file()
            ]
    except OSError:
        return []
    return sorted(os.path.join(directory, name) for name in fnmatch.filter(names, pattern))


def _completed(upstream: Job) -> Iterator[Job]:
    """The completed subjobs of a master in id order, or the job itself if completed."""
    if not upstream.is_master:
        if upstream.current_status() in _DONE:
            yield upstream
        return
    labels = upstream.subjob_statuses()
    for index, sj in upstream.subjob_items():
        label = labels[index] if labels is not None else sj.status
        if Status.parse(label) in _DONE:
            yield sj


def no_file_cause(dataset: JobOutput) -> str:
    return f"upstream {dataset.job} left no output file matching {dataset.pattern!r}"


def resolve(registry: Registry, workspace: str, job: Job) -> None:
    """Give ``job``'s dataset the files it stands for, now that its condition holds
    (in the caller's transaction); JobError (one line) when there is none."""
    dataset = dataset_of(job)
    if dataset is None or dataset.each:
        return
    job_id, sub = fqid_parts(dataset.job)
    upstream = registry.lookup(job_id, sub)
    if not isinstance(upstream, Job):
        raise JobError(f"{shown(dataset)}: job {dataset.job} does not exist (removed?)")
    files = [
        path
        for done in _completed(upstream)
        for path in matching_files(workspace, done.fqid, dataset.pattern)
    ]
    if not files:
        raise JobError(f"job {job.fqid}: {no_file_cause(dataset)}")
    dataset._assign("files", files)
