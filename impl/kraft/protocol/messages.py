"""The KRaft APIs' message schemas, in our declarative form.

Facts (field order, types, versions, nullability, tags, defaults) follow Apache Kafka's message
definitions; names are our snake_case spellings. Each API lists the versions we support.
"""

from __future__ import annotations

from typing import Final

from kraft.protocol.schema import ApiSpec, ArrayOf, Direction, Field, MessageSpec, Prim, Struct, V

REQ: Final = Direction.REQUEST
RSP: Final = Direction.RESPONSE

BOOL: Final = Prim.BOOL
INT8: Final = Prim.INT8
INT16: Final = Prim.INT16
UINT16: Final = Prim.UINT16
INT32: Final = Prim.INT32
INT64: Final = Prim.INT64
UUID: Final = Prim.UUID
STRING: Final = Prim.STRING
RECORDS: Final = Prim.RECORDS

ALL: Final = V(0)


def array(name: str, *fields: Field) -> ArrayOf:
    return ArrayOf(Struct(name, fields))


def struct(name: str, *fields: Field) -> Struct:
    return Struct(name, fields)


def _spec(
    key: int,
    name: str,
    valid: tuple[int, int],
    flexible: int,
    *,
    req: tuple[Field, ...],
    rsp: tuple[Field, ...],
) -> ApiSpec:
    lo, hi = valid
    return ApiSpec(
        key,
        name,
        MessageSpec(key, name + "Request", REQ, V(lo, hi), V(flexible), req),
        MessageSpec(key, name + "Response", RSP, V(lo, hi), V(flexible), rsp),
    )


def _node_endpoints(since: int, port: Prim = UINT16, *extra: Field) -> Field:
    """The tag-0 endpoint list KIP-853 added to KRaft responses."""
    return Field(
        "node_endpoints",
        array(
            "NodeEndpoint",
            Field("node_id", INT32, V(since)),
            Field("host", STRING, V(since)),
            Field("port", port, V(since)),
            *extra,
        ),
        V(since),
        tag=0,
    )


def _endpoints(name: str, since: int, *, ignorable: bool) -> Field:
    return Field(
        name,
        array(
            "Endpoint",
            Field("name", STRING, V(since)),
            Field("host", STRING, V(since)),
            Field("port", UINT16, V(since)),
        ),
        V(since),
        ignorable=ignorable,
    )


def _leader_change_response(endpoints_since: int) -> tuple[Field, ...]:
    """BeginQuorumEpoch and EndQuorumEpoch responses share this layout."""
    return (
        Field("error_code", INT16, ALL),
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("error_code", INT16, ALL),
                        Field("leader_id", INT32, ALL),
                        Field("leader_epoch", INT32, ALL),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        _node_endpoints(endpoints_since),
    )


VOTE: Final = _spec(
    52,
    "Vote",
    (0, 2),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("voter_id", INT32, V(1), default=-1, ignorable=True),
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("replica_epoch", INT32, ALL),
                        Field("replica_id", INT32, ALL),
                        Field("replica_directory_id", UUID, V(1), ignorable=True),
                        Field("voter_directory_id", UUID, V(1), ignorable=True),
                        Field("last_offset_epoch", INT32, ALL),
                        Field("last_offset", INT64, ALL),
                        # KIP-996: a pre-vote must not silently become a real vote.
                        Field("pre_vote", BOOL, V(2)),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
    ),
    rsp=(
        Field("error_code", INT16, ALL),
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("error_code", INT16, ALL),
                        Field("leader_id", INT32, ALL),
                        Field("leader_epoch", INT32, ALL),
                        Field("vote_granted", BOOL, ALL),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        _node_endpoints(1),
    ),
)

BEGIN_QUORUM_EPOCH: Final = _spec(
    53,
    "BeginQuorumEpoch",
    (0, 1),
    1,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("voter_id", INT32, V(1), default=-1, ignorable=True),
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("voter_directory_id", UUID, V(1), ignorable=True),
                        Field("leader_id", INT32, ALL),
                        Field("leader_epoch", INT32, ALL),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        _endpoints("leader_endpoints", 1, ignorable=True),
    ),
    rsp=_leader_change_response(1),
)

