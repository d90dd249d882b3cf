"""Corners of the replica the simulator's sweep rarely reaches, on a small cluster:

- a leader whose only batch of an idempotent producer was never replicated loses it when it
  rejoins as a follower and truncates: its producer table forgets that producer with it
  (ProducerTableFollowsLog), and when it leads again the producer's resend of that batch is
  appended anew, not answered with offsets its log no longer holds;
- a leader whose only snapshot is the bootstrap checkpoint (0-0, a dynamic quorum's) answers a
  Fetch at offset 0 with records whatever last fetched epoch it names: a fetch at offset 0 of
  a log that starts at 0 is valid (Kafka's validateOffsetAndEpoch), and the bootstrap
  checkpoint is never replicated, so it is never named to a fetcher.
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import CLUSTER, Cluster

from kraft.core.effects import AppendResult, Send
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.core.snapshots import BOOTSTRAP_SNAPSHOT
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, ProducerId
from kraft.storage.log_adapter import producer_batches_of
from refinement import invariants_producers as pinv

P = ProducerId(41)
SEED = 0


def produce(c: Cluster, node: int, sequence: int, rid: int) -> AppendResult:
    values = ((None, b"p41.%d" % sequence),)
    effects = c.step(node, ClientAppend(c.now, values, rid, P, sequence))
    [result] = [e for e in effects if isinstance(e, AppendResult)]
    return result


def table_follows_log(c: Cluster, i: int) -> None:
    found = pinv.producer_table_follows_log(
        NodeId(i), c.r(i).producer_batches(), producer_batches_of(c.nodes[i].log)
    )
    assert found is None, found.detail


def test_a_truncated_first_batch_of_a_producer_is_forgotten_and_its_resend_appended() -> None:
    """A leader appends producer P's first batch (sequence 0) and is cut off before anyone
    fetches it; another node leads and commits other data; healed, the old leader truncates
    P's batch: its table must hold nothing of P (nothing of P is in its log). The new leader
    crashes; the old one leads again (as it does with this seed) and P's resend of sequence 0
    is appended at its log end, where its log then holds it."""
    c = Cluster(3, seed=SEED)
    c.run_until(lambda: c.leader() is not None)
    old = c.leader()
    assert old is not None
    c.isolate(old)
    first = produce(c, old, 0, 500)
    assert first.error is ErrorCode.NONE
    assert [b.producer for b in producer_batches_of(c.nodes[old].log)] == [P]
    c.run_until(lambda: any(c.view(i).state is ReplicaState.LEADER for i in c.nodes if i != old))
    [other] = [i for i in c.nodes if i != old and c.view(i).state is ReplicaState.LEADER]
    c.run_until(lambda: c.view(other).high_watermark is not None)
    for k in range(3):
        c.append(other, b"other-%d" % k, request_id=600 + k)
    c.heal()
    end = c.nodes[other].log.end_offset
    c.run_until(
        lambda: (
            c.view(old).state is ReplicaState.FOLLOWER
            and c.nodes[old].log.end_offset == end
            and c.view(old).high_watermark == end
        )
    )
    assert producer_batches_of(c.nodes[old].log) == ()
    table_follows_log(c, old)
    assert c.r(old).producer_batches() == ()
    c.crash(other)
    c.run_until(lambda: c.leader() == old and c.view(old).high_watermark is not None)
    again = produce(c, old, 0, 501)
    assert again.error is ErrorCode.NONE
    assert again.first_offset is not None and again.first_offset >= end
    [held] = producer_batches_of(c.nodes[old].log)
    assert (held.producer, held.base_sequence, held.first_offset) == (P, 0, again.first_offset)
    table_follows_log(c, old)


def test_a_fetch_at_offset_zero_is_never_sent_the_bootstrap_checkpoint() -> None:
    """Three voters restarted with the bootstrap checkpoint among their snapshots elect a
    leader and commit a few records; an observer's Fetch at offset 0 naming the leader's epoch
    (or epoch 0, as an empty log does) is answered with the records from 0, not with the id of
    the bootstrap checkpoint."""
    c = Cluster(3, observers=1, snapshots=True)
    for i in (1, 2, 3):
        snaps = c.nodes[i].snaps
        assert snaps is not None
        snaps.put(BOOTSTRAP_SNAPSHOT, b"")
        c.crash(i)
        c.start(i)
    c.run_until(lambda: c.leader() is not None)
    leader = c.leader()
    assert leader is not None
    for k in range(3):
        c.append(leader, b"v%d" % k, request_id=700 + k)
    c.run(c.now + 50)
    v = c.view(leader)
    assert v.log_start_offset == 0
    for token, last_epoch in ((901, v.epoch), (902, Epoch(0))):
        fetch = FetchRequest(CLUSTER, key(4), v.epoch, Offset(0), last_epoch, Offset(0))
        effects = c.step(leader, Receive(c.now, NodeId(4), fetch, None, token))
        [answer] = [e.message for e in effects if isinstance(e, Send) and e.reply_to == token]
        assert isinstance(answer, FetchResponse)
        assert answer.snapshot_id is None, (last_epoch, answer)
        assert answer.records, (last_epoch, answer)
