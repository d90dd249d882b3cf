"""AddRaftVoter's ApiVersions probe and the voter keys a leader takes (KIP-853).

The leader probes the replica it is asked to add (CheckVoterVersions) and goes on only with
that replica's answer (Kafka's AddVoterHandler.handleApiVersionsResponse ignores an answer
when no add is pending or when it comes from another replica). A voter key is valid when its
id is not negative and it names a directory: replica id 0 is a valid voter.
"""

from __future__ import annotations

import pytest
from memory_logs import key
from scenario_harness import CLUSTER, controller_endpoints, elect
from test_add_voter_answer_scenarios import ADMIN, NEW, _Admin, _admin, _setup

from kraft.core.effects import CheckVoterVersions, Effect, Send
from kraft.core.events import Receive, VoterVersionsChecked
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    RemoveVoterRequest,
    RemoveVoterResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import NodeId, ReplicaKey


def _answers(effects: list[Effect], kind: type) -> list[object]:
    return [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, kind)]


def test_a_probe_answer_with_no_add_pending_is_ignored() -> None:
    c, lead = _setup()
    effects = _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    assert effects == []
    assert c.view(lead).voters == (1, 2, 3)


def test_a_probe_answer_from_another_replica_does_not_decide_the_pending_add() -> None:
    c, lead = _setup()
    req = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    effects = _admin(c, lead, Receive(c.now, ADMIN, req, reply_to=1))
    assert any(isinstance(e, CheckVoterVersions) and e.voter == key(NEW) for e in effects)

    # A late answer to an earlier probe of replica 5: neither an acceptance nor a refusal.
    for error, span in ((ErrorCode.NONE, (0, 1)), (ErrorCode.REQUEST_TIMED_OUT, None)):
        stray = _admin(c, lead, VoterVersionsChecked(c.now, NodeId(5), error, span))
        assert _answers(stray, AddVoterResponse) == []
        assert c.view(lead).voters == (1, 2, 3)

    _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    assert c.view(lead).voters == (1, 2, 3, NEW)


def test_replica_id_0_is_a_valid_voter_and_a_negative_id_is_not() -> None:
    c, lead = _setup()
    zero = key(0)
    add = AddVoterRequest(CLUSTER, zero, controller_endpoints(0))
    effects = _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=1))
    assert _answers(effects, AddVoterResponse) == []
    assert any(isinstance(e, CheckVoterVersions) and e.voter == zero for e in effects)

    c2, lead2 = _setup()
    remove = RemoveVoterRequest(CLUSTER, zero)
    [answer] = _answers(
        _admin(c2, lead2, Receive(c2.now, ADMIN, remove, reply_to=1)), RemoveVoterResponse
    )
    assert isinstance(answer, RemoveVoterResponse)
    assert answer.error is ErrorCode.VOTER_NOT_FOUND

    negative = ReplicaKey(NodeId(-1), key(5).directory_id)
    for request in (
        AddVoterRequest(CLUSTER, negative, controller_endpoints(5)),
        RemoveVoterRequest(CLUSTER, negative),
    ):
        refused = _admin(c2, lead2, Receive(c2.now, ADMIN, request, reply_to=2))
        [msg] = [e.message for e in refused if isinstance(e, Send)]
        assert isinstance(msg, AddVoterResponse | RemoveVoterResponse)
        assert msg.error is ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(("silent_ms", "caught_up"), [(3_599_999, True), (3_600_000, False)])
