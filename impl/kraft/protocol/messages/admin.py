"""The schemas of the APIs a controller serves beside the quorum RPCs: ApiVersions,
DescribeCluster, AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter.

Facts (field order, types, versions, nullability, tags, defaults) follow Apache Kafka's message
definitions; names are our snake_case spellings. Each API lists the versions we support.
"""

from __future__ import annotations

from typing import Final

from kraft.protocol.messages.dsl import (
    ALL,
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    array,
    endpoints,
    spec,
    struct,
)
from kraft.protocol.schema import Field, V

API_VERSIONS: Final = spec(
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

DESCRIBE_CLUSTER: Final = spec(
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

ADD_RAFT_VOTER: Final = spec(
    80,
    "AddRaftVoter",
    (0, 1),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("timeout_ms", INT32, ALL),
        Field("voter_id", INT32, ALL),
        Field("voter_directory_id", UUID, ALL),
        endpoints("listeners", 0, ignorable=False),
        # v1 (KIP-1186): false asks for the answer once the change is appended, not committed.
        Field("ack_when_committed", BOOL, V(1), default=True),
    ),
    rsp=_VOTER_CHANGE_RESPONSE,
)

REMOVE_RAFT_VOTER: Final = spec(
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

UPDATE_RAFT_VOTER: Final = spec(
    82,
    "UpdateRaftVoter",
    (0, 0),
    0,
    req=(
        Field("cluster_id", STRING, ALL, nullable=ALL, default=None),
        Field("current_leader_epoch", INT32, ALL),
        Field("voter_id", INT32, ALL),
        Field("voter_directory_id", UUID, ALL),
        endpoints("listeners", 0, ignorable=False),
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
