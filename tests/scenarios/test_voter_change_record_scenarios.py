"""How a leader writes the Voters record of a voter change (KIP-853).

The record is appended in the step that decides the change: client values still lingering in
the accumulator are written first (Kafka's BatchAccumulator completes the open batch before a
control batch), the step is marked with the spec action naming the voter, and the new voter
set moves the high watermark at once when it needs no one else (a voter removed from a pair
leaves the leader a quorum of one), so the RemoveRaftVoter is answered in that same step.
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, elect
from test_add_voter_answer_scenarios import ADMIN, _Admin, _admin

from kraft.core.effects import ActionTaken, AppendResult, Effect
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import RemoveVoterRequest, RemoveVoterResponse
from kraft.core.vocabulary import Action
from kraft.errors import ErrorCode


def _setup(voters: int, **cfg: int) -> tuple[_Admin, int, int]:
    """A settled dynamic quorum: its leader, and a voter that follows it."""
    c = _Admin(voters, seed=11, election_timeout_ms=1000, fetch_timeout_ms=2000, **cfg)
    c.answers = []
    lead = elect(c)
    c.append(lead, b"x")
    c.run(c.now + 600)  # past any linger: the value is in the log
    end = c.view(lead).end_offset
    c.run_until(
        lambda: (
            c.view(lead).high_watermark == end and all(c.view(i).end_offset == end for i in c.nodes)
        )
    )
    other = next(i for i in c.nodes if i != lead)
    return c, lead, other


def _remove(c: _Admin, lead: int, voter: int) -> list[Effect]:
    req = RemoveVoterRequest(CLUSTER, key(voter))
    return _admin(c, lead, Receive(c.now, ADMIN, req, reply_to=1))


def test_removing_a_voter_from_a_pair_commits_and_is_answered_in_the_same_step() -> None:
    c, lead, other = _setup(2)
    _remove(c, lead, other)
    record = c.view(lead).end_offset - 1
    assert c.view(lead).voters == (lead,)
    # The leader alone is the new set's majority: its own record commits at once.
    assert c.view(lead).high_watermark == record + 1
    assert [answer for answer, _ in c.answers] == [RemoveVoterResponse(ErrorCode.NONE)]


def test_the_step_that_writes_a_removal_is_marked_remove_voter_with_its_voter() -> None:
    c, lead, other = _setup(3)
    effects = _remove(c, lead, other)
    assert ActionTaken(Action.REMOVE_VOTER, key(other)) in effects


def test_lingering_client_values_are_written_before_the_voters_record() -> None:
    c, lead, other = _setup(3, append_linger_ms=500)
    before = c.view(lead).end_offset
    appended = _admin(c, lead, ClientAppend(c.now, ((None, b"v1"), (None, b"v2")), 7))
    assert not any(isinstance(e, AppendResult) for e in appended), "not lingering"
    effects = _remove(c, lead, other)
    record = c.view(lead).end_offset - 1
    [result] = [e for e in effects if isinstance(e, AppendResult)]
    assert result.request_id == 7 and result.error is ErrorCode.NONE
    # The values take the offsets below the record, in the order they came.
    assert (result.first_offset, result.last_offset) == (before, before + 1)
    assert record == before + 2
