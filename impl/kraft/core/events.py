"""Events: everything that can happen to a replica. Time arrives inside events, never read."""

from __future__ import annotations

from dataclasses import dataclass

from kraft.control_records import VotersRecord
from kraft.core.messages import Message, Request
from kraft.errors import ErrorCode
from kraft.ids import NO_PRODUCER, NodeId, Offset, OffsetAndEpoch, ProducerId, ReplicaKey
from kraft.records import KeyValue


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; the replica checks its timers against `now_ms`."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class Receive:
    """A message arrived from `src`. For a response, `in_reply_to` is the request it answers
    when the driver knows it (the node matches correlation ids; the simulator tags it)."""

    now_ms: int
    src: NodeId
    message: Message
    in_reply_to: Request | None = None
    # For a request: an opaque token the driver chose (its connection and correlation id);
    # the core hands it back on the Send that answers this request, however much later.
    reply_to: int | None = None


@dataclass(frozen=True, slots=True)
class SendFailed:
    """A request could not be delivered (connection refused, timed out). `broken`: the
    driver's connection to `dst` was refused, reset or closed by the other end (not a timeout,
    not closed by this node): a follower hearing so of its leader stands for election early
    (kraft.core.follower)."""

    now_ms: int
    dst: NodeId
    request: Request
    broken: bool = False


@dataclass(frozen=True, slots=True)
class ClientAppend:
    """A client asks to append these records (key and value, either may be null); answered
    by an AppendResult effect."""

    now_ms: int
    records: tuple[KeyValue, ...]
    request_id: int = 0
    # An idempotent client's id and the sequence number of its first record (kraft.core.producers);
    # a resend with the same pair is answered with the offsets the first one got.
    producer: ProducerId = NO_PRODUCER
    sequence: int = -1


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Graceful shutdown: a leader resigns with EndQuorumEpoch (KIP-595)."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class CreateSnapshot:
    """The state machine asks to snapshot its state at `end_offset` (what it applied, KIP-630
    "When to Snapshot" is its policy). The replica answers WriteSnapshot if a snapshot may be
    taken there (a committed offset, never past the high watermark), else SnapshotRefused."""

    now_ms: int
    end_offset: Offset


@dataclass(frozen=True, slots=True)
class SnapshotWritten:
    """The snapshot a WriteSnapshot asked for is durable: the replica now holds it (and may
    advance its log start to it)."""

    now_ms: int
    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class SnapshotValidated:
    """The driver's answer to ValidateSnapshot. `valid`: the `.part` file is a whole, intact
    snapshot with that id; `voters`: the voter set its Voters record holds (None: it holds
    none, the static voters apply), and `voters_record` that record itself (with the voters'
    endpoints, KIP-853), when the driver has it. Invalid: `reason` says why; the transfer
    starts over."""

    now_ms: int
    snapshot_id: OffsetAndEpoch
    valid: bool
    voters: tuple[ReplicaKey, ...] | None = None
    reason: str = ""
    voters_record: VotersRecord | None = None


@dataclass(frozen=True, slots=True)
class DeleteBeforeSnapshot:
    """The driver's retention policy (Kafka's `metadata.max.retention.bytes` / `.ms`, the
    cleaning of KafkaRaftLog) asks to delete what lies before the snapshot `snapshot_id`: to
    move the log start up to it. The replica moves it at most that far, and only as far as
    KIP-630's rule allows (kraft.core.snapshots); what it cannot do now it does once allowed."""

    now_ms: int
    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class VoterVersionsChecked:
    """The driver's answer to CheckVoterVersions (KIP-853, Kafka's AddVoterHandler): the
    ApiVersions answer of the replica `voter_id` being added, its error (NONE, or the error
    of a request that failed or timed out) and the kraft.version range it supports (None:
    its ApiVersions answer lists no kraft.version feature)."""

    now_ms: int
    voter_id: NodeId
    error: ErrorCode
    kraft_versions: tuple[int, int] | None = None


Event = (
    Tick
    | Receive
    | SendFailed
    | ClientAppend
    | Shutdown
    | CreateSnapshot
    | SnapshotWritten
    | SnapshotValidated
    | DeleteBeforeSnapshot
    | VoterVersionsChecked
)
