"""The listener's resource limits, each with Kafka's configuration name: a node under a flood
of connections, partial frames or silent sockets keeps its memory bounded and keeps serving;
an append too large for one batch is refused with Kafka's error."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import FAST
from polling import kraft_info, wait_for

from kraft.client import Address, ClientError, append
from kraft.client_read import read
from kraft.cluster import LocalCluster, free_ports
from kraft.errors import ErrorCode

LIMITS = {
    "socket.request.max.bytes": str(1 << 20),
    "queued.max.request.bytes": str(64 * 1024),
    "max.connections": "24",
}


def _start(root: Path, **extra: str) -> tuple[LocalCluster, Address]:
    c = LocalCluster(root, free_ports(1), overrides={**FAST, **LIMITS, **extra})
    c.format()
    c.start()
    address = c.addresses[1]
    wait_for("a leader", lambda: (i := kraft_info(address)) is not None and i.state == "Leader")
    return c, address


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Address]]:
    c, address = _start(Path(tmp_path_factory.mktemp("limits")))
    try:
        yield c, address
    finally:
        c.stop_all()


@pytest.fixture
def impatient_node(tmp_path: Path) -> Iterator[tuple[LocalCluster, Address]]:
    """A node that closes a connection after 1.5 s without a whole request."""
    c, address = _start(tmp_path, **{"connections.max.idle.ms": "1500"})
    try:
        yield c, address
    finally:
        c.stop_all()


def _connect(address: Address) -> socket.socket:
    s = socket.create_connection((address.host, address.port), timeout=5.0)
    s.settimeout(0.2)
    return s


def _closed_by_node(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def _still_serves(address: Address) -> None:
    assert kraft_info(address) is not None
    assert asyncio.run(append([address], [b"still-serving"], timeout_ms=5000)).base_offset >= 0


def test_partly_received_requests_are_capped_over_all_connections(
    node: tuple[LocalCluster, Address],
) -> None:
    """queued.max.request.bytes: 10 connections each holding 10 KiB of a 512 KiB request
    (each allowed alone) exceed 64 KiB together: the connections past the cap are closed."""
    _, address = node
    socks = [_connect(address) for _ in range(10)]
    try:
        for s in socks:
            s.sendall(struct.pack(">i", 512 * 1024) + b"x" * (10 * 1024))
            time.sleep(0.05)
        time.sleep(0.5)
        closed = [_closed_by_node(s) for s in socks]
        assert 0 < sum(closed) < len(socks)  # the first few fit, the rest do not
        assert not any(closed[:5])  # 5 x 10 KiB is under the 64 KiB cap
        _still_serves(address)
    finally:
        for s in socks:
            s.close()
    # Their bytes were released: a fresh connection may hold a partial request again.
    wait_for(
        "the released budget to admit a new partial request",
        lambda: _partial_request_admitted(address),
        timeout_s=10.0,
    )


def _partial_request_admitted(address: Address) -> bool:
    with _connect(address) as s:
        s.sendall(struct.pack(">i", 512 * 1024) + b"y" * (40 * 1024))
        time.sleep(0.3)
        return not _closed_by_node(s)


def test_silent_and_trickling_connections_are_closed(
    impatient_node: tuple[LocalCluster, Address],
) -> None:
    """connections.max.idle.ms: no whole request within it closes the connection, whether the
    peer sends nothing or one byte at a time."""
    _, address = impatient_node
    silent = _connect(address)
    trickle = _connect(address)
    try:
        trickle.sendall(struct.pack(">i", 100))
        deadline = time.monotonic() + 15.0
        silent_closed = trickle_closed = False
        while time.monotonic() < deadline and not (silent_closed and trickle_closed):
            if not trickle_closed:
                try:
                    trickle.sendall(b"z")
                except OSError:
                    trickle_closed = True
            silent_closed = silent_closed or _closed_by_node(silent)
            trickle_closed = trickle_closed or _closed_by_node(trickle)
        assert silent_closed and trickle_closed
        _still_serves(address)
    finally:
        silent.close()
        trickle.close()


def test_connections_beyond_max_connections_are_refused(
    node: tuple[LocalCluster, Address],
) -> None:
    _, address = node
    socks = [_connect(address) for _ in range(40)]
    try:
        time.sleep(0.5)
        open_ = [s for s in socks if not _closed_by_node(s)]
        assert 0 < len(open_) <= 24
    finally:
        for s in socks:
            s.close()
    wait_for("the node to accept connections again", lambda: kraft_info(address) is not None)
    _still_serves(address)


def test_an_append_too_large_for_one_batch_is_refused(tmp_path: Path) -> None:
    """400,000 empty values fit a request of 800 KB (within Kafka's default request limits),
    but not one 8 MiB batch as Kafka measures it (21 bytes of framing a record): refused with
    RECORD_LIST_TOO_LARGE, nothing stored."""
    defaults = {
        "socket.request.max.bytes": str(100 << 20),
        "queued.max.request.bytes": str(64 << 20),
    }
    c, address = _start(tmp_path, **defaults)
    try:
        with pytest.raises(ClientError) as refused:
            asyncio.run(append([address], [b""] * 400_000, timeout_ms=10_000))
        assert refused.value.error is ErrorCode.RECORD_LIST_TOO_LARGE
        _still_serves(address)
        assert not [o for o, v in asyncio.run(read(address, 0)).records if v == b""]
    finally:
        c.stop_all()
