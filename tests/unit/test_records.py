"""Record batch v2 codec: golden bytes, round trips, and malformed input."""

from __future__ import annotations

import contextlib
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.encoding import MalformedInputError
from kraft.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    Record,
    TruncatedBatchError,
    decode_batch,
    encode_batch,
    encode_records,
    iter_batches,
    iter_values,
    parse_batch_header,
    verify_crc,
)


def with_crc(prefix_hex: str, crc_covered_hex: str) -> bytes:
    """Join hand-written header prefix (BaseOffset..Magic) + CRC + the CRC-covered bytes.

    The CRC is the only value not written by hand: it is CRC-32C of the hand-written bytes
    from Attributes to the end, computed here with the crc32c package.
    """
    covered = bytes.fromhex(crc_covered_hex)
    return bytes.fromhex(prefix_hex) + struct.pack(">I", crc32c.crc32c(covered)) + covered


# Two records at base offset 5, leader epoch 3, timestamp 1000 ms.
#   record 0: key b"k", value b"v0", one header ("h", b"x")
#   record 1: no key, value b"v1", no headers
# Record 0 body: attributes 00 | timestampDelta 00 | offsetDelta 00 | keyLength 1 -> zigzag 02 |
#   "k" 6b | valueLength 2 -> 04 | "v0" 7630 | headers count 1 -> 02 |
#   header key length 1 -> 02 | "h" 68 | header value length 1 -> 02 | "x" 78
#   = 13 bytes, so its length varint is zigzag(13) = 26 = 1a.
# Record 1 body: 00 | 00 | offsetDelta 1 -> 02 | keyLength -1 -> 01 | 04 | "v1" 7631 |
#   headers 0 -> 00  = 8 bytes, length varint zigzag(8) = 16 = 10.
# Records take 14 + 9 = 23 bytes; Length = 49 (header after Length) + 23 = 72 = 0x48.
GOLDEN_DATA_BATCH = with_crc(
    "0000000000000005"  # BaseOffset 5
    "00000048"  # Length 72
    "00000003"  # PartitionLeaderEpoch 3
    "02",  # Magic 2
    "0000"  # Attributes: no compression, not transactional, not control
    "00000001"  # LastOffsetDelta 1
    "00000000000003e8"  # BaseTimestamp 1000
    "00000000000003e8"  # MaxTimestamp 1000
    "ffffffffffffffff"  # ProducerId -1
    "ffff"  # ProducerEpoch -1
    "ffffffff"  # BaseSequence -1
    "00000002"  # RecordsCount 2
    "1a 00 00 00 02 6b 04 7630 02 02 68 02 78"  # record 0: len | attrs ts off | key | value | hdrs
    "10 00 00 02 01 04 7631 00",  # record 1: len | attrs ts off | null key | value | no headers
)

GOLDEN_RECORDS = [
    Record(offset=5, timestamp=1000, key=b"k", value=b"v0", headers=(("h", b"x"),)),
    Record(offset=6, timestamp=1000, key=None, value=b"v1", headers=()),
]


def test_golden_data_batch_encode() -> None:
    encoded = encode_batch(
        5,
        3,
        [b"v0", b"v1"],
        timestamp_ms=1000,
        keys=[b"k", None],
        headers=[[("h", b"x")], []],
    )
    assert encoded.hex() == GOLDEN_DATA_BATCH.hex()


def test_golden_data_batch_decode() -> None:
    header, records = decode_batch(GOLDEN_DATA_BATCH)
    assert header == BatchHeader(
        base_offset=5,
        length=72,
        partition_leader_epoch=3,
        magic=2,
        crc=struct.unpack_from(">I", GOLDEN_DATA_BATCH, 17)[0],
        attributes=0,
        last_offset_delta=1,
        base_timestamp=1000,
        max_timestamp=1000,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=2,
    )
    assert records == GOLDEN_RECORDS
    assert header.last_offset == 6
    assert header.next_offset == 7
    # "Length ... counts the bytes after the length field": the whole batch is 12 bytes more.
    assert header.size_in_bytes == len(GOLDEN_DATA_BATCH) == 84
    assert not header.is_control
    assert list(iter_values(GOLDEN_DATA_BATCH, 0, header)) == [(5, b"v0"), (6, b"v1")]


