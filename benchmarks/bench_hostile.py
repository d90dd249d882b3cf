"""A node under hostile load: its memory beside its idle self, and its service after fuzzing.

One real `kraft start` process on 127.0.0.1 (one voter, default limits unless overridden):

- RSS idle, then with 1,000 open connections, then while 200 connections each hold part of a
  large request (the flood is bounded by queued.max.request.bytes, 64 MiB by default);
- N fuzzed frames (valid requests of every API with bytes flipped, cut, or grown), then a
  check that the node still answers and still commits.

Run: python -m benchmarks.bench_hostile [--frames 200000] [--connections 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import socket
import struct
import tempfile
import time
from pathlib import Path

from kraft.client import Address, append, node_info
from kraft.cluster import LocalCluster, free_ports
from kraft.core.messages import FetchRequest, VoteRequest
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import ApiKey, RequestHeader, encode_request_payload
from kraft.protocol.client_api import KRAFT_APPEND_KEY, encode_client_request
from kraft.protocol.rpc import describe_quorum_request, request_to_wire

MiB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def _seed_frames(cluster_id: str) -> list[bytes]:
    """One valid request of each API the listener decodes, framed."""
    frames = []
    cid = ClusterId(cluster_id)
    for req in (
        VoteRequest(cid, ReplicaKey(NodeId(7)), Epoch(3), Epoch(0), Offset(0)),
        FetchRequest(cid, ReplicaKey(NodeId(7)), Epoch(1), Offset(0), Epoch(0), Offset(0)),
    ):
        key, version, body = request_to_wire(req)
        frames.append(
            encode_request_payload(RequestHeader(key, version, 1, "fuzz"), body, framed=True)
        )
    frames.append(
        encode_request_payload(
            RequestHeader(ApiKey.DESCRIBE_QUORUM, 2, 2, "fuzz"),
            describe_quorum_request(),
            framed=True,
        )
    )
    frames.append(
        encode_request_payload(RequestHeader(ApiKey.API_VERSIONS, 3, 3, "fuzz"), {}, framed=True)
    )
    frames.append(
        encode_client_request(
            RequestHeader(KRAFT_APPEND_KEY, 0, 4, "fuzz"),
            {"timeout_ms": 100, "records": [{"value": b"fuzz"}]},
        )
    )
    return frames


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # flip bytes anywhere past the size prefix
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(4, len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # cut the body, keep the claimed size honest
        cut = rng.randrange(6, len(b))
        b = b[:cut]
        b[0:4] = struct.pack(">i", len(b) - 4)
    elif kind == 2:  # grow the body with noise
        b += rng.randbytes(rng.randint(1, 64))
        b[0:4] = struct.pack(">i", len(b) - 4)
    else:  # random small values in the header fields
        i = rng.randrange(4, min(len(b), 14))
        b[i] = rng.randrange(256)
    return bytes(b)


def fuzz(address: Address, cluster_id: str, frames: int, seed: int = 1) -> tuple[int, int]:
    """Send `frames` mutated frames; (frames sent, connections the node closed)."""
    rng = random.Random(seed)
    seeds = _seed_frames(cluster_id)
    sent = closed = 0
    sock: socket.socket | None = None
    while sent < frames:
        if sock is None:
            sock = socket.create_connection((address.host, address.port), timeout=2.0)
            sock.setblocking(False)
        try:
            sock.sendall(_mutate(rng, rng.choice(seeds)))
            sent += 1
            if sent % 64 == 0:  # drain answers so the node's writes never block
                try:
                    while sock.recv(1 << 16):
                        pass
                except BlockingIOError:
                    pass
        except (BlockingIOError, InterruptedError):
            time.sleep(0.001)
        except OSError:
            closed += 1
            sock.close()
            sock = None
        if sent and sent % 20000 == 0:
            print(f"  fuzzed {sent} frames ({closed} connections closed by the node)")
    if sock is not None:
        sock.close()
    return sent, closed


def hold_connections(address: Address, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection((address.host, address.port), timeout=5.0)
        out.append(s)
    return out


def partial_flood(address: Address, n: int, each: int) -> list[socket.socket]:
    """`n` connections, each holding `each` bytes of a request it never finishes."""
    out = []
    for _ in range(n):
        s = socket.create_connection((address.host, address.port), timeout=5.0)
        with contextlib.suppress(OSError):
            s.sendall(struct.pack(">i", 8 * MiB - 16) + b"\x00" * each)
        out.append(s)
    return out


def serves(address: Address) -> bool:
    try:
        asyncio.run(node_info(address, timeout_s=5.0))
        asyncio.run(append([address], [b"after"], timeout_ms=10_000))
        return True
    except Exception:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=200_000, help="fuzzed frames to send")
    ap.add_argument("--connections", type=int, default=1000, help="idle connections to hold")
    ap.add_argument("--flood", type=int, default=200, help="connections in the partial flood")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp), free_ports(1))
        cluster.format()
        cluster.start()
        address = cluster.addresses[1]
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not serves(address):
                time.sleep(0.2)
            pid = cluster.pid(1)
            assert pid is not None
            rows: list[tuple[str, str]] = []
            idle = rss_bytes(pid)
            rows.append(("RSS, idle", f"{idle / MiB:.1f} MiB"))
            held = hold_connections(address, args.connections)
            time.sleep(1.0)
            with_conns = rss_bytes(pid)
            rows.append(
                (
                    f"RSS, {args.connections} open connections",
                    f"{with_conns / MiB:.1f} MiB (+{(with_conns - idle) / MiB:.1f})",
                )
            )
            for s in held:
                s.close()
            time.sleep(1.0)
            flood = partial_flood(address, args.flood, MiB)
            time.sleep(2.0)
            flooded = rss_bytes(pid)
            rows.append(
                (
                    f"RSS, {args.flood} connections x 1 MiB of an unfinished request",
                    f"{flooded / MiB:.1f} MiB (+{(flooded - idle) / MiB:.1f}; cap 64 MiB)",
                )
            )
            for s in flood:
                s.close()
            started = time.perf_counter()
            sent, closed = fuzz(address, cluster.cluster_id, args.frames)
            took = time.perf_counter() - started
            ok = serves(address)
            rows.append(
                (
                    "fuzzed frames",
                    f"{sent} in {took:.0f} s, {closed} connections closed by the node; "
                    f"still serving: {'yes' if ok else 'NO'}",
                )
            )
            rows.append(("RSS after fuzzing", f"{rss_bytes(pid) / MiB:.1f} MiB"))
        finally:
            cluster.stop_all()
    print("| figure | result |")
    print("| --- | --- |")
    for name, value in rows:
        print(f"| {name} | {value} |")


if __name__ == "__main__":
    main()
