"""The simulator's KIP-630 layer (see refinement.sim_base for the layers), active only under a
fault profile with a `snapshot_rate` ("snapshots", every "NAME+snapshots", "disk-loss"):
every other profile draws nothing here and runs as before.

Each node keeps a `MemorySnapshots` (kraft.storage.memory_snapshots) in Kafka's byte layout. A
complete snapshot survives crashes; a `.part` being fetched does not. Now and then a random
running replica asks `CreateSnapshot` at its HWM; the effects are performed at once and the
answering events (SnapshotWritten, SnapshotValidated) come back as the node's next events.
Under a profile with `transfer_crash`, a node may crash right after a step of a transfer (a
chunk written, validated, installed): the crash comes before the driver's answer.

Checked here, on the bytes and on the steps only this layer sees: SnapshotIntact (every held
snapshot, once per distinct bytes) and LogStartBelowLiveReplicas (every leader's
AdvanceLogStartOffset, against the Fetches it accepted, ghost records kept by
refinement.sim_network). The committed history SnapshotMatchesLog compares snapshots with is
kept by refinement.sim_network too.

The simulated state machine's state is the replicated history itself: a snapshot's records are
the epoch cache, (epoch, start offset) pairs, of every record below its end offset, as the node
that wrote it held them (its own snapshot below its log start, then its log). Transferred by
chunks, validated and installed, that history is what the checkers see below a log start
(`node_epochs`), and what SnapshotMatchesLog compares with the logs.
"""

from __future__ import annotations

import random
from typing import IO, TYPE_CHECKING

