"""Scenario tests of what a leader, a candidate and a follower do around leadership (KIP-595,
KIP-996 and KIP-853 as Kafka 4.x implements them), each a rule the simulator's faults reach
rarely or never:

- BecomeLeader, in order: the action, the persisted election state naming the new leader, the
  state change, the epoch's first batch (LeaderChange first), then BeginQuorumEpoch to every
  other voter (Kafka's onBecomeLeader: transitionToLeader, appendStartOfEpochControlRecords,
  then pollLeader's BeginQuorumEpoch requests);
- the voter set known only from the bootstrap checkpoint is written into the log once: a leader
  whose log already holds a Voters record does not restate it (Kafka's LeaderState
  appendStartOfEpochControlRecords: only while the offset of the voters is -1);
- a Prospective whose pre-vote a voter cannot take (UNSUPPORTED_VERSION: a voter that does not
  know KIP-996) stands as Candidate at once; that answer reaching a Candidate or a Leader
  changes nothing;
- a BeginQuorumEpoch answer FENCED_LEADER_EPOCH that names the leader's own epoch and the leader
  answers a request of an earlier epoch: the leader keeps asking that voter, which does not
  fetch, at its BeginQuorumEpoch rounds;
- a BeginQuorumEpoch that failed to send to a voter that fetches is not sent again (Kafka's
  leader asks only the voters that have not fetched within fetch timeout / 2, whether or not
  they answered: tests/scenarios/test_begin_quorum_epoch_resend_scenarios.py);
- a follower whose fetch timer is not running (an observer whose leader went silent) and that a
  resigning leader names as a successor answers EndQuorumEpoch and arms its timer;
- a leader whose removal from the voter set committed resigns on its next tick, at that instant
  (Kafka's pollLeader acts on isResignRequested before anything else);
- a pending voter change is answered REQUEST_TIMED_OUT exactly when its request timeout runs
  out, whatever other timer the leader has (Kafka's pollLeader returns the least of its timers,
  maybeExpirePendingOperation's among them);
- of five voters, a leader that only one other voter fetches from has no quorum and resigns at
  its check-quorum timeout (1.5 x the fetch timeout), while two fetching keep it leading (Kafka's
  LeaderState.updateCheckQuorumForFollowingVoter counts the leader among the majority). The
  sweep's quorums have three voters, where one is enough.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from memory_logs import key, raw_batches
from scenario_harness import CLUSTER, Cluster, DynamicCluster, elect

from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    Effect,
    ElectionState,
    HighWatermarkMoved,
    PersistElectionState,
    Send,
    StateChanged,
)
from kraft.core.events import Event, Receive, SendFailed, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Message,
    RemoveVoterRequest,
    RemoveVoterResponse,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_records import voter_sets_in
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, NodeId

L = ReplicaState.LEADER
P = ReplicaState.PROSPECTIVE
C = ReplicaState.CANDIDATE
F = ReplicaState.FOLLOWER
ADMIN = NodeId(-1)
REQUEST_TIMEOUT_MS = 2000


class _Steps(Cluster):
    """The scenario cluster, keeping every step (node, time, event, state before, effects),
    every message sent (delivered or not), and failing fast when a replica is ticked again and
    again at one instant (a due timer it never acts on would spin the loop forever)."""

    def __init__(self, *args: object, **kw: object) -> None:
        self.steps: list[tuple[int, int, Event, ReplicaState, list[Effect]]] = []
        self.sent: list[tuple[int, int, int, Message]] = []
        self._ticks: tuple[int, int, int] = (0, -1, 0)
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def step(self, i: int, ev: Event) -> list[Effect]:
        n = self.nodes[i]
        if not n.alive or n.replica is None:
            return []
        if isinstance(ev, Tick):
            node, at, count = self._ticks
            count = count + 1 if (node, at) == (i, self.now) else 1
            self._ticks = (i, self.now, count)
            assert count < 20, f"node {i} ticked {count} times at t={self.now}ms"
        before = n.replica.view().state
        effects = super().step(i, ev)
        self.steps.append((i, self.now, ev, before, effects))
        return effects

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        self.sent.append((self.now, src, dst, msg))
        if dst != ADMIN:  # the operator's answers are read from `sent`
            super().send(src, dst, msg, answering)


class _Dynamic(_Steps, DynamicCluster):
    """A dynamic quorum (kraft.version 1, bootstrap Voters record) that keeps its steps."""


def _settled(c: Cluster) -> int:
    """Run until one leader is followed by every live node and its HWM reached its log end."""
    c.run_until(
        lambda: (
            (ld := c.leader()) is not None
            and all(c.view(i).leader_id == ld for i in c.nodes if c.nodes[i].alive)
            and c.view(ld).high_watermark == c.view(ld).end_offset
        )
    )
    lead = c.leader()
    assert lead is not None
    return lead


# -- BecomeLeader


def _index(effects: list[Effect], pred: Callable[[Effect], bool]) -> int:
    return next(k for k, e in enumerate(effects) if pred(e))


def test_a_new_leader_persists_changes_state_writes_leader_change_then_asks_every_voter() -> None:
    c = _Steps(5, seed=11)
    lead = _settled(c)
    epoch = c.view(lead).epoch
    [effects] = [
        effects
        for i, _t, _ev, before, effects in c.steps
        if i == lead and before is C and StateChanged(C, L, epoch) in effects
    ]
    acted = _index(effects, lambda e: e == ActionTaken(Action.BECOME_LEADER))
    persisted = _index(effects, lambda e: e == PersistElectionState(ElectionState(epoch, lead)))
    changed = _index(effects, lambda e: e == StateChanged(C, L, epoch))
    appended = _index(effects, lambda e: isinstance(e, AppendToLog) and e.leader_encoded)
    asked = [
        e
        for e in effects[appended:]
        if isinstance(e, Send) and isinstance(e.message, BeginQuorumEpochRequest)
    ]
    assert acted < persisted < changed < appended
    assert not any(isinstance(e, Send) for e in effects[:appended])
    assert sorted(e.dst for e in asked) == [i for i in c.nodes if i != lead]
    assert {e.message for e in asked} == {
        BeginQuorumEpochRequest(CLUSTER, NodeId(lead), epoch, voter=key(i))
        for i in c.nodes
        if i != lead
    }
    append = effects[appended]
    assert isinstance(append, AppendToLog)
    assert (append.epoch, append.first_offset) == (epoch, 0)


def _voters_records(c: Cluster, i: int) -> list[int]:
    """The offsets of the Voters records in node i's log."""
    return [o for _h, data in raw_batches(c.nodes[i].log) for o, _v in voter_sets_in(data)]


