"""FetchAnswerPosition (refinement.invariants_answers): a Fetch answer without error names the
snapshot id, the diverging epoch or neither as Kafka 4.3.1's leader does for that position
(tryCompleteFetchRequest, RaftLog.validateOffsetAndEpoch, KafkaRaftLog.endOffsetForEpoch).
The reference answers each rule of validateOffsetAndEpoch; the simulator runs the checker on
every Fetch answer, and the `mixed+snapshots+adversary` profile's forged Fetch at a leader's
log start catches a core that forgets the rule "at the log start in another epoch than the
earliest snapshot's"."""

from __future__ import annotations

import pytest

import kraft.core.snapshots as core_snapshots
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.epoch_cache import EpochEntry, LeaderEpochCache
from refinement import invariants_answers as ans
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate


def _oe(epoch: int, offset: int) -> OffsetAndEpoch:
    return OffsetAndEpoch(Epoch(epoch), Offset(offset))


# A leader whose log starts at its snapshot (offset 50, epoch 2) and holds epochs 2 (from 50),
# 4 (from 60) and 5 (from 80) up to offset 90; an older snapshot is gone.
_CACHE = LeaderEpochCache(
    [
        EpochEntry(Epoch(2), Offset(50)),
        EpochEntry(Epoch(4), Offset(60)),
        EpochEntry(Epoch(5), Offset(80)),
    ]
)
LOG = ans.LeaderLog(
    start=Offset(50),
    end=Offset(90),
    snapshots=(_oe(2, 50),),
    last_epoch=Epoch(5),
    end_offset_for=lambda e: _CACHE.end_offset_for(e, Offset(90)),
)


def _at(offset: int, epoch: int, log: ans.LeaderLog = LOG) -> tuple[object, object]:
    return ans.kafka_fetch_position(log, Offset(offset), Epoch(epoch))


def test_the_reference_answers_each_rule_of_validate_offset_and_epoch() -> None:
    snap = (_oe(2, 50), None)
    assert _at(0, 0) == snap  # an empty fetcher: the latest snapshot
    assert _at(49, 2) == snap  # below the log start
    assert _at(50, 4) == snap  # at the log start in another epoch than the snapshot's
    assert _at(50, 5) == snap
    assert _at(55, 1) == snap  # an epoch older than the earliest snapshot's
    assert _at(50, 2) == (None, None)  # at the log start in the snapshot's epoch
    assert _at(60, 2) == (None, None)
    assert _at(70, 4) == (None, None)
    assert _at(90, 5) == (None, None)
    assert _at(65, 3) == (None, _oe(2, 60))  # an epoch the log never had: where 2 ends
    assert _at(85, 4) == (None, _oe(4, 80))  # past where its epoch ends
    assert _at(95, 5) == (None, _oe(5, 90))  # past the log end


def test_without_snapshots_only_the_epoch_cache_answers() -> None:
    cache = LeaderEpochCache([EpochEntry(Epoch(3), Offset(0)), EpochEntry(Epoch(5), Offset(20))])
    log = ans.LeaderLog(
        start=Offset(0),
        end=Offset(30),
        snapshots=(),
        last_epoch=Epoch(5),
        end_offset_for=lambda e: cache.end_offset_for(e, Offset(30)),
    )
    assert _at(0, 0, log) == (None, None)
    assert _at(10, 3, log) == (None, None)
    assert _at(25, 3, log) == (None, _oe(3, 20))
    assert _at(10, 2, log) == (None, _oe(2, 0))  # below every epoch: itself, at the start
    assert _at(10, 4, log) == (None, _oe(3, 20))
    # The bootstrap checkpoint is never sent to an empty fetcher.
    boot = ans.LeaderLog(log.start, log.end, (_oe(0, 0),), log.last_epoch, log.end_offset_for)
    assert _at(0, 0, boot) == (None, None)


def test_the_checker_compares_both_fields_of_an_answer_without_error() -> None:
    req = FetchRequest(
        ClusterId("c"), ReplicaKey(NodeId(2)), Epoch(5), Offset(50), Epoch(4), Offset(0)
    )
    base = FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(5), Offset(60), Offset(50))
    wrong = ans.fetch_answer_position(NodeId(1), NodeId(2), req, base, LOG)
    assert wrong is not None and wrong.name == ans.FETCH_ANSWER_POSITION
    right = FetchResponse(
        ErrorCode.NONE, NodeId(1), Epoch(5), Offset(60), Offset(50), snapshot_id=_oe(2, 50)
    )
    assert ans.fetch_answer_position(NodeId(1), NodeId(2), req, right, LOG) is None
    error = FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(1), Epoch(5), Offset(-1), Offset(0))
    assert ans.fetch_answer_position(NodeId(1), NodeId(2), req, error, LOG) is None


def _forgets_the_log_start_rule(
    self: core_snapshots.SnapshotRole, req: FetchRequest
) -> OffsetAndEpoch | None:
    """snapshot_for_fetch without "at the log start in another epoch" (mutant 1f75bdb52fd7)."""
    log = self._r._log
    latest, earliest = log.latest_snapshot, log.earliest_snapshot
    if latest is None or earliest is None:
        return None
    if req.fetch_offset == 0 and latest != core_snapshots.BOOTSTRAP_SNAPSHOT:
        return latest
    if log.start_offset == 0 and req.fetch_offset == 0:
        return None
    if req.fetch_offset < log.start_offset or req.last_fetched_epoch < earliest.epoch:
        return latest
    return None


def test_the_simulator_catches_a_leader_that_forgets_the_log_start_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The forgery that needs the rule (a Fetch at the log start) comes up in some seeds only.
    profile = PROFILES["mixed+snapshots+adversary"]
    configs = [SimConfig(seed=s, profile=profile, max_events=1500) for s in range(8)]
    assert all(simulate(c).ok for c in configs)
    monkeypatch.setattr(
        core_snapshots.SnapshotRole, "snapshot_for_fetch", _forgets_the_log_start_rule
    )
    caught = [
        c.seed
        for c in configs
        if ans.FETCH_ANSWER_POSITION in {v.name for v in simulate(c).violations}
    ]
    assert caught, "no seed of 0-7 caught the forgotten rule"


def test_every_fetch_answer_carries_the_senders_log_start() -> None:
    answer = FetchResponse(
        ErrorCode.NOT_LEADER_OR_FOLLOWER, NodeId(1), Epoch(5), Offset(-1), Offset(50)
    )
    assert ans.fetch_answer_log_start(NodeId(1), NodeId(2), answer, Offset(50)) is None
    stale = ans.fetch_answer_log_start(NodeId(1), NodeId(2), answer, Offset(60))
    assert stale is not None and stale.name == ans.FETCH_ANSWER_POSITION
