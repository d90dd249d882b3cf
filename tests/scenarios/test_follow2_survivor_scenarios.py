"""Scenario tests of rules around fetching that the simulator's faults reach rarely or never
(Kafka 4.3.1's KafkaRaftClient and LeaderState are the reference):

- check-quorum counts the Fetches and FetchSnapshots of the other voters only: a leader cut off
  from its followers resigns once 1.5 x quorum.fetch.timeout.ms passed since a majority last
  fetched, whatever else reaches it meanwhile: a request claiming the leader's own identity
  (Kafka's LeaderState refuses to count one), or a voter's id with another directory id (an
  observer, KIP-853);
- a Fetch answer naming an epoch below the follower's own, even from the node that leads now
  (an answer delayed across that node's re-election), is no longer relevant (Kafka's
  maybeHandleCommonResponse): nothing is appended, no snapshot is asked for, no HWM taken;
- every error answer to a Fetch carries high watermark -1 (Kafka's buildEmptyFetchResponse
  passes Optional.empty() on each error path; only the answer without error carries the
  leader's HWM), even from a leader that knows its HWM;
- a client append is answered accepted (AppendResult) before its outcome (AppendCommitted or
  AppendLost), also when the outcome is known in the same step: a producer's resend of a batch
  that already committed.
"""

from __future__ import annotations

import uuid

import pytest
from memory_logs import key
from scenario_harness import CLUSTER, Cluster, Recording, committed, elect

from kraft.core.effects import (
    AppendCommitted,
    AppendLost,
    AppendResult,
    AppendToLog,
    Effect,
    HighWatermarkMoved,
    Send,
    SnapshotRequired,
    TruncateLog,
)
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    Message,
    Request,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import (
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ProducerId,
    ReplicaKey,
)
from kraft.records import encode_records

S = ReplicaState
FETCH_TIMEOUT_MS = 2000
FETCH_MAX_WAIT_MS = 500
# Kafka's LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR, written out.
CHECK_QUORUM_MS = FETCH_TIMEOUT_MS * 3 // 2


def _other_directory(k: ReplicaKey) -> ReplicaKey:
    return ReplicaKey(k.id, DirectoryId(uuid.UUID(int=k.directory_id.int ^ 0xF00D)))


def _impostor(kind: str, lead: int, follower: int, epoch: int, end: int) -> tuple[int, Message]:
    """(the sender, the request) of a Fetch or FetchSnapshot that must not count for the
    leader's check-quorum."""
    snap = OffsetAndEpoch(epoch=Epoch(1), offset=Offset(1))
    if kind == "snapshot-as-the-leader":
        return lead, FetchSnapshotRequest(
            CLUSTER, key(lead), Epoch(epoch), snap, 0, max_bytes=1 << 20
        )
    if kind == "fetch-as-the-leader":
        fetch = FetchRequest(CLUSTER, key(lead), Epoch(epoch), Offset(end), Epoch(epoch), Offset(0))
        return lead, fetch
    other = _other_directory(key(follower))
    if kind == "snapshot-as-another-directory":
        return follower, FetchSnapshotRequest(
            CLUSTER, other, Epoch(epoch), snap, 0, max_bytes=1 << 20
        )
    assert kind == "fetch-as-another-directory"
    return follower, FetchRequest(
        CLUSTER, other, Epoch(epoch), Offset(end), Epoch(epoch), Offset(0)
    )


