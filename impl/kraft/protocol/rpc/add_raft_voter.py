"""AddRaftVoter (API key 80, KIP-853; v1 KIP-1186): `AddVoterRequest` / `AddVoterResponse`
<-> the wire.

An admin client's request to the leader (Kafka's `kafka-metadata-quorum add-controller`): the
voter key, its endpoints, and from v1 whether to answer once the change is committed (the
default) or once appended. The answer carries an error and its message, no leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kraft.core.messages import AddVoterRequest, AddVoterResponse, Request, Response
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, NodeId
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.rpc.common import (
    Listener,
    Rpc,
    UntranslatableVersionError,
    endpoints_from_wire,
    endpoints_to_wire,
    error_of,
    expect,
    optional_cluster_id,
    voter_of,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.values import Message, MessageDict, get_bool, get_int, get_opt_str

__all__ = ["AddRaftVoterRpc", "voter_change_error_response"]


def voter_change_error_response(error: ErrorCode, message: str | None = None) -> MessageDict:
    """AddRaftVoter's and RemoveRaftVoter's answer layout (they share it)."""
    return {"throttle_time_ms": 0, "error_code": int(error), "error_message": message}


class AddRaftVoterRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.ADD_RAFT_VOTER
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.ADD_RAFT_VOTER]
    request_type: ClassVar[type[Request]] = AddVoterRequest
    response_type: ClassVar[type[Response]] = AddVoterResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, AddVoterRequest)
        if not m.ack_when_committed and version < 1:
            raise UntranslatableVersionError(
                f"AddRaftVoter v{version} cannot ask for an answer at append (v1+, KIP-1186)"
            )
        body: MessageDict = {
            "cluster_id": m.cluster_id,
            "timeout_ms": m.timeout_ms,
            "voter_id": m.voter.id,
            "voter_directory_id": m.voter.directory_id,
            "listeners": endpoints_to_wire(m.endpoints),
        }
        if version >= 1:
            body["ack_when_committed"] = m.ack_when_committed
        return body

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        del local  # a voter change without a cluster id is not checked against ours (Kafka)
        return AddVoterRequest(
            cluster_id=optional_cluster_id(body),
            voter=voter_of(body),
            endpoints=endpoints_from_wire(body, "listeners"),
            timeout_ms=get_int(body, "timeout_ms"),
            ack_when_committed=version < 1 or get_bool(body, "ack_when_committed"),
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, AddVoterResponse)
        return voter_change_error_response(m.error, m.message)

    def response_from_wire(self, version: int, body: Message) -> Response:
        return AddVoterResponse(error_of(body), get_opt_str(body, "error_message"))

    def sender(self, request: Request) -> NodeId | None:
        expect(request, AddVoterRequest)
        return None  # an admin client

    def error_response(self, version: int, error: ErrorCode) -> MessageDict:
        return voter_change_error_response(error)
