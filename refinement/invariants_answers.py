"""Checkers of what a replica makes of the answers it gets, and of the outcome it owes each
client append while the append's records leave its log.

- AnswerEpochAdopted: a replica that handles an answer to one of its requests (Vote,
  BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) naming an epoch above its own, with
  any error but UNKNOWN_LEADER_EPOCH (an INVALID_VOTER_KEY or BROKER_NOT_AVAILABLE too), is in
  that epoch or a later one after the step: Kafka's KafkaRaftClient.maybeHandleCommonResponse
  transitions to the epoch (as a follower of the leader it names, or unattached) before it
  looks at the rest of any answer, a FetchSnapshot answer's included. A replica that is
  shutting down may ignore news of a newer leader in an EndQuorumEpoch answer (KIP-595: it is
  leaving). An answer the bounds check refused
  (MessageRefused) is not handled at all.
- UndecidedAppendHeld (kraft.core.commits): while a client append a replica accepted is not
  decided (AppendCommitted or AppendLost), the replica's log still holds the append's last
  record with the epoch it was accepted in. A truncation at or below that record, or the
  install of a fetched snapshot (which empties the log), decides it lost in the very step
  that drops it: the client hears of the loss then, not at some later high watermark, and a
  later record at that offset is never taken for it.
- ErrorAnswerDefaults: an answer a replica sends carries nothing in the fields Kafka 4.3.1
  leaves at their defaults. An error answer: a Vote answer grants nothing (every error path
  of KafkaRaftClient.handleVoteRequest builds it with voteGranted false); a Fetch answer
  (buildEmptyFetchResponse) has high watermark -1, no records, no diverging epoch and no
  snapshot id; a FetchSnapshot answer (RaftUtil.singletonFetchSnapshotResponse, the error
  set and nothing else) has size 0, position 0, no bytes and the snapshot id of no snapshot,
  which the core writes (-1, -1) (Kafka leaves FetchSnapshotResponseData.SnapshotId at its
  generated 0/0: its schema names no default; a receiver reads the error first either way).
  A Fetch answer without error carries at most one of records, a diverging epoch and a
  snapshot id (Kafka reads records only for a fetch position that is valid).
- AnswerNamesSendersLeader: a Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch or FetchSnapshot
  answer names the sender's epoch when it sent it and the leader it knew then, -1 when it knew
  none (Kafka's quorum.epoch() and quorum.leaderIdOrSentinel(), on error answers too). Seen
  from outside a step: the epoch lies between the sender's epochs before and after the step;
  when the step kept both its epoch and its leader (a replica never forgets its epoch's
  leader, so none was known in between either), the leader is the one it knew throughout.
- FetchAnswerPosition: a Fetch answer without error names the snapshot id, the diverging
  epoch or neither exactly as Kafka 4.3.1's leader would for that fetch position on that log
  (KafkaRaftClient.tryCompleteFetchRequest: the latest snapshot to a fetcher at offset 0
  unless it is the bootstrap checkpoint; else RaftLog.validateOffsetAndEpoch: the latest
  snapshot below the log start, at the log start with another epoch than the earliest
  snapshot's, or with an epoch older than it; else KafkaRaftLog.endOffsetForEpoch of the last
  fetched epoch, a diverging epoch when its epoch differs or it ends before the fetch
  offset). Computed from the simulator's copy of the leader's log (its epoch cache, answering
  as Kafka's LeaderEpochFileCache.endOffsetFor) and the snapshots the leader holds. Every
  Fetch answer, an error answer too, carries the sender's log start offset as it stands when
  the answer leaves (Kafka's buildFetchResponse sets RaftLog.startOffset() on each).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kraft.core.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    Message,
    VoteResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from refinement.invariants import Violation

ANSWER_EPOCH_ADOPTED = "AnswerEpochAdopted"
UNDECIDED_APPEND_HELD = "UndecidedAppendHeld"
ERROR_ANSWER_DEFAULTS = "ErrorAnswerDefaults"
ANSWER_NAMES_SENDERS_LEADER = "AnswerNamesSendersLeader"
FETCH_ANSWER_POSITION = "FetchAnswerPosition"

ANSWER_CHECKERS: tuple[str, ...] = (
    ANSWER_EPOCH_ADOPTED,
    UNDECIDED_APPEND_HELD,
    ERROR_ANSWER_DEFAULTS,
    ANSWER_NAMES_SENDERS_LEADER,
    FETCH_ANSWER_POSITION,
)

_ANSWERS = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
)
# The snapshot id of an error FetchSnapshot answer, written out here (not taken from the core).
_NO_SNAPSHOT_ID = OffsetAndEpoch(Epoch(-1), Offset(-1))
# The one error whose answer's epoch a replica need not adopt (Kafka: handled as stale).
_NOT_ADOPTING = ErrorCode.UNKNOWN_LEADER_EPOCH


def answer_epoch_adopted(
    node: NodeId,
    answer: Message,
    *,
    epoch_before: Epoch,
    epoch_after: Epoch,
    shutting_down: bool,
    refused: bool,
) -> Violation | None:
    """AnswerEpochAdopted for one step of `node` that handled `answer`."""
    if refused or not isinstance(answer, _ANSWERS):
        return None
    named = answer.leader_epoch
    if named <= epoch_before or epoch_after >= named or answer.error is _NOT_ADOPTING:
        return None
    if shutting_down and isinstance(answer, EndQuorumEpochResponse):
        return None
    return Violation(
        ANSWER_EPOCH_ADOPTED,
        f"node {node} in epoch {epoch_before} handled a {type(answer).__name__}"
        f" ({answer.error.name}) naming leader {answer.leader_id} in epoch {named}, and is"
        f" in epoch {epoch_after} after it (Kafka's maybeHandleCommonResponse moves to the"
        " answer's epoch first)",
    )


def undecided_append_held(
    node: NodeId,
    undecided: Iterable[tuple[int, Offset, Epoch]],
    epoch_at: Callable[[Offset], Epoch | None],
) -> Violation | None:
    """UndecidedAppendHeld after a step of `node` that truncated its log or installed a
    snapshot: `undecided` holds (request id, last offset, epoch) of each append its current
    incarnation accepted and has not decided (this step's decisions taken into account);
    `epoch_at` reads its log."""
    for rid, last, epoch in undecided:
        held = epoch_at(last)
        if held != epoch:
            where = "no record" if held is None else f"a record of epoch {held}"
            return Violation(
                UNDECIDED_APPEND_HELD,
                f"node {node} has not decided client append {rid} (last offset {last}, epoch"
                f" {epoch}), but its log holds {where} at {last}: the step that dropped the"
                " record must decide it lost (kraft.core.commits)",
            )
    return None


def error_answer_defaults(node: NodeId, dst: NodeId, answer: Message) -> Violation | None:
    """ErrorAnswerDefaults for one answer `node` sends to `dst`."""
    wrong = _off_default(answer)
    if wrong is None:
        return None
    return Violation(
        ERROR_ANSWER_DEFAULTS,
        f"node {node} sent {dst} a {type(answer).__name__} ({_error_name(answer)}) with"
        f" {wrong}, where Kafka 4.3.1 leaves the field at its default",
    )


def _error_name(answer: Message) -> str:
    error = getattr(answer, "error", None)
    return error.name if isinstance(error, ErrorCode) else "?"


def _off_default(answer: Message) -> str | None:
    """The first field of `answer` off Kafka's default, described, or None."""
    if isinstance(answer, VoteResponse):
        if answer.error is not ErrorCode.NONE and answer.vote_granted:
            return "the vote granted"
        return None
    if isinstance(answer, FetchResponse):
        carried = [
            name
            for name, present in (
                ("records", len(answer.records) > 0),
                (f"diverging epoch {answer.diverging_epoch}", answer.diverging_epoch is not None),
                (f"snapshot id {answer.snapshot_id}", answer.snapshot_id is not None),
            )
            if present
        ]
        if answer.error is not ErrorCode.NONE:
            if answer.high_watermark != -1:
                return f"high watermark {answer.high_watermark}"
            return carried[0] if carried else None
        return " and ".join(carried) if len(carried) > 1 else None
    if isinstance(answer, FetchSnapshotResponse) and answer.error is not ErrorCode.NONE:
        if answer.snapshot_id != _NO_SNAPSHOT_ID:
            return f"snapshot id {answer.snapshot_id}"
        if answer.size != 0 or answer.position != 0:
            return f"size {answer.size} and position {answer.position}"
        if len(answer.chunk) > 0:
            return f"{len(answer.chunk)} snapshot bytes"
    return None


def answer_names_senders_leader(
    node: NodeId,
    dst: NodeId,
    answer: Message,
    *,
    before: tuple[Epoch, NodeId | None],
    after: tuple[Epoch, NodeId | None],
) -> Violation | None:
    """AnswerNamesSendersLeader for one answer `node` sent to `dst` in a step that took it
    from (epoch, leader) `before` to `after`."""
    if not isinstance(answer, _ANSWERS):
        return None
    named = (answer.leader_epoch, answer.leader_id)
    if not before[0] <= answer.leader_epoch <= after[0]:
        why = f"epoch {before[0]} before the step and {after[0]} after it"
    elif before == after and answer.leader_id != (-1 if after[1] is None else after[1]):
        why = f"leader {after[1]} in epoch {after[0]} throughout the step"
    else:
        return None
    return Violation(
        ANSWER_NAMES_SENDERS_LEADER,
        f"node {node} sent {dst} a {type(answer).__name__} ({_error_name(answer)}) naming"
        f" leader {named[1]} in epoch {named[0]}, with {why} (Kafka names"
        " quorum.leaderIdOrSentinel() and quorum.epoch())",
    )


# Kafka's Snapshots.BOOTSTRAP_SNAPSHOT_ID, written out here (not taken from the core).
_BOOTSTRAP_SNAPSHOT_ID = OffsetAndEpoch(Epoch(0), Offset(0))
# The offset of Kafka's LeaderEpochFileCache.endOffsetFor answer for an epoch it cannot place.
_UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class LeaderLog:
    """What Kafka's leader reads to answer a Fetch: its log start and end offsets, its
    snapshots (oldest first), the epoch of its last record (None: it holds no record), and
    `end_offset_for`, its LeaderEpochFileCache.endOffsetFor(epoch, log end offset) (the
    undefined answer's offset is -1)."""

    start: Offset
    end: Offset
    snapshots: tuple[OffsetAndEpoch, ...]
    last_epoch: Epoch | None
    end_offset_for: Callable[[Epoch], OffsetAndEpoch]


def _end_offset_for_epoch(log: LeaderLog, epoch: Epoch) -> OffsetAndEpoch:
    """KafkaRaftLog.endOffsetForEpoch: UnifiedLog's answer (none when the cache cannot place
    the epoch: then the log end in lastFetchedEpoch()), the earliest snapshot's id in place of
    an answer that ends exactly there in the epoch asked."""
    found = log.end_offset_for(epoch)
    if found.offset == _UNDEFINED_EPOCH_OFFSET:
        if log.last_epoch is not None:
            last = log.last_epoch
        else:  # lastFetchedEpoch() of a log holding no record: its latest snapshot's
            last = log.snapshots[-1].epoch if log.snapshots else Epoch(0)
        return OffsetAndEpoch(last, log.end)
    earliest = log.snapshots[0] if log.snapshots else None
    if earliest is not None and found.offset == earliest.offset and found.epoch == epoch:
        return earliest
    return found


def kafka_fetch_position(
    log: LeaderLog, fetch_offset: Offset, last_fetched_epoch: Epoch
) -> tuple[OffsetAndEpoch | None, OffsetAndEpoch | None]:
    """(snapshot id, diverging epoch) of Kafka 4.3.1's answer without error to a Fetch at
    `fetch_offset` after `last_fetched_epoch` (tryCompleteFetchRequest, then
    RaftLog.validateOffsetAndEpoch); (None, None): the position is valid."""
    latest = log.snapshots[-1] if log.snapshots else None
    if fetch_offset == 0 and latest is not None and latest != _BOOTSTRAP_SNAPSHOT_ID:
        return latest, None
    if log.start == 0 and fetch_offset == 0:
        return None, None
    if log.snapshots:
        earliest = log.snapshots[0]
        if (
            fetch_offset < log.start
            or (fetch_offset == log.start and last_fetched_epoch != earliest.epoch)
            or last_fetched_epoch < earliest.epoch
        ):
            return latest, None
    found = _end_offset_for_epoch(log, last_fetched_epoch)
    if found.epoch != last_fetched_epoch or found.offset < fetch_offset:
        return None, found
    return None, None


def fetch_answer_log_start(
    node: NodeId, dst: NodeId, answer: FetchResponse, log_start: Offset
) -> Violation | None:
    """FetchAnswerPosition's log start: `answer` carries `log_start`, the sender's log
    start when it left."""
    if answer.log_start_offset == log_start:
        return None
    return Violation(
        FETCH_ANSWER_POSITION,
        f"node {node} sent {dst} a Fetch answer ({answer.error.name}) naming log start"
        f" {answer.log_start_offset}, but its log starts at {log_start} (Kafka's"
        " buildFetchResponse sets RaftLog.startOffset())",
    )


def fetch_answer_position(
    node: NodeId, dst: NodeId, request: FetchRequest, answer: FetchResponse, log: LeaderLog
) -> Violation | None:
    """FetchAnswerPosition for one Fetch answer `node` sent `dst` for `request`, with its
    log as `log` when the answer left (the log start and snapshots as when it judged the
    Fetch)."""
    if answer.error is not ErrorCode.NONE:
        return None
    want = kafka_fetch_position(log, request.fetch_offset, request.last_fetched_epoch)
    got = (answer.snapshot_id, answer.diverging_epoch)
    if got == want:
        return None
    return Violation(
        FETCH_ANSWER_POSITION,
        f"leader {node} answered {dst}'s Fetch at offset {request.fetch_offset} after epoch"
        f" {request.last_fetched_epoch} with snapshot id {got[0]} and diverging epoch {got[1]};"
        f" Kafka's leader on that log (start {log.start}, end {log.end}, snapshots"
        f" {list(log.snapshots)}) names snapshot id {want[0]} and diverging epoch {want[1]}",
    )
