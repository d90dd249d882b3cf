"""FetchRetryExact after an invalid fetched snapshot (refinement.invariants_timing): a Follower
whose driver finds the snapshot it fetched broken (SnapshotValidated, valid false: a chunk was
corrupted on the way) goes back to Fetch exactly quorum.retry.backoff.ms later, never in the
same step. The `+snapshots` profiles with lossy links corrupt chunks, so the simulator reaches
the rule, and catches a fetcher that starts over at once."""

from __future__ import annotations

import pytest

from kraft.core.snapshot_transfer import SnapshotFetcher
from refinement.faults import PROFILES
from refinement.invariants_timing import FETCH_RETRY_NOT_EARLY
from refinement.sim import SimConfig, simulate

CONFIG = SimConfig(seed=1, profile=PROFILES["mixed+snapshots"], max_events=1500)


def test_the_core_backs_off_after_an_invalid_snapshot() -> None:
    r = simulate(CONFIG)
    assert r.ok, r.summary()
    assert r.chunks_corrupted > 0


def test_a_fetcher_that_starts_over_at_once_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    restart = SnapshotFetcher._restart_fetch

    def at_once(self: SnapshotFetcher, *, backoff: bool = False) -> None:
        restart(self, backoff=False)

    monkeypatch.setattr(SnapshotFetcher, "_restart_fetch", at_once)
    found = [v for v in simulate(CONFIG).violations if v.name == FETCH_RETRY_NOT_EARLY]
    assert found and "not valid" in found[0].detail
