"""Throughput of the record batch codec (records/s, median of 5 runs).

Run: python -m benchmarks.bench_records
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from kraft.records import decode_batch, encode_batch, iter_batches

RUNS = 5
VALUE_SIZE = 100
TIMESTAMP_MS = 1_700_000_000_000


def _values(batch: int) -> list[bytes]:
    return [os.urandom(VALUE_SIZE) for _ in range(batch)]


def _median_rate(n_records: int, run: Callable[[], None]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return n_records / statistics.median(times)


def _log(n_records: int, batch: int) -> bytes:
    values = _values(batch)
    return b"".join(
        encode_batch(i, 1, values, timestamp_ms=TIMESTAMP_MS) for i in range(0, n_records, batch)
    )


def bench_encode(n_records: int = 1_000_000, batch: int = 1000) -> float:
    """Records/s for encode_batch over n_records values of 100 bytes in batches of `batch`."""
    values = _values(batch)

    def run() -> None:
        for base in range(0, n_records, batch):
            encode_batch(base, 1, values, timestamp_ms=TIMESTAMP_MS)

    return _median_rate(n_records, run)


def bench_decode_validate(n_records: int = 1_000_000, batch: int = 1000) -> float:
    """Records/s for header parsing + CRC verification (what log recovery does)."""
    log = _log(n_records, batch)

    def run() -> None:
        count = 0
        for _, header in iter_batches(log, verify=True):
            count += header.records_count
        assert count == n_records

    return _median_rate(n_records, run)


def bench_decode_full(n_records: int = 200_000, batch: int = 1000) -> float:
    """Records/s for full per-record decoding (header, CRC, every Record object)."""
    log = _log(n_records, batch)
    positions = [pos for pos, _ in iter_batches(log)]

    def run() -> None:
        for pos in positions:
            decode_batch(log, pos)

    return _median_rate(n_records, run)


def main() -> None:
    print(f"encode          {bench_encode():>14,.0f} records/s")
    print(f"decode_validate {bench_decode_validate():>14,.0f} records/s")
    print(f"decode_full     {bench_decode_full():>14,.0f} records/s")


if __name__ == "__main__":
    main()
