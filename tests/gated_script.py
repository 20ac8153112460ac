"""A ``ganga`` script in a process of its own that submits a split job on Local whose
subjobs each wait for a gate file, then keeps its session (and so its monitor) open until
told to end: another process (``ganga top``) watches the job move as the test opens the
gates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .waiting import wait_for

SCRIPT = """
import os, sys, time
gates, codes = sys.argv[1], [int(c) for c in sys.argv[2].split(",")]
wait = 'echo "subjob $1 says hello"; while [ ! -e {gates}/$1 ]; do sleep 0.05; done; exit $2'
j = Job(
    name="gated",
    application=Executable(exe="/bin/sh"),
    splitter=ArgSplitter(
        args=[["-c", wait.format(gates=gates), "sh", str(i), str(c)] for i, c in enumerate(codes)]
    ),
)
j.submit()
with open(os.path.join(gates, "submitted"), "w") as out:
    out.write(str(j.id))
while not os.path.exists(os.path.join(gates, "end")):
    time.sleep(0.05)
"""


class GatedScript:
    """The process; ``codes``: each subjob's exit code once its gate opens."""

    def __init__(self, work: Path, env: dict[str, str], codes: list[int]) -> None:
        self.gates = work / "gates"
        self.gates.mkdir(parents=True)
        self.gangadir = Path(env["GANGA_DIR"])
        script = work / "gated.py"
        exit_codes = ",".join(str(c) for c in codes)
        script.write_text(SCRIPT)
        self.log = work / "gated.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ganga_like.cli", str(script), str(self.gates), exit_codes],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        submitted = self.gates / "submitted"
        wait_for(lambda: submitted.exists() or self.process.poll() is not None, 120, "submission")
        assert self.process.poll() is None, self.log.read_text()
        wait_for(lambda: submitted.read_text() != "", 10, "the job id")
        self.job_id = int(submitted.read_text())

    def open_gate(self, index: int) -> None:
        (self.gates / str(index)).touch()

    def end(self) -> None:
        """Let every subjob end, then the script; its runner is stopped."""
        for index in range(100):
            self.open_gate(index)
        (self.gates / "end").touch()
        try:
            self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            runner_client.stop(runner_dir(self.gangadir))
