"""Disk use stays bounded under endless writes to a bounded key set, on a real 3-node
cluster (`kraft start` processes) with small snapshot and retention settings: each node
snapshots its key-value store every `metadata.log.max.record.bytes.between.snapshots`
committed bytes, and Kafka's `metadata.max.retention.bytes` (kraft.server.retention) moves the
log start up to a newer snapshot, deleting the segments and snapshots below it. The test
writes many times the bound and checks sizes only (never times): every node's data
directory, sampled after every append, stays under a bound derived from the settings, the
log start moved, and `kraft get` returns the last value written to every key on every node
(nothing acknowledged is lost)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import FAST, leader_of
from polling import kraft_info, wait_for

from kraft.client import Producer, append
from kraft.client_read import get
from kraft.cluster import LocalCluster, free_ports

SEGMENT_BYTES = 16 * 1024
SNAPSHOT_BYTES = 32 * 1024
RETENTION_BYTES = 128 * 1024
KEYS = 40
VALUE_BYTES = 200
RECORDS_PER_APPEND = 24
# Writes at least this many times the bound.
WRITE_FACTOR = 8

SETTINGS = {
    "metadata.log.segment.bytes": str(SEGMENT_BYTES),
    "metadata.log.max.record.bytes.between.snapshots": str(SNAPSHOT_BYTES),
    "metadata.log.max.snapshot.interval.ms": "0",
    "metadata.max.retention.bytes": str(RETENTION_BYTES),
    "metadata.max.retention.ms": "-1",
}

# A snapshot of the whole key set: each record (key, value, about 20 bytes of framing) in
# batches, plus header and footer batches; generously.
STATE_BYTES = KEYS * (VALUE_BYTES + 64) + 4096
# Retention keeps the log and the snapshots under RETENTION_BYTES, or only the latest
# snapshot and the log from the segment holding it; between two cleanings the log grows by
# at most one snapshot interval. A follower also waits for the leader's log start (KIP-630),
# which may hold it one interval and a segment further back. Then the small files
# (quorum-state, checkpoints, meta.properties) and the write buffers of one append.
BOUND = RETENTION_BYTES + 2 * SNAPSHOT_BYTES + 2 * SEGMENT_BYTES + 2 * STATE_BYTES + 64 * 1024


def _disk_bytes(data_dir: Path) -> int:
    """The bytes of the files in the directory now; a file renamed or deleted by the running
    node between the listing and its stat (a `.part` becoming a checkpoint) counts nothing."""
    total = 0
    for p in data_dir.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if p.is_file():
                total += p.stat().st_size
    return total


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, free_ports(3), overrides={**FAST, **SETTINGS})
    c.format()
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


def test_disk_use_stays_bounded_under_endless_writes_to_a_bounded_key_set(
    cluster: LocalCluster,
) -> None:
    addresses = list(cluster.addresses.values())
    last: dict[bytes, bytes] = {}
    written = 0
    peak = dict.fromkeys(cluster.node_ids, 0)

    async def write() -> None:
        nonlocal written
        producer = Producer()
        i = 0
        while written < WRITE_FACTOR * BOUND:
            batch = []
            for j in range(RECORDS_PER_APPEND):
                key = f"key-{(i * 7 + j) % KEYS:03d}".encode()
                value = f"{i:08d}".encode() * (VALUE_BYTES // 8)
                batch.append((key, value))
            await append(addresses, batch, producer=producer)
            last.update(batch)
            written += sum(len(k) + len(v) for k, v in batch)
            i += 1
            for n in cluster.node_ids:
                peak[n] = max(peak[n], _disk_bytes(cluster.data_dir(n)))

    asyncio.run(write())
    assert written >= WRITE_FACTOR * BOUND
    for n in cluster.node_ids:
        assert peak[n] <= BOUND, f"node {n}: {peak[n]} bytes on disk, bound {BOUND}"
        info = kraft_info(cluster.addresses[n])
        assert info is not None and info.log_start_offset > 0, f"node {n}: {info}"

    async def read_back() -> None:
        for n, address in cluster.addresses.items():
            for key, value in last.items():
                got = await get(address, key)
                assert got.value == value, f"node {n}, {key!r}: {got}"

    # Followers apply up to the HWM they learn: wait until each holds the last write.
    final_key = max(last, key=lambda k: last[k])
    for n, address in cluster.addresses.items():
        wait_for(
            f"the last write on node {n}",
            lambda a=address: asyncio.run(get(a, final_key)).value == last[final_key],
        )
    asyncio.run(read_back())

    # Kafka's tools show no log start offset; `kraft info` (live) and `kraft snapshots` (the
    # directory) do.
    boot = ",".join(str(a) for a in addresses)
    shown = _cli("info", "--bootstrap", boot)
    assert shown.returncode == 0, shown.stderr
    header, *rows = [line.split() for line in shown.stdout.splitlines()]
    at = header.index("LogStartOffset")
    assert len(rows) == 3 and all(int(r[at]) > 0 for r in rows), shown.stdout
    shown = _cli("snapshots", "--data-dir", str(cluster.data_dir(1)))
    assert shown.returncode == 0, shown.stderr
    first = shown.stdout.splitlines()[0]
    assert first.startswith("log start offset: ") and int(first.split()[3]) > 0, first


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
