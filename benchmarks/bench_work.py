"""Work per committed request on the commit path, measured so that a busy machine does not move
it much: a fixed number of one-record appends (issue #17's small-append load) against a 3-node
kraft cluster on loopback, and what each server process spent on them.

`python -m benchmarks.bench_work [--clients 32] [--requests 200] [--rate R] [--profile DIR]`
prints, for
the leader and the followers separately: CPU milliseconds per committed record (utime + stime
from /proc, kraft.benchmarks.peers.procstat), fsyncs and core batches per committed record
(the counters each node logs when it stops), and the clients' median and p99 commit latency
and their own CPU per record (the load generator must not be the limit). Wall-clock figures
(latency, records/s) are only as good as the machine is quiet; CPU and counts per record are
the figures to compare between versions. With `--profile DIR` every node runs under cProfile
(KRAFT_PROFILE_DIR) and writes DIR/node-<id>.prof when it stops.

Each client is one connection with one append in flight (a closed loop, as
benchmarks.bench_cluster and benchmarks.bench_peers load it; read by callbacks, bench_cluster's
_Conn), and sends `requests` appends. The load and the nodes run on kraft.event_loop's loop
(uvloop when installed; KRAFT_EVENT_LOOP=asyncio, inherited by the nodes, for asyncio's); a
warm-up of `warmup` appends per client runs first and is not counted. In a closed loop a faster
server also batches less (fewer appends share a step and an fsync), so CPU per record is best
compared with `--rate R`: the same appends sent at R per second on a fixed schedule.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import bench_cluster as bc
from benchmarks.bench_peers import QUORUM
from benchmarks.peers import procstat
from kraft import event_loop
from kraft.client import Address
from kraft.cluster import LocalCluster, free_ports
from kraft.server.node import PROFILE_ENV

_STOPPED = re.compile(r"(\d+) batches stepped, (\d+) fsyncs")


@dataclass(frozen=True, slots=True)
class Load:
    records: int
    errors: int
    latencies_ms: list[float]
    wall_s: float
    client_cpu_s: float


async def fixed_load(address: Address, clients: int, requests: int, batch: int = 1) -> Load:
    """`clients` connections, each sending `requests` appends of `batch` records one after the
    other."""
    conns = [await bc._Conn.open(address) for _ in range(clients)]
    lat: list[float] = []
    errors = records = 0
    clock = time.perf_counter

    def counted() -> bc.OnAnswer:
        left = requests

        def again(now: float, sent: float, ok: bool) -> bool:
            nonlocal errors, records, left
            if ok:
                lat.append((now - sent) * 1000)
                records += batch
            else:
                errors += 1
            left -= 1
            return left > 0

        return again

    cpu0, t0 = time.process_time(), clock()
    await bc.keep_sending(conns, bc.append_frame(batch), counted)
    return Load(records, errors, lat, clock() - t0, time.process_time() - cpu0)


def _user_system(pid: int) -> tuple[float, float]:
    """utime and stime of a process, in seconds (procstat sums them)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return (0.0, 0.0)
    return int(rest[11]) / procstat._TICKS, int(rest[12]) / procstat._TICKS


def _counters(cluster: LocalCluster, node: int) -> tuple[int, int]:
    """(batches stepped, fsyncs) from the line a node logs when it stops."""
    found = _STOPPED.findall(cluster.log_path(node).read_text(encoding="utf-8", errors="replace"))
    if not found:
        return (0, 0)
    b, f = found[-1]
    return int(b), int(f)


