"""Bad bytes on a node's listener: an error answer or a closed connection, never a dead node."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import leader_of, make_cluster
from polling import kraft_info, wait_for

from kraft.client import Address, Connection, append, describe_quorum
from kraft.cluster import LocalCluster
from kraft.core.messages import FetchRequest, VoteRequest
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import (
    ApiKey,
    MessageDict,
    RequestHeader,
    decode_response_payload,
    encode_request_header,
    encode_request_payload,
    frame,
)
from kraft.protocol.client_api import KRAFT_APPEND_KEY
from kraft.protocol.rpc import describe_quorum_from_wire, describe_quorum_request, request_to_wire
from kraft.server.controller_apis import describe_cluster_from_wire, describe_cluster_request


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
    i = kraft_info(address)
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
    i = kraft_info(address)
    assert i is not None and i.state == "Leader" and i.epoch < 99


# --- Kafka's controller APIs, answered by a kraft node ----------------------------------------


def _ask(address: Address, api_key: int, version: int, body: MessageDict) -> MessageDict:
    async def go() -> MessageDict:
        async with await Connection.open(address) as conn:
            return await conn.request(api_key, version, body)

    return asyncio.run(go())


def test_api_versions_advertises_what_kafkas_tools_and_voters_use(cluster: LocalCluster) -> None:
    body = _ask(_leader_address(cluster), ApiKey.API_VERSIONS, 3, {"client_software_name": "t"})
    table = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}  # type: ignore[index, union-attr]
    assert table[ApiKey.DESCRIBE_CLUSTER] == (0, 2)  # as Kafka 4.3.1's controller
    assert table[ApiKey.UPDATE_RAFT_VOTER] == (0, 0)
    assert table[KRAFT_APPEND_KEY] == (0, 1)  # ours, which Kafka's clients ignore


def test_describe_cluster_names_the_leader_and_the_controllers(cluster: LocalCluster) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    follower = next(n for n in cluster.node_ids if n != lead.node_id)  # type: ignore[attr-defined]
    body = _ask(cluster.addresses[follower], ApiKey.DESCRIBE_CLUSTER, 2, describe_cluster_request())
    error, _, desc = describe_cluster_from_wire(body)
    assert error is ErrorCode.NONE
    assert body["endpoint_type"] == 2
    assert desc.cluster_id == cluster.cluster_id
    assert desc.controller_id == lead.node_id  # type: ignore[attr-defined]
    assert {(n, f"{h}:{p}") for n, h, p in desc.controllers} == {
        (n, str(a)) for n, a in cluster.addresses.items()
    }


def test_describe_quorum_client_reports_endpoints_and_static_voter_keys(
    cluster: LocalCluster,
) -> None:
    report = asyncio.run(describe_quorum(list(cluster.addresses.values())))
    assert report.cluster_id == cluster.cluster_id
    assert {v.replica for v in report.description.voters} == {
        ReplicaKey(NodeId(n)) for n in cluster.node_ids
    }  # no directory ids: a static voter set has none (Kafka reports the zero id)
    assert {
        (n.node_id, n.listeners[0].name, f"{n.listeners[0].host}:{n.listeners[0].port}")
        for n in report.nodes
    } == {(n, "CONTROLLER", str(a)) for n, a in cluster.addresses.items()}


def test_update_raft_voter_is_answered_as_a_static_kafka_leader_does(
    cluster: LocalCluster,
) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    assert lead is not None
    follower = next(n for n in cluster.node_ids if n != lead.node_id)  # type: ignore[attr-defined]
    request: MessageDict = {
        "cluster_id": cluster.cluster_id,
        "current_leader_epoch": lead.epoch,  # type: ignore[attr-defined]
        "voter_id": follower,
        "voter_directory_id": uuid.UUID(int=7),
        "listeners": [{"name": "CONTROLLER", "host": "127.0.0.1", "port": 1}],
        "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
    }
    got = _ask(cluster.addresses[lead.node_id], ApiKey.UPDATE_RAFT_VOTER, 0, request)  # type: ignore[attr-defined]
    assert got["error_code"] == ErrorCode.NONE
    assert got["current_leader"]["leader_id"] == lead.node_id  # type: ignore[attr-defined, index]
    elsewhere = _ask(cluster.addresses[follower], ApiKey.UPDATE_RAFT_VOTER, 0, request)
    assert elsewhere["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    _still_serves(cluster, cluster.addresses[lead.node_id])  # type: ignore[attr-defined]


def test_consumer_fetch_v17_carries_the_leader_endpoint(cluster: LocalCluster) -> None:
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    follower = next(n for n in cluster.node_ids if n != lead.node_id)  # type: ignore[attr-defined]
    req = FetchRequest(
        ClusterId(""), ReplicaKey(NodeId(-1)), Epoch(-1), Offset(0), Epoch(-1), Offset(-1)
    )
    key, version, body = request_to_wire(req, version=17)
    got = _ask(cluster.addresses[follower], key, version, body)
    leader_address = cluster.addresses[lead.node_id]  # type: ignore[attr-defined]
    assert got["node_endpoints"] == [
        {
            "node_id": lead.node_id,  # type: ignore[attr-defined]
            "host": leader_address.host,
            "port": leader_address.port,
            "rack": None,
        }
    ]


def test_a_pre_vote_gets_a_vote_answer_not_invalid_request(cluster: LocalCluster) -> None:
    address = _leader_address(cluster)
    i = kraft_info(address)
    assert i is not None
    vote = VoteRequest(
        cluster.cluster_id,
        ReplicaKey(NodeId(9)),
        Epoch(i.epoch + 1),
        Epoch(0),
        Offset(0),
        pre_vote=True,
    )
    key, version, body = request_to_wire(vote, version=2)
    got = _ask(address, key, version, body)
    assert got["error_code"] == ErrorCode.NONE
    partition = got["topics"][0]["partitions"][0]  # type: ignore[index]
    assert partition["error_code"] != ErrorCode.INVALID_REQUEST  # type: ignore[index]


def test_quorum_state_v0_has_kafkas_empty_cluster_id(cluster: LocalCluster) -> None:
    wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    for n in cluster.node_ids:
        text = (cluster.data_dir(n) / "__cluster_metadata-0" / "quorum-state").read_text()
        assert text.startswith('{"clusterId":"",')