def _depose(c: Cluster, lead: int) -> int:
    """Cut the leader off until another one leads, heal, settle: the new leader."""
    c.isolate(lead)
    c.run_until(lambda: (ld := c.leader()) is not None and ld != lead)
    c.heal()
    return _settled(c)


def test_the_bootstrap_voter_set_is_written_into_the_log_once() -> None:
    c = _Dynamic(3, seed=5)
    first = _settled(c)
    assert _voters_records(c, first) == [2]  # LeaderChange, KRaftVersion, Voters
    lead = _depose(c, first)
    for _ in range(8):  # until the first leader leads again
        if lead == first:
            break
        lead = _depose(c, lead)
    assert lead == first, "the first leader never led again"
    assert c.view(first).epoch > 1
    for i in c.nodes:
        assert _voters_records(c, i) == [2], i


# -- KIP-996: a voter that does not know pre-vote


class _OldVoter(_Steps):
    """Voter 3 runs a version without KIP-996: a pre-vote cannot be sent to it, and the
    sender's network client answers it UNSUPPORTED_VERSION itself (Kafka's NetworkClient
    version check)."""

    OLD = 3

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        if isinstance(msg, VoteRequest) and msg.pre_vote and dst == self.OLD:
            self.sent.append((self.now, src, dst, msg))
            at = self.now + self.latency
            answer = VoteResponse(
                ErrorCode.UNSUPPORTED_VERSION, NO_NODE, msg.candidate_epoch, False
            )
            self.push(at, src, Receive(at, NodeId(dst), answer, in_reply_to=None))
            self._reply_to[self.seq] = msg
            return
        super().send(src, dst, msg, answering)