async def paced_load(address: Address, clients: int, requests: int, rate: float) -> Load:
    """`clients * requests` one-record appends sent at `rate` per second on a fixed schedule
    (round robin over `clients` connections; latency from the scheduled send): the same
    arrivals for every version measured, so their CPU per record compares at equal load."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    got = await bc.open_loop(address, rate, 1, clients, 0.0, clients * requests / rate)
    wall = time.perf_counter() - t0
    # open_loop reports percentiles, not each latency: as many of each as give them back.
    top = got.requests // 50
    lat = [got.p50_ms] * (got.requests - top) + [got.p99_ms] * top
    return Load(got.requests, got.errors, lat, wall, time.process_time() - cpu0)


def run(
    clients: int,
    requests: int,
    warmup: int,
    profile: Path | None,
    rate: float = 0.0,
    batch: int = 1,
) -> dict[str, float]:
    if profile is not None:
        os.environ[PROFILE_ENV] = str(profile)
    root = Path(tempfile.mkdtemp(prefix="kraft-work-"))
    cluster = LocalCluster(
        root, free_ports(3), overrides={**bc.TIMEOUTS, **bc.NO_SNAPSHOTS, **QUORUM}
    )
    try:
        cluster.format()
        cluster.start()
        leader = event_loop.run(bc.wait_leader(cluster, list(cluster.node_ids)))
        address = cluster.addresses[leader]
        if warmup:
            event_loop.run(fixed_load(address, clients, warmup, batch))
        pids = {n: p for n in cluster.node_ids if (p := cluster.pid(n)) is not None}
        us0 = {n: _user_system(p) for n, p in pids.items()}
        if rate > 0:
            got = event_loop.run(paced_load(address, clients, requests, rate))
        else:
            got = event_loop.run(fixed_load(address, clients, requests, batch))
        us1 = {n: _user_system(p) for n, p in pids.items()}
        again = event_loop.run(bc.wait_leader(cluster, list(cluster.node_ids)))
        if again != leader:
            raise RuntimeError(f"the leader changed during the load ({leader} -> {again})")
        cluster.stop_all(timeout_s=20.0)
        counters = {n: _counters(cluster, n) for n in cluster.node_ids}
    finally:
        cluster.stop_all(timeout_s=5.0)
        shutil.rmtree(root, ignore_errors=True)
    n = max(got.records, 1)
    cpu0 = {x: sum(v) for x, v in us0.items()}
    cpu1 = {x: sum(v) for x, v in us1.items()}
    followers = [f for f in cluster.node_ids if f != leader]
    total = got.records + warmup * clients * batch
    lat = sorted(got.latencies_ms)
    return {
        "records": got.records,
        "errors": got.errors,
        "leader_cpu_ms_per_record": (cpu1[leader] - cpu0[leader]) * 1000 / n,
        "leader_sys_ms_per_record": (us1[leader][1] - us0[leader][1]) * 1000 / n,
        "follower_cpu_ms_per_record": statistics.mean(
            (cpu1[f] - cpu0[f]) * 1000 / n for f in followers
        ),
        "servers_cpu_ms_per_record": sum(cpu1[x] - cpu0[x] for x in pids) * 1000 / n,
        "client_cpu_ms_per_record": got.client_cpu_s * 1000 / n,
        # Over the whole run (warm-up included; the election's few are noise).
        "leader_fsyncs_per_record": counters[leader][1] / max(total, 1),
        "leader_batches_per_record": counters[leader][0] / max(total, 1),
        "follower_fsyncs_per_record": statistics.mean(counters[f][1] for f in followers)
        / max(total, 1),
        "p50_ms": lat[len(lat) // 2] if lat else float("nan"),
        "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
        "records_per_s_wall": got.records / got.wall_s if got.wall_s > 0 else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--requests", type=int, default=200, help="appends per client")
    parser.add_argument("--warmup", type=int, default=20, help="appends per client, uncounted")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--profile", type=Path, help="cProfile every node into this directory")
    parser.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="an open loop at this many appends/s instead of a closed loop (same arrivals for "
        "every version: CPU per record compares at equal load)",
    )
    parser.add_argument(
        "--batch", type=int, default=1, help="records per append (closed loop; 1: issue #17's)"
    )
    args = parser.parse_args(argv)
    results = [
        run(args.clients, args.requests, args.warmup, args.profile, args.rate, args.batch)
        for _ in range(args.runs)
    ]
    for key in results[0]:
        values = [r[key] for r in results]
        shown = ", ".join(f"{v:.4g}" for v in values)
        print(f"{key:28s} median {statistics.median(values):10.4g}   ({shown})")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
