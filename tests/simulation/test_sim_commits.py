"""The simulator's client hears the core's commit rule (kraft.core.commits), as the node's
clients do: an accepted append is acknowledged on the accepting replica's AppendCommitted,
whatever state that replica is in by then, and counted lost on its AppendLost."""

from __future__ import annotations

import pytest

from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate


@pytest.mark.parametrize("seed", range(6))
def test_with_no_replica_dying_every_accepted_append_is_decided_by_its_core(seed: int) -> None:
    # Partitions only: no incarnation dies with appends it accepted, so the core decides all
    # of them (a leader cut off by a partition decides its appends once it follows again).
    result = simulate(SimConfig(seed=seed, profile=PROFILES["partitions"]))
    assert result.ok, result.summary()
    assert result.accepted > 0
    assert result.committed + result.lost == result.accepted, result.summary()
    # One latency per acknowledgement, from acceptance to the core's AppendCommitted.
    assert len(result.commit_latency_ms) == result.committed
    assert min(result.commit_latency_ms) >= 0
