"""kraft.protocol.rpc.describe_quorum: the leader's quorum description <-> DescribeQuorum.

Round trips go through bytes at every version; refusals are Kafka's (its error messages,
the partitions asked about echoed back).
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import (
    ApiKey,
    RequestHeader,
    decode_request_payload,
    decode_response,
    decode_response_payload,
    encode_request_payload,
    encode_response,
    encode_response_payload,
)
from kraft.protocol.rpc import (
    KRAFT_VERSIONS,
    Listener,
    NodeEndpoints,
    WireTranslationError,
    check_describe_quorum_request,
    describe_quorum_error_response,
    describe_quorum_from_wire,
    describe_quorum_nodes_from_wire,
    describe_quorum_request,
    describe_quorum_response,
    error_response,
    with_voter_set_keys,
)

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAT64 = st.integers(0, 2**63 - 1)
node_ids = I32.map(NodeId)
epochs = I32.map(Epoch)
dirs = st.uuids().map(DirectoryId) | st.just(NO_DIRECTORY)


def versions(key: ApiKey) -> list[int]:
    lo, hi = KRAFT_VERSIONS[key]
    return list(range(lo, hi + 1))


replica_descriptions = st.builds(
    ReplicaDescription,
    st.builds(ReplicaKey, node_ids, dirs),
    I64,
    I64,
    I64,
)
descriptions = st.builds(
    QuorumDescription,
    node_ids,
    epochs,
    st.none() | NAT64.map(Offset),
    st.lists(replica_descriptions, max_size=3).map(tuple),
    st.lists(replica_descriptions, max_size=3).map(tuple),
)


def carried_description(d: QuorumDescription, version: int) -> QuorumDescription:
    def one(r: ReplicaDescription) -> ReplicaDescription:
        if version < 1:  # timestamps arrived in v1
            r = dataclasses.replace(r, last_fetch_timestamp_ms=-1, last_caught_up_timestamp_ms=-1)
        if version < 2:  # directory ids arrived in v2 (KIP-853)
            r = dataclasses.replace(r, replica=ReplicaKey(r.replica.id))
        return r

    return dataclasses.replace(
        d, voters=tuple(map(one, d.voters)), observers=tuple(map(one, d.observers))
    )


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_QUORUM))
def test_describe_quorum_round_trip(version: int) -> None:
    request = describe_quorum_request()
    wire = encode_request_payload(RequestHeader(ApiKey.DESCRIBE_QUORUM, version, 1), request)
    _, decoded_request = decode_request_payload(wire)
    check_describe_quorum_request(decoded_request)

    @settings(max_examples=30)
    @given(descriptions)
    def check(d: QuorumDescription) -> None:
        body = describe_quorum_response(d, version)
        out = encode_response_payload(ApiKey.DESCRIBE_QUORUM, version, 1, body)
        _, decoded = decode_response_payload(ApiKey.DESCRIBE_QUORUM, version, out)
        assert describe_quorum_from_wire(version, decoded) == (
            ErrorCode.NONE,
            carried_description(d, version),
        )

    check()


def test_describe_quorum_request_for_another_partition_is_refused() -> None:
    body = describe_quorum_request()
    body["topics"][0]["partitions"][0]["partition_index"] = 1  # type: ignore[index]
    with pytest.raises(WireTranslationError):
        check_describe_quorum_request(body)


def test_describe_quorum_error_reads_back() -> None:
    body = error_response(ApiKey.DESCRIBE_QUORUM, 2, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert describe_quorum_from_wire(2, body) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)


# Leader 1 in epoch 3, high watermark 7; one voter (id 1, no directory, LEO 7, fetched at
# 100 and caught up at 90), no observers; node 1 at CONTROLLER://h:9093.
DESCRIBE_QUORUM_V2_BYTES = bytes.fromhex(
    "0000"  # error_code
    + "01"  # error_message "" (compact string of length 0), as Kafka sends it
    + "02"
    + "13"
    + b"__cluster_metadata".hex()  # topics: 1; topic_name
    + "02"  # partitions: 1
    + "00000000"  # partition_index
    + "0000"  # error_code
    + "01"  # error_message ""
    + "00000001"  # leader_id 1
    + "00000003"  # leader_epoch 3
    + "0000000000000007"  # high_watermark 7
    + "02"  # current_voters: 1
    + "00000001"  # replica_id 1
    + "00" * 16  # replica_directory_id: none
    + "0000000000000007"  # log_end_offset 7
    + "0000000000000064"  # last_fetch_timestamp 100
    + "000000000000005a"  # last_caught_up_timestamp 90
    + "00"  # tagged fields (voter)
    + "01"  # observers: none
    + "00"
    + "00"  # tagged fields: partition, topic
    + "02"  # nodes: 1
    + "00000001"  # node_id 1
    + "02"  # listeners: 1
    + "0b"
    + b"CONTROLLER".hex()  # name
    + "02"
    + b"h".hex()  # host
    + "2385"  # port 9093 (uint16)
    + "00"
    + "00"  # tagged fields: listener, node
    + "00"  # tagged fields (response)
)


def test_describe_quorum_v2_carries_the_voters_endpoints() -> None:
    """KIP-853: DescribeQuorum v2 adds `Nodes`, the endpoints of the replicas described."""
    voter = ReplicaDescription(ReplicaKey(NodeId(1)), 7, 100, 90)
    desc = QuorumDescription(NodeId(1), Epoch(3), Offset(7), (voter,), ())
    nodes = [NodeEndpoints(NodeId(1), (Listener("CONTROLLER", "h", 9093),))]
    body = describe_quorum_response(desc, 2, nodes)
    assert encode_response(ApiKey.DESCRIBE_QUORUM, 2, body) == DESCRIBE_QUORUM_V2_BYTES
    decoded = decode_response(ApiKey.DESCRIBE_QUORUM, 2, DESCRIBE_QUORUM_V2_BYTES)
    assert describe_quorum_from_wire(2, decoded) == (ErrorCode.NONE, desc)
    assert describe_quorum_nodes_from_wire(2, decoded) == tuple(nodes)
    # Before v2 there is no list to fill.
    assert describe_quorum_nodes_from_wire(1, describe_quorum_response(desc, 1, nodes)) == ()


def test_voters_are_reported_by_their_voter_set_key_as_kafka_does() -> None:
    """A Kafka leader of a static quorum reports every voter with the zero directory id (its
    voter set, from controller.quorum.voters, has none), even after the voter fetched with
    its real directory id; an observer keeps the id it fetched with."""
    fetched = ReplicaKey(NodeId(2), DirectoryId(uuid.UUID(int=9)))
    voter = ReplicaDescription(fetched, 7, 100, 90)
    observer = ReplicaDescription(ReplicaKey(NodeId(5), DirectoryId(uuid.UUID(int=8))), 7, 1, 1)
    desc = QuorumDescription(NodeId(2), Epoch(3), Offset(7), (voter,), (observer,))
    shown = with_voter_set_keys(desc, [ReplicaKey(NodeId(1)), ReplicaKey(NodeId(2))])
    assert shown.voters == (dataclasses.replace(voter, replica=ReplicaKey(NodeId(2))),)
    assert shown.observers == (observer,)
    wire = describe_quorum_response(shown, 2)
    assert wire["topics"][0]["partitions"][0]["current_voters"][0]["replica_directory_id"] == (  # type: ignore[index]
        uuid.UUID(int=0)
    )


def test_describe_quorum_refusals_are_kafkas() -> None:
    """What Kafka 4.3.1's DescribeQuorumResponse.singletonErrorResponse and
    DescribeQuorumRequest.getPartitionLevelErrorResponse build: the error on the partition,
    Kafka's message, zeros elsewhere, NONE at the top."""
    follower = describe_quorum_error_response(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    wire = decode_response(
        ApiKey.DESCRIBE_QUORUM, 2, encode_response(ApiKey.DESCRIBE_QUORUM, 2, follower)
    )
    assert wire["error_code"] == 0 and wire["error_message"] == ""
    [topic] = wire["topics"]  # type: ignore[misc]
    assert topic["topic_name"] == "__cluster_metadata"
    [p] = topic["partitions"]
    assert (p["partition_index"], p["error_code"]) == (0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert (p["leader_id"], p["leader_epoch"]) == (0, 0)
    assert p["high_watermark"] == 0 and p["current_voters"] == [] and p["observers"] == []
    assert p["error_message"].startswith("For requests intended only for the leader")
    assert describe_quorum_from_wire(2, wire) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
    request = {"topics": [{"topic_name": "x", "partitions": [{"partition_index": 3}]}]}
    other = describe_quorum_error_response(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, request)
    assert other["topics"] == [
        {
            "topic_name": "x",
            "partitions": [
                {
                    "partition_index": 3,
                    "error_code": 3,
                    "error_message": "This server does not host this topic-partition.",
                    "leader_id": 0,
                    "leader_epoch": 0,
                    "high_watermark": 0,
                }
            ],
        }
    ]


def test_a_leader_lists_voters_and_observers_in_kafkas_hash_map_order() -> None:
    """Kafka's leader answers with its LeaderState maps' values: voters from a HashMap by id,
    observers from a HashMap by ReplicaKey (kraft.core.java_order), so Kafka's tool prints
    them in that order; a kraft leader answers in the same order."""
    from kraft.protocol.rpc import in_kafka_order

    def replica(n: int, directory: int) -> ReplicaDescription:
        return ReplicaDescription(
            ReplicaKey(NodeId(n), DirectoryId(uuid.UUID(int=directory))), 5, 1, 1
        )

    # Voters 1, 2 and 17 of a table of 16: 17 shares 1's bucket.
    voters = tuple(replica(n, n) for n in (1, 2, 17))
    # Observers hash to 31 * (31 + id) + directory: 4 with 13 (1098, bucket 10), 5 with 0
    # ("no directory", 1116, bucket 12), 6 with 5 (1152, bucket 0).
    observers = (replica(4, 13), replica(5, 0), replica(6, 5))
    d = QuorumDescription(NodeId(1), Epoch(3), Offset(5), voters, observers)
    ordered = in_kafka_order(d)
    assert [r.replica.id for r in ordered.voters] == [1, 17, 2]
    assert [r.replica.id for r in ordered.observers] == [6, 4, 5]
    assert (ordered.leader_id, ordered.leader_epoch, ordered.high_watermark) == (1, 3, 5)