def test_golden_values_only_batch() -> None:
    # One record, no key: 00 00 00 01 | valueLength 3 -> 06 | "abc" | 00 headers = 9 bytes,
    # length varint zigzag(9) = 18 = 12. Length = 49 + 10 = 59 = 0x3b.
    golden = with_crc(
        "0000000000000000 0000003b 00000000 02",  # BaseOffset 0 | Length 59 | epoch 0 | magic
        "0000 00000000"  # Attributes | LastOffsetDelta 0
        " 0000000000000007 0000000000000007"  # BaseTimestamp 7 | MaxTimestamp 7
        " ffffffffffffffff ffff ffffffff 00000001"  # producer id/epoch, base sequence | count 1
        " 12 00 00 00 01 06 616263 00",  # the record
    )
    assert encode_batch(0, 0, [b"abc"], timestamp_ms=7) == golden


def test_hot_path_matches_general_path() -> None:
    values = [bytes([i % 256]) * (i % 300) for i in range(1200)]
    fast = encode_batch(100, 2, values, timestamp_ms=1)
    general = encode_batch(100, 2, values, timestamp_ms=1, keys=[None] * len(values))
    assert fast == general


# ---------------------------------------------------------------- round trips

HEADERS = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
)


Headers = list[tuple[str, bytes | None]]
Batch = tuple[int, int, int, list[bytes], list[bytes | None], list[Headers]]


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    n = draw(st.integers(1, 20))
    values = draw(st.lists(st.binary(max_size=300), min_size=n, max_size=n))
    keys = draw(st.lists(st.one_of(st.none(), st.binary(max_size=20)), min_size=n, max_size=n))
    headers = draw(st.lists(HEADERS, min_size=n, max_size=n))
    base = draw(st.integers(0, 2**62))
    epoch = draw(st.integers(-1, 2**31 - 1))
    ts = draw(st.integers(-(2**40), 2**62))
    return base, epoch, ts, values, keys, headers


@given(batches())
def test_round_trip_with_keys_and_headers(batch: Batch) -> None:
    base, epoch, ts, values, keys, headers = batch
    data = encode_batch(base, epoch, values, timestamp_ms=ts, keys=keys, headers=headers)
    header, records = decode_batch(data)
    assert header.base_offset == base
    assert header.partition_leader_epoch == epoch
    assert header.records_count == len(values)
    assert header.size_in_bytes == len(data)
    assert records == [
        Record(base + i, ts, keys[i], values[i], tuple(headers[i])) for i in range(len(values))
    ]


@given(st.lists(st.binary(max_size=10_000), min_size=1, max_size=5), st.integers(0, 2**40))
def test_round_trip_values_only(values: list[bytes], base: int) -> None:
    data = encode_batch(base, 1, values, timestamp_ms=0)
    _, records = decode_batch(memoryview(data))
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(base, base + len(values)))
    assert all(r.key is None and r.headers == () for r in records)


def test_iter_batches_walks_consecutive_batches() -> None:
    a = encode_batch(0, 1, [b"a", b"b"], timestamp_ms=0)
    b = encode_batch(2, 1, [b"c"], timestamp_ms=0)
    log = a + b
    assert [(pos, h.base_offset) for pos, h in iter_batches(log)] == [(0, 0), (len(a), 2)]
    assert list(iter_batches(b"")) == []


def test_encode_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        encode_batch(0, 0, [], timestamp_ms=0)
    with pytest.raises(ValueError):
        encode_batch(-1, 0, [b"x"], timestamp_ms=0)
    with pytest.raises(ValueError):
        encode_batch(0, 0, [b"x"], timestamp_ms=0, keys=[b"a", b"b"])


# ---------------------------------------------------------------- malformed input

VALID = encode_batch(10, 2, [b"hello", b"world"], timestamp_ms=5, keys=[b"k", None])


def patched(data: bytes, at: int, fmt: str, value: int, *, fix_crc: bool = True) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, value)
    if fix_crc:
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_bad_magic() -> None:
    with pytest.raises(CorruptRecordError, match="magic"):
        parse_batch_header(patched(VALID, 16, ">b", 1))


def test_crc_mismatch() -> None:
    bad = bytearray(VALID)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(bytes(bad))
    header = parse_batch_header(bytes(bad))
    with pytest.raises(CorruptRecordError, match="CRC"):
        verify_crc(bytes(bad), 0, header)


@pytest.mark.parametrize("cut", [0, 1, 11, 12, 60])
def test_truncated_header(cut: int) -> None:
    with pytest.raises(TruncatedBatchError, match="truncated batch header"):
        parse_batch_header(VALID[:cut])


def test_truncated_records() -> None:
    with pytest.raises(TruncatedBatchError, match="past the end"):
        decode_batch(VALID[:-1])
    # The tail of a log cut mid-batch: iter_batches yields the whole one, then raises.
    it = iter_batches(VALID + VALID[:70])
    assert next(it)[0] == 0
    with pytest.raises(TruncatedBatchError):
        next(it)


