"""Snapshot benchmarks next to their raw-I/O baselines: `python -m benchmarks.bench_snapshot`.

The key-value store holding KEYS keys of VALUE_BYTES-byte values is written as a KIP-630
checkpoint file (kraft.storage.snapshot_directory.write_state_snapshot: records in key order,
batches encoded with CRC-32C, `.part` + fsync + rename + directory fsync) and loaded back into
a fresh store (load_state_snapshot: the whole file validated, then read again and applied),
each in MB/s of the checkpoint file. Beside them, in the same process on the same filesystem:
the same bytes written raw (1 MiB os.write calls, fsync, rename, directory fsync) and read raw
(1 MiB reads). Medians of RUNS runs.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.ids import Epoch, Offset
from kraft.storage.durable import fsync_dir
from kraft.storage.snapshot_directory import load_state_snapshot, write_state_snapshot

KEYS = 100_000
VALUE_BYTES = 100
RUNS = 5
CHUNK = 1 << 20
BENCH_ROOT = Path(__file__).resolve().parent.parent / "out" / "bench-tmp"


def make_store(keys: int = KEYS) -> KeyValueStore:
    rng = random.Random(11)
    records = tuple((f"key-{i:010d}".encode(), rng.randbytes(VALUE_BYTES)) for i in range(keys))
    store = KeyValueStore()
    store.handle_commit(
        [CommittedBatch(Offset(0), Offset(keys - 1), Epoch(1), records, append_timestamp_ms=0)]
    )
    return store


def _median(runs: int, once: Callable[[], float]) -> float:
    return statistics.median(once() for _ in range(runs))


@dataclass(frozen=True)
class SnapshotRates:
    size_bytes: int
    write_mb_s: float
    raw_write_mb_s: float
    load_mb_s: float
    raw_read_mb_s: float


def measure(root: Path, keys: int = KEYS, runs: int = RUNS) -> SnapshotRates:
    store = make_store(keys)
    written: list[Path] = []

    def snapshot_write() -> float:
        work = Path(tempfile.mkdtemp(prefix="snap-", dir=root))
        start = time.perf_counter()
        path = write_state_snapshot(store, work, timestamp_ms=0, last_contained_log_timestamp=0)
        elapsed = time.perf_counter() - start
        written.append(path)
        return path.stat().st_size / elapsed / 1e6

    write = _median(runs, snapshot_write)
    path = written[-1]
    data = path.read_bytes()
    size = len(data)

    def raw_write() -> float:
        work = Path(tempfile.mkdtemp(prefix="raw-", dir=root))
        part, final = work / "raw.part", work / "raw"
        view = memoryview(data)
        start = time.perf_counter()
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for i in range(0, size, CHUNK):
                chunk = view[i : i + CHUNK]
                while chunk:
                    chunk = chunk[os.write(fd, chunk) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(part, final)
        fsync_dir(work)
        return size / (time.perf_counter() - start) / 1e6

    raw_w = _median(runs, raw_write)

    def load() -> float:
        fresh = KeyValueStore()
        start = time.perf_counter()
        load_state_snapshot(path, fresh)
        elapsed = time.perf_counter() - start
        assert len(fresh) == keys
        return size / elapsed / 1e6

    def raw_read() -> float:
        start = time.perf_counter()
        with open(path, "rb", buffering=0) as f:
            while f.read(CHUNK):
                pass
        return size / (time.perf_counter() - start) / 1e6

    load()  # the file in the page cache for both
    loaded = _median(runs, load)
    raw_r = _median(runs, raw_read)
    return SnapshotRates(size, write, raw_w, loaded, raw_r)


def run() -> SnapshotRates:
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-snapshot-", dir=BENCH_ROOT))
    try:
        return measure(root)
    finally:
        shutil.rmtree(root)


def main() -> None:
    r = run()
    print(f"checkpoint file: {KEYS} keys, {r.size_bytes / 1e6:.1f} MB")
    print(
        f"snapshot write  {r.write_mb_s:10.1f} MB/s   raw write+fsync {r.raw_write_mb_s:10.1f} MB/s"
    )
    print(
        f"snapshot load   {r.load_mb_s:10.1f} MB/s   raw read        {r.raw_read_mb_s:10.1f} MB/s"
    )


if __name__ == "__main__":
    main()
