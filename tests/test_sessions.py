"""Any number of sessions on one gangadir, with no configuration at all.

A real ``ganga`` shell (pexpect), ``ganga script.py``, a notebook kernel (nbclient), ``ganga``
subcommands and the monitor daemon, started in several orders on one gangadir with no
repository mode set: nobody is refused, every job each of them created is there once, and
the Local runner's outputs agree with what the repository says.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from ganga_like.model.job import Job as JobImpl
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.repository.storage import StorageOptions
from ganga_like.repository.zeo import server, shared
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .stand_in import process_with_args
from .test_notebook import install_kernel, run_notebook
from .test_shell import Shell
from .waiting import wait_until

SUBJOBS = 3


def make_jobs(who: str, count: int) -> str:
    """Python that creates and submits ``count`` jobs named ``who-k``, waits for them, and
    prints every job name the process sees."""
    return (
        f"for k in range({count}):\n"
        f"    j = Job(name=f'{who}-{{k}}', application=Executable(exe='echo'),\n"
        f"            splitter=ArgSplitter(args=[[f'{who}-{{k}}-{{i}}'] for i in "
        f"range({SUBJOBS})]))\n"
        f"    j.submit()\n"
        f"    assert j.wait(timeout=90) == 'completed', j.status\n"
    )


SEEN = "print('SEEN', ','.join(sorted(j.name for j in jobs)))"
WAIT_FOR_FILE = (
    "def wait_for_file(path):\n"
    "    import os, time\n"
    "    deadline = time.monotonic() + 150\n"
    "    while not os.path.exists(path) and time.monotonic() < deadline:\n"
    "        time.sleep(0.05)\n"
)


@pytest.fixture
def env(
    env_for: dict[str, str], tmp_path: Path, gangadir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, str]]:
    """No repository mode anywhere: every process uses the default."""
    environ = dict(env_for)
    environ.pop("GANGA_REPOSITORY_MODE", None)
    environ.update(IPYTHONDIR=str(tmp_path / "ipython"), TERM="xterm-256color", COLUMNS="200")
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text(
        "c.TerminalInteractiveShell.autosuggestions_provider = None\n"
    )
    # The notebook kernel is started by nbclient with this process's environment.
    install_kernel(tmp_path / "jupyter")
    monkeypatch.delenv("GANGA_REPOSITORY_MODE", raising=False)
    for name in ("GANGA_DIR", "IPYTHONDIR", "PYTHONPATH", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, environ[name])
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    yield environ
    ganga(["monitor", "stop"], environ)
    runner_client.stop(runner_dir(gangadir))


def ganga(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("ganga")
    argv = [str(command)] if command.exists() else [sys.executable, "-m", "ganga_like.cli"]
    return subprocess.run([*argv, *args], env=env, capture_output=True, text=True, timeout=120)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "in use by" not in result.stderr
    return result.stdout


def cli_import(name: str, env: dict[str, str], where: Path) -> None:
    definition = where / f"{name}.json"
    definition.write_text(
        json.dumps(
            {
                "format": "ganga_like.job/1",
                "job": {"name": name, "application": {"type": "Executable", "exe": "echo"}},
            }
        )
    )
    ok(ganga(["import", str(definition)], env))


def cli_names(env: dict[str, str]) -> list[str]:
    return sorted(row["name"] for row in json.loads(ok(ganga(["jobs", "--json"], env))))


def start_script(who: str, count: int, env: dict[str, str], where: Path) -> subprocess.Popen[str]:
    script = where / f"{who}.py"
    script.write_text(make_jobs(who, count) + SEEN + "\n")
    command = Path(sys.executable).with_name("ganga")
    argv = [str(command)] if command.exists() else [sys.executable, "-m", "ganga_like.cli"]
    return subprocess.Popen(
        [*argv, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish_script(proc: subprocess.Popen[str]) -> list[str]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "in use by" not in err
    return seen_in(out)


def seen_in(text: str) -> list[str]:
    line = next(x for x in text.splitlines() if x.startswith("SEEN "))
    return sorted(n for n in line[5:].strip().split(",") if n)


class Notebook(threading.Thread):
    """A notebook kernel that creates jobs, in the background (nbclient blocks)."""

    def __init__(
        self, who: str, count: int, where: Path, extension: bool, seen_after: Path | None = None
    ) -> None:
        """``seen_after``: a file the notebook waits for (at most 150 s) before it lists
        the jobs it sees, so that the test decides what has happened by then."""
        super().__init__(daemon=True)
        first = "%load_ext ganga_like" if extension else "from ganga_like import *"
        wait = "" if seen_after is None else f"wait_for_file({str(seen_after)!r})\n"
        self.nb = nbformat.v4.new_notebook()
        self.nb.cells = [
            nbformat.v4.new_code_cell(source)
            for source in (first, make_jobs(who, count), WAIT_FOR_FILE + wait + SEEN)
        ]
        self.where = where
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            run_notebook(self.nb, self.where)
        except BaseException as exc:  # reported by the test's thread
            self.error = exc

    def seen(self) -> list[str]:
        self.join(150)
        assert not self.is_alive() and self.error is None, self.error
        text = "".join(o.get("text", "") for o in self.nb.cells[2].outputs)
        for cell in self.nb.cells:
            for output in cell.outputs:
                assert "in use by" not in str(output.get("text", ""))
        return seen_in(text)


def check_truth(
    gangadir: Path, env: dict[str, str], created: dict[str, int], imported: list[str]
) -> None:
    """Every job once, completed, and the runner's outputs saying the same."""
    rows = json.loads(ok(ganga(["jobs", "--json"], env)))
    names = sorted(row["name"] for row in rows)
    expected = sorted([f"{who}-{k}" for who, n in created.items() for k in range(n)] + imported)
    assert names == expected
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids)
    by_name = {row["name"]: row for row in rows}
    for who, count in created.items():
        for k in range(count):
            row = by_name[f"{who}-{k}"]
            assert row["status"] == "completed", row
            for i in range(SUBJOBS):
                stdout = gangadir / "workspace" / str(row["id"]) / str(i) / "output" / "stdout"
                assert stdout.read_text().strip() == f"{who}-{k}-{i}"
    for name in imported:
        assert by_name[name]["status"] == "new"


