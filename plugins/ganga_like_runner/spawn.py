"""Starting and signalling Local runner tasks.

Tasks are started with ``os.posix_spawn`` (a vfork-style clone in the C library) rather
than ``subprocess.Popen``: starting is the runner's hottest path, and Popen's Python-level
bookkeeping (error pipe, environment encoding, fd closing) costs more than the clone and
exec themselves.  What Popen did for us is done here explicitly:

* the working directory: the runner changes into it around the spawn (one spawn at a
  time, see ``slots``; every other path the runner uses is absolute);
* PATH lookup in the task's environment, as Popen does (``posix_spawnp`` would search the
  runner's own PATH instead);
* a new session, so that a kill reaches the task's whole process group;
* an empty signal mask and default dispositions for the signals Python ignores
  (SIGPIPE, SIGXFSZ): the runner blocks its wake-up signals, and a task must not inherit
  that;
* no descriptor leaks: every descriptor the runner opens is close-on-exec, and stdin,
  stdout and stderr are set with ``dup2`` actions.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Mapping

from ganga_like_runner.tasks import Task

# Dispositions a task gets back: the interpreter ignores these, and ignored signals
# survive exec.
_RESET_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)
)


class Spawner:
    """Starts tasks; remembers where programs named without a slash were found."""

    def __init__(self, devnull: int) -> None:
        self.stdin_action = (os.POSIX_SPAWN_DUP2, devnull, 0)
        self.found: dict[tuple[str, str], str] = {}

    def forget(self) -> None:
        """Look programs up again (called when new work arrives)."""
        self.found.clear()

    def spawn(self, task: Task, out: int, err: int) -> int:
        """Start the task's process in its workdir; its pid.  OSError if it cannot run."""
        env = task.batch.base_env
        if task.env:
            env = {**env, **task.env}
        # Raises FileNotFoundError naming the workdir when it is missing.
        os.chdir(task.workdir)
        try:
            return self._spawn(task.argv, env, out, err)
        finally:
            # Never keep a task's directory busy while waiting.
            os.chdir("/")

    def _spawn(self, argv: list[str], env: Mapping[str, str], out: int, err: int) -> int:
        program = argv[0]
        actions = [self.stdin_action, (os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2)]
        if "/" in program:
            return spawn_process(program, argv, env, actions)
        key = (env.get("PATH", ""), program)
        was_known = key in self.found
        try:
            return spawn_process(self.locate(program, env), argv, env, actions)
        except FileNotFoundError:
            if not was_known:
                raise
        # The program was moved or removed since it was found: look for it again.
        self.found.pop(key, None)
        return spawn_process(self.locate(program, env), argv, env, actions)

    def locate(self, program: str, env: Mapping[str, str]) -> str:
        """The first executable ``program`` on the PATH of ``env``, as exec would pick it."""
        key = (env.get("PATH", ""), program)
        found = self.found.get(key)
        if found is not None:
            return found
        denied: str | None = None
        for directory in os.get_exec_path(dict(env)):
            candidate = os.path.join(directory, program)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                if os.path.isabs(candidate):  # a relative PATH entry depends on the workdir
                    self.found[key] = candidate
                return candidate
            if denied is None and os.path.exists(candidate):
                denied = candidate
        if denied is not None:
            raise PermissionError(13, "Permission denied", denied)
        raise FileNotFoundError(2, "No such file or directory", program)


def spawn_process(
    path: str, argv: list[str], env: Mapping[str, str], actions: list[tuple[int, int, int]]
) -> int:
    return os.posix_spawn(
        path,
        argv,
        env,
        file_actions=actions,
        setsid=True,
        setsigmask=(),
        setsigdef=_RESET_SIGNALS,
    )


def spawn_failure_reason(task: Task, exc: OSError) -> str:
    program = task.argv[0]
    if exc.filename == task.workdir:
        return f"cannot enter workdir: {task.workdir}"
    if isinstance(exc, FileNotFoundError):
        if "/" in program and os.path.exists(os.path.join(task.workdir, program)):
            return f"interpreter of program not found: {program}"
        return f"program not found: {program}"
    if isinstance(exc, PermissionError):
        return f"program is not executable: {program}"
    return f"cannot run program {program}: {exc.strerror or exc}"


def signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def signal_name(signum: int) -> str:
    try:
        return f"{signum} ({signal.Signals(signum).name})"
    except ValueError:
        return str(signum)
