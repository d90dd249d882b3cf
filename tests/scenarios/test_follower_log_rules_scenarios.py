"""Scenario tests of the follower's log rules on a Fetch answer, and of its answers to
BeginQuorumEpoch and EndQuorumEpoch, in the corners the simulator's sweep does not reach.

- A Fetch answer naming both a diverging epoch and a snapshot: the divergence wins. Kafka's
  KafkaRaftClient.handleFetchResponse looks at the diverging epoch before the snapshot id, so
  the follower truncates and fetches on; it neither fetches the snapshot nor reports one it
  cannot fetch.
- A divergence whose truncation point is the follower's log end leaves nothing to truncate:
  no TruncateLog is asked of the driver.
- A Voters record (KIP-853) takes effect when appended and is undone when truncated away
  (KIP-856): a follower that appended an uncommitted voter set change and then truncates it
  on a divergence is back on the previous voter set.
- The follower keeps the idempotent producer state of the batches it fetches, producer id 0
  included (ids start at 0; only -1 means no producer): once it leads, a retried batch of
  producer 0 is answered with the offsets its first copy got, not appended twice.
- A Fetch answer whose records are corrupt (a batch that fails its CRC, or a control batch
  whose Voters record cannot be a voter set) is not a successful answer: nothing is appended,
  the high watermark it reports is not taken, the leader is not taken for alive (the fetch
  timer is not reset) and no Fetch follows at once: the follower waits for its in-flight
  Fetch to time out, as Kafka's follower, which fails on such records, retries only later.
- An accepted BeginQuorumEpoch is answered with ErrorCode.NONE.
- An EndQuorumEpoch of a newer epoch makes the replica learn that epoch and its leader first
  (Kafka's handleEndQuorumEpochRequest transitions before it looks at the successors); as the
  resigning leader's first preferred successor, its fetch timer then runs out at once.

One replica is driven by hand (test_retry_timing_scenarios.Solo, under the simulator's timing
checkers) but for the producer story, which runs a small cluster (scenario_harness.Cluster).
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from memory_logs import key
from scenario_harness import Cluster
from test_producer_scenarios import elected, fail_over, offsets, produce
from test_retry_timing_scenarios import CLUSTER, LEADER, VOTERS, Solo

from kraft.control_records import Endpoint, VoterEntry, VotersRecord, encode_control_batch
from kraft.core.effects import AppendToLog, Effect, SnapshotRequired, StateChanged, TruncateLog
from kraft.core.events import Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
)
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.encoding import varint_bytes
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ProducerId
from kraft.records import ATTR_CONTROL, assemble_batch, decode_batch, encode_batch, record_body
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog
from refinement import invariants_timing as timing

OLD_LEADER = NodeId(3)  # the leader of epoch 1, before LEADER (2) leads epoch 2
E1, E2 = Epoch(1), Epoch(2)


def data(base: int, epoch: int, n: int) -> bytes:
    """One data batch of `n` records at `base`, written in `epoch`."""
    return encode_batch(base, epoch, [b"v%d" % (base + i) for i in range(n)], timestamp_ms=0)


def voters_record(*ids: int) -> VotersRecord:
    return VotersRecord(
        0,
        tuple(
            VoterEntry(i, key(i).directory_id, (Endpoint("CONTROLLER", "h", 9000 + i),), 0, 1)
            for i in ids
        ),
    )


def answer(
    leader: NodeId,
    epoch: Epoch,
    *,
    hwm: int = 0,
    records: bytes = b"",
    diverging: OffsetAndEpoch | None = None,
    snapshot_id: OffsetAndEpoch | None = None,
) -> FetchResponse:
    return FetchResponse(
        ErrorCode.NONE,
        leader,
        epoch,
        Offset(hwm),
        Offset(0),
        diverging_epoch=diverging,
        snapshot_id=snapshot_id,
        records=records,
    )


def fetch_of(effects: list[Effect], s: Solo) -> FetchRequest:
    [send] = s.sent(FetchRequest, effects)
    assert isinstance(send.message, FetchRequest)
    return send.message


def follow(s: Solo, leader: NodeId, epoch: Epoch, at: int) -> FetchRequest:
    """BeginQuorumEpoch of `leader` in `epoch`: the Fetch the replica sends it."""
    return fetch_of(s.receive(at, leader, BeginQuorumEpochRequest(CLUSTER, leader, epoch), None), s)


def fetched(s: Solo, at: int, fetch: FetchRequest, records: bytes, hwm: int) -> FetchRequest:
    """The leader of epoch 1 answers `fetch` with `records`: the next Fetch."""
    effects = s.receive(at, OLD_LEADER, answer(OLD_LEADER, E1, hwm=hwm, records=records), fetch)
    assert [e for e in effects if isinstance(e, AppendToLog)]
    return fetch_of(effects, s)


def truncations(effects: list[Effect]) -> list[TruncateLog]:
    return [e for e in effects if isinstance(e, TruncateLog)]


class DynamicSolo(Solo):
    """Solo bootstrapped as a dynamic quorum (kraft.version 1): the voter set 1, 2, 3 is the
    bootstrap checkpoint's Voters record (offset -1), so that the log's Voters records change
    it as a KIP-853 quorum's do."""

    def __init__(self, me: int = 1, *, seed: int = 0) -> None:
        self.timing = QuorumTiming()
        self.me = NodeId(me)
        self.log = log = MemoryLog()
        bootstrap = voter_set_of(voters_record(*(v.id for v in VOTERS)))
        state = dataclasses.replace(log_state_of(log), voter_history=((Offset(-1), bootstrap),))
        self.replica = Replica(
            ReplicaConfig(key(me), CLUSTER, (), self.timing),
            election_state=None,
            log_state=state,
            reader=BatchReader(log),
            rng=random.Random(seed),
            now_ms=0,
            snapshots=None,
        )
        self.now = 0
        self.monitor = timing.TimingMonitor(self.timing, tuple(v.id for v in VOTERS))
        self.effects = self.replica.start()
        self._check(self.monitor.started(self.me, 0, self.effects))


