"""GangaDataset: a plain list of files for a job to process."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import traitlets

from ganga_like.model.interfaces import IDataset, IFile
from ganga_like_std.files import LocalPath

__all__ = ["GangaDataset"]


class DatasetEntry(LocalPath):
    """A path on this machine, or a file the run fetches itself (``XRootDFile(url)``)."""

    def validate(self, obj: Any, value: Any) -> Any:
        if isinstance(value, IFile) and value.remote:
            return value
        return super().validate(obj, value)


class GangaDataset(IDataset):
    """A list of files: paths on this machine, or remote files such as
    ``XRootDFile("root://host//path")``. The program finds them in ``$GANGA_INPUTDATA``
    (os.pathsep separated): a path as it is, a remote file staged into the work directory
    by its name there; a remote file not staged (``stage=False``) by its URL in
    ``$GANGA_INPUT_URLS`` (one a line). With ``treat_as_inputfiles=True`` the paths are
    also copied next to the program."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "files": traitlets.List(
            DatasetEntry(what="a file path", owner="GangaDataset"),
            help="The files: paths, or remote files (XRootDFile).",
        ),
        "treat_as_inputfiles": traitlets.Bool(
            False, help="Also copy the files into the job's work directory."
        ),
    }
    _positional = ("files",)

    def file_names(self) -> list[str]:
        names = []
        for f in self.files:
            if isinstance(f, IFile):
                if getattr(f, "stage", True):
                    names.append(f.input_path())
            else:
                names.append(os.path.abspath(os.path.expanduser(f)))
        return names

    def files_to_copy(self) -> list[str]:
        if not self.treat_as_inputfiles:
            return []
        return [os.path.abspath(os.path.expanduser(f)) for f in self.files if isinstance(f, str)]

    def remote_files(self) -> list[IFile]:
        return [f for f in self.files if isinstance(f, IFile)]