def test_a_shell_a_script_a_notebook_and_commands_share_a_gangadir_shell_first(
    gangadir: Path, env: dict[str, str], tmp_path: Path
) -> None:
    shell = Shell(env)
    try:
        assert "in use by" not in shell.banner
        shell.run("exec(" + repr(make_jobs("shell", 2)) + ")")
        script = start_script("script", 2, env, tmp_path)
        # The notebook lists what it sees once the script has ended, however the machine
        # schedules the two.
        script_ended = tmp_path / "script-ended"
        notebook = Notebook("nb", 2, tmp_path, extension=True, seen_after=script_ended)
        notebook.start()
        ok(ganga(["monitor", "start"], env))  # the daemon joins in the middle
        cli_import("cli-a", env, tmp_path)
        script_seen = finish_script(script)
        script_ended.touch()
        assert {"shell-0", "shell-1", "script-0", "script-1"} <= set(script_seen)
        ok(ganga(["monitor", "stop"], env))  # and leaves in the middle
        notebook_seen = notebook.seen()
        assert {"shell-0", "script-1", "nb-0", "nb-1"} <= set(notebook_seen)
        # The shell sees the others' jobs at its next cell.
        assert seen_in(shell.run(SEEN)) == cli_names(env)
        shell.exit()
    finally:
        shell.child.close(force=True)
    check_truth(gangadir, env, {"shell": 2, "script": 2, "nb": 2}, ["cli-a"])


def test_the_same_sessions_started_the_other_way_round(
    gangadir: Path, env: dict[str, str], tmp_path: Path
) -> None:
    ok(ganga(["monitor", "start"], env))  # the daemon first, holding the lease
    cli_import("cli-a", env, tmp_path)
    notebook = Notebook("nb", 2, tmp_path, extension=False)  # plain import
    notebook.start()
    script = start_script("script", 2, env, tmp_path)
    shell = Shell(env)
    try:
        ok(ganga(["monitor", "stop"], env))  # a session takes the lease over
        shell.run("exec(" + repr(make_jobs("shell", 2)) + ")")
        finish_script(script)
        notebook.seen()
        cli_import("cli-b", env, tmp_path)
        assert seen_in(shell.run(SEEN)) == cli_names(env)
        shell.exit()
    finally:
        shell.child.close(force=True)
    check_truth(gangadir, env, {"shell": 2, "script": 2, "nb": 2}, ["cli-a", "cli-b"])


