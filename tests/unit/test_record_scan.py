"""kraft.record_scan's fast paths against kraft.records' plain ones: the same (key, value)s, the
same refusals (on random batches and on damaged ones), the same bytes written."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.encoding import varint_bytes, varlong_bytes
from kraft.record_scan import batch_key_values, check_records, encode_key_values
from kraft.records import (
    BATCH_HEADER_SIZE,
    CorruptRecordError,
    KeyValue,
    assemble_batch,
    decode_records,
    encode_batch,
    encode_records,
    parse_batch_header,
)

_SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)

# Sizes around the one- and two-byte varint boundaries (63/64, 8191/8192).
_blob = st.one_of(
    st.binary(max_size=80),
    st.integers(min_value=8180, max_value=8200).map(lambda n: b"v" * n),
)
_maybe = st.one_of(st.none(), _blob)
_headers = st.lists(
    st.tuples(st.text(max_size=4), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
)


@st.composite
def _batches(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(min_value=1, max_value=150))
    values = draw(st.lists(_maybe, min_size=n, max_size=n))
    keys = draw(st.one_of(st.none(), st.lists(_maybe, min_size=n, max_size=n)))
    headers = draw(st.one_of(st.none(), st.lists(_headers, min_size=n, max_size=n)))
    return encode_batch(
        draw(st.integers(min_value=0, max_value=1 << 40)),
        draw(st.integers(min_value=0, max_value=1000)),
        values,
        timestamp_ms=draw(st.integers(min_value=-1, max_value=1 << 42)),
        keys=keys,
        headers=headers,
    )


def _plain(buf: bytes) -> list[KeyValue] | str:
    try:
        header = parse_batch_header(buf, 0)
        return [(r.key, r.value) for r in decode_records(buf, 0, header)]
    except CorruptRecordError:
        return "refused"


def _fast(buf: bytes | bytearray | memoryview) -> list[KeyValue] | str:
    try:
        header = parse_batch_header(buf, 0)
        out = batch_key_values(buf, 0, header)
    except CorruptRecordError:
        with pytest.raises(CorruptRecordError):
            check_records(buf, 0, parse_batch_header(buf, 0))
        return "refused"
    check_records(buf, 0, header)
    return out


@_SETTINGS
@given(_batches())
def test_key_values_match_the_plain_decoder(buf: bytes) -> None:
    plain = _plain(buf)
    assert plain != "refused"
    assert _fast(buf) == plain
    assert _fast(bytearray(buf)) == plain  # not bytes: the copied path
    assert _fast(memoryview(buf)) == plain


@_SETTINGS
@given(_batches(), st.data())
def test_damaged_records_refused_where_the_plain_decoder_refuses(
    buf: bytes, data: st.DataObject
) -> None:
    """Bytes of the records region overwritten (the CRC is not checked by either): both
    decoders accept, with the same result, or both refuse."""
    damaged = bytearray(buf)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=BATCH_HEADER_SIZE, max_value=len(buf) - 1))
        damaged[at] = data.draw(st.integers(min_value=0, max_value=255))
    assert _fast(bytes(damaged)) == _plain(bytes(damaged))


@st.composite
def _forged(draw: st.DrawFn) -> bytes:
    """A batch whose records are built field by field, each field sometimes wrong: length,
    offset delta, key and value lengths, header count (a good header and CRC around them)."""
    small = st.integers(min_value=-3, max_value=3)
    n = draw(st.integers(min_value=1, max_value=6))
    parts: list[bytes] = [b""]
    delta = -1
    for _ in range(n):
        delta += draw(st.sampled_from([1, 1, 1, 0, 2, -1]))
        body = b"\x00" + varlong_bytes(draw(st.sampled_from([0, 0, 5, -70, 1 << 40])))
        body += varint_bytes(delta)
        for _field in ("key", "value"):
            blob = draw(st.one_of(st.none(), st.binary(max_size=70)))
            claimed = -1 if blob is None else len(blob)
            if draw(st.integers(min_value=0, max_value=3)) == 0:
                claimed += draw(st.sampled_from([-1, -1, 1, -2, 2]))
            body += varint_bytes(claimed) + (blob or b"")
        body += varint_bytes(draw(st.sampled_from([0, 0, 0, 1, -1, 2])))
        body += draw(st.sampled_from([b"", b"", b"\x02a\x01", b"\x02a\x02b", b"\x00"]))
        size = len(body)
        if draw(st.integers(min_value=0, max_value=5)) == 0:
            size += draw(small)
        parts.append(varint_bytes(size) + body)
    parts.append(draw(st.sampled_from([b"", b"", b"", b"\x00"])))
    last = delta if draw(st.booleans()) else max(delta, n - 1) + draw(st.integers(0, 2))
    batch = bytearray(assemble_batch(0, 1, parts, attributes=0, count=n, timestamp_ms=0))
    struct.pack_into(">i", batch, 23, max(last, n - 1, 0))  # LastOffsetDelta (CRC not checked)
    return bytes(batch)


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(_forged())
def test_forged_records_refused_where_the_plain_decoder_refuses(buf: bytes) -> None:
    assert _fast(buf) == _plain(buf)


def test_a_damaged_batch_is_refused() -> None:
    buf = bytearray(encode_batch(0, 1, [b"a", b"b"], timestamp_ms=0, keys=[b"k", b"l"]))
    buf[BATCH_HEADER_SIZE] = 0x7E  # the first record's length: 63, past the batch end
    header = parse_batch_header(buf, 0)
    with pytest.raises(CorruptRecordError):
        batch_key_values(buf, 0, header)
    with pytest.raises(CorruptRecordError):
        check_records(buf, 0, header)


@_SETTINGS
@given(
    st.lists(st.tuples(_maybe, _maybe), min_size=0, max_size=120),
    st.integers(min_value=0, max_value=1 << 40),
    st.integers(min_value=0, max_value=1000),
    st.integers(min_value=-1, max_value=1 << 42),
)
def test_encode_key_values_writes_encode_records_bytes(
    records: list[KeyValue], base: int, epoch: int, ts: int
) -> None:
    try:
        expected: bytes | type[Exception] = encode_records(base, epoch, records, timestamp_ms=ts)
    except ValueError as e:
        expected = type(e)
    if isinstance(expected, bytes):
        assert encode_key_values(base, epoch, records, timestamp_ms=ts) == expected
    else:
        with pytest.raises(expected):
            encode_key_values(base, epoch, records, timestamp_ms=ts)


def test_encode_key_values_beyond_the_prefix_table() -> None:
    records: list[KeyValue] = [(b"k%d" % i, b"v") for i in range(5000)]
    assert encode_key_values(7, 2, records, timestamp_ms=9) == encode_records(
        7, 2, records, timestamp_ms=9
    )
