"""A real 3-node cluster on loopback, beside PySyncObj doing the same work in the same run.

`python -m benchmarks.bench_cluster` prints the figures; `figures()` feeds benchmarks.run.

- Throughput: a closed loop of K clients, each with one KraftAppend of B 100-byte records in
  flight to the leader (`kraft start` subprocesses, kraft.cluster.LocalCluster); committed
  records per second, counted over a window after a warm-up.
- Latency: an open loop at half the measured maximum (requests sent on a fixed schedule, each
  latency counted from its scheduled time, so a stall is not hidden by the sender waiting).
- Failover: SIGKILL of the leader to the first append the survivors commit, over several
  trials, as a ratio to the election timeout.
- PySyncObj (benchmarks/peers/pysyncobj_node.py): three processes, a replicated list to which
  one @replicated call appends B values; the load runs inside the leader's process (PySyncObj
  has no client protocol), which spares it the client hop kraft pays. It keeps its log in
  memory and never fsyncs; kraft fsyncs every group commit.

Each figure is the median of RUNS runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from benchmarks.figure import Figure
from kraft import event_loop
from kraft.client import Address, ClientError, NodeInfo, node_info
from kraft.cluster import LocalCluster, free_ports
from kraft.protocol import FrameDecoder, MessageDict, RequestHeader
from kraft.protocol.client_api import (
    KRAFT_APPEND_KEY,
    encode_client_request,
)
from kraft.protocol.header import skip_tagged

RUNS = 3
RECORD_BYTES = 100
CLIENTS = 32  # K: concurrent closed-loop clients
BATCH = 200  # B: records per append request
WARMUP_S = 0.5
MEASURE_S = 2.0
FAILOVER_TRIALS = 5
ELECTION_TIMEOUT_MS = 500
TARGET_RATE = 200_000
TARGET_P99_MS = 20.0

# Kafka's defaults scaled down (fetch timeout = 2 x election timeout in Kafka).
TIMEOUTS = {
    "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
    "controller.quorum.fetch.timeout.ms": str(ELECTION_TIMEOUT_MS),
    "controller.quorum.election.backoff.max.ms": str(ELECTION_TIMEOUT_MS // 2),
    "controller.quorum.request.timeout.ms": "2000",
    "controller.quorum.fetch.max.wait.ms": "500",
}

# The replication figures measure the log, as the peers' do: no state machine applies the
# records and no snapshot is taken. What Kafka's default snapshot policy (every committed record
# applied to the key-value store, a snapshot per 20 MiB) costs is its own figure.
NO_SNAPSHOTS = {
    "metadata.log.max.record.bytes.between.snapshots": str(1 << 62),
    "metadata.log.max.snapshot.interval.ms": "0",
}

_CORRELATION_AT = 8  # size i32, api key i16, api version i16, then the correlation id
_CORR = struct.Struct(">i")
_ERROR = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class LoadResult:
    records_per_s: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    # Open loop only: how late the client sent, p99 over the window (a latency figure that
    # grows with this one measured the client, not the servers).
    send_lag_p99_ms: float = float("nan")

    def as_json(self) -> str:
        return json.dumps(
            {
                "records_per_s": self.records_per_s,
                "p50_ms": self.p50_ms,
                "p99_ms": self.p99_ms,
                "requests": self.requests,
                "errors": self.errors,
            }
        )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarise(
    done: list[tuple[float, float]], errors: int, batch: int, t0: float, t1: float
) -> LoadResult:
    """`done` holds (completion time, latency s) of successful requests; only those that
    completed inside [t0, t1) count."""
    window = [lat for t, lat in done if t0 <= t < t1]
    ms = [lat * 1000 for lat in window]
    return LoadResult(
        len(window) * batch / (t1 - t0),
        percentile(ms, 0.50),
        percentile(ms, 0.99),
        len(window),
        errors,
    )


def values(batch: int, tag: int = 0) -> list[bytes]:
    return [(b"%08d-%08d-" % (tag, i)).ljust(RECORD_BYTES, b"x") for i in range(batch)]


# ---------------------------------------------------------------------- the kraft load


def append_frame(batch: int, timeout_ms: int = 10_000) -> bytearray:
    """One framed KraftAppend of `batch` records; the correlation id is patched per send."""
    header = RequestHeader(KRAFT_APPEND_KEY, 0, 0, "bench")
    body: MessageDict = {"timeout_ms": timeout_ms, "records": [{"value": v} for v in values(batch)]}
    return bytearray(encode_client_request(header, body))


def _answer(payload: bytes) -> tuple[int, bool]:
    """(correlation id, success) of an unframed KraftAppend answer: its header (correlation id,
    tagged fields) and the body's first field, error_code; the rest is not decoded (the load
    generator must cost less than what it measures)."""
    (corr,) = _CORR.unpack_from(payload, 0)
    (error,) = _ERROR.unpack_from(payload, skip_tagged(memoryview(payload), _CORR.size))
    return corr, error == 0


class _Conn(asyncio.Protocol):
    """One pipelined connection, read by callbacks (the load generator shares the cores with
    what it measures: no task, future or stream per answer): requests go out tagged, answers
    are matched by tag. Each answer goes to `on_answer` (send time, success) when set, else is
    kept for `answers()`."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder(1 << 20)
        self.sent: dict[int, float] = {}
        self.corr = 0
        self.on_answer: Callable[[float, bool], None] | None = None
        self.on_lost: Callable[[BaseException], None] | None = None
        self._got: list[tuple[float, bool]] = []
        self._waiter: asyncio.Future[None] | None = None
        self.lost: BaseException | None = None

    @classmethod
    async def open(cls, address: Address) -> _Conn:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(cls, address.host, address.port)
        return conn

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def send(self, frame: bytearray, at: float) -> None:
        self.corr += 1
        _CORR.pack_into(frame, _CORRELATION_AT, self.corr)
        self.sent[self.corr] = at
        assert self.transport is not None
        self.transport.write(bytes(frame))

    def data_received(self, data: bytes) -> None:
        sent, on_answer = self.sent, self.on_answer
        for payload in self.decoder.feed(data):
            corr, ok = _answer(payload)
            if on_answer is not None:
                on_answer(sent.pop(corr), ok)
            else:
                self._got.append((sent.pop(corr), ok))
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = exc or ConnectionError("the node closed the connection")
        if self.on_lost is not None:
            self.on_lost(self.lost)
        self._wake()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def answers(self) -> Iterator[tuple[float, bool]]:
        """(send time, success) of the answers received since the last call (waits for one)."""
        while not self._got:
            if self.lost is not None:
                raise ConnectionError(f"the connection was lost: {self.lost}")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        got, self._got = self._got, []
        return iter(got)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


