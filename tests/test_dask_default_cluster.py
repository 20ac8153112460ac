"""``Dask()`` with no address: the gangadir's own cluster, a detached process that outlives
the sessions using it. Real processes throughout: a script that submits and exits, ``ganga
script.py``, the shell through a terminal, a notebook, a cluster killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")

from ganga_like import ArgSplitter, Dask, Executable, Job
from ganga_like.runtime.session import Session
from ganga_like_dask import default_cluster
from ganga_like_dask.settings import Dask as DaskSection

from .waiting import wait_for

# One worker of two threads: both subjobs of a test run at once, on as few processes as
# a loaded machine can start. The cluster leaves soon once idle.
SESSION_SETTINGS = {"monitor_max_interval": 0.5}
SESSION_CONFIG = {
    DaskSection: {"n_workers": 1, "threads_per_worker": 2, "idle_exit": 2.0, "timeout": 10.0}
}
CONFIG = textwrap.dedent("""\
    c.Dask.n_workers = 1
    c.Dask.threads_per_worker = 2
    c.Dask.idle_exit = 2.0
    c.Dask.timeout = 10.0
    c.Monitor.max_interval = 0.5
""")
PATIENCE = 180


class Gate:
    """A program that records its pid, waits for a child that waits for a gate file, then
    prints ``done <arg>``."""

    def __init__(self, where: Path) -> None:
        self.dir = where
        self.gate = where / "gate"
        self.exe = where / "gated.sh"
        self.exe.write_text(
            textwrap.dedent(f"""\
            #!/bin/sh
            echo "$1" >> "{where}/ran"
            ( while [ ! -e "{self.gate}" ]; do sleep 0.1; done ) &
            echo $! > "{where}/child.$1"
            echo $$ > "{where}/pid.$1.new" && mv "{where}/pid.$1.new" "{where}/pid.$1"
            wait
            echo "done $1"
            """)
        )
        self.exe.chmod(0o755)

    def pid(self, arg: object) -> int:
        path = self.dir / f"pid.{arg}"
        wait_for(path.exists, PATIENCE, f"the program for {arg} to start")
        return int(path.read_text())

    def child(self, arg: object) -> int:
        """The pid of the program's child (written before the program's own)."""
        self.pid(arg)
        return int((self.dir / f"child.{arg}").read_text())

    def runs(self) -> list[str]:
        path = self.dir / "ran"
        return sorted(path.read_text().split()) if path.exists() else []


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    return Gate(tmp_path)


@pytest.fixture
def child_env(env_for: dict[str, str]) -> Iterator[dict[str, str]]:
    """The environment of a child session on the test's gangadir, with the settings above
    in its config file."""
    config = Path(env_for["XDG_CONFIG_HOME"]) / "ganga_like" / "ganga_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG)
    yield env_for


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except FileNotFoundError:
        return False
    return text[text.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _ganga() -> list[str]:
    ganga = Path(sys.executable).with_name("ganga")
    return [str(ganga)] if ganga.exists() else [sys.executable, "-m", "ganga_like.cli"]


def _python(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )


def _cluster_pid(gangadir: Path) -> int:
    record = default_cluster.alive_record(gangadir)
    assert record is not None, "no live Dask cluster in the gangadir"
    return record.pid


# A script as users write one: no ``if __name__ == "__main__":`` guard (the cluster's
# workers never import it), submits, waits until the job runs, and exits.
SUBMIT_AND_EXIT = """\
from ganga_like import ArgSplitter, Dask, Executable, Job
j = Job(application=Executable(exe={exe!r}), splitter=ArgSplitter(args=[["0"], ["1"]]),
        backend=Dask())
j.submit()
if {wait}:
    j.wait(timeout=180, until="running")
print(j.id, j.status, j.subjobs[0].backend.scheduler, flush=True)
"""

COLLECT = """\
from ganga_like import jobs
j = jobs({job_id})
print(j.wait(timeout=180), *[(s.outputdir / "stdout").read_text().strip() for s in j.subjobs],
      sep="|")
