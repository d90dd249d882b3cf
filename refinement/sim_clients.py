"""The simulator's client layer (see refinement.sim_base for the layers). An accepted append is
acknowledged when the accepting replica's core emits AppendCommitted (kraft.core.commits), the
rule the node's clients hear too, and counted lost on its AppendLost. Each acknowledgement is
checked at once against every node (CommittedNeverLost).

Under a profile with `producers` (refinement.faults), idempotent producers (kraft.core.producers)
share the appends with the plain client: each numbers its records from 0 and has one batch in
flight, which it resends with the same producer id and sequence on NOT_LEADER_OR_FOLLOWER,
when the node it went to stops, when the append is lost, and when no outcome came within its
request timeout, as a Kafka producer does; it sends its next batch once one of the resends is
acknowledged. Their acknowledgements and the logs are checked by
refinement.invariants_producers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import IO, TYPE_CHECKING

from kraft.core.effects import AppendCommitted, AppendLost, AppendResult
from kraft.core.events import ClientAppend
from kraft.core.producers import ProducerBatch, producer_batch_of
from kraft.core.replica import Replica
from kraft.errors import ErrorCode
from kraft.ids import NO_PRODUCER, Epoch, NodeId, Offset, ProducerId
from kraft.records import iter_batches
from kraft.storage.log_adapter import producer_batches_of
from refinement import invariants as inv
from refinement import invariants_answers as ans
from refinement import invariants_producers as pinv
from refinement.invariants import AckedRange
from refinement.sim_base import _CLIENT_SEND, _Node
from refinement.sim_faults import SimFaults

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaFactory, SimConfig, SimResult

# The client: at most this many appends outstanding (new ones are skipped meanwhile), and
# retries back off exponentially up to the cap, so a leaderless stretch does not turn into a
# flood of retries that would crowd out the protocol's own events.
_MAX_CLIENT_OUTSTANDING = 32
_MAX_CLIENT_ATTEMPTS = 30
_CLIENT_BACKOFF_CAP_MS = 1000
# The simulated producers' ids: 1000, 1001, ...
_FIRST_PRODUCER_ID = 1000


@dataclass(slots=True)
class _ClientRequest:
    rid: int
    values: tuple[bytes, ...]
    target: NodeId | None
    attempts: int = 0
    # An idempotent producer's request: its id and the sequence of the batch's first record.
    producer: ProducerId = NO_PRODUCER
    sequence: int = -1


@dataclass(slots=True)
class _Producer:
    """An idempotent producer with at most one batch in flight (`values`, at `sequence`)."""

    pid: ProducerId
    sequence: int = 0  # of the batch in flight, else of the next one
    values: tuple[bytes, ...] = ()  # empty: idle
    rids: list[int] = field(default_factory=list)  # the requests that carried the batch
    deadline: int = 0  # resent if no outcome came by then


class SimClients(SimFaults):
    """The simulated client: appends at a Poisson rate, retries with backoff, follows the
    leader it is told of, and hears each accepted append's outcome from the core."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        super().__init__(config, result, replica_factory, trace)
        self._next_rid = 1
        self._pending: dict[int, _ClientRequest] = {}
        self._inflight: dict[NodeId, dict[int, _ClientRequest]] = {i: {} for i in self._nodes}
        # Accepted, not yet decided: rid -> (node, first, last, epoch, accepted at, the node's
        # incarnation that accepted it: UndecidedAppendHeld).
        self._accepted: dict[int, tuple[NodeId, Offset, Offset, Epoch, int, int]] = {}
        self._client_leader: NodeId | None = None
        # The liveness phase's probe append, until acknowledged.
        self._probe: int | None = None
        # Idempotent producers (a profile with `producers`), their requests not yet decided
        # (rid -> producer, sequence) and the offsets each (producer, sequence) was
        # acknowledged at.
        self._producers = [
            _Producer(ProducerId(_FIRST_PRODUCER_ID + k)) for k in range(config.profile.producers)
        ]
        self._producer_rids: dict[int, tuple[_Producer, int]] = {}
        self._producer_acks: dict[tuple[ProducerId, int], tuple[Offset, Offset]] = {}

    # ------------------------------------------------------------------ the client

    def _client_new(self) -> None:
        if self._producers:
            self._producer_timeouts()
        if len(self._pending) >= _MAX_CLIENT_OUTSTANDING:
            return
        rid = self._next_rid
        self._next_rid += 1
        count = 1 + int(self._rng.random() * 3)
        values = tuple(b"r%d.%d" % (rid, k) for k in range(count))
        req = _ClientRequest(rid, values, self._client_leader)
        idle = [p for p in self._producers if not p.values]
        if idle:
            # An idle producer takes the append (the plain client takes it when all are busy).
            producer = idle[rid % len(idle)]
            producer.values = values
            self._producer_sent(producer, req)
        self._pending[rid] = req
        self._client_dispatch(req, self.now)

    # ------------------------------------------------------------------ idempotent producers

    def _producer_sent(self, producer: _Producer, req: _ClientRequest) -> None:
        req.producer = producer.pid
        req.sequence = producer.sequence
        producer.rids.append(req.rid)
        producer.deadline = self.now + self.config.timing.request_timeout_ms
        self._producer_rids[req.rid] = (producer, producer.sequence)

    def _producer_resend(self, producer: _Producer) -> None:
        """The batch in flight again, as a new request with the same producer id and sequence
        (unless one of its requests still awaits an answer: that one is being retried)."""
        if any(rid in self._pending for rid in producer.rids):
            return
        rid = self._next_rid
        self._next_rid += 1
        req = _ClientRequest(rid, producer.values, self._client_leader)
        self._producer_sent(producer, req)
        self._pending[rid] = req
        self._client_dispatch(req, self.now)

    def _producer_timeouts(self) -> None:
        for p in self._producers:
            if p.values and p.deadline <= self.now:
                self._producer_resend(p)
                p.deadline = self.now + self.config.timing.request_timeout_ms

    def _producer_decided(self, node: NodeId, d: AppendCommitted | AppendLost) -> None:
        """An idempotent append's outcome: an acknowledgement is checked against the log of
        the replica that gave it, and completes the batch; a lost one is resent."""
        producer, sequence = self._producer_rids.pop(d.request_id)
        current = bool(producer.values) and producer.sequence == sequence
        if isinstance(d, AppendLost):
            if current:
                self._producer_resend(producer)
            return
        if self._check:
            log = self._nodes[node].log
            held: ProducerBatch | None = None
            if log.start_offset <= d.first_offset < log.end_offset:
                _, header = next(iter_batches(log.read(d.first_offset, 1).data, verify=False))
                if header.producer_id >= 0 and header.base_offset == d.first_offset:
                    held = producer_batch_of(header)
            key = (producer.pid, sequence)
            v = pinv.duplicate_answered_with_original(
                node,
                producer.pid,
                sequence,
                first=d.first_offset,
                last=d.last_offset,
                held=held,
                earlier=self._producer_acks.get(key),
            ) or pinv.producer_sequences_in_order(node, producer_batches_of(log), log.start_offset)
            if v:
                self._violation(v.name, v.detail)
            self._producer_acks[key] = (d.first_offset, d.last_offset)
        if current:
            for rid in producer.rids:
                self._pending.pop(rid, None)  # resends still waiting to go: not needed now
            producer.sequence += len(producer.values)
            producer.values = ()
            producer.rids = []
            self.result.idempotent_acked += 1

    def _check_producer_logs(self) -> None:
        """ProducerSequencesInOrder on every node's log, ProducerTableFollowsLog on every
        running replica (at the end of a run)."""
        if not self._producers or not self._check:
            return
        for node in self._nodes.values():
            v = pinv.producer_sequences_in_order(
                node.id, producer_batches_of(node.log), node.log.start_offset
            )
            if v:
                self._violation(v.name, v.detail)
            self._check_producer_table(node)

    def _log_truncated(self, node: _Node) -> None:
        # A truncation is where the producer table must drop what the log dropped.
        if self._producers:
            self._check_producer_table(node)
        self._check_undecided_held(node)

    def _check_undecided_held(self, node: _Node) -> None:
        """UndecidedAppendHeld (refinement.invariants_answers) after a step of `node` that
        truncated its log or installed a snapshot."""
        decided = {d.request_id for d in self._decided}
        inc = node.inc
        undecided = [
            (rid, a[2], a[3])
            for rid, a in self._accepted.items()
            if a[0] == node.id and a[5] == inc and rid not in decided
        ]
        if not undecided:
            return
        log = node.log
        entries = log.epoch_entries()

        def epoch_at(offset: Offset) -> Epoch | None:
            if offset < log.start_offset:
                return None
            return inv.epoch_at(entries, log.end_offset, offset)

        found = ans.undecided_append_held(node.id, undecided, epoch_at)
        if found is not None:
            self._violation(found.name, found.detail)

    def _check_producer_table(self, node: _Node) -> None:
        """ProducerTableFollowsLog on a running replica."""
        replica = node.replica
        if not isinstance(replica, Replica):
            return
        v = pinv.producer_table_follows_log(
            node.id, replica.producer_batches(), producer_batches_of(node.log)
        )
        if v:
            self._violation(v.name, v.detail)

    def _client_dispatch(self, req: _ClientRequest, at: int) -> None:
        target = req.target
        if target is None or self._nodes[target].replica is None:
            up = [i for i in self._voter_ids if self._nodes[i].replica is not None]
            pool = up or list(self._voter_ids)
            target = pool[int(self._rng.random() * len(pool))]
            req.target = target
        self._push(at + self._delay(), _CLIENT_SEND, req.rid, target)

    def _client_send(self, rid: int, target: object) -> None:
        req = self._pending.get(rid)
        if req is None:
            return
        assert isinstance(target, int)
        node = self._nodes[NodeId(target)]
        if node.replica is None:
            req.target = None
            self._client_retry(req)
            return
        req.attempts += 1
        self._inflight[node.id][rid] = req
        records = tuple((None, v) for v in req.values)
        event = ClientAppend(self.now, records, rid, req.producer, req.sequence)
        self._step(node, event, None, None, None)

    def _client_retry(self, req: _ClientRequest) -> None:
        if req.attempts >= _MAX_CLIENT_ATTEMPTS and not self._liveness:
            self._pending.pop(req.rid, None)
            self.result.gave_up += 1
            return
        base = self.config.timing.retry_backoff_ms << min(req.attempts, 8)
        backoff = min(base, _CLIENT_BACKOFF_CAP_MS)
        self._client_dispatch(req, self.now + backoff // 2 + int(self._rng.random() * backoff / 2))

    def _retry_inflight(self, node: _Node) -> None:
        inflight = self._inflight[node.id]
        if inflight:
            for req in list(inflight.values()):
                req.target = None
                self._client_retry(req)
            inflight.clear()

    def _append_result(self, node: _Node, res: AppendResult) -> None:
        req = self._inflight[node.id].pop(res.request_id, None)
        if req is None:
            return
        if res.error == ErrorCode.NONE:
            first, last, epoch = res.first_offset, res.last_offset, res.epoch
            if first is None or last is None or epoch is None:
                self._violation(
                    "EffectRejected", f"node {node.id} accepted request {req.rid} without offsets"
                )
            self._pending.pop(req.rid, None)
            self.result.accepted += 1
            self._client_leader = node.id
            self._accepted[req.rid] = (node.id, first, last, epoch, self.now, node.inc)
        elif res.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            req.target = res.leader_id
            if res.leader_id is not None and res.leader_id != node.id:
                self._client_leader = res.leader_id
            self._client_retry(req)
        else:
            if req.producer != NO_PRODUCER and self._check:
                v = pinv.producer_next_sequence_accepted(
                    node.id, req.producer, req.sequence, res.error
                )
                if v:
                    self._violation(v.name, v.detail)
            self._pending.pop(req.rid, None)
            self.result.refused += 1

    def _decide(self) -> None:
        """The outcomes the core decided in this step: acknowledge or count as lost."""
        decided, self._decided = self._decided, []
        for d in decided:
            accepted = self._accepted.pop(d.request_id, None)
            if accepted is None:
                # Every accepted append is decided once, by the replica that accepted it.
                self._violation(
                    "EffectRejected",
                    f"{type(d).__name__} for request {d.request_id}, which is not an accepted"
                    " append awaiting its outcome (decided twice, or never accepted)",
                )
            if d.request_id in self._producer_rids:
                self._producer_decided(accepted[0], d)
            if isinstance(d, AppendLost):
                self.result.lost += 1
                continue
            self.result.commit_latency_ms.append(self.now - accepted[4])
            self._acknowledge(d.request_id, d.first_offset, d.last_offset, d.epoch)

    def _acknowledge(self, rid: int, first: Offset, last: Offset, epoch: Epoch) -> None:
        self.result.committed += 1
        new = AckedRange(first, last, epoch)
        # Kept in epoch order, which is offset order along the committed log: a former
        # leader may acknowledge an older epoch after a newer one was acknowledged.
        acked = self._acked
        i = len(acked)
        while i > 0 and acked[i - 1].epoch > epoch:
            i -= 1
        if i > 0 and acked[i - 1].epoch == epoch:
            top = acked[i - 1]
            acked[i - 1] = AckedRange(min(top.first, first), max(top.last, last), epoch)
            self._acked_lasts[i - 1] = acked[i - 1].last
        else:
            acked.insert(i, new)
            self._acked_lasts.insert(i, last)
        self._acked_t = tuple(acked)
        # The new acknowledgement against every node; older ones were checked already.
        v = self._check and inv.committed_never_lost(replace(self._cluster(), acknowledged=(new,)))
        if v:
            self._violation(v.name, v.detail)
        if rid == self._probe:
            self._probe = None
