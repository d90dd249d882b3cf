"""Every API, every supported version, both directions: decode(encode(m)) == m.

The message strategies here build whole messages from our schemas (also used by the fuzz tests).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.protocol import (
    APIS,
    Direction,
    FrameDecoder,
    RequestHeader,
    compiled,
    decode_request_header,
    encode_request_header,
    frame,
)
from kraft.protocol.schema import ArrayOf, Field, FieldType, Prim, Struct, default_of

_INTS = {
    Prim.INT8: (-(2**7), 2**7 - 1),
    Prim.INT16: (-(2**15), 2**15 - 1),
    Prim.UINT16: (0, 2**16 - 1),
    Prim.INT32: (-(2**31), 2**31 - 1),
    Prim.UINT32: (0, 2**32 - 1),
    Prim.INT64: (-(2**63), 2**63 - 1),
}


def _fresh(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


def value_strategy(t: FieldType, version: int, nullable: bool) -> st.SearchStrategy[Any]:
    if isinstance(t, Struct):
        base: st.SearchStrategy[Any] = struct_strategy(t, version)
    elif isinstance(t, ArrayOf):
        base = st.lists(value_strategy(t.element, version, False), max_size=3)
    elif t in _INTS:
        lo, hi = _INTS[t]
        base = st.integers(lo, hi)
    elif t is Prim.BOOL:
        base = st.booleans()
    elif t is Prim.FLOAT64:
        base = st.floats(allow_nan=False)
    elif t is Prim.UUID:
        base = st.uuids()
    elif t is Prim.STRING:
        base = st.text(max_size=12)
    else:
        base = st.binary(max_size=40)
    return st.none() | base if nullable else base


def _field(f: Field, version: int) -> st.SearchStrategy[Any]:
    if version not in f.versions:
        return st.builds(_fresh, st.just(default_of(f)))
    return value_strategy(f.type, version, version in f.nullable)


def struct_strategy(s: Struct, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f.name: _field(f, version) for f in s.fields})


CASES = [
    (direction, key, version)
    for key, api in sorted(APIS.items())
    for version in range(api.versions.lo, api.versions.hi + 1)
    for direction in Direction
]


@pytest.mark.parametrize(("direction", "api_key", "version"), CASES)
def test_round_trip(direction: Direction, api_key: int, version: int) -> None:
    codec = compiled(direction, api_key, version)

    @settings(max_examples=25)
    @given(struct_strategy(codec.spec.root, version))
    def check(message: dict[str, object]) -> None:
        wire = codec.encode(message)  # type: ignore[arg-type]
        decoded = codec.decode(wire)
        assert decoded == message
        assert codec.encode(decoded) == wire

    check()


@settings(max_examples=100)
@given(
    key=st.sampled_from(sorted(APIS)),
    version=st.integers(0, 20),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=30),
)
def test_request_header_round_trip(
    key: int, version: int, correlation_id: int, client_id: str | None
) -> None:
    header = RequestHeader(key, version, correlation_id, client_id)
    wire = encode_request_header(header)
    assert decode_request_header(wire + b"body") == (header, len(wire))


@settings(max_examples=100)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(0, 3000), max_size=10),
)
def test_frame_decoder_reassembles_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    decoder = FrameDecoder(max_frame_size=1000)
    got: list[bytes] = []
    for a, b in itertools.pairwise(bounds):
        got.extend(decoder.feed(stream[a:b]))
    assert got == payloads
    assert decoder.buffered == 0
