"""The timing checkers (refinement.invariants_timing) hold on the unmutated core under the
sweep's profiles, with and without the accumulator's linger, and each catches a core whose
timing breaks the contract it states, named for the rule broken."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from kraft.core import appends, election, follower, replica
from kraft.core.timing import QuorumTiming
from refinement import invariants_timing as timing
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate
from refinement.sim_config import LINGER_MS, sim_variant

SEEDS = range(5)
LINGER = QuorumTiming(append_linger_ms=LINGER_MS)


def test_the_node_defaults_are_the_documented_ones() -> None:
    assert timing.quorum_defaults_as_documented(QuorumTiming()) is None
    wrong = timing.quorum_defaults_as_documented(replace(QuorumTiming(), retry_backoff_ms=21))
    assert wrong is not None
    assert wrong.name == timing.QUORUM_DEFAULTS_AS_DOCUMENTED


def test_successor_delay_is_kip_595s() -> None:
    """MIN(quorum.election.backoff.max.ms, quorum.retry.backoff.ms * 2^(N-1)), N = 0 at once."""
    t = QuorumTiming(retry_backoff_ms=20, election_backoff_max_ms=100)
    assert [timing.successor_delay_ms(n, t) for n in range(5)] == [0, 20, 40, 80, 100]


def test_the_linger_variant_runs_a_profile_with_kafkas_linger() -> None:
    profile, t = sim_variant("mixed+linger")
    assert profile is PROFILES["mixed"]
    assert t.append_linger_ms == LINGER_MS == 25
    assert sim_variant("mixed") == (PROFILES["mixed"], QuorumTiming())


@pytest.mark.parametrize(
    ("profile", "linger"),
    [("mixed", False), ("crashes+snapshots", False), ("mixed", True), ("lossy", True)],
)
def test_the_core_keeps_its_timing(profile: str, linger: bool) -> None:
    for seed in SEEDS:
        config = SimConfig(seed=seed, profile=PROFILES[profile])
        if linger:
            config = replace(config, timing=LINGER)
        r = simulate(config)
        assert r.ok, r.summary()


def _half_election_timeout(self: election.ElectionRole) -> int:
    return self._r._timing.election_timeout_ms // 2


def _half_fetch_timeout(self: follower.FollowerRole) -> int:
    return self._r._timing.fetch_timeout_ms // 2


def _no_backoff_on_failure(self: election.ElectionRole, ev: object) -> None:
    del self, ev  # a failed vote request is asked again only after the request timeout


MUTANTS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], bool, str]] = {
    "election-timeout-too-short": (
        lambda mp: mp.setattr(
            election.ElectionRole, "random_election_timeout", _half_election_timeout
        ),
        False,
        timing.ELECTION_TIMEOUT_NOT_EARLY,
    ),
    "fetch-timeout-too-short": (
        lambda mp: mp.setattr(follower.FollowerRole, "random_fetch_timeout", _half_fetch_timeout),
        False,
        timing.FETCH_TIMEOUT_NOT_EARLY,
    ),
    "check-quorum-too-soon": (
        lambda mp: mp.setattr(replica, "CHECK_QUORUM_TIMEOUT_FACTOR", 0.5),
        False,
        timing.CHECK_QUORUM_NOT_EARLY,
    ),
    "batch-written-before-linger": (
        # Batches of at most 64 bytes: the second small append no longer fits beside the first.
        lambda mp: mp.setattr(appends, "MAX_RECORDS_BYTES", 64),
        True,
        timing.APPEND_LINGER_NOT_EARLY,
    ),
    "vote-not-retried-after-backoff": (
        lambda mp: mp.setattr(election.ElectionRole, "vote_failed", _no_backoff_on_failure),
        False,
        timing.VOTE_RETRY_NOT_LATE,
    ),
}


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_a_seed_sweep_catches_the_timing_mutant(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    patch, linger, expected = MUTANTS[name]
    patch(monkeypatch)
    caught: dict[int, list[str]] = {}
    for seed in SEEDS:
        config = SimConfig(seed=seed, profile=PROFILES["crashes" if "vote" in name else "mixed"])
        if linger:
            config = replace(config, timing=LINGER)
        r = simulate(config)
        if r.violations:
            caught[seed] = [v.name for v in r.violations]
    assert caught, f"{name} escaped seeds {SEEDS}"
    assert all(names == [expected] for names in caught.values()), caught
