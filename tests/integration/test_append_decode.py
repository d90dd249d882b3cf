"""The KraftAppend fast paths: the decoder decodes what the generic codec decodes, and refuses
what it refuses (kraft.protocol.client_api.decode_append_request); the success answer is the
codec's answer byte for byte (AppendSuccessEncoder)."""

from __future__ import annotations

import random

import pytest

from kraft.protocol import RequestHeader
from kraft.protocol.client_api import (
    KRAFT_APPEND_KEY,
    KRAFT_NODE_INFO_KEY,
    AppendSuccessEncoder,
    decode_append_fields,
    decode_append_request,
    decode_client_request,
    encode_client_request,
    encode_client_response,
)
from kraft.protocol.errors import MalformedRequestError
from kraft.protocol.values import MessageDict, get_int, get_records, get_structs
from kraft.records import KeyValue


def _values_of(body: MessageDict) -> tuple[bytes, ...]:
    out = []
    for r in get_structs(body, "records"):
        v = get_records(r, "value")
        assert v is not None
        out.append(bytes(v))
    return tuple(out)


def _payload(values: list[bytes], client_id: str | None = "c", timeout_ms: int = 1234) -> bytes:
    header = RequestHeader(KRAFT_APPEND_KEY, 0, 77, client_id)
    body: MessageDict = {
        "timeout_ms": timeout_ms,
        "producer_id": 1 << 40,
        "sequence": 7,
        "records": [{"value": v} for v in values],
    }
    return encode_client_request(header, body)[4:]  # unframed, as the listener hands it on


@pytest.mark.parametrize("sizes", [[0], [1, 100, 126, 127, 128, 300], [20_000], [100] * 500])
def test_fast_decode_matches_the_codec(sizes: list[int]) -> None:
    rng = random.Random(len(sizes))
    values = [rng.randbytes(n) for n in sizes]
    for client_id in ("bench", None):
        payload = _payload(values, client_id)
        req = decode_append_request(payload)
        ref_header, body = decode_client_request(payload)
        assert req.header == ref_header
        assert req.timeout_ms == get_int(body, "timeout_ms") == 1234
        assert req.producer_id == get_int(body, "producer_id") == 1 << 40
        assert req.sequence == get_int(body, "sequence") == 7
        assert tuple(v for _, v in req.records) == _values_of(body) == tuple(values)
        assert all(k is None and type(v) is bytes for k, v in req.records)
        # The listener's tuple form carries the same fields.
        assert decode_append_fields(payload) == (
            ref_header.correlation_id,
            ref_header.api_version,
            req.timeout_ms,
            req.producer_id,
            req.sequence,
            req.records,
        )


def test_fast_decode_skips_record_tagged_fields() -> None:
    payload = bytearray(_payload([b"ab", b"cd"]))
    # Give the first record one tagged field (tag 5, 2 bytes): count 1, tag, size, data.
    at = payload.index(b"ab") + 2
    payload[at : at + 1] = bytes([1, 5, 2]) + b"zz"
    assert decode_append_request(bytes(payload)).records == (
        (None, b"ab"),
        (None, b"cd"),
    )
    assert _values_of(decode_client_request(bytes(payload))[1]) == (b"ab", b"cd")


@pytest.mark.parametrize("cut", [1, 5, 50, 101])
def test_fast_decode_refuses_truncated_and_padded_bodies(cut: int) -> None:
    payload = _payload([b"x" * 100])
    with pytest.raises(MalformedRequestError):
        decode_append_request(payload[:-cut])
    with pytest.raises(MalformedRequestError):
        decode_client_request(payload[:-cut])
    with pytest.raises(MalformedRequestError):
        decode_append_request(payload + b"\x00")


