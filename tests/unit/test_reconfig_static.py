"""AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter at kraft.version 0 (a static quorum,
`controller.quorum.voters`), answered by the core as an Apache Kafka 4.3.1 static leader
answers them (read off a real one; see the wire report). Each request goes through the wire
translators and bytes into a leader's replica, and its answer back to wire bytes.

The leader is node 1 of the static voters {1, 2}, in epoch 2, at h:9093."""

from __future__ import annotations

import uuid

import pytest
from replica_harness import Harness, stand

from kraft.core.effects import ElectionState, Send
from kraft.core.events import Receive
from kraft.core.messages import BeginQuorumEpochRequest, FetchRequest, Response, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import (
    ApiKey,
    RequestHeader,
    decode_request,
    decode_request_payload,
    decode_response,
    encode_request,
    encode_request_payload,
    encode_response,
)
from kraft.protocol.rpc import (
    Listener,
    WireTranslationError,
    error_response,
    request_from_wire,
    response_to_wire,
)
from kraft.protocol.values import MessageDict

CLUSTER = ClusterId("MkU3OEVBNTcwNTJENDM2Qg")
LISTENER = Listener("CONTROLLER", "h", 9093)
TOKEN = 77


def _static_leader(*, committed: bool = True) -> Harness:
    voters = (ReplicaKey(NodeId(1)), ReplicaKey(NodeId(2)))
    h = Harness(node=1, voters=(1, 2), static_voters=voters, election=ElectionState(Epoch(1)))
    stand(h)
    if h.view.state is ReplicaState.CANDIDATE:
        h.recv(2, VoteResponse(ErrorCode.NONE, NO_NODE, h.view.epoch, True))
    assert h.view.state is ReplicaState.LEADER and h.view.epoch == 2
    if committed:
        cluster = h.config.cluster_id
        h.recv(2, FetchRequest(cluster, voters[1], Epoch(2), Offset(1), Epoch(2), Offset(0)))
    return h


def _answer(api_key: ApiKey, request: MessageDict, h: Harness | None = None) -> MessageDict:
    """The leader's wire answer to a wire request, through bytes both ways."""
    h = h or _static_leader()
    request = {**request}
    if request.get("cluster_id") == CLUSTER:
        request["cluster_id"] = h.config.cluster_id  # the harness's cluster
    wire = encode_request_payload(RequestHeader(api_key, 0, 5, "t"), request)
    _, decoded = decode_request_payload(wire)
    try:
        core = request_from_wire(api_key, 0, decoded, local_cluster_id=h.config.cluster_id)
    except WireTranslationError as e:
        body = error_response(api_key, 0, e.error_code)
    else:
        effects = h.step(Receive(h.now, NodeId(-1), core, reply_to=TOKEN))
        [resp] = [e.message for e in effects if isinstance(e, Send) and e.reply_to == TOKEN]
        assert isinstance(resp, Response)
        body = response_to_wire(resp, api_key, 0, leader_listener=LISTENER)
    return decode_response(api_key, 0, encode_response(api_key, 0, body))


# --- UpdateRaftVoter -----------------------------------------------------------------------


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
    body = _answer(ApiKey.UPDATE_RAFT_VOTER, _update(voter_id=7))
    assert encode_response(ApiKey.UPDATE_RAFT_VOTER, 0, body) == UPDATE_VOTER_RESPONSE


def _error(request: MessageDict, h: Harness | None = None) -> ErrorCode:
    return ErrorCode(_answer(ApiKey.UPDATE_RAFT_VOTER, request, h)["error_code"])  # type: ignore[arg-type]


def test_a_static_leader_accepts_a_voters_update_and_keeps_nothing() -> None:
    """Kafka at kraft.version 0 keeps the update in memory and answers NONE at once."""
    h = _static_leader()
    end = h.log.end_offset
    assert _error(_update(), h) is ErrorCode.NONE
    assert _error(_update(cluster_id=None), h) is ErrorCode.NONE  # no cluster id: not checked
    assert h.log.end_offset == end


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
    static = (ReplicaKey(NodeId(1)), ReplicaKey(NodeId(2)))
    follower = Harness(node=2, voters=(1, 2), static_voters=static)
    follower.recv(1, BeginQuorumEpochRequest(follower.config.cluster_id, NodeId(1), Epoch(2)))
    assert _error(_update(), follower) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _error(_update(), _static_leader(committed=False)) is ErrorCode.REQUEST_TIMED_OUT


def test_update_voter_with_missing_fields_is_invalid_request_not_a_crash() -> None:
    body = _update()
    del body["kraft_version_feature"]
    with pytest.raises(WireTranslationError) as e:
        request_from_wire(ApiKey.UPDATE_RAFT_VOTER, 0, body)
    assert e.value.error_code is ErrorCode.INVALID_REQUEST
    answer = decode_response(
        ApiKey.UPDATE_RAFT_VOTER,
        0,
        encode_response(
            ApiKey.UPDATE_RAFT_VOTER,
            0,
            error_response(ApiKey.UPDATE_RAFT_VOTER, 0, e.value.error_code),
        ),
    )
    assert answer["error_code"] == ErrorCode.INVALID_REQUEST


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
    assert _answer(ApiKey.ADD_RAFT_VOTER, _add()) == {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.UNSUPPORTED_VERSION,
        "error_message": "Cluster doesn't support adding voter because the kraft.version "
        "feature is 0",
    }
    remove = {"cluster_id": CLUSTER, "voter_id": 1, "voter_directory_id": uuid.UUID(int=5)}
    assert _answer(ApiKey.REMOVE_RAFT_VOTER, remove)["error_message"] == (
        "Cluster doesn't support removing voter because the kraft.version feature is 0"
    )
    zero = {**remove, "voter_directory_id": uuid.UUID(int=0)}
    assert _answer(ApiKey.REMOVE_RAFT_VOTER, zero) == {
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
    assert _answer(ApiKey.ADD_RAFT_VOTER, _add(**changes))["error_code"] == error


def test_add_voter_before_a_high_watermark_times_out() -> None:
    answer = _answer(ApiKey.ADD_RAFT_VOTER, _add(), _static_leader(committed=False))
    assert answer["error_code"] == ErrorCode.REQUEST_TIMED_OUT


def test_add_raft_voter_v1_carries_ack_when_committed() -> None:
    """AddRaftVoter v1 appends AckWhenCommitted (default true), as Kafka 4.3 has it."""
    body = decode_request(
        ApiKey.ADD_RAFT_VOTER, 1, encode_request(ApiKey.ADD_RAFT_VOTER, 1, _add())
    )
    assert body["ack_when_committed"] is True
    v0 = encode_request(ApiKey.ADD_RAFT_VOTER, 0, _add())
    v1 = encode_request(ApiKey.ADD_RAFT_VOTER, 1, {**_add(), "ack_when_committed": False})
    assert v1 == v0[:-1] + b"\x00" + b"\x00"  # the flag, then the tagged fields
