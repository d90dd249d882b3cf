"""Log benchmarks next to their raw-syscall baselines: `python -m benchmarks.bench_log`.

Durable append with group commit (one fsync per 1000-record batch) and the fetch path (1 MiB
reads at arbitrary offsets), each the median of 5 runs, in one process on one filesystem.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kraft.ids import Epoch, Offset
from kraft.records import encode_batch
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog

RECORDS = 1_000_000
RECORD_BYTES = 100
PER_BATCH = 1000
RUNS = 5
READ_BYTES = 1 << 20
READS = 200
BENCH_ROOT = Path(__file__).resolve().parent.parent / "out" / "bench-tmp"


def _values() -> list[bytes]:
    rng = random.Random(7)
    return [rng.randbytes(RECORD_BYTES) for _ in range(PER_BATCH)]


def encoded_batches(records: int = RECORDS) -> list[bytes]:
    values = _values()
    return [encode_batch(base, 1, values, timestamp_ms=0) for base in range(0, records, PER_BATCH)]


def median_of(runs: int, once: Callable[[Path], float], root: Path) -> float:
    results = []
    for i in range(runs):
        work = Path(tempfile.mkdtemp(prefix=f"run{i}-", dir=root))
        try:
            results.append(once(work))
        finally:
            shutil.rmtree(work)
    return statistics.median(results)


def append_as_follower_rate(batches: list[bytes], *, sync: bool = True) -> Callable[[Path], float]:
    def once(work: Path) -> float:
        log = SegmentedLog.open(work)
        start = time.perf_counter()
        for data in batches:
            log.append_as_follower(data)
            if sync:
                log.flush()
        elapsed = time.perf_counter() - start
        log.close()
        return len(batches) * PER_BATCH / elapsed

    return once


def append_as_leader_rate(batch_count: int) -> Callable[[Path], float]:
    values = _values()

    def once(work: Path) -> float:
        log = SegmentedLog.open(work)
        start = time.perf_counter()
        for _ in range(batch_count):
            log.append_as_leader(values, Epoch(1), timestamp_ms=0)
            log.flush()
        elapsed = time.perf_counter() - start
        log.close()
        return batch_count * PER_BATCH / elapsed

    return once


def raw_write_fdatasync_rate(batches: list[bytes], *, sync: bool = True) -> Callable[[Path], float]:
    def once(work: Path) -> float:
        fd = os.open(work / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        start = time.perf_counter()
        for data in batches:
            os.write(fd, data)
            if sync:
                os.fdatasync(fd)
        elapsed = time.perf_counter() - start
        os.close(fd)
        return len(batches) * PER_BATCH / elapsed

    return once


def fetch_rates(batches: list[bytes], root: Path) -> dict[str, float]:
    """GB/s of 1 MiB reads at random offsets: views, sendfile regions, and raw os.pread."""
    work = Path(tempfile.mkdtemp(prefix="fetch-", dir=root))
    try:
        log = SegmentedLog.open(work, segment_bytes=64 << 20)
        for data in batches[:600]:
            log.append_as_follower(data)
        log.flush()
        end = log.end_offset
        rng = random.Random(11)
        offsets = [Offset(rng.randrange(0, end - 20 * PER_BATCH)) for _ in range(READS)]
        (segment,) = (work / LOG_DIR_NAME).glob("*.log")
        seg_size = segment.stat().st_size
        positions = [rng.randrange(0, seg_size - READ_BYTES) for _ in range(READS)]
        devnull = os.open(os.devnull, os.O_WRONLY)
        raw_fd = os.open(segment, os.O_RDONLY)

        def view_copy() -> int:
            total = 0
            for off in offsets:
                result = log.read(off, READ_BYTES)
                total += len(bytes(result.data))  # touch every byte, as pread does
            return total

        def view_only() -> int:
            return sum(log.read(off, READ_BYTES).size for off in offsets)

        def sendfile() -> int:
            total = 0
            for off in offsets:
                for r in log.read_region(off, READ_BYTES).regions:
                    total += os.sendfile(devnull, r.fd, r.position, r.length)
            return total

        def pread() -> int:
            return sum(len(os.pread(raw_fd, READ_BYTES, pos)) for pos in positions)

        rates: dict[str, float] = {}
        for name, fn in (
            ("read() view + copy to bytes", view_copy),
            ("read() view (zero-copy, lookup only)", view_only),
            ("read_region() + os.sendfile to /dev/null", sendfile),
            ("baseline os.pread 1 MiB", pread),
        ):
            samples = []
            for _ in range(RUNS):
                start = time.perf_counter()
                moved = fn()
                samples.append(moved / (time.perf_counter() - start) / 1e9)
            rates[name] = statistics.median(samples)
        os.close(devnull)
        os.close(raw_fd)
        log.close()
        return rates
    finally:
        shutil.rmtree(work)


def main() -> None:
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-log-", dir=BENCH_ROOT))
    try:
        t0 = time.perf_counter()
        batches = encoded_batches()
        print(
            f"pre-encoded {len(batches)} batches of {PER_BATCH} x {RECORD_BYTES} B records "
            f"({sum(map(len, batches)) / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s"
        )
        print(f"durable append, one fsync per {PER_BATCH}-record batch, median of {RUNS}:")
        raw = median_of(RUNS, raw_write_fdatasync_rate(batches), root)
        follower = median_of(RUNS, append_as_follower_rate(batches), root)
        leader = median_of(RUNS, append_as_leader_rate(len(batches)), root)
        print(f"  baseline os.write + os.fdatasync : {raw:12,.0f} records/s")
        print(
            f"  append_as_follower + flush       : {follower:12,.0f} records/s "
            f"({follower / raw:.0%} of raw)"
        )
        print(
            f"  append_as_leader (encode) + flush: {leader:12,.0f} records/s "
            f"({leader / raw:.0%} of raw)"
        )
        raw_cpu = median_of(RUNS, raw_write_fdatasync_rate(batches, sync=False), root)
        follower_cpu = median_of(RUNS, append_as_follower_rate(batches, sync=False), root)
        print("same appends without fsync (the software path alone):")
        print(f"  baseline os.write                : {raw_cpu:12,.0f} records/s")
        print(
            f"  append_as_follower               : {follower_cpu:12,.0f} records/s "
            f"({follower_cpu / raw_cpu:.0%} of raw)"
        )
        print(f"fetch path, {READS} reads of 1 MiB at random offsets, median of {RUNS}:")
        for name, rate in fetch_rates(batches, root).items():
            print(f"  {name:42s}: {rate:6.2f} GB/s")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
