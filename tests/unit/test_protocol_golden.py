"""Golden bytes written by hand from Kafka's message format, field by field.

Flexible versions: "compact" strings/arrays carry an unsigned varint of length + 1 (0 = null);
every struct ends with a tagged-field section (uvarint count, then tag, size, value per field).
Classic versions: int16-length strings, int32-count arrays, no tagged fields.
"""

from __future__ import annotations

import uuid

import pytest

from kraft.errors import ErrorCode
from kraft.protocol import (
    METADATA_TOPIC_ID,
    SUPPORTED_APIS,
    ApiKey,
    RequestHeader,
    UnsupportedVersionError,
    api_versions_response,
    api_versions_unsupported_reply,
    decode_request,
    decode_request_header,
    decode_request_payload,
    decode_response,
    decode_response_payload,
    encode_request,
    encode_request_header,
    encode_request_payload,
    encode_response,
    encode_response_header,
    encode_response_payload,
    frame,
    uuid_from_base64,
    uuid_to_base64,
)


def hx(*parts: str) -> bytes:
    """Annotated hex: each part is one field; spaces are ignored."""
    return bytes.fromhex("".join(p.replace(" ", "") for p in parts))


META = "13" + b"__cluster_metadata".hex()  # compact string: uvarint(18 + 1) then bytes
META_CLASSIC = "0012" + b"__cluster_metadata".hex()  # int16 length 18 then bytes
DIR = uuid.UUID("0123456789abcdef0123456789abcdef")


def test_metadata_topic_id_is_kafkas_fixed_uuid() -> None:
    # Apache Kafka's Uuid.METADATA_TOPIC_ID: most significant bits 0, least significant 1.
    assert uuid_to_base64(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ") == METADATA_TOPIC_ID


VOTE_V0 = {
    "cluster_id": "c1",
    "topics": [
        {
            "topic_name": "__cluster_metadata",
            "partitions": [
                {
                    "partition_index": 0,
                    "replica_epoch": 5,
                    "replica_id": 1,
                    "last_offset_epoch": 4,
                    "last_offset": 100,
                }
            ],
        }
    ],
}
VOTE_V0_BYTES = hx(
    "03 6331",  # cluster_id: compact nullable string "c1"
    "02",  # topics: compact array, 1 element
    META,  # topic_name
    "02",  # partitions: 1 element
    "00000000",  # partition_index 0
    "00000005",  # candidate (replica) epoch 5
    "00000001",  # candidate (replica) id 1
    "00000004",  # last_offset_epoch 4
    "0000000000000064",  # last_offset 100
    "00",  # partition tagged fields: none
    "00",  # topic tagged fields: none
    "00",  # request tagged fields: none
)


def test_vote_request_v0_golden() -> None:
    assert encode_request(ApiKey.VOTE, 0, VOTE_V0) == VOTE_V0_BYTES
    decoded = decode_request(ApiKey.VOTE, 0, VOTE_V0_BYTES)
    part = decoded["topics"][0]["partitions"][0]
    assert part["replica_epoch"] == 5 and part["last_offset"] == 100
    # fields of later versions decode to their defaults
    assert decoded["voter_id"] == -1 and part["pre_vote"] is False


def test_vote_request_v2_golden_with_directory_ids_and_pre_vote() -> None:
    msg = {
        "cluster_id": None,
        "voter_id": 3,
        "topics": [
            {
                "topic_name": "__cluster_metadata",
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": 5,
                        "replica_id": 1,
                        "replica_directory_id": DIR,
                        "voter_directory_id": uuid.UUID(int=0),
                        "last_offset_epoch": 4,
                        "last_offset": 100,
                        "pre_vote": True,
                    }
                ],
            }
        ],
    }
    expected = hx(
        "00",  # cluster_id: null (compact length 0)
        "00000003",  # voter_id 3 (v1+)
        "02",
        META,
        "02",
        "00000000",  # partition_index
        "00000005",  # replica epoch
        "00000001",  # replica id
        DIR.hex,  # replica_directory_id (v1+)
        "00" * 16,  # voter_directory_id: zero uuid
        "00000004",
        "0000000000000064",
        "01",  # pre_vote true (v2+, KIP-996)
        "00",
        "00",
        "00",
    )
    assert encode_request(ApiKey.VOTE, 2, msg) == expected
    assert decode_request(ApiKey.VOTE, 2, expected) == msg


BQE_RESPONSE = {
    "error_code": 0,
    "topics": [
        {
            "topic_name": "__cluster_metadata",
            "partitions": [
                {"partition_index": 0, "error_code": 0, "leader_id": 2, "leader_epoch": 7}
            ],
        }
    ],
    "node_endpoints": [{"node_id": 2, "host": "h1", "port": 9093}],
}


