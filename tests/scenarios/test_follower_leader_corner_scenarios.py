"""Scenario tests of follower, leader and timer corners the simulator reaches rarely or never:

- the smallest election timeout (1 ms) is still a timeout: a voter does not stand at the
  instant it starts (KIP-595: a random time in [T, 2T));
- a Prospective that still knows the leader of its epoch (it timed out following it, KIP-996)
  does not take a Fetch answer of that leader: only a Follower appends what it fetched;
- a Fetch answer to a Fetch from a log position the follower no longer has (its log end moved,
  its last epoch did not) is stale: it sends no second Fetch while one is in flight;
- a diverging epoch whose end falls inside one of the follower's batches truncates the whole
  batch (Kafka's LogSegment.truncateTo drops the batch holding the offset);
- an answer to BeginQuorumEpoch of an earlier epoch in which the leader also led does not
  stand for an answer in its epoch: it keeps asking that voter;
- a leader whose voter set shrinks to itself alone (KIP-853 RemoveVoter) never resigns for
  want of fetches (Kafka's LeaderState: with one voter check-quorum never expires).
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, Cluster, DynamicCluster

from kraft.core.effects import Effect, Send, TruncateLog
from kraft.core.events import Receive, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    Message,
    RemoveVoterRequest,
)
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.records import encode_records

FETCH_TIMEOUT_MS = 2000


def _settled(seed: int = 3) -> tuple[Cluster, int]:
    """Three voters following one leader whose HWM reached its log end."""
    c = Cluster(3, seed=seed, election_timeout_ms=1000, fetch_timeout_ms=FETCH_TIMEOUT_MS)
    c.run_until(
        lambda: (
            (ld := c.leader()) is not None
            and all(c.view(i).leader_id == ld for i in c.nodes)
            and all(c.view(i).high_watermark == c.view(ld).end_offset for i in c.nodes)
        )
    )
    leader = c.leader()
    assert leader is not None
    return c, leader


def _batch(base: int, epoch: int, count: int) -> bytes:
    return encode_records(base, epoch, [(None, b"r%d" % k) for k in range(count)],
                          timestamp_ms=0)  # fmt: skip


def _sent(effects: list[Effect], kind: type) -> list[Send]:
    return [e for e in effects if isinstance(e, Send) and isinstance(e.message, kind)]


def test_a_one_millisecond_election_timeout_is_not_zero() -> None:
    c = Cluster(3, seed=1, election_timeout_ms=1, fetch_timeout_ms=FETCH_TIMEOUT_MS)
    for i in c.nodes:  # a tick at the start instant: no timer is due yet
        c.step(i, Tick(0))
    assert all(c.view(i).state is ReplicaState.UNATTACHED for i in c.nodes)
    assert all(c.r(i).next_deadline_ms() == 1 for i in c.nodes)  # in [1, 2)
    c.step(1, Tick(1))
    assert c.view(1).state is not ReplicaState.UNATTACHED


def test_a_prospective_does_not_append_its_former_leaders_fetch_answer() -> None:
    c, leader = _settled()
    follower = next(i for i in c.nodes if i != leader)
    c.isolate(follower)
    c.run_until(lambda: c.view(follower).state is ReplicaState.PROSPECTIVE)
    v = c.view(follower)
    assert v.leader_id == leader  # it still knows the leader of its epoch
    answer = FetchResponse(ErrorCode.NONE, NodeId(leader), v.epoch, v.end_offset, Offset(0),
                           records=_batch(int(v.end_offset), int(v.epoch), 2))  # fmt: skip
    c.step(follower, Receive(c.now, NodeId(leader), answer, None))
    after = c.view(follower)
    assert after.state is ReplicaState.PROSPECTIVE
    assert (after.end_offset, after.last_epoch) == (v.end_offset, v.last_epoch)


def test_an_answer_to_a_fetch_from_an_older_log_end_sends_no_second_fetch() -> None:
    c, leader = _settled()
    follower = next(i for i in c.nodes if i != leader)
    c.append(leader, b"a")
    end = c.view(leader).end_offset
    c.run_until(
        lambda: c.view(follower).end_offset == end and c.view(follower).high_watermark == end
    )
    v = c.view(follower)
    older = FetchRequest(CLUSTER, key(follower), v.epoch, Offset(end - 1), v.last_epoch,
                         Offset(0))  # fmt: skip
    answer = FetchResponse(ErrorCode.NONE, NodeId(leader), v.epoch, v.high_watermark or Offset(0),
                           Offset(0))  # fmt: skip
    effects = c.step(follower, Receive(c.now, NodeId(leader), answer, older))
    assert _sent(effects, FetchRequest) == []  # the Fetch from its log end is still in flight


def test_a_divergence_inside_a_batch_truncates_the_whole_batch() -> None:
    c, leader = _settled()
    follower = next(i for i in c.nodes if i != leader)
    v = c.view(follower)
    end, epoch = int(v.end_offset), int(v.epoch)
    hwm = v.high_watermark
    assert hwm is not None
    grow = FetchResponse(ErrorCode.NONE, NodeId(leader), v.epoch, hwm, Offset(0),
                         records=_batch(end, epoch, 3))  # fmt: skip
    c.step(follower, Receive(c.now, NodeId(leader), grow, None))
    assert c.view(follower).end_offset == end + 3  # one batch [end, end + 3), uncommitted
    inside = OffsetAndEpoch(epoch=Epoch(epoch), offset=Offset(end + 1))  # the leader's end
    diverging = FetchResponse(ErrorCode.NONE, NodeId(leader), v.epoch, hwm, Offset(0),
                              diverging_epoch=inside)  # fmt: skip
    effects = c.step(follower, Receive(c.now, NodeId(leader), diverging, None))
    assert [e for e in effects if isinstance(e, TruncateLog)] == [TruncateLog(Offset(end))]
    assert c.view(follower).end_offset == end


class _Recording(Cluster):
    """The scenario cluster, keeping every message each node sends (delivered or not)."""

    def __init__(self, *args: object, **kw: int) -> None:
        self.sent: list[tuple[int, int, Message]] = []
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def send(self, src: int, dst: int, msg: Message, answering: object) -> None:
        self.sent.append((src, dst, msg))
        super().send(src, dst, msg, answering)  # type: ignore[arg-type]


def test_a_begin_quorum_epoch_answer_of_an_earlier_epoch_is_not_an_endorsement() -> None:
    c = _Recording(3, seed=4, election_timeout_ms=1000, fetch_timeout_ms=FETCH_TIMEOUT_MS)
    away = 3
    c.isolate(away)  # it never fetches: every BeginQuorumEpoch round asks it
    c.run_until(lambda: c.leader() is not None and c.leader() != away)
    leader = c.leader()
    assert leader is not None
    epoch = c.view(leader).epoch
    stale = BeginQuorumEpochResponse(ErrorCode.NONE, NodeId(leader), Epoch(epoch - 1))
    c.step(leader, Receive(c.now, NodeId(away), stale, None))
    seen = len(c.sent)
    c.run(c.now + FETCH_TIMEOUT_MS // 2 + 1)  # the next round (fetch timeout / 2)
    asked = [m for s, d, m in c.sent[seen:] if (s, d) == (leader, away)]
    assert any(isinstance(m, BeginQuorumEpochRequest) and m.leader_epoch == epoch for m in asked)


# -- KIP-853: a leader left alone in its voter set

ADMIN = NodeId(-1)


class _Dynamic(DynamicCluster):
    """A dynamic quorum whose admin client's answers are dropped."""

    def send(self, src: int, dst: int, msg: Message, answering: object) -> None:
        if dst != ADMIN:  # the admin client's answers are not this test's subject
            super().send(src, dst, msg, answering)  # type: ignore[arg-type]


def test_a_leader_left_the_only_voter_never_resigns_for_want_of_fetches() -> None:
    c = _Dynamic(2, seed=8, election_timeout_ms=1000, fetch_timeout_ms=FETCH_TIMEOUT_MS)
    c.run_until(lambda: c.leader() is not None)
    lead = c.leader()
    assert lead is not None
    c.append(lead, b"x")
    end = c.view(lead).end_offset
    c.run_until(lambda: c.view(lead).high_watermark == end)  # its epoch's records committed
    other = 2 if lead == 1 else 1
    effects = c.r(lead).step(Receive(c.now, ADMIN, RemoveVoterRequest(CLUSTER, key(other)),
                                     reply_to=5))  # fmt: skip
    c.apply(lead, effects, None)
    c.run_until(lambda: c.view(lead).voters == (NodeId(lead),))
    c.crash(other)
    seen = len(c.nodes[lead].states)
    c.run(c.now + 3 * FETCH_TIMEOUT_MS)
    assert c.nodes[lead].states[seen:] == []
    assert c.view(lead).state is ReplicaState.LEADER
