"""Idempotent appends on a real cluster: a client whose connection dropped after it sent an
append resends it, to the same leader or to the next one after a crash, and the value is
stored exactly once (issue: 120 of 100,059 acknowledged values were stored twice)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import leader_of, make_cluster
from polling import kraft_info, wait_for

from kraft.client import Address, Producer, append
from kraft.client_read import read
from kraft.cluster import LocalCluster
from kraft.ids import ProducerId
from kraft.protocol import RequestHeader
from kraft.protocol.client_api import KRAFT_APPEND_KEY, encode_client_request


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = make_cluster(tmp_path)
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


def _send_and_hang_up(address: Address, producer: ProducerId, sequence: int, value: bytes) -> None:
    """Send one KraftAppend and close the connection without waiting for the answer."""
    body = {
        "timeout_ms": 5000,
        "producer_id": producer,
        "sequence": sequence,
        "records": [{"value": value}],
    }
    with socket.create_connection((address.host, address.port), timeout=5.0) as s:
        s.sendall(encode_client_request(RequestHeader(KRAFT_APPEND_KEY, 0, 1, "t"), body))


def _count(cluster: LocalCluster, node: int, value: bytes) -> list[int]:
    result = asyncio.run(read(cluster.addresses[node], 0))
    return [int(o) for o, v in result.records if v == value]


def test_a_resend_to_the_same_leader_is_stored_once(cluster: LocalCluster) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    address = cluster.addresses[lead.node_id]  # type: ignore[attr-defined]
    producer = Producer()
    _send_and_hang_up(address, producer.producer_id, 0, b"exactly-once")
    ack = asyncio.run(append([address], [b"exactly-once"], producer=producer))
    wait_for(
        "the value to commit everywhere",
        lambda: all(_count(cluster, n, b"exactly-once") for n in cluster.node_ids),
    )
    for n in cluster.node_ids:
        assert _count(cluster, n, b"exactly-once") == [ack.base_offset]
    assert producer.leader == address
    assert producer.next_sequence == 1


def test_a_resend_to_the_next_leader_after_a_crash_is_stored_once(cluster: LocalCluster) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    first = lead.node_id  # type: ignore[attr-defined]
    producer = Producer()
    # A first value, so the producer is known everywhere.
    asyncio.run(append(list(cluster.addresses.values()), [b"warm-up"], producer=producer))
    _send_and_hang_up(cluster.addresses[first], producer.producer_id, 1, b"across-failover")
    cluster.kill(first)
    survivors = [n for n in cluster.node_ids if n != first]
    ack = asyncio.run(
        append(
            [cluster.addresses[n] for n in survivors],
            [b"across-failover"],
            timeout_ms=30_000,
            producer=producer,
        )
    )
    cluster.start(first)
    wait_for(
        "every node to hold the value",
        lambda: all(
            kraft_info(cluster.addresses[n]) is not None and _count(cluster, n, b"across-failover")
            for n in cluster.node_ids
        ),
        timeout_s=30.0,
    )
    for n in cluster.node_ids:
        assert _count(cluster, n, b"across-failover") == [ack.base_offset]
