"""The only voter's checkers (refinement.invariants_only_voter) under the `solo` profile, and
VoteRetryNotEarly's rule that a voter whose answer was counted is not asked again (under
`mixed+quick`, whose requests time out within an election round): each fires
in the simulator on a core weakened the way it names, and stays silent on the core as it is."""

from __future__ import annotations

from typing import Any

import pytest

from kraft.core.election import ElectionRole
from kraft.core.leader import LeaderRole
from kraft.core.vocabulary import ReplicaState
from refinement import invariants_only_voter as only
from refinement import invariants_timing as timing_inv
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate


def _caught(profile: str, seeds: range) -> set[str]:
    names: set[str] = set()
    for seed in seeds:
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        names |= {v.name for v in r.violations}
    return names


def test_solo_runs_one_voter_and_two_observers() -> None:
    r = simulate(SimConfig(seed=0, profile=PROFILES["solo"], max_events=600))
    assert r.ok, r.summary()
    assert r.committed > 0


def test_an_only_voter_that_waits_for_its_timer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ElectionRole.election_timeout

    def patient(self: ElectionRole, *, at_start: bool = False) -> None:
        if not at_start:
            real(self)

    monkeypatch.setattr(ElectionRole, "election_timeout", patient)
    assert only.ONLY_VOTER_LEADS_AT_START in _caught("solo", range(1))


def test_a_leader_that_commits_its_first_record_late_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = LeaderRole._maybe_advance_hwm

    def lazy(self: LeaderRole) -> None:
        r = self._r
        if r._leader is not None and r._log.end_offset == r._leader.epoch_start + 1:
            return  # the epoch's LeaderChange alone: left uncommitted
        real(self)

    monkeypatch.setattr(LeaderRole, "_maybe_advance_hwm", lazy)
    assert only.ONLY_VOTER_COMMITS_AT_ONCE in _caught("solo", range(1))


def test_a_candidate_that_asks_a_voter_again_after_its_answer_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = ElectionRole.handle_vote_response

    def forgetful(self: ElectionRole, src: Any, resp: Any, in_reply_to: Any) -> None:
        r = self._r
        due = r._retry.get(src)
        real(self, src, resp, in_reply_to)
        standing = r._state in (ReplicaState.PROSPECTIVE, ReplicaState.CANDIDATE)
        if due is not None and src not in r._retry and standing and r._retry:
            r._retry[src] = due  # asked again at the answered request's timeout

    monkeypatch.setattr(ElectionRole, "handle_vote_response", forgetful)
    assert timing_inv.VOTE_RETRY_NOT_EARLY in _caught("mixed+quick", range(1))


def test_the_core_as_it_is_is_left_alone() -> None:
    watched = {*only.ONLY_VOTER_CHECKERS, timing_inv.VOTE_RETRY_NOT_EARLY}
    assert not _caught("solo", range(3)) & watched
    assert not _caught("mixed+quick", range(3)) & watched
