"""When the retention policy's request moves the log start (LogStartPolicy.RETENTION, the
node's: kraft.core.snapshots.SnapshotRole.maybe_advance_log_start and
on_delete_before_snapshot).

- A DeleteBeforeSnapshot moves the log start in the step that handles it, as far as KIP-630's
  rule allows right then, not at the next Fetch. That matches Kafka 4.3.1: KafkaRaftClient.poll
  runs RaftMetadataLogCleanerManager.maybeClean, whose cleaner is RaftLog::maybeClean, and
  KafkaRaftLog.maybeClean calls deleteBeforeSnapshot, which moves the log start right away
  (UnifiedLog.maybeIncrementLogStartOffset). The step takes the spec's AdvanceLogStartOffset
  action, which its trace line names.
- A follower's bound is the log start in its leader's last Fetch answer. The bound is kept
  across steps that bring no answer, such as a DeleteBeforeSnapshot.
- A replica that is not following has no such bound. An example is a replica that went
  Prospective when its leader's fetch timeout ran out (it still names that leader, KIP-996).
  Asked to delete, it keeps its log start, because the next leader's log may start lower (see
  test_snapcfg_survivor_scenarios, where it starts at 0). Kafka's followers never read the
  leader's log start (README, the "when the log start moves" deviation), so this is the
  project's rule.
"""

from __future__ import annotations

from scenario_harness import RetentionCluster, elect, snapshot_everywhere

from kraft.core.effects import ActionTaken, AdvanceLogStartOffset
from kraft.core.events import DeleteBeforeSnapshot
from kraft.core.vocabulary import Action, ReplicaState

S = ReplicaState


def test_a_leaders_delete_before_snapshot_moves_its_log_start_in_that_step() -> None:
    """Every replica holds snapshot e1 and has fetched past it. The leader's retention asks
    for e1, and that one step moves the log start to e1 and takes the AdvanceLogStartOffset
    action."""
    c = RetentionCluster(3, seed=23, snapshots=True)
    lead = elect(c)
    e1 = snapshot_everywhere(c, lead, 5)
    assert c.view(lead).log_start_offset == 0  # retention asked for nothing yet
    effects = c.step(lead, DeleteBeforeSnapshot(c.now, e1))
    assert AdvanceLogStartOffset(e1) in effects
    assert ActionTaken(Action.ADVANCE_LOG_START_OFFSET) in effects
    assert c.view(lead).log_start_offset == e1.offset


def test_a_followers_delete_before_snapshot_moves_it_to_its_leaders_log_start_at_once() -> None:
    """The leader's log start moved to e1, and both followers heard it in Fetch answers.
    Then each follower's own retention asks for e1. That step brings no answer, and it moves
    the follower's log start to e1: the leader's log start heard earlier is still its bound."""
    c = RetentionCluster(3, seed=23, snapshots=True)
    lead = elect(c)
    e1 = snapshot_everywhere(c, lead, 5)
    c.step(lead, DeleteBeforeSnapshot(c.now, e1))
    c.run(c.now + 1000)  # the followers hear log start e1 in their leader's answers
    for i in (i for i in c.nodes if i != lead):
        assert c.view(i).log_start_offset == 0  # their retention asked for nothing yet
        effects = c.step(i, DeleteBeforeSnapshot(c.now, e1))
        assert AdvanceLogStartOffset(e1) in effects, i
        assert c.view(i).log_start_offset == e1.offset


def test_a_replica_that_is_not_following_keeps_its_log_start_when_asked_to_delete() -> None:
    """The leader moved its log start to e1 and then crashed. A follower that heard e1 from
    it times out and becomes Prospective. Its retention then asks for e1, and the log start
    stays at 0 (e1 was its leader's, and it is no longer following)."""
    c = RetentionCluster(3, seed=23, snapshots=True)
    lead = elect(c)
    e1 = snapshot_everywhere(c, lead, 5)
    c.step(lead, DeleteBeforeSnapshot(c.now, e1))
    c.run(c.now + 1000)  # the followers hear log start e1 in their leader's answers
    c.crash(lead)
    c.run_until(lambda: any(c.view(i).state is not S.FOLLOWER for i in c.nodes if i != lead),
                step_ms=1)  # fmt: skip
    [moved] = [i for i in c.nodes if i != lead and c.view(i).state is not S.FOLLOWER]
    assert c.view(moved).state is S.PROSPECTIVE
    effects = c.step(moved, DeleteBeforeSnapshot(c.now, e1))
    assert not any(isinstance(e, AdvanceLogStartOffset) for e in effects)
    assert c.view(moved).log_start_offset == 0
