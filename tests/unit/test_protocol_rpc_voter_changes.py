"""The voter-change translators (kraft.protocol.rpc.add_raft_voter, remove_raft_voter,
update_raft_voter): core messages <-> Kafka's AddRaftVoter (v0-v1), RemoveRaftVoter (v0) and
UpdateRaftVoter (v0) wire messages, through bytes, as Kafka's schemas lay them out."""

from __future__ import annotations

import uuid

import pytest

from kraft.control_records import Endpoint
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    RemoveVoterRequest,
    RemoveVoterResponse,
    Request,
    Response,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, DirectoryId, Epoch, NodeId, ReplicaKey
from kraft.protocol import (
    ApiKey,
    RequestHeader,
    decode_request_payload,
    decode_response_payload,
    encode_request_payload,
    encode_response_payload,
)
from kraft.protocol.rpc import (
    Listener,
    UntranslatableVersionError,
    error_response,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
    sender_of,
)

VOTER = ReplicaKey(NodeId(4), DirectoryId(uuid.UUID(int=0x44)))
EPS = (Endpoint("CONTROLLER", "127.0.0.1", 9004), Endpoint("OTHER", "::1", 19004))


def _request_via_bytes(msg: Request, version: int) -> Request:
    key, v, body = request_to_wire(msg, version=version)
    header, decoded = decode_request_payload(
        encode_request_payload(RequestHeader(key, v, 7, "kraft"), body)
    )
    assert (header.api_key, header.api_version) == (key, version)
    return request_from_wire(key, v, decoded, local_cluster_id=ClusterId("ours"))


def _response_via_bytes(
    msg: Response, key: ApiKey, version: int, listener: Listener | None = None
) -> tuple[Response, dict[str, object]]:
    body = response_to_wire(msg, key, version, leader_listener=listener)
    _, decoded = decode_response_payload(
        key, version, encode_response_payload(key, version, 3, body)
    )
    return response_from_wire(key, version, decoded), dict(decoded)


@pytest.mark.parametrize("version", [0, 1])
def test_add_voter_round_trips(version: int) -> None:
    msg = AddVoterRequest(ClusterId("c"), VOTER, EPS, timeout_ms=1234)
    assert _request_via_bytes(msg, version) == msg
    # Without a cluster id Kafka does not check one: the core sees None, not ours.
    anonymous = AddVoterRequest(None, VOTER, EPS)
    assert _request_via_bytes(anonymous, version) == anonymous
    assert sender_of(msg) is None  # an admin client
    answer = AddVoterResponse(ErrorCode.DUPLICATE_VOTER, "already a voter")
    back, body = _response_via_bytes(answer, ApiKey.ADD_RAFT_VOTER, version)
    assert back == answer and body["throttle_time_ms"] == 0


def test_add_voter_v1_carries_ack_when_committed_and_v0_cannot() -> None:
    at_append = AddVoterRequest(ClusterId("c"), VOTER, EPS, ack_when_committed=False)
    assert _request_via_bytes(at_append, 1) == at_append
    with pytest.raises(UntranslatableVersionError):
        request_to_wire(at_append, version=0)


def test_remove_voter_round_trips() -> None:
    msg = RemoveVoterRequest(ClusterId("c"), VOTER)
    assert _request_via_bytes(msg, 0) == msg
    assert sender_of(msg) is None
    answer = RemoveVoterResponse(ErrorCode.VOTER_NOT_FOUND, "no such voter")
    assert _response_via_bytes(answer, ApiKey.REMOVE_RAFT_VOTER, 0)[0] == answer
    refused = error_response(ApiKey.REMOVE_RAFT_VOTER, 0, ErrorCode.INVALID_REQUEST)
    assert refused == {"throttle_time_ms": 0, "error_code": 42, "error_message": None}


def test_update_voter_round_trips_and_names_the_leader() -> None:
    msg = UpdateVoterRequest(ClusterId("c"), Epoch(5), VOTER, EPS, 0, 1)
    assert _request_via_bytes(msg, 0) == msg
    assert sender_of(msg) == 4
    answer = UpdateVoterResponse(ErrorCode.NONE, NodeId(1), Epoch(5))
    listener = Listener("CONTROLLER", "10.0.0.1", 9001)
    back, body = _response_via_bytes(answer, ApiKey.UPDATE_RAFT_VOTER, 0, listener)
    assert back == answer
    assert body["current_leader"] == {
        "leader_id": 1,
        "leader_epoch": 5,
        "host": "10.0.0.1",
        "port": 9001,
    }
    # No leader known: no endpoint.
    unknown = UpdateVoterResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, NO_NODE, Epoch(5))
    back, body = _response_via_bytes(unknown, ApiKey.UPDATE_RAFT_VOTER, 0, listener)
    assert back == unknown
    assert body["current_leader"] == {"leader_id": -1, "leader_epoch": 5, "host": "", "port": 0}