# ---------------------------------------------------------------- divergence


@pytest.mark.parametrize("snapshots", [False, True], ids=["without-snapshots", "with-snapshots"])
def test_a_divergence_wins_over_a_snapshot_id_in_the_same_answer(snapshots: bool) -> None:
    """The follower holds 0..4 of epoch 1 (batches 0..2 and 3..4, HWM 0). The leader of epoch
    2 answers its Fetch naming both a divergence at 3 of epoch 1 and a snapshot: the follower
    truncates to 3 and fetches on from there at once; it starts no snapshot transfer (with
    snapshots) and reports no snapshot required (without)."""
    s = Solo(snapshots=snapshots)
    a = follow(s, OLD_LEADER, E1, 0)
    fetched(s, 5, a, data(0, 1, 3) + data(3, 1, 2), hwm=0)
    b = follow(s, LEADER, E2, 10)
    both = answer(
        LEADER,
        E2,
        diverging=OffsetAndEpoch(E1, Offset(3)),
        snapshot_id=OffsetAndEpoch(E1, Offset(3)),
    )
    effects = s.receive(15, LEADER, both, b)
    assert truncations(effects) == [TruncateLog(Offset(3))]
    assert not [e for e in effects if isinstance(e, SnapshotRequired)]
    assert not s.sent(FetchSnapshotRequest, effects)
    view = s.replica.view()
    assert (view.end_offset, view.last_epoch, view.fetching_snapshot) == (3, 1, None)
    c = fetch_of(effects, s)
    assert (c.fetch_offset, c.last_fetched_epoch) == (3, 1)


def test_a_divergence_at_the_log_end_truncates_nothing() -> None:
    """The follower holds 0..2 of epoch 1; the leader of epoch 2 says the logs agree for
    epoch 1 up to 3, the follower's end: there is nothing to truncate, and the driver is asked
    for no TruncateLog. The follower fetches on from its end."""
    s = Solo()
    a = follow(s, OLD_LEADER, E1, 0)
    fetched(s, 5, a, data(0, 1, 3), hwm=0)
    b = follow(s, LEADER, E2, 10)
    effects = s.receive(15, LEADER, answer(LEADER, E2, diverging=OffsetAndEpoch(E1, Offset(3))), b)
    assert truncations(effects) == []
    c = fetch_of(effects, s)
    assert (c.fetch_offset, c.last_fetched_epoch) == (3, 1)
    assert (s.replica.view().end_offset, s.log.end_offset) == (3, 3)


