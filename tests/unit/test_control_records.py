"""KRaft control records: LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters."""

from __future__ import annotations

import contextlib
import struct
import uuid

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.control_records import (
    ControlRecord,
    ControlRecordType,
    Endpoint,
    KRaftVersionRecord,
    LeaderChangeMessage,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    VoterEntry,
    VotersRecord,
    control_record_type,
    decode_control_batch,
    decode_control_record,
    encode_control_batch,
)
from kraft.records import CorruptRecordError, Record, decode_batch, encode_batch


def with_crc(prefix_hex: str, crc_covered_hex: str) -> bytes:
    """Hand-written bytes around a CRC-32C computed here over the hand-written covered part."""
    covered = bytes.fromhex(crc_covered_hex)
    return bytes.fromhex(prefix_hex) + struct.pack(">I", crc32c.crc32c(covered)) + covered


# LeaderChangeMessage v0 (flexible): Version int16 | LeaderId int32 | Voters compact array of
# Voter{VoterId int32, tagged fields} | GrantingVoters (same) | tagged fields.
LEADER_CHANGE = LeaderChangeMessage(
    version=0, leader_id=1, voters=(1, 2, 3), granting_voters=(1, 2)
)
LEADER_CHANGE_VALUE = (
    "0000"  # Version 0
    "00000001"  # LeaderId 1
    "04 00000001 00 00000002 00 00000003 00"  # Voters: 3 + 1 = 04, each id + empty tags
    "03 00000001 00 00000002 00"  # GrantingVoters: 2 + 1 = 03
    "00"  # no tagged fields
)  # 34 bytes
# Record: attributes 00 | timestampDelta 00 | offsetDelta 00 | keyLength 4 -> 08 |
#   key (version 0, type 2) | valueLength 34 -> zigzag 68 = 44 | value | headers 00
#   = 3 + 1 + 4 + 1 + 34 + 1 = 44 bytes, length varint zigzag(44) = 88 = 58.
# Length = 49 + 45 = 94 = 0x5e.
GOLDEN_LEADER_CHANGE_BATCH = with_crc(
    "0000000000000000"  # BaseOffset 0
    "0000005e"  # Length 94
    "00000001"  # PartitionLeaderEpoch 1
    "02",  # Magic 2
    "0020"  # Attributes: bit 5 = control batch
    "00000000"  # LastOffsetDelta 0
    "00000000000003e8"  # BaseTimestamp 1000
    "00000000000003e8"  # MaxTimestamp 1000
    "ffffffffffffffff ffff ffffffff"  # ProducerId, ProducerEpoch, BaseSequence: -1
    "00000001"  # RecordsCount 1
    "58 00 00 00"  # record length 44 | attributes | timestampDelta | offsetDelta
    "08 0000 0002"  # key: control key version 0, type 2 (LeaderChange)
    "44" + LEADER_CHANGE_VALUE + "00",  # value length 34 | value | no headers
)

# VotersRecord v0 (flexible): Version int16 | Voters compact array of Voter{VoterId int32,
# VoterUuid uuid, Endpoints compact array of {Name compact string, Host compact string,
# Port uint16, tags}, KRaftVersionFeature{MinSupportedVersion int16, MaxSupportedVersion int16,
# tags}, tags} | tags.
DIRECTORY = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
VOTERS = VotersRecord(
    version=0,
    voters=(VoterEntry(1, DIRECTORY, (Endpoint("CONTROLLER", "localhost", 9093),), 0, 1),),
)
VOTERS_VALUE = (
    "0000"  # Version 0
    "02"  # 1 voter
    "00000001"  # VoterId 1
    "00112233445566778899aabbccddeeff"  # VoterUuid
    "02"  # 1 endpoint
    "0b 434f4e54524f4c4c4552"  # Name "CONTROLLER": 10 + 1 = 0b
    "0a 6c6f63616c686f7374"  # Host "localhost": 9 + 1 = 0a
    "2385"  # Port 9093
    "00"  # endpoint tags
    "0000 0001 00"  # KRaftVersionFeature: min 0, max 1, its tags
    "00"  # voter tags
    "00"  # record tags
)  # 55 bytes
# Record: 00 00 00 | 08 | key 0000 0006 | value length 55 -> zigzag 110 = 6e | value | 00
#   = 3 + 1 + 4 + 1 + 55 + 1 = 65 bytes; zigzag(65) = 130 -> two-byte varint 82 01.
# Length = 49 + 2 + 65 = 116 = 0x74.
GOLDEN_VOTERS_BATCH = with_crc(
    "000000000000000a"  # BaseOffset 10
    "00000074"  # Length 116
    "00000002"  # PartitionLeaderEpoch 2
    "02",  # Magic 2
    "0020"  # Attributes: control
    "00000000"  # LastOffsetDelta 0
    "0000018bcfe56800"  # BaseTimestamp 1700000000000
    "0000018bcfe56800"  # MaxTimestamp
    "ffffffffffffffff ffff ffffffff"  # no producer
    "00000001"  # RecordsCount 1
    "8201 00 00 00"  # record length 65 | attributes | timestampDelta | offsetDelta
    "08 0000 0006"  # key: version 0, type 6 (Voters)
    "6e" + VOTERS_VALUE + "00",  # value length 55 | value | no headers
)


def test_golden_leader_change_encode() -> None:
    encoded = encode_control_batch(0, 1, LEADER_CHANGE, timestamp_ms=1000)
    assert encoded.hex() == GOLDEN_LEADER_CHANGE_BATCH.hex()


def test_golden_leader_change_decode() -> None:
    header, records = decode_control_batch(GOLDEN_LEADER_CHANGE_BATCH)
    assert header.is_control
    assert header.partition_leader_epoch == 1
    assert records == [LEADER_CHANGE]
    _, raw = decode_batch(GOLDEN_LEADER_CHANGE_BATCH)
    assert control_record_type(raw[0]) is ControlRecordType.LEADER_CHANGE


