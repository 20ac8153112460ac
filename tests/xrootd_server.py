"""The XRootD server the tests of XRootDFile use: the one ``scripts/start-xrootd.sh``
started (``$XROOTD_URL``), or a private one a test starts and stops itself."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
START = ROOT / "scripts" / "start-xrootd.sh"
STOP = ROOT / "scripts" / "stop-xrootd.sh"


def answers(url: str) -> bool:
    """Whether an XRootD server answers at ``url`` (``root://host:port/``)."""
    server = url.rstrip("/")
    if shutil.which("xrdfs") is None:
        return False
    try:
        done = subprocess.run(
            ["xrdfs", server, "ls", "/"], capture_output=True, timeout=20, check=False
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def shared_url() -> str:
    """``$XROOTD_URL`` (ending in "/": ``$XROOTD_URL/a/b`` is ``root://h:p//a/b``), or
    skip the test when no server answers there."""
    url = os.environ.get("XROOTD_URL", "")
    if not url:
        pytest.skip('no XRootD server: eval "$(bash scripts/start-xrootd.sh)" first')
    if not answers(url):
        pytest.skip(f"the XRootD server at XROOTD_URL={url} does not answer")
    return url.rstrip("/") + "/"


def readonly_url() -> str:
    """The shared server's directory where writes are refused (``start-xrootd.sh`` makes
    ``readonly/``, root's); skip the test when the server has none."""
    url = shared_url()
    server = url.rstrip("/")
    done = subprocess.run(
        ["xrdfs", server, "stat", "/readonly"], capture_output=True, timeout=20, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"the XRootD server at {server} has no /readonly (start-xrootd.sh makes it)")
    return f"{url}/readonly"


def can_start_private() -> bool:
    return os.geteuid() == 0 and shutil.which("xrootd") is not None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@contextmanager
def private_server() -> Iterator[tuple[str, Path, Path]]:
    """A server of the test's own, started by the project's script: (URL, data dir, its
    directory for stop()); stopped and removed after."""
    if not can_start_private():
        pytest.skip("starting an XRootD server of the test's own needs root and xrootd")
    # Under /tmp itself: the xrootd user cannot enter pytest's private directories.
    directory = Path(tempfile.mkdtemp(prefix="ganga-xrootd-test-", dir="/tmp"))
    directory.chmod(0o755)
    env = {**os.environ, "XROOTD_TEST_PORT": str(free_port())}
    done = subprocess.run(
        ["bash", str(START), str(directory)], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    exported = dict(
        word.split("=", 1) for word in done.stdout.split() if "=" in word and word != "export"
    )
    try:
        yield exported["XROOTD_URL"], Path(exported["XROOTD_DATA"]), directory
    finally:
        stop(directory, purge=True)


def stop(directory: Path, purge: bool = False) -> None:
    """Stop the server of ``directory`` (and remove the directory)."""
    words = ["bash", str(STOP), *(["--purge"] if purge else []), str(directory)]
    done = subprocess.run(words, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def remote_text(url: str) -> str:
    """The content of the file at ``url``, read back with xrdcp."""
    done = subprocess.run(
        ["xrdcp", "--nopbar", "--force", url, "-"], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def put(url: str, text: str) -> None:
    """Upload ``text`` as the file at ``url``."""
    done = subprocess.run(
        ["xrdcp", "--nopbar", "--force", "-", url],
        input=text.encode(),
        capture_output=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def listing(url: str) -> list[str]:
    """The names in the directory at ``url`` (empty when it does not exist)."""
    server, _, path = url.partition("//")[2].partition("/")
    done = subprocess.run(
        ["xrdfs", f"root://{server}", "ls", path], capture_output=True, text=True, check=False
    )
    return sorted(line.rsplit("/", 1)[-1] for line in done.stdout.split())
