"""LocalFile: a file on this machine, as job input (copied in) or output (collected)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final

import traitlets

from ganga_like.model.interfaces import IFile
from ganga_like.model.text import Text

__all__ = ["LocalFile", "LocalPath"]

# "root://", "s3://", "file:///": a URL, not a path (a Windows drive "C:" has no "//").
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


# What to give instead of a URL of each kind, named in the refusal: the file type that
# fetches it, or how it is usually copied here.
_FILE_TYPES: Final[Mapping[str, str]] = {
    "root://": "XRootDFile",
    "xroot://": "XRootDFile",
    "roots://": "XRootDFile",
    "xroots://": "XRootDFile",
}
_COPY_TOOLS: Final[Mapping[str, str]] = {
    "s3://": " (e.g. with aws s3 cp)",
    "gs://": " (e.g. with gsutil cp)",
    "http://": " (e.g. with curl -O)",
    "https://": " (e.g. with curl -O)",
}


class LocalPath(Text):
    """A path (or glob) on this machine: no NUL byte, and not a URL, which would be taken
    for a relative path and fail at submission with a mangled name."""

    def __init__(self, *, owner: str = "LocalFile", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.owner = owner  # named in the refusal: it is what takes local paths only

    def validate(self, obj: Any, value: Any) -> str:
        text = super().validate(obj, value)
        scheme = _URL.match(text)
        if scheme is not None:
            prefix = scheme.group().lower()
            kind = _FILE_TYPES.get(prefix)
            if kind is not None:
                raise traitlets.TraitError(
                    f"expected a path on this machine ({self.owner} fetches nothing), got the "
                    f"{prefix} URL {text!r}: give {kind}({text!r}) instead, which fetches it"
                )
            tool = _COPY_TOOLS.get(prefix, "")
            raise traitlets.TraitError(
                f"expected a path on this machine ({self.owner} fetches nothing), got the "
                f"{prefix} URL {text!r}: copy the file here first{tool} and give its local path"
            )
        return text


class LocalFile(IFile):
    """``LocalFile("data.txt")``: as an input file it is copied into the job's input
    directory; as an output file, ``namePattern`` (a name or glob, relative to the work
    directory) is collected into the output directory under the same relative path, and a
    pattern matching nothing fails the job, as does an output whose place there is taken
    (nothing is overwritten)."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "namePattern": LocalPath(
            what="a file name or glob pattern on this machine", help="File name or glob pattern."
        ),
        "localDir": LocalPath(
            what="a directory on this machine",
            help="Directory of an input file (default: the current directory at submit time).",
        ),
    }
    _positional = ("namePattern", "localDir")

    def input_path(self) -> str:
        base = self.localDir or os.getcwd()
        return os.path.abspath(os.path.join(os.path.expanduser(base), self.namePattern))

    def output_pattern(self) -> str:
        return str(self.namePattern)
