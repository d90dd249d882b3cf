"""RemoveRaftVoter (API key 81, KIP-853): `RemoveVoterRequest` / `RemoveVoterResponse` <->
the wire.

An admin client's request to the leader (Kafka's `kafka-metadata-quorum remove-controller`):
the exact voter key to remove. The answer carries an error and its message, no leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kraft.core.messages import RemoveVoterRequest, RemoveVoterResponse, Request, Response
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, NodeId
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.rpc.add_raft_voter import voter_change_error_response
from kraft.protocol.rpc.common import (
    Listener,
    Rpc,
    error_of,
    expect,
    optional_cluster_id,
    voter_of,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.values import Message, MessageDict, get_opt_str

__all__ = ["RemoveRaftVoterRpc"]


class RemoveRaftVoterRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.REMOVE_RAFT_VOTER
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.REMOVE_RAFT_VOTER]
    request_type: ClassVar[type[Request]] = RemoveVoterRequest
    response_type: ClassVar[type[Response]] = RemoveVoterResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, RemoveVoterRequest)
        return {
            "cluster_id": m.cluster_id,
            "voter_id": m.voter.id,
            "voter_directory_id": m.voter.directory_id,
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        del local  # a voter change without a cluster id is not checked against ours (Kafka)
        return RemoveVoterRequest(cluster_id=optional_cluster_id(body), voter=voter_of(body))

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, RemoveVoterResponse)
        return voter_change_error_response(m.error, m.message)

    def response_from_wire(self, version: int, body: Message) -> Response:
        return RemoveVoterResponse(error_of(body), get_opt_str(body, "error_message"))

    def sender(self, request: Request) -> NodeId | None:
        expect(request, RemoveVoterRequest)
        return None  # an admin client

    def error_response(self, version: int, error: ErrorCode) -> MessageDict:
        return voter_change_error_response(error)
