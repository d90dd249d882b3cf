"""A dynamic quorum's bootstrap (KIP-853), as `kafka-storage format --standalone` or
`--initial-controllers` writes it, and the voter set a data directory states.

- `parse_initial_controllers`: Kafka's `id@host:port:directory-id,...` (DynamicVoters.parse;
  an IPv6 host is written in brackets).
- `voters_record_of`: the Voters record of those voters, byte for byte as Kafka builds it
  (VoterSet.toVotersRecord over the HashMap Kafka keeps them in, so in Java's HashMap order;
  one endpoint on the controller listener, its name upper-cased; kraft.version 0..1).
- `write_bootstrap_checkpoint`: `__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`
  with SnapshotHeader, KRaftVersion (1) and Voters in one control batch, then SnapshotFooter.
- `stated_voters`: the voter set a partition directory states at start, from its snapshots and
  its log (the node's input to `LogState.voter_history`), with the voters' endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraft.control_records import (
    ControlRecordType,
    Endpoint,
    KRaftVersionRecord,
    VoterEntry,
    VotersRecord,
    control_record_type,
    decode_control_record,
)
from kraft.core.voter_set import KRAFT_VERSION_DYNAMIC
from kraft.errors import KraftError
from kraft.ids import NO_DIRECTORY, DirectoryId, NodeId, Offset
from kraft.protocol.topic_ids import uuid_from_base64, uuid_to_base64
from kraft.records import CorruptRecordError, decode_records, iter_batches
from kraft.storage.replicated_log import ReplicatedLog
from kraft.storage.snapshot_files import BOOTSTRAP_SNAPSHOT_ID, CheckpointWriter, SnapshotSummary

__all__ = [
    "BootstrapError",
    "DynamicVoter",
    "StatedVoters",
    "parse_initial_controllers",
    "stated_voters",
    "voters_record_of",
    "write_bootstrap_checkpoint",
]

_BASE64_UUID = re.compile(r"[A-Za-z0-9_-]{22}(==)?")
_SCAN_BYTES = 8 << 20
_VOTER_KINDS = frozenset({ControlRecordType.KRAFT_VERSION, ControlRecordType.VOTERS})


class BootstrapError(KraftError):
    """An --initial-controllers value Kafka would refuse, or a bootstrap that cannot be written."""


@dataclass(frozen=True, slots=True)
class DynamicVoter:
    node_id: NodeId
    host: str
    port: int
    directory_id: DirectoryId

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.node_id}@{host}:{self.port}:{uuid_to_base64(self.directory_id)}"


def _parse_one(text: str) -> DynamicVoter:
    text = text.strip()
    node, at, rest = text.partition("@")
    if not at or not node:
        raise BootstrapError(f"{text!r}: expected id@host:port:directory-id")
    if not re.fullmatch(r"-?\d+", node):
        raise BootstrapError(f"{text!r}: the node id is not an integer")
    node_id = int(node)
    if not 0 <= node_id < 2**31:
        raise BootstrapError(f"{text!r}: invalid node id {node_id}")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise BootstrapError(f"{text!r}: a host begun with '[' needs a ']'")
    else:
        host, colon, rest = rest.partition(":")
        rest = colon + rest
    if not host:
        raise BootstrapError(f"{text!r}: no host")
    if not rest.startswith(":"):
        raise BootstrapError(f"{text!r}: the port must follow the host after a colon")
    port_text, colon, directory = rest[1:].partition(":")
    if not colon:
        raise BootstrapError(f"{text!r}: no colon after the port")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise BootstrapError(f"{text!r}: invalid port {port_text!r}")
    if not _BASE64_UUID.fullmatch(directory):
        raise BootstrapError(f"{text!r}: the directory id {directory!r} is not a UUID")
    directory_id = DirectoryId(uuid_from_base64(directory.rstrip("=")))
    if directory_id == NO_DIRECTORY:
        raise BootstrapError(f"{text!r}: the directory id is the reserved zero UUID")
    return DynamicVoter(NodeId(node_id), host, int(port_text), directory_id)


def parse_initial_controllers(text: str) -> tuple[DynamicVoter, ...]:
    """Kafka's --initial-controllers, in node id order (Kafka keeps them in a TreeMap)."""
    voters = [_parse_one(item) for item in text.strip().split(",") if item]
    if not voters:
        raise BootstrapError("--initial-controllers: no voters given")
    ids = [v.node_id for v in voters]
    for n in ids:
        if ids.count(n) > 1:
            raise BootstrapError(f"--initial-controllers: node id {n} was given more than once")
    return tuple(sorted(voters, key=lambda v: v.node_id))