def _unsupported(ev: Event) -> bool:
    return (
        isinstance(ev, Receive)
        and isinstance(ev.message, VoteResponse)
        and ev.message.error is ErrorCode.UNSUPPORTED_VERSION
    )


def test_a_prospective_stands_at_once_when_a_voter_does_not_know_pre_vote() -> None:
    # Voter 3 is slow to stand: the others' pre-votes reach it.
    c = _OldVoter(3, seed=2, overrides={3: {"election_timeout_ms": 30_000}})
    lead = _settled(c)
    answered = [(i, before, effects) for i, _t, ev, before, effects in c.steps if _unsupported(ev)]
    assert any(before is P for _i, before, _e in answered)
    for _i, before, effects in answered:
        changed = [(e.old, e.new) for e in effects if isinstance(e, StateChanged)]
        assert changed == ([(P, C)] if before is P else []), (before, changed)
    # A late answer of that kind to the leader, or to a follower, changes nothing.
    epoch = c.view(lead).epoch
    late = VoteResponse(ErrorCode.UNSUPPORTED_VERSION, NO_NODE, epoch, False)
    for i in c.nodes:
        state = c.view(i).state
        effects = c.step(i, Receive(c.now, NodeId(3), late, None))
        assert not [e for e in effects if isinstance(e, StateChanged)], i
        assert (c.view(i).state, c.view(i).epoch) == (state, epoch)


# -- BeginQuorumEpoch answers


