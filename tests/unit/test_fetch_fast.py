"""kraft.protocol.fetch_fast reads a Fetch v17 request or response exactly as the generic
decoder and translator do, or declines (None) and leaves it to them: for the messages replicas
send, for any message the schema allows, and for those bytes cut short or with a byte changed.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.core.messages import FetchRequest, FetchResponse
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_DIRECTORY,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.protocol import (
    Direction,
    ProtocolError,
    RequestHeader,
    compiled,
    decode_request_header,
    decode_request_payload,
    decode_response_payload,
    encode_request_payload,
    encode_response_payload,
)
from kraft.protocol.api_versions import SUPPORTED_APIS
from kraft.protocol.fetch_fast import (
    FAST_FETCH_VERSION,
    fetch_request_frame,
    fetch_response_frame,
    read_fetch_request,
    read_fetch_response,
)
from kraft.protocol.rpc import (
    TOP_LEVEL_ERRORS,
    Listener,
    WireTranslationError,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from kraft.protocol.schema import ApiKey
from kraft.server.peers import _endpoints_of
from tests.unit.test_protocol_roundtrip import struct_strategy

V = FAST_FETCH_VERSION
_I32 = st.integers(-(2**31), 2**31 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_OFFSET = st.integers(-1, 2**40)


def _generic_request(payload: bytes) -> FetchRequest | None:
    """What the leader's generic path makes of a request payload (None: it refuses it)."""
    try:
        header, body = decode_request_payload(payload)
        req = request_from_wire(header.api_key, header.api_version, body)
    except (ProtocolError, WireTranslationError):
        return None
    assert isinstance(req, FetchRequest)
    return req


def _fast_request(payload: bytes) -> FetchRequest | None:
    header, at = decode_request_header(payload)
    assert header.api_version == V
    return read_fetch_request(memoryview(payload)[at:])


def _generic_response(
    frame: bytes,
) -> tuple[FetchResponse, list[tuple[NodeId, str, int]]] | None:
    """What a follower's generic path makes of a response (None: a bad response)."""
    try:
        _, body = decode_response_payload(ApiKey.FETCH, V, frame)
        resp = response_from_wire(ApiKey.FETCH, V, body)
    except (ProtocolError, WireTranslationError):
        return None
    assert isinstance(resp, FetchResponse)
    return resp, _endpoints_of(body)


def _same_request(fast: FetchRequest | None, generic: FetchRequest | None) -> None:
    if fast is not None:
        assert fast == generic


def _same_response(
    fast: tuple[FetchResponse, list[tuple[NodeId, str, int]]] | None,
    generic: tuple[FetchResponse, list[tuple[NodeId, str, int]]] | None,
) -> None:
    if fast is not None:
        assert generic is not None
        assert fast[0] == generic[0]
        assert bytes(fast[0].records) == bytes(generic[0].records)  # records compare=False
        assert fast[1] == generic[1]


_directories = st.just(NO_DIRECTORY) | st.builds(
    lambda b: DirectoryId(uuid.UUID(bytes=b)), st.binary(min_size=16, max_size=16)
)
requests = st.builds(
    FetchRequest,
    cluster_id=st.text(max_size=40).map(ClusterId),
    replica=st.builds(ReplicaKey, st.integers(0, 2**31 - 1).map(NodeId), _directories),
    replica_epoch=_I32.map(Epoch),
    fetch_offset=_I64.map(Offset),
    last_fetched_epoch=_I32.map(Epoch),
    log_start_offset=_I64.map(Offset),
    max_bytes=st.integers(0, 2**31 - 1),
    max_wait_ms=_I32,
)


def _request_payload(req: FetchRequest, corr: int = 7) -> bytes:
    api_key, version, body = request_to_wire(req, version=V)
    return encode_request_payload(RequestHeader(api_key, version, corr, "kraft-2"), body)


@settings(max_examples=300)
@given(requests)
def test_a_replicas_request_reads_as_the_generic_path_reads_it(req: FetchRequest) -> None:
    payload = _request_payload(req)
    fast = _fast_request(payload)
    assert fast is not None  # the shape replicas send is the fast one
    assert fast == _generic_request(payload) == req


_pairs = st.builds(
    lambda e, o: OffsetAndEpoch(Epoch(e), Offset(o)),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**40),
)
responses = st.builds(
    FetchResponse,
    error=st.sampled_from(
        [ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER]
    ),
    leader_id=st.integers(-1, 2**31 - 1).map(NodeId),
    leader_epoch=_I32.map(Epoch),
    high_watermark=_OFFSET.map(Offset),
    log_start_offset=_OFFSET.map(Offset),
    diverging_epoch=st.none() | _pairs,
    snapshot_id=st.none() | _pairs,
    records=st.binary(max_size=600),
)
_listeners = st.none() | st.builds(
    Listener, st.just("CONTROLLER"), st.text(max_size=200), st.integers(0, 70000)
)


def _response_frame(resp: FetchResponse, listener: Listener | None) -> bytes:
    body = response_to_wire(resp, ApiKey.FETCH, V, leader_listener=listener)
    return encode_response_payload(ApiKey.FETCH, V, 9, body)


