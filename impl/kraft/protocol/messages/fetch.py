"""The replication RPCs' schemas: Fetch (KIP-595's use of it) and FetchSnapshot (KIP-630).

Facts (field order, types, versions, nullability, tags, defaults) follow Apache Kafka's message
definitions; names are our snake_case spellings. Each API lists the versions we support.
"""

from __future__ import annotations

from typing import Final

from kraft.protocol.messages.dsl import (
    ALL,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    array,
    node_endpoints,
    spec,
    struct,
)
from kraft.protocol.schema import ArrayOf, Field, Struct, V


def _snapshot_id(default: int | None) -> Struct:
    if default is None:
        return struct("SnapshotId", Field("end_offset", INT64, ALL), Field("epoch", INT32, ALL))
    return struct(
        "SnapshotId",
        Field("end_offset", INT64, ALL, default=default),
        Field("epoch", INT32, ALL, default=default),
    )


FETCH_SNAPSHOT: Final = spec(
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
        node_endpoints(1),
    ),
)

FETCH: Final = spec(
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
        node_endpoints(16, INT32, Field("rack", STRING, V(16), nullable=V(16), default=None)),
    ),
)
