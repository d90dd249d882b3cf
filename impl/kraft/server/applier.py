"""Feeds the node's state machine (kraft.app.port) the batches the released high watermark
has committed, read back from the log.

The applier reads the high watermark the driver has released (after the fsync that makes
it visible: what readers may see). `catch_up`, called before the state machine is read
(KraftGet) and, with KIP-630, before it is snapshotted, reads whole batches from the applied
offset and hands over those that end below that high watermark, then the leader and epoch
when they changed. So the state a reader sees is exactly what eager
application would give, without the cost of decoding every record on every node as it
commits: at ~1.8 us a record (BENCHMARKS.md, full per-record decode) that would take about
a core per node at the cluster's 525,600 committed records/s. (A log start offset that
moves past unapplied batches, KIP-630, must catch up first.)

On start the state machine is empty at the log start offset, or holds the latest valid
snapshot (kraft.server.snapshots) and is at its end offset; either way the first catch-up
after the node learns a high watermark replays the log from there up to it (`first_read`
says where it started): nothing is applied that is not committed, and committed records are
never truncated, so the state never rolls back. `catch_up(max_reads=n)` does a bounded part
of the work, so that the snapshot policy can catch up in chunks between the driver's batches.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, Generic, Protocol, TypeVar

from kraft.app.port import CommittedBatch, LeaderAndEpoch, StateMachine, StateMachineError
from kraft.ids import Epoch, Offset, ProducerId
from kraft.record_scan import batch_key_values
from kraft.records import CorruptRecordError, iter_batches
from kraft.storage.replicated_log import CorruptLogError

__all__ = ["Applier", "BatchSource", "committed_batches"]

log = logging.getLogger("kraft.node")

_READ_BYTES: Final = 256 << 10


class BatchSource(Protocol):
    def read(self, offset: Offset, max_bytes: int) -> memoryview:
        """Whole batches from `offset` (at least one when offset is below the log end)."""
        ...


def committed_batches(data: memoryview | bytes, high_watermark: Offset) -> list[CommittedBatch]:
    """The batches of `data` that end below the high watermark, decoded, in order."""
    out: list[CommittedBatch] = []
    for pos, h in iter_batches(data, verify=False):
        if h.last_offset >= high_watermark:
            break
        control = h.is_control
        records = () if control else tuple(batch_key_values(data, pos, h))
        out.append(
            CommittedBatch(
                Offset(h.base_offset),
                Offset(h.last_offset),
                Epoch(h.partition_leader_epoch),
                records,
                control=control,
                append_timestamp_ms=h.max_timestamp,
                producer=ProducerId(h.producer_id),
                base_sequence=h.base_sequence,
            )
        )
    return out


M = TypeVar("M", bound=StateMachine)


class Applier(Generic[M]):
    """Moves one state machine along the committed log."""

    def __init__(
        self,
        source: BatchSource,
        machine: M,
        high_watermark: Callable[[], Offset | None],
        leader: Callable[[], LeaderAndEpoch],
    ) -> None:
        self._source = source
        self.machine = machine
        self._high_watermark = high_watermark
        self._leader = leader
        self._told: LeaderAndEpoch | None = None
        # Why the state machine stopped (a batch it could not read or apply); it is not
        # fed again, and reads of it answer with this.
        self.failed: str | None = None
        # The offset of the first read from the log (where replay started), None before it.
        self.first_read: Offset | None = None

    def catch_up(self, *, max_reads: int | None = None) -> bool:
        """Apply every whole batch below the released high watermark not applied yet (at
        most `max_reads` reads of about 1 MiB when given), then, once caught up, tell the
        state machine of a leader change (after its commits, as Kafka's listener hears of a
        leadership once caught up). Sets `failed` when it cannot. False while a bounded
        catch-up left batches below the high watermark unapplied."""
        high_watermark = self._high_watermark()
        if self.failed is not None or high_watermark is None:
            return True
        machine = self.machine
        reads = 0
        try:
            while machine.applied_offset < high_watermark:
                if max_reads is not None and reads >= max_reads:
                    return False
                reads += 1
                if self.first_read is None:
                    self.first_read = machine.applied_offset
                    log.info("state machine: replaying the log from offset %d", self.first_read)
                data = self._source.read(machine.applied_offset, _READ_BYTES)
                batches = committed_batches(data, high_watermark)
                if not batches:
                    break
                machine.handle_commit(batches)
        except CorruptLogError as e:
            # The node goes on as before: a fetch or read of that batch makes it resign and
            # stop (Driver.unservable); KraftGet answers with this reason meanwhile.
            self.failed = f"the log cannot be read at offset {machine.applied_offset}: {e}"
            log.error("state machine stopped: %s", self.failed)
            return True
        except (CorruptRecordError, StateMachineError) as e:
            self.failed = f"cannot apply at offset {machine.applied_offset}: {e}"
            log.error("state machine stopped: %s", self.failed)
            return True
        leader = self._leader()
        if leader != self._told:
            self._told = leader
            machine.handle_leader_change(leader)
        return True
