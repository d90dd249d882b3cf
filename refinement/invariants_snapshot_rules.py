"""Checkers of KIP-630's per-step rules on the replica that holds snapshots, stated from what
the simulator sees (its own copy of each node's log and snapshots, the messages, the effects),
never from the core's bookkeeping:

- SnapshotTakenWhenAllowed: asked CreateSnapshot at an offset that Kafka's createNewSnapshot
  allows (at most the high watermark, after the log start, the record before it in the log,
  on a batch boundary) and that is after the latest snapshot (kraft's own rule), the replica
  writes it (WriteSnapshot of that offset, in the epoch of the record before it), and refuses
  only an offset that is not allowed.
- LogStartFollowsLeader: a follower that accepts a Fetch answer of its leader (a successful
  answer that names no snapshot and no divergence, followed at once by its next Fetch) moves
  its log start up to the largest snapshot it holds at or below the leader's log start, when
  that is above its own (KIP-630: "followers ... increase their log start offset to the value
  sent on the fetch response as long as [they have] a snapshot with an end offset greater
  than or equal to it"; the largest such snapshot, as the core's KIP_630 policy, the
  simulator's).
- LogStartExact: after every step of a replica, its log start is exactly what KIP-630's rule,
  recomputed from the simulator's view, leaves it at (`leader_log_start_after`,
  `follower_log_start_after`, `log_start_exact`). A leader applies the rule each time it takes
  a Fetch (a Fetch it answers with no error, divergence or snapshot id, or holds; a held one
  again when it answers it) and each time it takes a snapshot written (Kafka's onSnapshotFrozen
  adds it; our SnapshotRole.on_snapshot_written also applies the rule): its log start moves to
  the largest snapshot at or below the lowest fetch offset of the replicas it took a Fetch from
  within the fetch timeout (its log end if none), or to its latest snapshot once its log start
  has not moved for `metadata.start.offset.lag.time.max.ms`; a follower, on an answer of its
  leader, to the largest snapshot it holds at or below the leader's log start; on any other
  step the log start stays where it was (a snapshot installed is the transfer's checkers').

  Where this deviates from Kafka 4.3.1 (javap on kafka-raft-4.3.1.jar): Kafka has neither
  rule. Its log start moves only in `KafkaRaftLog.deleteBeforeSnapshot(id, reason)`
  (`UnifiedLog.maybeIncrementLogStartOffset` to a snapshot it holds, above its log start, at
  most its latest), which only `KafkaRaftLog.maybeClean` calls (`cleanSnapshotsRetentionSize`,
  `cleanSnapshotsRetentionMs`: while the older of two consecutive snapshots breaches
  `metadata.max.retention.bytes` / `.ms`, the log start moves to the newer), and
  `KafkaRaftClient.poll` runs that every 60 s (`RaftMetadataLogCleanerManager`, 60000 ms);
  it never reads the followers' fetch offsets, and a Kafka follower ignores the leader's log
  start in a Fetch answer (KafkaRaftClient only writes it: `setLogStartOffset`). The rule
  checked here is the seed's (KIP-630 "When to Increase the LogStartOffset"), which the
  simulator's replicas run (`LogStartPolicy.KIP_630`, ReplicaConfig's default); the node runs
  Kafka's retention capped by it (`LogStartPolicy.RETENTION`). That deviation is in the
  README's deviations table, row "when the log start moves" (Kafka's retention decides when,
  KIP-630's rule caps how far, "Kafka has neither the rule nor the key"; a follower's log start
  no further than its leader's; the simulator runs the rule alone). The rule is applied only
  on the steps above: no timer moves a log start, so once the lag time passed the leader moves
  at its next Fetch or snapshot taken.

  Exact on a static voter set: the simulator keys each Fetch a leader takes as the leader's
  progress is keyed in Kafka's LeaderState (a voter's by its id when the replica it names is
  that voter, any other by the replica it names). On a dynamic one, where a voter change moves
  progress between voters and observers, the fetch offsets counted are every Fetch taken
  within the fetch timeout, a superset of the leader's, so the log start is checked to reach
  at least what that gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from refinement.invariants import Violation

SNAPSHOT_TAKEN_WHEN_ALLOWED = "SnapshotTakenWhenAllowed"
LOG_START_FOLLOWS_LEADER = "LogStartFollowsLeader"
LOG_START_EXACT = "LogStartExact"

SNAPSHOT_RULE_CHECKERS: tuple[str, ...] = (
    SNAPSHOT_TAKEN_WHEN_ALLOWED,
    LOG_START_FOLLOWS_LEADER,
    LOG_START_EXACT,
)


def create_snapshot_problem(
    offset: Offset,
    *,
    hwm: Offset | None,
    newest: Offset | None,
    log_start: Offset,
    log_end: Offset,
    batch_aligned: bool,
) -> str | None:
    """Why a snapshot may not end at `offset` (Kafka's createNewSnapshot, and kraft's rule
    that it come after the newest), or None: the high watermark, the newest snapshot the
    replica holds, its log start and end, and whether a batch starts at `offset` (or the log
    ends there)."""
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


def leader_log_start_after(
    start: Offset,
    *,
    held: Sequence[Offset],
    end: Offset,
    fetch_offsets: Iterable[Offset],
    lag_passed: bool,
) -> Offset:
    """Where one application of KIP-630's leader rule leaves a log start at `start`: the
    snapshots the leader holds end at `held`, its log at `end`; `fetch_offsets` are those of
    the replicas it took a Fetch from within the fetch timeout; `lag_passed`: its log start
    has not moved for metadata.start.offset.lag.time.max.ms. Never lower than `start`."""
    above = [o for o in held if o > start]
    if not above:
        return start
    if lag_passed:
        return max(above)
    reached = min(fetch_offsets, default=end)
    return max((o for o in above if o <= reached), default=start)


def follower_log_start_after(
    start: Offset, *, held: Iterable[Offset], leader_log_start: Offset
) -> Offset:
    """Where a follower's log start at `start` goes on an answer of its leader whose log
    starts at `leader_log_start`: the largest snapshot it holds (`held`) at or below that,
    if above `start`."""
    return max((o for o in held if start < o <= leader_log_start), default=start)


def log_start_exact(
    node: NodeId,
    step: str,
    *,
    before: Offset,
    after: Offset,
    allowed: Sequence[Offset],
    at_least: Offset | None = None,
) -> Violation | None:
    """LogStartExact on one step of `node` (`step` says what it was and what the rule
    gave): its log start went from `before` to `after`, which must be one of `allowed` (the
    rule is exact), or, with `at_least` (a bound only), at least that and never below
    `before`."""
    if at_least is not None:
        if after >= max(at_least, before):
            return None
        want = f"at least {max(at_least, before)}"
    elif after in allowed:
        return None
    else:
        want = " or ".join(str(o) for o in sorted(set(allowed)))
    return Violation(
        LOG_START_EXACT,
        f"node {node} {step}: its log start went from {before} to {after}, where KIP-630's"
        f" rule says {want}",
    )