def test_golden_voters_encode() -> None:
    encoded = encode_control_batch(10, 2, VOTERS, timestamp_ms=1_700_000_000_000)
    assert encoded.hex() == GOLDEN_VOTERS_BATCH.hex()


def test_golden_voters_decode() -> None:
    header, records = decode_control_batch(GOLDEN_VOTERS_BATCH)
    assert (header.base_offset, header.partition_leader_epoch) == (10, 2)
    assert records == [VOTERS]


def test_simple_control_values() -> None:
    # SnapshotHeader: Version int16 | LastContainedLogTimestamp int64 | tags.
    # SnapshotFooter: Version int16 | tags. KRaftVersion: Version int16 | KRaftVersion int16 | tags.
    cases: list[tuple[ControlRecord, int, str]] = [
        (SnapshotHeaderRecord(0, 1000), 3, "0000 00000000000003e8 00"),
        (SnapshotFooterRecord(0), 4, "0000 00"),
        (KRaftVersionRecord(0, 1), 5, "0000 0001 00"),
    ]
    for message, kind, value_hex in cases:
        _, (record,) = decode_batch(encode_control_batch(0, 0, message, timestamp_ms=0))
        assert record.key == struct.pack(">hh", 0, kind)
        assert record.value == bytes.fromhex(value_hex)
        assert decode_control_record(record) == message


def test_unknown_tagged_fields_are_skipped() -> None:
    # A newer writer may add tagged fields: tag 7 with 2 bytes at the end of a SnapshotFooter.
    record = Record(0, 0, struct.pack(">hh", 0, 4), bytes.fromhex("0000 01 07 02 abcd"))
    assert decode_control_record(record) == SnapshotFooterRecord(0)


# ---------------------------------------------------------------- round trips

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
ENDPOINTS = st.builds(Endpoint, st.text(max_size=12), st.text(max_size=20), st.integers(0, 65535))
VOTER_ENTRIES = st.builds(
    VoterEntry,
    I32,
    st.uuids(),
    st.lists(ENDPOINTS, max_size=3).map(tuple),
    I16,
    I16,
)
CONTROL_RECORDS = st.one_of(
    st.builds(
        LeaderChangeMessage,
        I16,
        I32,
        st.lists(I32, max_size=8).map(tuple),
        st.lists(I32, max_size=8).map(tuple),
    ),
    st.builds(SnapshotHeaderRecord, I16, st.integers(-(2**63), 2**63 - 1)),
    st.builds(SnapshotFooterRecord, I16),
    st.builds(KRaftVersionRecord, I16, I16),
    st.builds(VotersRecord, I16, st.lists(VOTER_ENTRIES, max_size=4).map(tuple)),
)


@given(CONTROL_RECORDS, st.integers(0, 2**62), st.integers(-1, 2**31 - 1))
def test_control_round_trip(message: ControlRecord, base: int, epoch: int) -> None:
    data = encode_control_batch(base, epoch, message, timestamp_ms=5)
    header, decoded = decode_control_batch(data)
    assert header.is_control
    assert header.records_count == 1
    assert header.base_offset == base
    assert decoded == [message]


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (None, "key too short"),
        (b"\x00\x00\x00", "key too short"),
        (struct.pack(">hh", -1, 2), "negative key version"),
        (struct.pack(">hh", 0, 99), "unknown type 99"),
    ],
)
def test_bad_control_key(key: bytes | None, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        control_record_type(Record(0, 0, key, b"\x00\x00\x00"))


def test_transaction_markers_not_decoded() -> None:
    record = Record(0, 0, struct.pack(">hh", 0, 1), bytes.fromhex("0000 00000000"))
    assert control_record_type(record) is ControlRecordType.COMMIT
    with pytest.raises(CorruptRecordError, match="not used by KRaft"):
        decode_control_record(record)


@pytest.mark.parametrize(
    ("kind", "value_hex"),
    [
        (2, "0000 00000001 05 00000001 00"),  # voters array claims 4, holds 1
        (3, "0000 0000000000"),  # truncated timestamp
        (4, "0000 00 ff"),  # trailing byte
        (5, "0000"),  # missing kraft version
        (6, "0000 02 00000001"),  # truncated voter
        (6, "0000 02 00000001" + "00" * 16 + "02 03 ff ff"),  # endpoint name not UTF-8
    ],
)
def test_bad_control_values(kind: int, value_hex: str) -> None:
    record = Record(0, 0, struct.pack(">hh", 0, kind), bytes.fromhex(value_hex))
    with pytest.raises(CorruptRecordError):
        decode_control_record(record)


def test_null_control_value() -> None:
    with pytest.raises(CorruptRecordError, match="null value"):
        decode_control_record(Record(0, 0, struct.pack(">hh", 0, 4), None))


def test_data_batch_is_not_a_control_batch() -> None:
    with pytest.raises(CorruptRecordError, match="not a control batch"):
        decode_control_batch(encode_batch(0, 0, [b"x"], timestamp_ms=0))


@given(CONTROL_RECORDS, st.data())
def test_corrupted_control_values_raise_only_corrupt_record_error(
    message: ControlRecord, data: st.DataObject
) -> None:
    batch = encode_control_batch(0, 0, message, timestamp_ms=0)
    _, (record,) = decode_batch(batch)
    assert record.value is not None
    value = bytearray(record.value)
    if value:
        at = data.draw(st.integers(0, len(value) - 1))
        value[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(value)))
    broken = Record(0, 0, record.key, bytes(value[:cut]))
    with contextlib.suppress(CorruptRecordError):
        decode_control_record(broken)
