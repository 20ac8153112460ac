"""Runs a (sub)job's program between its XRootD transfers, where the program runs.

``python3 xrootd_transfer.py SPEC -- PROGRAM [ARG...]``, in the work directory: fetches the
inputs of SPEC (a JSON object) with ``xrdcp``, runs the program, and once it has succeeded
uploads the outputs. Every backend starts it in the work directory as the program itself,
so the transfers run on the worker node of a batch system, with the credentials of the
environment there (``X509_USER_PROXY``, ``BEARER_TOKEN``...): nothing here reads or writes
them.

An upload goes to a temporary name beside its destination, removed by the server if the
copy is cut off (``xrdcp --posc``), and is renamed (``xrdfs mv``) only once complete: a
destination URL never names half a file. A transfer that fails leaves its reason in
:data:`FAILURE_NOTE` (JSON: ``reason``, and the program's ``exit_code``, null when it did
not run) and this process exits 1; the backend reports that reason as the cause. The URLs
uploaded are written to :data:`UPLOADED_FILE`, which the backend collects with the
outputs.

Only the standard library is used: this runs wherever the program runs, without
``ganga_like``.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = [
    "FAILURE_NOTE",
    "UPLOADED_FILE",
    "TransferError",
    "destination",
    "fetch",
    "main",
    "split_url",
    "upload",
]

FAILURE_NOTE = "__ganga_failure__.json"
# Options added to every xrdcp, from the run's environment ("--streams 4 --xrate 10M").
OPTIONS_VARIABLE = "GANGA_XRDCP_OPTIONS"
UPLOADED_FILE = "__ganga_uploaded__.json"
# root://host[:port]//absolute/path (xroot://, and roots:// / xroots:// over TLS).
_URL = re.compile(r"^((?:x?root)s?://[^/]+)/(/.*)$")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


class TransferError(Exception):
    """A transfer that failed; its text names the URL and says why."""


def split_url(url: str) -> tuple[str, str]:
    """``root://host:port//a/b`` -> (``root://host:port``, ``/a/b``)."""
    match = _URL.match(url)
    if match is None:
        raise TransferError(f"not an XRootD URL of the form root://host[:port]//path: {url}")
    return match.group(1), match.group(2)


def destination(template: str, jid: str, sid: str, name: str) -> str:
    """The URL of output ``name``: ``{jid}``, ``{sid}`` and ``{name}`` replaced (no other
    braces are touched). A job not split has no ``{sid}``: ``/{sid}/`` becomes ``/``."""
    if not sid:
        template = template.replace("/{sid}/", "/")
    return template.replace("{jid}", jid).replace("{sid}", sid).replace("{name}", name)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise TransferError(f"{name} not found on PATH (it comes with the xrootd-client package)")
    return found


def _run(argv: Sequence[str]) -> str | None:
    """Run a client command; None when it succeeded, else its last error line."""
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return _gist(lines[-1]) if lines else f"exit code {done.returncode}"


_NOISE = re.compile(r"^(Run: )?(\[(ERROR|FATAL)\] )?(Server responded with an error: )?(\[\d+\] )?")


def _gist(line: str) -> str:
    """What a client's error line says, short enough for a cause that also names the URL:
    ``Run: [ERROR] Server responded with an error: [3011] Unable to open /f; no such file
    or directory (source)`` -> ``no such file or directory``."""
    text = _NOISE.sub("", " ".join(line.split()))
    text = re.sub(r"\s*\((source|destination)\)$", "", text)
    return text.rsplit("; ", 1)[-1].strip(" :") or line


def _xrdcp(*words: str) -> list[str]:
    try:
        extra = shlex.split(os.environ.get(OPTIONS_VARIABLE, ""))
    except ValueError as exc:
        raise TransferError(f"{OPTIONS_VARIABLE} is not a list of options: {exc}") from None
    return [_tool("xrdcp"), "--nopbar", *extra, *words]


