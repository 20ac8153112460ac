"""CPU (user and kernel) of making N Local tasks' directories and files, in one directory
as a master's workspace holds its subjobs, or in directories of K (``--shard K``): does a
directory of 100,000 entries make each new task dearer?

    python scripts/bench/bench_task_dirs.py [N] [--shard K] [--dir DIR]

Each task is what the runner makes for a subjob: ``<i>/``, ``<i>/work/``,
``<i>/output/`` and three empty files in ``output`` (six inodes).  The figures are printed
per fifth of the run, so growth with the directory's size shows; what is made is left in
place (see ``fs_probe.py``).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile

FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
FILES = ("stdout", "stderr", "__run__")


def make_task(parent: str, index: int) -> None:
    root = os.path.join(parent, str(index))
    os.mkdir(root)
    os.mkdir(os.path.join(root, "work"))
    output = os.path.join(root, "output")
    os.mkdir(output)
    for name in FILES:
        os.close(os.open(os.path.join(output, name), FLAGS, 0o600))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=100_000)
    parser.add_argument("--shard", type=int, default=0, help="tasks per directory (0: one)")
    parser.add_argument("--dir", default=None, help="where to make them (default: $TMPDIR)")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="task-dirs-", dir=args.dir)
    fifth = max(1, args.n // 5)
    before = resource.getrusage(resource.RUSAGE_SELF)
    figures = []
    for index in range(args.n):
        parent = base
        if args.shard:
            parent = os.path.join(base, str(index // args.shard))
            if index % args.shard == 0:
                os.mkdir(parent)
        make_task(parent, index)
        if (index + 1) % fifth == 0:
            now = resource.getrusage(resource.RUSAGE_SELF)
            user, kernel = now.ru_utime - before.ru_utime, now.ru_stime - before.ru_stime
            figures.append(
                f"to {index + 1}: user {1e6 * user / fifth:.0f} µs, kernel "
                f"{1e6 * kernel / fifth:.0f} µs"
            )
            before = now
    layout = f"directories of {args.shard}" if args.shard else "one directory"
    print(f"{args.n} tasks in {layout} ({base}), CPU per task: " + "; ".join(figures))


if __name__ == "__main__":
    main()
