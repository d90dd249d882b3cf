"""Low-level helpers the compiled codecs call: unsigned varints and cached UUIDs.

Decoding raises `WireFormatError`, a private signal the codec turns into the request or response
flavour of `MalformedMessageError` (it knows which side it is decoding).
"""

from __future__ import annotations

import uuid
from typing import Final

_UUID_CACHE_MAX: Final = 4096
_uuid_cache: dict[bytes, uuid.UUID] = {}


class WireFormatError(Exception):
    """Bytes that break the format; never escapes the protocol package."""


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (32 bits), as Kafka reads lengths and tags."""
    value = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise WireFormatError("unsigned varint longer than 5 bytes")
    if value > 0xFFFFFFFF:
        raise WireFormatError("unsigned varint above 32 bits")
    return value, pos


def _uvarint(n: int) -> bytes:
    if n < 0 or n > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Lengths below 16 KiB (nearly all strings, arrays and tagged sizes) come from this table.
_SMALL: Final = tuple(_uvarint(i) for i in range(1 << 14))


def uvarint(n: int) -> bytes:
    if 0 <= n < 16384:
        return _SMALL[n]
    return _uvarint(n)


def make_uuid(raw: bytes) -> uuid.UUID:
    """UUIDs repeat (topic ids, directory ids), so a bounded cache skips UUID.__init__."""
    u = _uuid_cache.get(raw)
    if u is None:
        if len(_uuid_cache) >= _UUID_CACHE_MAX:
            _uuid_cache.clear()
        u = uuid.UUID(bytes=raw)
        _uuid_cache[raw] = u
    return u