def test_a_voter_set_change_truncated_away_is_undone() -> None:
    """A dynamic quorum 1, 2, 3. The leader of epoch 1 (3) replicates two records and then a
    Voters record removing node 1, uncommitted (HWM 2): node 1, as it appends it, is no longer
    a voter. The leader of epoch 2 (2) never had that record: its answer diverges at 2, and
    node 1 truncates it away, back on the voter set 1, 2, 3 and a voter again (KIP-856)."""
    s = DynamicSolo()
    a = follow(s, OLD_LEADER, E1, 0)
    b = fetched(s, 5, a, data(0, 1, 2), hwm=0)
    removal = encode_control_batch(2, 1, voters_record(2, 3), timestamp_ms=0)
    fetched(s, 10, b, removal, hwm=2)
    view = s.replica.view()
    assert (view.voters, view.is_voter, view.end_offset, view.high_watermark) == (
        (2, 3),
        False,
        3,
        2,
    )
    d = follow(s, LEADER, E2, 20)
    assert (d.fetch_offset, d.last_fetched_epoch) == (3, 1)
    effects = s.receive(25, LEADER, answer(LEADER, E2, diverging=OffsetAndEpoch(E1, Offset(2))), d)
    assert truncations(effects) == [TruncateLog(Offset(2))]
    view = s.replica.view()
    assert (view.voters, view.is_voter, view.end_offset) == ((1, 2, 3), True, 2)
    assert s.replica.is_voter


# ---------------------------------------------------------------- idempotent producers


def test_a_follower_keeps_producer_zeros_batches_and_deduplicates_them_once_it_leads() -> None:
    """Producer id 0 is a producer (only -1 means none). Its batch (sequences 0..1) commits
    under the first leader and reaches every voter; that leader crashes. The next leader,
    whose producer table was built from the batches it fetched, answers a retry of the batch
    with the offsets its first copy got, and appends the next sequence at its log end."""
    c = Cluster(3, seed=11)
    first = elected(c)
    zero = ProducerId(0)
    sent = produce(c, first, zero, 0, 2, 100)
    assert sent.error is ErrorCode.NONE
    second = fail_over(c, first)
    again = produce(c, second, zero, 0, 2, 200)
    assert again.error is ErrorCode.NONE
    assert offsets(again) == offsets(sent)
    log_end = c.nodes[second].log.end_offset
    nxt = produce(c, second, zero, 2, 1, 201)
    assert nxt.error is ErrorCode.NONE and nxt.first_offset == log_end


# ---------------------------------------------------------------- corrupt answers


def bad_crc(batch: bytes) -> bytes:
    """The batch with its last byte flipped: its CRC no longer matches."""
    return batch[:-1] + bytes([batch[-1] ^ 0xFF])


def voters_record_cut_short(base: int) -> bytes:
    """A control batch, CRC and all well formed, whose one Voters record's value ends two
    bytes early: the record cannot be decoded."""
    whole = encode_control_batch(base, 1, voters_record(1, 2, 3), timestamp_ms=0)
    _, [record] = decode_batch(whole)
    assert record.value is not None
    body = record_body(0, record.key, record.value[:-2], ())
    return assemble_batch(
        base,
        1,
        [b"", varint_bytes(len(body)), body],
        attributes=ATTR_CONTROL,
        count=1,
        timestamp_ms=0,
    )


CORRUPT = {
    "bad-crc": lambda base: bad_crc(data(base, 1, 2)),
    "good-then-bad-crc": lambda base: data(base, 1, 1) + bad_crc(data(base + 1, 1, 1)),
    # A well-formed control batch whose Voters record names voter 2 twice: no voter set.
    "voters-record-naming-a-voter-twice": lambda base: encode_control_batch(
        base, 1, voters_record(1, 2, 2), timestamp_ms=0
    ),
    "voters-record-cut-short": voters_record_cut_short,
}


