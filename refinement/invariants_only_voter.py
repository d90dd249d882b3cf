"""Checkers of the only voter of a voter set (a single-voter quorum, as Apache Kafka 4.x runs
it), on what the simulator sees of a replica after a step (its view: state, epoch, HWM, log
end, voter set):

- OnlyVoterLeadsAtStart: a replica that starts as the only voter of its voter set is the
  Leader when start() returns, unless its epoch is already MAX_EPOCH. Kafka's
  KafkaRaftClient.initialize: an only voter that comes back Unattached (Voted too), Follower
  or Resigned becomes Prospective at once, and a Candidate counts its own vote
  (onBecomeCandidate); its pre-vote and its vote are a majority of one, so it leads before
  anything else happens, with no election timeout to wait out.
- OnlyVoterCommitsAtOnce: a Leader that is the only voter of its voter set has its high
  watermark at its log end after every step. Kafka's leader updates its end offset after
  every append it writes (flushLeaderLog: updateLeaderEndOffsetAndTimestamp, then
  LeaderState.updateLocalState), and with one voter the offset a majority reached is its own:
  its epoch's LeaderChange record, and every batch after it, is committed the moment it is
  written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.core.vocabulary import ReplicaState
from kraft.ids import MAX_EPOCH, NodeId
from refinement.invariants import Violation

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaViewLike

ONLY_VOTER_LEADS_AT_START = "OnlyVoterLeadsAtStart"
ONLY_VOTER_COMMITS_AT_ONCE = "OnlyVoterCommitsAtOnce"

ONLY_VOTER_CHECKERS: tuple[str, ...] = (ONLY_VOTER_LEADS_AT_START, ONLY_VOTER_COMMITS_AT_ONCE)


def is_only_voter(view: ReplicaViewLike) -> bool:
    """The replica is a voter and its voter set (the latest it knows) names no one else."""
    voters: tuple[NodeId, ...] = getattr(view, "voters", ())
    return bool(getattr(view, "is_voter", False)) and len(voters) == 1


def only_voter_leads_at_start(node: NodeId, view: ReplicaViewLike) -> Violation | None:
    """OnlyVoterLeadsAtStart, on the view start() left."""
    if not is_only_voter(view) or view.epoch >= MAX_EPOCH or view.state is ReplicaState.LEADER:
        return None
    return Violation(
        ONLY_VOTER_LEADS_AT_START,
        f"node {node}, the only voter of its voter set, started {view.state.value} in epoch"
        f" {view.epoch}: Kafka's initialize makes it leader at once",
    )


def only_voter_commits_at_once(node: NodeId, view: ReplicaViewLike) -> Violation | None:
    """OnlyVoterCommitsAtOnce, on the view after a step."""
    if view.state is not ReplicaState.LEADER or not is_only_voter(view):
        return None
    if view.high_watermark == view.end_offset:
        return None
    return Violation(
        ONLY_VOTER_COMMITS_AT_ONCE,
        f"leader {node} (epoch {view.epoch}), the only voter of its voter set, has HWM"
        f" {view.high_watermark} below its log end {view.end_offset}",
    )
