"""The one task that owns the replica: drains events, steps the core, performs its effects.

Group commit. The events ready at a wake-up (network receives, client appends, the due tick)
form a batch, stepped one after the other. Effects are performed in order: AppendToLog and
TruncateLog at once, PersistElectionState at once (the file write fsyncs). A FlushLog only marks
a flush pending; from then on every outbound effect (Send, AppendResult, AppendCommitted,
AppendLost, HighWatermarkMoved, ShutdownComplete) is held. At the end of the batch one fsync
makes every append durable, then the held effects are released in their order. So nothing
leaves the node before the records it depends on are on disk, however many steps shared that
fsync (kraft.core.effects).

Coalescing: consecutive plain client appends (no producer id) of one batch become one
ClientAppend of all their records, so one core step and one record batch; the driver splits
its outcome (refusal, AppendCommitted offsets, AppendLost) back among them by their record
counts. Idempotent appends are stepped one by one (each is its own batch, kraft.core.appends).
With quorum.append.linger.ms, the core's accumulator also puts the appends that arrive within
the linger into one record batch: a linger delays only the appends; the loop goes on stepping
fetches, votes and other clients meanwhile, and wakes at the linger's end (the replica's next
deadline).

Within a batch, client appends are stepped after the other events, so that what a peer's
message releases (a HWM that answers clients, a Fetch answered from records already durable)
is not held behind the fsync of this batch's appends. The fsync runs on the loop: nothing could
be stepped meanwhile anyway (a follower's next Fetch waits for it, a leader's answers too), and
on a worker thread its hand-offs (submit, wake, GIL, completion, loop wake-up) cost about a
seventh of the CPU per committed one-record append and added latency whenever the cores are
busy (benchmarks.bench_work); what arrives meanwhile waits in the socket buffers and is read
right after.

Snapshots (KIP-630), performed in order like the log's effects: WriteSnapshot and
SnapshotRefused go to the snapshot policy (`SnapshotHooks`, kraft.server.snapshots), which
writes the file off the loop and submits SnapshotWritten once it is durable.
AdvanceLogStartOffset loads the snapshot at the new start into a state machine that has not
applied that far (it reads the log lazily), makes the new log start durable (the log-start
checkpoint, written atomically), and only then deletes the segments and the snapshots below
it, so a crash at any point leaves a directory that starts consistently (start-up finishes
the deletion). The node asks for it through its retention policy (kraft.server.retention).
A snapshot fetched from the leader: WriteSnapshotChunk writes into its `.part` file,
ValidateSnapshot checks and fsyncs it on a worker thread (the loop goes on stepping events
meanwhile; the core asks nothing of that transfer until it hears) and submits
SnapshotValidated, InstallSnapshot renames it into place (directory fsynced), truncates the log
fully to start at its end, deletes older snapshots and loads it into the state machine, all
before the effects after it (the HighWatermarkMoved that follows releases a state machine
already at the snapshot's end); DiscardSnapshotFetch removes the `.part` file
(kraft.server.snapshot_store). Validation and loading read the file one batch at a time (never
held in memory); loading runs on the event loop.

Sends are encoded when performed, not when released: a Fetch response holds a view of the
mmapped log, valid only until the log is next truncated.

Client appends are answered only once decided. The core decides (kraft.core.commits): an
AppendResult that refuses is answered at once; an accepted append is answered by its
AppendCommitted (success) or AppendLost (an error: not known to be committed), released like
any outbound effect, so never before what it depends on is durable. A timeout is the driver's
own answer: outcome unknown; so is a leader's stepping down (StateChanged from Leader), which
answers its pending appends at once rather than when it next follows a leader. Never a false
acknowledgement.

The batch is stepped, flushed and released without awaiting, so other tasks of the node
(DescribeQuorum, reads) only ever see the replica and the log between whole batches.
"""

from __future__ import annotations

