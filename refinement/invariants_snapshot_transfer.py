"""Checkers of KIP-630's FetchSnapshot transfer on the replica that fetches, stated from what the
simulator sees after each step (the event, the effects in order, the replica's view, and the
`.part` buffers its driver holds), never from the core's bookkeeping. Kafka's follower
(KafkaRaftClient with FollowerState) is the reference:

- FetchSnapshotAsksItsPosition: a FetchSnapshot request goes to the replica's leader, as its
  Follower in its epoch, and asks for the bytes right after those it holds of that snapshot
  (position 0 when it holds none: a transfer starts, or starts again, from the beginning).
  The snapshot is one the replica may install: one a leader of its epoch can hold (epoch
  between 0 and its own, ending past offset 0, so never the bootstrap checkpoint, which is not
  replicated), ending at or past its log start and its high watermark (installing it must not
  move either back). Kafka's handleFetchResponse refuses a snapshot id with a negative epoch
  or end offset; this project also refuses one that would take the log or the HWM back.
- ChunkWrittenFromItsLeader: a chunk is written (WriteSnapshotChunk) only in the step that
  received it, a FetchSnapshot answer without error from the replica's leader in its current
  epoch (Kafka's maybeHandleCommonResponse puts aside an answer of an older epoch), for that
  snapshot at that position, with the very bytes it carried, appended where the `.part` ends
  (when the `.part` is still there after the step).
- PartialSnapshotDiscarded: a replica holds a `.part` only while it fetches it: at most one,
  of the snapshot whose first chunk it wrote last, as a Follower of the leader and in the
  epoch it wrote that chunk under, with no change of state since; and no regular Fetch (a long
  poll to its leader) goes out while it holds one, as Fetch resumes only once the transfer is
  over. Kafka closes the snapshot writer when the follower state ends (FollowerState.close),
  and an unfrozen writer deletes its `.part` on close; an answer saying the snapshot is gone
  (SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE) drops the transfer likewise. An abandoned
  transfer leaves nothing behind, and the next one starts from position 0.
- ChunkAnswerTakenExactly: an answer from the leader of the replica's epoch, to the transfer it
  asked for (FetchSnapshot sent in its current state, no validation pending), is taken exactly
  as this project's follower rule says (kraft.core.snapshot_transfer, step 3): SNAPSHOT_NOT_FOUND
  or POSITION_OUT_OF_RANGE abandons the transfer (DiscardSnapshotFetch; Kafka's
  handleFetchSnapshotResponse drops it likewise); a chunk of another snapshot or position changes
  nothing; a chunk at the position held is written whole when it can belong to the snapshot (some
  bytes, a positive size it does not end past, the size the transfer's first chunk gave), with
  ValidateSnapshot in the same step when it is the last, and otherwise abandons the transfer
  with nothing written. The checker keeps its own count of the bytes written and the size. (An
  answer with a negative size or position is malformed: dropped before any rule.)
- SnapshotInstalledAtItsEnd: once a replica installs a fetched snapshot, its log starts and
  ends at the snapshot's end offset, its last epoch is the snapshot's (Kafka's lastFetchedEpoch
  after truncateToLatestSnapshot), its high watermark is that offset, and a Fetch sent in the
  same step asks from there with that epoch (KIP-630: Fetch resumes after the snapshot).
- NothingAskedWhileValidating: between ValidateSnapshot and the driver's SnapshotValidated
  for it (or a change of state), the replica asks its leader nothing (no Fetch, no
  FetchSnapshot) and its fetch timer does not run out (no ElectionTimeout): the silence is its
  own (kraft.core.snapshot_transfer, step 4). A resigning leader's EndQuorumEpoch, or a broken
  connection to the leader, lets the timer run out early again, as for any follower.

`TransferMonitor.step` is told of every step of a replica that keeps snapshots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kraft.core.effects import (
    ActionTaken,
    DiscardSnapshotFetch,
    Effect,
    InstallSnapshot,
    Send,
    StateChanged,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import Event, Receive, SendFailed, SnapshotValidated
from kraft.core.messages import (
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from refinement.invariants import Violation

FETCH_SNAPSHOT_ASKS_ITS_POSITION = "FetchSnapshotAsksItsPosition"
CHUNK_WRITTEN_FROM_ITS_LEADER = "ChunkWrittenFromItsLeader"
PARTIAL_SNAPSHOT_DISCARDED = "PartialSnapshotDiscarded"
NOTHING_ASKED_WHILE_VALIDATING = "NothingAskedWhileValidating"
SNAPSHOT_INSTALLED_AT_ITS_END = "SnapshotInstalledAtItsEnd"
CHUNK_ANSWER_TAKEN_EXACTLY = "ChunkAnswerTakenExactly"

SNAPSHOT_TRANSFER_CHECKERS: tuple[str, ...] = (
    FETCH_SNAPSHOT_ASKS_ITS_POSITION,
    CHUNK_WRITTEN_FROM_ITS_LEADER,
    PARTIAL_SNAPSHOT_DISCARDED,
    NOTHING_ASKED_WHILE_VALIDATING,
    SNAPSHOT_INSTALLED_AT_ITS_END,
    CHUNK_ANSWER_TAKEN_EXACTLY,
)

F = ReplicaState.FOLLOWER


@dataclass(frozen=True, slots=True)
class Seen:
    """What a step left of the replica, as its view shows it."""

    state: ReplicaState
    epoch: Epoch
    leader_id: NodeId | None
    high_watermark: Offset | None
    log_start_offset: Offset
    end_offset: Offset
    last_epoch: Epoch


@dataclass(frozen=True, slots=True)
class PartBegun:
    """A `.part` whose first chunk was written: of which snapshot, under which leader and epoch."""

    snapshot_id: OffsetAndEpoch
    epoch: Epoch
    leader: NodeId | None


@dataclass(slots=True)
class _Ghost:
    incarnation: int
    part: PartBegun | None = None
    # The snapshot handed to the driver to validate, until its answer or a change of state.
    validating: OffsetAndEpoch | None = None
    # The view after the replica's last step.
    seen: Seen | None = None
    # The transfer asked for in the current state (FetchSnapshot sent), until it is over: its
    # snapshot, the bytes written of it, and the size its first written chunk gave.
    asked: OffsetAndEpoch | None = None
    held: int = 0
    size: int | None = None

    def transfer_over(self) -> None:
        self.asked, self.held, self.size = None, 0, None


class TransferMonitor:
    """The transfer checkers over one simulation, per replica incarnation."""

    __slots__ = ("_ghosts",)

    def __init__(self) -> None:
        self._ghosts: dict[NodeId, _Ghost] = {}

    def _ghost(self, node: NodeId, incarnation: int) -> _Ghost:
        g = self._ghosts.get(node)
        if g is None or g.incarnation != incarnation:
            g = self._ghosts[node] = _Ghost(incarnation)
        return g

    def step(
        self,
        node: NodeId,
        incarnation: int,
        event: Event | None,
        effects: Sequence[Effect],
        *,
        view: Seen,
        parts: Mapping[OffsetAndEpoch, bytes | bytearray],
    ) -> Violation | None:
        """One step of `node` (`event` None: its start): `effects` as emitted, `view` after
        the step, `parts` the `.part` buffers its driver holds once the effects are performed."""
        g = self._ghost(node, incarnation)
        if type(event) is Receive:
            assert isinstance(event, Receive)
            if type(event.message) is FetchSnapshotResponse:
                found = self._chunk_answer(node, g, event, effects)
                if found is not None:
                    return found
        if type(event) is SnapshotValidated:
            assert isinstance(event, SnapshotValidated)
            if g.validating == event.snapshot_id:
                g.validating = None
        elif _leader_gone(event):
            # The leader resigned (naming successors that stand at once, KIP-595) or its
            # connection broke: the timer may run out early again, as for any follower.
            g.validating = None
        regular_fetch = False
        installed: OffsetAndEpoch | None = None
        fetched: FetchRequest | None = None
        for e in effects:
            t = type(e)
            if t is StateChanged:
                g.part = None
                g.validating = None
                g.transfer_over()
            elif t is WriteSnapshotChunk:
                assert isinstance(e, WriteSnapshotChunk)
                g.held = e.position + len(e.data)
                g.size = e.size
                if e.position == 0:
                    g.part = PartBegun(e.snapshot_id, view.epoch, view.leader_id)
                found = chunk_written_from_its_leader(node, event, e, view, parts)
                if found is not None:
                    return found
            elif t is DiscardSnapshotFetch or t is InstallSnapshot:
                g.part = None
                g.validating = None
                g.transfer_over()
                if t is InstallSnapshot:
                    assert isinstance(e, InstallSnapshot)
                    installed = e.snapshot_id
            elif t is ValidateSnapshot:
                assert isinstance(e, ValidateSnapshot)
                g.validating = e.snapshot_id
            elif t is Send:
                assert isinstance(e, Send)
                msg = e.message
                mt = type(msg)
                if mt is FetchSnapshotRequest:
                    assert isinstance(msg, FetchSnapshotRequest)
                    found = fetch_snapshot_asks_its_position(node, e.dst, msg, view, parts)
                    if found is not None:
                        return found
                    if g.asked != msg.snapshot_id:
                        g.transfer_over()
                        g.asked = msg.snapshot_id
                elif mt is FetchRequest:
                    assert isinstance(msg, FetchRequest)
                    fetched = msg
                    regular_fetch = regular_fetch or (
                        msg.max_wait_ms > 0 and view.state is F and e.dst == view.leader_id
                    )
                if g.validating is not None and (mt is FetchRequest or mt is FetchSnapshotRequest):
                    return Violation(
                        NOTHING_ASKED_WHILE_VALIDATING,
                        f"node {node} sent a {mt.__name__} to {e.dst} while its driver was"
                        f" validating snapshot {g.validating}",
                    )
            elif t is ActionTaken:
                assert isinstance(e, ActionTaken)
                if e.action is Action.ELECTION_TIMEOUT and g.validating is not None:
                    return Violation(
                        NOTHING_ASKED_WHILE_VALIDATING,
                        f"node {node}'s timer ran out (ElectionTimeout) while its driver was"
                        f" validating snapshot {g.validating}: its fetch timer is suspended"
                        " until the answer",
                    )
        g.seen = view
        if installed is not None:
            found = snapshot_installed_at_its_end(node, installed, view, fetched)
            if found is not None:
                return found
        return partial_snapshot_discarded(node, g.part, view, parts, regular_fetch=regular_fetch)

    @staticmethod
    def _chunk_answer(
        node: NodeId, g: _Ghost, event: Receive, effects: Sequence[Effect]
    ) -> Violation | None:
        """ChunkAnswerTakenExactly for a step that received a FetchSnapshot answer, from the
        ghost as the step found it."""
        resp = event.message
        assert isinstance(resp, FetchSnapshotResponse)
        pre = g.seen
        if (
            pre is None
            or g.asked is None
            or g.validating is not None
            or pre.state is not F
            or event.src != pre.leader_id
            or resp.leader_id != pre.leader_id
            or resp.leader_epoch != pre.epoch
            or any(type(e) is StateChanged for e in effects)
        ):
            return None
        return chunk_answer_taken_exactly(
            node, resp, effects, asked=g.asked, held=g.held, size=g.size
        )


def _leader_gone(event: Event | None) -> bool:
    """The step hears that its leader resigned (EndQuorumEpoch) or that the connection to a
    peer broke."""
    if isinstance(event, Receive):
        return type(event.message) is EndQuorumEpochRequest
    return isinstance(event, SendFailed) and event.broken


def fetch_snapshot_asks_its_position(
    node: NodeId,
    dst: NodeId,
    req: FetchSnapshotRequest,
    view: Seen,
    parts: Mapping[OffsetAndEpoch, bytes | bytearray],
) -> Violation | None:
    """FetchSnapshotAsksItsPosition for one request `node` sent to `dst` (`view`, `parts`:
    after the step that sent it)."""
    sid = req.snapshot_id
    if view.state is not F or dst != view.leader_id or req.replica_epoch != view.epoch:
        return Violation(
            FETCH_SNAPSHOT_ASKS_ITS_POSITION,
            f"node {node} ({view.state.value}, epoch {view.epoch}, leader {view.leader_id})"
            f" asked {dst} for snapshot {sid} in epoch {req.replica_epoch}: a transfer is"
            " fetched from the leader, as its Follower, in its epoch",
        )
    hwm = view.high_watermark
    if (
        sid.epoch < 0
        or sid.epoch > view.epoch
        or sid.offset <= 0
        or sid.offset < view.log_start_offset
        or (hwm is not None and sid.offset < hwm)
    ):
        return Violation(
            FETCH_SNAPSHOT_ASKS_ITS_POSITION,
            f"node {node} (epoch {view.epoch}, log start {view.log_start_offset}, HWM {hwm})"
            f" asked for snapshot {sid}, which it may not install: no leader of its epoch"
            " holds it (or it is the bootstrap checkpoint), or it would take its log start or"
            " HWM back",
        )
    part = parts.get(sid)
    held = 0 if part is None else len(part)
    if req.position != held:
        return Violation(
            FETCH_SNAPSHOT_ASKS_ITS_POSITION,
            f"node {node} asked for snapshot {sid} from position {req.position}, but holds"
            f" {held} bytes of it",
        )
    return None


def chunk_written_from_its_leader(
    node: NodeId,
    event: Event | None,
    e: WriteSnapshotChunk,
    view: Seen,
    parts: Mapping[OffsetAndEpoch, bytes | bytearray],
) -> Violation | None:
    """ChunkWrittenFromItsLeader for one WriteSnapshotChunk of the step of `event`."""
    resp: FetchSnapshotResponse | None = None
    src: NodeId | None = None
    if type(event) is Receive:
        assert isinstance(event, Receive)
        msg = event.message
        if type(msg) is FetchSnapshotResponse:
            assert isinstance(msg, FetchSnapshotResponse)
            resp = msg
            src = event.src
    if resp is None:
        return Violation(
            CHUNK_WRITTEN_FROM_ITS_LEADER,
            f"node {node} wrote a chunk of snapshot {e.snapshot_id} at {e.position} in a step"
            f" that received no FetchSnapshot answer ({type(event).__name__})",
        )
    if (
        view.state is not F
        or src != view.leader_id
        or resp.leader_epoch != view.epoch
        or resp.error is not ErrorCode.NONE
    ):
        return Violation(
            CHUNK_WRITTEN_FROM_ITS_LEADER,
            f"node {node} ({view.state.value}, epoch {view.epoch}, leader {view.leader_id})"
            f" wrote a chunk of snapshot {e.snapshot_id} from the answer of {src} naming epoch"
            f" {resp.leader_epoch} ({resp.error.name}): only its leader's answers of its epoch"
            " count",
        )
    data = bytes(e.data)
    part = parts.get(e.snapshot_id)
    if (
        resp.snapshot_id != e.snapshot_id
        or resp.position != e.position
        or bytes(resp.chunk) != data
        or (part is not None and len(part) != e.position + len(data))
    ):
        return Violation(
            CHUNK_WRITTEN_FROM_ITS_LEADER,
            f"node {node} wrote {len(data)} bytes of snapshot {e.snapshot_id} at {e.position}"
            f" from an answer carrying {len(resp.chunk)} bytes of {resp.snapshot_id} at"
            f" {resp.position} (its .part now {None if part is None else len(part)} bytes)",
        )
    return None


def chunk_answer_taken_exactly(
    node: NodeId,
    resp: FetchSnapshotResponse,
    effects: Sequence[Effect],
    *,
    asked: OffsetAndEpoch,
    held: int,
    size: int | None,
) -> Violation | None:
    """ChunkAnswerTakenExactly for the leader's answer `resp` to the transfer of `asked`, of
    which `held` bytes are written and whose first chunk gave `size` (None before it)."""
    writes = [e for e in effects if type(e) is WriteSnapshotChunk]
    discarded = any(type(e) is DiscardSnapshotFetch for e in effects)
    validated = [e for e in effects if type(e) is ValidateSnapshot]
    what = (
        f"node {node}'s transfer of {asked} ({held} bytes held, size {size}) got {resp.error.name}"
        f" for {resp.snapshot_id} at {resp.position}, {len(resp.chunk)} bytes of {resp.size}"
    )
    # The chunks to write (snapshot, position, size, bytes); None: the transfer is abandoned.
    want: tuple[tuple[OffsetAndEpoch, int, int, bytes], ...] | None
    if resp.error in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
        want = None
    elif resp.error is not ErrorCode.NONE or resp.size < 0 or resp.position < 0:
        # An error backs off and asks again (the timing checkers' business); a negative size
        # or position is malformed, dropped before any rule (the input checkers' business).
        return None
    elif resp.snapshot_id != asked or resp.position != held:
        want = ()  # a duplicate or stale chunk: nothing changes
    else:
        end = resp.position + len(resp.chunk)
        fits = (
            len(resp.chunk) > 0
            and resp.size > 0
            and end <= resp.size
            and (size is None or resp.size == size)
        )
        want = ((asked, held, resp.size, bytes(resp.chunk)),) if fits else None
    if want is None:
        if writes or not discarded:
            return Violation(
                CHUNK_ANSWER_TAKEN_EXACTLY,
                f"{what}: the transfer must be abandoned (DiscardSnapshotFetch) with nothing"
                f" written; {len(writes)} write(s), discarded: {discarded}",
            )
        return None
    got = tuple((w.snapshot_id, w.position, w.size, bytes(w.data)) for w in writes)
    last = bool(want) and resp.position + len(resp.chunk) == resp.size
    if got != want or discarded or bool(validated) != last:
        return Violation(
            CHUNK_ANSWER_TAKEN_EXACTLY,
            f"{what}: expected {len(want)} chunk(s) written"
            f"{' and the snapshot validated' if last else ''}, the transfer kept; got"
            f" {[(w[0], w[1], w[2], len(w[3])) for w in got]}, discarded: {discarded},"
            f" validated: {bool(validated)}",
        )
    return None


def snapshot_installed_at_its_end(
    node: NodeId, sid: OffsetAndEpoch, view: Seen, fetched: FetchRequest | None
) -> Violation | None:
    """SnapshotInstalledAtItsEnd after the step that installed `sid` (`fetched`: the Fetch
    that step sent, if any)."""
    end = sid.offset
    if (
        view.log_start_offset != end
        or view.end_offset != end
        or view.last_epoch != sid.epoch
        or view.high_watermark != end
    ):
        return Violation(
            SNAPSHOT_INSTALLED_AT_ITS_END,
            f"node {node} installed snapshot {sid} but its log spans"
            f" {view.log_start_offset}..{view.end_offset} (last epoch {view.last_epoch}) and its"
            f" HWM is {view.high_watermark}: all must be the snapshot's end (and epoch)",
        )
    if fetched is not None and (
        fetched.fetch_offset != end or fetched.last_fetched_epoch != sid.epoch
    ):
        return Violation(
            SNAPSHOT_INSTALLED_AT_ITS_END,
            f"node {node} installed snapshot {sid} and fetched from {fetched.fetch_offset}"
            f" (last epoch {fetched.last_fetched_epoch}), not from the snapshot's end",
        )
    return None


def partial_snapshot_discarded(
    node: NodeId,
    begun: PartBegun | None,
    view: Seen,
    parts: Mapping[OffsetAndEpoch, bytes | bytearray],
    *,
    regular_fetch: bool,
) -> Violation | None:
    """PartialSnapshotDiscarded after a step: `begun` is the transfer whose first chunk the
    replica wrote last, if no change of state, discard or install came since."""
    if not parts:
        return None
    held = sorted(parts, key=lambda s: (s.offset, s.epoch))
    if (
        len(held) > 1
        or begun is None
        or held[0] != begun.snapshot_id
        or view.state is not F
        or (view.epoch, view.leader_id) != (begun.epoch, begun.leader)
    ):
        return Violation(
            PARTIAL_SNAPSHOT_DISCARDED,
            f"node {node} ({view.state.value}, epoch {view.epoch}, leader {view.leader_id})"
            f" holds the partial snapshot(s) {held} of a transfer that is over (the one it"
            f" fetches: {begun}); an abandoned transfer must leave nothing behind",
        )
    if regular_fetch:
        return Violation(
            PARTIAL_SNAPSHOT_DISCARDED,
            f"node {node} resumed Fetch from its leader {view.leader_id} while holding the"
            f" partial snapshot {held[0]}: Fetch resumes only once the transfer is over",
        )
    return None


# --------------------------------------------------------------------------- request fields

FETCH_SNAPSHOT_REQUEST_FIELDS = "FetchSnapshotRequestFields"

# Kafka 4.3.1's QuorumConfig.DEFAULT_QUORUM_FETCH_SNAPSHOT_MAX_BYTES
# (controller.quorum.fetch.snapshot.max.bytes), which KafkaRaftClient.buildFetchSnapshotRequest
# sends as max_bytes. Stated here, not taken from the core.
KAFKA_FETCH_SNAPSHOT_MAX_BYTES = 1048576


def fetch_snapshot_request_fields(
    node: NodeId,
    msg: FetchSnapshotRequest,
    *,
    cluster_id: str,
    key: ReplicaKey,
    epoch: Epoch,
    max_bytes: int,
) -> Violation | None:
    """FetchSnapshotRequestFields: every FetchSnapshot request a replica sends carries its
    cluster's id, its own key (id and directory id, as Kafka's ReplicaKey.of(localId,
    localDirectoryId)), its current epoch, a position not below 0, and exactly the configured
    max_bytes (Kafka's fetchSnapshotMaxBytes; `max_bytes`: KAFKA_FETCH_SNAPSHOT_MAX_BYTES
    unless the run sets its own limit)."""
    wrong: list[str] = []
    if msg.cluster_id != cluster_id:
        wrong.append(f"cluster id {msg.cluster_id!r}, not {cluster_id!r}")
    if msg.replica != key:
        wrong.append(f"replica {msg.replica}, not its key {key}")
    if msg.replica_epoch != epoch:
        wrong.append(f"epoch {msg.replica_epoch}, not its epoch {epoch}")
    if msg.position < 0:
        wrong.append(f"position {msg.position}")
    if msg.max_bytes != max_bytes:
        wrong.append(f"max_bytes {msg.max_bytes}, not {max_bytes}")
    if not wrong:
        return None
    return Violation(
        FETCH_SNAPSHOT_REQUEST_FIELDS,
        f"node {node} sent a FetchSnapshotRequest with " + "; ".join(wrong),
    )
