"""Snapshot benchmarks next to their baselines: `python -m benchmarks.bench_snapshot`.

`figures()` feeds benchmarks.run (`make bench`); each figure is a median beside its baseline
measured in the same run, with the ratio.

- Write and load. The key-value store holding KEYS keys of VALUE_BYTES-byte values is written
  as a KIP-630 checkpoint file (kraft.storage.snapshot_directory.write_state_snapshot: records
  in key order, batches encoded with CRC-32C, `.part` + fsync + rename + directory fsync) and
  loaded back into a fresh store (load_state_snapshot: the whole file validated, then read
  again and applied), each in MB/s of the checkpoint file. Beside them, in the same process on
  the same filesystem: the same bytes written raw (1 MiB os.write calls, fsync, rename,
  directory fsync) and read raw (1 MiB reads). Medians of RUNS runs.
- FetchSnapshot transfer, in GB/s of a TRANSFER_BYTES checkpoint file over loopback TCP: the
  leader's and the follower's wire paths of the node, one 1 MiB request in flight as a follower
  has (the request encoded, decoded and translated; the chunk a view of the mapped file,
  written as the frame's prefix, the view and its suffix; the answer framed, decoded and
  translated; the chunk written into the `.part` file at its position). The core's step is
  left out. Baseline: os.sendfile of the same file over a loopback TCP connection to a reader
  that writes it into a file (the machine's limit for moving these bytes between processes).
- Catch-up of a wiped node: a 3-node cluster (`kraft start` subprocesses, LocalCluster) holds
  CATCH_UP_BYTES of key-value state, each key written CATCH_UP_WRITES times (so the log is
  that many times the state, as under updates to a bounded key set); a stopped follower is
  wiped and
  re-formatted, then started; the time until it answers KraftGet for the last key written with
  its value. From a snapshot (the leader snapshotted after the writes; the empty follower is
  sent it) beside replaying the same state from the log (no snapshots: it fetches the log
  from offset 0 and applies it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.figure import Figure
from kraft.app.kv import KeyValueStore
from kraft.app.port import CommittedBatch
from kraft.client import Address, ClientError, append, node_info
from kraft.client_read import get
from kraft.cluster import LocalCluster, free_ports
from kraft.core.messages import FetchSnapshotRequest, FetchSnapshotResponse
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.protocol import (
    ApiKey,
    FrameDecoder,
    RequestHeader,
    decode_request_payload,
    decode_response_payload,
    encode_request_payload,
)
from kraft.protocol.rpc import request_from_wire, request_to_wire, response_from_wire
from kraft.protocol.rpc import response_to_wire as core_response_to_wire
from kraft.protocol.rpc.fetch_snapshot import fetch_snapshot_frame
from kraft.server.snapshot_store import FileSnapshots
from kraft.storage.durable import fsync_dir
from kraft.storage.segmented_log import LOG_DIR_NAME
from kraft.storage.snapshot_directory import load_state_snapshot, write_state_snapshot
from kraft.storage.snapshot_files import (
    CheckpointWriter,
    SnapshotFileKind,
    checkpoint_path,
    parse_snapshot_path,
)

KEYS = 100_000
VALUE_BYTES = 100
RUNS = 5
CHUNK = 1 << 20
BENCH_ROOT = Path(__file__).resolve().parent.parent / "out" / "bench-tmp"
MIB = 1 << 20
# FetchSnapshot transfer: the checkpoint file moved, in 1 MiB chunks (a follower's fetch size).
TRANSFER_BYTES = 128 * MIB
TRANSFER_VALUE = 64 * 1024
TRANSFER_RUNS = 5
# Catch-up of a wiped node: the state, each key written CATCH_UP_WRITES times, in appends of
# CATCH_UP_PER_APPEND records.
CATCH_UP_BYTES = 16 * MIB
CATCH_UP_WRITES = 4
CATCH_UP_VALUE = 1024
CATCH_UP_PER_APPEND = 100
CATCH_UP_RUNS = 3
# What the follower reads from its socket at a time (kraft.server.peers does the same).
READ_BYTES = 1 << 16
_CLUSTER = ClusterId("bench-snapshot-transfer")
_SID = OffsetAndEpoch(Epoch(1), Offset(1_000_000))
_FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.fetch.max.wait.ms": "200",
}


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


# --------------------------------------------------------------------------- FetchSnapshot


def write_transfer_snapshot(directory: Path, size: int = TRANSFER_BYTES) -> Path:
    """A checkpoint file of about `size` bytes (64 KiB values), written streamed."""
    with CheckpointWriter(directory, _SID, timestamp_ms=0, last_contained_log_timestamp=0) as w:
        for i in range(size // TRANSFER_VALUE):
            w.append([(f"key-{i:08d}".encode(), os.urandom(TRANSFER_VALUE))])
        return w.freeze()


async def _serve_fetch_snapshot(directory: Path, sock: socket.socket) -> None:
    """The leader's wire path of FetchSnapshot (kraft.server.inbound without the core's step)."""
    files = FileSnapshots(directory)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(16 * MIB)
        while data := await reader.read(1 << 16):
            for payload in decoder.feed(data):
                header, body = decode_request_payload(payload)
                req = request_from_wire(
                    header.api_key, header.api_version, body, local_cluster_id=_CLUSTER
                )
                assert isinstance(req, FetchSnapshotRequest)
                size = files.size(req.snapshot_id)
                assert size is not None
                chunk = files.read(req.snapshot_id, req.position, req.max_bytes)
                resp = FetchSnapshotResponse(
                    ErrorCode.NONE, NodeId(1), Epoch(1), req.snapshot_id, size, req.position, chunk
                )
                wire = core_response_to_wire(resp, ApiKey.FETCH_SNAPSHOT, header.api_version)
                frame = fetch_snapshot_frame(wire, header.api_version, header.correlation_id, chunk)
                for part in frame.parts():
                    writer.write(part)
        writer.close()

    server = await asyncio.start_server(serve, sock=sock)
    async with server:
        await server.serve_forever()


def _leader_process(directory: Path, sock: socket.socket) -> None:
    asyncio.run(_serve_fetch_snapshot(directory, sock))


async def _fetch_snapshot(port: int, follower: FileSnapshots, size: int) -> None:
    """The follower's wire path (kraft.server.peers, the driver's WriteSnapshotChunk)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    decoder = FrameDecoder(16 * MIB)
    position, correlation = 0, 0
    replica = ReplicaKey(NodeId(2))
    while position < size:
        correlation += 1
        req = FetchSnapshotRequest(_CLUSTER, replica, Epoch(1), _SID, position, CHUNK)
        key, version, body = request_to_wire(req)
        header = RequestHeader(key, version, correlation, "bench")
        writer.write(encode_request_payload(header, body, framed=True))
        frames: list[bytes] = []
        while not frames:
            data = await reader.read(READ_BYTES)
            assert data, "the leader closed the connection"
            frames = decoder.feed(data)
        corr, answer = decode_response_payload(key, version, frames[0])
        assert corr == correlation
        resp = response_from_wire(key, version, answer)
        assert isinstance(resp, FetchSnapshotResponse) and resp.position == position
        follower.write_chunk(_SID, position, resp.chunk)
        position += len(resp.chunk)
    writer.close()


