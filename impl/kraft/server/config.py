"""Node configuration: Kafka-style `key=value` properties, overridable key by key.

The keys are Apache Kafka's where Kafka has one (`node.id`, `controller.quorum.voters`,
`listeners`, `metadata.log.dir` / `log.dirs`, `controller.quorum.*.ms`, ...); the
`controller.` prefix of the quorum keys may be left out. Flags of `kraft start` are overrides
of the same keys, so a file and a command line mean the same thing.

The voters: `controller.quorum.voters` names a static quorum (kraft.version 0). A dynamic
quorum (KIP-853, formatted with `kraft format --standalone` or `--initial-controllers`) states
its voters, with their directory ids and endpoints, in its log; such a node may be configured
with `controller.quorum.bootstrap.servers` instead, and the voters of its log replace the
configured ones at start (kraft.server.voters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from kraft.app.machines import StateMachineKind
from kraft.core.timing import QuorumTiming
from kraft.errors import KraftError
from kraft.ids import NodeId
from kraft.protocol import DEFAULT_MAX_FRAME_SIZE

__all__ = [
    "ConfigError",
    "NodeConfig",
    "VoterAddress",
    "listener_name_of",
    "load_config",
    "parse_bootstrap_servers",
    "parse_listener",
    "parse_properties",
    "parse_voters",
    "render_properties",
]

DEFAULT_APPEND_LINGER_MS: Final = 0
_DEFAULT_TIMING: Final = QuorumTiming(append_linger_ms=DEFAULT_APPEND_LINGER_MS)
DEFAULT_SEGMENT_BYTES: Final = 8 * 1024 * 1024
DEFAULT_LISTENER_NAME: Final = "CONTROLLER"
# Kafka's MetadataLogConfig defaults (metadata.log.max.record.bytes.between.snapshots,
# metadata.log.max.snapshot.interval.ms).
DEFAULT_SNAPSHOT_MAX_NEW_RECORD_BYTES: Final = 20 * 1024 * 1024
DEFAULT_SNAPSHOT_MAX_INTERVAL_MS: Final = 60 * 60 * 1000
# Kafka's MetadataLogConfig retention defaults (metadata.max.retention.bytes, .ms); a negative
# value turns that limit off, as in Kafka.
DEFAULT_RETENTION_MAX_BYTES: Final = 100 * 1024 * 1024
DEFAULT_RETENTION_MS: Final = 7 * 24 * 60 * 60 * 1000


class ConfigError(KraftError):
    """A missing, malformed or inconsistent configuration value."""


@dataclass(frozen=True, slots=True)
class VoterAddress:
    node_id: NodeId
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: NodeId
    data_dir: Path
    # `controller.quorum.voters`; at start, the voters the log states if it states any.
    voters: tuple[VoterAddress, ...]
    listener_host: str
    listener_port: int
    # The quorum.* timing properties. append_linger_ms (quorum.append.linger.ms) is the
    # leader's accumulator (kraft.core.appends): appends within it become one batch, while the
    # node goes on serving everything else; group commit merges whatever arrives while an
    # fsync runs either way.
    timing: QuorumTiming = _DEFAULT_TIMING
    max_frame_bytes: int = DEFAULT_MAX_FRAME_SIZE
    # Kafka's listener limits: bytes held in partly received requests over all connections,
    # how long a connection may go without a whole request, how many connections at once.
    queued_max_request_bytes: int = 64 * 1024 * 1024
    connections_max_idle_ms: int = 600_000
    max_connections: int = 4096
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    shutdown_timeout_ms: int = 5000
    trace_path: Path | None = None
    # The name of our one listener: `controller.listener.names`' first, else the `listeners`
    # entry's, else Kafka's conventional CONTROLLER. Endpoints are reported under this name.
    listener_name: str = DEFAULT_LISTENER_NAME
    # KIP-630 snapshots (kraft.server.snapshots): one is written when the committed record
    # bytes since the last reach the first, or when the second has passed since the last
    # (0: never by time), checked as the high watermark moves. Which are kept is the core's
    # decision (AdvanceLogStartOffset deletes those below the log start).
    snapshot_max_new_record_bytes: int = DEFAULT_SNAPSHOT_MAX_NEW_RECORD_BYTES
    snapshot_max_interval_ms: int = DEFAULT_SNAPSHOT_MAX_INTERVAL_MS
    # Kafka's retention (kraft.server.retention): while the log and the snapshots together
    # exceed the first, or the oldest snapshot's last record is older than the second, the
    # oldest snapshot goes and the log start moves to the next (the latest always stays),
    # as far as KIP-630's rule allows (`timing.start_offset_lag_time_max_ms`). < 0: no limit.
    retention_max_bytes: int = DEFAULT_RETENTION_MAX_BYTES
    retention_ms: int = DEFAULT_RETENTION_MS
    # `kraft.state.machine`: the key-value store (kv) or, in a quorum shared with Kafka
    # controllers, the metadata state machine (metadata): kraft.app.machines.
    state_machine: StateMachineKind = StateMachineKind.KV
    # `controller.quorum.bootstrap.servers` (host, port): where a node of a dynamic quorum
    # may find it (KIP-853).
    bootstrap_servers: tuple[tuple[str, int], ...] = ()

    def voter(self, node_id: int) -> VoterAddress | None:
        for v in self.voters:
            if v.node_id == node_id:
                return v
        return None


def parse_properties(text: str, where: str = "<properties>") -> dict[str, str]:
    """Java-properties subset: `key=value` or `key: value` lines, `#`/`!` comments, blank lines;
    a trailing backslash continues a line."""
    out: dict[str, str] = {}
    pending = ""
    for n, raw in enumerate(text.splitlines(), start=1):
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
        if not seps:
            raise ConfigError(f"{where}:{n}: expected key=value, got {line!r}")
        i = min(seps)
        key, value = line[:i].strip(), line[i + 1 :].strip()
        if not key:
            raise ConfigError(f"{where}:{n}: empty key")
        out[key] = value
    return out


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _host_port(text: str, what: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{what}: expected host:port, got {text!r}")
    return host.strip("[]"), int(port)


def parse_voters(text: str) -> tuple[VoterAddress, ...]:
    """Kafka's controller.quorum.voters: `id@host:port` separated by commas."""
    voters: list[VoterAddress] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        node, sep, address = item.partition("@")
        if not sep or not node.isdigit():
            raise ConfigError(f"controller.quorum.voters: expected id@host:port, got {item!r}")
        host, port = _host_port(address, "controller.quorum.voters")
        voters.append(VoterAddress(NodeId(int(node)), host, port))
    if not voters:
        raise ConfigError("controller.quorum.voters is empty")
    ids = [v.node_id for v in voters]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"controller.quorum.voters names a node twice: {text!r}")
    return tuple(voters)


