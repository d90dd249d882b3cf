"""Codec throughput: a FetchResponse carrying 1 MiB of records, and a VoteRequest; and the
per-request path of a node, core message <-> bytes through the RPC translators.

Run: python -m benchmarks.bench_protocol   (prints messages/s, median of 5 runs)
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable

from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, DirectoryId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import (
    METADATA_TOPIC_ID,
    METADATA_TOPIC_NAME,
    ApiKey,
    Message,
    RequestHeader,
    decode_request_payload,
    decode_response,
    decode_response_payload,
    encode_request_payload,
    encode_response,
    encode_response_payload,
)
from kraft.protocol.rpc import (
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)

RUNS = 5

FETCH_RESPONSE: Message = {
    "responses": [
        {
            "topic_id": METADATA_TOPIC_ID,
            "partitions": [
                {
                    "partition_index": 0,
                    "high_watermark": 1_000_000,
                    "log_start_offset": 0,
                    "current_leader": {"leader_id": 1, "leader_epoch": 7},
                    "records": bytes(1 << 20),
                }
            ],
        }
    ]
}

VOTE_REQUEST: Message = {
    "cluster_id": "kraft-cluster-1",
    "voter_id": 2,
    "topics": [
        {
            "topic_name": METADATA_TOPIC_NAME,
            "partitions": [
                {
                    "partition_index": 0,
                    "replica_epoch": 8,
                    "replica_id": 1,
                    "replica_directory_id": uuid.UUID(int=0x1234),
                    "voter_directory_id": uuid.UUID(int=0x5678),
                    "last_offset_epoch": 7,
                    "last_offset": 123_456,
                    "pre_vote": False,
                }
            ],
        }
    ],
}


def rate(op: Callable[[], object], seconds: float = 0.4) -> float:
    """Operations per second over one timed run of at least `seconds`."""
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(16):
            op()
        n += 16
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def median_rate(op: Callable[[], object]) -> float:
    return statistics.median(rate(op) for _ in range(RUNS))


CORE_FETCH_RESPONSE = FetchResponse(
    ErrorCode.NONE, NodeId(1), Epoch(7), Offset(1_000_000), Offset(0), records=bytes(1 << 20)
)
CORE_FETCH_REQUEST = FetchRequest(
    ClusterId("kraft-cluster-1"),
    ReplicaKey(NodeId(2), DirectoryId(uuid.UUID(int=0x1234))),
    Epoch(7),
    Offset(123_456),
    Epoch(7),
    Offset(0),
    max_wait_ms=500,
)
CORE_VOTE_REQUEST = VoteRequest(
    ClusterId("kraft-cluster-1"),
    ReplicaKey(NodeId(1), DirectoryId(uuid.UUID(int=0x1234))),
    Epoch(8),
    Epoch(7),
    Offset(123_456),
    ReplicaKey(NodeId(2), DirectoryId(uuid.UUID(int=0x5678))),
)


def translation_cases() -> list[tuple[str, Callable[[], object], int]]:
    """What a node does per request: core message -> wire dict -> frame, and back."""

    def send_request(msg: FetchRequest | VoteRequest) -> bytes:
        key, version, body = request_to_wire(msg)
        return encode_request_payload(RequestHeader(key, version, 1, "node-2"), body, framed=True)

    def receive_request(wire: bytes) -> object:
        header, body = decode_request_payload(memoryview(wire)[4:])
        return request_from_wire(header.api_key, header.api_version, body)

    def send_response() -> bytes:
        body = response_to_wire(CORE_FETCH_RESPONSE, ApiKey.FETCH, 17)
        return encode_response_payload(ApiKey.FETCH, 17, 9, body, framed=True)

    def receive_response(wire: bytes) -> object:
        _, body = decode_response_payload(ApiKey.FETCH, 17, memoryview(wire)[4:])
        return response_from_wire(ApiKey.FETCH, 17, body)

    fetch_wire = send_request(CORE_FETCH_REQUEST)
    vote_wire = send_request(CORE_VOTE_REQUEST)
    response_wire = send_response()
    return [
        ("FetchRequest core -> frame", lambda: send_request(CORE_FETCH_REQUEST), len(fetch_wire)),
        ("FetchRequest frame -> core", lambda: receive_request(fetch_wire), len(fetch_wire)),
        ("VoteRequest core -> frame", lambda: send_request(CORE_VOTE_REQUEST), len(vote_wire)),
        ("VoteRequest frame -> core", lambda: receive_request(vote_wire), len(vote_wire)),
        ("FetchResponse 1 MiB core -> frame", send_response, len(response_wire)),
        (
            "FetchResponse 1 MiB frame -> core",
            lambda: receive_response(response_wire),
            len(response_wire),
        ),
    ]


def main() -> None:
    fetch_body = encode_response(ApiKey.FETCH, 17, FETCH_RESPONSE)
    fetch_payload = encode_response_payload(ApiKey.FETCH, 17, 9, FETCH_RESPONSE)
    vote_header = RequestHeader(ApiKey.VOTE, 2, 1, "node-1")
    vote_payload = encode_request_payload(vote_header, VOTE_REQUEST)

    def fetch_round_trip() -> object:
        return decode_response(ApiKey.FETCH, 17, encode_response(ApiKey.FETCH, 17, FETCH_RESPONSE))

    def fetch_payload_round_trip() -> object:
        wire = encode_response_payload(ApiKey.FETCH, 17, 9, FETCH_RESPONSE, framed=True)
        return decode_response_payload(ApiKey.FETCH, 17, memoryview(wire)[4:])

    def vote_round_trip() -> object:
        return decode_request_payload(encode_request_payload(vote_header, VOTE_REQUEST))

    cases: list[tuple[str, Callable[[], object], int]] = [
        (
            "FetchResponse v17 1 MiB records: encode",
            lambda: encode_response(ApiKey.FETCH, 17, FETCH_RESPONSE),
            len(fetch_body),
        ),
        (
            "FetchResponse v17 1 MiB records: decode",
            lambda: decode_response(ApiKey.FETCH, 17, fetch_body),
            len(fetch_body),
        ),
        ("FetchResponse v17 1 MiB records: encode+decode", fetch_round_trip, len(fetch_body)),
        (
            "FetchResponse v17 framed + header: encode+decode",
            fetch_payload_round_trip,
            len(fetch_payload),
        ),
        (
            "VoteRequest v2 + header: encode",
            lambda: encode_request_payload(vote_header, VOTE_REQUEST),
            len(vote_payload),
        ),
        (
            "VoteRequest v2 + header: decode",
            lambda: decode_request_payload(vote_payload),
            len(vote_payload),
        ),
        ("VoteRequest v2 + header: encode+decode", vote_round_trip, len(vote_payload)),
        *translation_cases(),
    ]
    print(f"{'case':<50} {'msgs/s':>12} {'MiB/s':>10}  (median of {RUNS} runs)")
    for name, op, size in cases:
        r = median_rate(op)
        print(f"{name:<50} {r:>12,.0f} {r * size / (1 << 20):>10,.1f}")


if __name__ == "__main__":
    main()
