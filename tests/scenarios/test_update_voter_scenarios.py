"""Leader-only requests at a replica on its way out (KIP-595 graceful shutdown, KIP-853).

A Candidate told to shut down says ShutdownComplete in that very step (it has no
EndQuorumEpoch to wait for), yet a driver may still step what it had queued: the node's
driver, until its loop stops, and the simulator's one more event after it
(refinement.sim_network._after_shutdown). A grant queued for it makes it the Leader of its
epoch while shutting down. Such a replica refuses what only a leader may do: an
UpdateRaftVoter, an AddRaftVoter or a RemoveRaftVoter with BROKER_NOT_AVAILABLE (Kafka
4.3.1's validateLeaderOnlyRequest, after its epoch and leader checks: a shutdown is
pending), the UpdateRaftVoter answer naming itself in its epoch, at any kraft.version; a
client append as a non-leader's (NOT_LEADER_OR_FOLLOWER); and it appends nothing for them.
"""

from __future__ import annotations

from scenario_harness import CLUSTER, Cluster, controller_endpoints

from kraft.core.effects import AppendResult, Send, ShutdownComplete
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import (
    AddVoterRequest,
    RemoveVoterRequest,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, Epoch, NodeId, Offset, ReplicaKey

ADMIN = NodeId(-7)


def _leader_after_shutdown() -> tuple[Cluster, int]:
    """A static three-voter cluster whose first Prospective wins its pre-vote, is told to
    shut down as a Candidate, then hears the grant of its vote (queued before)."""
    c = Cluster(3, seed=5)
    for i in c.nodes:
        c.isolate(i)  # nothing is delivered: the votes are given by hand
    c.run_until(lambda: any(c.view(i).state is ReplicaState.PROSPECTIVE for i in c.nodes))
    me = next(i for i in c.nodes if c.view(i).state is ReplicaState.PROSPECTIVE)
    other = NodeId(1 if me != 1 else 2)
    epoch = c.view(me).epoch
    me_key = c.r(me)._me
    pre = VoteRequest(CLUSTER, me_key, epoch, Epoch(0), Offset(0), pre_vote=True)
    c.step(me, Receive(c.now, other, VoteResponse(ErrorCode.NONE, NO_NODE, epoch, True), pre))
    assert c.view(me).state is ReplicaState.CANDIDATE
    epoch = c.view(me).epoch
    assert any(isinstance(e, ShutdownComplete) for e in c.shutdown(me))
    vote = VoteRequest(CLUSTER, me_key, epoch, Epoch(0), Offset(0))
    c.step(me, Receive(c.now, other, VoteResponse(ErrorCode.NONE, NO_NODE, epoch, True), vote))
    return c, me


def test_a_replica_shutting_down_takes_no_leader_only_request() -> None:
    c, me = _leader_after_shutdown()
    view = c.view(me)
    if view.state is not ReplicaState.LEADER:
        return  # it does not lead: nothing to refuse
    end = view.end_offset
    replica = c.r(me)  # stepped directly: the answers go to an operator outside the cluster
    key = c.r(me)._me
    update = UpdateVoterRequest(CLUSTER, view.epoch, key, controller_endpoints(me), 0, 1)
    answers = [
        e.message
        for e in replica.step(Receive(c.now, ADMIN, update, None, reply_to=1))
        if isinstance(e, Send)
    ]
    assert answers == [UpdateVoterResponse(ErrorCode.BROKER_NOT_AVAILABLE, me, view.epoch)]
    appended = replica.step(ClientAppend(c.now, ((None, b"v"),), 9))
    results = [e for e in appended if isinstance(e, AppendResult)]
    assert [r.error for r in results] == [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    spare = ReplicaKey(NodeId(9), key.directory_id)
    for req in (
        AddVoterRequest(CLUSTER, spare, controller_endpoints(9)),
        RemoveVoterRequest(CLUSTER, key),
    ):
        sent = replica.step(Receive(c.now, ADMIN, req, None, reply_to=2))
        errors = [getattr(e.message, "error", None) for e in sent if isinstance(e, Send)]
        assert errors == [ErrorCode.BROKER_NOT_AVAILABLE], (req, sent)
    assert replica.view().end_offset == end
