"""Bad bytes on a node's listener: an error answer or a closed connection, never a dead node."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import info, leader_of, make_cluster, wait_for

from kraft.client import Address, Connection, append
from kraft.cluster import LocalCluster
from kraft.errors import ErrorCode
from kraft.protocol import (
    ApiKey,
    RequestHeader,
    decode_response_payload,
    encode_request_header,
    encode_request_payload,
    frame,
)
from kraft.wire_adapter import describe_quorum_from_wire, describe_quorum_request


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = make_cluster(Path(tmp_path_factory.mktemp("protocol")))
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


def _exchange(address: Address, data: bytes, timeout_s: float = 3.0) -> bytes | None:
    """Send raw bytes; the framed answer's payload, or None if the node closed the socket."""
    with socket.create_connection((address.host, address.port), timeout=timeout_s) as s:
        s.sendall(data)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return None
            buf += chunk
        return buf[4:]


def _still_serves(cluster: LocalCluster, address: Address) -> None:
    i = info(address)
    assert i is not None and i.state in ("Leader", "Follower")
    ack = asyncio.run(append(list(cluster.addresses.values()), [b"alive"], timeout_ms=5000))
    assert ack.base_offset >= 1


def _leader_address(cluster: LocalCluster) -> Address:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    return cluster.addresses[lead.node_id]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(frame(b"hello"), id="unknown-api-key"),
        pytest.param(struct.pack(">i", 0x7FFFFFFF) + b"x" * 64, id="oversized-frame"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(frame(b"\x00"), id="shorter-than-a-header"),
        pytest.param(
            frame(encode_request_header(RequestHeader(ApiKey.VOTE, 9, 7, "t"))),
            id="unsupported-vote-version",
        ),
        pytest.param(frame(struct.pack(">hhih", 32000, 0, 7, -1) + b"\x00\xff"), id="bad-append"),
    ],
)
def test_undecodable_frames_close_the_connection(cluster: LocalCluster, data: bytes) -> None:
    address = _leader_address(cluster)

    # A connection opened before the garbage keeps working after it.
    async def bystander() -> None:
        async with await Connection.open(address) as conn:
            await conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t"})
            assert _exchange(address, data) is None
            body = await conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t"})
            assert body["error_code"] == 0

    asyncio.run(bystander())
    _still_serves(cluster, address)


def test_truncated_body_gets_invalid_request(cluster: LocalCluster) -> None:
    address = _leader_address(cluster)
    header = encode_request_header(RequestHeader(ApiKey.VOTE, 2, 41, "t"))
    answer = _exchange(address, frame(header + b"\x01"))  # a body cut short
    assert answer is not None
    corr, body = decode_response_payload(ApiKey.VOTE, 2, answer)
    assert corr == 41
    assert body["error_code"] == ErrorCode.INVALID_REQUEST
    _still_serves(cluster, address)


def test_api_versions_too_new_gets_kafkas_v0_unsupported_reply(cluster: LocalCluster) -> None:
    address = _leader_address(cluster)
    header = encode_request_header(RequestHeader(ApiKey.API_VERSIONS, 99, 5, "t"))
    answer = _exchange(address, frame(header + b"\x00\x00\x00"))
    assert answer is not None
    corr, body = decode_response_payload(ApiKey.API_VERSIONS, 0, answer)
    assert corr == 5
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert {k["api_key"] for k in body["api_keys"]} >= {ApiKey.VOTE, ApiKey.FETCH}  # type: ignore[index, union-attr]


def test_describe_quorum_on_a_follower_is_not_leader(cluster: LocalCluster) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    follower = next(n for n in cluster.node_ids if n != lead.node_id)  # type: ignore[attr-defined]
    payload = encode_request_payload(
        RequestHeader(ApiKey.DESCRIBE_QUORUM, 2, 3, "t"), describe_quorum_request()
    )
    answer = _exchange(cluster.addresses[follower], frame(payload))
    assert answer is not None
    _, body = decode_response_payload(ApiKey.DESCRIBE_QUORUM, 2, answer)
    error, desc = describe_quorum_from_wire(2, body)
    assert error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert desc is None


def test_a_request_for_another_cluster_is_refused(cluster: LocalCluster) -> None:
    address = _leader_address(cluster)
    from kraft.core.messages import VoteRequest
    from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
    from kraft.wire_adapter import request_to_wire

    vote = VoteRequest(
        ClusterId("AAAAAAAAAAAAAAAAAAAAAQ"), ReplicaKey(NodeId(9)), Epoch(99), Epoch(0), Offset(0)
    )
    key, version, body = request_to_wire(vote)
    answer = _exchange(
        address, encode_request_payload(RequestHeader(key, version, 8, "t"), body, framed=True)
    )
    assert answer is not None
    _, got = decode_response_payload(key, version, answer)
    assert got["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    # The stranger's epoch 99 did not disturb the quorum.
    i = info(address)
    assert i is not None and i.state == "Leader" and i.epoch < 99