def parse_bootstrap_servers(text: str) -> tuple[tuple[str, int], ...]:
    """Kafka's controller.quorum.bootstrap.servers: `host:port` separated by commas."""
    servers = tuple(
        _host_port(item, "controller.quorum.bootstrap.servers")
        for item in (s.strip() for s in text.split(","))
        if item
    )
    if not servers:
        raise ConfigError("controller.quorum.bootstrap.servers is empty")
    return servers


def parse_listener(text: str) -> tuple[str, int]:
    """Kafka's `listeners` (`NAME://host:port`, the first one) or a bare `host:port`."""
    first = text.split(",", maxsplit=1)[0].strip()
    _, sep, rest = first.partition("://")
    return _host_port(rest if sep else first, "listeners")


def listener_name_of(props: Mapping[str, str]) -> str:
    """The listener's name: `controller.listener.names`' first, else `listeners`' first
    `NAME://`, else CONTROLLER."""
    names = props.get("controller.listener.names", "").split(",")[0].strip()
    if names:
        return names
    name, sep, _ = props.get("listeners", "").split(",", maxsplit=1)[0].strip().partition("://")
    return name if sep and name else DEFAULT_LISTENER_NAME


# The properties of QuorumTiming (with or without the `controller.` prefix) and its fields.
_TIMING_KEYS: Final[dict[str, str]] = {
    "quorum.election.timeout.ms": "election_timeout_ms",
    "quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "quorum.retry.backoff.ms": "retry_backoff_ms",
    "quorum.request.timeout.ms": "request_timeout_ms",
    "quorum.fetch.max.wait.ms": "fetch_max_wait_ms",
    "quorum.append.linger.ms": "append_linger_ms",
    # Kafka 4.3's controller.quorum.fetch.max.bytes (default 1 MiB): what a Fetch asks for.
    "quorum.fetch.max.bytes": "fetch_max_bytes",
    # KIP-630's name (Kafka ships no such key): how old the log start may grow while a live
    # replica still needs it.
    "metadata.start.offset.lag.time.max.ms": "start_offset_lag_time_max_ms",
}

