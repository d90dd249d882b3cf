"""The KraftAppend fast path decodes what the generic codec decodes, and refuses what it
refuses (kraft.protocol.client_api.decode_append_request)."""

from __future__ import annotations

import random

import pytest

from kraft.protocol import RequestHeader
from kraft.protocol.client_api import (
    KRAFT_APPEND_KEY,
    KRAFT_NODE_INFO_KEY,
    decode_append_request,
    decode_client_request,
    encode_client_request,
)
from kraft.protocol.errors import MalformedRequestError
from kraft.protocol.values import MessageDict, get_int, get_records, get_structs


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
        assert req.values == _values_of(body) == tuple(values)
        assert all(type(v) is bytes for v in req.values)


def test_fast_decode_skips_record_tagged_fields() -> None:
    payload = bytearray(_payload([b"ab", b"cd"]))
    # Give the first record one tagged field (tag 5, 2 bytes): count 1, tag, size, data.
    at = payload.index(b"ab") + 2
    payload[at : at + 1] = bytes([1, 5, 2]) + b"zz"
    assert decode_append_request(bytes(payload)).values == (b"ab", b"cd")
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


def test_fast_decode_refuses_another_api() -> None:
    payload = encode_client_request(RequestHeader(KRAFT_NODE_INFO_KEY, 0, 1, "c"), {})[4:]
    with pytest.raises(MalformedRequestError):
        decode_append_request(payload)
