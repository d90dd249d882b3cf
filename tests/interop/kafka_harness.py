"""Apache Kafka as the oracle: its jars (fetched by `make kafka` into tools/kafka/libs, or the
directory $KAFKA_LIBS), its controllers and brokers as subprocesses on 127.0.0.1, its tools.

Every process a test starts is registered with a `Procs` (the `procs` fixture), which stops
it after the test, also on failure; the test's logs are then copied under
out/interop-logs/<test>/ (see conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from kraft.client import Address, AppendAck, append
from kraft.cluster import LocalCluster, free_ports
from kraft.records import BatchHeader, Record, decode_records, iter_batches

REPO = Path(__file__).resolve().parents[2]
METADATA_DIR = "__cluster_metadata-0"

# Lean JVMs: two cores run every process of a test, and the other pytest worker's.
JVM_FLAGS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-Xss512k", "-Djava.awt.headless=true")
TOOL_FLAGS = (*JVM_FLAGS, "-XX:TieredStopAtLevel=1", "-Xshare:auto")

# Short quorum timeouts on both sides keep a failover to about a second.
ELECTION_TIMEOUT_MS = 500
FETCH_TIMEOUT_MS = 1000
KAFKA_QUORUM = {
    "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
    "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS),
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.retry.backoff.ms": "50",
}
KRAFT_QUORUM = {
    **KAFKA_QUORUM,
    "controller.quorum.fetch.max.wait.ms": "200",
}


def quorum_timeouts(election_ms: int, fetch_ms: int, *, kraft: bool) -> dict[str, str]:
    out = {
        **(KRAFT_QUORUM if kraft else KAFKA_QUORUM),
        "controller.quorum.election.timeout.ms": str(election_ms),
        "controller.quorum.fetch.timeout.ms": str(fetch_ms),
        "controller.quorum.election.backoff.max.ms": str(election_ms),
    }
    return out


# What a Kafka process must never log.
FATAL_PATTERNS = (
    re.compile(r"\bFATAL\b"),
    re.compile(r"Non-monotonic"),
    re.compile(r"Shutting down because"),
    re.compile(r"fatal fault", re.IGNORECASE),
    re.compile(r"Encountered fatal"),
)

_LOG4J = """\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.Target=System.out
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.raft=INFO
log4j.logger.org.apache.kafka.common.network=WARN
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.kafka.server.KafkaConfig=WARN
log4j.logger.org.apache.kafka.common.config=WARN
"""

T = TypeVar("T")


# --------------------------------------------------------------------------- the jars


def kafka_libs() -> Path:
    """The directory of Kafka's jars: tools/kafka/libs once `make kafka` verified it, else
    $KAFKA_LIBS. A clear failure (not a skip) when there are none, or when their slf4j API
    cannot load their binding (slf4j 1.7 with a 2.x binding: Kafka would log nothing, and the
    tests grep Kafka's logs)."""
    fetched = REPO / "tools" / "kafka" / "libs"
    env = os.environ.get("KAFKA_LIBS")
    for libs in (fetched, Path(env) if env else None):
        if libs is None or not libs.is_dir() or not list(libs.glob("kafka_2.13-*.jar")):
            continue
        if not list(libs.glob("slf4j-api-2.*.jar")):
            raise AssertionError(f"{libs}: no slf4j 2 API, Kafka would log nothing: `make kafka`")
        return libs
    raise AssertionError(f"no Apache Kafka jars in {fetched} or $KAFKA_LIBS: run `make kafka`")


# The tools print their answers on stdout; their own log lines go to stderr, warnings only.
_TOOLS_LOG4J = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=[%d] %p %m (%c)%n
"""

STARTED = "Kafka Server started"


def java_cmd(main: str, args: Sequence[str], *, tool: bool, log4j: Path) -> list[str]:
    flags = TOOL_FLAGS if tool else JVM_FLAGS
    return [
        "java",
        *flags,
        f"-Dlog4j.configuration=file:{log4j}",
        # log4j2 (on the classpath for Kafka's own log4j2 hooks) stays quiet.
        "-Dlog4j2.level=WARN",
        "-Dlog4j2.StatusLogger.level=OFF",
        "-cp",
        f"{kafka_libs()}/*",
        main,
        *args,
    ]


def write_log4j(root: Path, *, tool: bool = False) -> Path:
    path = root / ("log4j-tools.properties" if tool else "log4j.properties")
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        path.write_text(_TOOLS_LOG4J if tool else _LOG4J, encoding="utf-8")
    return path


def run_tool(
    root: Path, main: str, args: Sequence[str], *, timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools to completion."""
    return subprocess.run(
        java_cmd(main, args, tool=True, log4j=write_log4j(root, tool=True)),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        stdin=subprocess.DEVNULL,
    )


STORAGE_TOOL = "kafka.tools.StorageTool"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
METADATA_QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"


# --------------------------------------------------------------------------- processes


class Procs:
    """Every process a test started; `close()` stops them all (SIGTERM, then SIGKILL)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.kafka: list[KafkaNode] = []
        self.clusters: list[LocalCluster] = []

    def track(self, cluster: LocalCluster) -> LocalCluster:
        self.clusters.append(cluster)
        return cluster

    def log_files(self) -> list[Path]:
        logs = [k.log_path for k in self.kafka]
        for c in self.clusters:
            for n in c.node_ids:
                logs += [c.log_path(n), c.trace_path(n)]
        return [p for p in logs if p.exists()]

    def close(self) -> None:
        for k in self.kafka:
            k.signal(signal.SIGTERM)
        for c in self.clusters:
            c.stop_all(timeout_s=10.0)
        for k in self.kafka:
            k.wait(15.0)


@dataclass
class KafkaNode:
    """One Kafka process: a controller (a voter) or a broker (an observer of the quorum)."""

    procs: Procs
    node_id: int
    port: int
    voters: str
    cluster_id: str
    role: str = "controller"
    extra: Mapping[str, str] = field(default_factory=dict)
    quorum: Mapping[str, str] = field(default_factory=lambda: dict(KAFKA_QUORUM))
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    def __post_init__(self) -> None:
        self.procs.kafka.append(self)

    @property
    def name(self) -> str:
        return f"kafka-{self.node_id}"

    @property
    def data_dir(self) -> Path:
        return self.procs.root / self.name

    @property
    def metadata_dir(self) -> Path:
        return self.data_dir / METADATA_DIR

    @property
    def config_path(self) -> Path:
        return self.procs.root / f"{self.name}.properties"

    @property
    def log_path(self) -> Path:
        return self.procs.root / f"{self.name}.log"

    @property
    def address(self) -> Address:
        return Address("127.0.0.1", self.port)

    def properties(self) -> dict[str, str]:
        props = {
            "node.id": str(self.node_id),
            "process.roles": self.role,
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(self.data_dir),
            "metadata.max.idle.interval.ms": "500",
            "num.network.threads": "1",
            "num.io.threads": "1",
            "background.threads": "1",
            "log.flush.scheduler.interval.ms": "1000",
            **self.quorum,
        }
        if self.role == "controller":
            props["listeners"] = f"CONTROLLER://127.0.0.1:{self.port}"
            props["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT"
        else:
            props["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
            props["listener.security.protocol.map"] = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
            props["inter.broker.listener.name"] = "PLAINTEXT"
            props["offsets.topic.replication.factor"] = "1"
            props["transaction.state.log.replication.factor"] = "1"
        props.update(self.extra)
        return props

    def format(self) -> None:
        text = "".join(f"{k}={v}\n" for k, v in self.properties().items())
        self.config_path.write_text(text, encoding="utf-8")
        done = run_tool(
            self.procs.root,
            STORAGE_TOOL,
            ["format", "-t", self.cluster_id, "-c", str(self.config_path), "--ignore-formatted"],
        )
        assert done.returncode == 0, f"StorageTool format failed:\n{done.stdout}\n{done.stderr}"

    def start(self) -> None:
        assert not self.running, f"{self.name} is already running"
        log4j = write_log4j(self.procs.root)
        self.starts = self.log_text().count(STARTED)
        out = open(self.log_path, "ab")  # noqa: SIM115 - the child inherits it
        try:
            self.proc = subprocess.Popen(
                java_cmd("kafka.Kafka", [str(self.config_path)], tool=False, log4j=log4j),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            out.close()

    @property
    def started(self) -> bool:
        """Running, and this run logged that it finished starting up."""
        return self.running and self.log_text().count(STARTED) > self.starts

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(sig)

    def wait(self, timeout_s: float) -> int | None:
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash."""
        self.signal(signal.SIGKILL)
        self.wait(10.0)

    def stop(self) -> bool:
        """A clean shutdown (SIGTERM: Kafka resigns its leadership with EndQuorumEpoch); True
        if the JVM exited as a clean SIGTERM shutdown does (143, or 0)."""
        self.signal(signal.SIGTERM)
        return self.wait(30.0) in (0, 128 + signal.SIGTERM)

    def quorum_state(self) -> dict[str, object] | None:
        try:
            data = json.loads((self.metadata_dir / "quorum-state").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def fatal_lines(self) -> list[str]:
        return [
            line
            for line in self.log_text().splitlines()
            if any(p.search(line) for p in FATAL_PATTERNS)
        ]


def stop_kafka(nodes: Iterable[KafkaNode]) -> dict[int, bool]:
    """Clean shutdown of several Kafka processes at once (one by one, the last ones wait out
    their graceful-shutdown timeout for peers already gone); True for each clean exit."""
    nodes = list(nodes)
    for k in nodes:
        k.signal(signal.SIGTERM)
    return {k.node_id: k.wait(30.0) in (0, 128 + signal.SIGTERM) for k in nodes}


def kafka_nodes(
    procs: Procs,
    ids_ports: Mapping[int, int],
    voters: str,
    cluster_id: str,
    *,
    role: str = "controller",
    quorum: Mapping[str, str] = KAFKA_QUORUM,
    extra: Mapping[str, str] | None = None,
) -> dict[int, KafkaNode]:
    nodes = {
        n: KafkaNode(
            procs,
            n,
            port,
            voters,
            cluster_id,
            role=role,
            extra=dict(extra or {}),
            quorum=dict(quorum),
        )
        for n, port in ids_ports.items()
    }
    for k in nodes.values():
        k.format()
    return nodes


def voters_string(ports: Mapping[int, int]) -> str:
    return ",".join(f"{n}@127.0.0.1:{p}" for n, p in sorted(ports.items()))


def kraft_cluster(
    procs: Procs,
    ports: Mapping[int, int],
    voters: str,
    cluster_id: str,
    *,
    trace: bool = True,
    quorum: Mapping[str, str] = KRAFT_QUORUM,
) -> LocalCluster:
    """kraft nodes with the given ids (any subset of the voters, or observers), formatted
    with `kraft format`, configured with the whole voter set."""
    ids = sorted(ports)
    cluster = LocalCluster(
        procs.root,
        [ports[n] for n in ids],
        cluster_id=cluster_id,
        overrides={**quorum, "controller.quorum.voters": voters},
        trace=trace,
    )
    # LocalCluster numbers its nodes 1..N; give them the ids asked for.
    cluster.node_ids = tuple(ids)
    cluster.addresses = {n: Address("127.0.0.1", ports[n]) for n in ids}
    procs.track(cluster)
    for n in ids:
        done = kraft_cli(
            "format",
            "--data-dir",
            str(cluster.data_dir(n)),
            "--cluster-id",
            cluster_id,
            "--node-id",
            str(n),
        )
        assert done.returncode == 0, done.stderr
    cluster.format()  # writes the configuration files (the directories are formatted)
    return cluster


def kraft_cli(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def ports_for(ids: Iterable[int]) -> dict[int, int]:
    ids = list(ids)
    return dict(zip(ids, free_ports(len(ids)), strict=True))


# --------------------------------------------------------------------------- logs


@dataclass(frozen=True)
class Batch:
    header: BatchHeader
    raw: bytes

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    def records(self) -> list[Record]:
        return decode_records(self.raw, 0, self.header)


def read_batches(metadata_dir: Path) -> list[Batch]:
    """Every batch of a metadata log directory's segments, in offset order (CRC-checked)."""
    out: list[Batch] = []
    for seg in sorted(metadata_dir.glob("*.log")):
        data = seg.read_bytes()
        for pos, header in iter_batches(data):
            out.append(Batch(header, data[pos : pos + header.size_in_bytes]))
    out.sort(key=lambda b: b.base_offset)
    return out


def batches_below(batches: Iterable[Batch], end: int) -> list[Batch]:
    return [b for b in batches if b.last_offset < end]


# --------------------------------------------------------------------------- metadata records
#
# A Kafka controller replays every committed record as a metadata record, so what a kraft
# leader appends in a quorum with Kafka must be one. The value of a metadata record is an
# unsigned varint frame version (1), the record's api key, its version, then the message
# (flexible versions: compact strings, tagged fields). Api keys from Kafka's
# metadata/src/main/resources/common/metadata/*.json.

_FRAME_VERSION = 1
_NOOP_RECORD_KEY = 20
_FEATURE_LEVEL_RECORD_KEY = 12
# Checkpoints (KIP-630 snapshots) soon, so that there are some to read; other tests keep
# Kafka's defaults (20 MB or an hour), so that their logs start at offset 0.
FREQUENT_SNAPSHOTS = {
    "metadata.log.max.snapshot.interval.ms": "3000",
    "metadata.log.max.record.bytes.between.snapshots": "1000",
}

# metadata.version 4.3-IV0, what Kafka 4.3.1's StorageTool bootstraps.
METADATA_VERSION_LEVEL = 30


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def noop_record() -> bytes:
    """NoOpRecord v0: no fields, no tagged fields."""
    return _uvarint(_FRAME_VERSION) + _uvarint(_NOOP_RECORD_KEY) + _uvarint(0) + _uvarint(0)


def feature_level_record(name: str, level: int) -> bytes:
    """FeatureLevelRecord v0: Name (compact string), FeatureLevel (int16), tagged fields."""
    raw = name.encode("utf-8")
    return (
        _uvarint(_FRAME_VERSION)
        + _uvarint(_FEATURE_LEVEL_RECORD_KEY)
        + _uvarint(0)
        + _uvarint(len(raw) + 1)
        + raw
        + level.to_bytes(2, "big", signed=True)
        + _uvarint(0)
    )


def kraft_append(
    bootstrap: Sequence[Address], values: Sequence[bytes], timeout_ms: int = 15_000
) -> AppendAck:
    """Append through kraft's client (the leader must be a kraft node); answered once
    committed."""
    return asyncio.run(append(list(bootstrap), list(values), timeout_ms))
