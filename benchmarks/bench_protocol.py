"""Codec throughput: a FetchResponse carrying 1 MiB of records, and a VoteRequest.

Run: python -m benchmarks.bench_protocol   (prints messages/s, median of 5 runs)
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import Callable

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
    ]
    print(f"{'case':<50} {'msgs/s':>12} {'MiB/s':>10}  (median of {RUNS} runs)")
    for name, op, size in cases:
        r = median_rate(op)
        print(f"{name:<50} {r:>12,.0f} {r * size / (1 << 20):>10,.1f}")


if __name__ == "__main__":
    main()
