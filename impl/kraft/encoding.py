"""Kafka's primitive encodings: fixed-width big-endian integers, varints, strings, tagged fields.

Shared by the record batch codec (records.py) and the wire protocol. Every decode failure raises
MalformedInputError, never IndexError, struct.error or UnicodeDecodeError: input comes from disks
and peers and must never crash a replica with an unexpected exception type.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from kraft.errors import KraftError

__all__ = [
    "MAX_INLINE_VARINT",
    "UVARINT_TABLE",
    "VARINT_TABLE",
    "MalformedInputError",
    "Reader",
    "Writer",
    "read_uvarint",
    "read_uvarlong",
    "read_varint",
    "read_varlong",
    "uvarint_bytes",
    "varint_bytes",
    "varlong_bytes",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "zigzag32",
    "zigzag64",
]


class MalformedInputError(KraftError):
    """Bytes that do not decode: truncated, out of range, or not valid for their type."""


_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT32_LIMIT = 1 << 32
_UINT64_LIMIT = 1 << 64


def zigzag32(value: int) -> int:
    """Map a signed 32-bit int to unsigned so small magnitudes get short varints."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{value} does not fit in int32")
    return ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF


def zigzag64(value: int) -> int:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit in int64")
    return ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF


def _uvarint_slow(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# Tables of ready-made encodings: the batch encoder looks lengths and offset deltas up here
# instead of running a loop per record.
MAX_INLINE_VARINT = 1 << 14
UVARINT_TABLE: tuple[bytes, ...] = tuple(_uvarint_slow(n) for n in range(MAX_INLINE_VARINT))
# VARINT_TABLE[n] is the zig-zag varint of the non-negative int n.
VARINT_TABLE: tuple[bytes, ...] = tuple(
    UVARINT_TABLE[n << 1] if (n << 1) < MAX_INLINE_VARINT else _uvarint_slow(n << 1)
    for n in range(MAX_INLINE_VARINT)
)
_VARINT_MINUS_ONE = b"\x01"


def uvarint_bytes(value: int) -> bytes:
    """Unsigned varint of a value in [0, 2**64)."""
    if 0 <= value < MAX_INLINE_VARINT:
        return UVARINT_TABLE[value]
    if not 0 <= value < _UINT64_LIMIT:
        raise ValueError(f"{value} does not fit in an unsigned varint")
    return _uvarint_slow(value)


def varint_bytes(value: int) -> bytes:
    """Zig-zag varint of a signed 32-bit value."""
    if 0 <= value < MAX_INLINE_VARINT:
        return VARINT_TABLE[value]
    if value == -1:
        return _VARINT_MINUS_ONE
    return _uvarint_slow(zigzag32(value))


def varlong_bytes(value: int) -> bytes:
    """Zig-zag varint of a signed 64-bit value."""
    if 0 <= value < MAX_INLINE_VARINT:
        return VARINT_TABLE[value]
    return _uvarint_slow(zigzag64(value))


def write_uvarint(out: bytearray, value: int) -> None:
    out += uvarint_bytes(value)


def write_varint(out: bytearray, value: int) -> None:
    out += varint_bytes(value)


def write_varlong(out: bytearray, value: int) -> None:
    out += varlong_bytes(value)


def _read_raw_varint(buf: bytes | memoryview, pos: int, max_bytes: int) -> tuple[int, int]:
    end = len(buf)
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise MalformedInputError(f"truncated varint at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise MalformedInputError(f"varint longer than {max_bytes} bytes ending at offset {pos}")


def read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Unsigned 32-bit varint at pos; returns (value, position after it)."""
    if pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    value, pos = _read_raw_varint(buf, pos, 5)
    if value >= _UINT32_LIMIT:
        raise MalformedInputError(f"unsigned varint {value} does not fit in 32 bits")
    return value, pos


def read_uvarlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value, pos = _read_raw_varint(buf, pos, 10)
    if value >= _UINT64_LIMIT:
        raise MalformedInputError(f"unsigned varlong {value} does not fit in 64 bits")
    return value, pos


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed 32-bit varint at pos; returns (value, position after it)."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _read_raw_varint(buf, pos, 5)
    if raw >= _UINT32_LIMIT:
        raise MalformedInputError(f"varint {raw} does not fit in 32 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag signed 64-bit varint at pos; returns (value, position after it)."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = _read_raw_varint(buf, pos, 10)
    if raw >= _UINT64_LIMIT:
        raise MalformedInputError(f"varlong {raw} does not fit in 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def _decode_utf8(data: bytes, where: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedInputError(f"invalid UTF-8 in string at offset {where}") from e


class Reader:
    """Sequential decoder over a buffer; every read checks bounds first."""

    __slots__ = ("_buf", "_end", "pos")

    def __init__(
        self, buf: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None
    ) -> None:
        self._buf = buf if isinstance(buf, bytes) else memoryview(buf).cast("B")
        size = len(self._buf)
        self._end = size if end is None else end
        if not 0 <= pos <= self._end <= size:
            raise MalformedInputError(f"bad reader window [{pos}, {self._end}) over {size} bytes")
        self.pos = pos

    def remaining(self) -> int:
        return self._end - self.pos

    def done(self) -> bool:
        return self.pos == self._end

    def expect_done(self, what: str = "message") -> None:
        if self.pos != self._end:
            raise MalformedInputError(f"{self._end - self.pos} trailing bytes after {what}")

    def _take(self, n: int) -> int:
        """Reserve n bytes; return where they start."""
        start = self.pos
        if n < 0:
            raise MalformedInputError(f"negative length {n} at offset {start}")
        if n > self._end - start:
            raise MalformedInputError(
                f"need {n} bytes at offset {start}, only {self._end - start} left"
            )
        self.pos = start + n
        return start

    def raw(self, n: int) -> bytes:
        start = self._take(n)
        return bytes(self._buf[start : start + n])

    def int8(self) -> int:
        return int(_I8.unpack_from(self._buf, self._take(1))[0])

    def boolean(self) -> bool:
        v = self.int8()
        if v not in (0, 1):
            raise MalformedInputError(f"boolean byte {v} is neither 0 nor 1")
        return v == 1

    def int16(self) -> int:
        return int(_I16.unpack_from(self._buf, self._take(2))[0])

    def uint16(self) -> int:
        return int(_U16.unpack_from(self._buf, self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self._buf, self._take(4))[0])

    def uint32(self) -> int:
        return int(_U32.unpack_from(self._buf, self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack_from(self._buf, self._take(8))[0])

    def float64(self) -> float:
        return float(_F64.unpack_from(self._buf, self._take(8))[0])

    def _check_varint_window(self, new_pos: int) -> None:
        if new_pos > self._end:
            raise MalformedInputError(f"varint at offset {self.pos} runs past the end")

    def uvarint(self) -> int:
        value, new_pos = read_uvarint(self._buf, self.pos)
        self._check_varint_window(new_pos)
        self.pos = new_pos
        return value

    def uvarlong(self) -> int:
        value, new_pos = read_uvarlong(self._buf, self.pos)
        self._check_varint_window(new_pos)
        self.pos = new_pos
        return value

    def varint(self) -> int:
        value, new_pos = read_varint(self._buf, self.pos)
        self._check_varint_window(new_pos)
        self.pos = new_pos
        return value

    def varlong(self) -> int:
        value, new_pos = read_varlong(self._buf, self.pos)
        self._check_varint_window(new_pos)
        self.pos = new_pos
        return value

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    # Strings: classic (int16 length) and compact (uvarint length + 1, 0 = null).
    def nullable_string(self) -> str | None:
        at = self.pos
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise MalformedInputError(f"negative string length {n} at offset {at}")
        return _decode_utf8(self.raw(n), at)

    def string(self) -> str:
        at = self.pos
        s = self.nullable_string()
        if s is None:
            raise MalformedInputError(f"null where a string is required at offset {at}")
        return s

    def compact_nullable_string(self) -> str | None:
        at = self.pos
        n = self.uvarint()
        if n == 0:
            return None
        return _decode_utf8(self.raw(n - 1), at)

    def compact_string(self) -> str:
        at = self.pos
        s = self.compact_nullable_string()
        if s is None:
            raise MalformedInputError(f"null where a string is required at offset {at}")
        return s

    # Bytes: classic (int32 length) and compact (uvarint length + 1, 0 = null).
    def nullable_bytes(self) -> bytes | None:
        at = self.pos
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise MalformedInputError(f"negative bytes length {n} at offset {at}")
        return self.raw(n)

    def bytes_(self) -> bytes:
        at = self.pos
        b = self.nullable_bytes()
        if b is None:
            raise MalformedInputError(f"null where bytes are required at offset {at}")
        return b

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self.raw(n - 1)

    def compact_bytes(self) -> bytes:
        at = self.pos
        b = self.compact_nullable_bytes()
        if b is None:
            raise MalformedInputError(f"null where bytes are required at offset {at}")
        return b

    # Array lengths. Each element takes at least one byte, so a count larger than what is left
    # is rejected up front rather than letting a caller loop on a forged count.
    def _check_count(self, n: int, at: int) -> int:
        if n > self._end - self.pos:
            raise MalformedInputError(
                f"array of {n} elements at offset {at} cannot fit in {self._end - self.pos} bytes"
            )
        return n

    def nullable_array_length(self) -> int | None:
        at = self.pos
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise MalformedInputError(f"negative array length {n} at offset {at}")
        return self._check_count(n, at)

    def array_length(self) -> int:
        at = self.pos
        n = self.nullable_array_length()
        if n is None:
            raise MalformedInputError(f"null where an array is required at offset {at}")
        return n

    def compact_nullable_array_length(self) -> int | None:
        at = self.pos
        n = self.uvarint()
        if n == 0:
            return None
        return self._check_count(n - 1, at)

    def compact_array_length(self) -> int:
        at = self.pos
        n = self.compact_nullable_array_length()
        if n is None:
            raise MalformedInputError(f"null where an array is required at offset {at}")
        return n

    def tagged_fields(self) -> dict[int, bytes]:
        """Read a tagged-field section (KIP-482); the caller decides which tags it knows."""
        at = self.pos
        count = self._check_count(self.uvarint(), at)
        fields: dict[int, bytes] = {}
        last = -1
        for _ in range(count):
            tag_at = self.pos
            tag = self.uvarint()
            if tag <= last:
                raise MalformedInputError(f"tag {tag} at offset {tag_at} is not ascending")
            last = tag
            fields[tag] = self.raw(self.uvarint())
        return fields


class Writer:
    """Append-only encoder; the mirror image of Reader."""

    __slots__ = ("_out",)

    def __init__(self) -> None:
        self._out = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self._out)

    def __len__(self) -> int:
        return len(self._out)

    def raw(self, data: bytes | bytearray | memoryview) -> Writer:
        self._out += data
        return self

    def _pack(self, fmt: struct.Struct, value: int | float) -> Writer:
        try:
            self._out += fmt.pack(value)
        except struct.error as e:
            raise ValueError(f"{value} out of range for {fmt.format}") from e
        return self

    def int8(self, value: int) -> Writer:
        return self._pack(_I8, value)

    def boolean(self, value: bool) -> Writer:
        return self._pack(_I8, 1 if value else 0)

    def int16(self, value: int) -> Writer:
        return self._pack(_I16, value)

    def uint16(self, value: int) -> Writer:
        return self._pack(_U16, value)

    def int32(self, value: int) -> Writer:
        return self._pack(_I32, value)

    def uint32(self, value: int) -> Writer:
        return self._pack(_U32, value)

    def int64(self, value: int) -> Writer:
        return self._pack(_I64, value)

    def float64(self, value: float) -> Writer:
        return self._pack(_F64, value)

    def uvarint(self, value: int) -> Writer:
        if not 0 <= value < _UINT32_LIMIT:
            raise ValueError(f"{value} does not fit in an unsigned 32-bit varint")
        self._out += uvarint_bytes(value)
        return self

    def uvarlong(self, value: int) -> Writer:
        self._out += uvarint_bytes(value)
        return self

    def varint(self, value: int) -> Writer:
        self._out += varint_bytes(value)
        return self

    def varlong(self, value: int) -> Writer:
        self._out += varlong_bytes(value)
        return self

    def uuid(self, value: uuid.UUID) -> Writer:
        self._out += value.bytes
        return self

    def nullable_string(self, value: str | None) -> Writer:
        if value is None:
            return self.int16(-1)
        data = value.encode("utf-8")
        self.int16(len(data))
        self._out += data
        return self

    def string(self, value: str) -> Writer:
        return self.nullable_string(value)

    def compact_nullable_string(self, value: str | None) -> Writer:
        if value is None:
            return self.uvarint(0)
        data = value.encode("utf-8")
        self.uvarint(len(data) + 1)
        self._out += data
        return self

    def compact_string(self, value: str) -> Writer:
        return self.compact_nullable_string(value)

    def nullable_bytes(self, value: bytes | None) -> Writer:
        if value is None:
            return self.int32(-1)
        self.int32(len(value))
        self._out += value
        return self

    def bytes_(self, value: bytes) -> Writer:
        return self.nullable_bytes(value)

    def compact_nullable_bytes(self, value: bytes | None) -> Writer:
        if value is None:
            return self.uvarint(0)
        self.uvarint(len(value) + 1)
        self._out += value
        return self

    def compact_bytes(self, value: bytes) -> Writer:
        return self.compact_nullable_bytes(value)

    def array_length(self, n: int | None) -> Writer:
        return self.int32(-1 if n is None else n)

    def compact_array_length(self, n: int | None) -> Writer:
        return self.uvarint(0 if n is None else n + 1)

    def tagged_fields(self, fields: Mapping[int, bytes] | None = None) -> Writer:
        """Write a tagged-field section; tags go out in ascending order as KIP-482 requires."""
        if not fields:
            self._out.append(0)
            return self
        self.uvarint(len(fields))
        for tag in sorted(fields):
            self.uvarint(tag)
            self.compact_bytes_raw(fields[tag])
        return self

    def compact_bytes_raw(self, data: bytes) -> Writer:
        """Length (plain uvarint, no +1) then data: the framing of one tagged field."""
        self.uvarint(len(data))
        self._out += data
        return self