@pytest.mark.parametrize("length", [-1, 0, 48, -(2**31)])
def test_length_below_minimum(length: int) -> None:
    with pytest.raises(CorruptRecordError, match="below the minimum"):
        parse_batch_header(patched(VALID, 8, ">i", length, fix_crc=False))


def test_length_above_max_batch_size() -> None:
    with pytest.raises(CorruptRecordError, match="exceeds max batch size"):
        parse_batch_header(VALID, max_batch_size=len(VALID) - 13)
    assert parse_batch_header(VALID, max_batch_size=len(VALID) - 12).length == len(VALID) - 12
    with pytest.raises(CorruptRecordError, match="exceeds max batch size"):
        parse_batch_header(patched(VALID, 8, ">i", 2**31 - 1, fix_crc=False))


def test_negative_records_count() -> None:
    with pytest.raises(CorruptRecordError, match="negative records count"):
        parse_batch_header(patched(VALID, 57, ">i", -1))


def test_records_count_cannot_fit() -> None:
    with pytest.raises(CorruptRecordError, match="cannot fit"):
        parse_batch_header(patched(VALID, 57, ">i", 2**31 - 1))


def test_records_count_disagrees_with_records() -> None:
    # Header says 1 record but two follow: trailing bytes.
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode_batch(patched(VALID, 57, ">i", 1))


def test_last_offset_delta_inconsistent() -> None:
    with pytest.raises(CorruptRecordError, match="last offset delta"):
        parse_batch_header(patched(VALID, 23, ">i", 0))
    with pytest.raises(CorruptRecordError, match="last offset delta"):
        parse_batch_header(patched(VALID, 23, ">i", -5))


def test_compression_rejected() -> None:
    with pytest.raises(CorruptRecordError, match="gzip is not supported"):
        parse_batch_header(patched(VALID, 21, ">h", 1))


def test_negative_base_offset() -> None:
    with pytest.raises(CorruptRecordError, match="base offset"):
        parse_batch_header(patched(VALID, 0, ">q", -1))


def single_record_batch(record_hex: str, count: int = 1, last_delta: int = 0) -> bytes:
    """A batch around hand-written record bytes, with a correct Length and CRC."""
    records = bytes.fromhex(record_hex)
    tail = struct.pack(">hiqqqhii", 0, last_delta, 0, 0, -1, -1, -1, count) + records
    return struct.pack(">qiibI", 0, 9 + len(tail), 0, 2, crc32c.crc32c(tail)) + tail