@pytest.mark.parametrize(
    "kind",
    [
        "snapshot-as-the-leader",
        "fetch-as-the-leader",
        "snapshot-as-another-directory",
        "fetch-as-another-directory",
    ],
)
def test_check_quorum_counts_only_the_other_voters_fetches(kind: str) -> None:
    """The leader is cut off from both followers; every 250 ms a request that is no voter's
    Fetch reaches it. It resigns by 1.5 fetch timeouts after its followers' last Fetches were
    answered (at the latest a max wait after the cut: a held Fetch counts again when it is
    answered, as Kafka's tryCompleteFetchRequest does), as if nothing had come."""
    c = Cluster(3, seed=7, fetch_timeout_ms=FETCH_TIMEOUT_MS, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
    lead = elect(c)
    committed(c, lead, 2)
    epoch = c.view(lead).epoch
    follower = next(i for i in c.nodes if i != lead)
    c.isolate(lead)
    cut = c.now
    while c.now < cut + FETCH_MAX_WAIT_MS + CHECK_QUORUM_MS + 50 and c.view(lead).state is S.LEADER:
        src, msg = _impostor(kind, lead, follower, epoch, c.view(lead).end_offset)
        c.step(lead, Receive(c.now, NodeId(src), msg))
        c.run(c.now + 250)
    assert c.view(lead).state is not S.LEADER, f"still leading {c.now - cut} ms after the cut"


def _settled(c: Recording) -> tuple[int, int, FetchRequest]:
    """Elect, commit, and let a follower's Fetches settle: the leader, that follower, and the
    follower's latest Fetch (from its current log end)."""
    lead = elect(c)
    committed(c, lead, 3)
    follower = next(i for i in c.nodes if i != lead)
    c.run_until(lambda: c.view(follower).high_watermark == c.view(lead).high_watermark)
    c.run(c.now + 50)
    [last] = [m for _, s, _, m in c.sent if s == follower and isinstance(m, FetchRequest)][-1:]
    assert last.fetch_offset == c.view(follower).end_offset
    return lead, follower, last


@pytest.mark.parametrize("carrying", ["records", "snapshot-id"])
def test_a_fetch_answer_of_a_past_epoch_from_the_leader_moves_nothing(carrying: str) -> None:
    """An answer in the current leader's name, naming the epoch before the follower's, to the
    follower's own latest Fetch: records that would extend its log (with a HWM past them), or
    a snapshot id. The follower takes none of it."""
    c = Recording(3, seed=4)
    lead, follower, last = _settled(c)
    v = c.view(follower)
    epoch = v.epoch
    assert epoch >= 1
    end = v.end_offset
    if carrying == "records":
        data = encode_records(end, epoch, [(None, b"stale")], timestamp_ms=0)
        answer = FetchResponse(
            ErrorCode.NONE,
            NodeId(lead),
            Epoch(epoch - 1),
            high_watermark=Offset(end + 1),
            log_start_offset=Offset(0),
            records=data,
        )
    else:
        answer = FetchResponse(
            ErrorCode.NONE,
            NodeId(lead),
            Epoch(epoch - 1),
            high_watermark=Offset(end),
            log_start_offset=Offset(0),
            snapshot_id=OffsetAndEpoch(epoch=Epoch(epoch - 1), offset=Offset(end)),
        )
    effects = c.step(follower, Receive(c.now, NodeId(lead), answer, in_reply_to=last))
    taken = [
        e
        for e in effects
        if isinstance(e, AppendToLog | TruncateLog | HighWatermarkMoved | SnapshotRequired)
    ]
    assert taken == [], taken
    after = c.view(follower)
    assert (after.end_offset, after.high_watermark) == (end, v.high_watermark)
    assert (after.state, after.epoch, after.leader_id) == (S.FOLLOWER, epoch, lead)


def _fetch_answers(c: Cluster, lead: int, src: int, req: Request) -> list[FetchResponse]:
    effects = c.step(lead, Receive(c.now, NodeId(src), req, reply_to=1))
    return [
        e.message for e in effects if isinstance(e, Send) and isinstance(e.message, FetchResponse)
    ]


def test_every_error_answer_to_a_fetch_carries_high_watermark_minus_one() -> None:
    c = Cluster(3, seed=9)
    lead = elect(c)
    committed(c, lead, 3)
    hwm = c.view(lead).high_watermark
    assert hwm is not None and hwm > 0
    epoch = c.view(lead).epoch
    assert epoch >= 1
    follower = next(i for i in c.nodes if i != lead)
    end = c.view(follower).end_offset

    def fetch(**kw: object) -> FetchRequest:
        base: dict[str, object] = {
            "cluster_id": CLUSTER,
            "replica": key(follower),
            "replica_epoch": Epoch(epoch),
            "fetch_offset": Offset(end),
            "last_fetched_epoch": Epoch(epoch),
            "log_start_offset": Offset(0),
        }
        base.update(kw)
        return FetchRequest(**base)  # type: ignore[arg-type]

    # The answer without error carries the leader's HWM: the leader knows one.
    [ok] = _fetch_answers(c, lead, follower, fetch())
    assert ok.error is ErrorCode.NONE and ok.high_watermark == c.view(lead).high_watermark
    cases = {
        ErrorCode.FENCED_LEADER_EPOCH: fetch(replica_epoch=Epoch(epoch - 1),
                                             last_fetched_epoch=Epoch(0)),
        ErrorCode.UNKNOWN_LEADER_EPOCH: fetch(replica_epoch=Epoch(epoch + 1)),
        ErrorCode.INCONSISTENT_CLUSTER_ID: fetch(cluster_id=ClusterId("another-cluster")),
        ErrorCode.INVALID_REQUEST: fetch(last_fetched_epoch=Epoch(epoch + 1)),
    }  # fmt: skip
    for error, req in cases.items():
        [answer] = _fetch_answers(c, lead, follower, req)
        assert answer.error is error, (error, answer)
        assert answer.high_watermark == -1, (error, answer)
    # An answer refusing a value out of bounds (kraft.core.bounds) too.
    [refused] = _fetch_answers(c, lead, follower, fetch(fetch_offset=Offset(-5)))
    assert refused.error is ErrorCode.INVALID_REQUEST and refused.high_watermark == -1


def _answered_before_decided(effects: list[tuple[int, Effect]]) -> None:
    """Each AppendCommitted/AppendLost follows an AppendResult accepting that append."""
    accepted: set[int] = set()
    for _, e in effects:
        if isinstance(e, AppendResult) and e.error is ErrorCode.NONE:
            accepted.add(e.request_id)
        elif isinstance(e, AppendCommitted | AppendLost):
            assert e.request_id in accepted, f"{e} before the append was answered accepted"
            accepted.discard(e.request_id)


def test_a_resend_of_a_committed_batch_is_answered_accepted_before_committed() -> None:
    c = Recording(3, seed=12)
    lead = elect(c)
    producer = ProducerId(41)
    values = ((None, b"once"), (None, b"twice"))
    c.step(lead, ClientAppend(c.now, values, 1, producer, 0))
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end)
    effects = c.step(lead, ClientAppend(c.now, values, 2, producer, 0))
    mine = [e for e in effects if isinstance(e, AppendResult | AppendCommitted)]
    assert [type(e) for e in mine] == [AppendResult, AppendCommitted], mine
    assert all(e.request_id == 2 for e in mine)
    _answered_before_decided(c.effects[lead])