import asyncio
import functools
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from kraft.client import Address
from kraft.client_voters import kraft_version_range
from kraft.core.effects import (
    AdvanceLogStartOffset,
    AppendCommitted,
    AppendLost,
    AppendResult,
    AppendToLog,
    CheckVoterVersions,
    DiscardSnapshotFetch,
    Effect,
    ElectionsExhausted,
    FlushLog,
    HighWatermarkMoved,
    InstallSnapshot,
    MessageRefused,
    PersistElectionState,
    Send,
    ShutdownComplete,
    SnapshotEffect,
    SnapshotRefused,
    SnapshotRequired,
    StateChanged,
    TruncateLog,
    ValidateSnapshot,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import (
    ClientAppend,
    Event,
    Shutdown,
    SnapshotValidated,
    Tick,
    VoterVersionsChecked,
)
from kraft.core.replica import Replica
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import NO_PRODUCER, Epoch, NodeId, Offset, OffsetAndEpoch, ProducerId
from kraft.records import KeyValue
from kraft.server.coalesce import AppendGroups
from kraft.server.snapshot_store import FileSnapshots, Validation
from kraft.storage.quorum_state import write_quorum_state
from kraft.storage.replicated_log import CorruptLogError
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_files import checkpoint_path
from kraft.tracing import TraceFile

__all__ = ["AppendOutcome", "Clock", "Driver", "Outbound", "SnapshotHooks"]

log = logging.getLogger("kraft.node")

_APPEND_REFUSALS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "not the leader",
    ErrorCode.INVALID_REQUEST: "no values, or a sequence number out of range",
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: "a gap after the producer's last sequence number",
    ErrorCode.DUPLICATE_SEQUENCE_NUMBER: "a resend older than the batches the leader keeps",
    ErrorCode.RECORD_LIST_TOO_LARGE: "values too large for one batch (8 MiB)",
}

Clock = Callable[[], int]
Release = Callable[[], None]

# Due timers handled per batch before yielding to the network again.
_MAX_TICKS_PER_BATCH = 8


class Outbound(Protocol):
    def prepare(self, send: Send) -> Release:
        """Encode the message now; the returned callable puts it on the wire."""
        ...


class SnapshotHooks(Protocol):
    """The state machine's side of the snapshot effects (kraft.server.snapshots.Snapshotter)."""

    def write_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """WriteSnapshot: write it (off the loop), then submit SnapshotWritten."""
        ...

    def snapshot_refused(self, end_offset: Offset, reason: str) -> None: ...

    def before_log_start(self, snapshot_id: OffsetAndEpoch, path: Path) -> None:
        """The log is about to start at the end of this snapshot (a file this node holds): a
        state machine that has not applied that far must not lose what lies below it."""
        ...

    def snapshot_installed(self, path: Path) -> None:
        """A fetched snapshot is in place at `path`: load it into the state machine."""
        ...


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    error: ErrorCode
    message: str | None = None
    first_offset: Offset | None = None
    last_offset: Offset | None = None
    epoch: Epoch | None = None
    leader_id: NodeId | None = None


Answer = Callable[[AppendOutcome], None]
# A committed append's answer, told (first, last, epoch, leader) without an AppendOutcome.
OnCommitted = Callable[[Offset, Offset, Epoch, NodeId | None], None]


@dataclass(slots=True)
class _Pending:
    answer: Answer
    deadline_ms: int
    committed: OnCommitted | None = None


