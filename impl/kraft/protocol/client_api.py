"""Private client APIs of this implementation (not Apache Kafka's): append, get, node info.

Kafka's KRaft has no client append RPC (the controller appends from its own state machine),
so `kraft append` speaks a private API. The keys sit far above Kafka's range (Kafka's largest
is below 100) so they can never collide with a real API. All are flexible from v0 (compact
strings, tagged fields), like every recent Kafka API. Committed records are read with Kafka's
own Fetch (replica id -1, as a consumer); a key's value in the state machine with KraftGet.

- KraftAppend (32000): the `records` become one record batch in the leader's epoch. v0
  carries values only (null keys); v1 carries a nullable key and a nullable value per record
  (to the key-value state machine, kraft.app.kv, a null value deletes the key). The answer
  comes once the batch is committed (the high watermark passed its last offset) or with an
  error: NOT_LEADER_OR_FOLLOWER (with the leader's id and endpoint, if known, to redirect
  to), REQUEST_TIMED_OUT (outcome unknown), INVALID_REQUEST.
- KraftNodeInfo (32001): the node's identity and its replica's state, from any node.
- KraftGet (32002): a key's value in the state machine of the node asked (any node: what it
  has applied, which is committed but may lag the leader), with the offset it has applied up
  to; `found` is false for a key it does not hold.

The codec compiles these specs as it compiles Kafka's; they are kept out of the codec's API
table so that ApiVersions advertises only Kafka's APIs. Hence the headers are handled here:
request header v2 (key, version, correlation id, int16-length client id, tagged fields) and
response header v1 (correlation id, tagged fields), as for any flexible Kafka API.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final, TypeAlias

from kraft.protocol.codec import CompiledMessage, _Compiler
from kraft.protocol.errors import MalformedRequestError, MalformedResponseError
from kraft.protocol.header import RequestHeader, skip_tagged
from kraft.protocol.schema import (
    ApiSpec,
    ArrayOf,
    Direction,
    Field,
    MessageSpec,
    Prim,
    Struct,
    V,
)
from kraft.protocol.values import Message, MessageDict
from kraft.protocol.wire import WireFormatError, read_uvarint
from kraft.records import KeyValue

KRAFT_APPEND_KEY: Final = 32000
KRAFT_NODE_INFO_KEY: Final = 32001
KRAFT_GET_KEY: Final = 32002

_ALL: Final = V(0)
KRAFT_APPEND_LATEST: Final = 1


def _api(
    key: int, name: str, req: tuple[Field, ...], rsp: tuple[Field, ...], *, latest: int = 0
) -> ApiSpec:
    return ApiSpec(
        key,
        name,
        MessageSpec(key, name + "Request", Direction.REQUEST, V(0, latest), V(0), req),
        MessageSpec(key, name + "Response", Direction.RESPONSE, V(0, latest), V(0), rsp),
    )


def _leader_fields() -> tuple[Field, ...]:
    return (
        Field("leader_id", Prim.INT32, _ALL, default=-1),
        Field("leader_epoch", Prim.INT32, _ALL, default=-1),
        Field("leader_host", Prim.STRING, _ALL, nullable=_ALL, default=None),
        Field("leader_port", Prim.INT32, _ALL, default=-1),
    )


KRAFT_APPEND: Final = _api(
    KRAFT_APPEND_KEY,
    "KraftAppend",
    req=(
        Field("timeout_ms", Prim.INT32, _ALL, default=30000),
        # Idempotence (kraft.core.producers): the client's id and its first record's sequence;
        # -1 and -1 for a plain append.
        Field("producer_id", Prim.INT64, _ALL, default=-1),
        Field("sequence", Prim.INT32, _ALL, default=-1),
        # One struct per record: the codec has no array of bare byte strings. v1 adds the
        # key and lets the value be null (a delete).
        Field(
            "records",
            ArrayOf(
                Struct(
                    "Record",
                    (
                        Field("key", Prim.BYTES, V(1), nullable=V(1), default=None),
                        Field("value", Prim.BYTES, _ALL, nullable=V(1)),
                    ),
                )
            ),
            _ALL,
        ),
    ),
    rsp=(
        Field("error_code", Prim.INT16, _ALL),
        Field("error_message", Prim.STRING, _ALL, nullable=_ALL, default=None),
        *_leader_fields(),
        Field("base_offset", Prim.INT64, _ALL, default=-1),
        Field("last_offset", Prim.INT64, _ALL, default=-1),
    ),
    latest=KRAFT_APPEND_LATEST,
)

KRAFT_GET: Final = _api(
    KRAFT_GET_KEY,
    "KraftGet",
    req=(Field("key", Prim.BYTES, _ALL),),
    rsp=(
        Field("error_code", Prim.INT16, _ALL),
        Field("error_message", Prim.STRING, _ALL, nullable=_ALL, default=None),
        Field("found", Prim.BOOL, _ALL, default=False),
        Field("value", Prim.BYTES, _ALL, nullable=_ALL, default=None),
        # The state machine holds every committed record below this offset.
        Field("applied_offset", Prim.INT64, _ALL, default=-1),
        Field("node_id", Prim.INT32, _ALL, default=-1),
    ),
)

KRAFT_NODE_INFO: Final = _api(
    KRAFT_NODE_INFO_KEY,
    "KraftNodeInfo",
    req=(),
    rsp=(
        Field("error_code", Prim.INT16, _ALL),
        Field("cluster_id", Prim.STRING, _ALL),
        Field("node_id", Prim.INT32, _ALL),
        Field("directory_id", Prim.UUID, _ALL),
        Field("state", Prim.STRING, _ALL),
        Field("epoch", Prim.INT32, _ALL),
        Field("voted_for", Prim.INT32, _ALL, default=-1),
        *_leader_fields(),
        Field("high_watermark", Prim.INT64, _ALL, default=-1),
        Field("log_start_offset", Prim.INT64, _ALL),
        Field("end_offset", Prim.INT64, _ALL),
        Field("last_epoch", Prim.INT32, _ALL),
        Field("voters", ArrayOf(Prim.INT32), _ALL),
    ),
)

CLIENT_APIS: Final = (KRAFT_APPEND, KRAFT_NODE_INFO, KRAFT_GET)

CLIENT_API_KEYS: Final = frozenset(api.api_key for api in CLIENT_APIS)
_SPECS: Final = {api.api_key: api for api in CLIENT_APIS}
_FIXED: Final = struct.Struct(">hhih")
_SIZE: Final = struct.Struct(">i")
_APPEND_FIXED: Final = struct.Struct(">iqi")  # timeout_ms, producer_id, sequence
_compiled: dict[tuple[Direction, int, int], CompiledMessage] = {}


def is_client_api(api_key: int) -> bool:
    return api_key in CLIENT_API_KEYS


def client_codec(direction: Direction, api_key: int, version: int = 0) -> CompiledMessage:
    """The compiled codec of one private message version (compiled once, then cached)."""
    hit = _compiled.get((direction, api_key, version))
    if hit is None:
        spec = _SPECS[api_key].message(direction)
        enc, dec = _Compiler(spec, version).build()
        malformed = (
            MalformedRequestError if direction is Direction.REQUEST else MalformedResponseError
        )
        hit = CompiledMessage(spec, version, enc, dec, malformed)
        _compiled[(direction, api_key, version)] = hit
    return hit


def _framed(parts: list[bytes]) -> bytes:
    return _SIZE.pack(sum(map(len, parts))) + b"".join(parts)


def encode_client_request(header: RequestHeader, body: Message) -> bytes:
    """The framed request (size prefix, header v2, body)."""
    client = b"" if header.client_id is None else header.client_id.encode("utf-8")
    n = -1 if header.client_id is None else len(client)
    head = _FIXED.pack(header.api_key, header.api_version, header.correlation_id, n)
    codec = client_codec(Direction.REQUEST, header.api_key, header.api_version)
    return _framed(codec.encode_into(body, [head + client + b"\x00"]))


def _decode_header(view: memoryview) -> tuple[RequestHeader, int]:
    try:
        key, version, correlation_id, n = _FIXED.unpack_from(view, 0)
        pos = _FIXED.size
        client_id = None
        if n >= 0:
            client_id = str(view[pos : pos + n], "utf-8")
            pos += n
        pos = skip_tagged(view, pos)
    except (WireFormatError, struct.error, IndexError, UnicodeDecodeError) as e:
        raise MalformedRequestError(f"request header: {e}") from None
    header = RequestHeader(key, version, correlation_id, client_id)
    valid = _SPECS[key].versions
    if version not in valid:
        raise MalformedRequestError(f"private API {key} has versions {valid}, not {version}")
    return header, pos


def decode_client_request(payload: bytes | memoryview) -> tuple[RequestHeader, MessageDict]:
    """Header and body of an unframed private request. Raises MalformedRequestError."""
    view = memoryview(payload)
    header, pos = _decode_header(view)
    codec = client_codec(Direction.REQUEST, header.api_key, header.api_version)
    return header, codec.decode(view[pos:])


@dataclass(frozen=True, slots=True)
class AppendRequest:
    header: RequestHeader
    timeout_ms: int
    producer_id: int
    sequence: int
    records: tuple[KeyValue, ...]


AppendFields: TypeAlias = tuple[int, int, int, int, int, tuple[KeyValue, ...]]


def decode_append_request(payload: bytes) -> AppendRequest:
    """An unframed KraftAppend request: the same answer as decode_client_request, without
    a dict per record (the append hot path). Raises MalformedRequestError."""
    corr, version, client_id, timeout_ms, producer_id, sequence, records = _decode_append(payload)
    header = RequestHeader(KRAFT_APPEND_KEY, version, corr, client_id)
    return AppendRequest(header, timeout_ms, producer_id, sequence, records)


def decode_append_fields(payload: bytes) -> AppendFields:
    """decode_append_request's fields as one tuple, without a header or request object: (its
    correlation id, its version, timeout_ms, producer_id, sequence, records). The listener's
    hot path. Raises MalformedRequestError."""
    corr, version, _, timeout_ms, producer_id, sequence, records = _decode_append(payload)
    return corr, version, timeout_ms, producer_id, sequence, records


_APPEND_VERSIONS: Final = KRAFT_APPEND.versions


def _decode_append(
    payload: bytes,
) -> tuple[int, int, str | None, int, int, int, tuple[KeyValue, ...]]:
    """The one KraftAppend decoder: (correlation id, version, client id, timeout_ms,
    producer_id, sequence, records)."""
    view = memoryview(payload)
    try:
        key, version, correlation_id, n = _FIXED.unpack_from(payload, 0)
        pos = _FIXED.size
        client_id = None
        if n >= 0:
            client_id = payload[pos : pos + n].decode("utf-8")
            pos += n
        # Tagged fields: nearly always none (one zero byte).
        pos = pos + 1 if payload[pos] == 0 else skip_tagged(view, pos)
    except (WireFormatError, struct.error, IndexError, UnicodeDecodeError) as e:
        raise MalformedRequestError(f"request header: {e}") from None
    if key != KRAFT_APPEND_KEY:
        raise MalformedRequestError(f"API {key} is not KraftAppend")
    if version not in _APPEND_VERSIONS:
        raise MalformedRequestError(
            f"private API {key} has versions {_APPEND_VERSIONS}, not {version}"
        )
    try:
        timeout_ms, producer_id, sequence = _APPEND_FIXED.unpack_from(payload, pos)
        pos += _APPEND_FIXED.size
        count = payload[pos]
        if count < 0x80:
            pos += 1
        else:
            count, pos = read_uvarint(view, pos)
        if count == 0:
            raise WireFormatError("records: a null array")
        end = len(payload)
        if version >= 1:
            keyed = _keyed_records(payload, view, pos, count - 1)
            return correlation_id, version, client_id, timeout_ms, producer_id, sequence, keyed
        records: list[KeyValue] = []
        add = records.append
        for _ in range(count - 1):
            n = payload[pos]  # a record: compact bytes (length + 1), then its tagged fields
            if n < 0x80:
                pos += 1
            else:
                n, pos = read_uvarint(view, pos)
            if n == 0:
                raise WireFormatError("a record value is null")
            stop = pos + n - 1
            if stop > end:
                raise WireFormatError("a record value runs past the end")
            add((None, payload[pos:stop]))
            pos = stop + 1 if payload[stop] == 0 else skip_tagged(view, stop)
        pos = pos + 1 if payload[pos] == 0 else skip_tagged(view, pos)
    except (WireFormatError, struct.error, IndexError) as e:
        raise MalformedRequestError(f"KraftAppend request: {e}") from None
    if pos != end:
        raise MalformedRequestError(f"KraftAppend request: {end - pos} bytes after the body")
    return correlation_id, version, client_id, timeout_ms, producer_id, sequence, tuple(records)


def _nullable_bytes(payload: bytes, view: memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(view, pos)  # compact nullable bytes: 0 is null, else length + 1
    if n == 0:
        return None, pos
    stop = pos + n - 1
    if stop > len(payload):
        raise WireFormatError("a record key or value runs past the end")
    return payload[pos:stop], stop


def _keyed_records(payload: bytes, view: memoryview, pos: int, count: int) -> tuple[KeyValue, ...]:
    """The records of a v1 request (key and value, both nullable, then tagged fields), and
    the check that nothing follows the body."""
    records: list[KeyValue] = []
    try:
        for _ in range(count):
            key, pos = _nullable_bytes(payload, view, pos)
            value, pos = _nullable_bytes(payload, view, pos)
            pos = skip_tagged(view, pos)
            records.append((key, value))
        pos = skip_tagged(view, pos)
    except (WireFormatError, IndexError) as e:
        raise MalformedRequestError(f"KraftAppend request: {e}") from None
    if pos != len(payload):
        raise MalformedRequestError(
            f"KraftAppend request: {len(payload) - pos} bytes after the body"
        )
    return tuple(records)


def encode_client_response(
    api_key: int, correlation_id: int, body: Message, version: int = 0
) -> bytes:
    """The framed response (size prefix, header v1, body)."""
    codec = client_codec(Direction.RESPONSE, api_key, version)
    return _framed(codec.encode_into(body, [_SIZE.pack(correlation_id) + b"\x00"]))


def decode_client_response(
    api_key: int, payload: bytes | memoryview, version: int = 0
) -> tuple[int, MessageDict]:
    """Correlation id and body of an unframed private response."""
    view = memoryview(payload)
    try:
        (correlation_id,) = _SIZE.unpack_from(view, 0)
        pos = skip_tagged(view, 4)
    except (WireFormatError, struct.error, IndexError) as e:
        raise MalformedResponseError(f"response header: {e}") from None
    return correlation_id, client_codec(Direction.RESPONSE, api_key, version).decode(view[pos:])


_ANSWER_HEAD: Final = struct.Struct(">ii")  # frame size, correlation id
_OFFSETS_AND_TAGS: Final = struct.Struct(">qqB")  # base_offset, last_offset, no tagged fields


class AppendSuccessEncoder:
    """Encodes the successful KraftAppend answers of one version and one set of leader fields
    (the append hot path): the codec encodes the body once, and each answer is that body with
    its correlation id and offsets packed in, byte for byte what encode_client_response gives.
    base_offset and last_offset are the body's last fields (fixed-width int64), followed only
    by its empty tagged fields; this is checked when the encoder is built."""

    __slots__ = ("_middle", "_size")

    def __init__(self, version: int, body: Message) -> None:
        fields: MessageDict = {**body, "error_code": 0, "error_message": None}
        low = encode_client_response(
            KRAFT_APPEND_KEY, 0, {**fields, "base_offset": 0, "last_offset": 0}, version
        )
        high = encode_client_response(
            KRAFT_APPEND_KEY, -1, {**fields, "base_offset": -1, "last_offset": -1}, version
        )
        end = len(low) - _OFFSETS_AND_TAGS.size
        if (
            len(low) != len(high)
            or low[_ANSWER_HEAD.size : end] != high[_ANSWER_HEAD.size : end]
            or low[end:] != _OFFSETS_AND_TAGS.pack(0, 0, 0)
            or high[end:] != _OFFSETS_AND_TAGS.pack(-1, -1, 0)
        ):
            raise ValueError(f"KraftAppendResponse v{version} does not end with its offsets")
        self._middle = low[_ANSWER_HEAD.size : end]
        self._size = len(low) - _SIZE.size

    def encode(self, correlation_id: int, base_offset: int, last_offset: int) -> bytes:
        """The framed answer."""
        return (
            _ANSWER_HEAD.pack(self._size, correlation_id)
            + self._middle
            + _OFFSETS_AND_TAGS.pack(base_offset, last_offset, 0)
        )