from kraft.control_records import (
    VotersRecord,
    decode_control_batch,
)
from kraft.core.effects import (
    AdvanceLogStartOffset,
    DiscardSnapshotFetch,
    Effect,
    InstallSnapshot,
    MessageRefused,
    Send,
    SnapshotRefused,
    ValidateSnapshot,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import CreateSnapshot, Event, Receive, SnapshotValidated, SnapshotWritten
from kraft.core.messages import FetchRequest, FetchResponse, Request
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_keys_of
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.records import iter_batches, iter_values
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots, encode_snapshot, perform_snapshot_effect
from refinement import invariants as inv
from refinement import invariants_snapshot_rules as rules
from refinement.invariants import EpochCache, Violation
from refinement.invariants_snapshot_transfer import Seen, TransferMonitor
from refinement.sim_base import _FAULT, _LOCAL, _NODE_CRASH, _SNAPSHOT, _Node
from refinement.sim_network import SimNetwork

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaFactory, ReplicaViewLike, SimConfig, SimResult


_FILL = b"fill:"

# A Fetch a leader took (LogStartExact): when, and from which fetch offset; by the progress it
# updates (a voter's id, or -1 and the observer's key; on a dynamic quorum, each its own).
_Taken = tuple[int, Offset]
_ProgressKey = tuple[int, ReplicaKey | None]


def encode_history(
    snapshot_id: OffsetAndEpoch,
    epochs: EpochCache,
    padding: int = 0,
    voters: VotersRecord | None = None,
) -> bytes:
    """A snapshot whose records are the epoch cache of the history below its end offset (and,
    with `padding`, one filler record of that many bytes: the rest of a state machine's
    state, so that the snapshot moves in several chunks). With `voters` (a dynamic quorum),
    its first batch is SnapshotHeader, KRaftVersion 1 and that Voters record, as the node's
    CheckpointWriter writes it (KIP-853)."""
    records: list[tuple[bytes | None, bytes | None]] = [
        (b"epoch", f"{e}:{o}".encode()) for e, o in epochs
    ]
    if padding:
        records.append((b"fill", _FILL + bytes(padding)))
    return encode_snapshot(snapshot_id, records, voters)


def snapshot_voters(data: bytes) -> VotersRecord | None:
    """The Voters record of a snapshot's first batch (None: it states no voter set), as the
    node's driver reads it when it validates a fetched snapshot."""
    for pos, h in iter_batches(data, verify=False):
        if not h.is_control:
            return None
        _, records = decode_control_batch(data, pos, verify=False)
        return next((r for r in records if isinstance(r, VotersRecord)), None)
    return None


def decode_history(data: bytes) -> EpochCache:
    """The epoch cache a snapshot written by `encode_history` holds."""
    out: list[tuple[Epoch, Offset]] = []
    for pos, h in iter_batches(data):
        if h.is_control:
            continue
        raw = data[pos : pos + h.size_in_bytes]
        for _, value in iter_values(raw, 0, h):
            assert value is not None
            if bytes(value[: len(_FILL)]) == _FILL:
                continue
            e, o = bytes(value).decode().split(":")
            out.append((Epoch(int(e)), Offset(int(o))))
    return tuple(out)


def combined_epochs(log: MemoryLog, below: EpochCache) -> EpochCache:
    """The epoch cache of a replica's whole history: `below` (its snapshot's, for the offsets
    under the log start) then its log's."""
    start = log.start_offset
    base = tuple((e, o) for e, o in below if o < start)
    logged = log.epoch_entries()
    if base and logged and logged[0][0] == base[-1][0]:
        logged = logged[1:]  # the log's first epoch continues the snapshot's last
    return base + logged


class SimSnapshots(SimNetwork):
    """Snapshots taken, served, fetched, validated and installed; their histories tracked."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        super().__init__(config, result, replica_factory, trace)
        # What each snapshot holds, decoded from its bytes (never taken from the writer's
        # memory: a transfer must carry it), once per distinct bytes.
        self._histories: dict[tuple[OffsetAndEpoch, bytes], EpochCache] = {}
        # The (epoch, leader) each node's transfer began under (counts transfers a leader
        # change abandoned).
        self._transfer_under: dict[NodeId, tuple[Epoch, NodeId | None]] = {}
        # Snapshots written (WriteSnapshot performed) whose SnapshotWritten the replica has not
        # yet been given, per (node, incarnation): it does not hold them yet
        # (LogStartFollowsLeader). A restarted replica is told of every complete snapshot.
        self._unreported: dict[tuple[NodeId, int], set[OffsetAndEpoch]] = {}
        # The answer to the CreateSnapshot being stepped: written, or refused with a reason.
        self._create_answer: tuple[OffsetAndEpoch | None, str | None] = (None, None)
        if self._profile.snapshots:
            for node in self._nodes.values():
                node.snaps = MemorySnapshots()
        # The FetchSnapshot transfer's checkers (refinement.invariants_snapshot_transfer),
        # told of every step of a replica that keeps snapshots, with the event being stepped.
        self._transfers: TransferMonitor | None = (
            TransferMonitor() if self._profile.snapshots and self._check else None
        )
        # Slow validation (FaultProfile.slow_validation): each `.part`'s generation, per node
        # and snapshot (bumped when a transfer writes its first chunk or discards it), and the
        # generation each delayed SnapshotValidated was asked about, by the event's identity;
        # an answer about an older generation is dropped. Drawn from their own generator.
        self._part_gen: dict[tuple[NodeId, OffsetAndEpoch], int] = {}
        self._asked_gen: dict[int, int] = {}
        self._validate_rng = random.Random(f"{config.seed}/validate")
        # LogStartExact (refinement.invariants_snapshot_rules), checked after each step of a
        # replica that keeps snapshots. Per leader, the Fetches it took in its epoch: its
        # incarnation, epoch, and (time, fetch offset) by the progress they update (a voter's
        # by its id, any other replica's by its key; on a dynamic quorum each Fetch its own).
        self._log_start_on = self._profile.snapshots and self._check
        self._taken: dict[NodeId, tuple[int, Epoch, dict[_ProgressKey, _Taken]]] = {}
        self._taken_seq = 0
        # Of the step being applied: its node's lag-time clock before it, the Fetch answers it
        # sent (fetcher, the request answered, whether the answer took it: no error,
        # divergence or snapshot id), and whether it installed a snapshot or refused the
        # message stepped.
        self._since_before = 0
        self._answered: list[tuple[NodeId, FetchRequest, bool]] = []
        self._step_installed = False
        self._step_refused = False
        self._written_taken = False

    def _history_of(self, node: _Node, snapshot_id: OffsetAndEpoch, data: bytes) -> EpochCache:
        k = (snapshot_id, data)
        found = self._histories.get(k)
        if found is None:
            broken = inv.snapshot_intact(node.id, snapshot_id, data)
            if broken is not None:
                self._violation(broken.name, broken.detail)
            found = self._histories[k] = decode_history(data)
        return found

    def _node_histories(
        self, node: _Node
    ) -> tuple[EpochCache, tuple[tuple[OffsetAndEpoch, EpochCache], ...]]:
        """The node's whole epoch cache and its snapshots' histories."""
        snaps = node.snaps
        assert snaps is not None
        held = tuple(
            (sid, self._history_of(node, sid, data)) for sid, data in sorted(snaps.complete.items())
        )
        start = node.log.start_offset
        # No snapshot at the log start: LogStartAtSnapshot fires on this state.
        below = next((h for sid, h in held if sid.offset == start), ()) if start > 0 else ()
        return combined_epochs(node.log, below), held

    def _held_snapshots(self, node: _Node) -> tuple[OffsetAndEpoch, ...]:
        """The snapshots the replica was told of (a SnapshotWritten not yet stepped does not
        count), oldest first."""
        snaps = node.snaps
        if snaps is None:
            return ()
        pending = self._unreported.get((node.id, node.inc), set())
        held = (s for s in snaps.complete if s not in pending)
        return tuple(sorted(held, key=lambda s: s.offset))

    def _log_histories(
        self, node: _Node
    ) -> tuple[EpochCache, tuple[tuple[OffsetAndEpoch, EpochCache], ...]]:
        if node.snaps is None:
            return node.log.epoch_entries(), ()
        return self._node_histories(node)

    # ------------------------------------------------------------------ the transfer's checks

    def _apply(
        self,
        node: _Node,
        effects: list[Effect],
        answering: Request | None,
        src_id: int | None,
        event: Event | None = None,
    ) -> None:
        if self._log_start_on:
            self._see_log_start_effects(node, effects, event)
        super()._apply(node, effects, answering, src_id, event)
        monitor = self._transfers
        snaps = node.snaps
        replica = node.replica
        if monitor is None or snaps is None or replica is None:
            return
        v = replica.view()
        seen = Seen(
            v.state,
            v.epoch,
            v.leader_id,
            v.high_watermark,
            v.log_start_offset,
            v.end_offset,
            v.last_epoch,
        )
        found = monitor.step(node.id, node.inc, event, effects, view=seen, parts=snaps.parts)
        if found is not None:
            self._violation(found.name, found.detail)

    # ------------------------------------------------------------------ LogStartExact

    def _see_log_start_effects(
        self, node: _Node, effects: list[Effect], event: Event | None
    ) -> None:
        """Before a step's effects are performed (the ledger still holds the requests they
        answer, the log is as the step found it): what LogStartExact needs of them."""
        self._since_before = node.start_since
        # A snapshot written is one of this log (SnapshotRole.on_snapshot_written takes it):
        # past the log start, within the log, in the epoch of the record before its end.
        log = node.log
        self._written_taken = isinstance(event, SnapshotWritten) and (
            log.start_offset < event.snapshot_id.offset <= log.end_offset
            and _epoch_before(log, event.snapshot_id.offset) == event.snapshot_id.epoch
        )
        self._answered = []
        self._step_installed = False
        self._step_refused = False
        for e in effects:
            if isinstance(e, Send):
                answer = e.message
                if not isinstance(answer, FetchResponse) or e.reply_to is None:
                    continue
                request = self._ledger.request_of(node.id, e.reply_to)
                if isinstance(request, FetchRequest):
                    took = (
                        answer.error is ErrorCode.NONE
                        and answer.diverging_epoch is None
                        and answer.snapshot_id is None
                    )
                    self._answered.append((e.dst, request, took))
            elif isinstance(e, InstallSnapshot):
                self._step_installed = True
            elif isinstance(e, MessageRefused):
                self._step_refused = True

    def _step_seen(self) -> tuple[list[tuple[NodeId, FetchRequest, bool]], bool, bool, bool]:
        # Through a call: mypyc would keep values narrowed before the step set them.
        return self._answered, self._step_installed, self._step_refused, self._written_taken

    def _check_log_start(
        self,
        node: _Node,
        event: Event,
        answering: Request | None,
        before: ReplicaViewLike,
        after: ReplicaViewLike,
    ) -> None:
        """LogStartExact: the log start after the step is where KIP-630's rule, recomputed
        here, leaves it (refinement.invariants_snapshot_rules)."""
        if not self._log_start_on or node.snaps is None:
            return
        answered, installed, refused, written = self._step_seen()
        if installed:
            return  # the log now starts at the installed snapshot: the transfer's checkers
        start = before.log_start_offset
        now_at = after.log_start_offset
        message = event.message if isinstance(event, Receive) else None
        if isinstance(event, Receive) and isinstance(message, FetchResponse):
            if (
                after.state is not ReplicaState.FOLLOWER
                or after.leader_id != event.src
                or after.epoch != message.leader_epoch
                or message.log_start_offset < 0
            ):
                allowed: tuple[Offset, ...] = (start,)
                what = f"stepped a Fetch answer of {event.src} it did not take"
            else:
                held = [s.offset for s in self._held_snapshots(node)]
                moved = rules.follower_log_start_after(
                    start, held=held, leader_log_start=message.log_start_offset
                )
                allowed = (start, moved)
                what = (
                    f"took a Fetch answer of its leader {event.src} whose log starts at"
                    f" {message.log_start_offset}"
                )
            found = rules.log_start_exact(
                node.id, what, before=start, after=now_at, allowed=allowed
            )
        elif before.state is ReplicaState.LEADER:
            found = self._leader_log_start(
                node,
                event,
                answering,
                before,
                now_at=now_at,
                answered=answered,
                refused=refused,
                written=written,
            )
        else:
            found = rules.log_start_exact(
                node.id,
                f"stepped {type(event).__name__} as {before.state.value}",
                before=start,
                after=now_at,
                allowed=(start,),
            )
        if found is not None:
            self._violation(found.name, found.detail)

    def _leader_log_start(
        self,
        node: _Node,
        event: Event,
        answering: Request | None,
        before: ReplicaViewLike,
        *,
        now_at: Offset,
        answered: list[tuple[NodeId, FetchRequest, bool]],
        refused: bool,
        written: bool,
    ) -> Violation | None:
        """LogStartExact on a leader's step: the rule applied once per Fetch it took (the one
        stepped, unless answered with an error, a divergence or a snapshot id, or refused as
        malformed; each held one it answered now) and once for a snapshot written it took."""
        taken: list[tuple[NodeId, FetchRequest] | None] = []
        if (
            isinstance(event, Receive)
            and isinstance(answering, FetchRequest)
            and answering.replica_epoch == before.epoch
            and not refused
        ):
            own = [took for _, request, took in answered if request is answering]
            if not own or own[0]:
                taken.append((event.src, answering))
        for dst, request, took in answered:
            if took and request is not answering:
                taken.append((dst, request))
        start = before.log_start_offset
        held = [s.offset for s in self._held_snapshots(node)]
        log = node.log
        if written and isinstance(event, SnapshotWritten):
            held.append(event.snapshot_id.offset)
            taken.append(None)
        if not taken:
            return rules.log_start_exact(
                node.id,
                f"stepped {type(event).__name__} as leader, taking no Fetch nor snapshot",
                before=start,
                after=now_at,
                allowed=(start,),
            )
        timing = self._timing_of()
        ghost = self._taken.get(node.id)
        if ghost is None or ghost[0] != node.inc or ghost[1] != before.epoch:
            ghost = self._taken[node.id] = (node.inc, before.epoch, {})
        progress = ghost[2]
        now = self.now
        since = self._since_before
        expected = start
        for fetch in taken:
            if fetch is not None:
                src, request = fetch
                progress[self._progress_key(node.id, src, request)] = (now, request.fetch_offset)
            for k in [k for k, (at, _) in progress.items() if now - at > timing.fetch_timeout_ms]:
                del progress[k]
            moved = rules.leader_log_start_after(
                expected,
                held=held,
                end=log.end_offset,
                fetch_offsets=[o for _, o in progress.values()],
                lag_passed=now - since >= timing.start_offset_lag_time_max_ms,
            )
            if moved > expected:
                expected, since = moved, now
        fetchers = sorted({int(f[0]) for f in taken if f is not None})
        what = (
            f"took, as leader of epoch {before.epoch}, Fetches of {fetchers}"
            + (" and a snapshot written" if taken[-1] is None else "")
            + f" (live fetch offsets {sorted(o for _, o in progress.values())},"
            f" snapshots {sorted(held)})"
        )
        if self._dynamic:
            # Progress moves between voters and observers with the voter set: every Fetch
            # taken within the fetch timeout counts, a lower bound of the leader's.
            return rules.log_start_exact(
                node.id, what, before=start, after=now_at, allowed=(), at_least=expected
            )
        return rules.log_start_exact(node.id, what, before=start, after=now_at, allowed=(expected,))

    def _progress_key(self, leader: NodeId, src: NodeId, request: FetchRequest) -> _ProgressKey:
        """Which progress a Fetch a leader took updates (Kafka's LeaderState: a voter's, if
        it comes from a voter and names that voter, by the voter's id; else the observer
        named), on a static voter set; on a dynamic one each Fetch is its own."""
        if self._dynamic:
            self._taken_seq += 1
            return (-self._taken_seq, None)
        named = request.replica
        if src != leader and src in self._voter_set and _is_voter(self._voter_keys, named):
            return (int(src), None)
        return (-1, named)

    # ------------------------------------------------------------------ the policy

    def _start_snapshot_policy(self) -> None:
        rate = self._profile.snapshot_rate
        if rate > 0:
            self._push(self._exp_ms(rate), _FAULT, _SNAPSHOT)

    def _snapshot_fault(self) -> None:
        """A random running replica asks for a snapshot at its HWM, if past its newest one.
        The asking line of the trace is `AskCreateSnapshot`; the spec's `CreateSnapshot` is
        the step that hears the snapshot written (SnapshotWritten)."""
        up = [n for n in self._nodes.values() if n.replica is not None and not n.shutting_down]
        if up:
            node = up[int(self._rng.random() * len(up))]
            assert node.replica is not None
            hwm = node.replica.view().high_watermark
            snaps = node.snaps
            newest = max((s.offset for s in snaps.complete), default=0) if snaps else 0
            if hwm and hwm > newest:
                problem = self._create_problem(node, hwm) if self._check else None
                self._create_answer = (None, None)
                self._step(node, CreateSnapshot(self.now, hwm), None, None, None)
                if self._check:
                    written, refused = self._created()
                    found = rules.snapshot_taken_when_allowed(
                        node.id,
                        hwm,
                        problem,
                        written=written,
                        refused=refused,
                        epoch_before=_epoch_before(node.log, hwm),
                    )
                    if found is not None:
                        self._violation(found.name, found.detail)
        self._push(self.now + self._exp_ms(self._profile.snapshot_rate), _FAULT, _SNAPSHOT)

    def _created(self) -> tuple[OffsetAndEpoch | None, str | None]:
        """What the last CreateSnapshot step wrote or refused. Read through a method: the step
        sets it, and mypyc would otherwise keep the (None, None) it was reset to."""
        return self._create_answer

    def _create_problem(self, node: _Node, offset: Offset) -> str | None:
        """Why Kafka would refuse a snapshot of this node ending at `offset` (from the
        simulator's copy of its log and snapshots), or None."""
        log = node.log
        snaps = node.snaps
        assert node.replica is not None and snaps is not None
        newest = max((s.offset for s in snaps.complete), default=None)
        aligned = offset == log.end_offset
        if log.start_offset <= offset < log.end_offset:
            aligned = log.read(offset, 1).first_offset == offset
        return rules.create_snapshot_problem(
            offset,
            hwm=node.replica.view().high_watermark,
            newest=None if newest is None else Offset(newest),
            log_start=log.start_offset,
            log_end=log.end_offset,
            batch_aligned=aligned,
        )

    def _local(self, node: _Node, payload: tuple[Event, int]) -> None:
        """The driver's answer to a snapshot effect, for the incarnation that asked."""
        event, inc = payload
        if isinstance(event, SnapshotValidated):
            gen = self._asked_gen.pop(id(event), None)
            if gen is not None and gen != self._part_gen.get((node.id, event.snapshot_id), 0):
                return  # the `.part` it checked is gone: nobody waits for this answer
        if node.replica is None or node.inc != inc:
            return
        self._step(node, event, None, None, None)
        if isinstance(event, SnapshotWritten):
            pending = self._unreported.get((node.id, inc))
            if pending is not None:
                pending.discard(event.snapshot_id)

    def _log_start_followed(
        self, node: _Node, src: NodeId, msg: FetchResponse, before: FetchRequest | None, inc: int
    ) -> None:
        """LogStartFollowsLeader, after `node` stepped `msg` from `src`: if it accepted the
        answer (its next Fetch to `src` went out in that step), its log start followed the
        leader's as far as the snapshots it holds allow."""
        replica = node.replica
        snaps = node.snaps
        if (
            replica is None
            or snaps is None
            or node.inc != inc
            or msg.error is not ErrorCode.NONE
            or msg.snapshot_id is not None
            or msg.diverging_epoch is not None
            or msg.log_start_offset < 0
        ):
            return
        after = self._fetch_awaited.get((node.id, src))
        if after is None or after is before:
            return
        v = replica.view()
        if v.state is not ReplicaState.FOLLOWER or (v.leader_id, v.epoch) != (
            src,
            msg.leader_epoch,
        ):
            return
        pending = self._unreported.get((node.id, inc), set())
        held = [s for s in snaps.complete if s not in pending]
        found = rules.log_start_follows_leader(
            node.id, src, msg.log_start_offset, v.log_start_offset, held
        )
        if found is not None:
            self._violation(found.name, found.detail)

    # ------------------------------------------------------------------ the effects

    def _snapshot_effect(self, node: _Node, e: Effect) -> None:
        snaps = node.snaps
        if snaps is None:
            return
        node.log_dirty = True
        if isinstance(e, SnapshotRefused):
            self._create_answer = (None, e.reason)
            return
        if isinstance(e, WriteSnapshot):
            sid = e.snapshot_id
            self._create_answer = (sid, None)
            self._unreported.setdefault((node.id, node.inc), set()).add(sid)
            epochs, _ = self._node_histories(node)
            upto = tuple((ep, o) for ep, o in epochs if o < sid.offset)
            voters = self._snapshot_voters(node, sid) if self._dynamic else None
            data = encode_history(sid, upto, self._profile.snapshot_padding, voters)
            snaps.put(sid, data)
            self.result.snapshots_written += 1
            self._push(self.now, _LOCAL, node, (SnapshotWritten(self.now, sid), node.inc))
            return
        if isinstance(e, AdvanceLogStartOffset):
            self._check_log_start_move(node, e.snapshot_id.offset)
        elif isinstance(e, WriteSnapshotChunk | DiscardSnapshotFetch) and node.replica:
            v = node.replica.view()
            if not isinstance(e, WriteSnapshotChunk) or e.position == 0:
                k = (node.id, e.snapshot_id)
                self._part_gen[k] = self._part_gen.get(k, 0) + 1
            if isinstance(e, WriteSnapshotChunk):
                if e.position == 0:
                    self._transfer_under[node.id] = (v.epoch, v.leader_id)
            elif self._transfer_under.pop(node.id, None) not in (None, (v.epoch, v.leader_id)):
                self.result.transfers_leader_changed += 1
        try:
            perform_snapshot_effect(node.log, snaps, e)
        except Exception as exc:
            self._violation("EffectRejected", f"node {node.id} {e}: {exc}")
        if isinstance(e, WriteSnapshotChunk | ValidateSnapshot | InstallSnapshot):
            self._maybe_crash_mid_transfer(node, type(e).__name__)
        if isinstance(e, ValidateSnapshot):
            problem = snaps.validate(e.snapshot_id, e.size)
            # The voter set the snapshot states, as the node's driver reads it (KIP-853).
            record = None
            if problem is None and self._dynamic:
                record = snapshot_voters(bytes(snaps.parts[e.snapshot_id]))
            at = self.now + self._validation_delay()
            ev = SnapshotValidated(
                at,
                e.snapshot_id,
                problem is None,
                reason=problem or "",
                voters=None if record is None else voter_keys_of(record),
                voters_record=record,
            )
            if at > self.now:
                self._asked_gen[id(ev)] = self._part_gen.get((node.id, e.snapshot_id), 0)
            self._push(at, _LOCAL, node, (ev, node.inc))
        elif isinstance(e, InstallSnapshot):
            self._truncated = True  # the log was emptied: what must follow it is checked
            self.result.snapshots_installed += 1
            if node.wiped:
                self.result.installed_after_disk_loss += 1
            if self._dynamic:
                self._snapshot_installed(node, snaps.complete[e.snapshot_id], e.snapshot_id)

    def _validation_delay(self) -> int:
        """How long the driver takes to answer a ValidateSnapshot (0: at once); never slow in
        the liveness phase."""
        p = self._profile
        if p.slow_validation <= 0 or self._liveness:
            return 0
        rng = self._validate_rng
        if rng.random() >= p.slow_validation:
            return 0
        lo, hi = p.validate_ms
        return lo + int(rng.random() * (hi - lo + 1))

    def _snapshot_voters(self, node: _Node, snapshot_id: OffsetAndEpoch) -> VotersRecord | None:
        """The Voters record a dynamic quorum's snapshot carries: refinement.sim_reconfig."""
        raise NotImplementedError

    def _snapshot_installed(self, node: _Node, data: bytes, snapshot_id: OffsetAndEpoch) -> None:
        """A dynamic quorum's replica installed a snapshot: refinement.sim_reconfig."""
        raise NotImplementedError

    def _maybe_crash_mid_transfer(self, node: _Node, step: str) -> None:
        """A crash aimed at this incarnation right after a step of a transfer (a chunk
        written, validation asked, installed); queued before any answer of the driver, so it
        strikes first."""
        rate = self._profile.transfer_crash
        if rate and not self._liveness and self._rng.random() < rate:
            self._push(self.now, _NODE_CRASH, node, (node.inc, step))

    def _check_log_start_move(self, node: _Node, new_start: Offset) -> None:
        """LogStartBelowLiveReplicas on a leader's AdvanceLogStartOffset (the core performs
        one per step at most); the lag-time clock restarts on every move."""
        since = node.start_since
        node.start_since = self.now
        replica = node.replica
        if not self._check or replica is None:
            return
        v = replica.view()
        if v.state is not ReplicaState.LEADER:
            return
        timing = self._timing_of()
        fetched = {
            rid: (at, offset)
            for rid, (inc, epoch, at, offset) in self._fetched.get(node.id, {}).items()
            if inc == node.inc and epoch == v.epoch
        }
        current = self._fetch_in_step
        if current is not None and current[0] == node.id:
            fetched[current[1]] = (self.now, current[2])
        found = inv.log_start_below_live_replicas(
            inv.LogStartMove(
                node.id,
                v.epoch,
                new_start,
                self.now,
                since,
                timing.start_offset_lag_time_max_ms,
                timing.fetch_timeout_ms,
                fetched,
            )
        )
        if found is not None:
            self._violation(found.name, found.detail)


def _is_voter(voters: tuple[ReplicaKey, ...], key: ReplicaKey) -> bool:
    """Kafka's VoterSet.isVoter: a voter with that id, and that directory id unless the voter
    is known with none (a static voter)."""
    return any(
        v.id == key.id and v.directory_id in (NO_DIRECTORY, key.directory_id) for v in voters
    )


def _epoch_before(log: MemoryLog, offset: Offset) -> Epoch | None:
    """The epoch of the record at `offset - 1` in `log` (None if it holds no such record)."""
    if not log.start_offset < offset <= log.end_offset:
        return None
    found: Epoch | None = None
    for epoch, start in log.epoch_entries():
        if start > offset - 1:
            break
        found = epoch
    return found
