"""kraft.protocol.rpc.registry: the one table that picks an RPC's translator.

Every core message type has exactly one translator, found by its type and by its API key;
each request names the node it claims to come from; a misrouted message is a TypeError.
"""

from __future__ import annotations

import typing

import pytest

from kraft.core.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.protocol import ApiKey
from kraft.protocol.rpc import (
    KRAFT_VERSIONS,
    PREFERRED_VERSIONS,
    RPCS,
    api_key_of,
    error_response,
    is_request,
    rpc_for_key,
    rpc_of,
    sender_of,
)

CLUSTER = ClusterId("c")

# One request of each core RPC and the node id it claims to come from.
REQUESTS_AND_SENDERS: list[tuple[Request, NodeId]] = [
    (VoteRequest(CLUSTER, ReplicaKey(NodeId(3)), Epoch(2), Epoch(1), Offset(5)), NodeId(3)),
    (BeginQuorumEpochRequest(CLUSTER, NodeId(4), Epoch(2)), NodeId(4)),
    (EndQuorumEpochRequest(CLUSTER, NodeId(5), Epoch(2), (NodeId(1),)), NodeId(5)),
    (
        FetchRequest(CLUSTER, ReplicaKey(NodeId(6)), Epoch(2), Offset(0), Epoch(0), Offset(0)),
        NodeId(6),
    ),
    (
        FetchSnapshotRequest(
            CLUSTER,
            ReplicaKey(NodeId(7)),
            Epoch(2),
            OffsetAndEpoch(Epoch(1), Offset(9)),
            0,
            max_bytes=1 << 20,
        ),
        NodeId(7),
    ),
]


def test_every_core_message_type_has_exactly_one_translator() -> None:
    requests = set(typing.get_args(Request))
    responses = set(typing.get_args(Response))
    assert {rpc.request_type for rpc in RPCS} == requests
    assert {rpc.response_type for rpc in RPCS} == responses
    assert len({rpc.api_key for rpc in RPCS}) == len(RPCS) == len(requests)
    for rpc in RPCS:
        assert rpc_for_key(rpc.api_key) is rpc
        assert KRAFT_VERSIONS[rpc.api_key] == rpc.versions
        assert PREFERRED_VERSIONS[rpc.api_key] == rpc.versions[1]


def test_the_table_is_keyed_by_message_type() -> None:
    for request, _ in REQUESTS_AND_SENDERS:
        rpc = rpc_of(request)
        assert rpc.request_type is type(request)
        assert api_key_of(request) is rpc.api_key
        assert is_request(request)
    answer = VoteResponse(ErrorCode.NONE, NodeId(1), Epoch(1), vote_granted=True)
    assert api_key_of(answer) is ApiKey.VOTE
    assert not is_request(answer)


@pytest.mark.parametrize(("request_", "sender"), REQUESTS_AND_SENDERS)
def test_each_request_names_the_node_it_claims_to_come_from(
    request_: Request, sender: NodeId
) -> None:
    assert sender_of(request_) == sender


def test_only_core_rpcs_have_translators() -> None:
    for key in (ApiKey.DESCRIBE_QUORUM, ApiKey.API_VERSIONS, ApiKey.DESCRIBE_CLUSTER):
        assert rpc_for_key(key) is None
    # The voter changes (KIP-853) are core requests: the leader's replica answers them.
    for key in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER, ApiKey.UPDATE_RAFT_VOTER):
        assert rpc_for_key(key) is not None
    with pytest.raises(TypeError):
        rpc_of(object())  # type: ignore[arg-type]


def test_a_misrouted_message_is_a_type_error_not_a_wrong_translation() -> None:
    vote = rpc_of(REQUESTS_AND_SENDERS[0][0])
    fetch = REQUESTS_AND_SENDERS[3][0]
    with pytest.raises(TypeError):
        vote.request_to_wire(fetch, 2, ())
    with pytest.raises(TypeError):
        vote.sender(fetch)


def test_error_responses_cover_apis_without_a_translator() -> None:
    assert error_response(ApiKey.VOTE, 2, ErrorCode.INVALID_REQUEST) == {"error_code": 42}
    assert error_response(ApiKey.ADD_RAFT_VOTER, 0, ErrorCode.INVALID_REQUEST) == {
        "throttle_time_ms": 0,
        "error_code": 42,
        "error_message": None,
    }
    assert error_response(ApiKey.DESCRIBE_CLUSTER, 1, ErrorCode.INVALID_REQUEST) == {
        "error_code": 42
    }
