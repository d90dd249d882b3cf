"""Scenario: a quorum at the top of the epoch range. Epochs are int32 on the wire and in the
quorum-state, and a replica refuses a message whose epoch the next election could not bump
(kraft.core.bounds), so the highest epoch a leader can be elected in is MAX_EPOCH - 1. A
replica that reached MAX_EPOCH (a candidate whose vote requests everyone refuses) stands no
more: it says ElectionsExhausted, and no replica ever moves past MAX_EPOCH."""

from __future__ import annotations

from scenario_harness import Cluster

from kraft.core.effects import ElectionState
from kraft.core.vocabulary import ReplicaState
from kraft.ids import MAX_EPOCH, Epoch

S = ReplicaState


def test_a_candidate_at_the_top_epoch_stands_no_more() -> None:
    c = Cluster(3, seed=3)
    for i, n in c.nodes.items():
        c.crash(i)
        n.stored = ElectionState(Epoch(MAX_EPOCH - 2))
    for i in c.nodes:
        c.start(i)
    c.run_until(lambda: c.leader() is not None)
    lead = c.leader()
    assert lead is not None
    assert c.view(lead).epoch == MAX_EPOCH - 1
    # The leader dies: the others stand; one reaches MAX_EPOCH as a candidate, whose vote
    # requests carry an epoch its peer refuses.
    c.crash(lead)
    c.run(c.now + 60_000)
    top = [i for i, n in c.nodes.items() if any(e == MAX_EPOCH for _, e in n.states)]
    assert top, "no replica reached the top epoch"
    for i, n in c.nodes.items():
        assert all(e <= MAX_EPOCH for _, e in n.states), (i, n.states)
    for i in top:
        states = c.nodes[i].states
        first = next(k for k, (_, e) in enumerate(states) if e == MAX_EPOCH)
        assert states[first][0] is S.CANDIDATE
        # Once at the top it neither stands again (Prospective) nor moves on.
        assert states[first:] == [states[first]], states[first:]
        assert c.view(i).state is S.CANDIDATE and c.view(i).epoch == MAX_EPOCH
    assert c.leaders() == []
