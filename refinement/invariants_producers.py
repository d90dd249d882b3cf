"""Safety checkers of idempotent appends (kraft.core.producers): what the simulator's
producers (refinement.sim_clients, under a profile with `producers`) may rely on.

A simulated producer acts like a Kafka producer with max.in.flight.requests.per.connection=1:
it numbers its records from 0, sends its next batch only once the previous one was
acknowledged, and resends the batch in flight with the same producer id and sequence when it
hears NOT_LEADER_OR_FOLLOWER, when the node it sent to stops, when the append is lost, or when
no outcome came within its request timeout. Against such a producer:

- ProducerSequencesInOrder: along any replica's log, each producer's batches carry
  consecutive sequence numbers (each base sequence is one past the previous batch's last),
  and in a log that starts at offset 0 the first one is sequence 0: a (producer, sequence) is
  appended at most once, none is skipped, none overtakes another.
- DuplicateAnsweredWithOriginal: an acknowledged idempotent append names the offsets at which
  the acknowledging replica's log holds the batch with that producer id and sequence, and
  every acknowledgement of one (producer, sequence) names the same offsets: a resend is
  answered with the original's offsets, never appended a second time.
- ProducerNextSequenceAccepted: a leader never refuses such a producer's batch as out of order
  (OUT_OF_ORDER_SEQUENCE_NUMBER) or as a duplicate too old to tell
  (DUPLICATE_SEQUENCE_NUMBER): the batch follows the last acknowledged one, which every leader
  since holds. This holds while the producer table is rebuilt from a log that keeps every
  batch (no snapshot cuts it: the producer profiles take none).
- ProducerTableFollowsLog: every batch a replica's producer table retains is one its log
  holds (same producer, sequence, offsets and epoch), and each producer's newest retained
  batch is that producer's newest batch in the log: the table follows the log through
  appends, truncations and snapshot installs (the table a restart rebuilds from the log).
"""

from __future__ import annotations

from collections.abc import Iterable

from kraft.core.producers import ProducerBatch
from kraft.errors import ErrorCode
from kraft.ids import NodeId, Offset, ProducerId
from refinement.invariants import Violation

PRODUCER_SEQUENCES_IN_ORDER = "ProducerSequencesInOrder"
DUPLICATE_ANSWERED_WITH_ORIGINAL = "DuplicateAnsweredWithOriginal"
PRODUCER_NEXT_SEQUENCE_ACCEPTED = "ProducerNextSequenceAccepted"
PRODUCER_TABLE_FOLLOWS_LOG = "ProducerTableFollowsLog"

_REFUSALS = frozenset({ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.DUPLICATE_SEQUENCE_NUMBER})


def producer_sequences_in_order(
    node: NodeId, batches: Iterable[ProducerBatch], log_start: Offset
) -> Violation | None:
    """`batches`: the idempotent batches of the node's log, in log order, from `log_start`."""
    last: dict[ProducerId, ProducerBatch] = {}
    for b in batches:
        prev = last.get(b.producer)
        want = 0 if prev is None else prev.last_sequence + 1
        if (prev is not None or log_start == 0) and b.base_sequence != want:
            after = (
                "as its first batch in a log starting at 0"
                if prev is None
                else f"after sequences {prev.base_sequence}..{prev.last_sequence} at"
                f" [{prev.first_offset}, {prev.last_offset}]"
            )
            return Violation(
                PRODUCER_SEQUENCES_IN_ORDER,
                f"node {node}'s log holds producer {b.producer}'s sequences"
                f" {b.base_sequence}..{b.last_sequence} at [{b.first_offset}, {b.last_offset}]"
                f" (epoch {b.epoch}) {after}: expected sequence {want}",
            )
        last[b.producer] = b
    return None


def duplicate_answered_with_original(
    node: NodeId,
    producer: ProducerId,
    sequence: int,
    *,
    first: Offset,
    last: Offset,
    held: ProducerBatch | None,
    earlier: tuple[Offset, Offset] | None,
) -> Violation | None:
    """An acknowledgement of (producer, sequence) at [first, last] by `node`, whose log holds
    `held` at `first` (None: no idempotent batch starts there); `earlier`: the offsets an
    earlier acknowledgement of the same (producer, sequence) named."""
    if held is None or (held.producer, held.base_sequence, held.first_offset, held.last_offset) != (
        producer,
        sequence,
        first,
        last,
    ):
        found = (
            "no idempotent batch there"
            if held is None
            else f"producer {held.producer}'s sequence {held.base_sequence} at"
            f" [{held.first_offset}, {held.last_offset}]"
        )
        return Violation(
            DUPLICATE_ANSWERED_WITH_ORIGINAL,
            f"node {node} acknowledged producer {producer}'s sequence {sequence} at"
            f" [{first}, {last}] but its log holds {found}",
        )
    if earlier is not None and earlier != (first, last):
        return Violation(
            DUPLICATE_ANSWERED_WITH_ORIGINAL,
            f"node {node} acknowledged producer {producer}'s sequence {sequence} at"
            f" [{first}, {last}], already acknowledged at [{earlier[0]}, {earlier[1]}]:"
            " committed twice",
        )
    return None


def producer_next_sequence_accepted(
    node: NodeId, producer: ProducerId, sequence: int, error: ErrorCode
) -> Violation | None:
    """Leader `node` answered `error` to the producer's batch at `sequence` (every record
    before it acknowledged, none after it sent)."""
    if error in _REFUSALS:
        return Violation(
            PRODUCER_NEXT_SEQUENCE_ACCEPTED,
            f"node {node} refused producer {producer}'s sequence {sequence} with {error.name},"
            " though the producer's records before it are acknowledged and none after it sent",
        )
    return None


def producer_table_follows_log(
    node: NodeId, table: Iterable[ProducerBatch], log: Iterable[ProducerBatch]
) -> Violation | None:
    """`table`: the batches node's producer table retains; `log`: the idempotent batches of
    its log, in log order."""
    held: dict[Offset, ProducerBatch] = {}
    newest: dict[ProducerId, ProducerBatch] = {}
    for b in log:
        held[b.first_offset] = b
        newest[b.producer] = b
    last: dict[ProducerId, ProducerBatch] = {}
    for b in table:
        if held.get(b.first_offset) != b:
            return Violation(
                PRODUCER_TABLE_FOLLOWS_LOG,
                f"node {node}'s producer table retains producer {b.producer}'s sequences"
                f" {b.base_sequence}..{b.last_sequence} at [{b.first_offset}, {b.last_offset}]"
                f" (epoch {b.epoch}), which its log does not hold",
            )
        last[b.producer] = b
    for producer, b in last.items():
        if newest.get(producer) != b:
            return Violation(
                PRODUCER_TABLE_FOLLOWS_LOG,
                f"node {node}'s producer table holds producer {producer}'s batch at"
                f" [{b.first_offset}, {b.last_offset}] as its newest, but its log's newest is"
                f" {newest.get(producer)}",
            )
    return None
