"""DescribeCluster, answered as an Apache Kafka 4.3.1 controller answers it (the expected
answers were read off a real one; see the wire report). The voter-change APIs are the core's
now: tests/unit/test_reconfig_static.py has their static-quorum answers."""

from __future__ import annotations

import random

import pytest

from kraft.errors import ErrorCode
from kraft.ids import ClusterId, NodeId
from kraft.protocol import (
    NODE_APIS,
    SUPPORTED_APIS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from kraft.protocol.client_api import KRAFT_APPEND_KEY, KRAFT_GET_KEY, KRAFT_NODE_INFO_KEY
from kraft.protocol.rpc import Listener, NodeEndpoints
from kraft.protocol.values import MessageDict
from kraft.server.controller_apis import (
    ALL_CLUSTER_OPERATIONS,
    ClusterDescription,
    describe_cluster_from_wire,
    describe_cluster_request,
    describe_cluster_response,
    pick_controller_id,
)

CLUSTER = ClusterId("MkU3OEVBNTcwNTJENDM2Qg")
CONTROLLERS = (
    NodeEndpoints(NodeId(1), (Listener("CONTROLLER", "h", 9093),)),
    NodeEndpoints(NodeId(2), (Listener("CONTROLLER", "h", 9094),)),
)


def _describe(version: int, request: MessageDict, controller_id: int = 1) -> MessageDict:
    return describe_cluster_response(
        version,
        request,
        cluster_id=CLUSTER,
        controller_id=NodeId(controller_id),
        controllers=CONTROLLERS,
        listener_name="CONTROLLER",
    )


# A DescribeCluster v2 request asking a controller about controllers, without operations.
DESCRIBE_CLUSTER_V2_REQUEST = bytes.fromhex(
    "00"  # include_cluster_authorized_operations false
    "02"  # endpoint_type 2: controllers (v1+)
    "00"  # include_fenced_brokers false (v2+)
    "00"  # tagged fields
)

# The answer: leader 1 of two controllers.
DESCRIBE_CLUSTER_V2_RESPONSE = bytes.fromhex(
    "00000000"  # throttle_time_ms
    + "0000"  # error_code
    + "00"  # error_message: null
    + "02"  # endpoint_type 2 (v1+)
    + "17"
    + CLUSTER.encode().hex()  # cluster_id: compact string of 22
    + "00000001"  # controller_id 1
    + "03"  # brokers: compact array of 2
    + "00000001"
    + "02"
    + b"h".hex()
    + "00002385"
    + "00"
    + "00"
    + "00"  # 1, h, 9093, null rack,
    + "00000002"
    + "02"
    + b"h".hex()
    + "00002386"
    + "00"
    + "00"
    + "00"  # not fenced, no tags
    + "80000000"  # cluster_authorized_operations: not requested (INT32_MIN)
    + "00"  # tagged fields
)


def test_describe_cluster_v2_golden() -> None:
    """KIP-919: a controller answers DescribeCluster with endpoint type 2 and lists the
    controllers as its "brokers"; the controller id is the active controller."""
    request = decode_request(ApiKey.DESCRIBE_CLUSTER, 2, DESCRIBE_CLUSTER_V2_REQUEST)
    assert request == describe_cluster_request()
    assert encode_request(ApiKey.DESCRIBE_CLUSTER, 2, request) == DESCRIBE_CLUSTER_V2_REQUEST
    body = _describe(2, request)
    assert encode_response(ApiKey.DESCRIBE_CLUSTER, 2, body) == DESCRIBE_CLUSTER_V2_RESPONSE
    decoded = decode_response(ApiKey.DESCRIBE_CLUSTER, 2, DESCRIBE_CLUSTER_V2_RESPONSE)
    assert describe_cluster_from_wire(decoded) == (
        ErrorCode.NONE,
        None,
        ClusterDescription(CLUSTER, NodeId(1), ((NodeId(1), "h", 9093), (NodeId(2), "h", 9094))),
    )


def test_describe_cluster_reports_operations_only_when_asked() -> None:
    request = {**describe_cluster_request(), "include_cluster_authorized_operations": True}
    assert _describe(2, request)["cluster_authorized_operations"] == ALL_CLUSTER_OPERATIONS
    assert ALL_CLUSTER_OPERATIONS == 8096  # what Kafka 4.3.1 answers with no authorizer


@pytest.mark.parametrize(
    ("version", "endpoint_type", "error", "message"),
    [
        (
            1,
            1,
            ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint "
            "of type BROKER",
        ),
        (1, 7, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE, "Unsupported endpoint type 7"),
        # v0 has no endpoint type: it asks for brokers, and its error is INVALID_REQUEST.
        (
            0,
            1,
            ErrorCode.INVALID_REQUEST,
            "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint "
            "of type BROKER",
        ),
    ],
)
def test_describe_cluster_for_brokers_or_unknown_types_is_refused_as_kafka_does(
    version: int, endpoint_type: int, error: ErrorCode, message: str
) -> None:
    request = {"include_cluster_authorized_operations": False, "endpoint_type": endpoint_type}
    body = _describe(version, request)
    wire = decode_response(
        ApiKey.DESCRIBE_CLUSTER, version, encode_response(ApiKey.DESCRIBE_CLUSTER, version, body)
    )
    assert wire["error_code"] == error
    assert wire["error_message"] == message
    assert wire["cluster_id"] == "" and wire["controller_id"] == -1 and wire["brokers"] == []


def test_controller_id_is_the_leader_else_a_controller() -> None:
    rng = random.Random(4)
    assert pick_controller_id(NodeId(2), CONTROLLERS, rng) == 2
    picks = {pick_controller_id(None, CONTROLLERS, rng) for _ in range(32)}
    assert picks == {1, 2}
    assert pick_controller_id(NodeId(9), CONTROLLERS[:1], rng) == 1
    assert pick_controller_id(None, (), rng) == -1


def test_node_advertises_describe_cluster_update_voter_and_private_apis() -> None:
    """Kafka 4.3.1's controller advertises DescribeCluster 0-2 and UpdateRaftVoter 0-0."""
    assert SUPPORTED_APIS[ApiKey.DESCRIBE_CLUSTER] == (0, 2)
    assert SUPPORTED_APIS[ApiKey.UPDATE_RAFT_VOTER] == (0, 0)
    assert KRAFT_APPEND_KEY not in SUPPORTED_APIS
    assert NODE_APIS == {
        **SUPPORTED_APIS,
        KRAFT_APPEND_KEY: (0, 1),  # v1: keyed records, nullable values
        KRAFT_NODE_INFO_KEY: (0, 0),
        KRAFT_GET_KEY: (0, 0),
    }