def fetch(url: str, name: str) -> None:
    """Copy ``url`` to ``name`` in the current directory (complete, or not at all)."""
    split_url(url)
    directory, base = os.path.split(name)
    partial = os.path.join(directory, f".{base}.partial")
    try:
        if directory:
            os.makedirs(directory, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        error = _run(_xrdcp("--force", url, partial))
        if error is None:
            os.replace(partial, name)
    except OSError as exc:
        error = f"cannot place it as {name}: {exc}"
    if error is not None:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise TransferError(f"input {url} not fetched: {error}")


def upload(path: str, url: str) -> None:
    """Copy local ``path`` to ``url``: to a temporary name beside it, then renamed."""
    server, remote = split_url(url)
    directory, _, name = remote.rpartition("/")
    temporary = f"{directory}/.{name}.ganga-partial-{secrets.token_hex(4)}"
    xrdfs = _tool("xrdfs")
    error = _run(_xrdcp("--posc", path, f"{server}/{temporary}"))
    if error is None:
        error = _run([xrdfs, server, "mv", temporary, remote])
    if error is not None:
        _run([xrdfs, server, "rm", temporary])  # best effort: --posc removes most already
        raise TransferError(f"output {path} not uploaded to {url}: {error}")


def _uploads(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Upload every output of ``spec``; what was uploaded where."""
    jid, sid = str(spec.get("jid", "")), str(spec.get("sid", ""))
    planned: list[tuple[dict[str, Any], list[tuple[str, str]]]] = []
    for entry in spec.get("upload", []):
        pattern, template = entry["pattern"], entry["url"]
        matches = sorted(m for m in glob.glob(pattern) if os.path.isfile(m) and m != UPLOADED_FILE)
        if not matches:
            raise TransferError(f"output pattern '{pattern}' (for {template}) matched no file")
        pairs = [(m, destination(template, jid, sid, os.path.basename(m))) for m in matches]
        if len({url for _, url in pairs}) < len(pairs):
            raise TransferError(
                f"output pattern '{pattern}' matched {len(pairs)} files but {template} "
                "has no {name} to tell them apart"
            )
        planned.append((entry, pairs))
    done: list[dict[str, Any]] = []
    for entry, pairs in planned:
        for path, url in pairs:
            upload(path, url)
        done.append({**entry, "urls": [url for _, url in pairs]})
    return done


def _write_json(name: str, value: Any) -> None:
    partial = f".{name}.partial"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(partial, name)


def _fail(reason: str, exit_code: int | None) -> NoReturn:
    print(reason, file=sys.stderr)
    _write_json(FAILURE_NOTE, {"reason": reason, "exit_code": exit_code})
    sys.exit(1)


def _run_program(argv: Sequence[str]) -> int:
    """Run the program, passing on the signals this process gets; its exit code, or
    minus the signal that ended it."""
    try:
        proc = subprocess.Popen(argv)
    except FileNotFoundError:
        _fail(f"program not found: {argv[0]}", None)
    except PermissionError:
        _fail(f"program is not executable: {argv[0]}", None)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    return proc.wait()


def main(args: Sequence[str]) -> None:
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: xrootd_transfer.py SPEC -- PROGRAM [ARG...]")
    spec = json.loads(args[0])
    argv = list(args[2:])
    for stale in (FAILURE_NOTE, UPLOADED_FILE):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(stale)
    try:
        for entry in spec.get("fetch", []):
            fetch(entry["url"], entry["name"])
    except TransferError as exc:
        _fail(str(exc), None)
    code = _run_program(argv)
    if code < 0:
        # Ended by a signal: end the same way, so the backend reports that signal.
        for signum in _FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    if code != 0:
        sys.exit(code)
    try:
        uploaded = _uploads(spec)
        _write_json(UPLOADED_FILE, {"uploads": uploaded})
    except TransferError as exc:
        _fail(str(exc), 0)
    except OSError as exc:  # the work directory itself (full, gone)
        _fail(f"the list of uploaded files cannot be written: {exc}", 0)


if __name__ == "__main__":
    main(sys.argv[1:])
