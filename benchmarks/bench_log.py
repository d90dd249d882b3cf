"""Log benchmarks next to their raw-syscall baselines: `python -m benchmarks.bench_log`.

Durable append with group commit (one fsync per 1000-record batch) and the fetch path (1 MiB
reads at arbitrary offsets), each the median of 5 runs, in one process on one filesystem. A
leader's own batches are appended both ways side by side: fully validated as fetched bytes
(`append_as_follower`, what the node did before) and with the constant-time checks of
`append_leader_encoded` (what it does now), on disk and in memory.
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
from kraft.storage.memory_log import MemoryLog
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


def append_leader_encoded_rate(
    batches: list[bytes], *, sync: bool = True
) -> Callable[[Path], float]:
    """The same pre-encoded batches, performed as a leader's own AppendToLog effects."""

    def once(work: Path) -> float:
        log = SegmentedLog.open(work)
        start = time.perf_counter()
        for i, data in enumerate(batches):
            first = i * PER_BATCH
            log.append_leader_encoded(data, Offset(first), Offset(first + PER_BATCH - 1), Epoch(1))
            if sync:
                log.flush()
        elapsed = time.perf_counter() - start
        log.close()
        return len(batches) * PER_BATCH / elapsed

    return once


SMALL_BATCHES = 100_000


def memory_own_append_rates(batch_count: int = SMALL_BATCHES) -> dict[str, float]:
    """Batches/s of one-record leader batches into a MemoryLog (the simulator's case): fully
    validated vs leader-encoded, median of RUNS each, interleaved run by run."""
    values = _values()[:1]
    batches = [encode_batch(i, 1, values, timestamp_ms=0) for i in range(batch_count)]
    samples: dict[str, list[float]] = {"append_as_follower": [], "append_leader_encoded": []}
    for _ in range(RUNS):
        log = MemoryLog()
        start = time.perf_counter()
        for data in batches:
            log.append_as_follower(data)
        samples["append_as_follower"].append(batch_count / (time.perf_counter() - start))
        log = MemoryLog()
        start = time.perf_counter()
        for i, data in enumerate(batches):
            log.append_leader_encoded(data, Offset(i), Offset(i), Epoch(1))
        samples["append_leader_encoded"].append(batch_count / (time.perf_counter() - start))
    return {name: statistics.median(rates) for name, rates in samples.items()}


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
        own = median_of(RUNS, append_leader_encoded_rate(batches), root)
        own_cpu = median_of(RUNS, append_leader_encoded_rate(batches, sync=False), root)
        print("a leader's own batches (AppendToLog), fully validated vs leader-encoded:")
        print(f"  append_as_follower + flush       : {follower:12,.0f} records/s")
        print(
            f"  append_leader_encoded + flush    : {own:12,.0f} records/s ({own / follower:.2f}x)"
        )
        print(f"  append_as_follower, no fsync     : {follower_cpu:12,.0f} records/s")
        print(
            f"  append_leader_encoded, no fsync  : {own_cpu:12,.0f} records/s "
            f"({own_cpu / follower_cpu:.2f}x)"
        )
        mem = memory_own_append_rates()
        print(f"  MemoryLog, {SMALL_BATCHES:,} one-record batches:")
        for name, rate in mem.items():
            print(f"    {name:28s} : {rate:12,.0f} batches/s")
        print(f"fetch path, {READS} reads of 1 MiB at random offsets, median of {RUNS}:")
        for name, rate in fetch_rates(batches, root).items():
            print(f"  {name:42s}: {rate:6.2f} GB/s")
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
