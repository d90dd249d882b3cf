"""How the step in which a leader steps down names the answer to a Fetch it held.

A leader that stops leading answers every Fetch it holds in that step, NOT_LEADER_OR_FOLLOWER
(LeaderRole.answer_stepped_down; tests/scenarios/test_stepdown_and_rejection_scenarios.py checks
the answer). That answer is the spec's HandleFetchRequest of the held request, so the step's
effects name it: ActionTaken(HandleFetchRequest) right before the Send of the answer, as every
other handled request is named before what it does. Who reads it:

- the node's trace file (kraft.tracing) lists the step's actions, and trace validation
  (refinement.traces.mapping) takes a held Fetch off its record of held Fetches at each
  HandleFetchRequest it finds beyond the step's own message; without it the held Fetch would
  be left over, to be matched with a later step's answer;
- the simulator (refinement.sim_network) judges each Fetch answer on the log as it stood from
  the HandleFetchRequest before it.

A leader of voters {1, 2, 3} is driven by hand; voter 2's caught-up Fetch is held when the
leader resigns (Shutdown), follows voter 3 in a newer epoch (its BeginQuorumEpoch), or votes for
voter 3 in a newer epoch (its Vote request).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import ActionTaken, Effect, Send, StateChanged
from kraft.core.events import Event, Receive, Shutdown
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    Message,
    VoteRequest,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset
from kraft.trace_format import read_trace
from kraft.tracing import TraceFile

S = ReplicaState
CLUSTER = ClusterId("held-fetch-answer-trace")
HELD = 5150  # the reply token of voter 2's held Fetch
OTHER = 5151  # the reply token of the request that ends the leadership


class Leader(HandDriven):
    """Replica 1, elected by hand with voter 2's votes, holding voter 2's caught-up Fetch."""

    def __init__(self) -> None:
        super().__init__(CLUSTER, (1, 2, 3))
        self.tick_until(S.PROSPECTIVE)
        self.grant(2, self.vote_request_to(2))
        self.grant(2, self.vote_request_to(2))
        assert self.replica.view().state is S.LEADER
        self.epoch = self.replica.view().epoch
        # Voter 2 fetches what the leader wrote (its answer moves the HWM), then fetches at
        # the end: nothing new, so the leader holds it.
        self.fetch(0, None)
        self.fetch(self.end, None)
        assert not [e for e in self.fetch(self.end, HELD) if isinstance(e, Send)]

    def fetch(self, offset: int, token: int | None) -> list[Effect]:
        v = self.replica.view()
        req = FetchRequest(CLUSTER, key(2), self.epoch, Offset(offset), v.last_epoch, Offset(0),
                           max_wait_ms=500)  # fmt: skip
        return self.step(Receive(self.now, NodeId(2), req, None, token))


def _ending(how: str, ld: Leader) -> tuple[Event, ReplicaState]:
    """The event that ends the leadership, and the state it leaves the replica in."""
    newer = Epoch(ld.epoch + 1)
    v = ld.replica.view()
    msg: Message
    if how == "shutdown":
        return Shutdown(ld.now + 1), S.RESIGNED
    if how == "begin-quorum-epoch":
        msg = BeginQuorumEpochRequest(CLUSTER, NodeId(3), newer, voter=key(1))
        return Receive(ld.now + 1, NodeId(3), msg, None, OTHER), S.FOLLOWER
    msg = VoteRequest(CLUSTER, key(3), newer, v.last_epoch, v.end_offset, voter=key(1))
    return Receive(ld.now + 1, NodeId(3), msg, None, OTHER), S.VOTED


@pytest.mark.parametrize("how", ["shutdown", "begin-quorum-epoch", "vote"])
def test_the_answer_to_a_held_fetch_at_step_down_is_named_handle_fetch_request(
    how: str, tmp_path: Path
) -> None:
    """The step that ends the leadership: after the state change, the HandleFetchRequest
    action, then at once the NOT_LEADER_OR_FOLLOWER answer with the held Fetch's token; the
    node's trace line of that step lists HandleFetchRequest once, right after the action that
    ended the leadership (Resign, or the handling of the request)."""
    ld = Leader()
    event, state = _ending(how, ld)
    effects = ld.step(event)
    assert ld.replica.view().state is state
    answers = [i for i, e in enumerate(effects) if isinstance(e, Send) and e.reply_to == HELD]
    assert len(answers) == 1
    [at] = answers
    answer = effects[at]
    assert isinstance(answer, Send) and isinstance(answer.message, FetchResponse)
    assert (int(answer.dst), answer.message.error) == (2, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert effects[at - 1] == ActionTaken(Action.HANDLE_FETCH_REQUEST)
    [left] = [i for i, e in enumerate(effects) if isinstance(e, StateChanged) and e.old is S.LEADER]
    assert left < at - 1
    named = [e for e in effects if e == ActionTaken(Action.HANDLE_FETCH_REQUEST)]
    assert len(named) == 1

    path = tmp_path / "node-1.ndjson"
    trace = TraceFile(path, NodeId(1))
    try:
        trace.step(ld.now, event, effects, ld.replica.view())
    finally:
        trace.close()
    [line] = read_trace(path)
    assert line.actions.count(Action.HANDLE_FETCH_REQUEST.value) == 1
    assert line.actions.index(Action.HANDLE_FETCH_REQUEST.value) == 1
