"""Scenario tests of three rules the simulator's sweep of seed 41's sample did not reach:

- the idempotent-producer table lives in the log (kraft.core.producers: any replica rebuilds it
  by reading its log in order), so a follower that installs a snapshot keeps none of the batches
  its log held before: its table is what a restart on the same storage rebuilds, and a
  producer's resend of a batch that is now only inside the snapshot is not answered from a
  batch the log no longer holds;
- a broken connection to the leader cuts the fetch timer of a VOTER only (the deviation
  documented on FollowerRole.leader_connection_broke: it hastens a pre-vote): an observer never
  stands, so its fetch timer keeps the full fetch timeout and it goes on following;
- a voter added while leading brings the progress of the observer entry of its own replica id,
  not that of an observer entry whose key (claimed by a Fetch from another node) is a voter's.
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import (
    CLUSTER,
    Cluster,
    DynamicCluster,
    committed,
    controller_endpoints,
    elect,
    settled,
)

from kraft.core.effects import AppendResult
from kraft.core.events import (
    ClientAppend,
    CreateSnapshot,
    Receive,
    SendFailed,
    VoterVersionsChecked,
)
from kraft.core.messages import AddVoterRequest, FetchRequest
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, ProducerId

P = ProducerId(41)
ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000


def test_a_snapshot_install_leaves_the_producer_table_to_what_the_log_holds() -> None:
    c = Cluster(3, seed=41, snapshots=True, election_timeout_ms=ELECTION_TIMEOUT_MS)
    lead = settled(c)
    behind = next(i for i in c.nodes if i != lead)
    # An idempotent batch, committed and on every log: the follower's table holds it.
    effects = c.step(lead, ClientAppend(c.now, ((None, b"p0"),), 1, P, 0))
    [result] = [e for e in effects if isinstance(e, AppendResult)]
    assert result.error is ErrorCode.NONE
    committed(c, lead, 1)
    c.run_until(lambda: c.view(behind).end_offset == c.view(lead).end_offset)
    assert [b.producer for b in c.r(behind).producer_batches()] == [P]
    # Cut off, it misses more appends; the leader snapshots past them and its log starts there.
    c.isolate(behind)
    committed(c, lead, 6)
    c.run(c.now + 3 * FETCH_TIMEOUT_MS // 2)
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run_until(lambda: c.view(lead).log_start_offset == hwm)
    c.heal()
    c.run_until(lambda: c.view(behind).log_start_offset == hwm)
    # Installed: its log starts at the snapshot's end and holds no producer batch, so neither
    # does its table, just as a restart on that storage rebuilds it.
    assert c.r(behind).producer_batches() == ()
    c.crash(behind)
    c.start(behind)
    assert c.r(behind).producer_batches() == ()


def test_an_observers_broken_leader_connection_leaves_its_fetch_timer_alone() -> None:
    c = Cluster(3, observers=1, seed=41, election_timeout_ms=ELECTION_TIMEOUT_MS,
                fetch_timeout_ms=FETCH_TIMEOUT_MS)  # fmt: skip
    observer = 4
    lead = settled(c)
    epoch = c.view(observer).epoch
    assert c.view(observer).state is ReplicaState.FOLLOWER
    c.isolate(observer)  # no answer from the leader resets its fetch timer from now on
    deadline = c.r(observer)._fetch_deadline
    assert deadline is not None and deadline > c.now + ELECTION_TIMEOUT_MS // 4
    fetch = FetchRequest(CLUSTER, key(observer), Epoch(epoch), Offset(0), Epoch(0), Offset(0))
    c.step(observer, SendFailed(c.now, NodeId(lead), fetch, broken=True))
    assert c.r(observer)._fetch_deadline == deadline
    seen = len(c.nodes[observer].states)
    c.run(c.now + ELECTION_TIMEOUT_MS // 4)
    assert c.nodes[observer].states[seen:] == []
    assert c.view(observer).state is ReplicaState.FOLLOWER
    # A voter in the same place has its timer cut to within a quarter of an election timeout.
    voter = next(i for i in c.nodes if i not in (lead, observer))
    c.isolate(voter)
    fetch = FetchRequest(CLUSTER, key(voter), Epoch(epoch), Offset(0), Epoch(0), Offset(0))
    c.step(voter, SendFailed(c.now, NodeId(lead), fetch, broken=True))
    cut = c.r(voter)._fetch_deadline
    assert cut is not None and cut < c.now + ELECTION_TIMEOUT_MS // 4


def test_a_new_voter_brings_its_own_progress_not_that_of_a_key_claiming_another_voter() -> None:
    """A Fetch's claimed replica key is believed as sent (README: no authentication), so a
    sender that is not a voter but claims a voter's key is kept as an observer under that key.
    When a voter is added later, its progress is the one it earned fetching as an observer
    under its own key: the leader takes the observer entry of the same replica id only."""
    c = DynamicCluster(3, observers=1, seed=7, election_timeout_ms=1000, fetch_timeout_ms=2000)
    new = 4
    c.crash(new)  # it starts fetching only after the forged key is on record
    lead = elect(c)
    claimed = next(i for i in (1, 2, 3) if i != lead)
    epoch = c.view(lead).epoch
    forged = FetchRequest(CLUSTER, key(claimed), Epoch(epoch), Offset(0), Epoch(0), Offset(0))
    c.step(lead, Receive(c.now, NodeId(new), forged))
    c.start(new)
    c.append(lead, b"x")
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end and c.view(new).end_offset == end)
    add = AddVoterRequest(CLUSTER, key(new), controller_endpoints(new))
    c.step(lead, Receive(c.now, NodeId(-1), add, reply_to=1))  # an admin client: no node id
    c.step(lead, VoterVersionsChecked(c.now, NodeId(new), ErrorCode.NONE, (0, 1)))
    assert c.view(lead).voters == (1, 2, 3, new)
    quorum = c.r(lead).describe_quorum()
    assert quorum is not None
    voters = sorted(d.replica.id for d in quorum.voters)
    assert voters == [1, 2, 3, new]
    assert next(d for d in quorum.voters if d.replica.id == new).replica == key(new)
    assert new not in [d.replica.id for d in quorum.observers]
