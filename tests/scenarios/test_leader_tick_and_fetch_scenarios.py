"""Scenario tests of a leader at the boundaries its Fetch handling and its start of epoch
draw, which the simulator's sweep does not reach:

- a Fetch asking for fewer bytes than the leader's quorum.fetch.max.bytes gets no more than
  it asked for (at least one whole batch), all of it when its max bytes ends at a batch end;
- a caught-up voter's Fetch that itself moves the HWM is answered at once with that HWM
  (Kafka's handleFetchRequest: the fetcher's HWM is behind), not held for its max wait;
- a new leader writes the voter set into the log (KRaftVersion and Voters after its
  LeaderChange) only when no record of the log states it: a log that starts at a snapshot
  ending at offset 1 states it at offset 0 (Kafka: the snapshot's voter set at its end - 1);
- the voter set a new leader writes takes effect at its Voters record (two after the
  LeaderChange), so a voter change waits until the HWM is past that record, not the one
  before it.

The replicas are driven by hand; the Fetches are the test's own.
"""

from __future__ import annotations

from hand_driven import replica_over
from memory_logs import key
from scenario_harness import (
    CLUSTER,
    Cluster,
    DynamicCluster,
    controller_endpoints,
    leader_caught_up,
)

from kraft.control_records import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    VoterEntry,
    VotersRecord,
    decode_control_record,
)
from kraft.core.effects import AppendToLog, Effect, Send
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    RemoveVoterRequest,
    RemoveVoterResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import LOG_OVERHEAD, decode_batch, iter_batches
from kraft.storage.memory_log import MemoryLog

TOKEN = 7301
ADMIN = NodeId(-1)
OBSERVER = 9


def _answers(effects: list[Effect], token: int = TOKEN) -> list[Send]:
    return [e for e in effects if isinstance(e, Send) and e.reply_to == token]


# -- the Fetch's max bytes against the leader's fetch max bytes


def _batch_ends(data: bytes | memoryview) -> list[int]:
    """The byte position where each whole batch of `data` ends."""
    return [pos + h.length + LOG_OVERHEAD for pos, h in iter_batches(data, verify=False)]


def _leader_with_batches(n: int) -> tuple[Cluster, int]:
    """A settled 3-voter cluster whose leader's log holds `n` more one-record batches."""
    c = Cluster(3, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000)
    leader = leader_caught_up(c)
    for i in range(n):
        c.append(leader, b"value-%d" % i, request_id=i + 1)
    c.run_until(lambda: c.view(leader).high_watermark == c.view(leader).end_offset)
    return c, leader


def _fetch_all_from_zero(c: Cluster, leader: int, max_bytes: int) -> FetchResponse:
    """An observer's Fetch from offset 0 (nothing held yet) with `max_bytes`: the answer."""
    v = c.view(leader)
    fetch = FetchRequest(CLUSTER, key(OBSERVER), v.epoch, Offset(0), Epoch(0), Offset(0),
                         max_bytes=max_bytes, max_wait_ms=500)  # fmt: skip
    effects = c.r(leader).step(Receive(c.now, NodeId(OBSERVER), fetch, None, TOKEN))
    [answer] = _answers(effects)
    assert isinstance(answer.message, FetchResponse)
    return answer.message


def test_a_fetch_asking_for_one_byte_gets_the_first_batch_alone() -> None:
    """A Fetch whose max bytes (1) is far below the leader's quorum.fetch.max.bytes (1 MiB)
    is answered with one whole batch, the first, though the log holds several more: the
    leader reads at most what the fetcher asked for (at least one batch)."""
    c, leader = _leader_with_batches(4)
    everything = bytes(_fetch_all_from_zero(c, leader, 1 << 20).records)
    assert len(_batch_ends(everything)) >= 5
    got = bytes(_fetch_all_from_zero(c, leader, 1).records)
    assert got == everything[: _batch_ends(everything)[0]]


def test_a_fetch_whose_max_bytes_ends_at_a_batch_end_gets_exactly_those_batches() -> None:
    """A Fetch whose max bytes is exactly the size of the first two batches gets those two
    and nothing more; one byte less, no more bytes than that, the first batch whole. (Kafka
    cuts that answer inside the second batch; kraft sends the whole batches before the cut.
    A follower of either appends the whole batches.)"""
    c, leader = _leader_with_batches(4)
    everything = bytes(_fetch_all_from_zero(c, leader, 1 << 20).records)
    ends = _batch_ends(everything)
    assert bytes(_fetch_all_from_zero(c, leader, ends[1]).records) == everything[: ends[1]]
    short = bytes(_fetch_all_from_zero(c, leader, ends[1] - 1).records)
    assert len(short) <= ends[1] - 1
    assert short.startswith(everything[: ends[0]])


# -- a held Fetch, and one whose answer moved the HWM