def _spawn_lock_taken(repo_dir: Path) -> bool:
    """Whether a session holds the lock under which it looks for a server or starts one
    (flock: another open file of the same process conflicts too)."""
    fd = os.open(repo_dir / shared.SPAWN_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases it if it was ours
    return False


def test_a_session_started_as_the_idle_server_exits_waits_for_it_or_starts_another(
    gangadir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is held at each step of its idle exit (a test hook): a session that
    joins it while it still listens keeps working after it has gone, and a session
    started once it stopped listening (it still holds the file) waits for it to go and
    starts the next server. No session fails."""
    hold = tmp_path / "hold"
    hold.mkdir()
    monkeypatch.setenv(server.TEST_HOLD_VARIABLE, str(hold))
    repo_dir = gangadir / "repository"
    options = StorageOptions(idle_exit=0.2)
    first = Repository(gangadir, "shared", options=options)
    old = shared.server_pid(repo_dir)
    first.close()

    assert wait_until(lambda: (hold / "exiting").exists())  # the idle timer fired
    joined = Repository(gangadir, "shared", options=options)
    try:
        assert shared.server_pid(repo_dir) == old  # it joined the exiting server
        assert len(joined.registry().jobs) == 0
        (hold / "exiting.go").touch()
        assert wait_until(lambda: (hold / "stopped-listening").exists())

        started: list[Repository] = []
        failed: list[BaseException] = []

        def start() -> None:
            try:
                started.append(Repository(gangadir, "shared", options=options))
            except BaseException as exc:
                failed.append(exc)

        starter = threading.Thread(target=start)
        starter.start()
        # It found no server and waits, under the spawn lock, for the old one to go: it
        # neither fails nor starts a server the held file would refuse ("busy").
        assert wait_until(lambda: _spawn_lock_taken(repo_dir) or not starter.is_alive())
        log = repo_dir / shared.LOG_NAME
        assert not wait_until(
            lambda: not starter.is_alive() or "busy" in log.read_text(), timeout=2.0
        ), (failed, log.read_text()[-500:])
        (hold / "stopped-listening.go").touch()
        starter.join(60)
        assert not failed, failed
        later = started[0]
        try:
            new = shared.server_pid(repo_dir)
            assert new is not None and new != old
            later.in_transaction(lambda: Registry(later.connection().root()).add(JobImpl()))
            # The session that had joined the old server reconnects to the new one and
            # sees that commit.

            def seen() -> bool:
                joined.abort()
                return len(joined.registry().jobs) == 1

            assert wait_until(seen)
        finally:
            later.close()
    finally:
        joined.close()


def test_a_client_the_server_dropped_itself_does_not_keep_it_from_exiting_idle(
    gangadir: Path,
) -> None:
    """ZEO drops a client whose asynchronous call fails (here a second tpc_begin while
    its first transaction is open, as after a transaction that could not be aborted on a
    full disk) without forgetting it: the server must still exit once idle."""
    repo_dir = gangadir / "repository"
    options = StorageOptions(idle_exit=0.3)
    repo = Repository(gangadir, "shared", options=options)
    pid = shared.server_pid(repo_dir)
    storage = repo.db.storage
    try:
        storage._async("tpc_begin", 1, b"", b"", {}, None, " ")
        storage._async("tpc_begin", 2, b"", b"", {}, None, " ")  # the server drops us
        assert wait_until(
            lambda: "Multiple simultaneous tpc_begin" in (repo_dir / shared.LOG_NAME).read_text()
        )
        # The client reconnects by itself, and works.
        repo.abort()
        assert len(repo.registry().jobs) == 0
    finally:
        repo.close()
    assert wait_until(lambda: shared.server_pid(repo_dir) != pid, timeout=30), (
        "the server kept counting the client it had dropped"
    )


@pytest.mark.parametrize("module", [shared.SERVER_MODULE, "ganga_like.repository.zeo_server"])
def test_a_live_server_is_found_under_its_module_and_the_one_earlier_versions_started(
    tmp_path: Path, module: str
) -> None:
    """A repository server an earlier version started may still serve after an upgrade:
    its command line names the server's earlier module, and it is still found (and so
    waited for, or asked to leave) as this repository's server."""
    repo_dir = tmp_path / "repository"
    repo_dir.mkdir()
    with process_with_args(module, str(tmp_path)) as pid:
        (repo_dir / shared.PID_NAME).write_text(f"{pid}\n")
        assert shared.server_pid(repo_dir) == pid
        (repo_dir / shared.PID_NAME).write_text(f"{os.getpid()}\n")  # not a server
        assert shared.server_pid(repo_dir) is None
