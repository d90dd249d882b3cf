"""Hostile input: the decoders raise only ProtocolError subclasses, promptly, in bounded memory."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_protocol_roundtrip import CASES, struct_strategy

from kraft.errors import ErrorCode
from kraft.protocol import (
    ApiKey,
    Direction,
    FrameDecoder,
    FrameError,
    MalformedMessageError,
    MalformedRequestError,
    MalformedResponseError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
    compiled,
    decode_request,
    decode_request_header,
    decode_request_payload,
    decode_response,
    encode_request,
    frame,
)

FUZZ = settings(max_examples=40)


def _decode_or_protocol_error(direction: Direction, key: int, version: int, data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        compiled(direction, key, version).decode(data)


@pytest.mark.parametrize(("direction", "api_key", "version"), CASES)
def test_random_bytes_raise_only_protocol_errors(
    direction: Direction, api_key: int, version: int
) -> None:
    @FUZZ
    @given(st.binary(max_size=200))
    def check(data: bytes) -> None:
        _decode_or_protocol_error(direction, api_key, version, data)

    check()


@pytest.mark.parametrize(("direction", "api_key", "version"), CASES)
def test_every_truncation_and_bit_flip_of_a_valid_message(
    direction: Direction, api_key: int, version: int
) -> None:
    codec = compiled(direction, api_key, version)

    @FUZZ
    @given(struct_strategy(codec.spec.root, version), st.data())
    def check(message: dict[str, object], data: st.DataObject) -> None:
        wire = codec.encode(message)  # type: ignore[arg-type]
        # A strict prefix of a valid message never decodes: the format is prefix-free.
        for cut in range(len(wire)):
            with pytest.raises(MalformedMessageError):
                codec.decode(wire[:cut])
        with pytest.raises(MalformedMessageError, match="trailing"):
            codec.decode(wire + b"\x00")
        flipped = bytearray(wire)
        for _ in range(3 if wire else 0):
            bit = data.draw(st.integers(0, len(wire) * 8 - 1))
            flipped[bit // 8] ^= 1 << (bit % 8)
        _decode_or_protocol_error(direction, api_key, version, bytes(flipped))

    check()


def _peak_bytes(fn: object) -> int:
    tracemalloc.start()
    try:
        assert callable(fn)
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


HUGE_UVARINT = bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x07])  # 2**31 - 1: a length of 2**31 - 2


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        # Vote v0: cluster_id compact string claiming 2**31 - 2 bytes
        (ApiKey.VOTE, 0, HUGE_UVARINT + b"abc"),
        # Vote v0: cluster_id null, then a topics array of 2**31 - 2 elements
        (ApiKey.VOTE, 0, b"\x00" + HUGE_UVARINT + b"\x00" * 10),
        # BeginQuorumEpoch v0 (classic): null cluster_id, topics int32 count 2**31 - 1
        (ApiKey.BEGIN_QUORUM_EPOCH, 0, struct.pack(">hi", -1, 2**31 - 1) + b"\x00" * 8),
        # EndQuorumEpoch v0: classic string length 32767 with 3 bytes behind it
        (ApiKey.END_QUORUM_EPOCH, 0, struct.pack(">h", 32767) + b"abc"),
        # Fetch v17: tagged-field count 2**31 - 1 with nothing behind it
        (ApiKey.FETCH, 17, b"\x00" * 19 + b"\x01\x01\x01" + HUGE_UVARINT),
        # a varint longer than 5 bytes
        (ApiKey.VOTE, 0, b"\xff" * 6 + b"\x00"),
    ],
)
def test_oversized_lengths_fail_fast_without_allocating(
    key: int, version: int, body: bytes
) -> None:
    def run() -> None:
        with pytest.raises(MalformedRequestError):
            decode_request(key, version, body)

    # The first decode of an (api, version) compiles its schema once; measure after that, so
    # that the bound is about what a hostile length makes the decoder allocate.
    run()
    assert _peak_bytes(run) < 256 * 1024


def test_negative_classic_length_other_than_minus_one_is_malformed() -> None:
    with pytest.raises(MalformedRequestError):
        decode_request(ApiKey.BEGIN_QUORUM_EPOCH, 0, struct.pack(">hi", -2, 0))


def test_null_in_non_nullable_field_is_malformed() -> None:
    # Vote v0: cluster_id null (ok), topics null (compact 0): not nullable
    with pytest.raises(MalformedRequestError, match="null"):
        decode_request(ApiKey.VOTE, 0, b"\x00\x00\x00")


def test_invalid_utf8_is_malformed() -> None:
    with pytest.raises(MalformedRequestError):
        decode_request(ApiKey.VOTE, 0, b"\x02\xff\x01\x00")


def test_tagged_field_with_wrong_size_is_malformed() -> None:
    # FetchSnapshot response v0 top level: throttle, error, topics empty, then tag 0
    # (NodeEndpoints is v1+, so tag 0 is unknown in v0 and must be skipped)
    base = struct.pack(">ih", 0, 0) + b"\x01"
    assert decode_response(ApiKey.FETCH_SNAPSHOT, 0, base + b"\x01\x00\x02ab")["error_code"] == 0
    # in v1 tag 0 is NodeEndpoints: an empty compact array is 1 byte, not the declared 2
    with pytest.raises(MalformedResponseError, match="wrong size"):
        decode_response(ApiKey.FETCH_SNAPSHOT, 1, base + b"\x01\x00\x02\x01\x00")


def test_error_codes() -> None:
    assert MalformedRequestError.error_code == ErrorCode.INVALID_REQUEST
    assert MalformedResponseError.error_code == ErrorCode.CORRUPT_MESSAGE
    assert UnsupportedVersionError.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert UnknownApiKeyError.error_code == ErrorCode.INVALID_REQUEST
    with pytest.raises(UnknownApiKeyError) as unknown:
        decode_request(999, 0, b"")
    assert unknown.value.api_key == 999
    with pytest.raises(UnsupportedVersionError):
        encode_request(ApiKey.VOTE, 3, {})
    with pytest.raises(UnsupportedVersionError):
        decode_request(ApiKey.FETCH, 3, b"")


def test_unknown_api_key_in_header() -> None:
    with pytest.raises(UnknownApiKeyError):
        decode_request_header(struct.pack(">hhih", 77, 0, 1, -1))
    with pytest.raises(MalformedRequestError):
        decode_request_header(b"\x00\x34\x00")


@FUZZ
@given(st.binary(max_size=120))
def test_random_request_payloads_raise_only_protocol_errors(data: bytes) -> None:
    # steer half the inputs to a known api key so the body decoders are reached
    for candidate in (data, struct.pack(">hh", ApiKey.VOTE, 1) + data[4:]):
        with contextlib.suppress(ProtocolError):
            decode_request_payload(candidate)


def test_frame_decoder_refuses_oversized_and_negative_sizes() -> None:
    decoder = FrameDecoder(max_frame_size=16)
    assert decoder.feed(frame(b"x" * 16)) == [b"x" * 16]
    with pytest.raises(FrameError) as too_big:
        decoder.feed(struct.pack(">i", 17))
    assert too_big.value.size == 17
    with pytest.raises(FrameError):  # stays failed: the stream lost its framing
        decoder.feed(frame(b"ok"))
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">i", -1))
    with pytest.raises(FrameError):  # a 2 GiB size is refused before buffering anything
        FrameDecoder().feed(struct.pack(">i", 2**31 - 1))


def test_frame_decoder_default_maximum_is_8_mib() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", 8 * 1024 * 1024)) == []
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">i", 8 * 1024 * 1024 + 1))


def test_encode_errors_are_typed() -> None:
    from kraft.protocol import EncodeError

    with pytest.raises(EncodeError):
        encode_request(ApiKey.VOTE, 0, {"topics": None})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.VOTE, 0, {"cluster_id": 5})
    with pytest.raises(EncodeError):
        encode_request(ApiKey.VOTE, 0, {"topics": [{"partitions": [{"replica_id": 2**40}]}]})
    # a non-ignorable field cannot silently vanish at a version lacking it (KIP-996 pre-vote)
    msg = {"topics": [{"partitions": [{"pre_vote": True}]}]}
    with pytest.raises(EncodeError, match="pre_vote"):
        encode_request(ApiKey.VOTE, 1, msg)
    assert encode_request(ApiKey.VOTE, 2, msg)
