"""The files of a Local runner task: its directories, inputs, stdout/stderr, the ``__run__``
record and collected outputs."""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
from typing import Any

from ganga_like_runner.protocol import (
    FAILURE_NOTE,
    PRIVATE_DIR,
    PRIVATE_FILE,
    RUN_FILE,
    STDERR_FILE,
    STDOUT_FILE,
)
from ganga_like_runner.tasks import Task, TaskFiles, TaskSetupError

_FLAGS_CREATE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
_TASK_FILES = (STDOUT_FILE, STDERR_FILE, RUN_FILE)  # in the order of TaskFiles


def prepare_files(task: Task) -> TaskFiles:
    """Directories, inputs and open files of a task that has not started."""
    try:
        fresh = make_dirs(task.output_dir)
        if task.workdir != task.output_dir:
            make_dirs(task.workdir)
    except OSError as exc:
        raise TaskSetupError(f"cannot create directory: {exc}") from exc
    for source in task.inputs:
        place_input(source, task.workdir)
    opened: list[int] = []
    try:
        for name in _TASK_FILES:
            path = os.path.join(task.output_dir, name)
            if not fresh and name == RUN_FILE:
                # A new inode: an earlier run of the same key may still hold the old one.
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            opened.append(os.open(path, _FLAGS_CREATE, PRIVATE_FILE))
    except OSError as exc:
        for fd in opened:
            os.close(fd)
        raise TaskSetupError(f"cannot write to output directory: {exc}") from exc
    return TaskFiles(*opened)


def prepare_ahead(task: Task) -> None:
    """Prepare a task before its turn; a failure is kept to be reported when it comes."""
    try:
        task.files = prepare_files(task)
    except TaskSetupError as exc:
        cause = exc.__cause__
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return  # a full disk: prepared again at its turn, which waits for space
        task.setup_error = str(exc)


def files_of(task: Task) -> TaskFiles:
    """The task's open files: prepared ahead, or right now."""
    if task.setup_error is not None:
        raise TaskSetupError(task.setup_error)
    files, task.files = task.files, None
    return files if files is not None else prepare_files(task)


def discard_files(task: Task) -> None:
    """Undo the preparation of a task that will not start after all."""
    files, task.files = task.files, None
    if files is None:
        return
    for fd in (files.out, files.err, files.run):
        os.close(fd)
    for name in _TASK_FILES:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(task.output_dir, name))


def collect_outputs(task: Task) -> str | None:
    """Move output files into output_dir; the reason for failing, if any.

    A file keeps its path relative to the work directory (``sub/out.txt`` goes to
    ``output/sub/out.txt``), and nothing in the output directory is ever overwritten: a
    file whose place is taken (by ``stdout``, or another output) stays in the work
    directory and the task fails, saying so.
    """
    if not task.patterns:
        return None
    problem: str | None = None
    found: dict[str, None] = {}  # every match once: two patterns may match one file
    for pattern in task.patterns:
        matches = glob.glob(pattern, root_dir=task.workdir)
        if not matches:
            problem = problem or f"output pattern '{pattern}' matched no file"
        found.update(dict.fromkeys(matches))
    if os.path.realpath(task.workdir) == os.path.realpath(task.output_dir):
        return problem
    moved_dirs: list[str] = []
    for match in sorted(found):  # a directory before what is inside it
        place = output_place(match)
        if any(place.startswith(d + os.sep) for d in moved_dirs):
            continue  # went with its directory
        target = os.path.join(task.output_dir, place)
        if os.path.lexists(target):
            problem = problem or (
                f"output {match} not collected: {place} already exists "
                "in the output directory (the file stays in the work "
                "directory)"
            )
            continue
        try:
            make_dirs(os.path.dirname(target))
            move(os.path.join(task.workdir, match), target)
        except OSError as exc:
            problem = problem or f"cannot collect output {match}: {exc}"
            continue
        if os.path.isdir(target):
            moved_dirs.append(place)
    return problem


