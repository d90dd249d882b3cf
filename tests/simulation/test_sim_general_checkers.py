"""The general step checkers of refinement.invariants_general: each fires, in the simulator, on
a core weakened in the way it names (a leader or candidate without a majority, a handled
message with no trace action, a commit said before its high watermark, a follower refusing a
Fetch answer cut inside a batch), and stays silent on what the rules allow."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.core.effects import (
    ActionTaken,
    AppendCommitted,
    HighWatermarkMoved,
    StateChanged,
)
from kraft.core.election import ElectionRole
from kraft.core.follower import FollowerRole
from kraft.core.messages import BeginQuorumEpochRequest, VoteRequest, VoteResponse
from kraft.core.replica import Replica
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.records import TruncatedBatchError, iter_batches
from refinement import invariants_general as gen
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

N = NodeId(1)
VOTERS = (NodeId(1), NodeId(2), NodeId(3))


def _caught(profile: str, seeds: int) -> set[str]:
    names: set[str] = set()
    for seed in range(seeds):
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        names |= {v.name for v in r.violations}
    return names


def _name(v: object) -> str | None:
    return None if v is None else getattr(v, "name", None)


def test_only_real_votes_of_the_epoch_count() -> None:
    grant = VoteResponse(ErrorCode.NONE, NodeId(2), Epoch(4), True)
    vote = VoteRequest(ClusterId("c"), ReplicaKey(N), Epoch(4), Epoch(3), Offset(0))
    pre = VoteRequest(ClusterId("c"), ReplicaKey(N), Epoch(4), Epoch(3), Offset(0), pre_vote=True)
    assert gen.granted_epoch(grant, vote, pre_vote=False) == Epoch(4)
    assert gen.granted_epoch(grant, pre, pre_vote=False) is None
    assert gen.granted_epoch(grant, pre, pre_vote=True) == Epoch(4)
    assert gen.granted_epoch(grant, vote, pre_vote=True) is None
    refused = VoteResponse(ErrorCode.NONE, NodeId(2), Epoch(4), False)
    assert gen.granted_epoch(refused, vote, pre_vote=False) is None


def test_a_leader_needs_a_majority_of_real_votes() -> None:
    won = [StateChanged(ReplicaState.CANDIDATE, ReplicaState.LEADER, Epoch(4))]
    lone = gen.leader_elected_by_votes(N, won, voters=VOTERS, granted={Epoch(3): {NodeId(2)}})
    assert _name(lone) == gen.LEADER_ELECTED_BY_VOTES
    ok = gen.leader_elected_by_votes(N, won, voters=VOTERS, granted={Epoch(4): {NodeId(2)}})
    assert ok is None
    # A single voter elects itself.
    assert gen.leader_elected_by_votes(N, won, voters=(N,), granted={}) is None


def test_a_handled_message_needs_its_one_action() -> None:
    begin = BeginQuorumEpochRequest(ClusterId("c"), NodeId(2), Epoch(3))
    act = ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_REQUEST)
    assert gen.action_taken_for_handled_message(N, begin, [act], snapshots=False) is None
    for effects in ([], [act, act]):
        found = gen.action_taken_for_handled_message(N, begin, effects, snapshots=False)
        assert _name(found) == gen.ACTION_TAKEN_FOR_EVERY_HANDLED_MESSAGE


def test_a_commit_follows_its_high_watermark() -> None:
    commit = AppendCommitted(7, Offset(3), Offset(4), Epoch(2))
    moved = HighWatermarkMoved(Offset(5))
    found = gen.commit_after_high_watermark(N, [commit, moved], high_watermark=Offset(3))
    assert _name(found) == gen.COMMIT_AFTER_HIGH_WATERMARK
    assert gen.commit_after_high_watermark(N, [moved, commit], high_watermark=Offset(3)) is None
    assert gen.commit_after_high_watermark(N, [commit], high_watermark=Offset(5)) is None


def test_a_candidate_that_leads_on_its_own_vote_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def hasty(self: ElectionRole) -> None:
        r = self._r
        if r._state is ReplicaState.CANDIDATE:
            r._lead.become_leader()
        elif r._state is ReplicaState.PROSPECTIVE and r._voters.is_majority(r._granted):
            self._become_candidate()

    monkeypatch.setattr(ElectionRole, "maybe_win_election", hasty)
    assert gen.LEADER_ELECTED_BY_VOTES in _caught("none", 2)


def test_a_prospective_that_stands_on_its_own_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def hasty(self: ElectionRole) -> None:
        r = self._r
        if r._state is ReplicaState.PROSPECTIVE:
            self._become_candidate()
        elif r._state is ReplicaState.CANDIDATE and r._voters.is_majority(r._granted):
            r._lead.become_leader()

    monkeypatch.setattr(ElectionRole, "maybe_win_election", hasty)
    assert gen.CANDIDATE_BY_PRE_VOTES in _caught("none", 2)


def test_a_handled_message_without_its_action_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = FollowerRole.handle_begin_request

    def silent(self: FollowerRole, src: Any, req: Any, in_reply_to: Any) -> None:
        real(self, src, req, in_reply_to)
        self._r._out.remove(ActionTaken(Action.HANDLE_BEGIN_QUORUM_EPOCH_REQUEST))

    monkeypatch.setattr(FollowerRole, "handle_begin_request", silent)
    assert gen.ACTION_TAKEN_FOR_EVERY_HANDLED_MESSAGE in _caught("none", 2)


def test_a_commit_before_its_high_watermark_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def late_hwm(self: Replica, value: Offset) -> bool:
        if self._hwm is not None and value <= self._hwm:
            return False
        self._hwm = value
        self._out.extend(self._commits.high_watermark_raised(value, self._log))
        self._out.append(HighWatermarkMoved(value))
        self._reconfig.high_watermark_raised(value)
        return True

    monkeypatch.setattr(Replica, "_raise_hwm", late_hwm)
    assert gen.COMMIT_AFTER_HIGH_WATERMARK in _caught("none", 2)


def test_a_follower_refusing_an_answer_cut_inside_a_batch_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The follower as it was before it took Kafka's cut answers: an answer that ends inside
    a batch is refused whole. The snapshot adversary's profile cuts answers (cut_fetch)."""
    append_fetched = FollowerRole._append_fetched

    def whole_or_nothing(self: FollowerRole, records: Any) -> bool:
        try:
            list(iter_batches(records))
        except TruncatedBatchError:
            return False
        return append_fetched(self, records)

    monkeypatch.setattr(FollowerRole, "_append_fetched", whole_or_nothing)
    assert gen.FOLLOWER_APPENDS_WHOLE_BATCHES in _caught("mixed+snapshots+adversary", 2)


def test_the_unweakened_core_is_left_alone() -> None:
    assert not _caught("mixed", 2) & set(gen.GENERAL_CHECKERS)
    assert not _caught("mixed+snapshots+adversary", 2) & set(gen.GENERAL_CHECKERS)
