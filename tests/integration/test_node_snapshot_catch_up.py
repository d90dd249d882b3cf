"""KIP-630 end to end on a real 3-node cluster: with a small snapshot threshold and small
segments, the nodes snapshot, retention (0 bytes) has the core advance the log start and
whole segments are deleted; a follower whose data directory is wiped and re-formatted (same
cluster id) catches up by FetchSnapshot (the leader's log no longer holds the first records)
and serves every acknowledged value."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import FAST, leader_of
from polling import kraft_info, wait_for

from kraft.client import Address, ClientError, NodeInfo, append
from kraft.client_read import GetResult, get
from kraft.cluster import LocalCluster, free_ports
from kraft.storage.segmented_log import LOG_DIR_NAME

SMALL = {
    **FAST,
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "metadata.log.segment.bytes": "8192",
    # Kafka's retention at 0 bytes: every snapshot but the latest goes as soon as KIP-630's
    # rule allows (kraft.server.retention), so the log start moves early.
    "metadata.max.retention.bytes": "0",
}
KEYS = 16


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, free_ports(3), overrides=SMALL)
    c.format()
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


def _get(address: Address, key: bytes) -> GetResult | None:
    try:
        return asyncio.run(get(address, key))
    except (ClientError, OSError):  # a node not answering yet: poll again
        return None


def _write(cluster: LocalCluster, first: int, count: int, expected: dict[bytes, bytes]) -> None:
    bootstrap = list(cluster.addresses.values())
    for i in range(first, first + count):
        key, value = f"k{i % KEYS}".encode(), f"value-{i}-".encode() * 8
        asyncio.run(append(bootstrap, [(key, value)]))
        expected[key] = value  # acknowledged: committed


def _info(cluster: LocalCluster, n: int) -> NodeInfo | None:
    return kraft_info(cluster.addresses[n])


def _segments(cluster: LocalCluster, n: int) -> list[Path]:
    return sorted((cluster.data_dir(n) / LOG_DIR_NAME).glob("*.log"))


def test_a_wiped_follower_catches_up_from_a_snapshot(cluster: LocalCluster) -> None:
    expected: dict[bytes, bytes] = {}
    _write(cluster, 0, 300, expected)
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    wait_for(
        "the leader's log start to advance",
        lambda: (i := _info(cluster, lead.node_id)) is not None and i.log_start_offset > 0,
    )
    victim = next(n for n in cluster.node_ids if n != lead.node_id)
    assert cluster.stop(victim) == 0
    shutil.rmtree(cluster.data_dir(victim))
    cluster.format()  # re-formats the wiped directory only, with the same cluster id
    _write(cluster, 300, 100, expected)
    start = wait_for(
        "the log start to pass the first records",
        lambda: (
            (i := _info(cluster, lead.node_id)) is not None
            and i.log_start_offset > 0
            and i.log_start_offset
        ),
    )
    assert start > 0
    assert _segments(cluster, lead.node_id)[0].name != f"{0:020d}.log"  # segments deleted

    cluster.start(victim)
    address = cluster.addresses[victim]
    for key, value in expected.items():
        wait_for(
            f"{key!r} on the re-formatted node",
            lambda k=key, v=value: (r := _get(address, k)) is not None and r.value == v,
        )
    info = wait_for("the re-formatted node's state", lambda: _info(cluster, victim))
    assert info.log_start_offset > 0  # it installed a snapshot: its log starts after it
    assert "installed" in cluster.log_path(victim).read_text(encoding="utf-8")
    # Every acknowledged record is still readable on every node.
    for n in cluster.node_ids:
        for key, value in expected.items():
            got = wait_for(f"{key!r} on node {n}", lambda a=cluster.addresses[n], k=key: _get(a, k))
            assert got.value == value
