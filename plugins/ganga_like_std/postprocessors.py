"""Ganga's postprocessors: mergers (TextMerger, CustomMerger) and checkers (FileChecker,
CustomChecker, MetaDataChecker), run once a job has completed (see
``ganga_like.runtime.postprocessing``)."""

from __future__ import annotations

import fnmatch
import gzip
import importlib.util
import os
import tempfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import traitlets

from ganga_like.errors import PostProcessError
from ganga_like.model.interfaces import IPostProcessor, PostProcessContext
from ganga_like.model.job import Job
from ganga_like_std.expressions import MetadataExpression
from ganga_like_std.shared_traits import OutputName, PythonModule, module_problem

# A file read or written as bytes, compressed or not.
_Bytes = gzip.GzipFile | BinaryIO

__all__ = [
    "CheckedJob",
    "CustomChecker",
    "CustomMerger",
    "FileChecker",
    "MetaDataChecker",
    "TextMerger",
]


def _names(directory: Path, patterns: Sequence[str]) -> list[str]:
    """The files of ``directory`` (relative paths) that the names or wildcards match."""
    if not any(c in p for p in patterns for c in "*?["):
        # Plain names (the usual case): no directory walk per subjob.
        return sorted({p for p in patterns if (directory / p).is_file()})
    if not directory.is_dir():
        return []
    found: list[str] = []
    for root, _dirs, files in os.walk(directory):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), directory)
            if any(fnmatch.fnmatchcase(rel, p) for p in patterns):
                found.append(rel)
    return sorted(found)


def _load_function(module: str, function: str) -> Callable[..., Any]:
    """``function`` of the user's file ``module``, loaded afresh (it may have changed)."""
    if not os.path.isfile(module):
        raise PostProcessError(f"module {module} does not exist")
    spec = importlib.util.spec_from_file_location(f"_ganga_pp_{abs(hash(module))}", module)
    if spec is None or spec.loader is None:
        raise PostProcessError(f"cannot load {module} as a Python module")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    found = getattr(loaded, function, None)
    if not callable(found):
        raise PostProcessError(f"{module} has no function {function}()")
    result: Callable[..., Any] = found
    return result


def _check_module(pp: IPostProcessor, function: str) -> None:
    module = pp.module
    if not module:
        raise PostProcessError(
            f"{type(pp).__name__}: set module=... (a file defining {function}())"
        )
    problem = module_problem(module, function)
    if problem is not None:
        raise PostProcessError(f"{type(pp).__name__}.module {module}: {problem}")


class _Merger(IPostProcessor):
    kind = "merger"
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "files": traitlets.List(
            OutputName(what="a file name or wildcard"),
            help="Names or wildcards of the subjobs' output files to merge.",
        ),
        "ignorefailed": traitlets.Bool(
            False, help="Merge what there is when a subjob lacks a file (else: fail)."
        ),
        "overwrite": traitlets.Bool(
            False, help="Replace a merged file already in the master's output directory."
        ),
    }

    def merge(self, master: Job, subjobs: Sequence[Job], ctx: PostProcessContext) -> list[str]:
        if not self.files:
            raise PostProcessError("no files to merge: set files=[...]")
        outputs = [(sj, ctx.paths(sj).output) for sj in subjobs]
        names: dict[str, None] = {}
        for _sj, out in outputs:
            names.update(dict.fromkeys(_names(out, self.files)))
        if not names:
            raise PostProcessError(f"no subjob output matches {', '.join(self.files)}")
        # A file named (no wildcard) is wanted from every subjob: one that none of them
        # wrote is missing everywhere, which fails the merge, never passed over in silence.
        names.update(dict.fromkeys(p for p in self.files if not any(c in p for c in "*?[")))
        target_dir = ctx.paths(master).output
        target_dir.mkdir(parents=True, exist_ok=True)
        # Every file is checked before any is written: a merge refused for its second file
        # leaves no first one behind to block the next run as "exists already".
        plan: list[tuple[Path, list[tuple[Job, Path]]]] = []
        for name in names:
            parts = [(sj, out / name) for sj, out in outputs]
            missing = [sj.fqid for sj, path in parts if not path.is_file()]
            if missing and not self.ignorefailed:
                raise PostProcessError(
                    f"{name} is missing in subjob(s) {', '.join(missing[:5])} "
                    "(ignorefailed=True merges the others)"
                )
            target = target_dir / self.target_name(name)
            if target.exists() and not self.overwrite and not ctx.may_replace(str(target)):
                raise PostProcessError(f"{target} exists already (overwrite=True replaces it)")
            present = [(sj, path) for sj, path in parts if path.is_file()]
            if present:  # else ignorefailed, and no subjob has it: nothing to merge
                plan.append((target, present))
        # Every file is merged beside its target first and renamed only once all are: a
        # merge failing on its second file (a CustomMerger raising) leaves no first one
        # behind either, and a crash never leaves half a merge.
        partials: list[tuple[str, Path]] = []
        try:
            for target, present in plan:
                target.parent.mkdir(parents=True, exist_ok=True)
                fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
                os.close(fd)
                partials.append((partial, target))
                self._merge_one(present, partial)
            for partial, target in partials:
                os.replace(partial, target)
        finally:
            for partial, _target in partials:
                if os.path.exists(partial):
                    os.unlink(partial)
        return [str(target) for _partial, target in partials]

    def target_name(self, name: str) -> str:
        """The name of the merged file in the master's output directory."""
        return name

    def _merge_one(self, parts: list[tuple[Job, Path]], output: str) -> None:
        raise NotImplementedError


