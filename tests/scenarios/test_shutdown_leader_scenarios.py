"""A Leader that is shutting down resigns at its next timer, as Kafka's pollLeader does.

Kafka 4.3.1's KafkaRaftClient.pollLeader resigns (transitionToResigned, EndQuorumEpoch to the
other voters, most caught-up first) whenever a shutdown was asked, a resignation was asked or
check-quorum expired. Our Shutdown resigns a Leader in the step that receives it, so the only
Leader that is shutting down is one that won its election after it said ShutdownComplete, from
a vote its driver still had queued (tests/scenarios/test_update_voter_scenarios.py builds it).
Until then it answers a voter's Fetch and FetchSnapshot in its epoch with
BROKER_NOT_AVAILABLE (Kafka's validateLeaderOnlyRequest: a shutdown is pending) and records
nothing of them. Its first Tick, long before any check-quorum deadline, makes it Resigned and
tells the other voters; it says ShutdownComplete no second time.
"""

from __future__ import annotations

from scenario_harness import CLUSTER, Cluster, elect
from test_update_voter_scenarios import _leader_after_shutdown

from kraft.core.effects import ActionTaken, AppendResult, Send, ShutdownComplete
from kraft.core.events import ClientAppend, Receive, Shutdown, Tick
from kraft.core.messages import (
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch


def test_a_leader_shutting_down_resigns_at_its_next_tick() -> None:
    c, me = _leader_after_shutdown()
    view = c.view(me)
    assert view.state is ReplicaState.LEADER  # seed 5: the queued vote makes it the Leader
    ld = c.r(me)._leader
    assert ld is not None and ld.check_quorum_at is not None and ld.check_quorum_at > c.now
    effects = c.r(me).step(Tick(c.now))
    assert ActionTaken(Action.RESIGN) in effects
    after = c.view(me)
    assert (after.state, after.epoch) == (ReplicaState.RESIGNED, view.epoch)
    told = sorted(
        int(e.dst)
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, EndQuorumEpochRequest)
    )
    assert told == sorted(i for i in c.nodes if i != me)
    assert not any(isinstance(e, ShutdownComplete) for e in effects)


def test_a_leader_shutting_down_answers_fetches_broker_not_available() -> None:
    c, me = _leader_after_shutdown()
    view = c.view(me)
    assert view.state is ReplicaState.LEADER
    other = NodeId(1 if me != 1 else 2)
    voter = c.r(other)._me
    fetch = FetchRequest(CLUSTER, voter, view.epoch, Offset(0), Epoch(0), Offset(0))
    snap = FetchSnapshotRequest(
        CLUSTER, voter, view.epoch, OffsetAndEpoch(Offset(0), Epoch(0)), 0, max_bytes=1 << 20
    )
    for token, req in ((1, fetch), (2, snap)):
        effects = c.r(me).step(Receive(c.now, other, req, None, reply_to=token))
        answers = [e.message for e in effects if isinstance(e, Send)]
        assert len(answers) == 1, (req, effects)
        assert isinstance(answers[0], FetchResponse | FetchSnapshotResponse)
        assert answers[0].error is ErrorCode.BROKER_NOT_AVAILABLE, answers[0]
    after = c.view(me)
    assert (after.state, after.end_offset, after.high_watermark) == (
        ReplicaState.LEADER,
        view.end_offset,
        view.high_watermark,
    )


def test_a_leader_shutting_down_refuses_client_appends() -> None:
    """This project's deviation (README): Kafka's leader keeps taking its controller's appends
    until the poll that resigns it; ours refuses them from the Shutdown on, naming itself."""
    c, me = _leader_after_shutdown()
    view = c.view(me)
    assert view.state is ReplicaState.LEADER
    effects = c.r(me).step(ClientAppend(c.now, ((None, b"late"),), request_id=7))
    assert effects == [AppendResult(7, ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id=NodeId(me))]
    assert c.view(me).end_offset == view.end_offset


def test_a_leader_cut_off_as_it_shuts_down_completes_at_the_request_timeout() -> None:
    """A leader's graceful shutdown waits for its EndQuorumEpoch answers, but no longer than
    quorum.request.timeout.ms: cut off from every voter, it says ShutdownComplete then, and
    not a millisecond before."""
    c = Cluster(3, seed=2, election_timeout_ms=1000, fetch_timeout_ms=2000, request_timeout_ms=700)
    lead = elect(c)
    c.isolate(lead)
    t = c.now
    effects = c.r(lead).step(Shutdown(t))
    assert any(
        isinstance(e, Send) and isinstance(e.message, EndQuorumEpochRequest) for e in effects
    )
    assert not any(isinstance(e, ShutdownComplete) for e in effects)
    assert not any(isinstance(e, ShutdownComplete) for e in c.r(lead).step(Tick(t + 699)))
    assert any(isinstance(e, ShutdownComplete) for e in c.r(lead).step(Tick(t + 700)))
