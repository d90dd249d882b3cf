"""Apache Kafka's Raft performance server (`kafka.tools.TestRaftServer`) as a 3-node cluster on
127.0.0.1, for benchmarks/bench_peers.py.

TestRaftServer (in kafka_2.13's jar) runs Kafka's KafkaRaftClient on a log of its own
(`__raft_performance_test`, topic id 0-2) with Kafka's socket server, and has no client API:
the leader itself appends `--throughput` records of `--record-size` bytes per second (one
record per scheduleAppend; the accumulator batches them over
`controller.quorum.append.linger.ms`) and every 5 s prints "Throughput (bytes/second): R,
Latency (ms): A p75 B p99 C p999" of the records it saw committed. That rate is a windowed
metric (Kafka's Meter over the metric sample windows) and the percentiles come from a histogram
of 1,000 buckets up to 250 ms (249.0 means at least that), so this module counts committed
records itself: it asks a node for its high watermark with a Fetch (replica id -1, an anonymous
observer, max_bytes 1), and divides the HWM's advance by the wall time of the window.

Durability: the followers fsync what they append before they fetch again (their fetch offset is
their flushed end), and the leader flushes its own appends in the step that updates its end
offset (KafkaRaftClient.flushLeaderLog), so a committed record is on the disk of a majority.

Failover: SIGKILL of the leader, then the survivors are polled until one answers as the leader
of a later epoch with a known high watermark: a leader's HWM is unknown until a record of its
own epoch (its LeaderChange, written at once, with the first workload records behind it)
commits, so that moment is the new epoch's first committed write.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from benchmarks.peers.processes import spawn_logged, stop_all
from kraft.client import Address, ClientError, Connection
from kraft.cluster import free_ports
from kraft.protocol import ApiKey, MessageDict, ProtocolError

MAIN = "kafka.tools.TestRaftServer"
TOPIC_ID = uuid.UUID(int=2)  # TestRaftServer's log: Uuid(0, 2)
NO_DIRECTORY = uuid.UUID(int=0)
NOT_LEADER = 6  # NOT_LEADER_OR_FOLLOWER

# The JVM flags of Kafka's own start scripts (kafka-server-start.sh, kafka-run-class.sh), but a
# 3 GiB heap, not 1 GiB: TestRaftServer's generator runs at the offered rate from the start, and
# while the JIT warms up (a minute here) the leader commits less than it is offered; the queued
# records filled a 1 GiB heap (OutOfMemoryError in every node at 400 K/s offered).
JVM_FLAGS = (
    "-Xms3g",
    "-Xmx3g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

_LOG4J = """\
log4j.rootLogger=WARN, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.Target=System.out
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

_STATS = re.compile(
    r"Throughput \(bytes/second\): (?P<rate>[\d.]+), Latency \(ms\): (?P<p75>[\d.NaInf-]+) p75 "
    r"(?P<p99>[\d.NaInf-]+) p99 (?P<p999>[\d.NaInf-]+) p999"
)


@dataclass(frozen=True, slots=True)
class WriteStats:
    """One line TestRaftServer printed: committed bytes/s and commit latency percentiles (ms),
    from the leader's append to its commit callback."""

    bytes_per_s: float
    p75_ms: float
    p99_ms: float
    p999_ms: float


def parse_stats(text: str) -> list[WriteStats]:
    """Every stats line in TestRaftServer's output, in order."""
    return [
        WriteStats(float(m["rate"]), float(m["p75"]), float(m["p99"]), float(m["p999"]))
        for m in _STATS.finditer(text)
    ]


@dataclass(frozen=True, slots=True)
class FetchState:
    error: int
    high_watermark: int
    leader_id: int
    leader_epoch: int


