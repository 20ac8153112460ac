"""``JobOutput(job, pattern, each=False)``: a dataset made of another job's output files.

The job is stored by fqid, as ``after=`` stores it (a job never holds another), and a job
given such a dataset waits for it (``ganga_like.runtime.workflow.outputs``). Until its
condition holds the dataset has no files; then ``files`` are the output files of the
upstream's completed (sub)jobs that match ``pattern``, and the job is split and submitted
as any other. With ``each=True`` the downstream job grows one subjob per completed
upstream subjob while the upstream runs; each such subjob's dataset names the upstream
subjob it came from (``source``) and its files.
"""

from __future__ import annotations

from typing import Any, ClassVar

import traitlets

from ganga_like.model.dependencies import fqid_of
from ganga_like.model.glob_overlap import globs_overlap
from ganga_like.model.interfaces import IDataset
from ganga_like.model.text import Text

__all__ = ["ALWAYS_WRITTEN", "JobOutput", "UpstreamJob", "pattern_can_match"]

# What every run leaves in its output directory, whatever its output files say.
ALWAYS_WRITTEN = ("stdout", "stderr")


class UpstreamJob(traitlets.TraitType[str, Any]):
    """One job or subjob (a GPI job, a stored one, or its id), stored as its fqid."""

    default_value = ""
    info_text = "a job, a subjob or an id"

    def validate(self, obj: Any, value: Any) -> str:
        return fqid_of(value)


class JobOutput(IDataset):
    """The output files of ``job`` matching ``pattern`` (a glob such as ``"*.root"``), as
    a job's ``inputdata``; ``each=True``: one subjob per completed subjob of ``job``,
    made as they complete."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "job": UpstreamJob(help="The job (or subjob) whose outputs these are, by id."),
        "pattern": Text(
            what="a glob pattern such as '*.root'",
            empty=False,
            help="Which of its output files: a name or glob pattern, e.g. '*.root'.",
        ),
        "each": traitlets.Bool(
            False,
            help="One subjob per completed subjob of the job, made while it runs (a "
            "streaming map), instead of one job over all its outputs once it ended.",
        ),
        "files": traitlets.List(
            traitlets.Unicode(),
            help="The files found (empty until what it waits for has ended as asked).",
        ).tag(protected=True, copyable=False),
        "source": traitlets.Unicode(
            "", help="The upstream subjob these files came from (a streamed subjob's)."
        ).tag(protected=True, copyable=False),
    }
    _positional = ("job", "pattern", "each")

    job: str
    pattern: str
    each: bool
    files: tuple[str, ...]
    source: str

    def file_names(self) -> list[str]:
        return list(self.files)


def pattern_can_match(pattern: str, output_patterns: list[str]) -> bool:
    """Whether a file matching ``pattern`` can be among the outputs of a job whose output
    files are ``output_patterns`` (besides what every run writes)."""
    return any(globs_overlap(pattern, out) for out in (*output_patterns, *ALWAYS_WRITTEN))
