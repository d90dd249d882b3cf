"""Checkers of KIP-630's per-step rules on the replica that holds snapshots, stated from what
the simulator sees (its own copy of each node's log and snapshots, the messages, the effects),
never from the core's bookkeeping:

- SnapshotTakenWhenAllowed: asked CreateSnapshot at an offset that Kafka's createNewSnapshot
  allows (at most the high watermark, after the latest snapshot and the log start, the record
  before it in the log, on a batch boundary), the replica writes it (WriteSnapshot of that
  offset, in the epoch of the record before it), and refuses only an offset that is not
  allowed.
- LogStartFollowsLeader: a follower that accepts a Fetch answer of its leader (a successful
  answer that names no snapshot and no divergence, followed at once by its next Fetch) moves
  its log start up to the largest snapshot it holds at or below the leader's log start, when
  that is above its own (KIP-630: "followers ... increase their log start offset to the value
  sent on the fetch response as long as [they have] a snapshot with an end offset greater
  than or equal to it"; the largest such snapshot, as the core's KIP_630 policy, the
  simulator's).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from refinement.invariants import Violation

SNAPSHOT_TAKEN_WHEN_ALLOWED = "SnapshotTakenWhenAllowed"
LOG_START_FOLLOWS_LEADER = "LogStartFollowsLeader"

SNAPSHOT_RULE_CHECKERS: tuple[str, ...] = (SNAPSHOT_TAKEN_WHEN_ALLOWED, LOG_START_FOLLOWS_LEADER)


def create_snapshot_problem(
    offset: Offset,
    *,
    hwm: Offset | None,
    newest: Offset | None,
    log_start: Offset,
    log_end: Offset,
    batch_aligned: bool,
) -> str | None:
    """Why Kafka's createNewSnapshot refuses a snapshot ending at `offset`, or None: the
    high watermark, the newest snapshot the replica holds, its log start and end, and whether
    a batch starts at `offset` (or the log ends there)."""
    if hwm is None or offset > hwm:
        return f"past the high watermark {hwm}"
    if newest is not None and offset <= newest:
        return f"not after the latest snapshot (ending at {newest})"
    if offset <= log_start:
        return f"not after the log start {log_start}"
    if offset > log_end:
        return f"past the log end {log_end}"
    if not batch_aligned:
        return "inside a batch"
    return None


def snapshot_taken_when_allowed(
    node: NodeId,
    offset: Offset,
    problem: str | None,
    *,
    written: OffsetAndEpoch | None,
    refused: str | None,
    epoch_before: Epoch | None,
) -> Violation | None:
    """The answer to CreateSnapshot(`offset`): `written` (the WriteSnapshot's id) or `refused`
    (SnapshotRefused's reason), given `problem` (create_snapshot_problem) and the epoch of the
    record before `offset` in the node's log."""
    if problem is None:
        if written is None:
            return Violation(
                SNAPSHOT_TAKEN_WHEN_ALLOWED,
                f"node {node} refused CreateSnapshot at {offset}, which is allowed"
                f" (refusal: {refused})",
            )
        if written != OffsetAndEpoch(epoch_before or Epoch(0), offset):
            return Violation(
                SNAPSHOT_TAKEN_WHEN_ALLOWED,
                f"node {node} asked CreateSnapshot at {offset} wrote {written}, not the id"
                f" ({offset}, epoch {epoch_before} of the record before it)",
            )
    elif written is not None:
        return Violation(
            SNAPSHOT_TAKEN_WHEN_ALLOWED,
            f"node {node} wrote snapshot {written} asked at {offset}, which is {problem}",
        )
    return None


def log_start_follows_leader(
    node: NodeId,
    leader: NodeId,
    leader_log_start: Offset,
    log_start: Offset,
    held: Iterable[OffsetAndEpoch],
) -> Violation | None:
    """After `node` accepted a Fetch answer of `leader` carrying `leader_log_start`: its log
    start (`log_start`) is not below a snapshot it holds (`held`) at or below the leader's."""
    behind = sorted(
        (s for s in held if log_start < s.offset <= leader_log_start), key=lambda s: s.offset
    )
    if behind:
        return Violation(
            LOG_START_FOLLOWS_LEADER,
            f"follower {node} accepted a Fetch answer of leader {leader} whose log starts at"
            f" {leader_log_start}, but its own log still starts at {log_start} although it"
            f" holds snapshot {behind[-1]}",
        )
    return None
