"""What a replica makes of the log state its driver states at start (LogState): the epochs of
the leader-epoch checkpoint that it keeps, the records it knows an epoch for, and the voter
sets stated before the log (the bootstrap checkpoint's, at offset -1) and in it (KIP-853).

Each test builds a replica over a MemoryLog with a LogState of its own (the driver's view
of a directory after a crash or a lost checkpoint) and checks what the replica then shows
or does."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from memory_logs import build_log, key

from kraft.core.effects import ActionTaken, ElectionState, Send
from kraft.core.events import SnapshotWritten, Tick
from kraft.core.log_metadata import LogState
from kraft.core.messages import VoteRequest
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.ids import ClusterId, Epoch, Offset, OffsetAndEpoch
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog

CLUSTER = ClusterId("log-metadata-init")
S = ReplicaState


def _voters(*ids: int) -> VoterSet:
    return VoterSet(tuple(key(i) for i in ids))


def _replica(
    log: MemoryLog, state: LogState, *, epoch: int = 0, voters: tuple[int, ...] = (1, 2, 3)
) -> Replica:
    """Replica 1 over `log`, told `state` of it, with the static `voters`."""
    return Replica(
        ReplicaConfig(key(1), CLUSTER, tuple(key(v) for v in voters), QuorumTiming()),
        election_state=ElectionState(Epoch(epoch)),
        log_state=state,
        reader=BatchReader(log),
        rng=random.Random(0),
        now_ms=0,
    )


def test_an_epoch_starting_at_the_log_end_is_dropped_so_votes_state_the_last_record() -> None:
    # Records 0..2 in epoch 1; the leader-epoch checkpoint also holds epoch 4 starting at 3,
    # the log end: its records never reached the log before the crash. Kafka's LogLoader
    # truncates the cache from the log end, so the log ends in epoch 1.
    log = build_log([(1, 3)])
    state = log_state_of(log)
    assert state.epochs == ((Epoch(1), Offset(0)),)
    r = _replica(log, replace(state, epochs=(*state.epochs, (Epoch(4), Offset(3)))), epoch=4)
    r.start()
    assert r.view().last_epoch == 1
    # The pre-vote it sends when its election timer runs out states (1, 3).
    effects = r.step(Tick(r.next_deadline_ms()))
    assert r.view().state is S.PROSPECTIVE
    asks = [
        e.message for e in effects if isinstance(e, Send) and isinstance(e.message, VoteRequest)
    ]
    assert asks
    assert {(m.last_epoch, m.last_end_offset) for m in asks} == {(Epoch(1), Offset(3))}


@pytest.mark.parametrize("cache", [(), ((Epoch(2), Offset(2)),)], ids=["empty", "from-2"])
def test_a_snapshot_written_before_the_records_the_epoch_cache_covers_is_not_held(
    cache: tuple[tuple[Epoch, Offset], ...],
) -> None:
    # Records 0..2 in epoch 2, but the checkpoint lost the entry of the log's first records
    # (it holds nothing, or epoch 2 from 2 only): the replica knows no epoch for offset 1, so
    # a snapshot ending at 2 (whose last record is 1) is no snapshot of this log it holds.
    log = build_log([(2, 3)])
    r = _replica(log, replace(log_state_of(log), epochs=cache))
    r.start()
    effects = r.step(SnapshotWritten(0, OffsetAndEpoch(Epoch(2), Offset(2))))
    assert ActionTaken(Action.CREATE_SNAPSHOT) not in effects
    assert r.view().log_start_offset == 0


def test_one_voter_set_stated_before_the_log_replaces_the_static_one_and_no_second() -> None:
    # A voter set at -1 (the bootstrap checkpoint's, before any record) replaces the static
    # set: replica 1 is in the static set but not in the stated one. As Kafka's
    # TreeMapLogHistory.addAt, offsets must increase from -1: a second set at -1, or one
    # below -1, is refused.
    log = build_log([(1, 3)])
    stated = ((Offset(-1), _voters(4, 5, 6)),)
    r = _replica(log, replace(log_state_of(log), voter_history=stated))
    r.start()
    assert r.view().voters == (key(4).id, key(5).id, key(6).id)
    assert not r.is_voter
    for bad in (
        ((Offset(-1), _voters(1, 2, 3)), (Offset(-1), _voters(4, 5, 6))),
        ((Offset(-2), _voters(4, 5, 6)),),
    ):
        with pytest.raises(ValueError, match="out of order"):
            _replica(log, replace(log_state_of(log), voter_history=bad))


def test_a_voter_set_stated_before_the_log_after_one_of_the_log_is_refused() -> None:
    # The history must be in log order: once a Voters record of the log (at 1) is stated,
    # a set before the log (at -1) is out of order, as Kafka's VoterSetHistory.addAt refuses.
    log = build_log([(1, 3)])
    good = ((Offset(-1), _voters(1, 2, 3)), (Offset(1), _voters(1, 2)))
    r = _replica(log, replace(log_state_of(log), voter_history=good))
    assert r.view().voters == (key(1).id, key(2).id)
    bad = (*good, (Offset(-1), _voters(4, 5, 6)))
    with pytest.raises(ValueError, match="out of order"):
        _replica(log, replace(log_state_of(log), voter_history=bad))
