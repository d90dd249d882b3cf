"""Fetch v17 as replicas exchange it, read straight into the core's messages and written
straight from them.

Every committed batch costs each follower one Fetch and the leader one answer; the generic
codec (kraft.protocol.codec) reads them into nested dicts that the translator
(kraft.protocol.rpc.fetch) then walks, about half of a follower's Python work per fetch. These
readers take only the shape kraft and Kafka send each other (one topic: the metadata topic's
id, one partition: 0, the tagged fields Fetch v17 defines, no unknown ones, one-byte lengths
where the shape has short ones) and return None for anything else, so the caller takes the
generic path, which stays the only judge of a malformed or refused message. What they return
equals what the generic path returns for the same bytes (tests/unit/test_fetch_fast.py).
"""

from __future__ import annotations

import struct
from typing import Final

from kraft.core.messages import FetchRequest, FetchResponse
from kraft.ids import (
    NO_DIRECTORY,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.protocol.rpc.common import TOP_LEVEL_ERRORS, Listener, error_from_code
from kraft.protocol.schema import ApiKey
from kraft.protocol.topic_ids import METADATA_PARTITION, METADATA_TOPIC_ID
from kraft.protocol.wire import WireFormatError, make_uuid, read_uvarint, uvarint

__all__ = [
    "FAST_FETCH_VERSION",
    "Endpoint",
    "fetch_request_frame",
    "fetch_response_frame",
    "read_fetch_request",
    "read_fetch_response",
]

FAST_FETCH_VERSION: Final = 17

Endpoint = tuple[NodeId, str, int]

_TOPIC_ID: Final = METADATA_TOPIC_ID.bytes
# max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
_REQUEST_HEAD: Final = struct.Struct(">iiibii")
# partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
# partition_max_bytes
_REQUEST_PARTITION: Final = struct.Struct(">iiqiqi")
_REPLICA_STATE: Final = struct.Struct(">iq")  # replica_id, replica_epoch
_RESPONSE_HEAD: Final = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
# partition_index, error_code, high_watermark, last_stable_offset, log_start_offset
_RESPONSE_PARTITION: Final = struct.Struct(">ihqqq")
_EPOCH_END: Final = struct.Struct(">iq")  # diverging_epoch: epoch, end_offset
_LEADER: Final = struct.Struct(">ii")  # current_leader: leader_id, leader_epoch
_SNAPSHOT: Final = struct.Struct(">qi")  # snapshot_id: end_offset, epoch
_I32: Final = struct.Struct(">i")
# What a malformed or cut buffer raises here: the generic path then says what is wrong.
_FAULTS: Final = (IndexError, ValueError, struct.error, WireFormatError)


def read_fetch_request(body: memoryview) -> FetchRequest | None:
    """The FetchRequest a Fetch v17 request body (after its header) carries, or None."""
    try:
        return _request(body)
    except _FAULTS:
        return None


def _request(b: memoryview) -> FetchRequest | None:
    max_wait_ms, _, max_bytes, _, _, _ = _REQUEST_HEAD.unpack_from(b, 0)
    # One topic (count + 1 = 2), the metadata topic, one partition.
    if b[21] != 2 or b[22:38] != _TOPIC_ID or b[38] != 2:
        return None
    partition, epoch, fetch_offset, last_epoch, log_start, partition_max = (
        _REQUEST_PARTITION.unpack_from(b, 39)
    )
    if partition != METADATA_PARTITION:
        return None
    pos = 71
    directory = NO_DIRECTORY
    tags = b[pos]
    if tags == 1:  # replica_directory_id (tag 0, 16 bytes)
        if b[pos + 1] != 0 or b[pos + 2] != 16:
            return None
        directory = DirectoryId(make_uuid(bytes(b[pos + 3 : pos + 19])))
        pos += 19
    elif tags == 0:
        pos += 1
    else:
        return None
    # No topic tags, no forgotten topics, an empty rack id, then the two top-level tags:
    # cluster_id (0) and replica_state (1).
    if b[pos] != 0 or b[pos + 1] != 1 or b[pos + 2] != 1 or b[pos + 3] != 2 or b[pos + 4] != 0:
        return None
    size = b[pos + 5]
    n = b[pos + 6]  # the cluster id's length + 1, its tag's size - 1 when both are one byte
    if size >= 0x80 or n == 0 or n >= 0x80 or size != n:
        return None
    pos += 7
    cluster = str(b[pos : pos + n - 1], "utf-8")
    pos += n - 1
    if b[pos] != 1 or b[pos + 1] != 13 or b[pos + 14] != 0:
        return None
    replica_id, _ = _REPLICA_STATE.unpack_from(b, pos + 2)
    if pos + 15 != len(b):
        return None
    if partition_max > 0:  # as FetchRpc.request_from_wire: either bound applies
        max_bytes = min(max_bytes, partition_max)
    return FetchRequest(
        cluster_id=ClusterId(cluster),
        replica=ReplicaKey(NodeId(replica_id), directory),
        replica_epoch=Epoch(epoch),
        fetch_offset=Offset(fetch_offset),
        last_fetched_epoch=Epoch(last_epoch),
        log_start_offset=Offset(log_start),
        max_bytes=max_bytes,
        max_wait_ms=max_wait_ms,
    )


def read_fetch_response(frame: bytes) -> tuple[FetchResponse, list[Endpoint]] | None:
    """The FetchResponse a whole Fetch v17 response (header and body, no size prefix) carries
    and the endpoints it names (as kraft.server.peers keeps them), or None."""
    try:
        return _response(memoryview(frame))
    except _FAULTS:
        return None


def _response(b: memoryview) -> tuple[FetchResponse, list[Endpoint]] | None:
    end = len(b)
    if b[4] != 0:  # response header v1: correlation id, no tags
        return None
    _, top_error, _ = _RESPONSE_HEAD.unpack_from(b, 5)
    if top_error != 0 or b[15] != 2 or b[16:32] != _TOPIC_ID or b[32] != 2:
        return None
    index, error, hwm, _, log_start = _RESPONSE_PARTITION.unpack_from(b, 33)
    if index != METADATA_PARTITION or b[63] > 1:  # aborted_transactions: null or empty
        return None
    pos = 68  # past preferred_read_replica
    n, pos = read_uvarint(b, pos)
    records: memoryview | bytes = b""
    if n > 0:
        e = pos + n - 1
        if e > end:
            return None
        records = b[pos:e]
        pos = e
    div_epoch, div_end = -1, -1
    leader_id, leader_epoch = -1, -1
    snap_end, snap_epoch = -1, -1
    tags = b[pos]
    pos += 1
    if tags >= 0x80:
        return None
    for _ in range(tags):
        tag, size = b[pos], b[pos + 1]
        if tag == 0 and size == 13 and b[pos + 14] == 0:
            div_epoch, div_end = _EPOCH_END.unpack_from(b, pos + 2)
        elif tag == 1 and size == 9 and b[pos + 10] == 0:
            leader_id, leader_epoch = _LEADER.unpack_from(b, pos + 2)
        elif tag == 2 and size == 13 and b[pos + 14] == 0:
            snap_end, snap_epoch = _SNAPSHOT.unpack_from(b, pos + 2)
        else:
            return None
        pos += 2 + size
    if b[pos] != 0:  # no topic tags
        return None
    pos += 1
    endpoints: list[Endpoint] = []
    tags = b[pos]
    pos += 1
    if tags == 1:
        if b[pos] != 0:  # node_endpoints
            return None
        size, pos = read_uvarint(b, pos + 1)
        stop = pos + size
        count = b[pos] - 1
        pos += 1
        if count < 0 or b[pos - 1] >= 0x80 or stop > end:
            return None
        for _ in range(count):
            (node,) = _I32.unpack_from(b, pos)
            n = b[pos + 4] - 1
            if n < 0 or n >= 0x7F:
                return None
            host = str(b[pos + 5 : pos + 5 + n], "utf-8")
            pos += 5 + n
            (port,) = _I32.unpack_from(b, pos)
            rack = b[pos + 4]
            if rack >= 0x80:
                return None
            if rack > 0:
                str(b[pos + 5 : pos + 4 + rack], "utf-8")  # the generic path refuses bad UTF-8
                pos += rack - 1
            if b[pos + 5] != 0:
                return None
            pos += 6
            if node >= 0 and 0 < port < 65536:
                endpoints.append((NodeId(node), host, port))
        if pos != stop:
            return None
    elif tags != 0:
        return None
    if pos != end:
        return None
    diverging = None
    if div_epoch >= 0:
        diverging = OffsetAndEpoch(Epoch(div_epoch), Offset(div_end))
    snapshot = None
    if snap_epoch >= 0 or snap_end >= 0:
        if snap_epoch < 0 or snap_end < 0:
            return None  # the generic path refuses a half-set snapshot id
        snapshot = OffsetAndEpoch(Epoch(snap_epoch), Offset(snap_end))
    response = FetchResponse(
        error=error_from_code(error),
        leader_id=NodeId(leader_id),
        leader_epoch=Epoch(leader_epoch),
        high_watermark=Offset(hwm),
        log_start_offset=Offset(log_start),
        diverging_epoch=diverging,
        snapshot_id=snapshot,
        records=records,
    )
    return response, endpoints


# ---- writing: the bytes the generic encoder writes for the same message, in one join

_SIZE: Final = struct.Struct(">i")
_REQUEST_HEADER: Final = struct.Struct(">hhih")  # api key, version, correlation id, client id
_RESPONSE_START: Final = struct.Struct(">iBihiB")  # correlation id, no header tags, then
# throttle_time_ms, error_code, session_id and the one-topic count
_PARTITION_OUT: Final = struct.Struct(">ihqqqBi")  # ... aborted (empty), preferred replica
_REQUEST_TOPIC: Final = b"\x02" + _TOPIC_ID + b"\x02"  # one topic, its id, one partition
_TAGGED_EPOCH_END: Final = struct.Struct(">BBiqB")  # tag, size 13, epoch, end offset, no tags
_TAGGED_LEADER: Final = struct.Struct(">BBiiB")  # tag, size 9, leader id, leader epoch
_TAGGED_SNAPSHOT: Final = struct.Struct(">BBqiB")  # tag, size 13, end offset, epoch
_TAGGED_STATE: Final = struct.Struct(">BBiqB")  # tag 1, size 13, replica id, replica epoch


# A value out of its field's range (or a string that is not UTF-8): the generic encoder then
# refuses it in its own words.
_WRITE_FAULTS: Final = (struct.error, ValueError, OverflowError)


def fetch_request_frame(
    req: FetchRequest, correlation_id: int, client_id: str | None
) -> bytes | None:
    """The whole Fetch v17 request (size prefix, header v2, body) the generic encoder writes
    for `req` (FetchRpc.request_to_wire, kraft.protocol.envelope.encode_request_payload), or
    None when a value does not fit its field."""
    try:
        return _request_frame(req, correlation_id, client_id)
    except _WRITE_FAULTS:
        return None


def _request_frame(req: FetchRequest, correlation_id: int, client_id: str | None) -> bytes:
    if client_id is None:
        head = _REQUEST_HEADER.pack(ApiKey.FETCH, FAST_FETCH_VERSION, correlation_id, -1)
    else:
        raw = client_id.encode("utf-8")
        head = (
            _REQUEST_HEADER.pack(ApiKey.FETCH, FAST_FETCH_VERSION, correlation_id, len(raw)) + raw
        )
    directory = req.replica.directory_id
    part_tags = b"\x00" if directory == NO_DIRECTORY else b"\x01\x00\x10" + directory.bytes
    cluster = req.cluster_id.encode("utf-8")
    cluster_field = uvarint(len(cluster) + 1) + cluster
    tags = [b"\x00", uvarint(len(cluster_field)), cluster_field]
    if req.replica.id != -1:  # replica_state, unless it is its default (-1, -1)
        tags.append(_TAGGED_STATE.pack(1, 13, req.replica.id, -1, 0))
    parts: list[bytes | memoryview] = [
        b"",
        head,
        b"\x00",  # no header tags
        _REQUEST_HEAD.pack(req.max_wait_ms, 0, req.max_bytes, 0, 0, -1),
        _REQUEST_TOPIC,
        _REQUEST_PARTITION.pack(
            METADATA_PARTITION,
            req.replica_epoch,
            req.fetch_offset,
            req.last_fetched_epoch,
            req.log_start_offset,
            req.max_bytes,
        ),
        part_tags,
        b"\x00\x01\x01",  # no topic tags, no forgotten topics, an empty rack id
        b"\x02" if len(tags) == 4 else b"\x01",  # the top-level tags' count
        *tags,
    ]
    return _framed(parts)


def _framed(parts: list[bytes | memoryview]) -> bytes:
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def fetch_response_frame(
    resp: FetchResponse, correlation_id: int, leader_listener: Listener | None
) -> bytes | None:
    """The whole Fetch v17 response (size prefix, header v1, body) the generic encoder writes
    for `resp` (FetchRpc.response_to_wire, encode_response_payload); None for a top-level
    error, which the generic path answers in its own shape, or a value that does not fit."""
    if resp.error in TOP_LEVEL_ERRORS:
        return None
    try:
        return _response_frame(resp, correlation_id, leader_listener)
    except _WRITE_FAULTS:
        return None


def _response_frame(
    resp: FetchResponse, correlation_id: int, leader_listener: Listener | None
) -> bytes:
    records = resp.records
    parts: list[bytes | memoryview] = [
        b"",
        _RESPONSE_START.pack(correlation_id, 0, 0, 0, 0, 2),
        _TOPIC_ID,
        b"\x02",  # one partition
        _PARTITION_OUT.pack(
            METADATA_PARTITION, resp.error, resp.high_watermark, -1, resp.log_start_offset, 1, -1
        ),
        uvarint(len(records) + 1),
        records,  # a buffer: join takes it as it is (no copy before the one join)
    ]
    tags = []
    diverging = resp.diverging_epoch
    if diverging is not None and (diverging.epoch, diverging.offset) != (-1, -1):
        tags.append(_TAGGED_EPOCH_END.pack(0, 13, diverging.epoch, diverging.offset, 0))
    if (resp.leader_id, resp.leader_epoch) != (-1, -1):
        tags.append(_TAGGED_LEADER.pack(1, 9, resp.leader_id, resp.leader_epoch, 0))
    snapshot = resp.snapshot_id
    if snapshot is not None and (snapshot.offset, snapshot.epoch) != (-1, -1):
        tags.append(_TAGGED_SNAPSHOT.pack(2, 13, snapshot.offset, snapshot.epoch, 0))
    parts.append(uvarint(len(tags)))
    parts.extend(tags)
    parts.append(b"\x00")  # no topic tags
    if leader_listener is None or resp.leader_id < 0:
        parts.append(b"\x00")
    else:  # node_endpoints (tag 0): the leader's endpoint on this listener, no rack
        host = leader_listener.host.encode("utf-8")
        entry = b"".join(
            (
                b"\x02",
                _I32.pack(resp.leader_id),
                uvarint(len(host) + 1),
                host,
                _I32.pack(leader_listener.port),
                b"\x00\x00",  # a null rack, no tags
            )
        )
        parts += (b"\x01\x00", uvarint(len(entry)), entry)
    return _framed(parts)