def _java_hash_order(ids: Sequence[int], capacity: int) -> list[int]:
    """Iteration order of a java.util.HashMap of Integer keys inserted in `ids` order, with
    `capacity` buckets (no collisions chain long enough to become a tree: < 8 per bucket)."""
    return sorted(ids, key=lambda h: (h ^ (h >> 16)) & (capacity - 1))


def _kafka_voter_order(ids: Sequence[int]) -> list[int]:
    """Kafka builds the voter set as `new HashMap<>(m)` of a default HashMap `m` filled in id
    order (DynamicVoters.toVoterSet, VoterSet.fromMap): the record lists them in that order."""
    n = len(ids)
    first = 16
    while n > first * 0.75:
        first *= 2
    inserted = _java_hash_order(sorted(ids), first)
    wanted = int(n / 0.75 + 1.0)
    second = 1
    while second < wanted:
        second *= 2
    return _java_hash_order(inserted, second)


def voters_record_of(voters: Iterable[DynamicVoter], listener_name: str) -> VotersRecord:
    by_id = {v.node_id: v for v in voters}
    entries = []
    for n in _kafka_voter_order(list(by_id)):
        v = by_id[NodeId(n)]
        endpoint = Endpoint(listener_name.upper(), v.host, v.port)
        entries.append(VoterEntry(v.node_id, v.directory_id, (endpoint,), 0, 1))
    return VotersRecord(0, tuple(entries))


def write_bootstrap_checkpoint(
    partition_dir: Path, voters: VotersRecord, *, timestamp_ms: int
) -> Path:
    """The bootstrap checkpoint (offset 0, epoch 0) of a dynamic quorum, as Kafka's formatter
    writes it: its header batch and records stamped with the time of writing, which is also
    the header's last contained log timestamp."""
    with CheckpointWriter(
        partition_dir,
        BOOTSTRAP_SNAPSHOT_ID,
        timestamp_ms=timestamp_ms,
        last_contained_log_timestamp=timestamp_ms,
        kraft_version=KRAFT_VERSION_DYNAMIC,
        voters=voters,
    ) as writer:
        return writer.freeze()


# --------------------------------------------------------------------------- at start


@dataclass(frozen=True, slots=True)
class StatedVoters:
    """What a partition directory says of its voters: the kraft.version, and the voter sets
    its latest snapshot and its log state, by offset (the snapshot's at its end - 1, the
    bootstrap checkpoint's at -1), each with the voters' endpoints."""

    kraft_version: int
    history: tuple[tuple[Offset, VotersRecord], ...]

    @property
    def latest(self) -> VotersRecord | None:
        return self.history[-1][1] if self.history else None


def stated_voters(snapshot: SnapshotSummary | None, log: ReplicatedLog) -> StatedVoters:
    """The voter sets of the latest valid snapshot (`snapshot`) and of the log's Voters
    records from where that snapshot ends; the kraft.version the last of them implies.
    A control record that cannot be decoded raises CorruptRecordError (a KraftError)."""
    history: list[tuple[Offset, VotersRecord]] = []
    kraft_version = 0
    start = log.start_offset
    if snapshot is not None:
        kraft_version = snapshot.kraft_version
        if snapshot.voters is not None:
            history.append((Offset(snapshot.snapshot_id.offset - 1), snapshot.voters))
        start = max(start, snapshot.snapshot_id.offset)
    offset = start
    while offset < log.end_offset:
        result = log.read(Offset(offset), _SCAN_BYTES)
        data = result.data
        for position, header in iter_batches(data, verify=False):
            if not header.is_control:
                continue
            for record in decode_records(data, position, header):
                try:
                    kind = control_record_type(record)
                except CorruptRecordError:
                    continue  # a control record of a type KRaft does not know
                if kind not in _VOTER_KINDS:
                    continue  # LeaderChange and the rest say nothing of the voters
                control = decode_control_record(record)
                if isinstance(control, KRaftVersionRecord):
                    kraft_version = control.kraft_version
                elif isinstance(control, VotersRecord):
                    history.append((Offset(record.offset), control))
        if result.next_offset <= offset:
            break
        offset = result.next_offset
    return StatedVoters(kraft_version, tuple(history))
