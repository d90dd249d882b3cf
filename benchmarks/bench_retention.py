"""Disk bytes under a long run with a bounded key set, with Kafka's retention and without:
`python -m benchmarks.bench_retention` prints the figures; `figures()` feeds benchmarks.run.

A real 3-node cluster on loopback (`kraft start` subprocesses, kraft.cluster.LocalCluster)
with Kafka's snapshot and retention settings scaled down (SETTINGS: a snapshot every
SNAPSHOT_BYTES committed bytes, `metadata.max.retention.bytes` RETENTION_BYTES, segments of
SEGMENT_BYTES). CLIENTS concurrent clients append batches of BATCH keyed records of
VALUE_BYTES bytes to a set of KEYS keys until WRITE_BYTES bytes of records were written
in the run; a sampler reads the size of every node's data directory every SAMPLE_S. Each run
reports the largest data directory seen (over the nodes and the run) and its final size.

Beside it, in the same process: the same writes to a cluster whose retention is off
(`metadata.max.retention.bytes=-1`, `metadata.max.retention.ms=-1`: snapshots are still
taken, nothing is deleted), where the data directory grows with everything written. Each
figure is the median of RUNS runs; the clusters live for all their runs, so the runs after
the first measure the steady state.
"""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.bench_cluster import kraft_cluster, wait_leader
from benchmarks.figure import Figure
from kraft.client import Address, Producer, append
from kraft.cluster import LocalCluster

RUNS = 3
KEYS = 1000
VALUE_BYTES = 100
BATCH = 100
CLIENTS = 8
WRITE_BYTES = 16 * 1024 * 1024
SEGMENT_BYTES = 256 * 1024
SNAPSHOT_BYTES = 1024 * 1024
RETENTION_BYTES = 4 * 1024 * 1024
SAMPLE_S = 0.05
MB = 1e6

SETTINGS = {
    "metadata.log.segment.bytes": str(SEGMENT_BYTES),
    "metadata.log.max.record.bytes.between.snapshots": str(SNAPSHOT_BYTES),
    "metadata.log.max.snapshot.interval.ms": "0",
    "metadata.max.retention.bytes": str(RETENTION_BYTES),
    "metadata.max.retention.ms": "-1",
}
NO_RETENTION = {**SETTINGS, "metadata.max.retention.bytes": "-1"}

# A snapshot of the whole key set (each record with its framing), generously.
STATE_BYTES = KEYS * (VALUE_BYTES + 64) + 4096
# What retention should keep a data directory under (as tests/integration/test_node_retention
# derives it): the limit, two snapshot intervals, two segments, two snapshots, small files.
BOUND = RETENTION_BYTES + 2 * SNAPSHOT_BYTES + 2 * SEGMENT_BYTES + 2 * STATE_BYTES + (1 << 20)


@dataclass(frozen=True, slots=True)
class RunDisk:
    written: int
    start_bytes: int
    peak_bytes: int
    final_bytes: int

    @property
    def growth(self) -> int:
        return self.final_bytes - self.start_bytes


def _dir_bytes(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            pass  # deleted while listed
    return total


def _largest(cluster: LocalCluster) -> int:
    return max(_dir_bytes(cluster.data_dir(n)) for n in cluster.node_ids)


async def _write(addresses: list[Address], run: int) -> int:
    """WRITE_BYTES bytes of keyed records over KEYS keys; the bytes written."""
    written = 0

    async def client(c: int) -> None:
        nonlocal written
        producer = Producer()
        i = 0
        while written < WRITE_BYTES:
            batch = [
                (
                    f"key-{(c * 7919 + i * BATCH + j) % KEYS:06d}".encode(),
                    f"{run}-{c}-{i}".encode().ljust(VALUE_BYTES, b"."),
                )
                for j in range(BATCH)
            ]
            await append(addresses, batch, producer=producer)
            written += sum(len(k) + len(v) for k, v in batch)
            i += 1

    await asyncio.gather(*(client(c) for c in range(CLIENTS)))
    return written


def measure_run(cluster: LocalCluster, run: int) -> RunDisk:
    asyncio.run(wait_leader(cluster, list(cluster.node_ids)))
    start = _largest(cluster)
    peak = start
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(SAMPLE_S):
            peak = max(peak, _largest(cluster))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        written = asyncio.run(_write(list(cluster.addresses.values()), run))
    finally:
        stop.set()
        sampler.join()
    final = _largest(cluster)
    return RunDisk(written, start, max(peak, final), final)


def measure(settings: dict[str, str], runs: int = RUNS) -> list[RunDisk]:
    with kraft_cluster(settings) as cluster:
        out = []
        for r in range(runs):
            got = measure_run(cluster, r)
            print(f"[bench_retention] {settings['metadata.max.retention.bytes']}: {got}")
            out.append(got)
            time.sleep(0.2)
        return out


def figures(runs: int = RUNS) -> list[Figure]:
    kept = measure(SETTINGS, runs)
    grown = measure(NO_RETENTION, runs)
    written = statistics.median(r.written for r in kept)
    peak = statistics.median(r.peak_bytes for r in kept)
    final = statistics.median(r.final_bytes for r in kept)
    growth = statistics.median(r.growth for r in grown)
    what = (
        f"{written / MB:.0f} MB of {VALUE_BYTES}-byte values to {KEYS:,} keys per run; "
        f"retention {RETENTION_BYTES >> 20} MiB, a snapshot per {SNAPSHOT_BYTES >> 20} MiB, "
        f"{SEGMENT_BYTES >> 10} KiB segments"
    )
    return [
        Figure(
            f"largest data directory during a run, retention on ({what})",
            peak / MB,
            "MB",
            f"<= {BOUND / MB:.1f} MB (retention + 2 snapshot intervals + 2 segments + 2 states)",
            peak <= BOUND,
            "growth of the data directory over the same writes, retention off",
            growth / MB,
        ),
        Figure(
            "data directory at the end of a run, retention on",
            final / MB,
            "MB",
            "(informative: Kafka's retention is a soft limit)",
            None,
            "metadata.max.retention.bytes",
            RETENTION_BYTES / MB,
        ),
    ]


def main() -> None:
    for f in figures():
        ratio = f"{f.ratio:.2f}x" if f.ratio is not None else ""
        print(f"{f.name}: {f.value:.2f} {f.unit}  ({f.baseline_name}: {f.baseline_value}) {ratio}")


if __name__ == "__main__":
    main()