class TextMerger(_Merger):
    """``TextMerger(files=["stdout"])``: concatenate each named output file of the
    subjobs, in subjob order, each part headed by its subjob, into the master's output
    directory. Parts that are gzip-compressed are read decompressed and the merge is
    written compressed too (a gzip file of the concatenated text, under the same name); a
    part that is not text, a damaged gzip file, or one named ``.gz`` that is not gzip
    fails the merge, never writing a file that is neither."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        **_Merger._schema,
        "compress": traitlets.Bool(
            False, help="Write the merged file gzip-compressed, its name ending in .gz."
        ),
    }

    def target_name(self, name: str) -> str:
        return f"{name}.gz" if self.compress and not name.endswith(".gz") else name

    def _merge_one(self, parts: list[tuple[Job, Path]], output: str) -> None:
        packed = [_is_gzip(path) for _sj, path in parts]
        for (sj, path), gzipped in zip(parts, packed, strict=True):
            # Its text copied into a gzip merge (or one named .gz) would read as gzip.
            if path.name.endswith(".gz") and not gzipped:
                raise PostProcessError(
                    f"TextMerger: {path.name} of subjob {sj.fqid} is not a gzip file, "
                    "though its name ends in .gz"
                )
        if self.compress or any(packed):
            with gzip.open(output, "wb") as compressed:
                self._write_parts(parts, packed, compressed)
        else:
            with open(output, "wb") as plain:
                self._write_parts(parts, packed, plain)

    # Parts are copied as bytes: text in any encoding (Latin-1, a stray 0xff) is merged as
    # it was written, never with replacement characters in its place.
    @staticmethod
    def _write_parts(parts: list[tuple[Job, Path]], packed: list[bool], merged: _Bytes) -> None:
        for (sj, path), compressed in zip(parts, packed, strict=True):
            merged.write(f"# ==> subjob {sj.fqid}: {path.name} <==\n".encode())
            last = b""
            try:
                with _open_part(path, compressed) as part:
                    while chunk := part.read(_CHUNK):
                        if b"\0" in chunk:
                            raise PostProcessError(
                                f"TextMerger merges text: {path.name} of subjob {sj.fqid} is "
                                "binary (a CustomMerger can merge it)"
                            )
                        merged.write(chunk)
                        last = chunk[-1:]
            except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
                raise PostProcessError(
                    f"TextMerger: {path.name} of subjob {sj.fqid} is a damaged gzip file "
                    f"({type(exc).__name__}: {exc})"
                ) from None
            if last and last != b"\n":
                merged.write(b"\n")


# Parts are copied this many bytes at a time: a large output never sits in memory.
_CHUNK = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


def _is_gzip(path: Path) -> bool:
    """Whether the file starts as a gzip file does."""
    with open(path, "rb") as handle:
        return handle.read(2) == _GZIP_MAGIC


def _open_part(path: Path, compressed: bool) -> _Bytes:
    if compressed:
        return gzip.open(path, "rb")
    return open(path, "rb")


class CustomMerger(_Merger):
    """``CustomMerger(module="merge.py", files=[...])``: for each file, calls the module's
    ``mergefiles(file_list, output_file)`` with the subjobs' copies (in subjob order) and
    the path to write in the master's output directory."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "module": PythonModule("mergefiles", help="Python file defining mergefiles()."),
        **_Merger._schema,
    }

    def check_before_submit(self) -> None:
        _check_module(self, "mergefiles")

    def _merge_one(self, parts: list[tuple[Job, Path]], output: str) -> None:
        mergefiles = _load_function(self.module, "mergefiles")
        result = mergefiles([str(path) for _sj, path in parts], output)
        if result is False:
            raise PostProcessError(f"{self.module}: mergefiles() returned False")


