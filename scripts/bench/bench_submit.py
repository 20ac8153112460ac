"""Submit an N-subjob job (Executable /bin/true, Local) and time submit() until it returns.

    python scripts/bench/bench_submit.py [N] [--kill] [--json] [--embedded] [--hold-runner]

Prints the wall time and CPU of submit(), the repository growth per subjob, and (after the
job completed) the process's peak RSS. With ``--kill`` the peak RSS is that of the submission
alone: as soon as submit() returned the runner is killed (1,000,000 subjobs would run for
most of an hour) and the gangadir removed. ``--json`` (with ``--kill``) prints one line of
figures for ``bench_submit_floor.py``: the CPU the repository server and the runner spent
during the call, and the bytes of one subjob's own records (what the floor's records
weigh). ``--embedded``: the repository file opened by this process, no server.
``--hold-runner`` (with ``--kill``): no subjob runs during the call, so that only the
submission is measured, as the floor of ``bench_submit_floor.py`` writes the batch file and
runs nothing; a stand-in process holds the runner's lock and names itself in its pid file
(the submission queues its batches and wakes it, as it wakes a live runner).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of a live process (0 when there is none)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The stand-in for a live runner: its command line names the runner's module and directory
# (what the client checks of a runner's pid), it holds the lock, ignores the wake-up signal
# and leaves when its stdin closes.
_HELD_RUNNER = """
import fcntl, os, signal, sys
from ganga_like_runner.protocol import LOCK_NAME, PID_NAME, host_words
directory = sys.argv[2]
os.makedirs(directory, exist_ok=True)
fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
with open(os.path.join(directory, PID_NAME), "w") as f:
    f.write(f"{os.getpid()} {host_words()}\\n")
print("held", flush=True)
sys.stdin.read()
os.unlink(os.path.join(directory, PID_NAME))
"""


def hold_runner(directory: Path) -> Any:
    """A stand-in holding the runner of ``directory`` until its stdin is closed."""
    import subprocess

    from ganga_like_runner.protocol import RUNNER_MODULE

    held = subprocess.Popen(
        [sys.executable, "-c", _HELD_RUNNER, RUNNER_MODULE, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    if held.stdout is None or held.stdout.readline().strip() != "held":
        raise SystemExit("the stand-in for the runner did not start")
    return held


def rss_now() -> float:
    """This process's resident memory now, MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def reset_peak() -> None:
    """Start this process's peak resident memory (VmHWM) again from what it holds now."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_since_reset() -> float:
    """This process's peak resident memory since ``reset_peak``, MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def subjob_record_bytes(job: Any) -> int:
    """The bytes of the first subjob's record and of the records only it refers to (its
    own application, when the splitter varied it), as the repository stores them."""
    from persistent import Persistent

    from ganga_like.gpi.proxy import unwrap

    master = unwrap(job)
    subjob = master._subjobs[0]
    storage = subjob._p_jar._storage
    shared = {id(master)} | {id(v) for v in master.stored().values()}
    own = [subjob] + [
        v for v in subjob.stored().values() if isinstance(v, Persistent) and id(v) not in shared
    ]
    return sum(len(storage.load(obj._p_oid)[0]) for obj in own)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 10_000
    kill = "--kill" in sys.argv or "--json" in sys.argv
    as_json = "--json" in sys.argv
    gangadir = Path(tempfile.mkdtemp(prefix="bench-submit-")) / "gangadir"
    os.environ["GANGA_DIR"] = str(gangadir)
    if "--embedded" in sys.argv:
        os.environ["GANGA_REPOSITORY_MODE"] = "embedded"
    from ganga_like import ArgSplitter, Executable, Job, Local
    from ganga_like.repository.zeo import shared
    from ganga_like.runtime.session import current_session
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    session = current_session()
    held = hold_runner(runner_dir(gangadir)) if "--hold-runner" in sys.argv else None
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(n)]),
        backend=Local(),
    )
    data = gangadir / "repository" / "Data.fs"
    server = shared.server_pid(gangadir / "repository")
    size_before = data.stat().st_size
    server_cpu = process_cpu(server)
    # The peak so far is the job's making (its splitter's arguments), and what it holds.
    made_peak, made_now = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, rss_now()
    reset_peak()
    started, cpu = time.perf_counter(), time.process_time()
    j.submit()
    submit_wall, submit_cpu = time.perf_counter() - started, time.process_time() - cpu
    server_cpu = process_cpu(server) - server_cpu
    runner = runner_client.runner_pid(runner_dir(gangadir))
    runner_cpu = 0.0 if held else process_cpu(runner)  # started by the call
    submit_peak = peak_since_reset()
    size_after_submit = data.stat().st_size
    growth = (size_after_submit - size_before) / n
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if as_json:
        figures = {
            "wall": submit_wall,
            "cpu": submit_cpu,
            "server_cpu": server_cpu,
            "runner_cpu": runner_cpu,
            "rss_mib": rss,
            "rss_made_peak_mib": made_peak,
            "rss_made_mib": made_now,
            "rss_submit_mib": submit_peak,
            "growth": growth,
            "record_bytes": subjob_record_bytes(j),
            "code": str(Path(sys.modules["ganga_like"].__file__ or "").parent.parent),
        }
        print(json.dumps(figures), flush=True)
    else:
        print(f"submit() of {n} subjobs: {submit_wall:.2f} s wall, {submit_cpu:.2f} s CPU")
        print(f"repository growth at submit: {growth:.0f} B/subjob", flush=True)
        print(
            f"RSS: {made_peak:.0f} MiB peak while making the job, {made_now:.0f} MiB held "
            f"when submit() began, {submit_peak:.0f} MiB peak during submit()",
            flush=True,
        )
    if kill:
        if not as_json:
            print(f"peak RSS of the submitting process: {rss:.0f} MB", flush=True)
        # Everything goes with the gangadir: the runner is ended, not each subjob killed
        # (killing a million records takes longer than submitting them).
        session.close()  # first: its monitor would start the runner again
        if held is not None:
            held.communicate("")
        pid = runner_client.runner_pid(runner_dir(gangadir))
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        shared.stop_server(gangadir / "repository")
        shutil.rmtree(gangadir.parent, ignore_errors=True)
        return
    j.wait(timeout=3600)
    done = time.perf_counter() - started
    size_done = data.stat().st_size
    print(f"all {n} completed after {done:.1f} s; status {j.status}")
    print(f"repository growth after completion: {(size_done - size_before) / n:.0f} B/subjob")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the submitting process: {rss:.0f} MB")
    session.close()
    runner_client.stop(runner_dir(gangadir))


if __name__ == "__main__":
    main()
