"""A monitor lease held on a host that drops off the network passes to a session on
another host in bounded time: the server's keepalives on the lock's connection find the
peer gone. "Host B" is a network namespace of its own (another hostname too), joined to
this one by a veth pair; the test cuts B's link without killing B's holder."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ganga_like.repository import advisory_locks
from ganga_like.runtime.monitoring.lease import MonitorLease

from .conftest import CHILD_PYTHONPATH
from .postgres_db import private_server, server_url
from .waiting import wait_until

# B renews its lease as the monitor does every cycle, until the test ends it.
HOLDER = """
import sys, time
from pathlib import Path
from ganga_like.runtime.monitoring.lease import MonitorLease
lease = MonitorLease(Path(sys.argv[1]), uri=sys.argv[2])
assert lease.hold()
print("held", flush=True)
while True:
    lease.hold()
    time.sleep(0.5)
"""

# What the server's keepalives may take beyond their nominal bound on a loaded machine.
SLACK_SECONDS = 4.0


class HostB:
    """A network namespace ``name`` whose interface ``inner`` (address ``address``) is
    joined to this namespace's ``outer`` (address ``gateway``)."""

    def __init__(self) -> None:
        tag = secrets.token_hex(3)
        self.name, self.outer, self.inner = f"ganga-b-{tag}", f"glb{tag}a", f"glb{tag}b"
        subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"
        self.gateway, self.address = f"{subnet}.1", f"{subnet}.2"

    def run(self, *command: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            ["ip", "netns", "exec", self.name, "unshare", "--uts", "sh", "-c",
             'hostname host-b && exec "$@"', "sh", *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": CHILD_PYTHONPATH},
        )  # fmt: skip

    def cut_off(self) -> None:
        """B's link goes down: what the server sends B is dropped without a word."""
        _ip("netns", "exec", self.name, "ip", "link", "set", self.inner, "down")


def _ip(*words: str) -> None:
    subprocess.run(["ip", *words], check=True, capture_output=True, text=True)


@contextlib.contextmanager
def host_b() -> Iterator[HostB]:
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("needs ip (iproute2) and unshare")
    host = HostB()
    try:
        _ip("netns", "add", host.name)
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"ip netns unavailable here: {exc.stderr.strip()}")
    try:
        _ip("link", "add", host.outer, "type", "veth", "peer", "name", host.inner)
        _ip("link", "set", host.inner, "netns", host.name)
        _ip("addr", "add", f"{host.gateway}/24", "dev", host.outer)
        _ip("link", "set", host.outer, "up")
        inside = ("netns", "exec", host.name, "ip")
        _ip(*inside, "addr", "add", f"{host.address}/24", "dev", host.inner)
        _ip(*inside, "link", "set", host.inner, "up")
        _ip(*inside, "link", "set", "lo", "up")
        yield host
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("link", "del", host.outer)  # takes its peer with it
        with contextlib.suppress(subprocess.CalledProcessError):
            _ip("netns", "del", host.name)


@pytest.fixture
def server_and_host_b(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, HostB]]:
    """A PostgreSQL cluster of the test's own, listening on this host's veth address too."""
    server_url()  # skips without PostgreSQL
    with host_b() as host:
        monkeypatch.setenv("PG_TEST_LISTEN", host.gateway)
        with private_server() as (url, _directory):
            yield url, host


def _via(url: str, address: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.replace("127.0.0.1", address)))


def test_a_lease_held_on_a_host_cut_off_passes_to_another_host_within_the_bound(
    server_and_host_b: tuple[str, HostB], tmp_path: Path
) -> None:
    url, host = server_and_host_b
    holder = host.run(sys.executable, "-c", HOLDER, str(tmp_path), _via(url, host.gateway))
    ours = MonitorLease(tmp_path, uri=url)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        seen = advisory_locks.holder_of(url, advisory_locks.MONITOR_KEY)
        assert seen is not None and (seen.host, seen.pid > 0) == ("host-b", True), seen
        assert not ours.hold()
        host.cut_off()
        cut_at = time.monotonic()
        assert wait_until(ours.hold, timeout=advisory_locks.DEAD_PEER_SECONDS + 60)
        took = time.monotonic() - cut_at
        assert holder.poll() is None  # B's holder still runs: only its network is gone
        print(f"\nlease taken over {took:.1f} s after host B was cut off")
        assert took <= advisory_locks.DEAD_PEER_SECONDS + SLACK_SECONDS, took
        seen = advisory_locks.holder_of(url, advisory_locks.MONITOR_KEY)
        assert seen is not None and seen.here
    finally:
        ours.release()
        holder.kill()
        holder.wait()