"""


def test_a_job_submitted_by_a_script_that_exits_runs_on_and_a_later_process_collects_it(
    gangadir: Path, child_env: dict[str, str], gate: Gate, tmp_path: Path
) -> None:
    first = _python(SUBMIT_AND_EXIT.format(exe=str(gate.exe), wait=True), child_env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stderr == ""
    job_id, status, address = first.stdout.split()
    assert status == "running" and address.startswith("tls://127.0.0.1:")
    # The submitting process is gone; its programs and the cluster are not.
    programs = [gate.pid(0), gate.pid(1)]
    assert all(_alive(p) for p in programs)
    cluster = _cluster_pid(gangadir)
    # Another script shares the same cluster.
    # (It does not wait for its job to run: the first one's take the worker's threads.)
    second = _python(SUBMIT_AND_EXIT.format(exe=str(gate.exe), wait=False), child_env, tmp_path)
    assert second.returncode == 0, second.stderr
    other_id, status, other_address = second.stdout.split()
    assert status == "submitted"
    assert other_address == address and _cluster_pid(gangadir) == cluster
    gate.gate.touch()
    for collected_id in (job_id, other_id):
        collected = _python(COLLECT.format(job_id=collected_id), child_env, tmp_path)
        assert collected.returncode == 0, collected.stderr
        assert collected.stdout.strip() == "completed|done 0|done 1"
    assert gate.runs() == ["0", "0", "1", "1"]


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that takes no bit away: what the code creates is private by itself."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_the_cluster_is_private_and_leaves_once_idle_with_nothing_active(
    session: Session, gangadir: Path, gate: Gate, open_umask: None
) -> None:
    j = Job(application=Executable(exe=str(gate.exe), args=["0"]), backend=Dask())
    j.submit()
    assert j.wait(timeout=PATIENCE, until="running") == "running"
    directory = gangadir / "dask"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in directory.iterdir()}
    assert modes and set(modes.values()) == {0o600}, modes
    record = json.loads((directory / "cluster.json").read_text())
    pid = record["pid"]
    # Connecting needs the certificate in the record: a plain client is turned away.
    refused = _python(
        "import ssl, socket\n"
        f"host, port = {record['address'][len('tls://') :]!r}.rsplit(':', 1)\n"
        "ctx = ssl.create_default_context()\n"
        "ctx.check_hostname = False\n"
        "ctx.verify_mode = ssl.CERT_NONE\n"
        "try:\n"
        "    with ctx.wrap_socket(socket.create_connection((host, int(port)))) as s:\n"
        "        s.sendall(b'x' * 64)\n"
        "        print('answered' if s.recv(1) else 'refused')\n"
        "except (ssl.SSLError, OSError) as exc:\n"
        "    print('refused', type(exc).__name__)\n",
        dict(os.environ),
        gangadir.parent,
    )
    assert refused.stdout.startswith("refused"), refused.stdout + refused.stderr
    gate.gate.touch()
    assert j.wait(timeout=PATIENCE) == "completed"
    # Nothing held any more: it leaves by itself, and takes its record along.
    wait_for(lambda: not _alive(pid), PATIENCE, "the idle cluster to leave")
    assert not (directory / "cluster.json").exists()
    assert not list(directory.glob("tls-*"))  # nor its credentials
    # The next submission starts another.
    again = Job(application=Executable(exe="echo", args=["again"]), backend=Dask())
    again.submit()
    assert again.wait(timeout=PATIENCE) == "completed"
    assert _cluster_pid(gangadir) != pid


def test_a_killed_cluster_fails_the_subjobs_it_held_and_a_new_one_takes_its_place(
    session: Session, gangadir: Path, gate: Gate
) -> None:
    j = Job(
        application=Executable(exe=str(gate.exe)),
        splitter=ArgSplitter(args=[["0"], ["1"]]),
        backend=Dask(),
    )
    j.submit()
    programs = [gate.pid(0), gate.pid(1), gate.child(0), gate.child(1)]
    pid = _cluster_pid(gangadir)
    os.kill(pid, signal.SIGKILL)
    try:
        # Its programs and their children end with it (they would otherwise run on beside
        # a second attempt).
        wait_for(lambda: not any(_alive(p) for p in programs), 60, "the programs to end")
        assert j.wait(timeout=PATIENCE) == "failed"
    finally:
        gate.gate.touch()
    for sj in j.subjobs:
        assert sj.status == "failed"
        assert "Dask cluster" in sj.history[-1].cause
        assert "ended while it held this task" in sj.history[-1].cause
    j.resubmit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert _cluster_pid(gangadir) != pid
    assert [(s.outputdir / "stdout").read_text() for s in j.subjobs] == ["done 0\n", "done 1\n"]
    assert not list((gangadir / "dask").glob(f"tls-{pid}.*"))  # the dead one's credentials


def test_ganga_script_runs_a_dask_job(
    gangadir: Path, child_env: dict[str, str], tmp_path: Path
) -> None:
    script = tmp_path / "scan.py"
    script.write_text(
        "j = Job(application=Executable(exe='echo'), "
        "splitter=ArgSplitter(args=[['a'], ['b']]), backend=Dask())\n"
        "j.submit()\n"
        "print('status', j.wait(timeout=180))\n"
    )
    ran = subprocess.run(
        [*_ganga(), str(script)],
        env=child_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert ran.returncode == 0, ran.stderr
    assert "status completed" in ran.stdout, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr


def test_exit_from_the_shell_leaves_a_running_dask_job_running(
    gangadir: Path, child_env: dict[str, str], gate: Gate, tmp_path: Path
) -> None:
    from .test_shell import Shell

    env = dict(child_env, IPYTHONDIR=str(tmp_path / "ipython"), TERM="xterm-256color")
    shell = Shell(env)
    shell.run(f"j = Job(application=Executable(exe={str(gate.exe)!r}, args=['0']), backend=Dask())")
    shell.run("j.submit()", timeout=PATIENCE)
    assert "'running'" in shell.run("j.wait(timeout=180, until='running')", timeout=PATIENCE)
    shell.exit()
    program = gate.pid(0)
    assert _alive(program)
    gate.gate.touch()
    collected = _python(
        "from ganga_like import jobs\n"
        "print(jobs(0).wait(timeout=180), (jobs(0).outputdir / 'stdout').read_text().strip())",
        child_env,
        tmp_path,
    )
    assert collected.returncode == 0, collected.stderr
    assert collected.stdout.split() == ["completed", "done", "0"]


def test_a_notebook_runs_a_dask_job(
    gangadir: Path, child_env: dict[str, str], tmp_path: Path
) -> None:
    import nbformat

    from .test_notebook import install_kernel, run_notebook

    install_kernel(tmp_path / "jupyter")
    env = {
        "JUPYTER_PATH": str(tmp_path / "jupyter"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        **{k: child_env[k] for k in ("GANGA_DIR", "XDG_CONFIG_HOME", "PYTHONPATH")},
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell("%load_ext ganga_like"),
            nbformat.v4.new_code_cell(
                "j = Job(application=Executable(exe='echo', args=['from a notebook']), "
                "backend=Dask())\n"
                "j.submit()\n"
                "print(j.wait(timeout=180), (j.outputdir / 'stdout').read_text().strip())"
            ),
        ]
        run_notebook(nb, tmp_path)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    printed = [o["text"] for o in nb.cells[1].outputs if o["output_type"] == "stream"]
    assert "completed from a notebook" in "".join(printed)