def test_a_fenced_begin_quorum_epoch_answer_naming_the_leaders_epoch_stops_no_round() -> None:
    c = _Steps(3, seed=4)
    away = 3
    c.isolate(away)  # it never fetches: every BeginQuorumEpoch round asks it
    c.run_until(lambda: c.leader() is not None and c.leader() != away)
    leader = c.leader()
    assert leader is not None
    epoch = c.view(leader).epoch
    # What a voter that already follows this leader answers to its BeginQuorumEpoch of an
    # earlier epoch (one still in flight from a previous leadership).
    fenced = BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(leader), epoch)
    c.step(leader, Receive(c.now, NodeId(away), fenced, None))
    seen = len(c.sent)
    c.run(c.now + c.r(leader)._timing.fetch_timeout_ms // 2 + 1)  # the next round
    asked = [m for _t, s, d, m in c.sent[seen:] if (s, d) == (leader, away)]
    assert any(isinstance(m, BeginQuorumEpochRequest) and m.leader_epoch == epoch for m in asked)


def test_a_failed_begin_quorum_epoch_to_a_voter_that_fetches_is_not_resent() -> None:
    c = _Steps(3, seed=4)
    leader = elect(c)
    epoch = c.view(leader).epoch
    other = next(i for i in c.nodes if i != leader)
    # Every voter fetches in the new epoch: the leader asks none of them any more.
    c.run_until(lambda: c.view(other).end_offset == c.view(leader).end_offset)
    c.run(c.now + 100)
    begin = BeginQuorumEpochRequest(CLUSTER, NodeId(leader), epoch)
    c.step(leader, SendFailed(c.now, NodeId(other), begin))
    seen = len(c.sent)
    c.run(c.now + 2 * c.r(leader)._timing.request_timeout_ms)
    asked = [m for _t, s, d, m in c.sent[seen:] if (s, d) == (leader, other)]
    assert not any(isinstance(m, BeginQuorumEpochRequest) for m in asked), asked
    assert c.view(leader).epoch == epoch


# -- EndQuorumEpoch


def test_a_follower_without_a_running_fetch_timer_answers_end_quorum_epoch() -> None:
    c = _Steps(3, 1, seed=6)
    lead = _settled(c)
    observer = 4
    c.run_until(lambda: c.view(observer).leader_id == lead)
    c.isolate(observer)
    c.run(c.now + 3 * 2000)  # its fetch timeout ran out: it asks the voters in turn
    v = c.view(observer)
    assert (v.state, v.leader_id) == (F, lead)
    # A leader that counts it a voter (KIP-853: added, not yet known to itself) resigns.
    others = tuple(NodeId(i) for i in c.nodes if i not in (lead, observer))
    resign = EndQuorumEpochRequest(CLUSTER, NodeId(lead), v.epoch, (*others, NodeId(observer)))
    effects = c.step(observer, Receive(c.now, NodeId(lead), resign, None))
    answers = [e.message for e in effects if isinstance(e, Send)
               and isinstance(e.message, EndQuorumEpochResponse)]  # fmt: skip
    assert answers == [EndQuorumEpochResponse(ErrorCode.NONE, NodeId(lead), v.epoch)]
    assert (c.view(observer).state, c.view(observer).leader_id) == (F, lead)


# -- KIP-853: voter changes on the leader


def _remove(c: _Steps, lead: int, voter: int) -> int:
    """The operator asks the leader to remove `voter`; the time it was asked."""
    ev = Receive(c.now, ADMIN, RemoveVoterRequest(CLUSTER, key(voter)), reply_to=7)
    c.step(lead, ev)
    return c.now


def test_a_leader_whose_removal_committed_resigns_at_that_instant() -> None:
    c = _Dynamic(3, seed=8)
    lead = _settled(c)
    _remove(c, lead, lead)
    c.run_until(lambda: c.view(lead).state is not L)
    # The step that raised its HWM past the removal, and the one it resigned in.
    end = max(_voters_records(c, lead))
    committed = next(
        t
        for i, t, _ev, _b, effects in c.steps
        if i == lead
        and any(isinstance(e, HighWatermarkMoved) and e.high_watermark > end for e in effects)
    )
    [resigned] = [
        t
        for i, t, _ev, _b, effects in c.steps
        if i == lead and ActionTaken(Action.RESIGN) in effects
    ]
    assert resigned == committed


def test_a_pending_voter_change_times_out_exactly_at_its_request_timeout() -> None:
    c = _Dynamic(3, seed=9)
    lead = _settled(c)
    other = next(i for i in c.nodes if i != lead)
    c.isolate(lead)  # the change cannot commit
    asked = _remove(c, lead, other)
    c.run(asked + 2 * REQUEST_TIMEOUT_MS)
    [(at, answer)] = [(t, m) for t, s, d, m in c.sent if (s, d) == (lead, ADMIN)]
    assert at == asked + REQUEST_TIMEOUT_MS
    assert isinstance(answer, RemoveVoterResponse)
    assert answer.error is ErrorCode.REQUEST_TIMED_OUT


@pytest.mark.parametrize(("fetching", "leads"), [(1, False), (2, True)])
def test_of_five_voters_a_leader_needs_two_others_fetching(fetching: int, leads: bool) -> None:
    c = Cluster(5, seed=3, election_timeout_ms=1000, fetch_timeout_ms=2000)
    lead = elect(c)
    c.run(c.now + 500)
    others = [i for i in c.nodes if i != lead]
    for i in others[fetching:]:
        c.isolate(i)
    epoch = c.view(lead).epoch
    c.run(c.now + 3000 + 200)  # the check-quorum timeout, 1.5 x 2000 ms, and a margin
    view = c.view(lead)
    assert (view.state is ReplicaState.LEADER and view.epoch == epoch) is leads
