"""The `ganga` command run as a real process."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import ganga_like

from .conftest import ROOT


def ganga(
    args: list[str], env: dict[str, str], timeout: float = 60, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``ganga args``; ``stdin``, if given, is piped in (the shell runs it as cells)."""
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_version_and_help(env_for: dict[str, str]) -> None:
    assert ganga(["--version"], env_for).stdout.strip() == f"ganga_like {ganga_like.__version__}"
    help_text = ganga(["--help"], env_for).stdout
    assert "usage: ganga" in help_text and "script.py" in help_text
    bad = ganga(["--frobnicate"], env_for)
    assert bad.returncode == 2 and "unknown option --frobnicate" in bad.stderr


def test_script_gets_gpi_names_and_argv_and_its_exit_status(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    script = tmp_path / "s.py"
    script.write_text(
        "import sys\nprint(sys.argv)\nprint(Job.__name__, len(jobs), "
        "Executable.__name__)\nsys.exit(int(sys.argv[1]))\n"
    )
    result = ganga([str(script), "3", "x y"], env_for)
    assert result.returncode == 3, result.stderr
    assert result.stdout.splitlines() == [f"[{str(script)!r}, '3', 'x y']", "Job 0 Executable"]


def test_a_gpi_error_in_a_script_is_one_line_and_exit_status_1(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    script = tmp_path / "bad.py"
    script.write_text("j = Job()\nj.nmae = 'x'\n")
    result = ganga([str(script)], env_for)
    assert result.returncode == 1
    assert result.stderr.strip() == "ERROR: Job has no attribute 'nmae'; did you mean 'name'?"


def test_a_python_error_in_a_script_shows_the_traceback(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    script = tmp_path / "boom.py"
    script.write_text("1 / 0\n")
    result = ganga([str(script)], env_for)
    assert result.returncode == 1 and "ZeroDivisionError" in result.stderr


def _as_from_a_terminal() -> None:
    """In the child before it starts: Ctrl-C as a user's terminal delivers it. A run of the
    tests started in the background by a shell without job control (``cmd &`` in a
    script) has SIGINT ignored, which every child would inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_in_a_script_is_one_line_saying_what_was_stopped(
    tmp_path: Path, env_for: dict[str, str], gangadir: Path
) -> None:
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    script = tmp_path / "waits.py"
    script.write_text(
        "j = Job(application=Executable(exe='sleep', args=['60']))\n"
        "j.submit()\nj.wait(until='running', timeout=60)\n"
        "print('waiting', flush=True)\nj.wait()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "ganga_like.cli", str(script)],
        env=env_for,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
        assert child.returncode == 130
        assert err.strip() == (
            "KeyboardInterrupt: wait() for job 0 stopped; the job goes on (running)"
        )
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        runner_client.stop(runner_dir(gangadir))


def test_ctrl_c_at_a_subcommands_question_declines_it(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    import pexpect

    script = tmp_path / "one.py"
    script.write_text("Job(name='kept')\n")
    assert ganga([str(script)], env_for).returncode == 0
    child = pexpect.spawn(
        sys.executable,
        ["-m", "ganga_like.cli", "remove", "0"],
        env=env_for,
        encoding="utf-8",
        preexec_fn=_as_from_a_terminal,
    )
    child.expect(r"\[y/N\]", timeout=60)
    child.sendintr()
    child.expect(pexpect.EOF, timeout=60)
    child.close()
    assert child.exitstatus == 4
    assert child.before.splitlines()[-1:] == ["ganga: nothing done"]
    assert "kept" in ganga(["jobs", "0"], env_for).stdout


def test_missing_script(env_for: dict[str, str]) -> None:
    result = ganga(["/no/such/script.py"], env_for)
    assert result.returncode == 2 and "no such script" in result.stderr


def test_process_exits_at_the_script_end_without_waiting_for_its_running_jobs(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    script = tmp_path / "long.py"
    script.write_text(
        "import time\n"
        "j = Job(application=Executable(exe='sleep'), splitter=ArgSplitter(args=[[120], [120]]))\n"
        "j.submit()\n"
        "print(time.time(), flush=True)\n"
    )
    result = ganga([str(script)], env_for)
    ended = time.time()
    assert result.returncode == 0, result.stderr
    script_end = float(result.stdout.strip())
    print(f"the process exited {ended - script_end:.2f} s after its script ended")
    # The subjobs sleep 120 s: an exit that waited for them would take that long. The bound
    # is loose so that a loaded machine cannot fail it (idle, the exit takes under a second).
    assert ended - script_end < 10.0
    # the repository was released and the jobs go on in the runner
    later = tmp_path / "later.py"
    later.write_text("j = jobs(0)\nprint(j.status)\nj.kill()\nprint(j.status)\n")
    again = ganga([str(later)], env_for)
    assert again.stdout.split() in (["submitted", "killed"], ["running", "killed"]), again.stderr


def test_a_repository_held_alone_in_embedded_mode_is_one_clear_line(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from ganga_like import *\nlen(jobs)\nimport time\n"
            "print('ready', flush=True)\ntime.sleep(30)\n",
        ],
        env=dict(env_for, GANGA_REPOSITORY_MODE="embedded"),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        script = tmp_path / "list.py"
        script.write_text("print(jobs)\n")
        result = ganga([str(script)], env_for)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1
        assert lines[0].startswith("ERROR: repository ")
        assert f"in use by PID {holder.pid}" in lines[0]
    finally:
        holder.kill()
        holder.wait()


def test_the_example_scan_runs_and_a_second_process_sees_it(env_for: dict[str, str]) -> None:
    result = ganga([str(ROOT / "examples" / "scan.py")], env_for, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "job 0 is completed" in result.stdout
    assert "200 (done:200)" in result.stdout
    assert "point 2 x^2=4" in result.stdout
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ganga_like import *\nj = jobs(0)\n"
            "print(j.status, sum(s.exit_code == 0 for s in j.subjobs))\n"
            "print(all((s.outputdir / 'stdout').exists() and (s.outputdir / 'stderr').exists() "
            "and (s.outputdir / '__run__').exists() for s in j.subjobs))",
        ],
        env=env_for,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert check.stdout.split() == ["completed", "200", "True"], check.stderr
