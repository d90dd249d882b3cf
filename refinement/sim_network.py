"""The simulator's network and stepping layer (see refinement.sim_base for the layers): messages
delivered, lost, duplicated or refused, replicas stepped on each event, their effects applied
to the in-memory logs, and the focused invariant checks after every step.
"""

from __future__ import annotations

import dataclasses
import random
from bisect import bisect_left
from typing import IO, TYPE_CHECKING, cast

from kraft.core.bounds import out_of_bounds
from kraft.core.effects import (
    ActionTaken,
    AdvanceLogStartOffset,
    AppendCommitted,
    AppendLost,
    AppendResult,
    AppendToLog,
    CheckVoterVersions,
    Effect,
    FlushLog,
    HighWatermarkMoved,
    MessageRefused,
    PersistElectionState,
    Send,
    ShutdownComplete,
    StateChanged,
    TruncateLog,
)
from kraft.core.events import ClientAppend, Event, Receive, SendFailed, Tick
from kraft.core.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    Request,
    VoteRequest,
    VoteResponse,
)
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.records import KeyValue, decode_records, iter_batches
from kraft.trace_format import JsonObject, message_json
from refinement import invariants as inv
from refinement import invariants_answers as answers
from refinement import invariants_effects as eff
from refinement import invariants_general as gen
from refinement import invariants_leader as ldr
from refinement import invariants_only_voter as only
from refinement import invariants_reconfig as recon
from refinement import invariants_snapshot_transfer as st_fields
from refinement import invariants_timing as timing_inv
from refinement import invariants_voter_changes as vc
from refinement.invariants import AckedRange, ClusterState, EpochCache, NodeState, Violation
from refinement.invariants_describe import describe_quorum_matches
from refinement.invariants_roles import log_written_by_its_role, past_epoch_answer_ignored
from refinement.sim_base import (
    _DELIVER,
    _REQUEST_MESSAGES,
    _REQUEST_OF,
    _REQUEST_TYPES,
    _RESPONSE_TYPES,
    _SEND_FAILED,
    _TICK,
    ADMIN,
    SimBase,
    _Node,
)

if TYPE_CHECKING:
    from refinement.sim_config import (
        ReplicaFactory,
        ReplicaViewLike,
        SimConfig,
        SimReplica,
        SimResult,
    )

# Reply tokens of delivered requests (refinement.invariants_effects), apart from the
# operator's (refinement.sim_reconfig numbers its voter changes from 1).
_FIRST_TOKEN = 1 << 40
# The answers FaultProfile.hold_past_election may hold until their requester has moved on.
_HELD_PAST_ELECTION: tuple[type, ...] = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
)


