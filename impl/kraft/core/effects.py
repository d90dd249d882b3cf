"""Effects: what the driver must do for the replica, in list order.

Ordering is the durability contract: a driver performs the effects of a step in the order
given, and everything before a `PersistElectionState` or `FlushLog` is durable before any
effect after it is performed (in particular before a `Send`, an `AppendResult` or an append's
outcome). A driver may merge consecutive flushes across steps (group commit) as long as it keeps
that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.control_records import Endpoint
from kraft.core.messages import Message, Records
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey


@dataclass(frozen=True, slots=True)
class ElectionState:
    """What the quorum-state file holds: the epoch, the leader if known, the vote if cast."""

    epoch: Epoch
    leader_id: NodeId | None = None
    voted_for: ReplicaKey | None = None


@dataclass(frozen=True, slots=True)
class PersistElectionState:
    state: ElectionState


@dataclass(frozen=True, slots=True)
class AppendToLog:
    """Append these encoded batches, whose offsets the replica already assigned.

    `leader_encoded`: the replica encoded `data` itself, as leader (one batch of its epoch), so
    the log need not parse and CRC-check it again; batches fetched from a leader are False and
    fully validated."""

    first_offset: Offset
    last_offset: Offset
    epoch: Epoch
    data: Records = field(compare=False)
    leader_encoded: bool = False


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Remove every record at or after `offset` (divergence, KIP-595)."""

    offset: Offset


@dataclass(frozen=True, slots=True)
class FlushLog:
    """Make every appended record durable before the effects that follow."""


@dataclass(frozen=True, slots=True)
class Send:
    dst: NodeId
    message: Message
    # For a response: the `reply_to` token of the request it answers (None for a Receive that
    # carried none, as in hand-written tests; the simulator gives every request one).
    # The node routes the answer by it, never by the node id the request claimed.
    reply_to: int | None = None


@dataclass(frozen=True, slots=True)
class HighWatermarkMoved:
    high_watermark: Offset


@dataclass(frozen=True, slots=True)
class AppendResult:
    """The immediate answer to a ClientAppend: accepted at [first, last] in `epoch`, or refused
    with the leader to ask instead. An accepted append's outcome follows later, as
    AppendCommitted or AppendLost (kraft.core.commits)."""

    request_id: int
    error: ErrorCode
    first_offset: Offset | None = None
    last_offset: Offset | None = None
    epoch: Epoch | None = None
    leader_id: NodeId | None = None


@dataclass(frozen=True, slots=True)
class AppendCommitted:
    """An append this replica accepted (AppendResult with NONE) is committed: its high
    watermark passed `last_offset` while its log held `epoch` there (kraft.core.commits)."""

    request_id: int
    first_offset: Offset
    last_offset: Offset
    epoch: Epoch


@dataclass(frozen=True, slots=True)
class AppendLost:
    """An append this replica accepted is not known to be committed: its log was truncated at
    or below `last_offset`, or holds another epoch there (kraft.core.commits)."""

    request_id: int
    first_offset: Offset
    last_offset: Offset
    epoch: Epoch


@dataclass(frozen=True, slots=True)
class StateChanged:
    old: ReplicaState
    new: ReplicaState
    epoch: Epoch


@dataclass(frozen=True, slots=True)
class ActionTaken:
    """Marks that the spec action `action` happened in this step (for traces and coverage);
    AddVoter / RemoveVoter name the voter added or removed."""

    action: Action
    voter: ReplicaKey | None = None


@dataclass(frozen=True, slots=True)
class SnapshotRequired:
    """The leader's log starts after a snapshot (its Fetch answer named `snapshot_id`): this
    replica, built without a SnapshotSource, cannot fetch snapshots and so cannot progress.
    Emitted once per distinct snapshot id; the replica keeps fetching slowly."""

    leader_id: NodeId
    snapshot_id: OffsetAndEpoch


