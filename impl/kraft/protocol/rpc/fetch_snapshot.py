"""FetchSnapshot (API key 59, KIP-630): `FetchSnapshotRequest` / `FetchSnapshotResponse`, and
the zero-copy frame of a response.

The snapshot chunk travels as unaligned records and is never copied by the wire layer: a
leader's answer is a `ResponseFrame`, the frame's encoded prefix (size, header, every field up
to the records' length), the chunk itself (on the node, a view of the mapped checkpoint file,
kraft.server.snapshot_store) and the encoded suffix (the tagged fields and what follows), the
same bytes as the plain encoding; a follower keeps the chunk as a view of the received frame
until the driver writes it to its `.part` file.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from kraft.core.messages import (
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Records,
    Request,
    Response,
)
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_EPOCH,
    NO_NODE,
    ClusterId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.codec import compiled
from kraft.protocol.header import encode_response_header
from kraft.protocol.rpc.common import (
    InvalidWireResponseError,
    Listener,
    Rpc,
    cluster_id_of,
    directory_of,
    error_of,
    expect,
    leader_of,
    metadata_partition,
    node_endpoints,
    one_topic,
    snapshot_id_of,
)
from kraft.protocol.schema import ApiKey, Direction
from kraft.protocol.topic_ids import METADATA_PARTITION
from kraft.protocol.values import Message, MessageDict, get_int, get_records, get_struct

__all__ = ["FetchSnapshotRpc", "ResponseFrame", "fetch_snapshot_frame"]

_NO_SNAPSHOT: Final = OffsetAndEpoch(NO_EPOCH, Offset(-1))
_SIZE: Final = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """One FetchSnapshot response as sent: `prefix`, then `region` (the chunk, not copied),
    then `suffix`; together exactly the size-prefixed frame the plain encoding gives."""

    prefix: bytes
    region: Records
    suffix: bytes

    def __len__(self) -> int:
        return len(self.prefix) + len(self.region) + len(self.suffix)

    def parts(self) -> tuple[Records, ...]:
        """What to write, in order (an empty region is left out)."""
        if not self.region:
            return (self.prefix + self.suffix,)
        return (self.prefix, self.region, self.suffix)

    def joined(self) -> bytes:
        """The frame in one piece (a copy: for tests and for a transport that needs one)."""
        return b"".join((self.prefix, self.region, self.suffix))


def fetch_snapshot_frame(
    body: MessageDict, version: int, correlation_id: int, region: Records
) -> ResponseFrame:
    """The size-prefixed frame of the FetchSnapshot response `body` (the wire dict of
    `FetchSnapshotRpc.response_to_wire`, or an error response) whose `unaligned_records` is
    `region`, with the region left out of the encoded pieces: the codec appends a records
    value as one piece of its own, which is found by identity and not joined."""
    codec = compiled(Direction.RESPONSE, ApiKey.FETCH_SNAPSHOT, version)
    head = encode_response_header(ApiKey.FETCH_SNAPSHOT, version, correlation_id)
    pieces = codec.encode_into(body, [b"", head])
    at = next((i for i, p in enumerate(pieces) if p is region), -1) if region else -1
    size = sum(map(len, pieces))
    pieces[0] = _SIZE.pack(size)
    if at < 0:  # no chunk (an error answer, or an empty one): one plain piece
        return ResponseFrame(b"".join(pieces), b"", b"")
    return ResponseFrame(b"".join(pieces[:at]), region, b"".join(pieces[at + 1 :]))


class FetchSnapshotRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.FETCH_SNAPSHOT
    versions: ClassVar[tuple[int, int]] = SUPPORTED_APIS[ApiKey.FETCH_SNAPSHOT]
    request_type: ClassVar[type[Request]] = FetchSnapshotRequest
    response_type: ClassVar[type[Response]] = FetchSnapshotResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, FetchSnapshotRequest)
        return {
            "cluster_id": m.cluster_id,
            "replica_id": m.replica.id,
            "max_bytes": m.max_bytes,
            "topics": [
                one_topic(
                    "name",
                    "partitions",
                    partition=METADATA_PARTITION,
                    current_leader_epoch=m.replica_epoch,
                    snapshot_id={"end_offset": m.snapshot_id.offset, "epoch": m.snapshot_id.epoch},
                    position=m.position,
                    replica_directory_id=m.replica.directory_id,
                )
            ],
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        p = metadata_partition(body, "topics", "name", "partitions", "partition")
        return FetchSnapshotRequest(
            cluster_id=cluster_id_of(body, local),
            replica=ReplicaKey(
                NodeId(get_int(body, "replica_id")), directory_of(p, "replica_directory_id")
            ),
            replica_epoch=Epoch(get_int(p, "current_leader_epoch")),
            snapshot_id=snapshot_id_of(get_struct(p, "snapshot_id")),
            position=get_int(p, "position"),
            max_bytes=get_int(body, "max_bytes"),
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, FetchSnapshotResponse)
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "topics": [
                one_topic(
                    "name",
                    "partitions",
                    index=METADATA_PARTITION,
                    error_code=int(m.error),
                    snapshot_id={"end_offset": m.snapshot_id.offset, "epoch": m.snapshot_id.epoch},
                    current_leader={"leader_id": m.leader_id, "leader_epoch": m.leader_epoch},
                    size=m.size,
                    position=m.position,
                    unaligned_records=m.chunk,
                )
            ],
            "node_endpoints": node_endpoints(m.leader_id, leader_listener) if version >= 1 else [],
        }

    def response_from_wire(self, version: int, body: Message) -> Response:
        top = error_of(body)
        if top is not ErrorCode.NONE:
            return FetchSnapshotResponse(top, NO_NODE, NO_EPOCH, _NO_SNAPSHOT, size=-1, position=-1)
        p = metadata_partition(
            body, "topics", "name", "partitions", "index", error=InvalidWireResponseError
        )
        leader_id, leader_epoch = leader_of(get_struct(p, "current_leader"))
        chunk = get_records(p, "unaligned_records")
        return FetchSnapshotResponse(
            error=error_of(p),
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            snapshot_id=snapshot_id_of(get_struct(p, "snapshot_id")),
            size=get_int(p, "size"),
            position=get_int(p, "position"),
            # A view of the received frame, kept until the driver writes it (no copy).
            chunk=b"" if chunk is None else chunk,
        )

    def sender(self, request: Request) -> NodeId | None:
        return expect(request, FetchSnapshotRequest).replica.id