@pytest.mark.parametrize(
    ("record_hex", "message"),
    [
        ("0c 00 00 00 03 01 00", "negative key length"),  # keyLength -2
        ("0c 00 00 00 01 03 00", "negative value length"),  # valueLength -2
        ("0c 00 00 00 0a 01 00", "key length"),  # key of 5 overruns
        ("0c 00 00 00 01 0a 00", "value length"),  # value of 5 overruns
        ("01 00 00 00 01 01 00", "length -1 invalid"),  # record length -1
        ("7e 00 00 00 01 01 00", "length 63 invalid"),  # record length beyond batch
        ("0e 00 00 00 01 01 00 00", "fields end"),  # length 7 but fields use 6
        ("0c 00 00 02 01 01 00", "offset delta"),  # offset delta 1 > last offset delta 0
        ("0c 00 00 01 01 01 00", "offset delta"),  # offset delta -1
        ("0c 00 00 00 01 01 ff", "truncated varint"),  # header count varint truncated
        ("10 00 00 00 01 01 02 01 01", "header key length"),  # header key length -1
        ("10 00 00 00 01 01 02 02 ff 01", "not UTF-8"),  # header key 0xff
        ("0c 00 00 00 01 01 7f", "header count"),  # -64 headers
        ("14 00 00 00 01 01 ffffffff1f", "does not fit"),  # header count > 32 bits
    ],
)
def test_malformed_record(record_hex: str, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode_batch(single_record_batch(record_hex))


def test_varint_overflow_in_record_length() -> None:
    with pytest.raises(CorruptRecordError, match="varint longer than 5"):
        decode_batch(single_record_batch("ffffffffff00 00 00 00 01"))


def test_offset_deltas_must_increase() -> None:
    rec = "0c 00 00 00 01 01 00"
    with pytest.raises(CorruptRecordError, match="not increasing"):
        decode_batch(single_record_batch(rec + rec, count=2, last_delta=1))


def test_nothing_past_records_count() -> None:
    # records_count 0 with a record's bytes in the batch: those bytes are trailing garbage.
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode_batch(single_record_batch("0c 00 00 00 01 01 00", count=0))


SMALL = encode_batch(
    3, 1, [b"ab", b"cd"], timestamp_ms=9, keys=[b"k", None], headers=[[("h", None)], []]
)


def decode_all(data: bytes, *, verify: bool) -> None:
    for pos, header in iter_batches(data, verify=verify):
        decode_batch(data, pos, verify=verify)
        assert header.records_count >= 0


@settings(max_examples=300)
@given(st.data())
def test_random_corruption_raises_only_corrupt_record_error(data: st.DataObject) -> None:
    buf = bytearray(SMALL)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(buf) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    corrupted = bytes(buf[:cut])
    for verify in (True, False):
        with contextlib.suppress(CorruptRecordError):
            decode_all(corrupted, verify=verify)


def test_every_single_byte_flip_and_truncation() -> None:
    # The CRC covers Attributes to the end, so with it checked every flip there (and in Length
    # and Magic) is detected; BaseOffset and PartitionLeaderEpoch lie outside the CRC. Without
    # the CRC check, every outcome is either a clean decode or CorruptRecordError.
    unprotected = set(range(8)) | set(range(12, 16))
    for at in range(len(SMALL)):
        for mask in (0x01, 0x80, 0xFF):
            buf = bytearray(SMALL)
            buf[at] ^= mask
            if at in unprotected:
                with contextlib.suppress(CorruptRecordError):
                    decode_all(bytes(buf), verify=True)
            else:
                with pytest.raises(CorruptRecordError):
                    decode_all(bytes(buf), verify=True)
            with contextlib.suppress(CorruptRecordError):
                decode_all(bytes(buf), verify=False)
    for cut in range(1, len(SMALL)):
        with pytest.raises(TruncatedBatchError):
            decode_all(SMALL[:cut], verify=False)


def test_errors_are_malformed_input() -> None:
    assert issubclass(CorruptRecordError, MalformedInputError)
    assert issubclass(TruncatedBatchError, CorruptRecordError)
    assert BATCH_HEADER_SIZE == 61


# --- keyed client records (encode_records) ------------------------------------------------


def test_encode_records_of_keyless_values_is_byte_identical_to_encode_batch() -> None:
    """The log bytes of keyless appends do not change with keyed records (the simulator's
    golden traces depend on it)."""
    values = [b"", b"v", b"x" * 200]
    for producer, seq in ((-1, -1), (42, 7)):
        assert encode_records(
            9,
            3,
            [(None, v) for v in values],
            timestamp_ms=77,
            producer_id=producer,
            base_sequence=seq,
        ) == encode_batch(9, 3, values, timestamp_ms=77, producer_id=producer, base_sequence=seq)


def test_encode_records_carries_keys_and_null_values() -> None:
    records = [(b"k1", b"v1"), (b"k2", None), (None, b"plain")]
    data = encode_records(4, 2, records, timestamp_ms=10, producer_id=5, base_sequence=0)
    header, decoded = decode_batch(data)
    assert header.base_offset == 4 and header.records_count == 3
    assert header.producer_id == 5 and header.producer_epoch == 0
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (4, b"k1", b"v1"),
        (5, b"k2", None),
        (6, None, b"plain"),
    ]


def test_a_keyed_record_is_encoded_as_kafka_writes_it() -> None:
    """Hand-written record: length 9 (zig-zag 12), attributes 0, timestamp delta 0, offset delta 0,
    key length 1 (zig-zag 02) 'k', value length 2 (04) 'v0', no headers."""
    data = encode_records(0, 0, [(b"k", b"v0")], timestamp_ms=0)
    assert data[BATCH_HEADER_SIZE:] == bytes.fromhex("12 00 00 00 02 6b 04 76 30 00")
    data = encode_records(0, 0, [(b"k", None)], timestamp_ms=0)
    assert data[BATCH_HEADER_SIZE:] == bytes.fromhex("0e 00 00 00 02 6b 01 00")


def test_a_null_value_without_a_key_takes_the_general_path() -> None:
    """The keyless fast path cannot write a null value; the batch is still well formed."""
    data = encode_records(0, 1, [(None, b"a"), (None, None), (None, b"c")], timestamp_ms=3)
    _, decoded = decode_batch(data)
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (0, None, b"a"),
        (1, None, None),
        (2, None, b"c"),
    ]