@pytest.mark.parametrize("corrupt", list(CORRUPT), ids=list(CORRUPT))
def test_a_corrupt_answer_is_not_taken_and_the_next_fetch_waits_for_the_request_timeout(
    corrupt: str,
) -> None:
    """The follower holds 0..2 of epoch 1 (HWM 0); the leader answers the next Fetch with
    corrupt records and a high watermark of 3. Nothing is appended, the HWM stays 0, and no
    Fetch goes out in that step: the next one goes when the answered Fetch's request timeout
    runs out."""
    s = Solo()
    a = s.follow()
    b = fetch_of(s.receive(5, LEADER, answer(LEADER, E1, records=data(0, 1, 3)), a), s)
    sent_at = s.now
    effects = s.receive(10, LEADER, answer(LEADER, E1, hwm=3, records=CORRUPT[corrupt](3)), b)
    assert not [e for e in effects if isinstance(e, AppendToLog)]
    assert not s.sent(FetchRequest, effects)
    view = s.replica.view()
    assert (view.end_offset, view.high_watermark, view.voters) == (3, 0, (1, 2, 3))
    again = s.tick_until_sent(FetchRequest, limit=sent_at + s.timing.request_timeout_ms)
    assert s.now == sent_at + s.timing.request_timeout_ms
    assert isinstance(again.message, FetchRequest)
    assert (again.message.fetch_offset, again.message.last_fetched_epoch) == (3, 1)


@pytest.mark.parametrize("corrupt", list(CORRUPT), ids=list(CORRUPT))
def test_a_leader_that_answers_only_corrupt_records_is_taken_for_silent(corrupt: str) -> None:
    """A corrupt answer does not show the leader alive: a follower whose every Fetch after a
    good answer is answered with corrupt records stands when the fetch timer that good answer
    set runs out (within a fetch timeout and half an election timeout), not later."""
    s = Solo(request_timeout_ms=300)
    fetch = s.follow()
    good_at = 5
    fetch = fetch_of(
        s.receive(good_at, LEADER, answer(LEADER, E1, records=data(0, 1, 3)), fetch), s
    )
    deadline = good_at + s.timing.fetch_timeout_ms + s.timing.election_timeout_ms // 2
    while s.replica.view().state is ReplicaState.FOLLOWER:
        assert s.now < deadline, "the corrupt answers kept the fetch timer from running out"
        bad = answer(LEADER, E1, hwm=3, records=CORRUPT[corrupt](3))
        effects = s.receive(s.now + 1, LEADER, bad, fetch)
        while not s.sent(FetchRequest, effects) and s.replica.view().state is ReplicaState.FOLLOWER:
            effects = s.step(Tick(max(s.replica.next_deadline_ms(), s.now)))
        found = s.sent(FetchRequest, effects)
        if found:
            assert isinstance(found[0].message, FetchRequest)
            fetch = found[0].message
    assert s.replica.view().state is ReplicaState.PROSPECTIVE
    assert s.now < deadline
    assert s.replica.view().high_watermark == 0


# ---------------------------------------------------------------- Begin/EndQuorumEpoch


def test_an_accepted_begin_quorum_epoch_is_answered_with_no_error() -> None:
    s = Solo()
    effects = s.receive(0, LEADER, BeginQuorumEpochRequest(CLUSTER, LEADER, E1), None)
    [send] = s.sent(BeginQuorumEpochResponse, effects)
    assert send.dst == LEADER
    assert send.message == BeginQuorumEpochResponse(ErrorCode.NONE, LEADER, E1)
    assert send.message.error is ErrorCode.NONE
    assert s.replica.view().state is ReplicaState.FOLLOWER


def test_an_end_quorum_epoch_of_a_newer_epoch_is_learned_and_its_first_successor_stands() -> None:
    """Node 1 follows 2 in epoch 1 and never heard of epoch 2, whose leader 3 now resigns and
    names node 1 its first preferred successor. Node 1 learns epoch 2 and its leader first,
    answers in that epoch, and then, following the resigning leader, stands at once."""
    s = Solo()
    s.follow()
    end = EndQuorumEpochRequest(CLUSTER, OLD_LEADER, E2, (NodeId(1), LEADER))
    effects = s.receive(10, OLD_LEADER, end, None)
    [send] = s.sent(EndQuorumEpochResponse, effects)
    assert send.message == EndQuorumEpochResponse(ErrorCode.NONE, OLD_LEADER, E2)
    view = s.replica.view()
    assert (view.state, view.epoch, view.leader_id) == (ReplicaState.FOLLOWER, E2, OLD_LEADER)
    assert s.replica.next_deadline_ms() == 10
    effects = s.step(Tick(10))
    assert any(isinstance(e, StateChanged) and e.new is ReplicaState.PROSPECTIVE for e in effects)
    assert s.replica.view().state is ReplicaState.PROSPECTIVE