# What a connection does with each answer: (answer time, send time, ok) -> send again?
OnAnswer = Callable[[float, float, bool], bool]


async def keep_sending(conns: list[_Conn], frame: bytearray, each: Callable[[], OnAnswer]) -> None:
    """Every connection sends `frame`, then again straight from each answer while its own
    `each()` callback says so; returns once every connection has stopped."""
    clock = time.perf_counter
    finished = asyncio.get_running_loop().create_future()
    running = len(conns)

    def start(c: _Conn, again: OnAnswer) -> None:
        def answered(sent: float, ok: bool) -> None:
            nonlocal running
            now = clock()
            if again(now, sent, ok):
                c.send(frame, now)
                return
            running -= 1
            if not running and not finished.done():
                finished.set_result(None)

        def lost(e: BaseException) -> None:
            if not finished.done() and c.sent:
                finished.set_exception(ConnectionError(f"the node closed a connection: {e}"))

        c.on_answer = answered
        c.on_lost = lost
        c.send(frame, clock())

    try:
        for c in conns:
            start(c, each())
        await finished
    finally:
        for c in conns:
            c.close()


async def closed_loop(
    address: Address, clients: int, batch: int, warmup_s: float, measure_s: float
) -> LoadResult:
    """`clients` connections, each with one append of `batch` records always in flight."""
    conns = [await _Conn.open(address) for _ in range(clients)]
    done: list[tuple[float, float]] = []
    errors = 0
    t0 = time.perf_counter() + warmup_s
    t1 = t0 + measure_s

    def until_the_end() -> OnAnswer:
        def again(now: float, sent: float, ok: bool) -> bool:
            nonlocal errors
            if ok:
                done.append((now, now - sent))
            else:
                errors += 1
            return now < t1

        return again

    await keep_sending(conns, append_frame(batch), until_the_end)
    return summarise(done, errors, batch, t0, t1)


