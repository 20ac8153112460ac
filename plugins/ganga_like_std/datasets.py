"""GangaDataset: a plain list of file paths for a job to process."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import traitlets

from ganga_like.model.interfaces import IDataset
from ganga_like_std.files import LocalPath

__all__ = ["GangaDataset"]


class GangaDataset(IDataset):
    """A list of files. The program finds them in ``$GANGA_INPUTDATA`` (os.pathsep
    separated); with ``treat_as_inputfiles=True`` they are also copied next to it."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "files": traitlets.List(
            LocalPath(what="a file path", owner="GangaDataset"), help="Paths of the files."
        ),
        "treat_as_inputfiles": traitlets.Bool(
            False, help="Also copy the files into the job's work directory."
        ),
    }
    _positional = ("files",)

    def file_names(self) -> list[str]:
        return [os.path.abspath(os.path.expanduser(f)) for f in self.files]

    def files_to_copy(self) -> list[str]:
        return self.file_names() if self.treat_as_inputfiles else []
