"""Fetch (API key 1, KIP-595 replication): `FetchRequest` / `FetchResponse` <-> the wire.

- KRaft names the topic by id (Fetch v13+). Below v13 a request names the topic rather than its
  id; Kafka's KRaft only matches the id, so such a request is an INVALID_REQUEST and we never
  send one.
- The fetching replica's id moves from `replica_id` into `replica_state` at v15; a negative id
  is a consumer (served by the listener, never by the core).
- Kafka's KRaft sends the leader's endpoint from v17 (KIP-853), though the field is v16+.
- Records stay the buffer they came in (a memoryview slice of the received frame).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from kraft.core.messages import FetchRequest, FetchResponse, Request, Response
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
    snapshot_id_of,
)
from kraft.protocol.schema import ApiKey
from kraft.protocol.topic_ids import METADATA_PARTITION, METADATA_TOPIC_ID, METADATA_TOPIC_NAME
from kraft.protocol.values import Message, MessageDict, get_int, get_records, get_struct

__all__ = ["FetchRpc"]

_NO_OFFSET: Final = Offset(-1)


class FetchRpc(Rpc):
    __slots__ = ()

    api_key: ClassVar[ApiKey] = ApiKey.FETCH
    versions: ClassVar[tuple[int, int]] = (13, SUPPORTED_APIS[ApiKey.FETCH][1])
    request_type: ClassVar[type[Request]] = FetchRequest
    response_type: ClassVar[type[Response]] = FetchResponse

    def request_to_wire(
        self, msg: Request, version: int, listeners: Sequence[Listener]
    ) -> MessageDict:
        m = expect(msg, FetchRequest)
        new_replica_state = version >= 15
        return {
            "cluster_id": m.cluster_id,
            "replica_id": -1 if new_replica_state else m.replica.id,
            "replica_state": {
                "replica_id": m.replica.id if new_replica_state else -1,
                "replica_epoch": -1,
            },
            "max_wait_ms": m.max_wait_ms,
            "min_bytes": 0,
            "max_bytes": m.max_bytes,
            "topics": [
                {
                    "topic": METADATA_TOPIC_NAME,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": m.replica_epoch,
                            "fetch_offset": m.fetch_offset,
                            "last_fetched_epoch": m.last_fetched_epoch,
                            "log_start_offset": m.log_start_offset,
                            "partition_max_bytes": m.max_bytes,
                            "replica_directory_id": m.replica.directory_id,
                        }
                    ],
                }
            ],
        }

    def request_from_wire(self, version: int, body: Message, local: ClusterId | None) -> Request:
        p = metadata_partition(body, "topics", None, "partitions", "partition")
        if version >= 15:
            replica_id = get_int(get_struct(body, "replica_state"), "replica_id")
        else:
            replica_id = get_int(body, "replica_id")
        max_bytes = get_int(body, "max_bytes")
        partition_max = get_int(p, "partition_max_bytes")
        if partition_max > 0:  # Kafka's KRaft sends 0 here; either bound applies
            max_bytes = min(max_bytes, partition_max)
        return FetchRequest(
            cluster_id=cluster_id_of(body, local),
            replica=ReplicaKey(NodeId(replica_id), directory_of(p, "replica_directory_id")),
            replica_epoch=Epoch(get_int(p, "current_leader_epoch")),
            fetch_offset=Offset(get_int(p, "fetch_offset")),
            last_fetched_epoch=Epoch(get_int(p, "last_fetched_epoch")),
            log_start_offset=Offset(get_int(p, "log_start_offset")),
            max_bytes=max_bytes,
            max_wait_ms=get_int(body, "max_wait_ms"),
        )

    def response_to_wire(
        self, msg: Response, version: int, leader_listener: Listener | None
    ) -> MessageDict:
        m = expect(msg, FetchResponse)
        diverging = m.diverging_epoch
        snapshot = m.snapshot_id
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": METADATA_TOPIC_NAME,
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition_index": METADATA_PARTITION,
                            "error_code": int(m.error),
                            "high_watermark": m.high_watermark,
                            "log_start_offset": m.log_start_offset,
                            "diverging_epoch": {
                                "epoch": NO_EPOCH if diverging is None else diverging.epoch,
                                "end_offset": -1 if diverging is None else diverging.offset,
                            },
                            "current_leader": {
                                "leader_id": m.leader_id,
                                "leader_epoch": m.leader_epoch,
                            },
                            "snapshot_id": {
                                "end_offset": -1 if snapshot is None else snapshot.offset,
                                "epoch": NO_EPOCH if snapshot is None else snapshot.epoch,
                            },
                            "records": m.records,
                        }
                    ],
                }
            ],
            "node_endpoints": (
                node_endpoints(m.leader_id, leader_listener, rack=True) if version >= 17 else []
            ),
        }

    def response_from_wire(self, version: int, body: Message) -> Response:
        top = error_of(body)
        if top is not ErrorCode.NONE:
            return FetchResponse(top, NO_NODE, NO_EPOCH, _NO_OFFSET, _NO_OFFSET)
        bad = InvalidWireResponseError
        p = metadata_partition(body, "responses", None, "partitions", "partition_index", error=bad)
        leader_id, leader_epoch = leader_of(get_struct(p, "current_leader"))
        div = get_struct(p, "diverging_epoch")
        diverging = None
        if get_int(div, "epoch") >= 0:
            diverging = OffsetAndEpoch(
                Epoch(get_int(div, "epoch")), Offset(get_int(div, "end_offset"))
            )
        snap = snapshot_id_of(get_struct(p, "snapshot_id"))
        snapshot = None
        if snap.epoch >= 0 or snap.offset >= 0:
            if snap.epoch < 0 or snap.offset < 0:  # Kafka's client rejects a half-set id too
                raise bad(f"snapshot id with a negative part: {snap}")
            snapshot = snap
        records = get_records(p, "records")
        return FetchResponse(
            error=error_of(p),
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            high_watermark=Offset(get_int(p, "high_watermark")),
            log_start_offset=Offset(get_int(p, "log_start_offset")),
            diverging_epoch=diverging,
            snapshot_id=snapshot,
            records=b"" if records is None else records,
        )

    def sender(self, request: Request) -> NodeId | None:
        return expect(request, FetchRequest).replica.id

    def error_response(self, version: int, error: ErrorCode) -> MessageDict:
        if version >= 7:
            return {"error_code": int(error)}
        # No top-level error before Fetch v7: the error goes on the partition asked about.
        return {
            "responses": [
                {
                    "topic": METADATA_TOPIC_NAME,
                    "partitions": [
                        {
                            "partition_index": METADATA_PARTITION,
                            "error_code": int(error),
                            "high_watermark": -1,
                        }
                    ],
                }
            ]
        }
