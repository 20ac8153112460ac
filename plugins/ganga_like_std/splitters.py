"""Splitters: how one job becomes many subjobs.

Each returns one dict per subjob mapping a dotted attribute path to its value; the runtime
builds and validates the subjobs from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import JobError
from ganga_like.model.interfaces import ISplitter
from ganga_like.model.job import Job
from ganga_like_std.shared_traits import SplitArg

__all__ = ["ArgSplitter", "DatasetSplitter", "GenericSplitter"]


class ArgSplitter(ISplitter):
    """One subjob per argument list: ``ArgSplitter(args=[["1"], ["2"]])``.

    Each list becomes the subjob's ``application.args``, validated by the application:
    Executable turns numbers into strings, PythonFunction calls its function with them."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "args": traitlets.List(traitlets.List(SplitArg()), help="One argument list per subjob."),
    }
    _positional = ("args",)

    def variations(self, job: Job) -> list[dict[str, Any]]:
        return list(self.iter_variations(job))

    def iter_variations(self, job: Job) -> Iterator[dict[str, Any]]:
        return ({"application.args": list(a)} for a in self.args)


class GenericSplitter(ISplitter):
    """One subjob per value of ``attribute`` (a dotted path such as ``application.args``),
    or, with ``multi_attrs``, per position across several attributes at once."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "attribute": traitlets.Unicode("", help="Dotted attribute path to vary."),
        "values": traitlets.List(help="The values, one per subjob."),
        "multi_attrs": traitlets.Dict(
            key_trait=traitlets.Unicode(),
            value_trait=traitlets.List(),
            help="Attribute path -> list of values; all lists the same length.",
        ),
    }

    def variations(self, job: Job) -> list[dict[str, Any]]:
        if self.attribute and self.multi_attrs:
            raise JobError("GenericSplitter: give either attribute/values or multi_attrs, not both")
        if self.attribute:
            return [{self.attribute: v} for v in self.values]
        if not self.multi_attrs:
            raise JobError("GenericSplitter: set attribute and values, or multi_attrs")
        lengths = {name: len(vals) for name, vals in self.multi_attrs.items()}
        if len(set(lengths.values())) != 1:
            raise JobError(f"GenericSplitter.multi_attrs: value lists differ in length: {lengths}")
        names = list(self.multi_attrs)
        count = next(iter(lengths.values()))
        return [{n: self.multi_attrs[n][i] for n in names} for i in range(count)]


class DatasetSplitter(ISplitter):
    """Splits the job's ``inputdata`` into subjobs of ``files_per_subjob`` files, using
    at most ``max_files`` files in all."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "files_per_subjob": traitlets.Int(1, min=1, help="Files given to each subjob."),
        "max_files": traitlets.Int(
            None, allow_none=True, min=1, help="Use at most this many files (None: all)."
        ),
    }

    def variations(self, job: Job) -> list[dict[str, Any]]:
        dataset = job.inputdata
        if dataset is None:
            raise JobError("DatasetSplitter needs job.inputdata (e.g. GangaDataset(files=...))")
        files = list(dataset.files)
        if self.max_files is not None:
            files = files[: self.max_files]
        size = self.files_per_subjob
        result: list[dict[str, Any]] = []
        for start in range(0, len(files), size):
            chunk = dataset._copy()
            chunk._assign("files", files[start : start + size])
            result.append({"inputdata": chunk})
        return result
