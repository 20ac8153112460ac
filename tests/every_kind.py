"""A repository holding every kind of object the documentation describes.

``build(gangadir)`` runs a real ``python`` script with the GPI names (the way a user's
script does, in the default mode) that stores: every plugin class, job templates, a
``PythonFunction`` by reference and one pickled by value (a function of ``__main__`` and a
lambda), retries, every postprocessor, a dataset, jobs of each final status and of
``new``, and split jobs; it waits until every submitted job is final and stops the
repository's server, so the file is closed when it returns.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = r"""
import os, sys, tempfile
from ganga_like import *

data = tempfile.mkdtemp(dir=os.environ["EVERY_KIND_TMP"])
files = []
for i in range(3):
    path = os.path.join(data, f"part{i}.txt")
    with open(path, "w") as f:
        f.write(f"{i}\n")
    files.append(path)

with open(os.path.join(data, "merge.py"), "w") as f:
    f.write("def mergefiles(file_list, output_file):\n    return True\n")
with open(os.path.join(data, "check.py"), "w") as f:
    f.write("def check(job):\n    return True\n")

def area(width, height=1.0):
    return width * height

done = Job(name="done", application=Executable(exe="sh", args=["-c", "echo hi > out.txt"]),
           outputfiles=[LocalFile("out.txt")], retry=Retry(attempts=2, on=["failed"]))
bad = Job(name="bad", application=Executable(exe="/bin/false"),
          retry=Retry(attempts=1, on=["failed", "timeout"], grow={"walltime": 2.0}))
split = Job(name="split", application=Executable(exe="/bin/echo"),
            splitter=ArgSplitter(args=[["a"], ["b"], ["c"]]),
            postprocessors=[TextMerger(files=["stdout"]),
                            FileChecker(files=["stdout"], searchStrings=["Traceback"]),
                            MetaDataChecker(expression="True")])
generic = Job(name="generic", application=Executable(exe="sh"),
              splitter=GenericSplitter(multi_attrs={
                  "application.args": [["-c", "echo $C"]] * 2,
                  "application.env": [{"C": c} for c in ("red", "blue")]}))
dataset = Job(name="dataset", application=Executable(exe="cat"),
              inputdata=GangaDataset(files=files),
              splitter=DatasetSplitter(files_per_subjob=2),
              inputfiles=[LocalFile(files[0])])
by_name = Job(name="by-name", application=PythonFunction(function="math.factorial", args=[5]))
by_value = Job(name="by-value",
               application=PythonFunction(function=area, args=[3.0], kwargs={"height": 2.0}))
lam = Job(name="lambda", application=PythonFunction(function=lambda x: x + 1, args=[1]))
long_run = Job(name="killed", application=Executable(exe="sleep", args=["60"]))
for job in (done, bad, split, generic, dataset, by_name, by_value, lam, long_run):
    job.submit()
for job in (done, bad, split, generic, dataset, by_name, by_value, lam):
    job.wait(timeout=120)
long_run.kill()

merged = Job(name="custom", application=Executable(exe="/bin/true"),
             postprocessors=[CustomMerger(module=os.path.join(data, "merge.py"),
                                          files=["out.txt"]),
                             CustomChecker(module=os.path.join(data, "check.py"))])
Job(name="slurm", backend=Slurm(resources=Resources(memory="1G", walltime="0:10:00")))
Job(name="pilot", backend=Slurm(pilot=Pilot(cores=2)), splitter=ArgSplitter(args=[["1"]]))
Job(name="dask", backend=Dask())
Job(name="new", application=PythonFunction(function=area, args=[1.0]),
    postprocessors=[Notifier(address="me@example.org")])
JobTemplate(name="scan", application=Executable(exe="echo", args=["point"]),
            splitter=ArgSplitter(args=[["1"], ["2"]]), backend=Local(),
            postprocessors=[TextMerger(files=["stdout"])])
JobTemplate(name="fn", application=PythonFunction(function=area, args=[2.0]))
statuses = sorted({j.status for j in jobs})
print("statuses", " ".join(statuses))
"""

# What the script leaves, so a test can check nothing was lost.
JOB_NAMES = (
    *("done", "bad", "split", "generic", "dataset", "by-name", "by-value", "lambda"),
    *("killed", "custom", "slurm", "pilot", "dask", "new"),
)
TEMPLATE_NAMES = ("scan", "fn")
STATUSES = ("completed", "failed", "killed", "new")


def child_env(gangadir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["GANGA_DIR"] = str(gangadir)
    env.pop("GANGA_REPOSITORY_MODE", None)
    env["XDG_CONFIG_HOME"] = str(gangadir.parent / "xdg-config")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["EVERY_KIND_TMP"] = str(gangadir.parent)
    return env


def build(gangadir: Path) -> None:
    """Make the repository (a few seconds: the jobs run on the Local backend)."""
    from ganga_like.repository.zeo import shared

    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        env=child_env(gangadir),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    listed = result.stdout.split("statuses", 1)[1].split()
    assert set(STATUSES) <= set(listed), result.stdout
    shared.stop_server(gangadir / "repository", timeout=60)
