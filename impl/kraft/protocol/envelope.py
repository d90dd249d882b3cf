"""Whole request and response payloads: header then body, bare or framed with the size prefix.

Each is built with a single join of header and body pieces (no second copy of the body).
"""

from __future__ import annotations

import struct
from typing import Final

from kraft.protocol.codec import compiled
from kraft.protocol.header import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from kraft.protocol.schema import Direction
from kraft.protocol.values import Message, MessageDict

_SIZE: Final = struct.Struct(">i")


def _join(parts: list[bytes], framed: bool) -> bytes:
    if framed:
        parts[0] = _SIZE.pack(sum(map(len, parts)))
        return b"".join(parts)
    return b"".join(parts[1:])


def encode_request_payload(
    header: RequestHeader, message: Message, *, framed: bool = False
) -> bytes:
    """Header and body; with `framed`, preceded by the int32 size as sent on the wire."""
    codec = compiled(Direction.REQUEST, header.api_key, header.api_version)
    return _join(codec.encode_into(message, [b"", encode_request_header(header)]), framed)


def decode_request_payload(
    buf: bytes | bytearray | memoryview,
) -> tuple[RequestHeader, MessageDict]:
    """Raises UnknownApiKeyError, UnsupportedVersionError (use `decode_request_header` first if
    you must answer it, as for ApiVersions) or MalformedRequestError."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    header, pos = decode_request_header(view)
    codec = compiled(Direction.REQUEST, header.api_key, header.api_version)
    return header, codec.decode(view[pos:])


def encode_response_payload(
    api_key: int, api_version: int, correlation_id: int, message: Message, *, framed: bool = False
) -> bytes:
    """Header and body; with `framed`, preceded by the int32 size as sent on the wire."""
    codec = compiled(Direction.RESPONSE, api_key, api_version)
    head = encode_response_header(api_key, api_version, correlation_id)
    return _join(codec.encode_into(message, [b"", head]), framed)


def decode_response_payload(
    api_key: int, api_version: int, buf: bytes | bytearray | memoryview
) -> tuple[int, MessageDict]:
    """The correlation id and body of a response to a request of this key and version."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    codec = compiled(Direction.RESPONSE, api_key, api_version)
    correlation_id, pos = decode_response_header(api_key, api_version, view)
    return correlation_id, codec.decode(view[pos:])