def test_a_caught_up_voters_fetch_that_moves_the_hwm_is_answered_at_once() -> None:
    """The leader appends a record its followers have not fetched yet. A voter's Fetch at
    the new log end (max wait 500 ms) brings a majority there and moves the HWM: the leader
    answers it in that step with the new HWM, no records, instead of holding it; a second
    such Fetch, which moves nothing, is held."""
    c = Cluster(3, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000)
    leader = leader_caught_up(c)
    fetcher = next(i for i in c.nodes if i != leader)
    r = c.r(leader)
    c.apply(leader, r.step(ClientAppend(c.now, ((None, b"x"),), 1)), None)
    v = r.view()
    assert v.high_watermark is not None and v.high_watermark < v.end_offset
    fetch = FetchRequest(CLUSTER, key(fetcher), v.epoch, v.end_offset, v.last_epoch, Offset(0),
                         max_wait_ms=500)  # fmt: skip
    effects = r.step(Receive(c.now, NodeId(fetcher), fetch, None, TOKEN))
    [answer] = _answers(effects)
    assert answer.message == FetchResponse(
        ErrorCode.NONE, NodeId(leader), v.epoch, v.end_offset, v.log_start_offset
    )
    assert bytes(answer.message.records) == b""
    assert r.view().high_watermark == v.end_offset
    again = r.step(Receive(c.now, NodeId(fetcher), fetch, None, TOKEN + 1))
    assert _answers(again, TOKEN + 1) == []


# -- the voter set a new leader writes at the start of its epoch


def _start_of_epoch_records(start: OffsetAndEpoch | None, stated_at: Offset) -> list[type]:
    """A lone dynamic voter (kraft.version 1) whose voter set the log states at `stated_at`
    (-1: the bootstrap checkpoint alone), its log starting at `start` (a snapshot it holds)
    or empty, leads as it starts: the kinds of the records of the batch it writes then."""
    entry = VoterEntry(1, key(1).directory_id, controller_endpoints(1), 0, 1)
    voters = voter_set_of(VotersRecord(0, (entry,)))
    log = MemoryLog(0 if start is None else start.offset)
    replica = replica_over(log, ClusterId("leader-tick"), (),
                           snapshot_ids=() if start is None else (start,),
                           voter_history=((stated_at, voters),))  # fmt: skip
    effects = replica.start()
    assert replica.view().state is ReplicaState.LEADER
    [append] = [e for e in effects if isinstance(e, AppendToLog)]
    assert append.first_offset == (0 if start is None else start.offset)
    _header, records = decode_batch(append.data)
    return [type(decode_control_record(rec)) for rec in records]


def test_a_leader_whose_log_starts_at_a_snapshot_ending_at_one_writes_no_voter_set() -> None:
    """A lone dynamic voter whose log starts at a snapshot ending at offset 1 (the snapshot
    states the voter set, at offset 0) writes only its LeaderChange when it leads: the voter
    set is already the log's. The same voter on an empty log, which knows the voter set from
    the bootstrap checkpoint alone (offset -1), writes it after the LeaderChange."""
    snap = OffsetAndEpoch(Offset(1), Epoch(1))
    assert _start_of_epoch_records(snap, Offset(0)) == [LeaderChangeMessage]
    assert _start_of_epoch_records(None, Offset(-1)) == [
        LeaderChangeMessage,
        KRaftVersionRecord,
        VotersRecord,
    ]


def test_a_voter_change_waits_for_the_hwm_past_the_start_of_epoch_voters_record() -> None:
    """A new leader of a dynamic quorum writes LeaderChange, KRaftVersion and Voters at
    offsets 0, 1 and 2. With its HWM at 2 (a voter holds offsets 0 and 1) the voter set it
    wrote at 2 is not committed: a RemoveVoter is refused REQUEST_TIMED_OUT naming the
    change at 2. Once the HWM is 3 the same RemoveVoter is taken (not answered at once)."""
    c = DynamicCluster(3, seed=3)
    c.run_until(lambda: c.leader() is not None, step_ms=1)
    leader = c.leader()
    assert leader is not None
    c.isolate(leader)  # the test plays the followers' Fetches
    r = c.r(leader)
    v = r.view()
    assert (v.end_offset, v.high_watermark) == (3, None)
    follower, other = (i for i in c.nodes if i != leader)

    def fetch_at(offset: int, token: int) -> None:
        fetch = FetchRequest(CLUSTER, key(follower), v.epoch, Offset(offset), v.epoch, Offset(0))
        c.apply(leader, r.step(Receive(c.now, NodeId(follower), fetch, None, token)), None)

    def remove(token: int) -> list[Send]:
        ask = RemoveVoterRequest(CLUSTER, key(other))
        return _answers(r.step(Receive(c.now, ADMIN, ask, None, token)), token)

    fetch_at(2, TOKEN)
    assert r.view().high_watermark == 2
    [refused] = remove(TOKEN + 1)
    assert isinstance(refused.message, RemoveVoterResponse)
    assert refused.message.error is ErrorCode.REQUEST_TIMED_OUT
    assert refused.message.message is not None and " at 2 with HWM 2" in refused.message.message
    fetch_at(3, TOKEN + 2)
    assert r.view().high_watermark == 3
    assert remove(TOKEN + 3) == []