class SimNetwork(SimBase):
    """Messages on the wire, replicas stepped, their effects applied, and the invariants
    checked after every step, focused on what the step changed."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        super().__init__(config, result, replica_factory, trace)
        self._leaders: dict[Epoch, frozenset[NodeId]] = {}
        self._acked: list[AckedRange] = []
        self._acked_t: tuple[AckedRange, ...] = ()
        self._cluster_cache: ClusterState | None = None
        # Last offsets of _acked, ascending (the committed log is one line of offsets).
        self._acked_lasts: list[int] = []
        # The outcomes the current step's replica emitted, handled after its checks.
        self._decided: list[AppendCommitted | AppendLost] = []
        # Network state.
        self._blocked: dict[tuple[NodeId, NodeId], int] = {}
        self._partitions: dict[int, list[tuple[NodeId, NodeId]]] = {}
        self._last_request: dict[tuple[NodeId, NodeId, type], Request] = {}
        # The Fetch each (fetcher, leader) pair awaits an answer to: like Kafka's request
        # manager (one request in flight per destination, answers to any other ignored), only
        # the first answer to the latest Fetch is what a replica "receives" for the
        # FetchedHighWatermarkMonotonic checker; late, reordered or duplicated answers are not.
        self._fetch_awaited: dict[tuple[NodeId, NodeId], FetchRequest] = {}
        # Some node held a snapshot once: SnapshotMatchesLog runs from then on.
        self._any_snapshots = False
        self._loss = self._profile.loss
        self._duplicate = self._profile.duplicate
        self._corrupt = self._profile.corrupt
        self._mangle = self._profile.mangle_chunk
        # With an adversary, sizes that cannot be the snapshot's too (none, or not the first's).
        self._mangle_sizes = self._profile.adversary_rate > 0
        self._mangle_rng = random.Random(f"{config.seed}/mangle")
        self._cut = self._profile.cut_fetch
        self._cut_rng = random.Random(f"{config.seed}/cut")
        # KIP-630 ghosts, kept only under a profile that takes snapshots. The longest history
        # any leader exposed as committed (SnapshotMatchesLog); per leader, the last Fetch it
        # accepted from each replica: (its incarnation, epoch, time, fetch offset)
        # (LogStartBelowLiveReplicas); the Fetch being handled in this step (leader, fetcher,
        # offset), and whether its answer refused it (an error, a divergence, a snapshot id).
        snapshots = self._profile.snapshots
        # KIP-853: a dynamic quorum (voter changes) tracks the committed history too
        # (AtMostOneUncommittedVoterChange, LeaderCompleteness).
        self._dynamic = self._profile.dynamic
        # The operator's answers (a dynamic quorum's, or one-shots' on a static one too).
        self._admin_hears = self._dynamic or self._profile.update_voter_rate > 0
        tracked = snapshots or self._dynamic
        self._committed: tuple[EpochCache, Offset] | None = ((), Offset(0)) if tracked else None
        # Each replica identity whose disk was lost, as it was then (a dynamic quorum).
        self._lost: dict[ReplicaKey, NodeState] = {}
        # The highest epoch whose leader extended the committed history (LeaderCompleteness).
        self._committed_epoch = Epoch(0)
        self._fetched: dict[NodeId, dict[NodeId, tuple[int, Epoch, int, Offset]]] = {}
        self._fetch_in_step: tuple[NodeId, NodeId, Offset] | None = None
        self._fetch_refused = False
        # Whether the connection broke under the SendFailed being stepped (_send_failed).
        self._failure_broken = False
        # The FetchSnapshot each (fetcher, leader) pair awaits an answer to (chunks_stale).
        self._chunk_awaited: dict[tuple[NodeId, NodeId], Request] = {}
        # OneVotePerEpoch's ghost: whom each replica granted its vote in each epoch.
        self._votes_cast: inv.VotesCast = {}
        # The timing checkers (refinement.invariants_timing), made at the first start, and
        # the records of each client append a replica was given and has not answered.
        self._timing_monitor: timing_inv.TimingMonitor | None = None
        self._timing_defaults_checked = False
        self._append_records: dict[int, tuple[KeyValue, ...]] = {}
        # Delayed answers (FaultProfile.hold_answer): when each (requester, destination,
        # kind) pair's latest request left, to hold its answer until about its timeout.
        self._hold = self._profile.hold_answer
        self._request_sent: dict[tuple[NodeId, NodeId, type], tuple[Request, int]] = {}
        # Answers held past the requester's election timeout (FaultProfile.hold_past_election):
        # per requester, each held answer with the (state, epoch) the requester had when it
        # was sent and the latest time to release it; drawn from a generator of their own.
        self._hold_past = self._profile.hold_past_election
        self._hold_past_rng = random.Random(f"{config.seed}/hold-past-election")
        self._held_past: dict[
            NodeId, list[tuple[tuple[ReplicaState | None, Epoch], int, tuple[object, ...]]]
        ] = {}
        # The effect contract (refinement.invariants_effects): the reply token each delivered
        # request carries, and what each running incarnation was given and has not answered.
        self._ledger = eff.EffectLedger(linger=config.timing.append_linger_ms > 0)
        # LeaderElectedByVotes' ghost: the real votes delivered to each replica, by epoch.
        self._real_votes: dict[NodeId, dict[Epoch, set[NodeId]]] = {}
        # CandidateByPreVotes' ghost: the pre-votes delivered to each replica, by epoch.
        self._pre_votes: dict[NodeId, dict[Epoch, set[NodeId]]] = {}
        self._next_token = _FIRST_TOKEN
        # Whether the step being applied truncated the node's log (_log_truncated after it).
        self._truncated = False

    # ------------------------------------------------------------------ events

    def _deliver(self, dst: _Node, payload: tuple[object, ...]) -> None:
        src_id, msg, in_reply_to, dst_inc = payload
        assert isinstance(src_id, int)
        replica = dst.replica
        if replica is None or dst.inc != dst_inc:
            self._drop(src_id, dst.id, msg, "down")
            if replica is None and type(msg) in _REQUEST_TYPES:
                # Connection refused: the sender learns it after a round trip.
                src = self._nodes[NodeId(src_id)]
                failed = (dst.id, msg, src.inc, True)
                self._push(self.now + self._delay(), _SEND_FAILED, src, failed)
            return
        if self._blocked and (src_id, dst.id) in self._blocked:
            self._drop(src_id, dst.id, msg, "partition")
            if self._profile.refuse_cut and type(msg) in _REQUEST_TYPES:
                src = self._nodes[NodeId(src_id)]
                failed = (dst.id, msg, src.inc, False)  # not refused: no connection
                self._push(self.now + self._delay(), _SEND_FAILED, src, failed)
            return
        mtype = type(msg)
        if mtype is VoteResponse and self._check:
            assert isinstance(msg, VoteResponse)
            for pre_vote, ghost in ((False, self._real_votes), (True, self._pre_votes)):
                epoch = gen.granted_epoch(msg, cast(Request | None, in_reply_to), pre_vote=pre_vote)
                if epoch is not None:
                    ghost.setdefault(dst.id, {}).setdefault(epoch, set()).add(NodeId(src_id))
        if mtype is EndQuorumEpochResponse and self._check:
            self._ledger.end_settled(dst.id, NodeId(src_id))
        if mtype in _REQUEST_TYPES:
            assert isinstance(msg, _REQUEST_MESSAGES)
            self._last_request[(dst.id, NodeId(src_id), mtype)] = msg
            answering: Request | None = msg
        else:
            answering = None
        message = cast(Message, msg)
        if (
            mtype is FetchResponse
            and self._check
            and in_reply_to is not None
            and self._fetch_awaited.get((dst.id, NodeId(src_id))) is in_reply_to
        ):
            assert isinstance(msg, FetchResponse)
            del self._fetch_awaited[(dst.id, NodeId(src_id))]
            found = inv.fetched_high_watermark_monotonic(
                dst.snap,
                inv.FetchedHighWatermark(
                    NodeId(src_id),
                    dst.id,
                    msg.leader_id,
                    msg.leader_epoch,
                    msg.high_watermark,
                    msg.error is ErrorCode.NONE,
                ),
            )
            if found is not None:
                self._violation(found.name, found.detail)
        token = None
        if answering is not None and self._check:
            token = self._request_token(dst, NodeId(src_id), answering)
        event = Receive(self.now, NodeId(src_id), message, cast(Request | None, in_reply_to), token)
        if mtype is FetchSnapshotResponse:
            key = (dst.id, NodeId(src_id))
            if in_reply_to is not None and self._chunk_awaited.get(key) is in_reply_to:
                del self._chunk_awaited[key]
            else:
                self.result.chunks_stale += 1
        if mtype is FetchRequest and (self._profile.snapshots or self._check):
            assert isinstance(msg, FetchRequest)
            self._step_fetch(dst, event, msg, NodeId(src_id))
            return
        if mtype is FetchResponse and self._profile.snapshots and self._check:
            assert isinstance(msg, FetchResponse)
            before = self._fetch_awaited.get((dst.id, NodeId(src_id)))
            inc = dst.inc
            self._step(dst, event, answering, src_id, message)
            self._log_start_followed(dst, NodeId(src_id), msg, before, inc)
            return
        self._step(dst, event, answering, src_id, message)

    def _request_token(self, dst: _Node, src: NodeId, request: Request) -> int:
        """A fresh reply token for a request delivered to `dst`, entered in the ledger."""
        token = self._next_token
        self._next_token += 1
        self._ledger.request_received(dst.id, token, src, request)
        return token

    def _step_fetch(self, dst: _Node, event: Receive, req: FetchRequest, src: NodeId) -> None:
        """A Fetch stepped, remembered as accepted by a leader if its answer did not refuse it
        (LogStartBelowLiveReplicas: the leader counts the fetch offsets of live replicas)."""
        self._fetch_in_step = (dst.id, src, req.fetch_offset)
        self._fetch_refused = False
        try:
            self._step(dst, event, req, int(src), req)
        finally:
            self._fetch_in_step = None
        replica = dst.replica
        if replica is None or self._fetch_refused:
            return
        v = replica.view()
        if v.state is ReplicaState.LEADER and v.epoch == req.replica_epoch:
            self._fetched.setdefault(dst.id, {})[src] = (
                dst.inc,
                v.epoch,
                self.now,
                req.fetch_offset,
            )

    def _tick(self, node: _Node, inc: object) -> None:
        replica = node.replica
        if replica is None or node.inc != inc or node.tick_at != self.now:
            return
        node.tick_at = -1
        deadline = replica.next_deadline_ms()
        if deadline > self.now:
            self._schedule_tick(node, deadline)
            return
        self._step(node, Tick(self.now), None, None, None, is_tick=True)

    def _send_failed(self, src: _Node, payload: tuple[object, ...]) -> None:
        dst_id, request, inc, refused = payload
        if src.replica is None or src.inc != inc:
            return
        assert isinstance(dst_id, int) and isinstance(request, _REQUEST_MESSAGES)
        # Refused (the node is down) breaks the connection; a cut link only fails the request.
        broken = self._profile.notice_breaks and refused is True
        if self._check and type(request) is EndQuorumEpochRequest:
            self._ledger.end_settled(src.id, NodeId(dst_id))
        # Built as the node's driver builds it (kraft.server.peers, a request timeout or an
        # unreachable address): a plain failure takes the event's default; the timing
        # checkers are told which it was (_step), not what the event says.
        dst = NodeId(dst_id)
        self._failure_broken = broken
        event = (
            SendFailed(self.now, dst, request, broken=True)
            if broken
            else SendFailed(self.now, dst, request)
        )
        self._step(src, event, None, None, None)

    def _timing_started(self, node: _Node, effects: list[Effect]) -> None:
        """A replica started: the timing checkers (refinement.invariants_timing) start
        watching it; at the first start, the configuration itself is checked."""
        if not self._check:
            return
        monitor = self._timing_monitor
        if monitor is None:
            if not self._timing_defaults_checked:
                self._timing_defaults_checked = True
                found = timing_inv.quorum_defaults_as_documented(QuorumTiming())
                if found is not None:
                    self._violation(found.name, found.detail)
            if self._profile.adversary_rate > 0 or self._profile.corrupt_fetch > 0:
                # The timing contract is one of an honest network: a forged message a replica
                # cannot tell from the real one (a Fetch answer in the leader's name) moves its
                # timers as the real one would, unseen by the monitor.
                return
            voters = None if self._dynamic else self._voter_ids
            monitor = self._timing_monitor = timing_inv.TimingMonitor(self._timing_of(), voters)
        found = monitor.started(node.id, self.now, effects)
        if found is not None:
            self._violation(found.name, found.detail)

    def _appends_where_reported(
        self, node: _Node, event: Event, effects: list[Effect]
    ) -> Violation | None:
        """AppendAtReportedOffsets for the appends the step accepted."""
        sent = self._append_records
        if isinstance(event, ClientAppend):
            sent[event.request_id] = event.records
        for e in effects:
            if type(e) is not AppendResult:
                continue
            assert isinstance(e, AppendResult)
            records = sent.pop(e.request_id, None)
            if records is None or e.error is not ErrorCode.NONE or e.first_offset is None:
                continue
            last = e.first_offset if e.last_offset is None else e.last_offset
            held = _records_at(node, e.first_offset, last)
            found = timing_inv.append_at_reported_offsets(node.id, e, records, held)
            if found is not None:
                return found
        return None

    def _timing_stopped(self, node: _Node) -> None:
        """A replica stopped: what it was given dies with it."""
        if self._timing_monitor is not None:
            self._timing_monitor.stopped(node.id)

    def _schedule_tick(self, node: _Node, deadline: int) -> None:
        if node.tick_at < 0 or deadline < node.tick_at:
            node.tick_at = deadline
            self._push(deadline, _TICK, node, node.inc)

    # ------------------------------------------------------------------ stepping a replica

    def _step(
        self,
        node: _Node,
        event: Event,
        answering: Request | None,
        src_id: int | None,
        msg: Message | None,
        *,
        is_tick: bool = False,
    ) -> None:
        replica = node.replica
        assert replica is not None
        monitor = self._timing_monitor
        if monitor is not None:
            late = monitor.overdue(self.now)
            if late is not None:
                self._violation(late.name, late.detail)
        if self._check and type(event) is ClientAppend:
            assert isinstance(event, ClientAppend)
            self._ledger.append_received(node.id, event.request_id)
        before_view = replica.view() if self._check else None
        before = before_view.state if before_view is not None else None
        end_before = node.log.end_offset
        try:
            effects = replica.step(event)
        except Exception as exc:  # the core must not raise on any event
            self._violation(
                "ReplicaRaised",
                f"node {node.id} raised {type(exc).__name__}: {exc} on {type(event).__name__}",
            )
        self._apply(node, effects, answering, src_id, event)
        if self._check:
            running = node.replica
            after = None if running is None else running.view()
            if self._truncation_seen() and running is not None:
                self._log_truncated(node)
            held = self._ledger.after_step(node.id, None if after is None else after.state)
            if held is not None:
                self._violation(held.name, held.detail)
            if running is not None and after is not None:
                self._check_describe(node, running, after)
                if before is not None:
                    wrote = log_written_by_its_role(node.id, before, after.state, effects)
                    if wrote is not None:
                        self._violation(wrote.name, wrote.detail)
                if before_view is not None:
                    self._check_leader_rules(
                        node, event, effects, before=before_view, after=after, end_before=end_before
                    )
                    if type(event) is Receive:
                        self._check_answer_epoch(node, event, effects, before_view, after)
                    self._check_answers_sent(node, effects, before_view, after)
                    self._check_general(node, event, effects, before_view)
                    self._check_log_start(node, event, answering, before_view, after)
                    if type(event) is Receive:
                        self._check_follower_answer(node, event, effects, before_view, after)
        if monitor is not None and node.replica is not None:
            seen = event
            if type(event) is SendFailed and event.broken is not self._failure_broken:
                seen = dataclasses.replace(event, broken=self._failure_broken)
            after_view = replica.view()
            found = monitor.step(
                node.id, self.now, seen, effects, after_view.leader_id, voters=after_view.voters
            )
            if found is None:
                found = self._appends_where_reported(node, event, effects)
            if found is not None:
                self._violation(found.name, found.detail)
        deadline = replica.next_deadline_ms()
        if is_tick and deadline <= self.now:
            deadline = self.now + 1  # a timer that is still due would spin at this instant
        self._schedule_tick(node, deadline)
        self._after_step(node, event, src_id, msg)
        if node.stop_requested:
            if self._check:
                self._after_shutdown(node, replica)
            # A clean stop closes the log, which flushes it.
            node.log.flush()
            node.log_dirty = True
            node.replica = None
            self._node_stopped(node, "Stop")

    def _check_leader_rules(
        self,
        node: _Node,
        event: Event,
        effects: list[Effect],
        *,
        before: ReplicaViewLike,
        after: ReplicaViewLike,
        end_before: Offset,
    ) -> None:
        """The checkers of role changes and of what a new leader does
        (refinement.invariants_leader), after a step of a replica still running."""
        found = ldr.state_change_after_its_action(node.id, effects)
        if found is None:
            voters: tuple[NodeId, ...] = getattr(after, "voters", ())
            found = ldr.become_leader_in_order(
                node.id, effects, end_before=end_before, voters=voters, history=node.voter_hist
            )
        if found is None and type(event) is Tick and before.state is ReplicaState.LEADER:
            voter: bool = getattr(before, "is_voter", True)
            resigned = ActionTaken(Action.RESIGN) in effects
            found = ldr.removed_leader_resigns_at_once(
                node.id,
                node.key,
                leading=True,
                voter=voter,
                high_watermark=before.high_watermark,
                history=node.voter_hist,
                resigned=resigned,
            )
            if (
                found is None
                and resigned
                and not voter
                and node.voter_hist
                and not node.shutting_down
                and not node.stop_requested
            ):
                scope = (node.inc, before.epoch, node.voter_hist[-1])
                found = ldr.removed_leader_resigns_not_early(
                    node.id,
                    node.key,
                    now=self.now,
                    high_watermark=before.high_watermark,
                    history=node.voter_hist,
                    fetched_at=node.fetched_at if node.fetch_scope == scope else {},
                    check_quorum_ms=int(
                        self._timing_of().fetch_timeout_ms * timing_inv.CHECK_QUORUM_FACTOR
                    ),
                )
        elif (
            type(event) is Receive
            and before.state is ReplicaState.LEADER
            and after.state is ReplicaState.LEADER
            and node.voter_hist
        ):
            assert isinstance(event, Receive)
            self._note_counted_fetch(node, event, effects, before.epoch)
        if found is not None:
            self._violation(found.name, found.detail)

    def _check_general(
        self, node: _Node, event: Event, effects: list[Effect], before: ReplicaViewLike
    ) -> None:
        """The general step checkers (refinement.invariants_general)."""
        voters: tuple[NodeId, ...] = getattr(before, "voters", ())
        found = gen.leader_elected_by_votes(
            node.id, effects, voters=voters, granted=self._real_votes.get(node.id, {})
        )
        replica = node.replica
        if (
            found is None
            and getattr(replica, "pre_vote_enabled", True)
            and not (
                type(event) is Receive
                and type(event.message) is VoteResponse
                and event.message.error is ErrorCode.UNSUPPORTED_VERSION
            )
        ):
            found = gen.candidate_by_pre_votes(
                node.id,
                effects,
                epoch=before.epoch,
                voters=voters,
                granted=self._pre_votes.get(node.id, {}),
            )
        if found is None and type(event) is Receive:
            assert isinstance(event, Receive)
            found = gen.action_taken_for_handled_message(
                node.id, event.message, effects, snapshots=node.snaps is not None
            )
        if found is None:
            found = gen.commit_after_high_watermark(
                node.id, effects, high_watermark=before.high_watermark
            )
        if found is not None:
            self._violation(found.name, found.detail)

    def _note_counted_fetch(
        self, node: _Node, event: Receive, effects: list[Effect], epoch: Epoch
    ) -> None:
        """RemovedLeaderResignsNotEarly's ghost: a leader's Fetch from a voter that it
        certainly counted for check-quorum (in its epoch, the voter's exact key, answered in
        the step with no error, divergence or snapshot)."""
        msg = event.message
        if type(msg) is not FetchRequest:
            return
        assert isinstance(msg, FetchRequest)
        latest = node.voter_hist[-1]
        if (
            msg.replica_epoch != epoch
            or msg.replica.id != event.src
            or not latest[1].contains(msg.replica)
        ):
            return
        for e in effects:
            if type(e) is Send and e.dst == event.src and type(e.message) is FetchResponse:
                answer = e.message
                assert isinstance(answer, FetchResponse)
                if (
                    answer.error is ErrorCode.NONE
                    and answer.diverging_epoch is None
                    and answer.snapshot_id is None
                ):
                    scope = (node.inc, epoch, latest)
                    if node.fetch_scope != scope:
                        node.fetch_scope = scope
                        node.fetched_at = {}
                    node.fetched_at[event.src] = self.now
                return

    def _check_answer_epoch(
        self,
        node: _Node,
        event: Event,
        effects: list[Effect],
        before: ReplicaViewLike,
        after: ReplicaViewLike,
    ) -> None:
        """AnswerEpochAdopted (refinement.invariants_answers) and PastEpochAnswerIgnored
        (refinement.invariants_roles) after a step that received an answer."""
        assert isinstance(event, Receive)
        if type(event.message) not in _RESPONSE_TYPES:
            return
        found = answers.answer_epoch_adopted(
            node.id,
            event.message,
            epoch_before=before.epoch,
            epoch_after=after.epoch,
            shutting_down=node.shutting_down,
            refused=any(type(e) is MessageRefused for e in effects),
        )
        if found is None:
            found = past_epoch_answer_ignored(
                node.id, event.src, event.message, before.epoch, effects
            )
        if found is not None:
            self._violation(found.name, found.detail)

    def _check_answers_sent(
        self,
        node: _Node,
        effects: list[Effect],
        before: ReplicaViewLike,
        after: ReplicaViewLike,
    ) -> None:
        """AnswerNamesSendersLeader (refinement.invariants_answers) for the answers a step
        sent."""
        was = (before.epoch, before.leader_id)
        now = (after.epoch, after.leader_id)
        for e in effects:
            if type(e) is Send:
                assert isinstance(e, Send)
                if type(e.message) not in _RESPONSE_TYPES:
                    continue
                found = answers.answer_names_senders_leader(
                    node.id, e.dst, e.message, before=was, after=now
                )
                if found is not None:
                    self._violation(found.name, found.detail)

    def _held_snapshots(self, node: _Node) -> tuple[OffsetAndEpoch, ...]:
        """The snapshots the replica holds, oldest first (refinement.sim_snapshots: the
        ones it was told of)."""
        snaps = node.snaps
        if snaps is None:
            return ()
        return tuple(sorted(snaps.complete, key=lambda s: s.offset))

    def _check_fetch_answer(
        self,
        node: _Node,
        dst: NodeId,
        answer: FetchResponse,
        token: int,
        base: tuple[Offset, tuple[OffsetAndEpoch, ...]] | None,
    ) -> None:
        """FetchAnswerPosition (refinement.invariants_answers) for a Fetch answer about to
        leave, on the node's log as the effects before it left it, with the log start and
        snapshots `base` when the handling of that Fetch moved the log start."""
        log = node.log
        found = answers.fetch_answer_log_start(node.id, dst, answer, log.start_offset)
        if found is not None:
            self._violation(found.name, found.detail)
        request = self._ledger.request_of(node.id, token)
        if type(request) is not FetchRequest:
            return
        assert isinstance(request, FetchRequest)
        epochs = log.epoch_entries()
        start, held = base if base is not None else (log.start_offset, self._held_snapshots(node))
        view = answers.LeaderLog(
            start=start,
            end=log.end_offset,
            snapshots=held,
            last_epoch=epochs[-1][0] if epochs else None,
            end_offset_for=log.end_offset_for_epoch,
        )
        found = answers.fetch_answer_position(node.id, dst, request, answer, view)
        if found is not None:
            self._violation(found.name, found.detail)

    def _truncation_seen(self) -> bool:
        """Whether the step just applied truncated its node's log (and forget it). Read
        through a method: mypyc would keep a value narrowed before _apply set it."""
        seen, self._truncated = self._truncated, False
        return seen

    def _check_log_start(
        self,
        node: _Node,
        event: Event,
        answering: Request | None,
        before: ReplicaViewLike,
        after: ReplicaViewLike,
    ) -> None:
        """LogStartExact after a step, before anything else happens (refinement.sim_snapshots:
        only under a profile that takes snapshots)."""

    def _log_truncated(self, node: _Node) -> None:
        """After a step of `node` that truncated its log (all its effects performed): what
        must follow the log checks it here (refinement.sim_clients: the producer table)."""

    def _check_describe(self, node: _Node, replica: SimReplica, view: ReplicaViewLike) -> None:
        """DescribeQuorumMatches: what a leader would answer DescribeQuorum with, after each
        of its steps (refinement.invariants_describe); replicas that cannot describe are
        skipped. On a static voter set with no forged messages, the voters' last Fetches
        the simulator saw the leader take are checked too; on any, that every replica it took
        a Fetch from in its epoch and that is no voter is among the observers."""
        if view.state is not ReplicaState.LEADER:
            return
        describe = getattr(replica, "describe_quorum", None)
        voters: tuple[NodeId, ...] | None = getattr(view, "voters", None)
        if describe is None or voters is None:
            return
        taken = {
            rid: at
            for rid, (inc, epoch, at, _) in self._fetched.get(node.id, {}).items()
            if inc == node.inc and epoch == view.epoch
        }
        current = self._fetch_in_step
        if current is not None and current[0] == node.id and not self._fetch_refused:
            taken[current[1]] = self.now
        static = not self._dynamic and self._profile.adversary_rate == 0
        found = describe_quorum_matches(
            node.id,
            epoch=view.epoch,
            high_watermark=view.high_watermark,
            end_offset=view.end_offset,
            voters=voters,
            desc=describe(),
            fetched=taken if static else None,
            now=self.now,
            taken=taken,
        )
        if found is not None:
            self._violation(found.name, found.detail)

    def _after_shutdown(self, node: _Node, replica: SimReplica) -> None:
        """ShutdownCompleteOnce: one more event, as a driver may have queued after the one
        that completed the shutdown, brings no second ShutdownComplete. Its other effects are
        not performed: the replica stops here."""
        try:
            effects = replica.step(Tick(self.now))
        except Exception as exc:
            self._violation(
                "ReplicaRaised",
                f"node {node.id} raised {type(exc).__name__}: {exc} on a Tick after"
                " ShutdownComplete",
            )
        for e in effects:
            if type(e) is ShutdownComplete:
                found = self._ledger.shutdown_completed(node.id)
                if found is not None:
                    self._violation(found.name, found.detail + " (the second on a later Tick)")

    def _apply(
        self,
        node: _Node,
        effects: list[Effect],
        answering: Request | None,
        src_id: int | None,
        event: Event | None = None,
    ) -> None:
        """Perform a step's effects; `event` is the event stepped (None: a start)."""
        actions = self._actions
        tracing = self._trace is not None
        log = node.log
        check = self._check
        # The log start and snapshots before the first AdvanceLogStartOffset since the
        # handling of a Fetch began (a leader judges a Fetch before the log start moves on
        # the news it brings): FetchAnswerPosition judges that Fetch's answer on them.
        fetch_base: tuple[Offset, tuple[OffsetAndEpoch, ...]] | None = None
        for e in effects:
            t = type(e)
            if t is Send:
                assert isinstance(e, Send)
                if e.dst == ADMIN and self._admin_hears:
                    self._admin_answer(node, e.message, e.reply_to)
                    continue
                if check and type(e.message) is EndQuorumEpochRequest:
                    self._ledger.end_sent(node.id, e.dst)
                if check and type(e.message) in _RESPONSE_TYPES:
                    if type(e.message) is FetchResponse and e.reply_to is not None:
                        self._check_fetch_answer(node, e.dst, e.message, e.reply_to, fetch_base)
                        fetch_base = None
                    found = self._ledger.response_sent(node.id, e.dst, e.message, e.reply_to)
                    if found is None:
                        found = answers.error_answer_defaults(node.id, e.dst, e.message)
                    if found is not None:
                        self._violation(found.name, found.detail)
                self._send(node, e.dst, e.message, answering, src_id)
            elif t is ActionTaken:
                assert isinstance(e, ActionTaken)
                if tracing:
                    actions.append(e.action.value)
                    if e.voter is not None:
                        self._voter = int(e.voter.id)
                if e.action is Action.HANDLE_FETCH_REQUEST:
                    fetch_base = None  # judged from here on
                elif e.action is Action.BECOME_LEADER:
                    self.result.elections += 1
                    if self._dynamic:
                        self._leader_elected()
                elif e.action is Action.ADD_VOTER:
                    self.result.voters_added += 1
                    self._maybe_crash_mid_change(node, e.action.value)
                elif e.action is Action.REMOVE_VOTER:
                    self.result.voters_removed += 1
                    self._maybe_crash_mid_change(node, e.action.value)
            elif t is AppendToLog:
                assert isinstance(e, AppendToLog)
                end_before = log.end_offset
                try:
                    if e.leader_encoded:
                        log.append_leader_encoded(e.data, e.first_offset, e.last_offset, e.epoch)
                    else:
                        log.append_as_follower(e.data)
                except Exception as exc:
                    self._violation(
                        "EffectRejected",
                        f"node {node.id} AppendToLog [{e.first_offset}, {e.last_offset}] epoch"
                        f" {e.epoch} at log end {log.end_offset}: {exc}",
                    )
                else:
                    # AppendToLogFields: the effect says where the data lands and the epoch
                    # of its last batch, as the log that appended it sees them.
                    got = (e.first_offset, e.last_offset + 1, e.epoch)
                    want = (end_before, log.end_offset, log.last_epoch)
                    if got != want:
                        self._violation(
                            "AppendToLogFields",
                            f"node {node.id} AppendToLog (first, end, epoch) {got}, but the"
                            f" log appended it as {want}",
                        )
                node.log_dirty = True
                if self._dynamic:
                    self._log_voters_changed(node, e.data, written=e.leader_encoded)
                if e.leader_encoded and self._check:
                    bad = vc.control_records_in_kafka_format(node.id, e.data)
                    if bad is not None:
                        self._violation(bad.name, bad.detail)
            elif t is FlushLog:
                log.flush()
            elif t is HighWatermarkMoved:
                pass  # read back from the view after the step
            elif t is PersistElectionState:
                assert isinstance(e, PersistElectionState)
                node.persisted = e.state
            elif t is TruncateLog:
                assert isinstance(e, TruncateLog)
                try:
                    log.truncate_to(e.offset)
                except Exception as exc:
                    self._violation(
                        "EffectRejected", f"node {node.id} TruncateLog({e.offset}): {exc}"
                    )
                node.log_dirty = True
                self._truncated = True
                if self._dynamic:
                    self._log_voters_changed(node, None)
            elif t is AppendResult:
                assert isinstance(e, AppendResult)
                if check:
                    found = self._ledger.append_answered(node.id, e.request_id)
                    if found is not None:
                        self._violation(found.name, found.detail)
                    if e.error is ErrorCode.NONE:
                        self._ledger.append_accepted(node.id, e.request_id)
                self._append_result(node, e)
            elif t is AppendCommitted or t is AppendLost:
                assert isinstance(e, AppendCommitted | AppendLost)
                if check:
                    found = self._ledger.append_decided(node.id, e.request_id, t.__name__)
                    if found is not None:
                        self._violation(found.name, found.detail)
                self._decided.append(e)
            elif t is ShutdownComplete:
                if check:
                    found = self._ledger.shutdown_completed(
                        node.id, self.now, self._timing_of().request_timeout_ms
                    )
                    if found is not None:
                        self._violation(found.name, found.detail)
                node.stop_requested = True
            elif t is StateChanged:
                pass
            elif t is CheckVoterVersions:
                assert isinstance(e, CheckVoterVersions)
                self._check_versions(node, e)
            elif node.snaps is not None:
                if t is AdvanceLogStartOffset and fetch_base is None and check:
                    fetch_base = (log.start_offset, self._held_snapshots(node))
                self._snapshot_effect(node, e)

    def _send(
        self,
        src: _Node,
        dst_id: NodeId,
        msg: Message,
        answering: Request | None,
        answering_src: int | None,
    ) -> None:
        dst = self._nodes.get(dst_id)
        if dst is None:
            self._drop(src.id, dst_id, msg, "unknown node")
            return
        mtype = type(msg)
        if self._check:
            # SentMessageInBounds: a replica sends only what the bounds check of its receiver
            # accepts (kraft.core.bounds); a value out of bounds is refused as a forgery.
            bad = out_of_bounds(msg)
            if bad is not None:
                self._violation(
                    "SentMessageInBounds",
                    f"node {src.id} sent a {mtype.__name__} to {dst_id} that its receiver"
                    f" refuses: {bad}",
                )
        if self._hold and mtype in _REQUEST_TYPES:
            assert isinstance(msg, _REQUEST_MESSAGES)
            self._request_sent[(src.id, dst_id, mtype)] = (msg, self.now)
        if mtype is FetchRequest:
            assert isinstance(msg, FetchRequest)
            self._fetch_awaited[(src.id, dst_id)] = msg
        elif mtype is FetchSnapshotRequest:
            assert isinstance(msg, FetchSnapshotRequest)
            self._chunk_awaited[(src.id, dst_id)] = msg
            if self._check and src.replica is not None:
                limit = self._profile.fetch_max_bytes
                found = st_fields.fetch_snapshot_request_fields(
                    src.id,
                    msg,
                    cluster_id=self.config.cluster_id,
                    key=src.key,
                    epoch=src.replica.view().epoch,
                    max_bytes=st_fields.KAFKA_FETCH_SNAPSHOT_MAX_BYTES if limit is None else limit,
                )
                if found is not None:
                    self._violation(found.name, found.detail)
        elif mtype is VoteResponse:
            assert isinstance(msg, VoteResponse)
            if (
                msg.vote_granted
                and isinstance(answering, VoteRequest)
                and answering_src == dst_id
                and not answering.pre_vote
            ):
                vote = inv.GrantedVote(src.id, src.wiped, dst_id, msg.leader_epoch)
                found = inv.one_vote_per_epoch(self._votes_cast, vote)
                if found is not None:
                    self._violation(found.name, found.detail)
        elif mtype is FetchResponse and self._fetch_in_step is not None:
            assert isinstance(msg, FetchResponse)
            if answering_src == dst_id and (
                msg.error is not ErrorCode.NONE
                or msg.diverging_epoch is not None
                or msg.snapshot_id is not None
            ):
                self._fetch_refused = True
        in_reply_to: Request | None = None
        req_type = _REQUEST_OF.get(mtype)
        if req_type is not None:
            if answering is not None and answering_src == dst_id and type(answering) is req_type:
                in_reply_to = answering
            else:
                in_reply_to = self._last_request.get((src.id, dst_id, req_type))
        rng = self._rng
        if self._loss and rng.random() < self._loss:
            self._drop(src.id, dst_id, msg, "loss")
            return
        if self._corrupt and mtype is FetchSnapshotResponse and rng.random() < self._corrupt:
            assert isinstance(msg, FetchSnapshotResponse)
            msg = self._corrupted(src, msg)
        if self._mangle and mtype is FetchSnapshotResponse:
            assert isinstance(msg, FetchSnapshotResponse)
            msg = self._mangled(msg)
        if self._cut and mtype is FetchResponse:
            assert isinstance(msg, FetchResponse)
            msg = self._cut_inside_a_batch(msg)
        payload = (src.id, msg, in_reply_to, dst.inc)
        if (
            self._hold_past
            and in_reply_to is not None
            and mtype in _HELD_PAST_ELECTION
            and self._hold_past_rng.random() < self._hold_past
        ):
            self._hold_past_election(dst, msg, payload)
            return
        at = self.now + self._delay()
        if self._hold and in_reply_to is not None and rng.random() < self._hold:
            at = max(at, self._held_until(dst_id, src.id, in_reply_to))
        self._push(at, _DELIVER, dst, payload)
        if self._duplicate and rng.random() < self._duplicate:
            self._push(self.now + self._delay(), _DELIVER, dst, payload)
            self._side(
                "DuplicateMessage", dst_id, lambda: message_json(msg, int(src.id), int(dst_id))
            )

    def _hold_past_election(self, dst: _Node, msg: Message, payload: tuple[object, ...]) -> None:
        """Holds an answer until its requester `dst` moves to another state or epoch, or two
        election timeouts pass (refinement.faults: hold_past_election)."""
        snap = dst.snap
        until = self.now + 2 * self._timing_of().election_timeout_ms
        self._held_past.setdefault(dst.id, []).append(((snap.state, snap.epoch), until, payload))
        if type(msg) is VoteResponse:
            self.result.votes_held += 1
        else:
            self.result.quorum_epoch_answers_held += 1

    def _release_held_past(self, node: _Node) -> None:
        """Sends on the answers held for `node` once it has moved on (or waited long enough):
        each arrives within one message delay, ahead of the answers to what it sent on its
        move, which take a round trip."""
        held = self._held_past.get(node.id)
        if not held:
            return
        now_key = (node.snap.state, node.snap.epoch)
        kept = []
        for key, until, payload in held:
            if key != now_key or until <= self.now:
                self._push(self.now + self._delay(), _DELIVER, node, payload)
            else:
                kept.append((key, until, payload))
        if kept:
            self._held_past[node.id] = kept
        else:
            del self._held_past[node.id]

    def _held_until(self, requester: NodeId, responder: NodeId, request: Request) -> int:
        """When a held answer arrives: about when the requester's timer runs out, counted
        from when its request left (the latest of its kind to the responder; now, if that
        one is not the request answered): the request timeout (just before or
        just after it, within a retry backoff) seven times in ten, else an election or a fetch
        timeout."""
        entry = self._request_sent.get((requester, responder, type(request)))
        sent = entry[1] if entry is not None and entry[0] is request else self.now
        t = self._timing_of()
        rng = self._rng
        pick = rng.random()
        if pick < 0.7:
            boundary = t.request_timeout_ms
        elif pick < 0.85:
            boundary = t.election_timeout_ms
        else:
            boundary = t.fetch_timeout_ms
        rb = max(t.retry_backoff_ms, 1)
        self.result.answers_held += 1
        return sent + boundary + int(rng.random() * (2 * rb + 1)) - rb

    def _corrupted(self, src: _Node, msg: FetchSnapshotResponse) -> FetchSnapshotResponse:
        """The chunk with one byte flipped where validation must notice: inside a batch of
        the snapshot, past its base offset (a CRC, an epoch, a length or the checksummed
        bytes). A chunk with no such byte goes through intact."""
        snaps = src.snaps
        chunk = msg.chunk
        data = snaps.complete.get(msg.snapshot_id) if snaps is not None else None
        if not chunk or data is None:
            return msg
        lo, hi = msg.position, msg.position + len(chunk)
        spans = [
            (max(lo, pos + 8), min(hi, pos + h.size_in_bytes))
            for pos, h in iter_batches(data, verify=False)
        ]
        spans = [(a, b) for a, b in spans if a < b]
        if not spans:
            return msg
        total = sum(b - a for a, b in spans)
        pick = int(self._rng.random() * total)
        for a, b in spans:
            if pick < b - a:
                at = a + pick - lo
                break
            pick -= b - a
        flipped = bytearray(chunk)
        flipped[at] ^= 1 + int(self._rng.random() * 255)
        self.result.chunks_corrupted += 1
        return dataclasses.replace(msg, chunk=bytes(flipped))

    def _mangled(self, msg: FetchSnapshotResponse) -> FetchSnapshotResponse:
        """Now and then (FaultProfile.mangle_chunk), a chunk answer that cannot belong to the
        snapshot: its bytes gone, or a size that the chunk ends past (with an adversary also
        no size at all, or one larger than the true one)."""
        rng = self._mangle_rng
        if msg.error is not ErrorCode.NONE or not msg.chunk or rng.random() >= self._mangle:
            return msg
        self.result.chunks_mangled += 1
        if rng.random() < 0.5:
            return dataclasses.replace(msg, chunk=b"")
        if not self._mangle_sizes or rng.random() < 0.5:
            return dataclasses.replace(msg, size=msg.position + len(msg.chunk) - 1)
        if rng.random() < 0.5:
            return dataclasses.replace(msg, size=-int(rng.random() * 2))  # 0 or -1
        # Larger than the true size: a later chunk's size then differs from the first's.
        return dataclasses.replace(msg, size=msg.size + 1 + int(rng.random() * 3))

    def _check_follower_answer(
        self,
        node: _Node,
        event: Receive,
        effects: list[Effect],
        before: ReplicaViewLike,
        after: ReplicaViewLike,
    ) -> None:
        """FollowerHighWatermarkFollowsAnswer and FollowerAppendsWholeBatches for a step that
        handled `event`."""
        was_following = (
            before.state is ReplicaState.FOLLOWER
            and before.leader_id == event.src
            and before.epoch == after.epoch
        )
        for found in (
            gen.follower_high_watermark_follows_answer(
                node.id,
                event.src,
                event.message,
                effects,
                was_following=was_following,
                end_before=before.end_offset,
                before=before.high_watermark,
                state=after.state,
                epoch=after.epoch,
                leader=after.leader_id,
                end_offset=after.end_offset,
                after=after.high_watermark,
            ),
            gen.follower_appends_whole_batches(
                node.id,
                event.src,
                event.message,
                event.in_reply_to,
                was_following=was_following,
                end_before=before.end_offset,
                last_epoch_before=before.last_epoch,
                fetching_snapshot=before.fetching_snapshot is not None,
                state=after.state,
                epoch=after.epoch,
                leader=after.leader_id,
                end_offset=after.end_offset,
            ),
        ):
            if found is not None:
                self._violation(found.name, found.detail)

    def _cut_inside_a_batch(self, msg: FetchResponse) -> FetchResponse:
        """Now and then (FaultProfile.cut_fetch), a Fetch answer of several batches cut at a
        random byte past its first batch, as a Kafka leader's answer ends at the Fetch's max
        bytes."""
        rng = self._cut_rng
        if msg.error is not ErrorCode.NONE or not msg.records or rng.random() >= self._cut:
            return msg
        ends = [pos + h.size_in_bytes for pos, h in iter_batches(msg.records, verify=False)]
        if len(ends) < 2:
            return msg
        self.result.fetches_cut += 1
        at = rng.randrange(ends[0] + 1, ends[-1])
        return dataclasses.replace(msg, records=bytes(msg.records[:at]))

    def _drop(self, src: int, dst: NodeId, msg: object, reason: str) -> None:
        self.result.dropped += 1
        if type(msg) is FetchSnapshotResponse:
            self.result.chunks_lost += 1

        def describe() -> JsonObject:
            out = message_json(cast(Message, msg), src, int(dst))
            out["reason"] = reason
            return out

        self._side("DropMessage", dst, describe)

    # ------------------------------------------------------------------ after every step

    def _after_step(
        self, node: _Node, event: Event | None, src_id: int | None, msg: Message | None
    ) -> None:
        self.result.events += 1
        # The step's line first, so a violation found below follows the step that caused it.
        if self._trace is not None:
            self._write_step(node, event, src_id, msg)
        else:
            self._actions.clear()
            self._voter = None
        old = node.snap
        new = self._snapshot(node)
        if new is not old and new != old:
            node.snap = new
            self._snaps[node.id] = new
            if self._check:
                self._check_node(old, new)
                if new.state is ReplicaState.LEADER and node.replica is not None:
                    found = only.only_voter_commits_at_once(node.id, node.replica.view())
                    if found is not None:
                        self._violation(found.name, found.detail)
        if self._held_past:
            self._release_held_past(node)
        if self._decided:
            self._decide()
        if self._liveness:
            self._liveness_progress()

    def _cluster(self) -> ClusterState:
        # The snapshot and leader maps are updated in place; only a new acknowledgement
        # tuple needs a new ClusterState.
        cluster = self._cluster_cache
        if (
            cluster is None
            or cluster.acknowledged is not self._acked_t
            or cluster.committed is not self._committed
        ):
            cluster = ClusterState(
                self._snaps,
                self._voter_set,
                self._leaders,
                self._acked_t,
                self._committed,
                self._lost,
            )
            self._cluster_cache = cluster
        return cluster

    def _commit_ghost(self, leader: NodeState) -> Violation | None:
        """The committed history grows with a leader's HWM; what was committed never
        changes (CommittedNeverLost)."""
        done = self._committed
        hwm = leader.high_watermark
        if done is None or hwm is None or hwm <= done[1]:
            return None
        cache, end = done
        if inv.common_prefix(cache, end, leader.epochs, leader.log_end_offset) < end:
            return Violation(
                inv.COMMITTED_NEVER_LOST,
                f"leader {leader.node_id} (epoch {leader.epoch}) exposes HWM {hwm} over"
                f" {leader.epochs}/{leader.log_end_offset}, which differs from the committed"
                f" {cache}/{end}",
            )
        self._committed = (tuple((e, o) for e, o in leader.epochs if o < hwm), hwm)
        self._committed_epoch = max(self._committed_epoch, leader.epoch)
        return None

    def _check_voters(
        self,
        old: NodeState,
        new: NodeState,
        after: ClusterState,
        log_changed: bool,
        state_changed: bool,
    ) -> Violation | None:
        """The dynamic quorum's checkers (refinement.invariants_reconfig), focused."""
        nid = new.node_id
        found: Violation | None = None
        if log_changed or new.voter_history is not old.voter_history:
            found = recon.at_most_one_uncommitted_voter_change(after, nid)
        if found is None and state_changed and new.state is ReplicaState.LEADER:
            found = recon.leader_completeness(after, nid, self._committed_epoch)
        node = self._nodes[nid]
        if found is None and node.replica is not None:
            believed: tuple[NodeId, ...] | None = getattr(node.replica.view(), "voters", None)
            if believed is not None:
                found = recon.voter_set_matches_log(new, believed)
        return found

    def _check_node(self, old: NodeState, new: NodeState) -> None:
        """Run, focused on the node, each invariant whose inputs about it changed in a way
        that can break it: a focused result depends only on those fields, and it held before
        the step."""
        nid = new.node_id
        state_changed = new.state is not old.state or new.epoch != old.epoch
        if new.state is ReplicaState.LEADER and state_changed:
            self._leaders[new.epoch] = self._leaders.get(new.epoch, frozenset()) | {nid}
        log_changed = (
            new.epochs is not old.epochs
            or new.log_end_offset != old.log_end_offset
            or new.flushed_offset != old.flushed_offset
        )
        extended = True  # the log only gained records (or did not change)
        durable_lost = False  # part of what the log had flushed is gone or different
        if log_changed:
            kept = inv.common_prefix(old.epochs, old.log_end_offset, new.epochs, new.log_end_offset)
            extended = kept >= old.log_end_offset
            durable_lost = min(kept, new.flushed_offset) < old.flushed_offset
        hwm_changed = new.high_watermark != old.high_watermark
        found: Violation | None = None
        if new.log_start_offset != old.log_start_offset or new.snapshots is not old.snapshots:
            found = inv.log_start_at_snapshot(ClusterState({nid: new}, self._voter_set))
        if found is None and new.state is ReplicaState.LEADER and hwm_changed:
            found = self._commit_ghost(new)
        after = self._cluster()
        if found is None and state_changed and new.state is ReplicaState.LEADER:
            found = inv.election_safety(after, nid)
        if found is None and (
            state_changed
            or log_changed
            or new.end_offset != old.end_offset
            or new.last_epoch != old.last_epoch
            or new.start_offset != old.start_offset
            or new.log_start_offset != old.log_start_offset
        ):
            found = inv.log_mirror(after, nid)
        if found is None and log_changed:
            found = inv.log_matching(after, nid)
        # Growing logs cannot break a majority; a leader's HWM or a lost durable prefix can.
        if found is None and (
            durable_lost or (new.state is ReplicaState.LEADER and (hwm_changed or state_changed))
        ):
            if not self._dynamic:
                found = inv.majority_reached_high_watermark(after, nid)
            elif (
                old.state is ReplicaState.LEADER
                and not state_changed
                and hwm_changed
                and new.high_watermark is not None
            ):
                # As the spec's action property: when a leader moves its HWM. A voter that
                # lost its disk no longer holds what it held, so the state form may break
                # later (a fault the quorum survives); a new leader's HWM from its follower
                # days was checked when its leader moved it.
                found = recon.majority_reached_high_watermark(after, nid)
        if found is None and self._dynamic:
            found = self._check_voters(old, new, after, log_changed, state_changed)
        if found is None and (state_changed or hwm_changed or not extended):
            if not state_changed and extended and old.high_watermark is not None:
                # Only the HWM moved: acknowledgements below the old one were checked.
                acked = self._acked_t
                skip = bisect_left(self._acked_lasts, old.high_watermark)
                after = ClusterState(self._snaps, self._voter_set, self._leaders, acked[skip:])
            found = inv.committed_never_lost(after, nid)
        if found is None and (state_changed or hwm_changed or new.incarnation != old.incarnation):
            before = ClusterState({nid: old}, self._voter_set)
            found = inv.epoch_monotonic(before, after, nid) or inv.high_watermark_monotonic(
                before, after, nid
            )
        if (
            found is None
            and (new.snapshots or old.snapshots or self._any_snapshots)
            and (new.snapshots is not old.snapshots or log_changed or hwm_changed or state_changed)
        ):
            self._any_snapshots = True
            found = inv.snapshot_matches_log(after, nid)
        if found is not None:
            self._violation(found.name, found.detail)


def _records_at(node: _Node, first: Offset, last: Offset) -> list[KeyValue]:
    """The (key, value) records a node's log holds at offsets first..last."""
    log = node.log
    out: list[KeyValue] = []
    if first < log.start_offset or last >= log.end_offset or last < first:
        return out
    data = log.read(first, 1 << 30).data
    for pos, header in iter_batches(data, verify=False):
        if header.base_offset > last:
            break
        out.extend(
            (rec.key, rec.value)
            for rec in decode_records(data, pos, header)
            if first <= rec.offset <= last
        )
    return out
