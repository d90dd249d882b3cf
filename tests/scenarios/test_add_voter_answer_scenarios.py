"""When a leader answers an AddRaftVoter (KIP-853; KIP-1186's ack_when_committed).

AddRaftVoter v0 has no ack_when_committed field, and Kafka answers it once the Voters record
naming the new voter commits (AddVoterHandler completes the future at the commit); v1 may ask
for the answer at the append instead (false). A driver that builds the core's request without
the field (a v0 request: the wire decoder, the simulator's operator, these scenarios) must get
the v0 answer: after the commit, never before. Answers to the admin client are captured with
the leader's high watermark at the moment each is sent.
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, DynamicCluster, controller_endpoints, elect

from kraft.core.effects import Effect
from kraft.core.events import Event, Receive, VoterVersionsChecked
from kraft.core.messages import AddVoterRequest, AddVoterResponse, Message, Request
from kraft.errors import ErrorCode
from kraft.ids import NodeId

ADMIN = NodeId(-1)  # an admin client has no node id
NEW = 4


class _Admin(DynamicCluster):
    """A dynamic quorum {1, 2, 3} and an observer 4; what its leader sends the admin client
    is kept, with the leader's high watermark when it was sent."""

    answers: list[tuple[Message, int | None]]

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        if dst == ADMIN:
            self.answers.append((msg, self.view(src).high_watermark))
        else:
            super().send(src, dst, msg, answering)


def _setup() -> tuple[_Admin, int]:
    c = _Admin(3, observers=1, seed=7, election_timeout_ms=1000, fetch_timeout_ms=2000)
    c.answers = []
    lead = elect(c)
    c.append(lead, b"x")
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end and c.view(NEW).end_offset == end)
    return c, lead


def _admin(c: _Admin, node: int, ev: Event) -> list[Effect]:
    effects = c.r(node).step(ev)
    c.apply(node, effects, None)
    return effects


def _add(c: _Admin, lead: int, req: AddVoterRequest) -> int:
    """Ask the leader to add 4 and answer its probe; the offset of the Voters record."""
    _admin(c, lead, Receive(c.now, ADMIN, req, reply_to=1))
    _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    assert c.view(lead).voters == (1, 2, 3, NEW)
    return int(c.view(lead).end_offset) - 1


def test_an_add_voter_request_without_the_field_is_answered_once_the_change_commits() -> None:
    c, lead = _setup()
    record = _add(c, lead, AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW)))
    assert c.answers == [], "answered before the Voters record could commit"
    c.run_until(lambda: bool(c.answers))
    [(answer, hwm)] = c.answers
    assert answer == AddVoterResponse(ErrorCode.NONE)
    assert hwm is not None and hwm > record


def test_an_add_voter_asking_no_commit_is_answered_at_the_append() -> None:
    """KIP-1186 v1 with ack_when_committed false: answered in the step that appends."""
    c, lead = _setup()
    req = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW), ack_when_committed=False)
    record = _add(c, lead, req)
    [(answer, hwm)] = c.answers
    assert answer == AddVoterResponse(ErrorCode.NONE)
    assert hwm is None or hwm <= record
    c.run_until(lambda: (c.view(lead).high_watermark or 0) > record)
    assert len(c.answers) == 1  # answered once