def test_a_replica_to_add_counts_as_caught_up_while_its_last_fetch_is_under_an_hour_old(
    silent_ms: int, caught_up: bool
) -> None:
    """The replica caught up and then stopped fetching (the leader keeps its entry: no other
    observer came to make it forget it). An hour after its last Fetch it no longer counts as
    caught up, a millisecond earlier it does (Kafka's LeaderState.isReplicaCaughtUp:
    `lastFetchTimestamp > now - 1 hour`): the add is then aborted with REQUEST_TIMED_OUT."""
    c, lead = _setup()
    c.crash(NEW)
    c.run(c.now + 2_000)  # a Fetch it left parked counts again when the leader answers it
    leading = c.r(lead)._leader
    assert leading is not None
    last = leading.observers[key(NEW)].last_fetch_ms
    assert last is not None
    c.run(last + silent_ms)
    add = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=1))
    effects = _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    if caught_up:
        assert c.view(lead).voters == (1, 2, 3, NEW)
    else:
        answers = [
            a for a in _answers(effects, AddVoterResponse) if isinstance(a, AddVoterResponse)
        ]
        assert [a.error for a in answers] == [ErrorCode.REQUEST_TIMED_OUT]
        assert c.view(lead).voters == (1, 2, 3)


@pytest.mark.parametrize(
    ("span", "added"),
    [
        ((0, 1), True),
        ((1, 1), True),
        ((1, 3), True),
        ((0, 0), False),
        ((2, 3), False),
        (None, False),
    ],
)
def test_a_replica_whose_kraft_versions_exclude_the_finalized_one_is_not_added(
    span: tuple[int, int] | None, added: bool
) -> None:
    """The quorum runs kraft.version 1 (its voter set is in a Voters record). The replica to
    add answers the probe with the kraft.version range it supports: one that holds 1 is added,
    one that does not, or an answer naming no kraft.version at all (None), is refused with
    INVALID_REQUEST and Kafka 4.3.1's AddVoterHandler text, whose range lacks its closing
    parenthesis and reads "(min: 0, max: 0)" when missing; the voter set stays as it was."""
    c, lead = _setup()
    add = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=1))
    effects = _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, span))
    if added:
        assert c.view(lead).voters == (1, 2, 3, NEW)
        return
    [answer] = _answers(effects, AddVoterResponse)
    assert isinstance(answer, AddVoterResponse)
    assert answer.error is ErrorCode.INVALID_REQUEST
    shown = "(min: 0, max: 0)" if span is None else f"(min: {span[0]}, max: {span[1]}"
    assert answer.message == (
        f"Aborted add voter operation for {key(NEW).kafka_text()} since the kraft.version "
        f"range {shown} doesn't support the finalized version 1"
    )
    c.run(c.now + 3_000)
    assert c.view(lead).voters == (1, 2, 3)


def test_the_only_voter_is_never_removed() -> None:
    """A dynamic quorum of one voter: RemoveRaftVoter of that voter, with its exact key, is
    refused with VOTER_NOT_FOUND (Kafka's VoterSet.removeVoter gives no voter set without any
    voter) and the quorum keeps its voter and its leader."""
    c = _Admin(1, observers=1, seed=7, election_timeout_ms=1000, fetch_timeout_ms=2000)
    c.answers = []
    lead = elect(c)
    remove = RemoveVoterRequest(CLUSTER, key(lead))
    [answer] = _answers(
        _admin(c, lead, Receive(c.now, ADMIN, remove, reply_to=1)), RemoveVoterResponse
    )
    assert isinstance(answer, RemoveVoterResponse)
    assert answer.error is ErrorCode.VOTER_NOT_FOUND
    assert (answer.message or "").startswith(f"Cannot remove voter {key(lead).kafka_text()}")
    c.run(c.now + 3_000)
    assert c.view(lead).voters == (lead,)
    assert c.leader() == lead


@pytest.mark.parametrize("error", [ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT])
def test_a_second_probe_answer_after_the_add_went_ahead_is_ignored(error: ErrorCode) -> None:
    """The probe's answer let the add go ahead (its Voters record is written, not yet
    committed); a second answer for the same replica, a duplicate or a late failure, decides
    nothing more: no second record, no answer to the admin client."""
    c, lead = _setup()
    add = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=1))
    _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    assert c.view(lead).voters == (1, 2, 3, NEW)
    end = c.view(lead).end_offset
    span = (0, 1) if error is ErrorCode.NONE else None
    again = _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), error, span))
    assert _answers(again, AddVoterResponse) == []
    assert c.view(lead).end_offset == end
