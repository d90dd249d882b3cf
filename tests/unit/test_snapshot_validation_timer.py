"""While the driver validates a fetched snapshot (off its event loop, for as long as the file
takes), the follower asks the leader nothing, so the leader's silence is not a reason for an
election: the fetch timeout is suspended until SnapshotValidated and runs again from then
(kraft.core.snapshot_transfer). Without this, a snapshot whose validation outlasts the fetch
timeout would be abandoned by the election it starts, fetched again, and never installed."""

from __future__ import annotations

from test_snapshots_follower import fetch_all, follower, start_transfer

from kraft.core.effects import InstallSnapshot, ValidateSnapshot
from kraft.core.events import SnapshotValidated
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, Offset, OffsetAndEpoch

SNAP = OffsetAndEpoch(Epoch(2), Offset(100))
FETCH_TIMEOUT = 2000


def test_a_long_validation_does_not_time_the_leader_out() -> None:
    h = follower(fetch_timeout_ms=FETCH_TIMEOUT, request_timeout_ms=10_000)
    effects = fetch_all(h, start_transfer(h))
    [v] = [e for e in effects if isinstance(e, ValidateSnapshot)]
    # Ten fetch timeouts pass while the file is checked: every due timer fires, no election.
    validating_since = h.now
    while h.now < validating_since + 10 * FETCH_TIMEOUT:
        h.tick(min(h.replica.next_deadline_ms(), validating_since + 10 * FETCH_TIMEOUT))
        assert h.view.state is ReplicaState.FOLLOWER
    effects = h.step(SnapshotValidated(h.now, v.snapshot_id, True))
    assert [e for e in effects if isinstance(e, InstallSnapshot)] == [InstallSnapshot(SNAP)]
    assert h.view.state is ReplicaState.FOLLOWER


def test_the_fetch_timeout_runs_again_after_a_failed_validation() -> None:
    h = follower(fetch_timeout_ms=FETCH_TIMEOUT, request_timeout_ms=100_000)
    effects = fetch_all(h, start_transfer(h))
    [v] = [e for e in effects if isinstance(e, ValidateSnapshot)]
    h.tick(h.now + 5 * FETCH_TIMEOUT)
    h.step(SnapshotValidated(h.now, v.snapshot_id, False, reason="bad CRC"))
    assert h.view.state is ReplicaState.FOLLOWER
    # The leader now stays silent: within the randomized fetch timeout after the answer, the
    # follower gives up on it (a pre-vote: Prospective).
    answered = h.now
    while h.view.state is ReplicaState.FOLLOWER:
        h.tick()
        assert h.now <= answered + 2 * FETCH_TIMEOUT
    assert h.view.state is ReplicaState.PROSPECTIVE
