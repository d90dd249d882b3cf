"""Each KIP-630 and KIP-853/856 mutant of refinement.pipeline.mutants is caught by the
simulator's checkers on a deterministic sweep of seeds 0-9 under its profile, with the checker
named for the rule it breaks; the unmutated core holds every checker on the same seeds."""

from __future__ import annotations

import pytest

from refinement import invariants as inv
from refinement import invariants_reconfig as recon
from refinement.faults import PROFILES
from refinement.pipeline.mutants import MUTANT_PROFILES, MUTANTS
from refinement.sim import SimConfig, simulate

SEEDS = range(10)
EXPECTED = {
    "snapshot-past-hwm": inv.SNAPSHOT_MATCHES_LOG,
    "eager-log-start": inv.LOG_START_BELOW_LIVE_REPLICAS,
    "install-unvalidated": inv.SNAPSHOT_INTACT,
    "early-voter-change": recon.AT_MOST_ONE_UNCOMMITTED_VOTER_CHANGE,
    "two-uncommitted-changes": recon.AT_MOST_ONE_UNCOMMITTED_VOTER_CHANGE,
    "removed-leader-counts-itself": inv.MAJORITY_REACHED_HIGH_WATERMARK,
    "voters-not-reverted": recon.VOTER_SET_MATCHES_LOG,
}


def test_every_mutant_with_a_profile_has_an_expected_checker() -> None:
    assert set(EXPECTED) == set(MUTANT_PROFILES) <= set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(EXPECTED))
def test_a_seed_sweep_catches_the_mutant(mutant: str) -> None:
    profile = PROFILES[MUTANT_PROFILES[mutant]]
    caught: dict[int, list[str]] = {}
    for seed in SEEDS:
        config = SimConfig(seed=seed, profile=profile)
        r = simulate(config, replica_factory=MUTANTS[mutant])
        if r.violations:
            caught[seed] = [v.name for v in r.violations]
    assert caught, f"{mutant} escaped seeds {SEEDS} of {profile.name}"
    assert all(names == [EXPECTED[mutant]] for names in caught.values()), caught


@pytest.mark.parametrize("profile", sorted(set(MUTANT_PROFILES.values())))
def test_the_core_passes_the_seeds_that_catch_the_mutants(profile: str) -> None:
    for seed in SEEDS:
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        assert r.ok, r.summary()
