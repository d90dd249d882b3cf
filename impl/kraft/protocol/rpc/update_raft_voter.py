"""UpdateRaftVoter (API key 82, KIP-853): `UpdateVoterRequest` / `UpdateVoterResponse` <->
the wire.

A voter tells the leader its endpoints and the kraft.version range it supports; the answer
names the current leader (its id and epoch, and its endpoint on the request's listener).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kraft.core.messages import Request, Response, UpdateVoterRequest, UpdateVoterResponse
from kraft.ids import NO_NODE, ClusterId, Epoch, NodeId
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.rpc.common import (
    Listener,
    Rpc,
    endpoints_from_wire,
    endpoints_to_wire,
    error_of,
    expect,
    leader_of,
    optional_cluster_id,
    voter_of,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.values import Message, MessageDict, get_int, get_struct

__all__ = ["UpdateRaftVoterRpc"]


class UpdateRaftVoterRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.UPDATE_RAFT_VOTER
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.UPDATE_RAFT_VOTER]
    request_type: ClassVar[type[Request]] = UpdateVoterRequest
    response_type: ClassVar[type[Response]] = UpdateVoterResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, UpdateVoterRequest)
        return {
            "cluster_id": m.cluster_id,
            "current_leader_epoch": m.leader_epoch,
            "voter_id": m.voter.id,
            "voter_directory_id": m.voter.directory_id,
            "listeners": endpoints_to_wire(m.endpoints),
            "kraft_version_feature": {
                "min_supported_version": m.min_kraft_version,
                "max_supported_version": m.max_kraft_version,
            },
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        del local  # a voter change without a cluster id is not checked against ours (Kafka)
        feature = get_struct(body, "kraft_version_feature")
        return UpdateVoterRequest(
            cluster_id=optional_cluster_id(body),
            leader_epoch=Epoch(get_int(body, "current_leader_epoch")),
            voter=voter_of(body),
            endpoints=endpoints_from_wire(body, "listeners"),
            min_kraft_version=get_int(feature, "min_supported_version"),
            max_kraft_version=get_int(feature, "max_supported_version"),
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, UpdateVoterResponse)
        known = leader_listener is not None and m.leader_id >= 0
        return {
            "throttle_time_ms": 0,
            "error_code": int(m.error),
            "current_leader": {
                "leader_id": m.leader_id,
                "leader_epoch": m.leader_epoch,
                "host": leader_listener.host if known and leader_listener else "",
                "port": leader_listener.port if known and leader_listener else 0,
            },
        }

    def response_from_wire(self, version: int, body: Message) -> Response:
        leader = body.get("current_leader")
        if not isinstance(leader, dict):
            return UpdateVoterResponse(error_of(body), NO_NODE, Epoch(-1))
        leader_id, leader_epoch = leader_of(leader)
        return UpdateVoterResponse(error_of(body), leader_id, leader_epoch)

    def sender(self, request: Request) -> NodeId | None:
        return expect(request, UpdateVoterRequest).voter.id
