"""Scan: run a program over 200 argument sets on this machine, then show the results.

    ganga examples/scan.py            (or: python examples/scan.py)
"""

from ganga_like import ArgSplitter, Executable, Job, Local, jobs

job = Job(
    name="scan",
    application=Executable(exe="echo", env={"SCAN": "demo"}),
    splitter=ArgSplitter(args=[["point", str(x), f"x^2={x * x}"] for x in range(200)]),
    backend=Local(),
)
job.submit()
print(f"submitted job {job.id} as {len(job.subjobs)} subjobs")
status = job.wait(timeout=600, progress=True)
print(f"job {job.id} is {status}")
print(jobs)
for subjob in job.subjobs[:3]:
    print(f"--- subjob {subjob.fqid} (exit code {subjob.exit_code}) stdout:")
    subjob.peek("stdout")
print(f"outputs are in {job.subjobs[0].outputdir.parent.parent}")
