"""An observer started with no voter set: an empty static voter list and a log that holds no
Voters record (a Kafka broker whose controller.quorum.voters is empty waits for its bootstrap
servers instead). Such a replica knows nobody to ask for the leader, so it sends nothing and
waits to be told; it must neither fail on the empty list nor keep a deadline that is always
due, which would make its driver spin. The simulator's quorums always know their voters, so
this corner is driven by hand.
"""

from __future__ import annotations

from hand_driven import replica_over

from kraft.core.effects import Send
from kraft.core.events import Receive, Tick
from kraft.core.messages import BeginQuorumEpochRequest, FetchRequest
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState
from kraft.ids import ClusterId, Epoch, NodeId
from kraft.storage.memory_log import MemoryLog

CLUSTER = ClusterId("no-voters")


def _observer() -> Replica:
    replica = replica_over(MemoryLog(0), CLUSTER, (), me=7)
    replica.start()
    return replica


def test_an_observer_that_knows_no_voter_asks_nobody_and_has_no_deadline_due() -> None:
    replica = _observer()
    assert not replica.is_voter
    now = 0
    for _ in range(5):
        effects = replica.step(Tick(now))
        assert not [e for e in effects if isinstance(e, Send)], effects
        assert replica.view().state is ReplicaState.UNATTACHED
        deadline = replica.next_deadline_ms()
        # A deadline at or before now would be due again at once: the driver would spin.
        assert deadline > now, f"a deadline due at once after t={now}: {deadline}"
        now = deadline


def test_an_observer_that_knows_no_voter_follows_a_leader_that_names_itself() -> None:
    """A leader's BeginQuorumEpoch tells it whom to fetch from."""
    replica = _observer()
    replica.step(Tick(0))
    leader = NodeId(1)
    begin = BeginQuorumEpochRequest(CLUSTER, leader, Epoch(3))
    effects = replica.step(Receive(10, leader, begin, None))
    assert replica.view().state is ReplicaState.FOLLOWER
    fetches = [e for e in effects if isinstance(e, Send) and isinstance(e.message, FetchRequest)]
    assert [f.dst for f in fetches] == [leader]
