"""KRaft's control records: the messages of control batches (attribute bit 5) that the
protocol itself writes (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters), their
Kafka encodings (flexible v0 messages behind a (version i16, type i16) key), and the batches
that carry them. The batch format itself is kraft.records."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from kraft.encoding import MalformedInputError, Reader, Writer, varint_bytes
from kraft.records import (
    ATTR_CONTROL,
    BatchHeader,
    CorruptRecordError,
    Record,
    assemble_batch,
    decode_batch,
    record_body,
)

__all__ = [
    "CONTROL_KEY_VERSION",
    "ControlRecord",
    "ControlRecordType",
    "Endpoint",
    "KRaftVersionRecord",
    "LeaderChangeMessage",
    "SnapshotFooterRecord",
    "SnapshotHeaderRecord",
    "VoterEntry",
    "VotersRecord",
    "control_record_type",
    "decode_control_batch",
    "decode_control_record",
    "encode_control_batch",
    "encode_control_records",
]

_CONTROL_KEY = struct.Struct(">hh")


class ControlRecordType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    VOTERS = 6


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    """LeaderChangeMessage v0 (flexible): the first record a new leader writes (KIP-595)."""

    version: int
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SnapshotHeaderRecord:
    """First record of a snapshot (KIP-630)."""

    version: int
    last_contained_log_timestamp: int


@dataclass(frozen=True, slots=True)
class SnapshotFooterRecord:
    """Last record of a snapshot (KIP-630)."""

    version: int


@dataclass(frozen=True, slots=True)
class KRaftVersionRecord:
    version: int
    kraft_version: int


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class VoterEntry:
    voter_id: int
    voter_directory_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True)
class VotersRecord:
    """The whole voter set in one record (KIP-853 VotersRecord v0)."""

    version: int
    voters: tuple[VoterEntry, ...]


ControlRecord = (
    LeaderChangeMessage
    | SnapshotHeaderRecord
    | SnapshotFooterRecord
    | KRaftVersionRecord
    | VotersRecord
)

# The control record key schema version Kafka writes.
CONTROL_KEY_VERSION = 0


def _control_type_of(record: ControlRecord) -> ControlRecordType:
    if isinstance(record, LeaderChangeMessage):
        return ControlRecordType.LEADER_CHANGE
    if isinstance(record, SnapshotHeaderRecord):
        return ControlRecordType.SNAPSHOT_HEADER
    if isinstance(record, SnapshotFooterRecord):
        return ControlRecordType.SNAPSHOT_FOOTER
    if isinstance(record, KRaftVersionRecord):
        return ControlRecordType.KRAFT_VERSION
    return ControlRecordType.VOTERS


def _encode_control_value(record: ControlRecord) -> bytes:
    """The message in Kafka's flexible (v0, compact + tagged fields) encoding."""
    w = Writer()
    w.int16(record.version)
    if isinstance(record, LeaderChangeMessage):
        w.int32(record.leader_id)
        for ids in (record.voters, record.granting_voters):
            w.compact_array_length(len(ids))
            for voter_id in ids:
                w.int32(voter_id).tagged_fields()
    elif isinstance(record, SnapshotHeaderRecord):
        w.int64(record.last_contained_log_timestamp)
    elif isinstance(record, KRaftVersionRecord):
        w.int16(record.kraft_version)
    elif isinstance(record, VotersRecord):
        w.compact_array_length(len(record.voters))
        for voter in record.voters:
            w.int32(voter.voter_id).uuid(voter.voter_directory_id)
            w.compact_array_length(len(voter.endpoints))
            for ep in voter.endpoints:
                w.compact_string(ep.name).compact_string(ep.host).uint16(ep.port)
                w.tagged_fields()
            # KRaftVersionFeature is a nested struct: it carries its own tagged-field section.
            w.int16(voter.min_supported_version).int16(voter.max_supported_version)
            w.tagged_fields()
            w.tagged_fields()
    w.tagged_fields()
    return w.getvalue()


