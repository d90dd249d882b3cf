"""A leader that removed itself from a dynamic quorum (KIP-853) and restarts comes back Resigned
in its epoch, as any leader does (Kafka's QuorumState.initialize asks no voter set), and so
moves on to the next epoch when its election timer runs out (Kafka's pollResigned).

The stall it prevents (the simulator's mixed+reconfig seed 74): voters {1, 2, 3} and an
observer 4; the leader adds 4 while 4 is cut off from it, so 4's log never gets the record that
made it a voter, then removes itself ({others, 4}) and resigns. One of the remaining voters
crashes for good. 4 still follows the old leader in that epoch, a Follower by its own log
and an observer, and refuses every pre-vote of that epoch because it fetched from that leader
(KIP-996, Kafka's FollowerState.canGrantVote); the last voter needs 4's pre-vote and never
gets it. Had the old leader restarted as an Unattached observer of that epoch, nobody would
ever reach a newer one. As Resigned it goes to the next epoch, 4 hears of it in the answer to
its next Fetch, and the last voter from 4's answer to its pre-vote: both are Unattached in the
new epoch, 4 grants, and the last voter leads {others, 4} with 4's vote.
"""

from __future__ import annotations

from dataclasses import replace

from memory_logs import key
from scenario_harness import CLUSTER, DynamicCluster, Node, controller_endpoints, elect

from kraft.core.effects import Effect
from kraft.core.events import Event, Receive, VoterVersionsChecked
from kraft.core.log_metadata import LogState
from kraft.core.messages import AddVoterRequest, Message, RemoveVoterRequest
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_sets_in
from kraft.errors import ErrorCode
from kraft.ids import NodeId

ADMIN = NodeId(-1)  # an admin client has no node id
S = ReplicaState


class _Dynamic(DynamicCluster):
    """A dynamic quorum whose admin client's answers are dropped, and whose replicas restart
    with the voter sets of their logs' Voters records too (as the node reads them at start)."""

    def boot_state(self, n: Node) -> LogState:
        state = super().boot_state(n)
        data = n.log.read(n.log.start_offset, 1 << 30).data if n.log.end_offset > 0 else b""
        logged = tuple(voter_sets_in(data)) if data else ()
        return replace(state, voter_history=state.voter_history + logged)

    def send(self, src: int, dst: int, msg: Message, answering: object) -> None:
        if dst != ADMIN:  # the admin client's answers are not this test's subject
            super().send(src, dst, msg, answering)  # type: ignore[arg-type]


def _admin(c: _Dynamic, node: int, ev: Event) -> list[Effect]:
    effects = c.r(node).step(ev)
    c.apply(node, effects, None)
    return effects


def test_a_removed_leader_that_restarts_ends_its_epoch_so_a_lagging_voter_can_vote() -> None:
    c = _Dynamic(3, observers=1, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000)
    lead = elect(c)
    stays, dies = (i for i in (1, 2, 3) if i != lead)
    c.append(lead, b"x")
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end and c.view(4).end_offset == end)

    # The leader adds 4 while 4 cannot reach it: 4 never fetches the record that made it a
    # voter, but it fetched from this leader in this epoch before.
    c.partition(lead, 4)
    _admin(c, lead, Receive(c.now, ADMIN, AddVoterRequest(CLUSTER, key(4), controller_endpoints(4)),
                            reply_to=1))  # fmt: skip
    _admin(c, lead, VoterVersionsChecked(c.now, NodeId(4), ErrorCode.NONE, (0, 1)))
    assert c.view(lead).voters == (1, 2, 3, 4)
    added = c.view(lead).end_offset
    c.run_until(lambda: (c.view(lead).high_watermark or 0) >= added)

    # It removes itself; once that commits ({stays, dies} are a majority of the new set) it
    # resigns. Then it and one of the two others crash.
    _admin(c, lead, Receive(c.now, ADMIN, RemoveVoterRequest(CLUSTER, key(lead)), reply_to=2))
    c.run_until(lambda: c.view(lead).state is S.RESIGNED, step_ms=1)
    epoch = c.view(lead).epoch
    c.crash(dies)
    c.crash(lead)
    assert c.view(4).state is S.FOLLOWER and c.view(4).leader_id == lead
    assert c.view(4).epoch == epoch and not c.view(4).is_voter  # a voter it does not know of

    # The old leader restarts; the last voter leads {stays, dies, 4} with 4's vote, and 4
    # follows it (before the fix: no leader ever again).
    c.heal()
    seen = len(c.nodes[lead].states)
    c.start(lead)
    assert not c.view(lead).is_voter
    c.run_until(
        lambda: (
            c.leader() == stays
            and c.view(4).leader_id == stays
            and c.view(4).epoch == c.view(stays).epoch
        ),
        limit=30_000,
    )
    assert c.view(stays).epoch > epoch
    # The old leader came back Resigned in its epoch, then went Unattached in the next.
    assert c.nodes[lead].states[seen : seen + 2] == [(S.RESIGNED, epoch), (S.UNATTACHED, epoch + 1)]
    assert c.view(stays).voters == tuple(sorted((stays, dies, 4)))
    # 4 caught up with the records that made it a voter.
    c.run_until(lambda: c.view(4).is_voter)
