"""The only voter of its voter set as it (re)starts, as Kafka's KafkaRaftClient.initialize has
it: it leads before its first event, whatever state its quorum-state file gives it. A Candidate
counts its own vote and leads in its epoch (onBecomeCandidate); Unattached, Voted, Follower
and Resigned become Prospective at once and lead in the next epoch; at the largest epoch that
can be encoded it stands no more. The simulator's `solo` profile only ever restarts it
Resigned or Unattached (a crash never falls between the two writes of one step), so the other
stored states are set here by hand."""

from __future__ import annotations

from memory_logs import key
from scenario_harness import Cluster

from kraft.core.effects import ActionTaken, ElectionsExhausted, ElectionState, StateChanged
from kraft.core.vocabulary import Action, ReplicaState
from kraft.ids import MAX_EPOCH, Epoch, NodeId

S = ReplicaState


def _restart(stored: ElectionState) -> Cluster:
    """A one-voter cluster whose voter crashed with `stored` in its quorum-state file."""
    c = Cluster(1)
    c.crash(1)
    c.nodes[1].stored = stored
    c.start(1)
    return c


def test_a_candidate_leads_in_its_own_epoch_as_it_restarts() -> None:
    c = _restart(ElectionState(Epoch(4), voted_for=key(1)))
    v = c.view(1)
    assert (v.state, v.epoch) == (S.LEADER, 4)
    assert c.nodes[1].stored == ElectionState(Epoch(4), leader_id=NodeId(1))


def test_a_resigned_leader_leads_again_in_the_next_epoch_and_commits_at_once() -> None:
    c = Cluster(1)
    assert (c.view(1).state, c.view(1).epoch) == (S.LEADER, 1)
    c.crash(1)
    c.start(1)
    v = c.view(1)
    assert (v.state, v.epoch) == (S.LEADER, 2)
    # Its own end is the majority's: both LeaderChange records are committed already.
    assert v.high_watermark == v.end_offset == 2


def test_a_follower_or_a_voter_for_another_stands_at_once() -> None:
    for stored in (
        ElectionState(Epoch(5), leader_id=NodeId(2)),
        ElectionState(Epoch(5), voted_for=key(2)),
        ElectionState(Epoch(5)),
    ):
        c = _restart(stored)
        v = c.view(1)
        assert (v.state, v.epoch) == (S.LEADER, 6), stored


def test_the_restart_names_each_action_before_its_state_change() -> None:
    c = Cluster(1)
    c.crash(1)
    c.nodes[1].stored = ElectionState(Epoch(3), leader_id=NodeId(1))
    effects = _start_effects(c)
    actions = [e.action for e in effects if isinstance(e, ActionTaken)]
    assert actions[:3] == [Action.ELECTION_TIMEOUT, Action.BECOME_CANDIDATE, Action.BECOME_LEADER]
    changes = [(e.old, e.new) for e in effects if isinstance(e, StateChanged)]
    assert changes == [
        (S.UNATTACHED, S.RESIGNED),
        (S.RESIGNED, S.PROSPECTIVE),
        (S.PROSPECTIVE, S.CANDIDATE),
        (S.CANDIDATE, S.LEADER),
    ]


def test_at_the_largest_epoch_it_stands_no_more() -> None:
    c = Cluster(1)
    c.crash(1)
    c.nodes[1].stored = ElectionState(MAX_EPOCH)
    effects = _start_effects(c)
    assert ElectionsExhausted(MAX_EPOCH) in effects
    assert (c.view(1).state, c.view(1).epoch) == (S.UNATTACHED, MAX_EPOCH)
    c.run(c.now + 60_000)
    assert c.view(1).state is S.UNATTACHED


def _start_effects(c: Cluster) -> list[object]:
    """Start node 1 again and return what its start() emitted."""
    seen: list[object] = []
    apply = c.apply

    def record(i: int, effects: list, answering: object) -> None:  # type: ignore[type-arg]
        seen.extend(effects)
        apply(i, effects, answering)  # type: ignore[arg-type]

    c.apply = record  # type: ignore[method-assign]
    try:
        c.start(1)
    finally:
        c.apply = apply  # type: ignore[method-assign]
    return seen
