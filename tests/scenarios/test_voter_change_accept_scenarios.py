"""How a leader accepts a voter change (KIP-853): one change at a time, a caught-up replica only.

Kafka's LeaderState.isOperationPending holds while an AddRaftVoter or RemoveRaftVoter the
leader accepted is not yet answered; AddVoterHandler and RemoveVoterHandler then refuse
another change with REQUEST_TIMED_OUT, before any other check. An AddRaftVoter whose replica
answered the ApiVersions probe goes on only if LeaderState.isReplicaCaughtUp holds: the
replica fetched from this leader in the last hour AND reached the leader's end at some fetch
(lastCaughtUpTimestamp > 0); a replica that fetches but never caught up is "lagging behind".
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, controller_endpoints, elect
from test_add_voter_answer_scenarios import ADMIN, NEW, _Admin, _admin, _setup

from kraft.core.effects import CheckVoterVersions, Effect, Send
from kraft.core.events import Receive, VoterVersionsChecked
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    FetchRequest,
    RemoveVoterRequest,
    RemoveVoterResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

# Kafka 4.3.1's text (AddVoterHandler and RemoveVoterHandler alike).
PENDING_TEXT = "Request timed out waiting for leader to handle previous voter change request"


def _answers(effects: list[Effect]) -> list[AddVoterResponse | RemoveVoterResponse]:
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, AddVoterResponse | RemoveVoterResponse)
    ]


def test_a_change_asked_while_an_add_still_probes_its_replica_is_refused_request_timed_out() -> (
    None
):
    """The leader accepted adding 4 and waits for its ApiVersions answer: that add is pending.
    Removing a follower, or adding 4 again, is refused REQUEST_TIMED_OUT and changes nothing;
    the pending add then goes ahead once its probe is answered."""
    c, lead = _setup()
    add = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    effects = _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=1))
    assert any(isinstance(e, CheckVoterVersions) for e in effects)
    assert _answers(effects) == []

    follower = next(i for i in (1, 2, 3) if i != lead)
    remove = RemoveVoterRequest(CLUSTER, key(follower))
    [refused] = _answers(_admin(c, lead, Receive(c.now, ADMIN, remove, reply_to=2)))
    assert isinstance(refused, RemoveVoterResponse)
    assert refused.error is ErrorCode.REQUEST_TIMED_OUT
    assert refused.message == PENDING_TEXT
    assert c.view(lead).voters == (1, 2, 3)

    again = _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=3))
    [refused_add] = _answers(again)
    assert isinstance(refused_add, AddVoterResponse)
    assert refused_add.error is ErrorCode.REQUEST_TIMED_OUT
    assert refused_add.message == PENDING_TEXT
    assert not any(isinstance(e, CheckVoterVersions) for e in again)

    _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    assert c.view(lead).voters == (1, 2, 3, NEW)


def test_a_replica_that_fetches_but_never_reached_the_leaders_end_is_not_added() -> None:
    """Replica 4 is down while the leader is elected and writes; then one Fetch of it from
    offset 0 reaches the leader, whose log is longer: it fetched just now but has never been
    caught up. Adding it is aborted with REQUEST_TIMED_OUT ("lagging behind"), as Kafka's
    isReplicaCaughtUp requires lastCaughtUpTimestamp > 0 besides a recent fetch."""
    c = _Admin(3, observers=1, seed=7, election_timeout_ms=1000, fetch_timeout_ms=2000)
    c.answers = []
    c.crash(NEW)
    lead = elect(c)
    c.append(lead, b"x")
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end)
    assert end > 0

    epoch = Epoch(c.view(lead).epoch)
    fetch = FetchRequest(CLUSTER, key(NEW), epoch, Offset(0), Epoch(0), Offset(0))
    _admin(c, lead, Receive(c.now, NodeId(NEW), fetch, reply_to=1))
    leading = c.r(lead)._leader
    assert leading is not None
    peer = leading.observers[key(NEW)]
    assert peer.last_fetch_ms == c.now
    assert peer.last_caught_up_ms is None

    add = AddVoterRequest(CLUSTER, key(NEW), controller_endpoints(NEW))
    _admin(c, lead, Receive(c.now, ADMIN, add, reply_to=2))
    effects = _admin(c, lead, VoterVersionsChecked(c.now, NodeId(NEW), ErrorCode.NONE, (0, 1)))
    [answer] = _answers(effects)
    assert isinstance(answer, AddVoterResponse)
    assert answer.error is ErrorCode.REQUEST_TIMED_OUT
    assert answer.message is not None and answer.message.endswith("since it is lagging behind")
    assert c.view(lead).voters == (1, 2, 3)