def _decode_control_value(kind: ControlRecordType, value: bytes) -> ControlRecord:
    # Unknown tagged fields are read and dropped: they belong to newer writers.
    r = Reader(value)
    version = r.int16()
    result: ControlRecord
    if kind is ControlRecordType.LEADER_CHANGE:
        leader_id = r.int32()
        lists: list[tuple[int, ...]] = []
        for _ in range(2):
            ids = []
            for _ in range(r.compact_array_length()):
                ids.append(r.int32())
                r.tagged_fields()
            lists.append(tuple(ids))
        result = LeaderChangeMessage(version, leader_id, lists[0], lists[1])
    elif kind is ControlRecordType.SNAPSHOT_HEADER:
        result = SnapshotHeaderRecord(version, r.int64())
    elif kind is ControlRecordType.SNAPSHOT_FOOTER:
        result = SnapshotFooterRecord(version)
    elif kind is ControlRecordType.KRAFT_VERSION:
        result = KRaftVersionRecord(version, r.int16())
    elif kind is ControlRecordType.VOTERS:
        voters = []
        for _ in range(r.compact_array_length()):
            voter_id = r.int32()
            directory_id = r.uuid()
            endpoints = []
            for _ in range(r.compact_array_length()):
                name = r.compact_string()
                host = r.compact_string()
                port = r.uint16()
                r.tagged_fields()
                endpoints.append(Endpoint(name, host, port))
            min_version = r.int16()
            max_version = r.int16()
            r.tagged_fields()
            r.tagged_fields()
            voters.append(
                VoterEntry(voter_id, directory_id, tuple(endpoints), min_version, max_version)
            )
        result = VotersRecord(version, tuple(voters))
    else:
        raise CorruptRecordError(f"control record type {kind.name} is not used by KRaft")
    r.tagged_fields()
    r.expect_done(f"{kind.name} control record")
    return result


def control_record_type(record: Record) -> ControlRecordType:
    """The type named by a control record's key (version i16, type i16)."""
    key = record.key
    # Kafka accepts keys at least this long, so a newer key version may append fields.
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(f"control record at offset {record.offset}: key too short")
    version, kind = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(
            f"control record at offset {record.offset}: negative key version {version}"
        )
    try:
        return ControlRecordType(kind)
    except ValueError:
        raise CorruptRecordError(
            f"control record at offset {record.offset}: unknown type {kind}"
        ) from None


def decode_control_record(record: Record) -> ControlRecord:
    kind = control_record_type(record)
    if record.value is None:
        raise CorruptRecordError(f"control record at offset {record.offset}: null value")
    try:
        return _decode_control_value(kind, record.value)
    except CorruptRecordError:
        raise
    except MalformedInputError as e:
        raise CorruptRecordError(
            f"control record at offset {record.offset} ({kind.name}): {e}"
        ) from e


def encode_control_batch(
    base_offset: int, epoch: int, record: ControlRecord, *, timestamp_ms: int
) -> bytes:
    """One control record in its own batch (attributes bit 5), as Kafka writes them."""
    return encode_control_records(base_offset, epoch, (record,), timestamp_ms=timestamp_ms)


def encode_control_records(
    base_offset: int, epoch: int, records: Sequence[ControlRecord], *, timestamp_ms: int
) -> bytes:
    """Control records in one control batch, offsets base_offset.. in order (a snapshot's
    first batch: SnapshotHeader, KRaftVersion, Voters)."""
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    if not records:
        raise ValueError("a control batch needs at least one record")
    parts = [b""]
    for delta, record in enumerate(records):
        key = _CONTROL_KEY.pack(CONTROL_KEY_VERSION, _control_type_of(record))
        body = record_body(delta, key, _encode_control_value(record), ())
        parts += (varint_bytes(len(body)), body)
    return assemble_batch(
        base_offset,
        epoch,
        parts,
        attributes=ATTR_CONTROL,
        count=len(records),
        timestamp_ms=timestamp_ms,
    )


def decode_control_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, verify: bool = True
) -> tuple[BatchHeader, list[ControlRecord]]:
    header, records = decode_batch(buf, pos, verify=verify)
    if not header.is_control:
        raise CorruptRecordError(f"batch at position {pos} is not a control batch")
    return header, [decode_control_record(r) for r in records]