class _Checker(IPostProcessor):
    """Which jobs a checker looks at, with Ganga's two switches. A job that was not split
    is its own only piece: it is checked unless both are off. Unlike Ganga, a split
    master is not checked by default: its output directory holds only what the mergers
    wrote (``checkMaster=True`` checks it after them)."""

    kind = "checker"
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "checkSubjobs": traitlets.Bool(True, help="Check each subjob of a split job."),
        "checkMaster": traitlets.Bool(
            False, help="Check a split job's master too, on its merged output."
        ),
    }

    def check_targets(self, job: Job) -> list[Job]:
        if not job.is_master:
            return [job] if self.checkSubjobs or self.checkMaster else []
        targets = list(job.iter_subjobs()) if self.checkSubjobs else []
        return [*targets, job] if self.checkMaster else targets


class FileChecker(_Checker):
    """``FileChecker(files=["stdout"], searchStrings=["ERROR"])``: a (sub)job fails when
    one of the strings is in one of its output files (``failIfFound=False``: when none
    is). A file the job does not have fails it too."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "files": traitlets.List(
            OutputName(what="a file name or wildcard"), help="Output files to search (wildcards)."
        ),
        "searchStrings": traitlets.List(traitlets.Unicode(), help="Strings to look for."),
        "failIfFound": traitlets.Bool(
            True, help="Fail when a string is found (False: when none is found)."
        ),
        "filesMustExist": traitlets.Bool(
            True, help="Fail a job that has none of the files (False: pass it)."
        ),
        **_Checker._schema,
    }

    def check(self, job: Job, ctx: PostProcessContext) -> str | None:
        if not self.files or not self.searchStrings:
            raise PostProcessError("set files=[...] and searchStrings=[...]")
        out = ctx.paths(job).output
        names = _names(out, self.files)
        if not names:
            if not self.filesMustExist:
                return None  # nothing to search, and that is allowed
            return (
                f"no output file matches {', '.join(self.files)} (filesMustExist=False allows it)"
            )
        found = [
            (s, name)
            for name in names
            for s in self.searchStrings
            if s in (out / name).read_text(errors="replace")
        ]
        if self.failIfFound and found:
            return f"{found[0][0]!r} found in {found[0][1]}"
        if not self.failIfFound and not found:
            return f"none of {', '.join(map(repr, self.searchStrings))} found"
        return None


@dataclass(frozen=True)
class CheckedJob:
    """What a custom checker's ``check(job)`` is given: the (sub)job, read-only."""

    id: int
    fqid: str
    name: str
    status: str
    exit_code: int | None
    outputdir: Path
    metadata: Mapping[str, Any]

    @classmethod
    def of(cls, job: Job, ctx: PostProcessContext) -> CheckedJob:
        return cls(
            job.id,
            job.fqid,
            job.name,
            job.status,
            job.exit_code,
            ctx.paths(job).output,
            dict(ctx.metadata_of(job)),
        )


class CustomChecker(_Checker):
    """``CustomChecker(module="check.py")``: the module's ``check(job)`` returns True when
    the (sub)job is good. It is given a read-only view of the job (``CheckedJob``)."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "module": PythonModule("check", help="Python file defining check(job) -> bool."),
        **_Checker._schema,
    }

    def check_before_submit(self) -> None:
        _check_module(self, "check")

    def check(self, job: Job, ctx: PostProcessContext) -> str | None:
        check = _load_function(self.module, "check")
        if check(CheckedJob.of(job, ctx)):
            return None
        return f"check() of {os.path.basename(self.module)} returned False"


class MetaDataChecker(_Checker):
    """``MetaDataChecker(expression="events > 100 and ok")``: a (sub)job fails unless the
    expression, over the names of its metadata, is true. Only comparisons, ``and``/``or``/
    ``not``, names and constants are allowed: nothing is executed."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "expression": MetadataExpression(help="A condition over the job's metadata."),
        **_Checker._schema,
    }

    def check(self, job: Job, ctx: PostProcessContext) -> str | None:
        from ganga_like_std.expressions import evaluate

        metadata = ctx.metadata_of(job)
        if evaluate(self.expression, metadata):
            return None
        return f"{self.expression!r} is false"