class Driver:
    def __init__(
        self,
        replica: Replica,
        log_: SegmentedLog,
        quorum_state_path: Path,
        outbound: Outbound,
        clock: Clock,
        *,
        voter_ids: tuple[NodeId, ...],
        trace: TraceFile | None = None,
        snapshot_files: FileSnapshots | None = None,
        quorum_state_version: int = 0,
    ) -> None:
        """`snapshot_files`: where the snapshot effects act (required when the replica was
        built with a SnapshotSource); the state machine's side is `snapshot_hooks`.
        `quorum_state_version`: 0 for a static voter set (with `voter_ids`), 1 for a dynamic
        one (KIP-853: the voted directory id, no voters), as Kafka writes `quorum-state`."""
        self.replica = replica
        self.snapshot_files = snapshot_files
        self.snapshot_hooks: SnapshotHooks | None = None
        self.log = log_
        self._qs_path = quorum_state_path
        self._out = outbound
        self._clock = clock
        self._voter_ids = voter_ids
        self._qs_version = quorum_state_version
        self._trace = trace
        self._queue: deque[Event] = deque()
        # What run() awaits while it has nothing to step: a future set by `_wake_up`.
        self._waiter: asyncio.Future[None] | None = None
        self._flush_pending = False
        self._held: list[Release] = []
        self._pending: dict[int, _Pending] = {}
        # (deadline, request id) of the pending appends, a heap; answered ones leave lazily.
        self._deadlines: list[tuple[int, int]] = []
        self._groups = AppendGroups()  # coalesced appends (kraft.server.coalesce)
        self._ids = itertools.count(1)
        self._stopping = False
        self._shutdown_done = asyncio.Event()
        # The HWM as released (after its fsync): what readers may see.
        self.high_watermark: Offset | None = None
        self.batches = 0
        self.fsyncs = 0
        # Set when the log turns out to be unservable; the node stops gracefully, exit 1.
        self.fatal: CorruptLogError | None = None
        self.on_fatal: Callable[[], None] = self.stop
        # Told of every released high watermark (the snapshot policy, kraft.server.snapshots).
        self.on_high_watermark: Callable[[Offset], None] | None = None
        # The quorum listener's name: the endpoint a voter-versions probe goes to.
        self.listener_name = "CONTROLLER"
        self._probes: set[asyncio.Task[None]] = set()
        self._performers = self._performer_table()

    @property
    def clock(self) -> Clock:
        return self._clock

    # ------------------------------------------------------------------ inputs

    def submit(self, event: Event) -> None:
        self._queue.append(event)
        self._wake_up()

    def _wake_up(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def append(
        self,
        records: tuple[KeyValue, ...],
        timeout_ms: int,
        answer: Answer,
        *,
        producer: ProducerId = NO_PRODUCER,
        sequence: int = -1,
        on_committed: OnCommitted | None = None,
    ) -> None:
        """A client append; `answer` is called once with its outcome (from the loop, once the
        outcome is released: never before the records it acknowledges are durable). With
        `on_committed`, a committed outcome goes there instead, as its fields."""
        now = self._clock()
        request_id = next(self._ids)
        deadline = now + max(timeout_ms, 0)
        self._pending[request_id] = _Pending(answer, deadline, on_committed)
        heapq.heappush(self._deadlines, (deadline, request_id))
        self._queue.append(ClientAppend(now, records, request_id, producer, sequence))
        self._wake_up()

    def client_append(
        self,
        records: tuple[KeyValue, ...],
        timeout_ms: int,
        *,
        producer: ProducerId = NO_PRODUCER,
        sequence: int = -1,
    ) -> asyncio.Future[AppendOutcome]:
        """`append`, answered through a future."""
        fut: asyncio.Future[AppendOutcome] = asyncio.get_running_loop().create_future()

        def answer(outcome: AppendOutcome) -> None:
            if not fut.done():
                fut.set_result(outcome)

        self.append(records, timeout_ms, answer, producer=producer, sequence=sequence)
        return fut

    def start(self) -> None:
        """Perform the effects of replica.start() (called once, before run)."""
        effects = self.replica.start()
        if self._trace is not None:
            self._trace.start(self._clock(), effects, self.replica.view())
        self._perform(effects)
        self._finish_batch()

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            waited = False
            if not self._queue:
                delay = (self._next_deadline() - self._clock()) / 1000
                if delay > 0:
                    waiter = self._waiter = loop.create_future()
                    timer = loop.call_later(delay, self._wake_up)
                    try:
                        await waiter
                    finally:
                        timer.cancel()
                        self._waiter = None
                    waited = True
            self.process_batch()  # its fsync too, on the loop (the module's docstring says why)
            if not waited:
                # Let the network callbacks run even when timers are due back to back.
                await asyncio.sleep(0)

    def stop(self) -> None:
        self._stopping = True
        self._wake_up()

    def _next_deadline(self) -> int:
        t = self.replica.next_deadline_ms()
        deadlines, pending = self._deadlines, self._pending
        while deadlines and deadlines[0][1] not in pending:
            heapq.heappop(deadlines)
        return min(t, deadlines[0][0]) if deadlines else t

    def process_batch(self) -> None:
        """Step every queued event and the due ticks, fsync once, release what was held."""
        self._step_batch()
        self._finish_batch()
        self._expire_appends()

    def _step_batch(self) -> None:
        """Step the queued events, client appends last, then the due ticks. Peer messages go
        first so that what they release (a HWM that answers clients, a Fetch answered from
        records already durable) is not held behind the fsync of this batch's appends."""
        self.batches += 1
        appends: list[ClientAppend] = []
        queue = self._queue
        while queue:
            event = queue.popleft()
            if isinstance(event, ClientAppend):
                appends.append(event)
            else:
                self._step(event)
        for event in self._groups.coalesce(appends, functools.partial(next, self._ids)):
            self._step(event)
        for _ in range(_MAX_TICKS_PER_BATCH):
            now = self._clock()
            if self.replica.next_deadline_ms() > now:
                break
            self._step(Tick(now))

    def _step(self, event: Event) -> None:
        try:
            effects = self.replica.step(event)
        except CorruptLogError as e:
            self.unservable(e)
            return
        if self._trace is not None:
            self._trace.step(event.now_ms, event, effects, self.replica.view())
        self._perform(effects)

    def unservable(self, e: CorruptLogError) -> None:
        """The log holds a batch that fails validation where it is read for sending. Leading
        on, every follower would stall at that batch; so resign (EndQuorumEpoch lets the
        others elect at once) and stop, exit status 1. When the read was inside a step, that
        step's effects are dropped: at most a high-watermark move and the outcomes of the
        appends it decided go unannounced (nothing is appended or persisted before the read);
        the node stops, and those clients hear that the outcome is unknown."""
        if self.fatal is None:
            self.fatal = e
            log.error("cannot serve the log: %s; resigning and stopping this node", e)
            self.on_fatal()

    def _flush(self) -> None:
        self.log.flush()
        self.fsyncs += 1
        self._flush_pending = False

    def _finish_batch(self) -> None:
        if self._flush_pending:
            self._flush()
        held, self._held = self._held, []
        for release in held:
            release()

    # ------------------------------------------------------------------ effects

    def _emit(self, release: Release) -> None:
        if self._flush_pending:
            self._held.append(release)
        else:
            release()

    def _perform(self, effects: list[Effect]) -> None:
        """Each effect by its exact type (one dict lookup, not a chain of isinstance tests:
        a step's effects are mostly ActionTaken, which has nothing to perform here)."""
        table = self._performers
        for e in effects:
            perform = table.get(type(e))
            if perform is not None:
                perform(e)

    def _performer_table(self) -> dict[type, Callable[[Any], None]]:
        snapshot = self._perform_snapshot
        return {
            AppendToLog: self._append_to_log,
            TruncateLog: self._truncate_log,
            FlushLog: self._flush_log,
            PersistElectionState: self._persist_election_state,
            Send: self._send,
            HighWatermarkMoved: self._high_watermark_moved,
            AppendResult: self._emit_append_result,
            AppendCommitted: self._emit_committed,
            AppendLost: self._emit_lost,
            StateChanged: self._state_changed,
            ShutdownComplete: self._shutdown_complete,
            MessageRefused: self._message_refused,
            ElectionsExhausted: self._elections_exhausted,
            SnapshotRequired: self._snapshot_required,
            WriteSnapshot: snapshot,
            SnapshotRefused: snapshot,
            AdvanceLogStartOffset: snapshot,
            WriteSnapshotChunk: snapshot,
            ValidateSnapshot: snapshot,
            InstallSnapshot: snapshot,
            DiscardSnapshotFetch: snapshot,
            CheckVoterVersions: self._emit_check_versions,
            # ActionTaken: only for traces.
        }

    def _append_to_log(self, e: AppendToLog) -> None:
        if e.leader_encoded:
            self.log.append_leader_encoded(e.data, e.first_offset, e.last_offset, e.epoch)
        else:
            self.log.append_as_follower(e.data)

    def _truncate_log(self, e: TruncateLog) -> None:
        self.log.truncate_to(e.offset)

    def _flush_log(self, e: FlushLog) -> None:
        self._flush_pending = True

    def _persist_election_state(self, e: PersistElectionState) -> None:
        # Version 0 as Kafka writes it for a static voter set (controller.quorum.voters),
        # 1 for a dynamic one (kraft.version 1).
        write_quorum_state(self._qs_path, e.state, version=self._qs_version, voters=self._voter_ids)

    def _send(self, e: Send) -> None:
        self._emit(self._out.prepare(e))

    def _high_watermark_moved(self, e: HighWatermarkMoved) -> None:
        self._emit(functools.partial(self._hwm_moved, e.high_watermark))

    def _emit_append_result(self, e: AppendResult) -> None:
        self._emit(functools.partial(self._append_result, e))

    def _emit_committed(self, e: AppendCommitted) -> None:
        self._emit(functools.partial(self._committed, e))

    def _emit_lost(self, e: AppendLost) -> None:
        self._emit(functools.partial(self._lost, e))

    def _state_changed(self, e: StateChanged) -> None:
        log.info("%s -> %s in epoch %d", e.old.value, e.new.value, e.epoch)
        if e.old is ReplicaState.LEADER:
            self._groups.clear()  # their members are answered below
        if e.old is ReplicaState.LEADER and self._pending:
            self._emit(functools.partial(self._stepped_down, e.epoch))

    def _shutdown_complete(self, e: ShutdownComplete) -> None:
        self._emit(self._shutdown_done.set)

    def _message_refused(self, e: MessageRefused) -> None:
        log.warning("refused a %s from node %d: %s", e.kind, e.src, e.reason)

    def _elections_exhausted(self, e: ElectionsExhausted) -> None:
        log.error(
            "epoch %d is the largest that can be encoded: this node can no longer "
            "stand for election (it still votes and follows)",
            e.epoch,
        )

    def _snapshot_required(self, e: SnapshotRequired) -> None:
        log.warning(
            "leader %d answered our Fetch with snapshot %d-%d, but this replica was"
            " built without snapshot files (no SnapshotSource), so it cannot fetch it"
            " (KIP-630) and will not progress; it keeps fetching slowly to stay in touch",
            e.leader_id,
            e.snapshot_id.offset,
            e.snapshot_id.epoch,
        )

    def _emit_check_versions(self, e: CheckVoterVersions) -> None:
        self._emit(functools.partial(self._check_versions, e))

    def _perform_snapshot(self, e: SnapshotEffect) -> None:
        files, hooks = self.snapshot_files, self.snapshot_hooks
        if isinstance(e, WriteSnapshot):
            if hooks is not None:
                hooks.write_snapshot(e.snapshot_id)
            return
        if isinstance(e, SnapshotRefused):
            log.info("snapshot at offset %d refused: %s", e.end_offset, e.reason)
            if hooks is not None:
                hooks.snapshot_refused(e.end_offset, e.reason)
            return
        if files is None:
            raise RuntimeError(f"{type(e).__name__} without snapshot files")
        sid = e.snapshot_id
        if isinstance(e, AdvanceLogStartOffset):
            if hooks is not None:
                hooks.before_log_start(sid, checkpoint_path(files.directory, sid))
            self.log.advance_start_offset(sid.offset)
            for old in files.delete_older_than(sid):
                log.info("snapshot %d-%d deleted (below the log start)", old.offset, old.epoch)
            log.info(
                "log start offset advanced to %d (snapshot %d-%d)",
                sid.offset,
                sid.offset,
                sid.epoch,
            )
        elif isinstance(e, WriteSnapshotChunk):
            files.write_chunk(sid, e.position, e.data)
        elif isinstance(e, ValidateSnapshot):
            files.validate_later(sid, e.size, functools.partial(self._validated, sid))
        elif isinstance(e, InstallSnapshot):
            path = files.install(sid)
            self.log.truncate_fully_and_start_at(sid.offset)
            files.delete_older_than(sid)
            if hooks is not None:
                hooks.snapshot_installed(path)
            log.info(
                "snapshot %d-%d installed: the log starts at %d", sid.offset, sid.epoch, sid.offset
            )
        else:
            files.discard(sid)

    def _check_versions(self, e: CheckVoterVersions) -> None:
        """Kafka's leader asks a replica to be added which kraft.version range it supports
        (ApiVersions on the quorum listener) before adding it; the answer is the core's next
        event (VoterVersionsChecked)."""
        endpoint = next((x for x in e.endpoints if x.name == self.listener_name.upper()), None)
        if endpoint is None and e.endpoints:
            endpoint = e.endpoints[0]

        async def probe() -> None:
            if endpoint is None:
                error, versions = ErrorCode.REQUEST_TIMED_OUT, None
            else:
                error, versions = await kraft_version_range(Address(endpoint.host, endpoint.port))
            self.submit(VoterVersionsChecked(self._clock(), e.voter.id, error, versions))

        task = asyncio.get_running_loop().create_task(probe())
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    def _validated(self, sid: OffsetAndEpoch, v: Validation) -> None:
        if not v.valid:
            log.warning(
                "fetched snapshot %d-%d fails validation: %s", sid.offset, sid.epoch, v.reason
            )
        self.submit(
            SnapshotValidated(
                self._clock(), sid, v.valid, v.voters, v.reason, voters_record=v.record
            )
        )

    # ------------------------------------------------------------------ client appends

    def _append_result(self, r: AppendResult) -> None:
        """A refusal is answered now; an accepted append waits for its outcome."""
        if r.error is not ErrorCode.NONE:
            why = _APPEND_REFUSALS.get(r.error, r.error.name)
            for request_id, _, _ in self._groups.members(r.request_id, Offset(0), Offset(0)):
                self._answer(request_id, AppendOutcome(r.error, why, leader_id=r.leader_id))

    def _committed(self, c: AppendCommitted) -> None:
        leader = self.replica.view().leader_id
        pending, epoch = self._pending, c.epoch
        for request_id, first, last in self._groups.members(
            c.request_id, c.first_offset, c.last_offset
        ):
            p = pending.pop(request_id, None)
            if p is None:
                continue
            if p.committed is not None:
                p.committed(first, last, epoch, leader)
            else:
                p.answer(AppendOutcome(ErrorCode.NONE, None, first, last, epoch, leader))

    def _lost(self, lost: AppendLost) -> None:
        leader = self.replica.view().leader_id
        for request_id, _, _ in self._groups.members(
            lost.request_id, lost.first_offset, lost.last_offset
        ):
            self._answer(
                request_id,
                AppendOutcome(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"records {lost.first_offset}..{lost.last_offset} of epoch {lost.epoch}"
                    " were truncated here after a leader change; they are not known to be"
                    " committed",
                    leader_id=leader,
                ),
            )

    def _stepped_down(self, epoch: Epoch) -> None:
        """No longer the leader: this node learns its pending appends' outcome only once it
        follows the next leader (a removed leader: an election timeout or more later). Its
        clients hear now that the outcome is unknown, so an idempotent producer resends to
        the new leader (as Kafka's controller fails its pending writes when it renounces)."""
        for request_id in list(self._pending):
            self._answer(
                request_id,
                AppendOutcome(
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    f"the leader of epoch {epoch} stepped down before these records were known"
                    " to be committed: their outcome is unknown",
                ),
            )

    def _hwm_moved(self, hwm: Offset) -> None:
        self.high_watermark = hwm
        if self.on_high_watermark is not None:
            self.on_high_watermark(hwm)

    def _expire_appends(self) -> None:
        deadlines, pending = self._deadlines, self._pending
        if not pending:
            deadlines.clear()
            return
        if len(deadlines) > 2 * len(pending) + 64:
            # Mostly answered: rebuild from what is still pending.
            deadlines[:] = [(p.deadline_ms, r) for r, p in pending.items()]
            heapq.heapify(deadlines)
        now = self._clock()
        while deadlines and deadlines[0][0] <= now:
            _, request_id = heapq.heappop(deadlines)
            if request_id in pending:
                self._answer(
                    request_id,
                    AppendOutcome(
                        ErrorCode.REQUEST_TIMED_OUT,
                        "not committed in time; the records may or may not commit",
                        leader_id=self.replica.view().leader_id,
                    ),
                )

    def _answer(self, request_id: int, outcome: AppendOutcome) -> None:
        p = self._pending.pop(request_id, None)
        if p is not None:
            p.answer(outcome)

    def fail_all_appends(self, message: str) -> None:
        for request_id in list(self._pending):
            self._answer(
                request_id,
                AppendOutcome(ErrorCode.REQUEST_TIMED_OUT, message),
            )

    # ------------------------------------------------------------------ shutdown

    async def shutdown(self, timeout_ms: int) -> bool:
        """Graceful: a leader resigns (EndQuorumEpoch); True if the replica finished in time."""
        self.submit(Shutdown(self._clock()))
        try:
            await asyncio.wait_for(self._shutdown_done.wait(), timeout_ms / 1000)
            return True
        except TimeoutError:
            return False
