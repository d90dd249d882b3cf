"""Kafka primitive encodings: varints, fixed ints, strings, bytes, arrays, tagged fields."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft.encoding import (
    MalformedInputError,
    Reader,
    Writer,
    read_uvarint,
    read_varint,
    read_varlong,
    uvarint_bytes,
    varint_bytes,
    varlong_bytes,
    write_uvarint,
    write_varint,
    zigzag32,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# "ZigZag encoding maps signed integers to unsigned integers so that numbers with a small
# absolute value have a small varint encoded value too" (Kafka protocol guide / protobuf).
ZIGZAG_GOLDEN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (150, "ac02"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexbytes"), ZIGZAG_GOLDEN)
def test_varint_golden(value: int, hexbytes: str) -> None:
    assert varint_bytes(value) == bytes.fromhex(hexbytes)
    assert read_varint(bytes.fromhex(hexbytes), 0) == (value, len(hexbytes) // 2)


def test_uvarint_golden() -> None:
    assert uvarint_bytes(0) == b"\x00"
    assert uvarint_bytes(127) == b"\x7f"
    assert uvarint_bytes(128) == b"\x80\x01"
    assert uvarint_bytes(300) == b"\xac\x02"
    assert uvarint_bytes(2**32 - 1) == bytes.fromhex("ffffffff0f")
    assert read_uvarint(bytes.fromhex("ac02"), 0) == (300, 2)


def test_varlong_golden() -> None:
    assert varlong_bytes(-(2**63)) == bytes.fromhex("ff" * 9 + "01")
    assert read_varlong(bytes.fromhex("ff" * 9 + "01"), 0) == (-(2**63), 10)
    assert read_varlong(bytes.fromhex("feffffffffffffffff01"), 0) == (2**63 - 1, 10)


def test_fixed_width_big_endian() -> None:
    w = Writer().int8(-2).int16(0x0102).int32(-1).int64(1).uint32(0xDEADBEEF).uint16(9093)
    expected = "fe 0102 ffffffff 0000000000000001 deadbeef 2385"
    assert w.getvalue() == bytes.fromhex(expected)


def test_compact_string_and_null() -> None:
    # Compact strings: "length + 1 as an unsigned varint, 0 means null".
    w = Writer().compact_string("ab").compact_nullable_string(None).nullable_string(None)
    assert w.getvalue() == bytes.fromhex("03 6162 00 ffff")
    r = Reader(w.getvalue())
    assert r.compact_string() == "ab"
    assert r.compact_nullable_string() is None
    assert r.nullable_string() is None
    assert r.done()


def test_tagged_fields_written_in_ascending_order() -> None:
    w = Writer().tagged_fields({5: b"\x01", 0: b""})
    # count 2 | tag 0 size 0 | tag 5 size 1 data 01
    assert w.getvalue() == bytes.fromhex("02 00 00 05 01 01")
    assert Reader(w.getvalue()).tagged_fields() == {0: b"", 5: b"\x01"}


def test_module_writers_append() -> None:
    out = bytearray()
    write_uvarint(out, 300)
    write_varint(out, -1)
    assert bytes(out) == b"\xac\x02\x01"


# ---------------------------------------------------------------- round trips


@given(INT32)
def test_varint_round_trip(v: int) -> None:
    data = varint_bytes(v)
    assert read_varint(data, 0) == (v, len(data))
    assert len(data) <= 5


@given(INT64)
def test_varlong_round_trip(v: int) -> None:
    data = varlong_bytes(v)
    assert read_varlong(data, 0) == (v, len(data))
    assert len(data) <= 10


@given(INT32)
def test_zigzag_small_magnitude_is_small(v: int) -> None:
    assert zigzag32(v) == (2 * v if v >= 0 else -2 * v - 1)


@given(
    st.integers(-128, 127),
    st.integers(-(2**15), 2**15 - 1),
    INT32,
    INT64,
    st.integers(0, 2**32 - 1),
    st.text(),
    st.one_of(st.none(), st.text()),
    st.binary(),
    st.one_of(st.none(), st.binary()),
    st.uuids(),
    st.dictionaries(st.integers(0, 2**32 - 1), st.binary(max_size=20), max_size=4),
    st.booleans(),
)
def test_writer_reader_round_trip(
    i8: int,
    i16: int,
    i32: int,
    i64: int,
    u32: int,
    s: str,
    ns: str | None,
    b: bytes,
    nb: bytes | None,
    u: uuid.UUID,
    tags: dict[int, bytes],
    flag: bool,
) -> None:
    w = Writer()
    w.int8(i8).int16(i16).int32(i32).int64(i64).uint32(u32).uvarint(u32).varint(i32)
    w.varlong(i64).string(s).nullable_string(ns).compact_string(s)
    w.compact_nullable_string(ns).bytes_(b).nullable_bytes(nb).compact_bytes(b)
    w.compact_nullable_bytes(nb).uuid(u).tagged_fields(tags).boolean(flag)
    w.compact_array_length(3).array_length(None)
    r = Reader(w.getvalue())
    assert r.int8() == i8
    assert r.int16() == i16
    assert r.int32() == i32
    assert r.int64() == i64
    assert r.uint32() == u32
    assert r.uvarint() == u32
    assert r.varint() == i32
    assert r.varlong() == i64
    assert r.string() == s
    assert r.nullable_string() == ns
    assert r.compact_string() == s
    assert r.compact_nullable_string() == ns
    assert r.bytes_() == b
    assert r.nullable_bytes() == nb
    assert r.compact_bytes() == b
    assert r.compact_nullable_bytes() == nb
    assert r.uuid() == u
    assert r.tagged_fields() == tags
    assert r.boolean() is flag
    # 3 elements are plausible: the 4 bytes of the null array length follow.
    assert r.compact_array_length() == 3
    assert r.nullable_array_length() is None
    assert r.done()


# ---------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("reader", "data"),
    [
        ("int8", ""),
        ("int16", "00"),
        ("int32", "000000"),
        ("int64", "00000000000000"),
        ("uuid", "00" * 15),
        ("uvarint", ""),
        ("uvarint", "80"),  # continuation bit set, then nothing
        ("uvarint", "8080808080"),  # 5 bytes all with continuation: needs a 6th
        ("uvarint", "ffffffff1f"),  # 5 bytes but > 32 bits
        ("varint", "ffffffffff01"),  # 6-byte varint: overflow for 32 bits
        ("varlong", "ff" * 10 + "01"),  # 11-byte varlong
        ("varlong", "ff" * 9 + "7f"),  # 10 bytes but > 64 bits
        ("string", "fffe"),  # negative length other than -1
        ("string", "ffff"),  # null where required
        ("string", "0005616263"),  # length beyond buffer
        ("string", "0002c328"),  # invalid UTF-8
        ("compact_string", "00"),  # null where required
        ("compact_string", "0a61"),  # length beyond buffer
        ("compact_nullable_string", "03c328"),  # invalid UTF-8
        ("bytes_", "fffffffe"),
        ("bytes_", "00000010ab"),
        ("compact_bytes", "05ab"),
        ("compact_array_length", "00"),
        ("compact_array_length", "ffffffff0f"),  # 2**32-2 elements in 0 bytes
        ("array_length", "7fffffff"),
        ("array_length", "fffffffd"),
        ("tagged_fields", "0203"),  # count 2, truncated
        ("tagged_fields", "02 01 00 01 00"),  # tags not ascending
        ("tagged_fields", "01 00 05 ab"),  # size beyond buffer
        ("boolean", "02"),
    ],
)
def test_malformed_raises_typed_error(reader: str, data: str) -> None:
    r = Reader(bytes.fromhex(data))
    with pytest.raises(MalformedInputError):
        getattr(r, reader)()


def test_reader_window_end_is_respected() -> None:
    data = bytes.fromhex("00000001 00000002")
    r = Reader(data, 0, 4)
    assert r.int32() == 1
    with pytest.raises(MalformedInputError):
        r.int32()
    r2 = Reader(bytes.fromhex("80 01"), 0, 1)
    with pytest.raises(MalformedInputError):
        r2.uvarint()


def test_expect_done_reports_trailing_bytes() -> None:
    r = Reader(b"\x00\x01")
    r.int8()
    with pytest.raises(MalformedInputError, match="trailing"):
        r.expect_done()


def test_writer_rejects_out_of_range() -> None:
    with pytest.raises(ValueError):
        Writer().int16(2**15)
    with pytest.raises(ValueError):
        Writer().uvarint(2**32)
    with pytest.raises(ValueError):
        varint_bytes(2**31)


READERS = [
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "boolean",
    "uvarint",
    "uvarlong",
    "varint",
    "varlong",
    "uuid",
    "string",
    "nullable_string",
    "compact_string",
    "compact_nullable_string",
    "bytes_",
    "nullable_bytes",
    "compact_bytes",
    "compact_nullable_bytes",
    "array_length",
    "nullable_array_length",
    "compact_array_length",
    "compact_nullable_array_length",
    "tagged_fields",
]


@given(st.binary(max_size=40), st.lists(st.sampled_from(READERS), min_size=1, max_size=8))
def test_arbitrary_bytes_only_raise_malformed(data: bytes, ops: list[str]) -> None:
    r = Reader(memoryview(data))
    try:
        for op in ops:
            getattr(r, op)()
    except MalformedInputError:
        pass
    assert 0 <= r.pos <= len(data)
