"""Answers held past the requester's election timeout (FaultProfile.hold_past_election, in
the `+delays` profiles): a Vote, BeginQuorumEpoch or EndQuorumEpoch answer now and then
reaches its requester only after it moved to another state or epoch, so a late real-vote
grant reaches the Prospective its candidate became when its election timer fired. The
unmutated core ignores such answers; a core that counts a real vote's grant as a pre-vote
(mutant f84d43a25e1f of the campaign, issue #16) is caught by CandidateByPreVotes."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

import kraft.core.election as election
from refinement import invariants_general as gen
from refinement.faults import PROFILES, with_delays
from refinement.mutation.generate import mutants_of_source
from refinement.sim import SimConfig, simulate

PROFILE = "mixed+snapshots+delays"
SEEDS = range(10)


@pytest.mark.parametrize("profile", ["mixed+delays", "crashes+delays", PROFILE])
def test_the_delays_profiles_hold_vote_answers_past_an_election_timeout(profile: str) -> None:
    p = PROFILES[profile]
    assert p.hold_past_election > 0
    assert with_delays(PROFILES["mixed"]).hold_past_election == p.hold_past_election
    votes = quorum_epoch = 0
    for seed in range(5):
        r = simulate(SimConfig(seed=seed, profile=p))
        assert " votes_held=" in r.summary()
        votes += r.votes_held
        quorum_epoch += r.quorum_epoch_answers_held
    assert votes > 0 and quorum_epoch > 0, (votes, quorum_epoch)


def test_profiles_without_the_fault_hold_nothing() -> None:
    r = simulate(SimConfig(seed=0, profile=PROFILES["mixed+snapshots"]))
    assert r.votes_held == 0 and r.quorum_epoch_answers_held == 0
    assert "votes_held" not in r.summary()


def test_the_core_ignores_late_vote_answers() -> None:
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILES[PROFILE]))
        assert r.ok, r.summary()


def _mutated_election() -> types.ModuleType:
    """kraft.core.election with the campaign's bool-drop mutant of handle_vote_response
    applied as the generator makes it: the round check keeps only the epoch, so a real vote's
    late grant counts for the Prospective of the same epoch."""
    path = Path(election.__file__)
    source = path.read_text(encoding="utf-8")
    found = [
        m
        for m in mutants_of_source("kraft/core/election.py", source)
        if m.function.endswith("handle_vote_response")
        and m.operator == "bool-drop"
        and m.replacement == "in_reply_to.candidate_epoch != r._epoch"
    ]
    assert len(found) == 1, found
    module = types.ModuleType("mutated_election")
    module.__file__ = str(path)
    exec(compile(found[0].apply(source), str(path), "exec"), module.__dict__)
    return module


def test_counting_a_late_real_vote_as_a_pre_vote_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mutated = _mutated_election()
    monkeypatch.setattr(
        election.ElectionRole,
        "handle_vote_response",
        mutated.ElectionRole.handle_vote_response,
    )
    caught: dict[int, list[str]] = {}
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILES[PROFILE]))
        if r.violations:
            caught[seed] = [v.name for v in r.violations]
    assert caught, f"escaped seeds {SEEDS} of {PROFILE}"
    assert all(ns == [gen.CANDIDATE_BY_PRE_VOTES] for ns in caught.values()), caught