def test_begin_quorum_epoch_response_v1_golden() -> None:
    expected = hx(
        "0000",  # error_code
        "02",
        META,
        "02",
        "00000000 0000 00000002 00000007",  # partition, error, leader 2, epoch 7
        "00",
        "00",
        "01",  # one tagged field
        "00 0b",  # tag 0 (NodeEndpoints), 11 bytes
        "02 00000002 03 6831 2385 00",  # [node 2, host "h1", port 9093 (uint16)]
    )
    assert encode_response(ApiKey.BEGIN_QUORUM_EPOCH, 1, BQE_RESPONSE) == expected
    assert decode_response(ApiKey.BEGIN_QUORUM_EPOCH, 1, expected) == BQE_RESPONSE


def test_begin_quorum_epoch_response_v0_is_classic_and_drops_tagged_endpoints() -> None:
    expected = hx(
        "0000",
        "00000001",  # topics: int32 count
        META_CLASSIC,  # int16-length string
        "00000001",
        "00000000 0000 00000002 00000007",  # no tagged sections in v0
    )
    assert encode_response(ApiKey.BEGIN_QUORUM_EPOCH, 0, BQE_RESPONSE) == expected


def test_fetch_request_v17_golden() -> None:
    msg = {
        "cluster_id": "abc",
        "replica_state": {"replica_id": 1, "replica_epoch": -1},
        "max_wait_ms": 500,
        "min_bytes": 0,
        "topics": [
            {
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": 7,
                        "fetch_offset": 100,
                        "last_fetched_epoch": 6,
                        "partition_max_bytes": 1 << 20,
                        "replica_directory_id": DIR,
                    }
                ],
            }
        ],
    }
    expected = hx(
        "000001f4",  # max_wait_ms 500 (replica_id is gone after v14)
        "00000000",  # min_bytes
        "7fffffff",  # max_bytes default
        "00",  # isolation_level
        "00000000",  # session_id
        "ffffffff",  # session_epoch -1
        "02",  # topics
        "00000000000000000000000000000001",  # topic_id (v13+): the metadata topic
        "02",  # partitions
        "00000000",  # partition
        "00000007",  # current_leader_epoch
        "0000000000000064",  # fetch_offset 100
        "00000006",  # last_fetched_epoch 6 (v12+)
        "ffffffffffffffff",  # log_start_offset -1
        "00100000",  # partition_max_bytes 1 MiB
        "01 00 10",  # 1 tagged field: tag 0 ReplicaDirectoryId, 16 bytes
        DIR.hex,
        "00",  # topic tagged fields
        "01",  # forgotten_topics_data: empty
        "01",  # rack_id: ""
        "02",  # two tagged fields, ascending tags
        "00 04 04616263",  # tag 0 ClusterId: compact string "abc"
        "01 0d 00000001 ffffffffffffffff 00",  # tag 1 ReplicaState: id 1, epoch -1
    )
    assert encode_request(ApiKey.FETCH, 17, msg) == expected
    decoded = decode_request(ApiKey.FETCH, 17, expected)
    assert decoded["replica_state"] == {"replica_id": 1, "replica_epoch": -1}
    assert decoded["topics"][0]["partitions"][0]["last_fetched_epoch"] == 6
    assert decoded["replica_id"] == -1


def test_fetch_response_v16_golden_with_tagged_epoch_fields() -> None:
    msg = {
        "responses": [
            {
                "topic_id": METADATA_TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "high_watermark": 100,
                        "log_start_offset": 0,
                        "diverging_epoch": {"epoch": 4, "end_offset": 80},
                        "current_leader": {"leader_id": 2, "leader_epoch": 7},
                        "snapshot_id": {"end_offset": 64, "epoch": 3},
                        "aborted_transactions": None,
                        "records": b"xyz",
                    }
                ],
            }
        ]
    }
    expected = hx(
        "00000000",  # throttle_time_ms
        "0000",  # error_code
        "00000000",  # session_id
        "02",
        "00000000000000000000000000000001",  # topic_id
        "02",
        "00000000",  # partition_index
        "0000",  # error_code
        "0000000000000064",  # high_watermark 100
        "ffffffffffffffff",  # last_stable_offset -1
        "0000000000000000",  # log_start_offset 0
        "00",  # aborted_transactions: null
        "ffffffff",  # preferred_read_replica -1
        "04 78797a",  # records: compact bytes, 3 bytes, left undecoded
        "03",  # three tagged fields
        "00 0d 00000004 0000000000000050 00",  # tag 0 DivergingEpoch(epoch 4, end 80)
        "01 09 00000002 00000007 00",  # tag 1 CurrentLeader(id 2, epoch 7)
        "02 0d 0000000000000040 00000003 00",  # tag 2 SnapshotId(end 64, epoch 3)
        "00",  # topic tagged fields
        "00",  # response tagged fields: NodeEndpoints empty, so absent
    )
    assert encode_response(ApiKey.FETCH, 16, msg) == expected
    decoded = decode_response(ApiKey.FETCH, 16, expected)
    part = decoded["responses"][0]["partitions"][0]
    assert part["diverging_epoch"] == {"epoch": 4, "end_offset": 80}
    assert part["current_leader"] == {"leader_id": 2, "leader_epoch": 7}
    assert part["snapshot_id"] == {"end_offset": 64, "epoch": 3}
    assert isinstance(part["records"], memoryview) and bytes(part["records"]) == b"xyz"


