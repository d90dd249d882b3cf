"""One-pass fast paths over v2 record batches (kraft.records' formats, not a byte changed)
for the paths that need only a record's (key, value), or only to know the records are well
formed: the applier feeding the state machine, checkpoint files read and checked, snapshots
written.

- `batch_key_values`: a batch's records as (key, value) tuples, no Record object made; it
  accepts and refuses exactly what kraft.records.decode_records does (the same checks in the
  same order, with one- and two-byte varint fast paths), as tests/unit/test_record_scan.py
  checks on random and damaged batches.
- `check_records`: the same walk keeping nothing (no key or value copied).
- `encode_key_values`: kraft.records.encode_records byte for byte, for records whose keys and
  values are all present (a snapshot's keyed records) with table lookups only; any other
  record list goes the general way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kraft.encoding import (
    VARINT_TABLE,
    MalformedInputError,
    read_varint,
    read_varlong,
    varint_bytes,
)
from kraft.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    KeyValue,
    TruncatedBatchError,
    assemble_batch,
    decode_record_headers,
    encode_records,
)

# One loop for both uses: with `out` None it copies no key or value (a check of the batch);
# the flag tested per record costs a few percent, the copies it saves about a quarter.
# tests/unit/test_record_scan.py holds both uses to decode_records.

__all__ = ["batch_key_values", "check_records", "encode_key_values"]

# _ZIGZAG[raw] is the signed value of the zig-zag varint whose 7-bit groups make `raw`
# (every one- and two-byte varint).
_ZIGZAG: Final = tuple((raw >> 1) ^ -(raw & 1) for raw in range(1 << 14))
# A record is at least one byte for each of its seven fields; its length covers six.
_MIN_BODY: Final = 6
# Record prefix for offset delta i (attributes 0, timestamp delta 0, the offset delta).
_PREFIX: list[bytes] = []


def _grow_prefix(n: int) -> None:
    _PREFIX.extend(b"\x00\x00" + varint_bytes(i) for i in range(len(_PREFIX), n))


_grow_prefix(4096)


def _region(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bytes:
    end = pos + LOG_OVERHEAD + header.length
    if pos < 0 or end > len(buf):
        raise TruncatedBatchError(f"batch at position {pos} runs past the end of the buffer")
    start = pos + BATCH_HEADER_SIZE
    return buf[start:end] if isinstance(buf, bytes) else bytes(buf[start:end])


def _scan(data: bytes, header: BatchHeader, out: list[KeyValue] | None) -> None:
    """Walk the records of `data` (a batch's records region) as decode_records does, with the
    same checks in the same order; append each one's (key, value) to `out`, if given."""
    zz = _ZIGZAG
    last_delta = header.last_offset_delta
    end = len(data)
    keep = out is not None
    append = out.append if out is not None else None
    p = 0
    prev_delta = -1
    for index in range(header.records_count):
        b = data[p]
        if b < 0x80:
            size = zz[b]
            p += 1
        else:
            c = data[p + 1]
            if c < 0x80:
                size = zz[(b & 0x7F) | (c << 7)]
                p += 2
            else:
                size, p = read_varint(data, p)
        rec_end = p + size
        if size < _MIN_BODY or rec_end > end:
            raise CorruptRecordError(
                f"record {index}: length {size} invalid ({end - p} bytes left in batch)"
            )
        # Attributes (unused in v2), then the timestamp delta (unused here, but checked).
        if data[p + 1] < 0x80:
            p += 2
        else:
            _, p = read_varlong(data, p + 1)
        b = data[p]
        if b < 0x80:
            delta = zz[b]
            p += 1
        else:
            c = data[p + 1]
            if c < 0x80:
                delta = zz[(b & 0x7F) | (c << 7)]
                p += 2
            else:
                delta, p = read_varint(data, p)
        if delta <= prev_delta or delta > last_delta:
            raise CorruptRecordError(
                f"record {index}: offset delta {delta} not increasing within "
                f"({prev_delta}, {last_delta}]"
            )
        prev_delta = delta
        b = data[p]
        if b < 0x80:
            n = zz[b]
            p += 1
        else:
            c = data[p + 1]
            if c < 0x80:
                n = zz[(b & 0x7F) | (c << 7)]
                p += 2
            else:
                n, p = read_varint(data, p)
        key: bytes | None = None
        if n >= 0:
            if p + n > rec_end:
                raise CorruptRecordError(f"record {index}: key length {n} overruns the record")
            if keep:
                key = data[p : p + n]
            p += n
        elif n != -1:
            raise CorruptRecordError(f"record {index}: negative key length {n}")
        b = data[p]
        if b < 0x80:
            n = zz[b]
            p += 1
        else:
            c = data[p + 1]
            if c < 0x80:
                n = zz[(b & 0x7F) | (c << 7)]
                p += 2
            else:
                n, p = read_varint(data, p)
        value: bytes | None = None
        if n >= 0:
            if p + n > rec_end:
                raise CorruptRecordError(f"record {index}: value length {n} overruns the record")
            if keep:
                value = data[p : p + n]
            p += n
        elif n != -1:
            raise CorruptRecordError(f"record {index}: negative value length {n}")
        if data[p] == 0:
            p += 1
        else:
            _, p = decode_record_headers(data, p, rec_end, index)
        if p != rec_end:
            raise CorruptRecordError(
                f"record {index}: fields end at {p} but its length says {rec_end}"
            )
        if append is not None:
            append((key, value))
    if p != end:
        raise CorruptRecordError(
            f"{end - p} trailing bytes after {header.records_count} records in batch"
        )


def _run(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader, out: list[KeyValue] | None
) -> None:
    data = _region(buf, pos, header)
    try:
        _scan(data, header, out)
    except CorruptRecordError as e:
        raise CorruptRecordError(f"batch at position {pos}: {e}") from None
    except MalformedInputError as e:
        raise CorruptRecordError(f"batch at position {pos}: {e}") from e
    except IndexError as e:
        # A field ran off the end of the batch: the inlined varints index without checks.
        raise CorruptRecordError(f"batch at position {pos}: record runs past batch end") from e


def batch_key_values(
    buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader
) -> list[KeyValue]:
    """The (key, value) of every record of the batch at `pos` whose header was parsed (and
    CRC checked); CorruptRecordError exactly where decode_records raises one."""
    out: list[KeyValue] = []
    _run(buf, pos, header, out)
    return out


def check_records(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError exactly where decode_records would; build nothing."""
    _run(buf, pos, header, None)


def encode_key_values(
    base_offset: int, epoch: int, records: Sequence[KeyValue], *, timestamp_ms: int
) -> bytes:
    """encode_records(base_offset, epoch, records, timestamp_ms=...), byte for byte."""
    count = len(records)
    if count == 0 or base_offset < 0:
        return encode_records(base_offset, epoch, records, timestamp_ms=timestamp_ms)
    if count > len(_PREFIX):
        _grow_prefix(count)
    table = VARINT_TABLE
    limit = len(table)
    prefix = _PREFIX
    parts: list[bytes] = [b""]  # slot 0 becomes the header tail
    extend = parts.extend
    try:
        # A record: length | prefix | keyLength | key | valueLength | value | 0 headers.
        for i, (k, v) in enumerate(records):
            kn = len(k)  # type: ignore[arg-type]  # None: the general path below
            vn = len(v)  # type: ignore[arg-type]
            if kn >= limit or vn >= limit:
                raise TypeError
            p = prefix[i]
            klen = table[kn]
            vlen = table[vn]
            size = len(p) + len(klen) + kn + len(vlen) + vn + 1
            if size >= limit:
                raise TypeError
            extend((table[size], p, klen, k, vlen, v, b"\x00"))  # type: ignore[arg-type]
    except TypeError:  # a null key or value, or a record too large for the tables
        return encode_records(base_offset, epoch, records, timestamp_ms=timestamp_ms)
    return assemble_batch(
        base_offset, epoch, parts, attributes=0, count=count, timestamp_ms=timestamp_ms
    )