async def open_loop(
    address: Address, rate: float, batch: int, clients: int, warmup_s: float, measure_s: float
) -> LoadResult:
    """Appends of `batch` records sent at `rate` records/s on a fixed schedule, round robin
    over `clients` connections; latency counts from the scheduled send time."""
    frame = append_frame(batch)
    conns = [await _Conn.open(address) for _ in range(clients)]
    done: list[tuple[float, float]] = []
    errors = 0
    clock = time.perf_counter
    start = clock()
    t0 = start + warmup_s
    t1 = t0 + measure_s
    interval = batch / rate
    total = int((t1 - start) / interval)

    lags: list[float] = []

    def receive(sent: float, ok: bool) -> None:
        nonlocal errors
        now = clock()
        if ok:
            done.append((now, now - sent))
        else:
            errors += 1

    for c in conns:
        c.on_answer = receive
    try:
        i = 0
        while i < total:
            now = clock()
            while i < total and start + i * interval <= now:
                due = start + i * interval
                conns[i % clients].send(frame, due)
                if due >= t0:
                    lags.append((now - due) * 1000)
                i += 1
            await asyncio.sleep(max(0.0, start + i * interval - clock()))
        deadline = clock() + 5.0
        while any(c.sent for c in conns) and clock() < deadline:
            await asyncio.sleep(0.01)
    finally:
        for c in conns:
            c.close()
    return replace(summarise(done, errors, batch, t0, t1), send_lag_p99_ms=percentile(lags, 0.99))


# ---------------------------------------------------------------------- the kraft cluster


async def _info(address: Address) -> NodeInfo | None:
    try:
        return await node_info(address, timeout_s=0.5)
    except ClientError:
        return None