@pytest.mark.parametrize("version", [0, 1])
def test_every_prefix_of_a_request_is_refused_by_both_forms(version: int) -> None:
    header = RequestHeader(KRAFT_APPEND_KEY, version, 9, "client")
    body: MessageDict = {"timeout_ms": 5, "records": [{"value": b"v" * 200}, {"value": b"w"}]}
    payload = encode_client_request(header, body)[4:]
    assert decode_append_fields(payload)[5] == ((None, b"v" * 200), (None, b"w"))
    for n in range(len(payload)):
        with pytest.raises(MalformedRequestError):
            decode_append_fields(payload[:n])
        with pytest.raises(MalformedRequestError):
            decode_append_request(payload[:n])


def test_fast_decode_refuses_another_api() -> None:
    payload = encode_client_request(RequestHeader(KRAFT_NODE_INFO_KEY, 0, 1, "c"), {})[4:]
    with pytest.raises(MalformedRequestError):
        decode_append_request(payload)


def _v1_payload(records: list[KeyValue]) -> bytes:
    header = RequestHeader(KRAFT_APPEND_KEY, 1, 78, "c")
    body: MessageDict = {
        "timeout_ms": 1000,
        "producer_id": -1,
        "sequence": -1,
        "records": [{"key": k, "value": v} for k, v in records],
    }
    return encode_client_request(header, body)[4:]


def test_v1_carries_keys_and_null_values_as_the_codec_decodes_them() -> None:
    records = [
        (b"k1", b"v1"),
        (b"k2", None),  # a delete
        (None, b"plain"),
        (b"", b""),
        (b"big", b"x" * 300),
    ]
    payload = _v1_payload(records)
    req = decode_append_request(payload)
    assert req.header.api_version == 1
    assert req.records == tuple(records)
    _, body = decode_client_request(payload)
    decoded = [
        (
            None if s.get("key") is None else bytes(get_records(s, "key") or b""),
            None if s.get("value") is None else bytes(get_records(s, "value") or b""),
        )
        for s in get_structs(body, "records")
    ]
    assert decoded == records


def test_v0_cannot_carry_a_null_value() -> None:
    """v0 values are not nullable: a null is refused, not taken for a delete."""
    payload = bytearray(_payload([b"ab"]))
    at = payload.index(b"ab") - 1  # the compact length byte (2 + 1)
    payload[at : at + 3] = b"\x00"  # null
    with pytest.raises(MalformedRequestError):
        decode_append_request(bytes(payload))


@pytest.mark.parametrize("cut", [1, 3, 8])
def test_v1_refuses_truncated_bodies(cut: int) -> None:
    payload = _v1_payload([(b"key", b"value")])
    with pytest.raises(MalformedRequestError):
        decode_append_request(payload[:-cut])
    with pytest.raises(MalformedRequestError):
        decode_append_request(payload + b"\x00")


def test_a_version_above_the_latest_is_refused() -> None:
    payload = bytearray(_v1_payload([(b"k", b"v")]))
    payload[2:4] = (2).to_bytes(2, "big")
    with pytest.raises(MalformedRequestError):
        decode_append_request(bytes(payload))


@pytest.mark.parametrize("version", [0, 1])
def test_the_fast_success_answer_is_the_codecs_answer_byte_for_byte(version: int) -> None:
    fields: MessageDict = {
        "leader_id": 3,
        "leader_epoch": 7,
        "leader_host": "127.0.0.1",
        "leader_port": 9093,
    }
    enc = AppendSuccessEncoder(version, fields)
    for corr, first, last in [(0, 0, 0), (1, 5, 5), (2**31 - 1, 2**40, 2**40 + 199), (-1, 0, 9)]:
        body: MessageDict = {**fields, "error_code": 0, "base_offset": first, "last_offset": last}
        assert enc.encode(corr, first, last) == encode_client_response(
            KRAFT_APPEND_KEY, corr, body, version
        )


def test_the_fast_success_answer_without_a_leader_endpoint() -> None:
    fields: MessageDict = {
        "leader_id": 1,
        "leader_epoch": 2,
        "leader_host": None,
        "leader_port": -1,
    }
    body: MessageDict = {**fields, "error_code": 0, "base_offset": 3, "last_offset": 4}
    assert AppendSuccessEncoder(0, fields).encode(9, 3, 4) == encode_client_response(
        KRAFT_APPEND_KEY, 9, body
    )
