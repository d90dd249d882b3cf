"""A leader's rules for RemoveRaftVoter and UpdateRaftVoter requests (KIP-853).

RemoveRaftVoter removes exactly the voter key it names, id and directory id both (Kafka's
VoterSet.removeVoter): a key whose id or directory id differs from a voter's is refused
VOTER_NOT_FOUND and the voter set is left alone. UpdateRaftVoter is refused
REQUEST_TIMED_OUT while an add or remove is pending (Kafka's UpdateVoterHandler asks
LeaderState.isOperationPending first), and an accepted update is answered only after its
Voters record is appended and flushed: the core's effects are done in order, so the answer
goes out after the record is durable. (Kafka 4.3.1's UpdateVoterHandler puts the record in
its BatchAccumulator and completes the answer at once, so its answer may leave before the
write; kraft's order is the stricter one.)
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, DynamicCluster, controller_endpoints
from test_add_voter_answer_scenarios import ADMIN, NEW, _admin, _setup

from kraft.core.effects import AppendToLog, Effect, FlushLog, Send
from kraft.core.events import Receive
from kraft.core.messages import (
    AddVoterRequest,
    RemoveVoterRequest,
    RemoveVoterResponse,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import NodeId, ReplicaKey


def _answers(effects: list[Effect]) -> list[object]:
    return [e.message for e in effects if isinstance(e, Send) and e.dst == ADMIN]


def _remove(c: DynamicCluster, lead: int, voter: ReplicaKey) -> list[object]:
    req = RemoveVoterRequest(CLUSTER, voter)
    return _answers(_admin(c, lead, Receive(c.now, ADMIN, req, reply_to=1)))


def test_a_remove_naming_a_voters_id_with_another_directory_is_refused() -> None:
    c, lead = _setup()
    other = next(i for i in (1, 2, 3) if i != lead)
    wrong = ReplicaKey(NodeId(other), key(NEW).directory_id)
    [answer] = _remove(c, lead, wrong)
    assert isinstance(answer, RemoveVoterResponse)
    assert answer.error is ErrorCode.VOTER_NOT_FOUND
    assert c.view(lead).voters == (1, 2, 3)


def test_a_remove_naming_a_voters_directory_with_another_id_is_refused() -> None:
    c, lead = _setup()
    other = next(i for i in (1, 2, 3) if i != lead)
    wrong = ReplicaKey(NodeId(9), key(other).directory_id)
    [answer] = _remove(c, lead, wrong)
    assert isinstance(answer, RemoveVoterResponse)
    assert answer.error is ErrorCode.VOTER_NOT_FOUND
    assert c.view(lead).voters == (1, 2, 3)


def _update(c: DynamicCluster, lead: int, voter: int) -> list[Effect]:
    req = UpdateVoterRequest(
        CLUSTER, c.view(lead).epoch, key(voter), controller_endpoints(voter), 0, 1
    )
    return _admin(c, lead, Receive(c.now, NodeId(voter), req, reply_to=1))


def _update_answers(effects: list[Effect], voter: int) -> list[object]:
    return [e.message for e in effects if isinstance(e, Send) and e.dst == voter]


def test_an_update_voter_while_an_add_is_pending_is_refused_timed_out() -> None:
    c, lead = _setup()
    add = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=1))  # pending: its probe is unanswered
    other = next(i for i in (1, 2, 3) if i != lead)
    end = c.view(lead).end_offset
    effects = _update(c, lead, other)
    epoch = c.view(lead).epoch
    answers = _update_answers(effects, other)
    assert answers == [UpdateVoterResponse(ErrorCode.REQUEST_TIMED_OUT, NodeId(lead), epoch)]
    assert c.view(lead).end_offset == end, "a Voters record was written"


def test_an_accepted_update_voter_is_answered_after_its_record_is_flushed() -> None:
    c, lead = _setup()
    other = next(i for i in (1, 2, 3) if i != lead)
    end = c.view(lead).end_offset
    effects = _update(c, lead, other)
    epoch = c.view(lead).epoch
    answer = UpdateVoterResponse(ErrorCode.NONE, NodeId(lead), epoch)
    assert _update_answers(effects, other) == [answer]
    assert c.view(lead).end_offset > end
    sent = next(i for i, e in enumerate(effects) if isinstance(e, Send) and e.message == answer)
    appended = [i for i, e in enumerate(effects) if isinstance(e, AppendToLog)]
    flushed = [i for i, e in enumerate(effects) if isinstance(e, FlushLog)]
    assert appended and flushed
    assert max(appended) < sent and max(flushed) < sent, "answered before the record is durable"
