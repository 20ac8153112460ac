"""Progress asked for in a script whose stderr goes to a file: a line every few seconds,
never one long line of carriage returns."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

SCRIPT = textwrap.dedent("""
    from ganga_like.gpi.progress import PlainProgress
    PlainProgress.LOG_INTERVAL = 0.2  # the test's run lasts about two seconds
    j = Job(application=Executable(exe="sh"),
            splitter=ArgSplitter(args=[["-c", "sleep 0.4"]] * 8),
            backend=Local())
    j.submit()
    print(j.wait(timeout=120, progress=True))
""")


def test_progress_into_a_file_is_one_line_at_a_time(
    env_for: dict[str, str], gangadir: Path, tmp_path: Path
) -> None:
    script = tmp_path / "scan.py"
    script.write_text(SCRIPT)
    log = tmp_path / "stderr.txt"
    try:
        with log.open("w") as stderr:
            done = subprocess.run(
                [str(Path(sys.executable).with_name("ganga")), str(script)],
                env=env_for,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                timeout=180,
            )
    finally:
        runner_client.stop(runner_dir(gangadir))
    text = log.read_bytes().decode()  # bytes: read_text would turn "\r" into "\n"
    assert done.returncode == 0, text
    assert done.stdout.strip() == "completed"
    assert "\r" not in text
    progress = [line for line in text.splitlines() if line.startswith("job 0:")]
    assert len(progress) >= 2, text  # as it went, not only at the end
    assert progress[-1].startswith("job 0: 8/8"), text
    assert len(set(progress)) == len(progress), text  # a line only when it changed
