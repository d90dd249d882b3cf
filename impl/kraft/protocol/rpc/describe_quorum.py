"""DescribeQuorum (API key 55, KIP-595/853): the leader's `QuorumDescription` <-> the wire.

Not a core RPC: the listener answers it from the replica's description, and clients (the
`kraft` command, tests) read the answer. Only __cluster_metadata-0 can be asked about.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from kraft.core.java_order import hash_order, replica_key_hash
from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, NodeId, Offset, ReplicaKey
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.rpc.common import (
    InvalidWireResponseError,
    Listener,
    NodeEndpoints,
    UntranslatableVersionError,
    WireTranslationError,
    directory_of,
    error_of,
    leader_of,
    listeners_to_wire,
    metadata_partition,
    one_topic,
    translating,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.topic_ids import METADATA_PARTITION, METADATA_TOPIC_NAME
from kraft.protocol.values import FieldValue, Message, MessageDict, get_int, get_str, get_structs

__all__ = [
    "DESCRIBE_QUORUM_VERSIONS",
    "KAFKA_ERROR_MESSAGES",
    "check_describe_quorum_request",
    "describe_quorum_error_response",
    "describe_quorum_from_wire",
    "describe_quorum_nodes_from_wire",
    "describe_quorum_request",
    "describe_quorum_response",
    "with_voter_set_keys",
]

DESCRIBE_QUORUM_VERSIONS: Final = SUPPORTED_APIS[ApiKey.DESCRIBE_QUORUM]

# Apache Kafka's messages for the errors it puts in DescribeQuorum answers (Errors.message()).
KAFKA_ERROR_MESSAGES: Final[dict[ErrorCode, str]] = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: (
        "For requests intended only for the leader, this error indicates that the broker is "
        "not the current leader. For requests intended for any replica, this error indicates "
        "that the broker is not a replica of the topic partition."
    ),
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
}


def _check_version(version: int, error: type[WireTranslationError]) -> None:
    lo, hi = DESCRIBE_QUORUM_VERSIONS
    if not lo <= version <= hi:
        raise error(f"DESCRIBE_QUORUM v{version} is outside the KRaft range v{lo}-v{hi}")


def _partition(body: Message, error: type[WireTranslationError]) -> Message:
    return metadata_partition(
        body, "topics", "topic_name", "partitions", "partition_index", error=error
    )


def describe_quorum_request() -> MessageDict:
    """DescribeQuorum asks about __cluster_metadata-0 (the same at every version)."""
    return {"topics": [{"topic_name": METADATA_TOPIC_NAME, "partitions": [{"partition_index": 0}]}]}


def describe_quorum_error_response(error: ErrorCode, request: Message | None = None) -> MessageDict:
    """Kafka's DescribeQuorum refusal: the error on each partition asked about (the request's,
    or __cluster_metadata-0 without one), with Kafka's message and otherwise zero fields; the
    top level says NONE. A follower answers so (NOT_LEADER_OR_FOLLOWER, no leader named), as
    does any node asked about another partition (UNKNOWN_TOPIC_OR_PARTITION)."""

    def partition(index: FieldValue) -> MessageDict:
        return {
            "partition_index": index,
            "error_code": int(error),
            "error_message": KAFKA_ERROR_MESSAGES.get(error, ""),
            "leader_id": 0,
            "leader_epoch": 0,
            "high_watermark": 0,
        }

    asked = describe_quorum_request() if request is None else request
    topics: list[MessageDict] = []
    for t in get_structs(asked, "topics"):
        parts = [partition(p.get("partition_index", 0)) for p in get_structs(t, "partitions")]
        topics.append({"topic_name": t.get("topic_name", ""), "partitions": parts})
    return {"error_code": 0, "error_message": "", "topics": topics}


def check_describe_quorum_request(body: Message) -> None:
    """Raises WireTranslationError unless the request is about __cluster_metadata-0."""
    translating(lambda: _partition(body, WireTranslationError), WireTranslationError)


def _replica_state(r: ReplicaDescription, version: int) -> MessageDict:
    # The directory id is not ignorable: Kafka sets it only from v2 (KIP-853).
    return {
        "replica_id": r.replica.id,
        "replica_directory_id": r.replica.directory_id if version >= 2 else NO_DIRECTORY,
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp_ms,
        "last_caught_up_timestamp": r.last_caught_up_timestamp_ms,
    }


def describe_quorum_response(
    description: QuorumDescription, version: int, nodes: Sequence[NodeEndpoints] = ()
) -> MessageDict:
    """The leader's answer. A high watermark not yet known is -1, as in Kafka. From v2, `nodes`
    lists the voters' endpoints (Kafka lists the voter set's, observers have none) and the
    error messages are "" as Kafka sends them, not null."""
    _check_version(version, UntranslatableVersionError)
    hwm = description.high_watermark
    return {
        "error_code": 0,
        "error_message": "",
        "topics": [
            one_topic(
                "topic_name",
                "partitions",
                partition_index=METADATA_PARTITION,
                error_code=0,
                error_message="",
                leader_id=description.leader_id,
                leader_epoch=description.leader_epoch,
                high_watermark=-1 if hwm is None else hwm,
                current_voters=[_replica_state(r, version) for r in description.voters],
                observers=[_replica_state(r, version) for r in description.observers],
            )
        ],
        "nodes": [
            {"node_id": n.node_id, "listeners": listeners_to_wire(n.listeners)} for n in nodes
        ],
    }


def with_voter_set_keys(
    description: QuorumDescription, voter_set: Sequence[ReplicaKey]
) -> QuorumDescription:
    """The description with each voter named by its key in the voter set, as Kafka's leader
    reports voters. A static voter set (`controller.quorum.voters`, kraft.version 0) has no
    directory ids, so Kafka reports the zero id for every voter whatever directory its Fetch
    carried; observers keep the key they fetched with."""
    keys = {k.id: k for k in voter_set}
    voters = tuple(
        dataclasses.replace(r, replica=keys.get(r.replica.id, r.replica))
        for r in description.voters
    )
    return dataclasses.replace(description, voters=voters)


def in_kafka_order(description: QuorumDescription) -> QuorumDescription:
    """The description with its voters and observers in the order a Kafka leader answers:
    the values of its LeaderState's HashMaps, voters by id, observers by ReplicaKey (their
    order of insertion, which decides only within a bucket, is ours: voter-set order, first
    fetch). Kafka's tool prints them in that order."""
    voters = hash_order(description.voters, lambda r: int(r.replica.id))
    observers = hash_order(description.observers, lambda r: replica_key_hash(r.replica))
    return dataclasses.replace(description, voters=tuple(voters), observers=tuple(observers))


