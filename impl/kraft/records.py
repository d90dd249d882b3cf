"""Apache Kafka record batch v2 (magic 2), byte for byte, and its data records.

Batch layout (61-byte header, then records):
    BaseOffset i64 | Length i32 | PartitionLeaderEpoch i32 | Magic i8 | CRC u32 |
    Attributes i16 | LastOffsetDelta i32 | BaseTimestamp i64 | MaxTimestamp i64 |
    ProducerId i64 | ProducerEpoch i16 | BaseSequence i32 | RecordsCount i32
Length counts the bytes after the Length field; the CRC (CRC-32C) covers Attributes to the end.
Record: length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value | headerCount varint | headers.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias, cast

import crc32c

from kraft.encoding import (
    VARINT_TABLE,
    MalformedInputError,
    read_varint,
    read_varlong,
    varint_bytes,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "DEFAULT_MAX_BATCH_SIZE",
    "MIN_BATCH_LENGTH",
    "BatchHeader",
    "CorruptRecordError",
    "KeyValue",
    "Record",
    "TruncatedBatchError",
    "assemble_batch",
    "decode_batch",
    "decode_record_headers",
    "decode_records",
    "encode_batch",
    "encode_records",
    "iter_batches",
    "iter_values",
    "parse_batch_header",
    "record_body",
    "verify_crc",
]


class CorruptRecordError(MalformedInputError):
    """A record batch that is not well formed: the one error type batch decoding raises."""


class TruncatedBatchError(CorruptRecordError):
    """The buffer ends inside a batch: a torn write at the log tail rather than a bad byte."""


BATCH_HEADER_SIZE = 61
# Offset of the Length field's end: Length counts everything after it.
LOG_OVERHEAD = 12
# Bytes of the header that follow the Length field (a batch with no records).
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
# The CRC covers Attributes (header offset 21) to the end of the batch.
CRC_START = 21
MAGIC = 2
DEFAULT_MAX_BATCH_SIZE = 16 * 1024 * 1024
# Smallest record: one byte each for length, attributes, timestamp delta, offset delta,
# key length, value length and header count.
_MIN_RECORD_SIZE = 7

ATTR_COMPRESSION_MASK = 0x07
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
_COMPRESSION_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiibI")  # BaseOffset .. CRC: the part outside the CRC
_TAIL = struct.Struct(">hiqqqhii")  # Attributes .. RecordsCount: the start of the CRC'd part
assert _HEADER.size == BATCH_HEADER_SIZE
assert _PREFIX.size == CRC_START

_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 batch. A NamedTuple rather than a frozen dataclass:
    one is made for every batch appended, fetched or scanned, and a tuple is built from the
    unpacked fields several times faster. Immutable either way."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)


# A client's record: (key, value), either null; to kraft.app.kv a null value deletes the key.
# A plain tuple: one is made per appended record, and a NamedTuple costs several times more.
KeyValue: TypeAlias = tuple[bytes | None, bytes | None]


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# --------------------------------------------------------------------------- batch header


def parse_batch_header(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> BatchHeader:
    """Decode and sanity-check the header of the batch at pos; does not check the CRC."""
    available = len(buf) - pos
    if pos < 0 or available < BATCH_HEADER_SIZE:
        raise TruncatedBatchError(
            f"truncated batch header at position {pos}: "
            f"{max(available, 0)} of {BATCH_HEADER_SIZE} bytes"
        )
    fields = _HEADER.unpack_from(buf, pos)
    base, length, _, magic, _, attributes, delta = fields[:7]
    count = fields[12]
    # Every batch on the append and fetch paths comes through here: one combined test
    # accepts a good header; _header_problem names what is wrong with a bad one.
    if (
        MIN_BATCH_LENGTH <= length <= max_batch_size
        and magic == MAGIC
        and length + LOG_OVERHEAD <= available
        and not attributes & ATTR_COMPRESSION_MASK
        and 0 <= count <= (length - MIN_BATCH_LENGTH) // _MIN_RECORD_SIZE
        and delta >= 0
        and delta >= count - 1
        and 0 <= base <= _INT64_MAX - delta
    ):
        return tuple.__new__(BatchHeader, fields)
    raise _header_problem(BatchHeader._make(fields), pos, available, max_batch_size)


def _header_problem(
    header: BatchHeader, pos: int, available: int, max_batch_size: int
) -> CorruptRecordError:
    length = header.length
    if length < MIN_BATCH_LENGTH:
        return CorruptRecordError(
            f"batch at position {pos}: length {length} is below the minimum {MIN_BATCH_LENGTH}"
        )
    if length > max_batch_size:
        return CorruptRecordError(
            f"batch at position {pos}: length {length} exceeds max batch size {max_batch_size}"
        )
    if header.magic != MAGIC:
        return CorruptRecordError(
            f"batch at position {pos}: magic {header.magic} is not {MAGIC} (only v2 batches)"
        )
    if length + LOG_OVERHEAD > available:
        return TruncatedBatchError(
            f"batch at position {pos}: length {length} runs past the end of the buffer "
            f"({available - LOG_OVERHEAD} bytes after the length field)"
        )
    codec = header.attributes & ATTR_COMPRESSION_MASK
    if codec:
        name = _COMPRESSION_NAMES.get(codec, f"invalid codec {codec}")
        return CorruptRecordError(
            f"batch at position {pos}: compression {name} is not supported (only none)"
        )
    count = header.records_count
    if count < 0:
        return CorruptRecordError(f"batch at position {pos}: negative records count {count}")
    if count > (length - MIN_BATCH_LENGTH) // _MIN_RECORD_SIZE:
        return CorruptRecordError(
            f"batch at position {pos}: {count} records cannot fit in {length} bytes"
        )
    if header.last_offset_delta < 0 or header.last_offset_delta < count - 1:
        return CorruptRecordError(
            f"batch at position {pos}: last offset delta {header.last_offset_delta} "
            f"inconsistent with {count} records"
        )
    return CorruptRecordError(
        f"batch at position {pos}: base offset {header.base_offset} out of range"
    )


def verify_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the stored CRC-32C matches Attributes..end."""
    end = pos + LOG_OVERHEAD + header.length
    if pos < 0 or end > len(buf):
        raise TruncatedBatchError(f"batch at position {pos} runs past the end of the buffer")
    actual = crc32c.crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at position {pos}: CRC mismatch (stored {header.crc:#010x}, "
            f"computed {actual:#010x})"
        )


def iter_batches(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    verify: bool = True,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of consecutive whole batches; raise on a partial or bad one."""
    end = len(buf)
    while pos < end:
        header = parse_batch_header(buf, pos, max_batch_size=max_batch_size)
        if verify:
            verify_crc(buf, pos, header)
        yield pos, header
        pos += header.length + LOG_OVERHEAD


# --------------------------------------------------------------------------- records


def _records_region(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> tuple[bytes, int]:
    start = pos + BATCH_HEADER_SIZE
    end = pos + LOG_OVERHEAD + header.length
    if pos < 0 or end > len(buf):
        raise TruncatedBatchError(f"batch at position {pos} runs past the end of the buffer")
    # One copy into bytes makes every later index an int and every slice a bytes object.
    data = buf[start:end] if isinstance(buf, bytes) else bytes(buf[start:end])
    return data, start


def _decode_records(data: bytes, header: BatchHeader, region_pos: int) -> list[Record]:
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    last_delta = header.last_offset_delta
    end = len(data)
    out: list[Record] = []
    append = out.append
    p = 0
    prev_delta = -1
    for index in range(header.records_count):
        # Record length (zig-zag varint, 1-byte fast path inlined).
        b = data[p]
        if b < 0x80:
            size = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            # Two-byte varints (lengths 64..8191) are the common case for real payloads.
            b = (b & 0x7F) | (data[p + 1] << 7)
            size = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            size, p = read_varint(data, p)
        rec_end = p + size
        if size < _MIN_RECORD_SIZE - 1 or rec_end > end:
            raise CorruptRecordError(
                f"record {index} at position {region_pos + p}: length {size} invalid "
                f"({end - p} bytes left in batch)"
            )
        p += 1  # attributes: unused in v2
        b = data[p]
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            ts_delta, p = read_varlong(data, p)
        b = data[p]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            off_delta, p = read_varint(data, p)
        if off_delta <= prev_delta or off_delta > last_delta:
            raise CorruptRecordError(
                f"record {index}: offset delta {off_delta} not increasing within "
                f"({prev_delta}, {last_delta}]"
            )
        prev_delta = off_delta
        b = data[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            n = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            n, p = read_varint(data, p)
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"record {index}: negative key length {n}")
            key = None
        else:
            if p + n > rec_end:
                raise CorruptRecordError(f"record {index}: key length {n} overruns the record")
            key = data[p : p + n]
            p += n
        b = data[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        elif data[p + 1] < 0x80:
            b = (b & 0x7F) | (data[p + 1] << 7)
            n = (b >> 1) ^ -(b & 1)
            p += 2
        else:
            n, p = read_varint(data, p)
        if n < 0:
            if n != -1:
                raise CorruptRecordError(f"record {index}: negative value length {n}")
            value = None
        else:
            if p + n > rec_end:
                raise CorruptRecordError(f"record {index}: value length {n} overruns the record")
            value = data[p : p + n]
            p += n
        b = data[p]
        if b == 0:
            headers: tuple[tuple[str, bytes | None], ...] = ()
            p += 1
        else:
            headers, p = decode_record_headers(data, p, rec_end, index)
        if p != rec_end:
            raise CorruptRecordError(
                f"record {index}: fields end at {p} but its length says {rec_end}"
            )
        append(Record(base_offset + off_delta, base_ts + ts_delta, key, value, headers))
    if p != end:
        raise CorruptRecordError(
            f"{end - p} trailing bytes after {header.records_count} records in batch"
        )
    return out


def decode_record_headers(
    data: bytes, p: int, rec_end: int, index: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    """The headers of record `index` at p (its header count first); the position after."""
    count, p = read_varint(data, p)
    # Each header takes at least two bytes, so a forged count fails here, not in a long loop.
    if count < 0 or count * 2 > rec_end - p:
        raise CorruptRecordError(f"record {index}: header count {count} invalid")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        n, p = read_varint(data, p)
        if n < 0 or p + n > rec_end:
            raise CorruptRecordError(f"record {index}: header key length {n} invalid")
        try:
            hkey = data[p : p + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"record {index}: header key is not UTF-8") from e
        p += n
        n, p = read_varint(data, p)
        hvalue: bytes | None
        if n == -1:
            hvalue = None
        elif n < 0 or p + n > rec_end:
            raise CorruptRecordError(f"record {index}: header value length {n} invalid")
        else:
            hvalue = data[p : p + n]
            p += n
        headers.append((hkey, hvalue))
    return tuple(headers), p


def decode_records(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> list[Record]:
    """Decode the records of a batch whose header was already parsed (and CRC checked)."""
    data, region_pos = _records_region(buf, pos, header)
    try:
        return _decode_records(data, header, region_pos)
    except CorruptRecordError:
        raise
    except MalformedInputError as e:
        raise CorruptRecordError(f"batch at position {pos}: {e}") from e
    except IndexError as e:
        # A field ran off the end of the batch: the inlined varint reads index without checks.
        raise CorruptRecordError(f"batch at position {pos}: record runs past batch end") from e


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    verify: bool = True,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> tuple[BatchHeader, list[Record]]:
    """Decode the whole batch at pos: header, CRC (unless verify=False) and every record."""
    header = parse_batch_header(buf, pos, max_batch_size=max_batch_size)
    if verify:
        verify_crc(buf, pos, header)
    return header, decode_records(buf, pos, header)


def iter_values(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> Iterator[tuple[int, bytes | None]]:
    """(offset, value) of each record of an already-validated batch."""
    for record in decode_records(buf, pos, header):
        yield record.offset, record.value


# --------------------------------------------------------------------------- encoding

# Record prefix for offset delta i with no key: attributes 0, timestamp delta 0, the offset
# delta, key length -1. Built once so the hot loop only looks it up.
_NOKEY_PREFIX: list[bytes] = []
_NOKEY_PREFIX_LEN: list[int] = []


def _grow_prefix_table(n: int) -> None:
    for i in range(len(_NOKEY_PREFIX), n):
        prefix = b"\x00\x00" + varint_bytes(i) + b"\x01"
        _NOKEY_PREFIX.append(prefix)
        _NOKEY_PREFIX_LEN.append(len(prefix))


_grow_prefix_table(4096)


def record_body(
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> bytes:
    """A record without its length prefix (timestamp delta always 0)."""
    parts = [b"\x00\x00", varint_bytes(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts += (varint_bytes(len(key)), key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts += (varint_bytes(len(value)), value)
    parts.append(varint_bytes(len(headers)))
    for hkey, hvalue in headers:
        kb = hkey.encode("utf-8")
        parts += (varint_bytes(len(kb)), kb)
        if hvalue is None:
            parts.append(b"\x01")
        else:
            parts += (varint_bytes(len(hvalue)), hvalue)
    return b"".join(parts)


def assemble_batch(
    base_offset: int,
    epoch: int,
    record_parts: list[bytes],
    *,
    attributes: int,
    count: int,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """Prepend the header to already-encoded records and fill in Length and CRC."""
    record_parts[0] = _TAIL.pack(
        attributes,
        count - 1,
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    body = b"".join(record_parts)
    length = len(body) + (CRC_START - LOG_OVERHEAD)
    if length > _INT32_MAX:
        raise ValueError(f"batch of {length} bytes does not fit the int32 length field")
    return _PREFIX.pack(base_offset, length, epoch, MAGIC, crc32c.crc32c(body)) + body


def encode_records(
    base_offset: int,
    epoch: int,
    records: Sequence[KeyValue],
    *,
    timestamp_ms: int,
    producer_id: int = NO_PRODUCER_ID,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """Client records (key, value) as one data batch: keys are written only when a record
    has one, so a keyless batch is encode_batch's bytes, byte for byte."""
    keys = [k for k, _ in records]
    return encode_batch(
        base_offset,
        epoch,
        [v for _, v in records],
        timestamp_ms=timestamp_ms,
        keys=None if keys.count(None) == len(keys) else keys,
        producer_id=producer_id,
        base_sequence=base_sequence,
    )


def encode_batch(
    base_offset: int,
    epoch: int,
    values: Sequence[bytes | None],
    *,
    timestamp_ms: int,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    producer_id: int = NO_PRODUCER_ID,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """Encode values (with optional keys/headers; a null value has length -1) as one data
    batch at base_offset. Every record gets timestamp_ms (timestamp delta 0) and offset
    delta = its index. An idempotent append carries its producer id (epoch 0) and the
    sequence of its first record, as Kafka's idempotent producer writes them."""
    count = len(values)
    if count == 0:
        raise ValueError("a batch needs at least one record")
    if base_offset < 0:
        raise ValueError(f"negative base offset {base_offset}")
    parts: list[bytes] = [b""]  # slot 0 becomes the header tail
    plain = keys is None and headers is None
    if plain:
        if count > len(_NOKEY_PREFIX):
            _grow_prefix_table(count)
        prefix_table = _NOKEY_PREFIX
        prefix_len = _NOKEY_PREFIX_LEN
        table = VARINT_TABLE
        limit = len(table)
        extend = parts.extend
        # Hot loop: table lookups only; a record is length|prefix|valueLength|value|0 headers.
        try:
            for i, v in enumerate(cast("Sequence[bytes]", values)):
                n = len(v)
                vlen = table[n] if n < limit else varint_bytes(n)
                size = prefix_len[i] + len(vlen) + n + 1
                extend(
                    (table[size] if size < limit else varint_bytes(size), prefix_table[i], vlen, v)
                )
                parts.append(b"\x00")
        except TypeError:  # len(None): a null value, which only the general path writes
            plain = False
            del parts[1:]
    if not plain:
        if keys is not None and len(keys) != count:
            raise ValueError(f"{len(keys)} keys for {count} values")
        if headers is not None and len(headers) != count:
            raise ValueError(f"{len(headers)} header lists for {count} values")
        for i, value in enumerate(values):
            key = None if keys is None else keys[i]
            body = record_body(i, key, value, () if headers is None else headers[i])
            parts += (varint_bytes(len(body)), body)
    return assemble_batch(
        base_offset,
        epoch,
        parts,
        attributes=0,
        count=count,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=NO_PRODUCER_EPOCH if producer_id == NO_PRODUCER_ID else 0,
        base_sequence=base_sequence,
    )
