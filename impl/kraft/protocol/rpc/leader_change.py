"""BeginQuorumEpoch (API key 53) and EndQuorumEpoch (API key 54), KIP-595 and KIP-853.

Both are sent by a leader (the sender is `leader_id`) and answered with one shape: the
partition's error, leader id and epoch, and from v1 the leader's endpoint. From v1 both
requests carry the leader's endpoints; EndQuorumEpoch names its preferred successors by id in
v0 and by replica key (candidate id, directory id) from v1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Request,
    Response,
)
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, NO_EPOCH, NO_NODE, ClusterId, NodeId
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.rpc.common import (
    InvalidWireResponseError,
    Listener,
    Rpc,
    cluster_id_of,
    error_of,
    expect,
    leader_of,
    listeners_to_wire,
    metadata_partition,
    node_endpoints,
    one_topic,
    voter_key_of,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.topic_ids import METADATA_PARTITION
from kraft.protocol.values import Message, MessageDict, get_int, get_ints, get_structs

__all__ = ["BeginQuorumEpochRpc", "EndQuorumEpochRpc"]


def _partition(body: Message, error: type[InvalidWireResponseError] | None = None) -> Message:
    if error is None:
        return metadata_partition(body, "topics", "topic_name", "partitions", "partition_index")
    return metadata_partition(
        body, "topics", "topic_name", "partitions", "partition_index", error=error
    )


def _response_to_wire(
    error: ErrorCode,
    leader_id: NodeId,
    leader_epoch: int,
    version: int,
    leader_listener: Listener | None,
) -> MessageDict:
    return {
        "error_code": 0,
        "topics": [
            one_topic(
                "topic_name",
                "partitions",
                partition_index=METADATA_PARTITION,
                error_code=int(error),
                leader_id=leader_id,
                leader_epoch=leader_epoch,
            )
        ],
        "node_endpoints": node_endpoints(leader_id, leader_listener) if version >= 1 else [],
    }


class BeginQuorumEpochRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.BEGIN_QUORUM_EPOCH
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.BEGIN_QUORUM_EPOCH]
    request_type: ClassVar[type[Request]] = BeginQuorumEpochRequest
    response_type: ClassVar[type[Response]] = BeginQuorumEpochResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, BeginQuorumEpochRequest)
        voter = m.voter
        return {
            "cluster_id": m.cluster_id,
            "voter_id": NO_NODE if voter is None else voter.id,
            "topics": [
                one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    voter_directory_id=NO_DIRECTORY if voter is None else voter.directory_id,
                    leader_id=m.leader_id,
                    leader_epoch=m.leader_epoch,
                )
            ],
            "leader_endpoints": listeners_to_wire(listeners),
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        p = _partition(body)
        leader_id, leader_epoch = leader_of(p)
        return BeginQuorumEpochRequest(
            cluster_id_of(body, local), leader_id, leader_epoch, voter_key_of(body, p)
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, BeginQuorumEpochResponse)
        return _response_to_wire(m.error, m.leader_id, m.leader_epoch, version, leader_listener)

    def response_from_wire(self, version: int, body: Message) -> Response:
        top = error_of(body)
        if top is not ErrorCode.NONE:
            return BeginQuorumEpochResponse(top, NO_NODE, NO_EPOCH)
        p = _partition(body, InvalidWireResponseError)
        leader_id, leader_epoch = leader_of(p)
        return BeginQuorumEpochResponse(error_of(p), leader_id, leader_epoch)

    def sender(self, request: Request) -> NodeId | None:
        return expect(request, BeginQuorumEpochRequest).leader_id


class EndQuorumEpochRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.END_QUORUM_EPOCH
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.END_QUORUM_EPOCH]
    request_type: ClassVar[type[Request]] = EndQuorumEpochRequest
    response_type: ClassVar[type[Response]] = EndQuorumEpochResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, EndQuorumEpochRequest)
        return {
            "cluster_id": m.cluster_id,
            "topics": [
                one_topic(
                    "topic_name",
                    "partitions",
                    partition_index=METADATA_PARTITION,
                    leader_id=m.leader_id,
                    leader_epoch=m.leader_epoch,
                    # v0 carries ids, v1 replica keys; the codec writes the one the version has.
                    preferred_successors=list(m.preferred_successors),
                    preferred_candidates=[
                        {"candidate_id": n, "candidate_directory_id": NO_DIRECTORY}
                        for n in m.preferred_successors
                    ],
                )
            ],
            "leader_endpoints": listeners_to_wire(listeners),
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        p = _partition(body)
        leader_id, leader_epoch = leader_of(p)
        if version >= 1:
            ids = [get_int(c, "candidate_id") for c in get_structs(p, "preferred_candidates")]
        else:
            ids = get_ints(p, "preferred_successors")
        return EndQuorumEpochRequest(
            cluster_id_of(body, local), leader_id, leader_epoch, tuple(NodeId(n) for n in ids)
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, EndQuorumEpochResponse)
        return _response_to_wire(m.error, m.leader_id, m.leader_epoch, version, leader_listener)

    def response_from_wire(self, version: int, body: Message) -> Response:
        top = error_of(body)
        if top is not ErrorCode.NONE:
            return EndQuorumEpochResponse(top, NO_NODE, NO_EPOCH)
        p = _partition(body, InvalidWireResponseError)
        leader_id, leader_epoch = leader_of(p)
        return EndQuorumEpochResponse(error_of(p), leader_id, leader_epoch)

    def sender(self, request: Request) -> NodeId | None:
        return expect(request, EndQuorumEpochRequest).leader_id
