"""The quorum RPCs' schemas (KIP-595, KIP-853): Vote, BeginQuorumEpoch, EndQuorumEpoch,
DescribeQuorum.

Facts (field order, types, versions, nullability, tags, defaults) follow Apache Kafka's message
definitions; names are our snake_case spellings. Each API lists the versions we support.
"""

from __future__ import annotations

from typing import Final

from kraft.protocol.messages.dsl import (
    ALL,
    BOOL,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    array,
    endpoints,
    node_endpoints,
    spec,
)
from kraft.protocol.schema import ArrayOf, Field, V


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
        node_endpoints(endpoints_since),
    )


VOTE: Final = spec(
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
        node_endpoints(1),
    ),
)

BEGIN_QUORUM_EPOCH: Final = spec(
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
        endpoints("leader_endpoints", 1, ignorable=True),
    ),
    rsp=_leader_change_response(1),
)

END_QUORUM_EPOCH: Final = spec(
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
        endpoints("leader_endpoints", 1, ignorable=True),
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

DESCRIBE_QUORUM: Final = spec(
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
