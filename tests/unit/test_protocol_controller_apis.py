"""DescribeCluster and UpdateRaftVoter, answered as an Apache Kafka 4.3.1 controller of a static
quorum answers them (the expected answers were read off a real one; see the wire report)."""

from __future__ import annotations

import random
import uuid

import pytest

from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId
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
    LeaderSnapshot,
    add_voter_response,
    describe_cluster_from_wire,
    describe_cluster_request,
    describe_cluster_response,
    pick_controller_id,
    remove_voter_response,
    update_voter_response,
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


# --- UpdateRaftVoter -----------------------------------------------------------------------

LEADER = LeaderSnapshot(
    cluster_id=CLUSTER,
    epoch=Epoch(2),
    is_leader=True,
    leader_id=NodeId(1),
    leader_listener=Listener("CONTROLLER", "h", 9093),
    high_watermark_known=True,
    voters=(NodeId(1), NodeId(2)),
    listener_name="CONTROLLER",
)


def _update(**changes: object) -> MessageDict:
    request: MessageDict = {
        "cluster_id": CLUSTER,
        "current_leader_epoch": 2,
        "voter_id": 2,
        "voter_directory_id": uuid.UUID(int=5),
        "listeners": [{"name": "CONTROLLER", "host": "h", "port": 9094}],
        "kraft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
    }
    request.update(changes)  # type: ignore[arg-type]
    return request


# UpdateRaftVoter v0 response: VOTER_NOT_FOUND, leader 1 in epoch 2 at h:9093.
UPDATE_VOTER_RESPONSE = bytes.fromhex(
    "00000000"  # throttle_time_ms
    + "007f"  # error_code 127: VOTER_NOT_FOUND
    + "01"  # tagged fields: 1
    + "00"  # tag 0: current_leader
    + "0f"  # its size: 15 bytes
    + "00000001"  # leader_id 1
    + "00000002"  # leader_epoch 2
    + "02"
    + b"h".hex()  # host "h"
    + "00002385"  # port 9093 (int32)
    + "00"  # the struct's tagged fields
)


def test_update_voter_response_golden() -> None:
    body = update_voter_response(_update(voter_id=7), LEADER)
    assert encode_response(ApiKey.UPDATE_RAFT_VOTER, 0, body) == UPDATE_VOTER_RESPONSE
    assert decode_response(ApiKey.UPDATE_RAFT_VOTER, 0, UPDATE_VOTER_RESPONSE) == body


def _error(request: MessageDict, s: LeaderSnapshot = LEADER) -> ErrorCode:
    return ErrorCode(update_voter_response(request, s)["error_code"])  # type: ignore[arg-type]


def test_a_static_leader_accepts_a_voters_update() -> None:
    """Kafka at kraft.version 0 keeps the update in memory and answers NONE at once."""
    assert _error(_update()) is ErrorCode.NONE
    assert _error(_update(cluster_id=None)) is ErrorCode.NONE  # no cluster id: not checked


@pytest.mark.parametrize(
    ("request_changes", "error"),
    [
        ({"cluster_id": "other"}, ErrorCode.INCONSISTENT_CLUSTER_ID),
        ({"current_leader_epoch": 1}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"current_leader_epoch": 3}, ErrorCode.UNKNOWN_LEADER_EPOCH),
        ({"voter_id": 7}, ErrorCode.VOTER_NOT_FOUND),
        ({"voter_directory_id": uuid.UUID(int=0)}, ErrorCode.INVALID_REQUEST),
        ({"listeners": [{"name": "OTHER", "host": "h", "port": 1}]}, ErrorCode.INVALID_REQUEST),
        (
            {"kraft_version_feature": {"min_supported_version": 1, "max_supported_version": 1}},
            ErrorCode.INVALID_REQUEST,
        ),
        (
            {"kraft_version_feature": {"min_supported_version": 1, "max_supported_version": 0}},
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_update_voter_checks(request_changes: dict[str, object], error: ErrorCode) -> None:
    assert _error(_update(**request_changes)) is error


def test_update_voter_on_a_non_leader_or_before_a_high_watermark() -> None:
    follower = LeaderSnapshot(**{**_fields(LEADER), "is_leader": False})
    assert _error(_update(), follower) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    fresh = LeaderSnapshot(**{**_fields(LEADER), "high_watermark_known": False})
    assert _error(_update(), fresh) is ErrorCode.REQUEST_TIMED_OUT


def test_update_voter_with_missing_fields_is_invalid_request_not_a_crash() -> None:
    request = _update()
    del request["kraft_version_feature"]
    assert _error(request) is ErrorCode.INVALID_REQUEST


def _fields(s: LeaderSnapshot) -> dict[str, object]:
    return {f: getattr(s, f) for f in LeaderSnapshot.__dataclass_fields__}


# --- AddRaftVoter / RemoveRaftVoter ----------------------------------------------------------


def _add(**changes: object) -> MessageDict:
    request: MessageDict = {
        "cluster_id": CLUSTER,
        "timeout_ms": 3000,
        "voter_id": 5,
        "voter_directory_id": uuid.UUID(int=5),
        "listeners": [{"name": "CONTROLLER", "host": "h", "port": 9099}],
    }
    request.update(changes)  # type: ignore[arg-type]
    return request


def test_a_static_quorum_refuses_voter_changes_as_kafka_does() -> None:
    """What Kafka 4.3.1's static leader answered to AddRaftVoter and RemoveRaftVoter."""
    assert add_voter_response(_add(), LEADER) == {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "error_message": "Cluster doesn't support adding voter because the kraft.version "
        "feature is 0",
    }
    remove = {"cluster_id": CLUSTER, "voter_id": 1, "voter_directory_id": uuid.UUID(int=5)}
    assert remove_voter_response(remove, LEADER)["error_message"] == (
        "Cluster doesn't support removing voter because the kraft.version feature is 0"
    )
    zero = {**remove, "voter_directory_id": uuid.UUID(int=0)}
    assert remove_voter_response(zero, LEADER) == {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.INVALID_REQUEST,
        "error_message": "Remove voter request didn't include a valid voter",
    }


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"cluster_id": "other"}, ErrorCode.INCONSISTENT_CLUSTER_ID),
        ({"voter_id": -1}, ErrorCode.INVALID_REQUEST),
        ({"listeners": [{"name": "X", "host": "h", "port": 1}]}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_add_voter_checks(changes: dict[str, object], error: ErrorCode) -> None:
    assert add_voter_response(_add(**changes), LEADER)["error_code"] == error


def test_add_voter_to_a_follower_is_not_leader() -> None:
    follower = LeaderSnapshot(**{**_fields(LEADER), "is_leader": False})
    assert add_voter_response(_add(), follower)["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_add_raft_voter_v1_carries_ack_when_committed() -> None:
    """AddRaftVoter v1 appends AckWhenCommitted (default true), as Kafka 4.3 has it."""
    body = decode_request(
        ApiKey.ADD_RAFT_VOTER, 1, encode_request(ApiKey.ADD_RAFT_VOTER, 1, _add())
    )
    assert body["ack_when_committed"] is True
    v0 = encode_request(ApiKey.ADD_RAFT_VOTER, 0, _add())
    v1 = encode_request(ApiKey.ADD_RAFT_VOTER, 1, {**_add(), "ack_when_committed": False})
    assert v1 == v0[:-1] + b"\x00" + b"\x00"  # the flag, then the tagged fields
