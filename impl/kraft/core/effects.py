"""Effects: what the driver must do for the replica, in list order.

Ordering is the durability contract: a driver performs the effects of a step in the order
given, and everything before a `PersistElectionState` or `FlushLog` is durable before any
effect after it is performed (in particular before a `Send`, an `AppendResult` or an append's
outcome). A driver may merge consecutive flushes across steps (group commit) as long as it keeps
that order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    # For a response: the `reply_to` token of the request it answers (None in the simulator).
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
    """Marks that the spec action `action` happened in this step (for traces and coverage)."""

    action: Action


@dataclass(frozen=True, slots=True)
class SnapshotRequired:
    """The leader's log starts after a snapshot (its Fetch answer named `snapshot_id`): this
    replica cannot catch up from the log and, until KIP-630 snapshot fetching exists, cannot
    progress. Emitted once per distinct snapshot id; the replica keeps fetching slowly."""

    leader_id: NodeId
    snapshot_id: OffsetAndEpoch


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
    | ShutdownComplete
    | MessageRefused
    | ElectionsExhausted
)
