"""Corners of the replica the simulator's sweep rarely reaches, on a small cluster:

- a leader whose only batch of an idempotent producer was never replicated loses it when it
  rejoins as a follower and truncates: its producer table forgets that producer with it
  (ProducerTableFollowsLog), and when it leads again the producer's resend of that batch is
  appended anew, not answered with offsets its log no longer holds.
"""

from __future__ import annotations

from scenario_harness import Cluster

from kraft.core.effects import AppendResult
from kraft.core.events import ClientAppend
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NodeId, ProducerId
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
        lambda: c.view(old).state is ReplicaState.FOLLOWER
        and c.nodes[old].log.end_offset == end
        and c.view(old).high_watermark == end
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