_INT_KEYS: Final[dict[str, str]] = {
    "socket.request.max.bytes": "max_frame_bytes",
    "queued.max.request.bytes": "queued_max_request_bytes",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "max.connections": "max_connections",
    "metadata.log.segment.bytes": "segment_bytes",
    "log.segment.bytes": "segment_bytes",
    "shutdown.timeout.ms": "shutdown_timeout_ms",
    "metadata.log.max.record.bytes.between.snapshots": "snapshot_max_new_record_bytes",
    "metadata.log.max.snapshot.interval.ms": "snapshot_max_interval_ms",
    "metadata.max.retention.bytes": "retention_max_bytes",
    "metadata.max.retention.ms": "retention_ms",
}


_POSITIVE: Final = frozenset(
    {
        "max_frame_bytes",
        "segment_bytes",
        "queued_max_request_bytes",
        "connections_max_idle_ms",
        "max_connections",
        "snapshot_max_new_record_bytes",
    }
)
# Negative values allowed (Kafka: a negative retention is no limit).
_SIGNED: Final = frozenset({"retention_max_bytes", "retention_ms"})


def _int(props: Mapping[str, str], key: str, *, minimum: int = 0) -> int | None:
    value = props.get(key)
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
    if n < minimum:
        raise ConfigError(f"{key}: must be at least {minimum}, got {n}")
    return n


_VOTER_KEYS: Final = frozenset({"controller.quorum.voters", "controller.quorum.bootstrap.servers"})


def _normalise(props: Mapping[str, str]) -> dict[str, str]:
    """Drop the optional `controller.` prefix of the quorum keys."""
    out: dict[str, str] = {}
    for k, v in props.items():
        if k.startswith("controller.quorum.") and k not in _VOTER_KEYS:
            k = k[len("controller.") :]
        out[k] = v
    return out


def load_config(path: Path | None, overrides: Mapping[str, str] = {}) -> NodeConfig:
    """The config of the properties file at `path` (optional) with `overrides` applied."""
    props: dict[str, str] = {}
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror or e}") from None
        props.update(_normalise(parse_properties(text, str(path))))
    props.update(_normalise(overrides))
    node_id = _int(props, "node.id")
    if node_id is None:
        raise ConfigError("node.id is required")
    bootstrap: tuple[tuple[str, int], ...] = ()
    if "controller.quorum.bootstrap.servers" in props:
        bootstrap = parse_bootstrap_servers(props["controller.quorum.bootstrap.servers"])
    elif "controller.quorum.voters" not in props:
        raise ConfigError(
            "controller.quorum.voters (a static quorum) or controller.quorum.bootstrap.servers "
            "(a dynamic quorum) is required"
        )
    voters: tuple[VoterAddress, ...] = ()
    if "controller.quorum.voters" in props:
        voters = parse_voters(props["controller.quorum.voters"])
    data_dir = props.get("metadata.log.dir") or props.get("log.dirs", "").split(",")[0].strip()
    if not data_dir:
        raise ConfigError("metadata.log.dir (or log.dirs) is required")
    me = next((v for v in voters if v.node_id == node_id), None)
    if "listeners" in props:
        host, port = parse_listener(props["listeners"])
    elif me is not None:
        host, port = me.host, me.port
    else:
        raise ConfigError(f"node {node_id} is not a voter: `listeners` is required")
    ints: dict[str, int] = {}
    for key, attr in _INT_KEYS.items():
        low = 1 if attr in _POSITIVE else (-(1 << 63) if attr in _SIGNED else 0)
        n = _int(props, key, minimum=low)
        if n is not None:
            ints[attr] = n
    timing: dict[str, int] = {}
    for key, attr in _TIMING_KEYS.items():
        n = _int(props, key, minimum=1 if attr == "fetch_max_bytes" else 0)
        if n is not None:
            timing[attr] = n
    trace = props.get("kraft.trace.file")
    machine = props.get("kraft.state.machine", StateMachineKind.KV.value)
    try:
        state_machine = StateMachineKind(machine)
    except ValueError:
        known = ", ".join(k.value for k in StateMachineKind)
        raise ConfigError(
            f"kraft.state.machine: expected one of {known}, got {machine!r}"
        ) from None
    return NodeConfig(
        node_id=NodeId(node_id),
        data_dir=Path(data_dir),
        voters=voters,
        listener_host=host,
        listener_port=port,
        trace_path=Path(trace) if trace else None,
        listener_name=listener_name_of(props),
        timing=replace(_DEFAULT_TIMING, **timing),
        state_machine=state_machine,
        bootstrap_servers=bootstrap,
        **ints,
    )
