"""LocalFile: a file on this machine, as job input (copied in) or output (collected)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import traitlets

from ganga_like.model.interfaces import IFile

__all__ = ["LocalFile"]


class LocalFile(IFile):
    """``LocalFile("data.txt")``: as an input file it is copied into the job's input
    directory; as an output file, ``namePattern`` (a name or glob, relative to the work
    directory) is collected into the output directory under the same relative path, and a
    pattern matching nothing fails the job, as does an output whose place there is taken
    (nothing is overwritten)."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "namePattern": traitlets.Unicode("", help="File name or glob pattern."),
        "localDir": traitlets.Unicode(
            "", help="Directory of an input file (default: the current directory at submit time)."
        ),
    }
    _positional = ("namePattern", "localDir")

    def input_path(self) -> str:
        base = self.localDir or os.getcwd()
        return os.path.abspath(os.path.join(os.path.expanduser(base), self.namePattern))

    def output_pattern(self) -> str:
        return str(self.namePattern)
