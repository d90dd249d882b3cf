"""Helpers for tests that run real nodes as subprocesses on 127.0.0.1."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from polling import kraft_info, wait_for

from kraft.client import Address, ClientError, NodeInfo, Producer, append
from kraft.client_read import read
from kraft.cluster import LocalCluster, free_ports

# Short timeouts keep a failover to about a second (Kafka's defaults are 1 s and 2 s).
FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.fetch.max.wait.ms": "200",
}


def make_cluster(root: Path, n: int = 3, **kwargs: bool) -> LocalCluster:
    cluster = LocalCluster(root, free_ports(n), overrides=FAST, **kwargs)
    cluster.format()
    return cluster


@contextmanager
def dynamic_cluster(
    root: Path, observers: int = 0, *, start: bool = True
) -> Iterator[LocalCluster]:
    """Three voters of a dynamic quorum (kraft.version 1) and `observers` more nodes, formatted
    (and started unless `start` is false); every node is stopped at the end."""
    ports = free_ports(3 + observers)
    cluster = LocalCluster(root, ports[:3], overrides=FAST, dynamic=True)
    for port in ports[3:]:
        cluster.add_observer(port)
    cluster.format()
    if start:
        cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop_all()


def leader_of(cluster: LocalCluster, nodes: Iterable[int]) -> NodeInfo | None:
    """The node that says it leads, once every listed node follows it in its epoch."""
    infos = [kraft_info(cluster.addresses[n]) for n in nodes]
    leaders = [i for i in infos if i is not None and i.state == "Leader"]
    if len(leaders) != 1:
        return None
    lead = leaders[0]
    if all(i is not None and i.epoch == lead.epoch and i.leader_id == lead.node_id for i in infos):
        return lead
    return None


def kraft_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The `kraft` command, as an operator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


class BackgroundWriter:
    """Appends one record after another on its own thread until the `with` block ends;
    remembers what was acknowledged (offset -> value). An append of unknown outcome is resent
    by the same idempotent producer, so a value is stored once."""

    def __init__(self, bootstrap: list[Address], prefix: str = "v") -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.acked: dict[int, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        producer = Producer()
        i = 0
        while not self._stop.is_set():
            value = f"{self.prefix}{i}".encode()
            try:
                ack = await append(self.bootstrap, [value], 5000, producer=producer)
            except ClientError:
                await asyncio.sleep(0.05)
                continue
            self.acked[ack.base_offset] = value
            i += 1
            await asyncio.sleep(0.01)

    def __enter__(self) -> BackgroundWriter:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)


def committed_records(cluster: LocalCluster, node: int) -> dict[int, bytes | None]:
    """A node's committed records, offset -> value (a consumer's Fetch from offset 0)."""
    return dict(asyncio.run(read(cluster.addresses[node], 0)).records)


def assert_acknowledged_everywhere(
    cluster: LocalCluster, nodes: Iterable[int], acked: dict[int, bytes]
) -> None:
    """Every node commits past the last acknowledged offset, and holds every acknowledged
    value at its acknowledged offset (nothing acknowledged lost, nothing moved)."""
    nodes = list(nodes)
    end = max(acked) + 1
    wait_for(
        "every node to commit every acknowledged record",
        lambda: all(
            (i := kraft_info(cluster.addresses[n])) is not None
            and i.high_watermark is not None
            and i.high_watermark >= end
            for n in nodes
        ),
    )
    for n in nodes:
        records = committed_records(cluster, n)
        missing = {o: v for o, v in acked.items() if records.get(o) != v}
        assert missing == {}, f"node {n} lost acknowledged records {missing}"