def _replica_description(m: Message) -> ReplicaDescription:
    return ReplicaDescription(
        replica=ReplicaKey(
            NodeId(get_int(m, "replica_id")), directory_of(m, "replica_directory_id")
        ),
        log_end_offset=get_int(m, "log_end_offset"),
        last_fetch_timestamp_ms=get_int(m, "last_fetch_timestamp"),
        last_caught_up_timestamp_ms=get_int(m, "last_caught_up_timestamp"),
    )


def describe_quorum_from_wire(
    version: int, body: Message
) -> tuple[ErrorCode, QuorumDescription | None]:
    """The error (top-level first, then the partition's) and, without error, the description."""
    _check_version(version, InvalidWireResponseError)

    def parse() -> tuple[ErrorCode, QuorumDescription | None]:
        top = error_of(body)
        if top is not ErrorCode.NONE:
            return top, None
        p = _partition(body, InvalidWireResponseError)
        err = error_of(p)
        if err is not ErrorCode.NONE:
            return err, None
        leader_id, leader_epoch = leader_of(p)
        hwm = get_int(p, "high_watermark")
        return ErrorCode.NONE, QuorumDescription(
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            high_watermark=None if hwm < 0 else Offset(hwm),
            voters=tuple(_replica_description(r) for r in get_structs(p, "current_voters")),
            observers=tuple(_replica_description(r) for r in get_structs(p, "observers")),
        )

    return translating(parse, InvalidWireResponseError)


def describe_quorum_nodes_from_wire(version: int, body: Message) -> tuple[NodeEndpoints, ...]:
    """The `nodes` of a DescribeQuorum response (none before v2)."""
    _check_version(version, InvalidWireResponseError)

    def parse() -> tuple[NodeEndpoints, ...]:
        if version < 2:
            return ()
        return tuple(
            NodeEndpoints(
                NodeId(get_int(n, "node_id")),
                tuple(
                    Listener(get_str(x, "name"), get_str(x, "host"), get_int(x, "port"))
                    for x in get_structs(n, "listeners")
                ),
            )
            for n in get_structs(body, "nodes")
        )

    return translating(parse, InvalidWireResponseError)