def failure_note(workdir: str) -> tuple[str, int | None] | None:
    """The reason and the program's exit code a wrapper around it left when it failed."""
    note = read_json(os.path.join(workdir, FAILURE_NOTE))
    reason, code = note.get("reason"), note.get("exit_code")
    if not isinstance(reason, str) or not (code is None or isinstance(code, int)):
        return None
    return reason, code


def output_place(match: str) -> str:
    """Where a matched output goes, relative to the output directory: its path in the work
    directory, or just its name if it lies outside (an absolute or ``../`` pattern)."""
    path = os.path.normpath(match)
    if os.path.isabs(path) or path == os.pardir or path.startswith(os.pardir + os.sep):
        return os.path.basename(path)
    return path


def write_placeholder(fd: int, when: float, batch_id: str) -> int:
    """A pid-less start record, written before the process exists; its size.

    A crash between spawning and recording the pid is then reported as an interrupted
    run after a restart, never taken for a task to run again.
    """
    try:
        return write_record(fd, start_record(when, batch_id, None), 0)
    except OSError as exc:
        raise TaskSetupError(f"cannot write to output directory: {exc}") from exc


def write_record(fd: int, data: bytes, size: int) -> int:
    """Overwrite the ``__run__`` record in one write; the size of what it now holds.

    Padding with spaces (JSON allows them) to the size of the record it replaces leaves
    no stale bytes behind, so no truncation is needed.
    """
    data = data.ljust(size)
    if os.pwrite(fd, data, 0) != len(data):
        raise OSError(f"short write of {RUN_FILE}")
    return len(data)


def start_record(when: float, batch_id: str, pid: int | None) -> bytes:
    """The start record (``write_record`` pads whatever it replaces)."""
    shown = "null" if pid is None else str(pid)
    return f'{{"time": {when!r}, "batch": {json.dumps(batch_id)}, "pid": {shown}}}'.encode()


def make_dirs(path: str) -> bool:
    """Create a directory and its parents (each private); return whether it is new."""
    try:
        os.mkdir(path, PRIVATE_DIR)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
        return False
    except FileNotFoundError:
        make_dirs(os.path.dirname(path))  # os.makedirs would give parents the umask's mode
        return make_dirs(path)
    return True


def place_input(source: str, workdir: str) -> None:
    """Copy an input into the workdir (a copy, never a link: the program may write to it)."""
    target = os.path.join(workdir, os.path.basename(source.rstrip("/")))
    if not os.path.exists(source):
        raise TaskSetupError(f"input file not found: {source}")
    try:
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
            return
        copy_file(source, target)
    except OSError as exc:
        raise TaskSetupError(f"cannot place input {source}: {exc}") from exc


def copy_file(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` (replaced if present) as a new private file, keeping
    the owner's execute bit; in the kernel (a reflink where the file system allows) when it
    can. The twin of ``ganga_like.private.copy_private``: the runner must start without
    importing ganga_like."""
    if os.path.lexists(target):
        os.unlink(target)  # a new inode: never write through an earlier link or copy
    with open(source, "rb") as src:
        mode = PRIVATE_FILE | (os.fstat(src.fileno()).st_mode & 0o100)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        with open(fd, "wb") as dst:
            try:
                while os.copy_file_range(src.fileno(), fd, 1 << 30):
                    pass
            except OSError:  # not supported here (old kernel, across file systems, ...)
                src.seek(0)
                dst.seek(0)
                dst.truncate()
                shutil.copyfileobj(src, dst, 1 << 20)


def move(source: str, target: str) -> None:
    try:
        os.replace(source, target)
    except OSError:
        shutil.move(source, target)  # another file system, or a directory onto a directory


def write_json(path: str, value: dict[str, Any]) -> None:
    fd = os.open(path, _FLAGS_CREATE, PRIVATE_FILE)
    try:
        os.write(fd, json.dumps(value).encode())
    finally:
        os.close(fd)


def write_json_atomic(path: str, value: dict[str, Any]) -> None:
    """Readers polling for the file must never see it half written."""
    tmp = f"{path}.tmp"
    write_json(tmp, value)
    os.replace(tmp, path)


def read_json(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            value = json.loads(handle.read())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