def transfer_rate(directory: Path, out: Path) -> float:
    """GB/s of one whole FetchSnapshot transfer, leader in a child process."""
    size = checkpoint_path(directory, _SID).stat().st_size
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    leader = multiprocessing.get_context("fork").Process(
        target=_leader_process, args=(directory, sock), daemon=True
    )
    leader.start()
    sock.close()
    try:
        follower = FileSnapshots(out)
        start = time.perf_counter()
        asyncio.run(_fetch_snapshot(port, follower, size))
        elapsed = time.perf_counter() - start
    finally:
        leader.terminate()
        leader.join()
    assert follower.part_path(_SID).stat().st_size == size
    follower.discard(_SID)
    return size / elapsed / 1e9


def sendfile_rate(path: Path, out: Path) -> float:
    """GB/s of os.sendfile of `path` over loopback TCP to a reader writing it into a file."""
    size = path.stat().st_size
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    received = [0]

    def receive() -> None:
        conn, _ = server.accept()
        fd = os.open(out / "sendfile.out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        try:
            while n := conn.recv_into(buf):
                chunk = view[:n]
                while chunk:
                    chunk = chunk[os.write(fd, chunk) :]
                received[0] += n
        finally:
            os.close(fd)
            conn.close()

    thread = threading.Thread(target=receive)
    thread.start()
    with socket.create_connection(("127.0.0.1", port)) as client, open(path, "rb") as f:
        start = time.perf_counter()
        sent = 0
        while sent < size:
            sent += os.sendfile(client.fileno(), f.fileno(), sent, size - sent)
        client.shutdown(socket.SHUT_WR)
        thread.join()
        elapsed = time.perf_counter() - start
    server.close()
    assert received[0] == size
    (out / "sendfile.out").unlink()
    return size / elapsed / 1e9


@dataclass(frozen=True)
class TransferRates:
    size_bytes: int
    fetch_snapshot_gb_s: float
    sendfile_gb_s: float


def measure_transfer(runs: int = TRANSFER_RUNS, size: int = TRANSFER_BYTES) -> TransferRates:
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-transfer-", dir=BENCH_ROOT))
    try:
        leader, follower = root / "leader", root / "follower"
        follower.mkdir()
        path = write_transfer_snapshot(leader, size)
        kraft, raw = [], []
        for _ in range(runs):  # alternated, so that both see the same machine
            kraft.append(transfer_rate(leader, follower))
            raw.append(sendfile_rate(path, follower))
        return TransferRates(path.stat().st_size, statistics.median(kraft), statistics.median(raw))
    finally:
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- catch-up


def _poll(what: str, check: Callable[[], object], timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark: timed out waiting for {what}")
        time.sleep(0.02)


def _value_on(address: Address, key: bytes) -> bytes | None:
    try:
        return asyncio.run(get(address, key, timeout_s=2.0)).value
    except (ClientError, OSError):
        return None


def _log_start(address: Address) -> int:
    try:
        return asyncio.run(node_info(address, timeout_s=2.0)).log_start_offset
    except (ClientError, OSError):
        return -1


async def _write_state(bootstrap: list[Address], size: int, writes: int = 1) -> Offset:
    last = Offset(-1)
    per = CATCH_UP_PER_APPEND
    for _ in range(writes):
        for i in range(size // (CATCH_UP_VALUE * per)):
            records = [
                (f"key-{i:06d}-{j:03d}".encode(), os.urandom(CATCH_UP_VALUE)) for j in range(per)
            ]
            last = (await append(bootstrap, records)).last_offset
    return last


@contextlib.contextmanager
def _cluster(root: Path, snapshots: bool) -> Iterator[LocalCluster]:
    overrides = {
        **_FAST,
        "metadata.log.max.record.bytes.between.snapshots": str(1 << 40),
        # With snapshots: one at most every 500 ms, so one follows the writes.
        "metadata.log.max.snapshot.interval.ms": "500" if snapshots else "0",
    }
    if snapshots:
        # The log start follows each snapshot at once: retention by size keeps the snapshots
        # and the log below them up to 100 MiB, and the leader's log start stayed below the
        # last write (the poll for it timed out).
        overrides["metadata.max.retention.bytes"] = "0"
    cluster = LocalCluster(root, free_ports(3), overrides=overrides)
    cluster.format()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop_all()


def catch_up_seconds(
    root: Path, *, snapshots: bool, size: int = CATCH_UP_BYTES, writes: int = CATCH_UP_WRITES
) -> float:
    """Seconds from the start of a wiped, re-formatted node to its answer of the last value."""
    with _cluster(root, snapshots) as cluster:
        victim = cluster.node_ids[-1]
        bootstrap = [cluster.addresses[n] for n in cluster.node_ids[:-1]]
        asyncio.run(_write_state(bootstrap, MIB))  # a leader, and the victim has followed
        cluster.stop(victim)
        shutil.rmtree(cluster.data_dir(victim))
        cluster.format()
        last = asyncio.run(_write_state(bootstrap, size, writes))
        if snapshots:
            time.sleep(0.6)  # past the snapshot interval: the next commit snapshots it all
        key, value = b"the-last-key", os.urandom(CATCH_UP_VALUE)
        last = asyncio.run(append(bootstrap, [(key, value)])).last_offset
        if snapshots:
            # The leader holds a snapshot of everything (its log start moved past it all).
            _poll(
                "the leader's log start",
                lambda: any(_log_start(a) > last for a in bootstrap),
            )
        start = time.perf_counter()
        cluster.start(victim)
        _poll("the wiped node's value", lambda: _value_on(cluster.addresses[victim], key) == value)
        elapsed = time.perf_counter() - start
        if snapshots:
            files = [
                p
                for p in map(
                    parse_snapshot_path, (cluster.data_dir(victim) / LOG_DIR_NAME).iterdir()
                )
                if p is not None and p.kind is SnapshotFileKind.COMPLETE
            ]
            assert files, "the wiped node did not install a snapshot"
        return elapsed


@dataclass(frozen=True)
class CatchUpTimes:
    state_bytes: int
    writes: int
    from_snapshot_s: float
    from_log_s: float


def measure_catch_up(
    runs: int = CATCH_UP_RUNS, size: int = CATCH_UP_BYTES, writes: int = CATCH_UP_WRITES
) -> CatchUpTimes:
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    snap: list[float] = []
    replay: list[float] = []
    for i in range(runs):  # alternated, so that both see the same machine
        for snapshots, into in ((True, snap), (False, replay)):
            root = Path(tempfile.mkdtemp(prefix=f"bench-catch-up-{i}-", dir=BENCH_ROOT))
            try:
                into.append(catch_up_seconds(root, snapshots=snapshots, size=size, writes=writes))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    return CatchUpTimes(size, writes, statistics.median(snap), statistics.median(replay))


# --------------------------------------------------------------------------- figures


def figures() -> list[Figure]:
    r = run()
    what = f"{KEYS:,} keys, {r.size_bytes / 1e6:.1f} MB checkpoint"
    t = measure_transfer()
    c = measure_catch_up()
    state = (
        f"{c.state_bytes / MIB:.0f} MiB of state, each key written {c.writes} times: "
        f"{c.state_bytes * c.writes / MIB:.0f} MiB of log"
    )
    return [
        Figure(
            f"snapshot write: store to checkpoint file, fsync, rename ({what})",
            r.write_mb_s,
            "MB/s",
            "(informative)",
            None,
            "raw write + fsync + rename of the same bytes",
            r.raw_write_mb_s,
        ),
        Figure(
            f"snapshot load: validate whole file, then load into a store ({what})",
            r.load_mb_s,
            "MB/s",
            "(informative)",
            None,
            "raw read of the same bytes (page cache)",
            r.raw_read_mb_s,
        ),
        Figure(
            f"FetchSnapshot transfer, 1 MiB chunks over loopback, wire paths of leader and "
            f"follower ({t.size_bytes / MIB:.0f} MiB checkpoint)",
            t.fetch_snapshot_gb_s,
            "GB/s",
            "(informative)",
            None,
            "os.sendfile of the same file over loopback TCP into a file",
            t.sendfile_gb_s,
        ),
        Figure(
            f"catch-up of a wiped node from a snapshot, start to serving the last value ({state})",
            c.from_snapshot_s,
            "s",
            "(informative: lower is better)",
            None,
            "the same state replayed from the log (no snapshots)",
            c.from_log_s,
        ),
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["files", "transfer", "catch-up"], action="append")
    parser.add_argument("--runs", type=int, default=None, help="runs of each figure")
    parser.add_argument(
        "--writes", type=int, default=CATCH_UP_WRITES, help="catch-up: writes of each key"
    )
    parser.add_argument(
        "--state-mib", type=int, default=CATCH_UP_BYTES // MIB, help="catch-up: MiB of state"
    )
    args = parser.parse_args(argv)
    only = set(args.only or ["files", "transfer", "catch-up"])
    if "files" in only:
        r = run()
        print(f"checkpoint file: {KEYS} keys, {r.size_bytes / 1e6:.1f} MB")
        print(
            f"snapshot write  {r.write_mb_s:10.1f} MB/s   "
            f"raw write+fsync {r.raw_write_mb_s:10.1f} MB/s"
        )
        print(
            f"snapshot load   {r.load_mb_s:10.1f} MB/s   "
            f"raw read        {r.raw_read_mb_s:10.1f} MB/s"
        )
    if "transfer" in only:
        t = measure_transfer(args.runs or TRANSFER_RUNS)
        print(
            f"FetchSnapshot   {t.fetch_snapshot_gb_s:10.2f} GB/s   loopback sendfile "
            f"{t.sendfile_gb_s:6.2f} GB/s   ratio {t.fetch_snapshot_gb_s / t.sendfile_gb_s:.2f}x "
            f"({t.size_bytes / MIB:.0f} MiB)"
        )
    if "catch-up" in only:
        c = measure_catch_up(args.runs or CATCH_UP_RUNS, args.state_mib * MIB, args.writes)
        print(
            f"catch-up        {c.from_snapshot_s:10.2f} s from a snapshot   "
            f"{c.from_log_s:6.2f} s from the log   ratio {c.from_snapshot_s / c.from_log_s:.2f}x "
            f"({c.state_bytes / MIB:.0f} MiB of state, each key written {c.writes} times)"
        )


if __name__ == "__main__":
    main()
