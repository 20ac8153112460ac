"""Executable: run a program with arguments and environment, never through a shell."""

from __future__ import annotations

import os
import shutil
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import JobError
from ganga_like.model.interfaces import IApplication, JobPaths, RunSpec
from ganga_like.model.job import Job
from ganga_like_std.traits import Arg

__all__ = ["Executable"]


class Executable(IApplication):
    """Runs ``exe`` with ``args`` (a list: no shell is involved) and extra ``env``."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "exe": traitlets.Unicode(
            "echo", help="Program to run: a path, or a name looked up on PATH."
        ),
        "args": traitlets.List(Arg(), help="Arguments, passed as a list (never through a shell)."),
        "env": traitlets.Dict(
            value_trait=traitlets.Unicode(),
            key_trait=traitlets.Unicode(),
            help="Environment variables added for the program.",
        ),
    }

    def check_before_submit(self) -> None:
        """Refuse to submit a job whose program cannot be found (nothing is changed)."""
        if resolve_program(self.exe) is None:
            raise JobError(f"Executable.exe: program not found or not executable: {self.exe}")

    def prepare(self, job: Job, paths: JobPaths) -> RunSpec:
        # A program that disappears later, or that differs per subjob, is left for the
        # backend to report as that subjob's failure; the others still run.
        program = resolve_program(self.exe) or self.exe
        env = dict(self.env)
        inputs: tuple[str, ...] = ()
        dataset = job.inputdata
        if dataset is not None:
            names = dataset.file_names()
            env["GANGA_INPUTDATA"] = os.pathsep.join(names)
            inputs = tuple(dataset.files_to_copy())
        return RunSpec(argv=(program, *self.args), env=env, inputs=inputs)


def resolve_program(exe: str) -> str | None:
    """Absolute path of an executable program, or None."""
    if not exe:
        return None
    if os.sep in exe:
        path = os.path.abspath(os.path.expanduser(exe))
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(exe)