END_QUORUM_EPOCH: Final = _spec(
    54,
    "EndQuorumEpoch",
    (0, 1),
    1,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("leader_id", INT32, ALL),
                        Field("leader_epoch", INT32, ALL),
                        Field("preferred_successors", ArrayOf(INT32), V(0, 0), ignorable=True),
                        Field(
                            "preferred_candidates",
                            array(
                                "ReplicaInfo",
                                Field("candidate_id", INT32, V(1)),
                                Field("candidate_directory_id", UUID, V(1)),
                            ),
                            V(1),
                            ignorable=True,
                        ),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        _endpoints("leader_endpoints", 1, ignorable=True),
    ),
    rsp=_leader_change_response(1),
)

_REPLICA_STATE: Final = array(
    "ReplicaState",
    Field("replica_id", INT32, ALL),
    Field("replica_directory_id", UUID, V(2)),
    Field("log_end_offset", INT64, ALL),
    Field("last_fetch_timestamp", INT64, V(1), default=-1, ignorable=True),
    Field("last_caught_up_timestamp", INT64, V(1), default=-1, ignorable=True),
)

DESCRIBE_QUORUM: Final = _spec(
    55,
    "DescribeQuorum",
    (0, 2),
    0,
    req=(
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array("PartitionData", Field("partition_index", INT32, ALL)),
                    ALL,
                ),
            ),
            ALL,
        ),
    ),
    rsp=(
        Field("error_code", INT16, ALL),
        Field("error_message", STRING, V(2), nullable=V(2), default="", ignorable=True),
        Field(
            "topics",
            array(
                "TopicData",
                Field("topic_name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("error_code", INT16, ALL),
                        Field(
                            "error_message",
                            STRING,
                            V(2),
                            nullable=V(2),
                            default="",  # Kafka's default here is "", not null
                            ignorable=True,
                        ),
                        Field("leader_id", INT32, ALL),
                        Field("leader_epoch", INT32, ALL),
                        Field("high_watermark", INT64, ALL),
                        Field("current_voters", _REPLICA_STATE, ALL),
                        Field("observers", _REPLICA_STATE, ALL),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        Field(
            "nodes",
            array(
                "Node",
                Field("node_id", INT32, V(2)),
                Field(
                    "listeners",
                    array(
                        "Listener",
                        Field("name", STRING, V(2)),
                        Field("host", STRING, V(2)),
                        Field("port", UINT16, V(2)),
                    ),
                    V(2),
                ),
            ),
            V(2),
        ),
    ),
)


def _snapshot_id(default: int | None) -> Struct:
    if default is None:
        return struct("SnapshotId", Field("end_offset", INT64, ALL), Field("epoch", INT32, ALL))
    return struct(
        "SnapshotId",
        Field("end_offset", INT64, ALL, default=default),
        Field("epoch", INT32, ALL, default=default),
    )


FETCH_SNAPSHOT: Final = _spec(
    59,
    "FetchSnapshot",
    (0, 1),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None, tag=0),
        Field("replica_id", INT32, ALL, default=-1),
        Field("max_bytes", INT32, ALL, default=0x7FFFFFFF),
        Field(
            "topics",
            array(
                "TopicSnapshot",
                Field("name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionSnapshot",
                        Field("partition", INT32, ALL),
                        Field("current_leader_epoch", INT32, ALL),
                        Field("snapshot_id", _snapshot_id(None), ALL),
                        Field("position", INT64, ALL),
                        Field("replica_directory_id", UUID, V(1), tag=0, ignorable=True),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
    ),
    rsp=(
        Field("throttle_time_ms", INT32, ALL, ignorable=True),
        Field("error_code", INT16, ALL),
        Field(
            "topics",
            array(
                "TopicSnapshot",
                Field("name", STRING, ALL),
                Field(
                    "partitions",
                    array(
                        "PartitionSnapshot",
                        Field("index", INT32, ALL),
                        Field("error_code", INT16, ALL),
                        Field("snapshot_id", _snapshot_id(None), ALL),
                        Field(
                            "current_leader",
                            struct(
                                "LeaderIdAndEpoch",
                                Field("leader_id", INT32, ALL),
                                Field("leader_epoch", INT32, ALL),
                            ),
                            ALL,
                            tag=0,
                        ),
                        Field("size", INT64, ALL),
                        Field("position", INT64, ALL),
                        Field("unaligned_records", RECORDS, ALL),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        _node_endpoints(1),
    ),
)

FETCH: Final = _spec(
    1,
    "Fetch",
    (4, 17),
    12,
    req=(
        Field("cluster_id", STRING, V(12), nullable=V(12), default=None, tag=0, ignorable=True),
        Field("replica_id", INT32, V(0, 14), default=-1),
        Field(
            "replica_state",
            struct(
                "ReplicaState",
                Field("replica_id", INT32, V(15), default=-1),
                Field("replica_epoch", INT64, V(15), default=-1),
            ),
            V(15),
            tag=1,
        ),
        Field("max_wait_ms", INT32, ALL),
        Field("min_bytes", INT32, ALL),
        Field("max_bytes", INT32, V(3), default=0x7FFFFFFF, ignorable=True),
        Field("isolation_level", INT8, V(4), default=0, ignorable=True),
        Field("session_id", INT32, V(7), default=0, ignorable=True),
        Field("session_epoch", INT32, V(7), default=-1, ignorable=True),
        Field(
            "topics",
            array(
                "FetchTopic",
                Field("topic", STRING, V(0, 12), ignorable=True),
                Field("topic_id", UUID, V(13), ignorable=True),
                Field(
                    "partitions",
                    array(
                        "FetchPartition",
                        Field("partition", INT32, ALL),
                        Field("current_leader_epoch", INT32, V(9), default=-1, ignorable=True),
                        Field("fetch_offset", INT64, ALL),
                        Field("last_fetched_epoch", INT32, V(12), default=-1),
                        Field("log_start_offset", INT64, V(5), default=-1, ignorable=True),
                        Field("partition_max_bytes", INT32, ALL),
                        Field("replica_directory_id", UUID, V(17), tag=0, ignorable=True),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        Field(
            "forgotten_topics_data",
            array(
                "ForgottenTopic",
                Field("topic", STRING, V(7, 12), ignorable=True),
                Field("topic_id", UUID, V(13), ignorable=True),
                Field("partitions", ArrayOf(INT32), V(7)),
            ),
            V(7),
        ),
        Field("rack_id", STRING, V(11), default="", ignorable=True),
    ),
    rsp=(
        Field("throttle_time_ms", INT32, V(1), ignorable=True),
        Field("error_code", INT16, V(7), ignorable=True),
        Field("session_id", INT32, V(7), default=0),
        Field(
            "responses",
            array(
                "FetchableTopicResponse",
                Field("topic", STRING, V(0, 12), ignorable=True),
                Field("topic_id", UUID, V(13), ignorable=True),
                Field(
                    "partitions",
                    array(
                        "PartitionData",
                        Field("partition_index", INT32, ALL),
                        Field("error_code", INT16, ALL),
                        Field("high_watermark", INT64, ALL),
                        Field("last_stable_offset", INT64, V(4), default=-1, ignorable=True),
                        Field("log_start_offset", INT64, V(5), default=-1, ignorable=True),
                        Field(
                            "diverging_epoch",
                            struct(
                                "EpochEndOffset",
                                Field("epoch", INT32, V(12), default=-1),
                                Field("end_offset", INT64, V(12), default=-1),
                            ),
                            V(12),
                            tag=0,
                        ),
                        Field(
                            "current_leader",
                            struct(
                                "LeaderIdAndEpoch",
                                Field("leader_id", INT32, V(12), default=-1),
                                Field("leader_epoch", INT32, V(12), default=-1),
                            ),
                            V(12),
                            tag=1,
                        ),
                        Field("snapshot_id", _snapshot_id(-1), V(12), tag=2),
                        Field(
                            "aborted_transactions",
                            array(
                                "AbortedTransaction",
                                Field("producer_id", INT64, V(4)),
                                Field("first_offset", INT64, V(4)),
                            ),
                            V(4),
                            nullable=V(4),
                            ignorable=True,
                        ),
                        Field("preferred_read_replica", INT32, V(11), default=-1),
                        Field("records", RECORDS, ALL, nullable=ALL, default=None),
                    ),
                    ALL,
                ),
            ),
            ALL,
        ),
        _node_endpoints(16, INT32, Field("rack", STRING, V(16), nullable=V(16), default=None)),
    ),
)

API_VERSIONS: Final = _spec(
    18,
    "ApiVersions",
    (0, 4),
    3,
    req=(
        Field("client_software_name", STRING, V(3), ignorable=True),
        Field("client_software_version", STRING, V(3), ignorable=True),
    ),
    rsp=(
        Field("error_code", INT16, ALL),
        Field(
            "api_keys",
            array(
                "ApiVersion",
                Field("api_key", INT16, ALL),
                Field("min_version", INT16, ALL),
                Field("max_version", INT16, ALL),
            ),
            ALL,
        ),
        Field("throttle_time_ms", INT32, V(1), ignorable=True),
        Field(
            "supported_features",
            array(
                "SupportedFeatureKey",
                Field("name", STRING, V(3)),
                Field("min_version", INT16, V(3)),
                Field("max_version", INT16, V(3)),
            ),
            V(3),
            tag=0,
            ignorable=True,
        ),
        Field("finalized_features_epoch", INT64, V(3), default=-1, tag=1, ignorable=True),
        Field(
            "finalized_features",
            array(
                "FinalizedFeatureKey",
                Field("name", STRING, V(3)),
                Field("max_version_level", INT16, V(3)),
                Field("min_version_level", INT16, V(3)),
            ),
            V(3),
            tag=2,
            ignorable=True,
        ),
        Field("zk_migration_ready", BOOL, V(3), default=False, tag=3, ignorable=True),
    ),
)

DESCRIBE_CLUSTER: Final = _spec(
    60,
    "DescribeCluster",
    (0, 2),
    0,
    req=(
        Field("include_cluster_authorized_operations", BOOL, ALL),
        # 1 = brokers, 2 = controllers (KIP-919); a controller answers only type 2.
        Field("endpoint_type", INT8, V(1), default=1),
        Field("include_fenced_brokers", BOOL, V(2)),
    ),
    rsp=(
        Field("throttle_time_ms", INT32, ALL),
        Field("error_code", INT16, ALL),
        Field("error_message", STRING, ALL, nullable=ALL, default=None),
        Field("endpoint_type", INT8, V(1), default=1),
        Field("cluster_id", STRING, ALL),
        Field("controller_id", INT32, ALL, default=-1),
        Field(
            "brokers",
            array(
                "DescribeClusterBroker",
                Field("broker_id", INT32, ALL),
                Field("host", STRING, ALL),
                Field("port", INT32, ALL),
                Field("rack", STRING, ALL, nullable=ALL, default=None),
                Field("is_fenced", BOOL, V(2)),
            ),
            ALL,
        ),
        Field("cluster_authorized_operations", INT32, ALL, default=-(2**31)),
    ),
)

_VOTER_CHANGE_RESPONSE: Final = (
    Field("throttle_time_ms", INT32, ALL),
    Field("error_code", INT16, ALL),
    Field("error_message", STRING, ALL, nullable=ALL, default=None, ignorable=True),
)

ADD_RAFT_VOTER: Final = _spec(
    80,
    "AddRaftVoter",
    (0, 1),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("timeout_ms", INT32, ALL),
        Field("voter_id", INT32, ALL),
        Field("voter_directory_id", UUID, ALL),
        _endpoints("listeners", 0, ignorable=False),
        # v1 (KIP-1186): false asks for the answer once the change is appended, not committed.
        Field("ack_when_committed", BOOL, V(1), default=True),
    ),
    rsp=_VOTER_CHANGE_RESPONSE,
)

REMOVE_RAFT_VOTER: Final = _spec(
    81,
    "RemoveRaftVoter",
    (0, 0),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("voter_id", INT32, ALL),
        Field("voter_directory_id", UUID, ALL),
    ),
    rsp=_VOTER_CHANGE_RESPONSE,
)

UPDATE_RAFT_VOTER: Final = _spec(
    82,
    "UpdateRaftVoter",
    (0, 0),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("current_leader_epoch", INT32, ALL),
        Field("voter_id", INT32, ALL),
        Field("voter_directory_id", UUID, ALL),
        _endpoints("listeners", 0, ignorable=False),
        Field(
            "kraft_version_feature",
            struct(
                "KRaftVersionFeature",
                Field("min_supported_version", INT16, ALL),
                Field("max_supported_version", INT16, ALL),
            ),
            ALL,
        ),
    ),
    rsp=(
        Field("throttle_time_ms", INT32, ALL),
        Field("error_code", INT16, ALL),
        Field(
            "current_leader",
            struct(
                "CurrentLeader",
                Field("leader_id", INT32, ALL, default=-1),
                Field("leader_epoch", INT32, ALL, default=-1),
                Field("host", STRING, ALL),
                Field("port", INT32, ALL),
            ),
            ALL,
            tag=0,
        ),
    ),
)

APIS: Final[dict[int, ApiSpec]] = {
    spec.api_key: spec
    for spec in (
        FETCH,
        API_VERSIONS,
        VOTE,
        BEGIN_QUORUM_EPOCH,
        END_QUORUM_EPOCH,
        DESCRIBE_QUORUM,
        FETCH_SNAPSHOT,
        DESCRIBE_CLUSTER,
        ADD_RAFT_VOTER,
        REMOVE_RAFT_VOTER,
        UPDATE_RAFT_VOTER,
    )
}
