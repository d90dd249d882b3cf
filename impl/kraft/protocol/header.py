"""Request and response headers, and which header version each API version uses.

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable
string with an int16 length. v2 (flexible requests) appends tagged fields; client_id stays a
classic int16-length string even there. Response header v0 is correlation_id alone; v1 (flexible
responses) appends tagged fields, except that ApiVersions responses always use v0 so that a
client can read the error of a version it sent too high.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kraft.protocol.errors import MalformedRequestError, MalformedResponseError, UnknownApiKeyError
from kraft.protocol.messages import API_VERSIONS, APIS
from kraft.protocol.wire import WireFormatError, read_uvarint

_FIXED: Final = struct.Struct(">hhih")
_CORRELATION: Final = struct.Struct(">i")
_NULL_CLIENT: Final = struct.pack(">h", -1)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions, else 1; decided by the flexible range even past the supported
    range, so a too-new request's header still parses and can be answered."""
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiKeyError(api_key)
    return 2 if api_version in api.request.flexible else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS.api_key:
        return 0
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApiKeyError(api_key)
    return 1 if api_version in api.response.flexible else 0


def encode_request_header(header: RequestHeader) -> bytes:
    version = request_header_version(header.api_key, header.api_version)
    if header.client_id is None:
        head = _FIXED.pack(header.api_key, header.api_version, header.correlation_id, -1)
    else:
        raw = header.client_id.encode("utf-8")
        head = (
            _FIXED.pack(header.api_key, header.api_version, header.correlation_id, len(raw)) + raw
        )
    return head + b"\x00" if version >= 2 else head


def decode_request_header(buf: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """The header and the offset where the body starts. Raises UnknownApiKeyError for a key we
    do not implement (its header layout is then unknown) and MalformedRequestError otherwise."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        api_key, api_version, correlation_id, n = _FIXED.unpack_from(view, 0)
        version = request_header_version(api_key, api_version)
        pos = _FIXED.size
        client_id: str | None = None
        if n >= 0:
            if pos + n > len(view):
                raise WireFormatError("client_id runs past the end")
            client_id = str(view[pos : pos + n], "utf-8")
            pos += n
        elif n != -1:
            raise WireFormatError("negative client_id length")
        if version >= 2:
            pos = skip_tagged(view, pos)
    except (WireFormatError, struct.error, IndexError, UnicodeDecodeError) as e:
        raise MalformedRequestError(f"request header: {e}") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if response_header_version(api_key, api_version) >= 1 else head


def decode_response_header(
    api_key: int, api_version: int, buf: bytes | bytearray | memoryview
) -> tuple[int, int]:
    """The correlation id and the offset where the body starts."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    version = response_header_version(api_key, api_version)
    try:
        (correlation_id,) = _CORRELATION.unpack_from(view, 0)
        pos = 4
        if version >= 1:
            pos = skip_tagged(view, pos)
    except (WireFormatError, struct.error, IndexError) as e:
        raise MalformedResponseError(f"response header: {e}") from None
    return correlation_id, pos


def skip_tagged(view: memoryview, pos: int) -> int:
    """Headers define no tags we use; skip them all, checking each stays inside the buffer."""
    count, pos = read_uvarint(view, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(view, pos)
        size, pos = read_uvarint(view, pos)
        pos += size
        if pos > len(view):
            raise WireFormatError("tagged header field runs past the end")
    return pos
