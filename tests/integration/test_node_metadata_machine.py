"""The metadata state machine (`kraft.state.machine=metadata`, kraft.app.metadata) on a real
3-node kraft cluster, without Kafka: the nodes snapshot Kafka metadata records, a stopped
follower whose log the leader's log start has passed catches up by FetchSnapshot and reads the
features back from the installed snapshot (KraftGet), and a record that is not a metadata
record stops the state machine (KraftGet answers why), not the node."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import FAST, leader_of
from polling import kraft_info, wait_for

from kraft.client import Address, AppendAck, ClientError, append
from kraft.client_read import get
from kraft.cluster import LocalCluster, free_ports
from kraft.metadata_records import feature_level_record, no_op_record
from kraft.records import KeyValue

METADATA = {
    **FAST,
    "kraft.state.machine": "metadata",
    "metadata.log.max.record.bytes.between.snapshots": "600",
    # With Kafka's retention on the node, the log start moves as soon as there are two.
    "metadata.max.retention.bytes": "1",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path, free_ports(3), overrides=METADATA)
    c.format()
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


def _append(cluster: LocalCluster, values: list[bytes | KeyValue]) -> AppendAck:
    return asyncio.run(append(list(cluster.addresses.values()), values))


def _feature(address: Address, name: str) -> bytes | None:
    return asyncio.run(get(address, name.encode())).value


def test_a_follower_catches_up_from_a_metadata_snapshot(cluster: LocalCluster) -> None:
    _append(cluster, [feature_level_record("metadata.version", 21)])
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    follower = next(n for n in cluster.node_ids if n != lead.node_id)
    ack = _append(cluster, [no_op_record() for _ in range(5)])
    wait_for(
        f"follower {follower} to replicate",
        lambda: (
            (i := kraft_info(cluster.addresses[follower])) is not None
            and i.end_offset > ack.last_offset
        ),
    )
    assert cluster.stop(follower) == 0
    stopped_end = int(ack.last_offset) + 1
    _append(cluster, [feature_level_record("metadata.version", 30)])
    _append(cluster, [feature_level_record("group.version", 1)])

    def moved() -> bool:
        """Both running nodes' log starts are past the follower's log end (whichever leads
        when it returns answers it with a snapshot)."""
        _append(cluster, [no_op_record() for _ in range(5)])
        infos = [kraft_info(cluster.addresses[n]) for n in cluster.node_ids if n != follower]
        return all(i is not None and i.log_start_offset > stopped_end for i in infos)

    wait_for("the log starts to pass the stopped follower's log end", moved, every_s=0.1)
    cluster.start(follower)
    log_path = cluster.log_path(follower)
    wait_for(
        "the follower to install the leader's snapshot",
        lambda: "state machine loaded from the fetched snapshot" in log_path.read_text("utf-8"),
    )
    address = cluster.addresses[follower]
    # Its state: the snapshot's, then the log after it up to the high watermark it learns.
    wait_for("group.version on the follower", lambda: _feature(address, "group.version") == b"1")
    assert _feature(address, "metadata.version") == b"30"
    assert _feature(address, "unknown.version") is None

    # A keyed (key-value) record is no metadata record: every state machine stops at it.
    _append(cluster, [(b"key", b"value")])

    def refused() -> str | None:
        """KraftGet's error once the follower has applied up to the keyed record."""
        try:
            _feature(address, "metadata.version")
        except ClientError as e:
            return str(e)
        return None

    assert "not a metadata record: it has a key" in wait_for("the machine to stop", refused)
    info = kraft_info(address)
    assert info is not None  # the node itself goes on