@settings(max_examples=300)
@given(responses, _listeners)
def test_a_leaders_answer_reads_as_the_generic_path_reads_it(
    resp: FetchResponse, listener: Listener | None
) -> None:
    frame = _response_frame(resp, listener)
    generic = _generic_response(frame)
    fast = read_fetch_response(frame)
    assert generic is not None
    short_host = listener is None or len(listener.host.encode()) < 0x7F  # one-byte length
    if short_host and resp.error is not ErrorCode.NOT_LEADER_OR_FOLLOWER:
        assert fast is not None  # a partition-level error is still the usual shape
    _same_response(fast, generic)


@settings(max_examples=200)
@given(struct_strategy(compiled(Direction.REQUEST, ApiKey.FETCH, V).spec.root, V))
def test_any_request_the_schema_allows_is_read_alike_or_declined(body: dict[str, object]) -> None:
    payload = encode_request_payload(RequestHeader(ApiKey.FETCH, V, 1, "x"), body)  # type: ignore[arg-type]
    _same_request(_fast_request(payload), _generic_request(payload))


@settings(max_examples=200)
@given(struct_strategy(compiled(Direction.RESPONSE, ApiKey.FETCH, V).spec.root, V))
def test_any_response_the_schema_allows_is_read_alike_or_declined(
    body: dict[str, object],
) -> None:
    frame = encode_response_payload(ApiKey.FETCH, V, 1, body)  # type: ignore[arg-type]
    _same_response(read_fetch_response(frame), _generic_response(frame))


@settings(max_examples=300)
@given(requests, st.data())
def test_a_damaged_request_is_read_alike_or_declined(
    req: FetchRequest, data: st.DataObject
) -> None:
    payload = _request_payload(req)
    _, at = decode_request_header(payload)
    cut = data.draw(st.integers(at, len(payload)))
    damaged = bytearray(payload[:cut])
    if damaged[at:] and data.draw(st.booleans()):
        i = data.draw(st.integers(at, len(damaged) - 1))
        damaged[i] = data.draw(st.integers(0, 255))
    _same_request(_fast_request(bytes(damaged)), _generic_request(bytes(damaged)))


@settings(max_examples=300)
@given(responses, _listeners, st.data())
def test_a_damaged_response_is_read_alike_or_declined(
    resp: FetchResponse, listener: Listener | None, data: st.DataObject
) -> None:
    frame = _response_frame(resp, listener)
    cut = data.draw(st.integers(5, len(frame)))
    damaged = bytearray(frame[:cut])
    if len(damaged) > 4 and data.draw(st.booleans()):
        i = data.draw(st.integers(4, len(damaged) - 1))
        damaged[i] = data.draw(st.integers(0, 255))
    _same_response(read_fetch_response(bytes(damaged)), _generic_response(bytes(damaged)))


_client_ids = st.none() | st.text(max_size=20)


@settings(max_examples=300)
@given(requests, st.integers(0, 2**31 - 1), _client_ids, st.integers(-1, 3).map(NodeId))
def test_a_request_is_written_as_the_generic_encoder_writes_it(
    req: FetchRequest, corr: int, client_id: str | None, replica: NodeId
) -> None:
    if replica == -1:  # a consumer's fetch: no replica_state tag
        req = replace(req, replica=ReplicaKey(replica, req.replica.directory_id))
    api_key, version, body = request_to_wire(req, version=V)
    generic = encode_request_payload(
        RequestHeader(api_key, version, corr, client_id), body, framed=True
    )
    assert fetch_request_frame(req, corr, client_id) == generic


_errors = st.sampled_from(list(ErrorCode))


@settings(max_examples=300)
@given(
    responses,
    _errors,
    st.integers(0, 2**31 - 1),
    _listeners,
    st.none() | _pairs,
    st.integers(-1, 3),
    st.integers(-1, 3),
)
def test_an_answer_is_written_as_the_generic_encoder_writes_it(
    resp: FetchResponse,
    error: ErrorCode,
    corr: int,
    listener: Listener | None,
    snapshot: OffsetAndEpoch | None,
    leader: int,
    epoch: int,
) -> None:
    resp = replace(resp, error=error)
    if leader < 3:  # the unknown leader (-1, -1) and its neighbours
        resp = replace(resp, leader_id=NodeId(leader), leader_epoch=Epoch(epoch))
    if snapshot is not None:
        resp = replace(resp, snapshot_id=snapshot, diverging_epoch=None, records=b"")
    fast = fetch_response_frame(resp, corr, listener)
    body = response_to_wire(resp, ApiKey.FETCH, V, leader_listener=listener)
    generic = encode_response_payload(ApiKey.FETCH, V, corr, body, framed=True)
    if error in TOP_LEVEL_ERRORS:
        assert fast is None
    else:
        assert fast == generic


def test_the_fast_version_is_the_one_replicas_speak() -> None:
    """A newer Fetch version would leave the fast paths unused: this says so."""
    assert SUPPORTED_APIS[ApiKey.FETCH][1] == FAST_FETCH_VERSION


def test_a_value_that_does_not_fit_its_field_is_left_to_the_generic_encoder() -> None:
    req = FetchRequest(
        ClusterId("c"),
        ReplicaKey(NodeId(1)),
        Epoch(1),
        Offset(0),
        Epoch(1),
        Offset(0),
        max_wait_ms=2**31,
    )
    assert fetch_request_frame(req, 1, "x") is None
    resp = FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(2**31), Offset(0), Offset(0))
    assert fetch_response_frame(resp, 1, None) is None