def test_fetch_response_without_tagged_values_omits_them() -> None:
    """A tagged field equal to its default is not written."""
    msg = {"responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [{"records": None}]}]}
    body = encode_response(ApiKey.FETCH, 13, msg)
    assert body.endswith(hx("01", "ffffffff", "00", "00", "00", "00"))
    part = decode_response(ApiKey.FETCH, 13, body)["responses"][0]["partitions"][0]
    assert part["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
    assert part["records"] is None


def test_request_header_v2_with_client_id() -> None:
    header = RequestHeader(ApiKey.VOTE, 2, 42, "kraft1")
    expected = hx(
        "0034",  # api_key 52
        "0002",  # api_version 2
        "0000002a",  # correlation_id 42
        "0006 6b7261667431",  # client_id: int16 length, NOT compact even in v2
        "00",  # header tagged fields
    )
    assert encode_request_header(header) == expected
    assert decode_request_header(expected + b"rest") == (header, len(expected))


def test_request_header_v1_for_non_flexible_and_null_client_id() -> None:
    header = RequestHeader(ApiKey.BEGIN_QUORUM_EPOCH, 0, 7, None)
    expected = hx("0035", "0000", "00000007", "ffff")  # no tagged fields in v1
    assert encode_request_header(header) == expected
    assert decode_request_header(expected) == (header, len(expected))


def test_response_header_versions() -> None:
    assert encode_response_header(ApiKey.VOTE, 1, 9) == hx("00000009", "00")
    assert encode_response_header(ApiKey.BEGIN_QUORUM_EPOCH, 0, 9) == hx("00000009")
    # ApiVersions responses always use header v0, even at flexible v3+.
    assert encode_response_header(ApiKey.API_VERSIONS, 3, 9) == hx("00000009")


def test_api_versions_response_v3_golden() -> None:
    body = api_versions_response(apis={52: (0, 2), 55: (0, 2)})
    expected = hx(
        "00000007",  # response header v0: correlation id only
        "0000",  # error_code
        "03",  # api_keys: compact array of 2
        "0034 0000 0002 00",  # Vote 0-2
        "0037 0000 0002 00",  # DescribeQuorum 0-2
        "00000000",  # throttle_time_ms
        "00",  # tagged fields
    )
    assert encode_response_payload(ApiKey.API_VERSIONS, 3, 7, body) == expected
    assert decode_response_payload(ApiKey.API_VERSIONS, 3, expected) == (
        7,
        {
            **body,
            "supported_features": [],
            "finalized_features_epoch": -1,
            "finalized_features": [],
            "zk_migration_ready": False,
        },
    )


def test_api_versions_unsupported_version_answered_at_v0() -> None:
    """Kafka answers an ApiVersions request of an unknown version with a v0 response carrying
    UNSUPPORTED_VERSION and its version ranges."""
    req = encode_request_header(RequestHeader(ApiKey.API_VERSIONS, 9, 5, "c")) + hx(
        "01", "01", "00"
    )
    header, _ = decode_request_header(req)  # the header still parses (v2 for v3+)
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request_payload(req)
    assert info.value.error_code == ErrorCode.UNSUPPORTED_VERSION
    reply = api_versions_unsupported_reply(header.correlation_id)
    table = "".join(f"{k:04x}{lo:04x}{hi:04x}" for k, (lo, hi) in sorted(SUPPORTED_APIS.items()))
    assert reply == hx("00000005", "0023", f"{len(SUPPORTED_APIS):08x}", table)
    assert hx("0001 0004 0011") in reply  # Fetch 4-17
    assert hx("0034 0000 0002") in reply  # Vote 0-2


def test_supported_version_table() -> None:
    assert SUPPORTED_APIS == {
        1: (4, 17),
        18: (0, 4),
        52: (0, 2),
        53: (0, 1),
        54: (0, 1),
        55: (0, 2),
        59: (0, 1),
        60: (0, 2),
        80: (0, 1),
        81: (0, 0),
        82: (0, 0),
    }


def test_full_request_payload_round_trip() -> None:
    header = RequestHeader(ApiKey.VOTE, 0, 1, "n1")
    payload = encode_request_payload(header, VOTE_V0)
    assert payload == encode_request_header(header) + VOTE_V0_BYTES
    # framed: the int32 size prefix, then the same payload
    assert encode_request_payload(header, VOTE_V0, framed=True) == frame(payload)
    framed_rsp = encode_response_payload(ApiKey.BEGIN_QUORUM_EPOCH, 1, 3, BQE_RESPONSE, framed=True)
    assert framed_rsp == frame(
        encode_response_payload(ApiKey.BEGIN_QUORUM_EPOCH, 1, 3, BQE_RESPONSE)
    )
    got_header, body = decode_request_payload(payload)
    assert got_header == header
    assert body["cluster_id"] == "c1"
