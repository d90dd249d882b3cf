"""Vote (API key 52, KIP-595; pre-vote KIP-996): `VoteRequest` / `VoteResponse` <-> the wire.

Vote v2's PreVote flag is `VoteRequest.pre_vote`; a pre-vote cannot be sent below v2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kraft.core.messages import Request, Response, VoteRequest, VoteResponse
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, NO_EPOCH, NO_NODE, ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.rpc.common import (
    InvalidWireResponseError,
    Listener,
    Rpc,
    UntranslatableVersionError,
    cluster_id_of,
    directory_of,
    error_of,
    expect,
    leader_of,
    metadata_partition,
    node_endpoints,
    one_topic,
    voter_key_of,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.topic_ids import METADATA_PARTITION
from kraft.protocol.values import Message, MessageDict, get_bool, get_int

__all__ = ["VoteRpc"]


class VoteRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.VOTE
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.VOTE]
    request_type: ClassVar[type[Request]] = VoteRequest
    response_type: ClassVar[type[Response]] = VoteResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, VoteRequest)
        if m.pre_vote and version < 2:
            raise UntranslatableVersionError(
                f"Vote v{version} cannot carry a pre-vote (v2+, KIP-996)"
            )
        voter = m.voter
        return {
            "cluster_id": m.cluster_id,
            "voter_id": NO_NODE if voter is None else voter.id,
            "topics": [
                one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    replica_epoch=m.candidate_epoch,
                    replica_id=m.candidate.id,
                    replica_directory_id=m.candidate.directory_id,
                    voter_directory_id=NO_DIRECTORY if voter is None else voter.directory_id,
                    last_offset_epoch=m.last_epoch,
                    last_offset=m.last_end_offset,
                    pre_vote=m.pre_vote,
                )
            ],
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        p = metadata_partition(body, "topics", "topic_name", "partitions", "partition_index")
        return VoteRequest(
            cluster_id=cluster_id_of(body, local),
            candidate=ReplicaKey(
                NodeId(get_int(p, "replica_id")), directory_of(p, "replica_directory_id")
            ),
            candidate_epoch=Epoch(get_int(p, "replica_epoch")),
            last_epoch=Epoch(get_int(p, "last_offset_epoch")),
            last_end_offset=Offset(get_int(p, "last_offset")),
            voter=voter_key_of(body, p),
            pre_vote=version >= 2 and get_bool(p, "pre_vote"),
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, VoteResponse)
        return {
            "error_code": 0,
            "topics": [
                one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    error_code=int(m.error),
                    leader_id=m.leader_id,
                    leader_epoch=m.leader_epoch,
                    vote_granted=m.vote_granted,
                )
            ],
            "node_endpoints": node_endpoints(m.leader_id, leader_listener) if version >= 1 else [],
        }

    def response_from_wire(self, version: int, body: Message) -> Response:
        top = error_of(body)
        if top is not ErrorCode.NONE:
            return VoteResponse(top, NO_NODE, NO_EPOCH, vote_granted=False)
        p = metadata_partition(
            body,
            "topics",
            "topic_name",
            "partitions",
            "partition_index",
            error=InvalidWireResponseError,
        )
        leader_id, leader_epoch = leader_of(p)
        return VoteResponse(error_of(p), leader_id, leader_epoch, get_bool(p, "vote_granted"))

    def sender(self, request: Request) -> NodeId | None:
        return expect(request, VoteRequest).candidate.id