def fetch_request(epoch: int) -> MessageDict:
    """An anonymous observer's Fetch from offset 0 of TestRaftServer's log, returning at once
    with at most one batch: only its high watermark and leader are wanted."""
    return {
        "cluster_id": None,
        "replica_id": -1,
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "__raft_performance_test",
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": epoch,
                        "fetch_offset": 0,
                        # Kafka refuses a negative last fetched epoch (INVALID_REQUEST).
                        "last_fetched_epoch": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1,
                        "replica_directory_id": NO_DIRECTORY,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def fetch_state(answer: MessageDict) -> FetchState:
    """The partition error, high watermark and leader of a Fetch answer."""
    top = answer.get("error_code")
    responses = answer.get("responses")
    if not isinstance(responses, list) or not responses:
        return FetchState(int(top) if isinstance(top, int) else -1, -1, -1, -1)
    part = responses[0]["partitions"][0]
    leader = part["current_leader"]
    return FetchState(
        int(part["error_code"]),
        int(part["high_watermark"]),
        int(leader["leader_id"]),
        int(leader["leader_epoch"]),
    )


async def probe(address: Address, epoch: int = 0, timeout_s: float = 1.0) -> FetchState | None:
    """The node's answer to one Fetch (None: no answer). An answer naming a later leader epoch
    than `epoch` is asked again with that epoch."""
    try:
        async with asyncio.timeout(timeout_s):
            async with await Connection.open(address, timeout_s=timeout_s) as conn:
                version = await conn.version_for(ApiKey.FETCH)
                state = fetch_state(await conn.request(ApiKey.FETCH, version, fetch_request(epoch)))
                if state.leader_epoch > epoch:
                    answer = await conn.request(
                        ApiKey.FETCH, version, fetch_request(state.leader_epoch)
                    )
                    state = fetch_state(answer)
                return state
    except (ClientError, ProtocolError, OSError, TimeoutError):
        return None


def _directory_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class KafkaRaftCluster:
    """Three TestRaftServer JVMs; `start(throughput)` starts every node with that workload."""

    def __init__(self, root: Path, libs: Path, quorum: dict[str, str]) -> None:
        self.root = root
        self.libs = libs
        self.quorum = quorum
        self.node_ids = (1, 2, 3)
        self.ports = dict(zip(self.node_ids, free_ports(3), strict=True))
        self.directory_ids = {n: _directory_id() for n in self.node_ids}
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.throughput = 0
        self.record_size = 100
        root.mkdir(parents=True, exist_ok=True)
        (root / "log4j.properties").write_text(_LOG4J, encoding="utf-8")
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in self.ports.items())
        for n, port in self.ports.items():
            props = {
                "node.id": str(n),
                "process.roles": "controller",
                "controller.listener.names": "CONTROLLER",
                "listeners": f"CONTROLLER://127.0.0.1:{port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "controller.quorum.voters": voters,
                "log.dirs": str(root / f"data-{n}"),
                **quorum,
            }
            text = "".join(f"{k}={v}\n" for k, v in props.items())
            (root / f"node-{n}.properties").write_text(text, encoding="utf-8")

    def address(self, n: int) -> Address:
        return Address("127.0.0.1", self.ports[n])

    def log_path(self, n: int) -> Path:
        return self.root / f"node-{n}.out"

    def start(self, throughput: int, record_size: int) -> None:
        """Start every node on an empty log with this workload. An empty log each time: a
        restarted node's listener first reads the whole log back, and its leader starts its
        workload only after that (millions of records from an earlier window: seconds)."""
        self.throughput = throughput
        self.record_size = record_size
        for n in self.node_ids:
            shutil.rmtree(self.root / f"data-{n}", ignore_errors=True)
            self.start_node(n)

    def start_node(self, n: int) -> None:
        if n in self.procs and self.procs[n].poll() is None:
            return
        cmd = [
            "java",
            *JVM_FLAGS,
            f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}",
            "-Dlog4j2.level=WARN",
            "-Dlog4j2.StatusLogger.level=OFF",
            "-cp",
            f"{self.libs}/*",
            MAIN,
            "--config",
            str(self.root / f"node-{n}.properties"),
            "--replica-directory-id",
            self.directory_ids[n],
            "--throughput",
            str(self.throughput),
            "--record-size",
            str(self.record_size),
        ]
        self.procs[n] = spawn_logged(cmd, self.log_path(n))

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]

    def kill(self, n: int) -> None:
        p = self.procs.get(n)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop_all(self, timeout_s: float = 20.0) -> None:
        stop_all(self.procs.values(), timeout_s)

    def stats(self, n: int, since_bytes: int = 0) -> list[WriteStats]:
        """The stats lines node `n` printed after byte `since_bytes` of its output."""
        try:
            with open(self.log_path(n), "rb") as f:
                f.seek(since_bytes)
                return parse_stats(f.read().decode("utf-8", "replace"))
        except OSError:
            return []

    def output_size(self, n: int) -> int:
        try:
            return os.path.getsize(self.log_path(n))
        except OSError:
            return 0

    async def leader(self, nodes: list[int] | None = None, timeout_s: float = 60.0) -> FetchState:
        """The leader's answer (its id, epoch and high watermark), once it has one."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for n in nodes or list(self.node_ids):
                got = await probe(self.address(n))
                if got is None or got.leader_id < 0:
                    continue
                if got.error == 0 and got.high_watermark >= 0:
                    return got
                if got.leader_id in self.ports:
                    lead = await probe(self.address(got.leader_id), got.leader_epoch)
                    if lead is not None and lead.error == 0 and lead.high_watermark >= 0:
                        return lead
            await asyncio.sleep(0.05)
        raise TimeoutError(f"TestRaftServer: no leader with a high watermark in {timeout_s} s")

    async def failover(self) -> float:
        """Seconds from SIGKILL of the leader to a survivor leading a later epoch with a known
        high watermark; the killed node is started again afterwards."""
        before = await self.leader()
        survivors = [n for n in self.node_ids if n != before.leader_id]
        started = time.perf_counter()
        self.kill(before.leader_id)
        took: float | None = None
        while took is None:
            if time.perf_counter() - started > 120.0:
                raise TimeoutError("TestRaftServer: no new leader within 120 s of the kill")
            for n in survivors:
                got = await probe(self.address(n), before.leader_epoch, timeout_s=0.5)
                if (
                    got is not None
                    and got.error == 0
                    and got.leader_epoch > before.leader_epoch
                    and got.high_watermark >= 0
                ):
                    took = time.perf_counter() - started
                    break
            else:
                await asyncio.sleep(0.005)
        self.start_node(before.leader_id)
        await self.rejoined(before.leader_id, before.leader_epoch + 1)
        return took

    async def rejoined(self, n: int, epoch: int, timeout_s: float = 60.0) -> None:
        """Wait until node `n` answers naming a leader of `epoch` or later."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = await probe(self.address(n), epoch)
            if got is not None and got.leader_id >= 0 and got.leader_epoch >= epoch:
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"TestRaftServer node {n} did not rejoin within {timeout_s} s")