async def wait_leader(cluster: LocalCluster, nodes: list[int], timeout_s: float = 20.0) -> int:
    """The id of the node every listed node follows."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        infos = [await _info(cluster.addresses[n]) for n in nodes]
        leaders = [i for i in infos if i is not None and i.state == "Leader"]
        if len(leaders) == 1:
            lead = leaders[0]
            if all(i is not None and i.leader_id == lead.node_id for i in infos):
                return lead.node_id
        await asyncio.sleep(0.02)
    raise RuntimeError(f"no leader among nodes {nodes} within {timeout_s} s")


@contextlib.contextmanager
def kraft_cluster(extra: dict[str, str] | None = None) -> Iterator[LocalCluster]:
    root = Path(tempfile.mkdtemp(prefix="kraft-bench-"))
    cluster = LocalCluster(root, free_ports(3), overrides={**TIMEOUTS, **(extra or {})})
    try:
        cluster.format()
        cluster.start()
        yield cluster
    finally:
        cluster.stop_all(timeout_s=5.0)
        shutil.rmtree(root, ignore_errors=True)


async def _first_append(
    addresses: list[Address], frame: bytearray, started: float, give_up_s: float = 120.0
) -> float:
    """Seconds from `started` to the first append any of `addresses` commits."""
    while True:
        if time.perf_counter() - started > give_up_s:
            raise TimeoutError(f"no append committed by {addresses} within {give_up_s:.0f} s")
        for a in addresses:
            try:
                c = await asyncio.wait_for(_Conn.open(a), 0.2)
            except (OSError, TimeoutError):
                continue
            try:
                c.send(frame, time.perf_counter())
                ok = False
                with contextlib.suppress(TimeoutError, ConnectionError, OSError):
                    async with asyncio.timeout(5.0):
                        ok = any(success for _, success in await c.answers())
                if ok:
                    return time.perf_counter() - started
            finally:
                c.close()
        await asyncio.sleep(0.005)


async def kraft_failover(cluster: LocalCluster, trials: int) -> list[float]:
    """Seconds from SIGKILL of the leader to the first committed append, per trial."""
    frame = append_frame(1, timeout_ms=100)
    out = []
    nodes = list(cluster.node_ids)
    for _ in range(trials):
        # Steady state: a committed append (whichever node leads by then: a leader found a
        # moment ago may have lost an election since, and would refuse it for ever), and the
        # followers have fetched recently, as under load.
        await _first_append([cluster.addresses[n] for n in nodes], frame, time.perf_counter())
        await asyncio.sleep(0.2)
        leader = await wait_leader(cluster, nodes)
        survivors = [cluster.addresses[n] for n in nodes if n != leader]
        started = time.perf_counter()
        cluster.kill(leader)
        out.append(await _first_append(survivors, frame, started))
        cluster.start(leader)
    return out


# ---------------------------------------------------------------------- PySyncObj


class SyncObjCluster:
    """Three benchmarks/peers/pysyncobj_node.py processes, driven over their stdin/stdout."""

    def __init__(self, election_timeout_ms: int) -> None:
        self.ports = free_ports(3)
        self.election_timeout_ms = election_timeout_ms
        self.procs: dict[int, subprocess.Popen[str]] = {}

    def start(self, i: int) -> None:
        me = f"127.0.0.1:{self.ports[i]}"
        partners = [f"127.0.0.1:{p}" for j, p in enumerate(self.ports) if j != i]
        self.procs[i] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.peers.pysyncobj_node",
                "--self",
                me,
                "--election-timeout-ms",
                str(self.election_timeout_ms),
                *partners,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )

    def ask(self, i: int, command: dict[str, object]) -> dict[str, object]:
        p = self.procs[i]
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write(json.dumps(command) + "\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f"PySyncObj node {i} exited")
        answer: dict[str, object] = json.loads(line)
        return answer

    def alive(self) -> list[int]:
        return [i for i, p in self.procs.items() if p.poll() is None]

    def wait_leader(self, timeout_s: float = 20.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            alive = self.alive()
            states = {i: self.ask(i, {"cmd": "status"}) for i in alive}
            leaders = [i for i, s in states.items() if s["leader"]]
            if len(leaders) == 1 and all(s["ready"] and s["has_leader"] for s in states.values()):
                return leaders[0]
            time.sleep(0.02)
        raise RuntimeError("PySyncObj elected no leader")

    def kill(self, i: int) -> None:
        p = self.procs[i]
        p.kill()
        p.wait()

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


@contextlib.contextmanager
def syncobj_cluster() -> Iterator[SyncObjCluster]:
    c = SyncObjCluster(ELECTION_TIMEOUT_MS)
    try:
        for i in range(3):
            c.start(i)
        yield c
    finally:
        c.stop()


def _load_result(answer: dict[str, object]) -> LoadResult:
    def f(k: str) -> float:
        v = answer[k]
        assert isinstance(v, int | float)
        return float(v)

    return LoadResult(
        f("records_per_s"), f("p50_ms"), f("p99_ms"), int(f("requests")), int(f("errors"))
    )


def syncobj_failover(c: SyncObjCluster, trials: int) -> list[float]:
    out = []
    for _ in range(trials):
        leader = c.wait_leader()
        survivors = [i for i in c.alive() if i != leader]
        started = time.time()
        c.kill(leader)
        # Each survivor tries appends until one commits; the earliest success counts.
        for i in survivors:
            c.procs[i].stdin.write(json.dumps({"cmd": "probe"}) + "\n")  # type: ignore[union-attr]
            c.procs[i].stdin.flush()  # type: ignore[union-attr]
        at = []
        for i in survivors:
            line = c.procs[i].stdout.readline()  # type: ignore[union-attr]
            at.append(float(json.loads(line)["at"]))
        out.append(min(at) - started)
        c.start(leader)
    return out


# ---------------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class Results:
    kraft_max: list[LoadResult]
    kraft_half: list[LoadResult]
    kraft_failover_s: list[float]
    sync_max: list[LoadResult]
    sync_half: list[LoadResult]
    sync_failover_s: list[float]
    # Closed loop with Kafka's default snapshot policy (None: not measured).
    kraft_snapshots_max: list[LoadResult] | None = None


def _log(text: str) -> None:
    print(f"[bench_cluster] {text}", file=sys.stderr, flush=True)


def _median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _kraft_closed_loops(
    cluster: LocalCluster, runs: int, clients: int, batch: int, label: str
) -> list[LoadResult]:
    out = []
    for r in range(runs):
        leader = event_loop.run(wait_leader(cluster, list(cluster.node_ids)))
        got = event_loop.run(
            closed_loop(cluster.addresses[leader], clients, batch, WARMUP_S, MEASURE_S)
        )
        _log(f"{label} run {r}: {got}")
        out.append(got)
    return out


def measure(
    runs: int = RUNS,
    clients: int = CLIENTS,
    batch: int = BATCH,
    failover_trials: int = FAILOVER_TRIALS,
) -> Results:
    kraft_half: list[LoadResult] = []
    with kraft_cluster(NO_SNAPSHOTS) as cluster:
        nodes = list(cluster.node_ids)
        kraft_max = _kraft_closed_loops(cluster, runs, clients, batch, "kraft closed loop")
        half = _median([x.records_per_s for x in kraft_max]) / 2
        for r in range(runs):
            leader = event_loop.run(wait_leader(cluster, nodes))
            got = event_loop.run(
                open_loop(cluster.addresses[leader], half, batch, clients, WARMUP_S, MEASURE_S)
            )
            _log(f"kraft open loop at {half:,.0f}/s run {r}: {got}")
            kraft_half.append(got)
        failover = (
            event_loop.run(kraft_failover(cluster, failover_trials)) if failover_trials else []
        )
        _log(f"kraft failover: {failover}")
    with kraft_cluster() as cluster:
        label = "kraft closed loop with the default snapshot policy"
        kraft_snapshots = _kraft_closed_loops(cluster, runs, clients, batch, label)
    sync_max: list[LoadResult] = []
    sync_half: list[LoadResult] = []
    with syncobj_cluster() as sc:
        for r in range(runs):
            leader = sc.wait_leader()
            got = _load_result(
                sc.ask(
                    leader,
                    {
                        "cmd": "closed",
                        "clients": clients,
                        "batch": batch,
                        "warmup_s": WARMUP_S,
                        "measure_s": MEASURE_S,
                    },
                )
            )
            _log(f"pysyncobj closed loop run {r}: {got}")
            sync_max.append(got)
        shalf = _median([x.records_per_s for x in sync_max]) / 2
        for r in range(runs):
            leader = sc.wait_leader()
            got = _load_result(
                sc.ask(
                    leader,
                    {
                        "cmd": "open",
                        "rate": shalf,
                        "batch": batch,
                        "warmup_s": WARMUP_S,
                        "measure_s": MEASURE_S,
                    },
                )
            )
            _log(f"pysyncobj open loop at {shalf:,.0f}/s run {r}: {got}")
            sync_half.append(got)
        sfail = syncobj_failover(sc, failover_trials) if failover_trials else []
        _log(f"pysyncobj failover: {sfail}")
    return Results(kraft_max, kraft_half, failover, sync_max, sync_half, sfail, kraft_snapshots)


def figures() -> list[Figure]:
    return to_figures(measure())


def to_figures(res: Results, clients: int = CLIENTS, batch: int = BATCH) -> list[Figure]:
    kmax = _median([x.records_per_s for x in res.kraft_max])
    smax = _median([x.records_per_s for x in res.sync_max])
    k50 = _median([x.p50_ms for x in res.kraft_half])
    k99 = _median([x.p99_ms for x in res.kraft_half])
    s50 = _median([x.p50_ms for x in res.sync_half])
    s99 = _median([x.p99_ms for x in res.sync_half])
    kfo = _median(res.kraft_failover_s) * 1000
    sfo = _median(res.sync_failover_s) * 1000
    cfg = f"K={clients} clients x B={batch} records of {RECORD_BYTES} B"
    extra: list[Figure] = []
    if res.kraft_snapshots_max:
        ksnap = _median([x.records_per_s for x in res.kraft_snapshots_max])
        extra.append(
            Figure(
                "same closed loop with Kafka's default snapshot policy (every committed record "
                "applied to the key-value store, a snapshot per 20 MiB)",
                ksnap,
                "records/s",
                "(informative: the state machine's cost)",
                None,
                "the same load without snapshots",
                kmax,
            )
        )
    return [
        *[
            Figure(
                f"3-node loopback cluster, committed appends, closed loop ({cfg})",
                kmax,
                "records/s",
                f">= {TARGET_RATE:,}",
                kmax >= TARGET_RATE,
                "PySyncObj, same load",
                smax,
            ),
            Figure(
                f"commit latency p50 at half the max load ({kmax / 2:,.0f} records/s, open loop)",
                k50,
                "ms",
                "(informative)",
                None,
                f"PySyncObj p50 at half its max ({smax / 2:,.0f} records/s)",
                s50,
            ),
            Figure(
                "commit latency p99 at half the max load (open loop)",
                k99,
                "ms",
                f"< {TARGET_P99_MS:.0f}",
                k99 < TARGET_P99_MS,
                "PySyncObj p99 at half its max",
                s99,
            ),
            Figure(
                f"failover: SIGKILL of the leader to the first committed append "
                f"(election timeout {ELECTION_TIMEOUT_MS} ms; ratio = x election timeout)",
                kfo,
                "ms",
                f"< {2 * ELECTION_TIMEOUT_MS} (2x election timeout)",
                kfo < 2 * ELECTION_TIMEOUT_MS,
                "election timeout",
                float(ELECTION_TIMEOUT_MS),
            ),
            Figure(
                "PySyncObj failover, same election timeout (raftMinTimeout)",
                sfo,
                "ms",
                "(informative)",
                None,
                "kraft failover",
                kfo,
            ),
        ],
        *extra,
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--failover-trials", type=int, default=FAILOVER_TRIALS)
    args = parser.parse_args(argv)
    res = measure(args.runs, args.clients, args.batch, args.failover_trials)
    for f in to_figures(res, args.clients, args.batch):
        ratio = f"  ratio {f.ratio:.2f}x" if f.ratio is not None else ""
        base = "" if f.baseline_value is None else f"{f.baseline_value:,.2f}"
        print(f"{f.name}: {f.value:,.2f} {f.unit} [target {f.target}]")
        print(f"    vs {f.baseline_name}: {base}{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
