"""Applications: Executable runs a program with arguments and environment, never through a
shell; PythonFunction calls a Python function and keeps what it returned."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import JobError
from ganga_like.model.hand_over_memo import remembered
from ganga_like.model.interfaces import IApplication, JobPaths, RunSpec
from ganga_like.model.job import Job
from ganga_like.model.text import EnvName, Text
from ganga_like.private import make_private_dirs
from ganga_like_std import pycall
from ganga_like_std.pyfunction import (
    FunctionRef,
    Picklable,
    call_bytes,
    load_function,
    read_result,
)
from ganga_like_std.shared_traits import Arg

__all__ = ["Executable", "PythonFunction"]


def _environment(help: str) -> traitlets.Dict[str, str]:
    """Variable name -> value; neither may hold a NUL byte (no environment can)."""
    return traitlets.Dict(
        value_trait=Text(what="a string without NUL bytes"), key_trait=EnvName(), help=help
    )


class Executable(IApplication):
    """Runs ``exe`` with ``args`` (a list: no shell is involved) and extra ``env``."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "exe": Text(
            "echo",
            what="a program: a path, or a name found on PATH",
            empty=False,
            help="Program to run: a path, or a name looked up on PATH.",
        ),
        "args": traitlets.List(Arg(), help="Arguments, passed as a list (never through a shell)."),
        "env": _environment("Environment variables added for the program."),
    }

    def check_before_submit(self) -> None:
        """Refuse to submit a job whose program cannot be found (nothing is changed)."""
        if resolve_program(self.exe) is None:
            raise JobError(f"Executable.exe: program not found or not executable: {self.exe}")

    def prepare(self, job: Job, paths: JobPaths) -> RunSpec:
        # A program that disappears later, or that differs per subjob, is left for the
        # backend to report as that subjob's failure; the others still run.
        program = _program(self.exe) or self.exe
        env, inputs = _with_dataset(job, self.env)
        return RunSpec(argv=(program, *self.args), env=env, inputs=inputs)


class PythonFunction(IApplication):
    """Calls ``function(*args, **kwargs)`` in a fresh interpreter and keeps what it
    returned: ``j.result()`` once the job completed.

    ``function`` is a dotted name (``"package.module.function"``, imported when the job is
    submitted) or a callable: stored by name when it can be found by name, else pickled by
    value (needs cloudpickle). The (sub)job runs ``python -m ganga_like_std.pycall``, which
    writes the return value into its output directory as ``result.pickle`` and
    ``result.json``; an exception fails the job with its traceback in stderr."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "function": FunctionRef(
            help="The function: 'package.module.function', or a callable (kept by name "
            "when importable, else pickled by value)."
        ),
        "args": traitlets.List(Picklable(), help="Positional arguments (picklable values)."),
        "kwargs": traitlets.Dict(
            value_trait=Picklable(),
            key_trait=traitlets.Unicode(),
            help="Keyword arguments (picklable values).",
        ),
        "python": Text(
            "",
            what="a Python interpreter: a path, or a name found on PATH",
            help="Interpreter to call it with; empty: this session's (sys.executable).",
        ),
        "env": _environment("Environment variables added for the call."),
    }
    _exported_methods = ("load",)
    has_result = True

    def check_before_submit(self) -> None:
        """Refuse a job whose function cannot be loaded here or is not callable, or whose
        interpreter is not found (nothing is changed)."""
        if not self.function:
            raise JobError(
                "PythonFunction.function is not set: give 'package.module.function' or a callable"
            )
        load_function(self.function)
        if self.python and resolve_program(self.python) is None:
            raise JobError(f"PythonFunction.python: interpreter not found: {self.python}")

    def load(self) -> Any:
        """The function itself, loaded in this process."""
        return load_function(self.function)

    def _interpreter(self) -> str:
        if self.python:
            return _program(self.python) or self.python
        return sys.executable

    def prepare(self, job: Job, paths: JobPaths) -> RunSpec:
        env, inputs = _with_dataset(job, self.env)
        return RunSpec(
            argv=(self._interpreter(), "-m", pycall.__name__, pycall.CALL_FILE),
            env=env,
            # Staged into the work directory by the backend (and shipped to a Dask worker).
            inputs=(_call_source(paths), *inputs),
            output_patterns=(pycall.RESULT_FILE, pycall.RESULT_JSON),
        )

    def write_inputs(self, job: Job, paths: JobPaths) -> None:
        try:
            data = call_bytes(self.function, self.args, self.kwargs)
        except Exception as exc:  # an argument that pickled when set but not any more
            raise JobError(
                f"PythonFunction: the call cannot be pickled: {type(exc).__name__}: {exc}"
            ) from None
        source = _call_source(paths)
        try:
            make_private_dirs(paths.location)
            partial = source + ".partial"
            with open(partial, "wb") as handle:
                handle.write(data)
            os.replace(partial, source)
        except OSError as exc:
            raise JobError(f"PythonFunction: the call file cannot be written: {exc}") from None

    def read_result(self, job: Job, paths: JobPaths) -> Any:
        return read_result(str(paths.output), job.fqid)


def _call_source(paths: JobPaths) -> str:
    # Beside input/, not in it: the backend copies it into input/ (kept) and work/.
    return os.path.join(paths.location, pycall.CALL_FILE)


def _with_dataset(job: Job, extra: Any) -> tuple[dict[str, str], tuple[str, ...]]:
    """The application's environment plus ``$GANGA_INPUTDATA``, and the dataset's files
    to copy next to the program."""
    env = dict(extra)
    inputs: tuple[str, ...] = ()
    dataset = job.inputdata
    if dataset is not None:
        env["GANGA_INPUTDATA"] = os.pathsep.join(dataset.file_names())
        inputs = tuple(dataset.files_to_copy())
    return env, inputs


def _program(exe: str) -> str | None:
    """``resolve_program(exe)``, looked up once for the subjobs of one hand-over (where
    it is depends on the directory and PATH it is looked up from)."""
    key = ("program", exe, os.getcwd(), os.environ.get("PATH"))
    return remembered(key, lambda: resolve_program(exe))


def resolve_program(exe: str) -> str | None:
    """Absolute path of an executable program, or None."""
    if not exe:
        return None
    if os.sep in exe:
        path = os.path.abspath(os.path.expanduser(exe))
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(exe)