# ---------------------------------------------------------------- snapshots (KIP-630)
# A replica built with a SnapshotSource (kraft.core.snapshots) takes part in KIP-630; the
# driver performs these effects in order like the log's, and answers some with an event.


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    """CreateSnapshot allowed: write the state machine's snapshot at `snapshot_id` (its state
    after every record below `snapshot_id.offset`, a committed offset), durably, then report
    it with the event SnapshotWritten. Until then the replica does not count on it."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class SnapshotRefused:
    """CreateSnapshot at `end_offset` refused (past the high watermark, not after the latest
    snapshot, not on a batch boundary...): nothing to write. For the log."""

    end_offset: Offset
    reason: str


@dataclass(frozen=True, slots=True)
class AdvanceLogStartOffset:
    """The log now starts at `snapshot_id.offset`, the end of a snapshot the replica holds:
    delete the log's segments wholly below it and every snapshot older than `snapshot_id`
    (KIP-630 "When to Increase the LogStartOffset"). Durable before later effects."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class WriteSnapshotChunk:
    """A chunk of the snapshot being fetched from the leader: write `data` at byte `position`
    of its temporary `.part` file (position 0 starts a fresh one). `size` is the whole
    snapshot's size."""

    snapshot_id: OffsetAndEpoch
    position: int
    size: int
    data: Records = field(compare=False)


@dataclass(frozen=True, slots=True)
class ValidateSnapshot:
    """Every chunk of the snapshot is written: check the `.part` file (exactly `size` bytes,
    every batch's CRC, header first, footer last) and fsync it, then answer with the event
    SnapshotValidated. Nothing is installed yet."""

    snapshot_id: OffsetAndEpoch
    size: int


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """The validated snapshot becomes the replica's: rename the `.part` into place (durably),
    truncate the log fully and start it at `snapshot_id.offset`, delete older snapshots, hand
    the snapshot to the state machine. Durable before later effects (the next Fetch starts
    at its end)."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class DiscardSnapshotFetch:
    """The snapshot transfer was abandoned (leader change, leader lost the snapshot, failed
    validation): remove its `.part` file, if any."""

    snapshot_id: OffsetAndEpoch


@dataclass(frozen=True, slots=True)
class CheckVoterVersions:
    """AddRaftVoter's probe (Kafka's AddVoterHandler): send ApiVersions to the replica being
    added, at its endpoint on the quorum's listener among `endpoints`, and answer with the
    event VoterVersionsChecked (its error, or the kraft.version range it supports). The
    change stays pending meanwhile; unanswered, it times out after request_timeout_ms."""

    voter: ReplicaKey
    endpoints: tuple[Endpoint, ...]


@dataclass(frozen=True, slots=True)
class ShutdownComplete:
    """The replica finished its graceful shutdown; the driver may stop it."""


@dataclass(frozen=True, slots=True)
class MessageRefused:
    """A message from `src` carried a value this replica must not adopt (kraft.core.bounds);
    it was answered with INVALID_REQUEST (requests) or dropped (responses). For the log."""

    src: NodeId
    kind: str
    reason: str


@dataclass(frozen=True, slots=True)
class ElectionsExhausted:
    """This replica holds the largest encodable epoch and so can no longer stand for election
    (it still votes and follows). For the log: an operator must intervene."""

    epoch: Epoch


# The effects a driver performs on snapshot files and the state machine (KIP-630).
SnapshotEffect = (
    WriteSnapshot
    | SnapshotRefused
    | AdvanceLogStartOffset
    | WriteSnapshotChunk
    | ValidateSnapshot
    | InstallSnapshot
    | DiscardSnapshotFetch
)

Effect = (
    PersistElectionState
    | AppendToLog
    | TruncateLog
    | FlushLog
    | Send
    | HighWatermarkMoved
    | AppendResult
    | AppendCommitted
    | AppendLost
    | StateChanged
    | ActionTaken
    | SnapshotRequired
    | SnapshotEffect
    | ShutdownComplete
    | CheckVoterVersions
    | MessageRefused
    | ElectionsExhausted
)
