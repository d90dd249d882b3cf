"""The simulator's voter-change layer (KIP-853/856; see refinement.sim_base for the layers),
active only under a dynamic profile (`NAME+reconfig`, refinement.faults.with_reconfig): every
other profile draws nothing here and runs as before.

- Bootstrap: the cluster is formatted as `kraft format --initial-controllers` does (kraft.version
  1; the voters' Voters record in the bootstrap checkpoint, kraft.storage.bootstrap), which each
  node states at offset -1 of its voter history (`NodeSetup.voter_history`); spare replicas
  start as observers. The first leader writes that set into the log (kraft.core.leader).
- Each node's voter history is kept from its log's bytes as the node does (the Voters records
  appended, truncated away, lost in a crash), for the checkers (refinement.invariants_reconfig)
  and for the voter history a restarted replica is built with.
- The operator: at the profile's `reconfig_rate`, a deterministic operator (the run's generator)
  sends AddRaftVoter (a caught-up observer, or a voter's replacement disk) or RemoveRaftVoter
  (any voter, the leader too) to the leader it finds (as `kraft quorum describe` would), and
  now and then a whole reassignment (kraft.reassign.plan_reassignment) step by step. It
  retries on REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, a lost request or a stopped node, as
  an operator would; a second operator sometimes races the first. Requests and answers travel
  with the network's delays and losses (never partitioned: the operator reaches every node).
- The operator never removes the leader of a two-voter set: single-member changes cannot
  survive that one (the leader appends {other}; if it crashes before the other voter has the
  record, it restarts a non-voter by its own log, and the other, a voter of {leader, other}
  by its shorter log, cannot win its vote: no replica can ever be elected, in Kafka too, as
  far as we can tell). The simulator found it (mixed+reconfig, seed 25 of commit 65237dc;
  seed 22 of bdd62d6 when a retried or racing removal of the leader met a two-voter set).
  Checked whenever the operator sends, retries included.
- Every answer to the operator is checked (refinement.invariants_voter_changes,
  VoterChangeAnswered): a request is answered in the step that receives it unless accepted,
  and the answer agrees with the answering replica's log. In the liveness phase, once the
  settled leader committed its latest change, the operator asks one more (adding a caught-up
  observer, else removing a follower), which must be acknowledged
  (VoterChangeEventuallyAcknowledged).
- One-shot requests (`update_voter_rate`, mixed+snapshots+reconfig, and mixed+adversary's
  static quorum at kraft.version 0): UpdateRaftVoter (valid,
  with or without the cluster id; kraft.version ranges whose ends fall on, below and above
  the finalized version; without the default listener; with max < min or a negative
  kraft.version; a range above every version; an unknown directory id or voter id; a voter key
  without a directory id; a stale epoch; another cluster's id; now and then the same update
  twice in a row, the second finding the first's Voters record uncommitted) and malformed
  AddRaftVoter / RemoveRaftVoter (among them a voter key without a directory id), each
  answered as
  refinement.invariants_voter_changes.one_shot_answered says, from a generator of their own,
  and each UpdateRaftVoter answer naming the leader and epoch the replica knows
  (update_voter_leader_hint). They go to the leader the operator finds, and about a third of
  them to any running replica.
  Every other change of the operator carries no cluster id (Kafka accepts a null one).
- Snapshots (a profile with both): a snapshot carries the Voters record the node's snapshotter
  writes (kraft.core.voter_records.voters_record_at, SnapshotVotersMatchLog), a replica that
  validates one is told its voter set as the node's driver tells it, and installing it makes
  that set the node's voter history. Half the time a node that appends a Voters record also
  snapshots at its HWM at once: the snapshot ends at or just below the new record.
- The driver answers CheckVoterVersions with VoterVersionsChecked after a round trip: the
  replica's kraft.version range if that exact replica (id and directory id) runs, else
  REQUEST_TIMED_OUT. Odd ids support 0..1, as Kafka 4 does; even ids 0..2, as a newer
  release would (the leader's version, 1, is in both ranges); every fifth answered probe says
  0..0, as a release before KIP-853 would, so the leader must abort that AddRaftVoter (the
  operator then asks again), except in the liveness phase.
- Crash mid-change (`change_crash`): a leader crashes right after appending a change's Voters
  record (unflushed, unreplicated); on restart its log no longer holds it.
- Voter disk loss (`voter_disk_loss_rate`): a running voter crashes and loses its data
  directory; it restarts formatted anew, with a new directory id, so an observer and never the
  voter it was (KIP-856). The operator then removes the old identity and adds the new one (the
  runbook). It strikes only while every voter set in play (the committed one and any later
  one a log states, committed or not) has three voters or more, none lost already, and no
  change is in flight, so that a majority of live identities remains.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from kraft.control_records import Endpoint, VotersRecord
from kraft.core.effects import CheckVoterVersions, Effect, Send
from kraft.core.events import CreateSnapshot, Event, Receive, VoterVersionsChecked
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    Message,
    RemoveVoterRequest,
    RemoveVoterResponse,
    Request,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of, voter_sets_in, voters_record_at
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.reassign import ReassignError, Step, StepKind, plan_reassignment
from kraft.storage.bootstrap import DynamicVoter, voters_record_of
from kraft.trace_format import message_json
from refinement import invariants_reconfig as recon
from refinement import invariants_voter_changes as vc
from refinement import invariants_voter_texts as vt
from refinement.sim_base import (
    _ADMIN,
    _FAULT,
    _LOCAL,
    _NODE_CRASH,
    _RECONFIG,
    _VOTER_DISK_LOSS,
    ADMIN,
    _Node,
    directory_of,
)
from refinement.sim_clients import SimClients
from refinement.sim_snapshots import snapshot_voters

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaFactory, SimConfig, SimResult

LISTENER = "CONTROLLER"
# The operator gives up on a change after this many attempts, and waits this long between them.
_MAX_ATTEMPTS = 12
_RETRY_MS = (50, 400)
# At most this many voters, and a second operator racing the first this often.
_MAX_VOTERS = 5
_RACE = 0.15
# A whole reassignment instead of one change, this often.
_REASSIGN = 0.08
# The one-shot requests' reply tokens (the operator's changes use rid * 100 + attempt).
_ONE_SHOT = 10**9
# A one-shot goes to any running replica (not the leader the operator finds) this often, so
# that followers, candidates, resigned leaders and replicas shutting down answer some.
_ONE_SHOT_ANYWHERE = 0.35
# The kraft.version ranges an UpdateRaftVoter states (well-formed ones, then malformed ones).
_RANGES = ((0, 0), (0, 1), (1, 1), (0, 2), (1, 2))
_MALFORMED = ((1, 0), (2, 1), (-1, 1), (0, -1))
# How often an UpdateRaftVoter is sent twice in a row.
_UPDATE_TWICE = 0.3


def endpoint_of(node: NodeId) -> Endpoint:
    return Endpoint(LISTENER, f"node-{node}", 9093)


@dataclass(slots=True)
class _Op:
    """One voter change the operator asked for, until it is answered or abandoned."""

    rid: int
    add: bool
    voter: ReplicaKey
    # A step of the reassignment in progress (done: the next step follows).
    planned: bool = False
    attempts: int = 0
    # Waiting to ask again (after a refusal, or with no node to ask).
    waiting: bool = False
    # KIP-1186: an AddRaftVoter asked to be answered once appended (False), not committed.
    ack_when_committed: bool = True
    # The attempts (tokens) a replica accepted (VoterChangeAnswered).
    accepted: set[int] = field(default_factory=set)
    # The liveness phase's change: retried until acknowledged, its answers kept.
    probe: bool = False
    answers: list[str] = field(default_factory=list)


class SimReconfig(SimClients):
    """The dynamic quorum: bootstrap, voter histories, the operator, the driver's probe."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        super().__init__(config, result, replica_factory, trace)
        self._ops: dict[int, _Op] = {}
        self._plan: list[Step] = []
        self._next_op = 1
        # The request being stepped (its token), and whether the step answered it or started
        # probing its new voter (VoterChangeAnswered).
        self._asked: int | None = None
        self._asked_answered = False
        self._asked_probed = False
        # The liveness phase's change: asked (None: not yet), and acknowledged.
        self._change_probe: _Op | None = None
        self._change_probed = False
        # Voter changes each node accepted and has not answered (VoterChangeAnswered of the
        # one-shots): token -> (incarnation, epoch, accepted at, answered once appended).
        self._changes_accepted: dict[NodeId, dict[int, tuple[int, Epoch, int, bool]]] = {}
        # The one-shot request being stepped and the answers it got.
        self._one_shot: int | None = None
        self._one_shot_answers: list[ErrorCode] = []
        # The (leader, epoch) each UpdateRaftVoter answer of it named (UpdateVoterLeaderHint).
        self._one_shot_hints: list[tuple[NodeId, Epoch]] = []
        self._next_one_shot = _ONE_SHOT
        self._answered_in_step: set[int] = set()
        # What the operator's requests were answered in the step being checked, by token
        # (None: no step down being watched).
        self._step_answers: dict[int, ErrorCode] | None = None
        # Every operator's request answered so far (VoterChangeAnswered: answered once).
        self._answered_tokens: set[int] = set()
        self._bootstrap_hist: tuple[tuple[Offset, VoterSet], ...] = ()
        # The kraft.version range each probed replica's ApiVersions answer gave, by id
        # (VoterAddedWithProbedVersions).
        self._probed_spans: dict[NodeId, range] = {}
        self._probes_answered = 0  # every fifth probe answers a range without version 1
        # The one-shots (and snapshots at a change) draw from a generator of their own.
        self._one_rng = random.Random(f"{config.seed}/one-shot")
        p = self._profile
        if p.update_voter_rate > 0:
            # A static quorum (kraft.version 0) gets them too: its voters send UpdateRaftVoter.
            self._push(self._one_shot_ms(), _ADMIN, None, ("one-shot-next", 0))
        if not self._dynamic:
            return
        voters = [self._nodes[i] for i in self._voter_ids]
        record = voters_record_of(
            [DynamicVoter(n.id, f"node-{n.id}", 9093, n.key.directory_id) for n in voters],
            LISTENER,
        )
        history = ((Offset(-1), voter_set_of(record)),)
        self._bootstrap_hist = history
        for node in self._nodes.values():
            node.voter_hist = history
        self._push(self._exp_ms(p.reconfig_rate), _FAULT, _RECONFIG)
        if p.voter_disk_loss_rate > 0:
            self._push(self._exp_ms(p.voter_disk_loss_rate), _FAULT, _VOTER_DISK_LOSS)

    # ------------------------------------------------------------------ voter histories

    def _log_voters_changed(
        self, node: _Node, appended: bytes | memoryview | None, *, written: bool = False
    ) -> None:
        hist = node.voter_hist
        if appended is None:
            end = node.log.end_offset
            if hist[-1][0] >= end:
                # An emptied log (a lost disk) keeps what the bootstrap checkpoint states.
                node.voter_hist = tuple((o, v) for o, v in hist if o < end) or self._bootstrap_hist
                if node.replica is not None:
                    self.result.voters_truncated += 1
            return
        found = voter_sets_in(appended)
        # Judged where the leader writes the record, right after the probe it answers: a
        # replica copying it later may see a later probe's span of the same id.
        if found and written and self._check and hist:
            prev = hist[-1][1]
            for offset, voters in found:
                v = vc.voter_added_with_probed_versions(
                    node.id, offset, prev, voters, self._probed_spans
                )
                if v is not None:
                    self._violation(v.name, v.detail)
                prev = voters
        if found:
            node.voter_hist = hist + tuple(found)
            if node.snaps is not None and not self._liveness and self._one_rng.random() < 0.5:
                # A snapshot at the HWM right as a voter change is appended: its end is then
                # at or just below the new Voters record (SnapshotVotersMatchLog).
                self._push(self.now, _ADMIN, node, ("snapshot-at-change", 0, node.inc))

    def _current_voters(self) -> frozenset[ReplicaKey]:
        """The voter set of the most advanced log (by last epoch, then end offset)."""
        best = max(self._nodes.values(), key=lambda n: (n.log.last_epoch, n.log.end_offset, -n.id))
        return frozenset(best.voter_hist[-1][1].voters)

    def _dead(self, keys: frozenset[ReplicaKey]) -> list[ReplicaKey]:
        """Voters whose directory was lost (no replica has that key any more)."""
        return sorted((k for k in keys if self._nodes[k.id].key != k), key=lambda k: k.id)

    def _voter_sets_in_play(self) -> list[VoterSet]:
        """The voter sets that may be in force once the cluster settles: the last committed
        one and every later one a log states, committed or not (an uncommitted change may
        still commit, or be truncated away), in each log that reaches the end of the committed
        history (a shorter log cannot win an election: it will take the leader's sets)."""
        committed = self._committed
        end = committed[1] if committed is not None else Offset(0)
        sets: list[VoterSet] = []
        for node in self._nodes.values():
            if node.log.end_offset >= end:
                sets.extend(recon.sets_from(node.voter_hist, end - 1))
        return sets

    # ------------------------------------------------------------------ the driver's probe

    def _check_versions(self, node: _Node, e: CheckVoterVersions) -> None:
        if self._asked is not None:
            self._asked_probed = True
        target = self._nodes.get(e.voter.id)
        at = self.now + self._delay() + self._delay()
        if target is not None and target.replica is not None and target.key == e.voter:
            self._probes_answered += 1
            # Not in the liveness phase, whose one change must be acknowledged.
            if self._probes_answered % 5 == 0 and self._change_probe is None:
                span = (0, 0)  # a release before KIP-853: the AddRaftVoter is aborted
            else:
                span = (0, 1) if target.id % 2 else (0, 2)
            self._probed_spans[target.id] = range(span[0], span[1] + 1)
            ev = VoterVersionsChecked(at, e.voter.id, ErrorCode.NONE, span)
        else:
            ev = VoterVersionsChecked(at, e.voter.id, ErrorCode.REQUEST_TIMED_OUT)
        self._push(at, _LOCAL, node, (ev, node.inc))

    def _local(self, node: _Node, payload: tuple[Event, int]) -> None:
        """The probe's answer settles the AddRaftVoter waiting for it (VoterChangeAnswered):
        in the step that hears it, the leader either appends the change's Voters record or
        answers the request (a failed probe, a kraft.version range without the leader's, a
        new voter that is not caught up), as Kafka's AddVoterHandler.handleApiVersionsResponse
        does on every path, never leaving it to the change's timeout."""
        event, inc = payload
        replica = node.replica
        if (
            not self._check
            or type(event) is not VoterVersionsChecked
            or replica is None
            or node.inc != inc
        ):
            super()._local(node, payload)
            return
        assert isinstance(event, VoterVersionsChecked)
        waiting: list[tuple[int, ReplicaKey]] = []
        view = replica.view()
        if view.state is ReplicaState.LEADER:
            latest = node.voter_hist[-1][1] if node.voter_hist else None
            for token, (at_inc, epoch, _, early) in self._changes_accepted.get(node.id, {}).items():
                op = self._ops.get(token // 100)
                if (
                    op is not None
                    and op.add
                    and op.voter.id == event.voter_id
                    and at_inc == node.inc
                    and epoch == view.epoch
                    and not early
                    and not (latest is not None and latest.contains(op.voter))
                ):
                    waiting.append((token, op.voter))
        self._answered_in_step = set()
        hist = node.voter_hist
        super()._local(node, payload)
        for token, voter in waiting:
            if token not in self._answered_in_step and node.voter_hist is hist:
                self._violation(
                    vc.VOTER_CHANGE_ANSWERED,
                    f"node {node.id} heard {event.error.name} from the ApiVersions probe of"
                    f" {voter} and neither answered its AddRaftVoter (request {token}) nor"
                    " appended its Voters record",
                )

    def _apply(
        self,
        node: _Node,
        effects: list[Effect],
        answering: Request | None,
        src_id: int | None,
        event: Event | None = None,
    ) -> None:
        heard = self._step_answers
        if heard is not None:
            for e in effects:
                if type(e) is Send and e.dst == ADMIN and e.reply_to is not None:
                    assert isinstance(e, Send)
                    error = getattr(e.message, "error", None)
                    if isinstance(error, ErrorCode):
                        heard[e.reply_to] = error
        super()._apply(node, effects, answering, src_id, event)

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
        """VoterChangeAnswered at a step down: a leader that leaves leadership in a step
        answers every change it accepted and has not answered NOT_LEADER_OR_FOLLOWER in it."""
        replica = node.replica
        if (
            not self._check
            or replica is None
            or replica.view().state is not ReplicaState.LEADER
            or not self._changes_accepted.get(node.id)
        ):
            super()._step(node, event, answering, src_id, msg, is_tick=is_tick)
            return
        inc = node.inc
        pending = [
            token
            for token, (at_inc, _, _, early) in self._changes_accepted[node.id].items()
            if at_inc == inc and not early
        ]
        outer, self._step_answers = self._step_answers, {}
        try:
            super()._step(node, event, answering, src_id, msg, is_tick=is_tick)
        finally:
            answers, self._step_answers = self._step_answers, outer
        after = node.replica
        if (
            not pending
            or after is None
            or node.inc != inc
            or after.view().state is ReplicaState.LEADER
        ):
            return
        self.result.step_downs_with_change_pending += 1
        v = vc.step_down_answers(node.id, pending, answers)
        if v is not None:
            self._violation(v.name, v.detail)

    # ------------------------------------------------------------------ faults

    def _maybe_crash_mid_change(self, node: _Node, action: str) -> None:
        """A crash aimed at this incarnation right after it appended a change's Voters record
        (queued at this instant: it strikes before any other event of the node)."""
        rate = self._profile.change_crash
        if rate and not self._liveness and self._rng.random() < rate:
            self._push(self.now, _NODE_CRASH, node, (node.inc, action))

    def _voter_disk_loss(self) -> None:
        keys = self._current_voters()
        if self._ops or self._plan or len(keys) < 3 or self._dead(keys):
            return
        # Every set still in play, not the latest alone: an AddRaftVoter answered when
        # appended is no longer the operator's, and its Voters record may sit uncommitted on
        # the leader's log alone. mixed+reconfig seed 85: the leader of {1, 2} appended
        # {1, 2, 3} while cut off, answered, then lost its disk; the record went with it, and
        # voter 1 alone could never be elected in {1, 2}.
        in_play = self._voter_sets_in_play()
        if any(len(v.voters) < 3 or self._dead(frozenset(v.voters)) for v in in_play):
            return
        up = [
            self._nodes[k.id]
            for k in sorted(keys, key=lambda k: k.id)
            if self._nodes[k.id].replica is not None and not self._nodes[k.id].shutting_down
        ]
        up = [n for n in up if self._may_stop(n) and self._electable_without(n, in_play)]
        if up:
            self.result.voter_disk_losses += 1
            self._lose_disk(up[int(self._rng.random() * len(up))])

    def _electable_without(self, victim: _Node, in_play: list[VoterSet]) -> bool:
        """Whether, in every voter set in play, the voters other than `victim` that count
        themselves voters (their own log's latest set names them) are a majority of it.

        A voter added by a record it has not fetched yet takes itself for an observer, and
        only a leader could send it that record. Once it has fetched from a leader, it
        refuses every pre-vote while it follows that leader (KIP-996), and an observer never
        gives up on its leader: in Kafka 4.3.1, FollowerState.hasFetchedFromLeader is set by
        a successful Fetch and never cleared, and pollFollowerAsObserver, unlike
        pollFollowerAsVoter, ignores the fetch timeout (it only fetches from another node).
        A Prospective that knows that leader goes back to following it when its pre-vote
        fails, so no epoch is ever bumped and the observer never leaves its FollowerState.
        mixed+reconfig seed 74: the leader of {1, 2, 5} lost its disk right after the record
        adding 5 committed through 1, with 5 (a follower of that leader) still short of it;
        voter 1 could never collect a majority of pre-votes, in Kafka too. The operator's
        runbook asks for a live quorum; this schedule would need an unclean recovery."""
        for voters in in_play:
            aware = 0
            for key in voters.voters:
                node = self._nodes[key.id]
                if (
                    key.id != victim.id
                    and node.key == key
                    and node.voter_hist
                    and node.voter_hist[-1][1].contains(key)
                ):
                    aware += 1
            if aware < voters.majority:
                return False
        return True

    # ------------------------------------------------------------------ the operator

    def _reconfig_fault(self) -> None:
        self._push(self.now + self._exp_ms(self._profile.reconfig_rate), _FAULT, _RECONFIG)
        if self._ops:
            return
        op = self._next_change()
        if op is None:
            return
        self._ops[op.rid] = op
        self._admin_send(op)
        if not op.planned and self._rng.random() < _RACE:
            other = self._next_change()  # a second operator, at the same moment
            if other is not None and other.voter.id != op.voter.id:
                self._ops[other.rid] = other
                self._admin_send(other)

    def _new_op(self, add: bool, voter: ReplicaKey, planned: bool = False) -> _Op:
        rid = self._next_op
        self._next_op += 1
        return _Op(rid, add, voter, planned)

    def _next_change(self) -> _Op | None:
        rng = self._rng
        keys = self._current_voters()
        if self._plan:
            if any(o.planned for o in self._ops.values()):
                return None
            step = self._plan[0]
            return self._new_op(step.kind is StepKind.ADD, step.voter, planned=True)
        dead = self._dead(keys)
        if dead:
            return self._new_op(False, dead[0])  # the runbook: the lost identity goes first
        ids = {k.id for k in keys}
        spare = [
            n.key
            for n in self._nodes.values()
            if n.id not in ids and n.replica is not None and not n.shutting_down
        ]
        if rng.random() < _REASSIGN:
            pool = sorted(self._nodes)
            rng.shuffle(pool)
            target = [self._nodes[i].key for i in sorted(pool[:3])]
            leader = self._leader_node()
            try:
                self._plan = list(
                    plan_reassignment(keys, target, leader.id if leader is not None else None)
                )
            except ReassignError:
                self._plan = []
            return None
        add = bool(spare) and len(keys) < _MAX_VOTERS and (len(keys) < 3 or rng.random() < 0.5)
        if add:
            op = self._new_op(True, spare[int(rng.random() * len(spare))])
            op.ack_when_committed = op.rid % 3 != 0  # every third add: answered when appended
            return op
        if len(keys) <= 1:
            return None
        leader = self._leader_node()
        ordered = sorted(keys, key=lambda k: k.id)
        if leader is not None and leader.key in keys and rng.random() < 0.3:
            chosen = leader.key
        else:
            chosen = ordered[int(rng.random() * len(ordered))]
        return self._new_op(False, chosen)

    def _leader_node(self) -> _Node | None:
        """The leader the operator finds (as `kraft quorum describe` would): a running leader
        of the highest epoch."""
        best: _Node | None = None
        for node in self._nodes.values():
            s = self._snaps[node.id]
            if (
                node.replica is not None
                and s.state is ReplicaState.LEADER
                and (best is None or s.epoch > self._snaps[best.id].epoch)
            ):
                best = node
        return best

    def _admin_send(self, op: _Op) -> None:
        """Send the change to the leader (or, with none known, any running node)."""
        op.attempts += 1
        target = self._leader_node()
        keys = self._current_voters()
        if not op.add and len(keys) == 2 and target is not None and op.voter == target.key:
            self._admin_done(op, ok=False)  # never (see the module's docstring), even on retry
            return
        if target is None:
            up = [n for n in self._nodes.values() if n.replica is not None]
            if not up:
                self._admin_retry(op)
                return
            target = up[int(self._rng.random() * len(up))]
        # Every other change carries no cluster id (Kafka accepts a null one).
        cid = None if op.rid % 2 == 0 else ClusterId(self.config.cluster_id)
        msg: Message
        if op.add:
            msg = AddVoterRequest(
                cid,
                op.voter,
                (endpoint_of(op.voter.id),),
                ack_when_committed=op.ack_when_committed,
            )
        else:
            msg = RemoveVoterRequest(cid, op.voter)
        token = op.rid * 100 + op.attempts
        timeout = 2 * self.config.timing.request_timeout_ms
        self._push(self.now + timeout, _ADMIN, None, ("timeout", token))
        if self._loss and self._rng.random() < self._loss:
            self._side("DropMessage", target.id, lambda: message_json(msg, int(ADMIN), target.id))
            return
        self._push(self.now + self._delay(), _ADMIN, target, ("request", token, msg, target.inc))

    def _admin_retry(self, op: _Op) -> None:
        if not op.probe and (self._liveness or op.attempts >= _MAX_ATTEMPTS):
            self._admin_done(op, ok=False)
            return
        lo, hi = _RETRY_MS
        at = self.now + lo + int(self._rng.random() * (hi - lo + 1))
        op.waiting = True
        self._push(at, _ADMIN, None, ("retry", op.rid * 100 + op.attempts))

    def _leader_elected(self) -> None:
        """A leader was elected: the operator, told of it, asks again at once what waits for
        a retry (as a client following the quorum's leader does)."""
        for op in self._ops.values():
            if op.waiting:
                op.waiting = False
                token = op.rid * 100 + op.attempts
                self._push(self.now + self._delay(), _ADMIN, None, ("retry", token))

    def _admin_done(self, op: _Op, *, ok: bool) -> None:
        self._ops.pop(op.rid, None)
        if op.planned:
            if ok and self._plan:
                self._plan.pop(0)
            else:
                self._plan = []

    def _admin_event(self, target: object, payload: object) -> None:
        """A heap entry of the operator: a request reaching a node, a retry, a timeout."""
        assert isinstance(payload, tuple)
        what, token = payload[0], payload[1]
        assert isinstance(token, int)
        if what == "one-shot-next":
            if not self._liveness:
                self._send_one_shot()
                self._push(self.now + self._one_shot_ms(), _ADMIN, None, ("one-shot-next", 0))
            return
        if what == "snapshot-at-change":
            assert isinstance(target, _Node)
            self._snapshot_at_change(target, payload[2])
            return
        if what == "one-shot":
            assert isinstance(target, _Node)
            self._deliver_one_shot(target, payload)
            return
        op = self._ops.get(token // 100)
        if op is None or op.attempts != token % 100:
            return  # answered, or asked again since
        if what == "request":
            _, _, msg, inc = payload
            assert isinstance(target, _Node) and isinstance(
                msg, AddVoterRequest | RemoveVoterRequest
            )
            if target.replica is None or target.inc != inc:
                self._admin_retry(op)  # connection refused
                return
            event = Receive(self.now, ADMIN, msg, None, reply_to=token)
            hist = target.voter_hist
            self._answered_in_step = set()
            self._asked, self._asked_answered, self._asked_probed = token, False, False
            try:
                self._step(target, event, None, int(ADMIN), msg)
            finally:
                self._asked = None
            if self._asked_probed or target.voter_hist is not hist:
                op.accepted.add(token)
                if target.replica is not None and token not in self._answered_in_step:
                    epoch = target.replica.view().epoch
                    entry = (target.inc, epoch, self.now, False)
                    self._changes_accepted.setdefault(target.id, {})[token] = entry
            elif self._check and not self._asked_answered and target.replica is not None:
                v = vc.unanswered(target.id, op.voter, op.add)
                self._violation(v.name, v.detail)
        elif what == "retry":
            op.waiting = False
            self._admin_send(op)
        elif not self._liveness or op.probe:  # "timeout": no answer, ask again
            self._admin_retry(op)

    def _admin_answer(self, src: _Node, msg: Message, reply_to: int | None) -> None:
        """A leader's answer to the operator (it arrives after the network's delay; losing
        it is the operator's timeout, so it is heard at once or not at all)."""
        self._side("OperatorAnswered", None, lambda: message_json(msg, int(src.id), int(ADMIN)))
        if reply_to is None:
            return
        if reply_to == self._one_shot:
            assert isinstance(msg, AddVoterResponse | RemoveVoterResponse | UpdateVoterResponse)
            self._one_shot_answers.append(msg.error)
            if isinstance(msg, UpdateVoterResponse):
                self._one_shot_hints.append((msg.leader_id, msg.leader_epoch))
            return
        if reply_to == self._asked:
            self._asked_answered = True
        if self._check and reply_to in self._answered_tokens:
            twice = vc.answered_twice(src.id, reply_to, msg)
            self._violation(twice.name, twice.detail)
        self._answered_tokens.add(reply_to)
        self._answered_in_step.add(reply_to)
        pending = self._changes_accepted.get(src.id, {})
        entry = pending.pop(reply_to, None)
        if entry is not None and isinstance(msg, AddVoterResponse) and msg.error is ErrorCode.NONE:
            op_ = self._ops.get(reply_to // 100)
            if op_ is None or not op_.ack_when_committed:
                # Answered once appended (KIP-1186): pending until its commit is decided.
                pending[reply_to] = (entry[0], entry[1], entry[2], True)
        op = self._ops.get(reply_to // 100)
        if op is None or op.attempts != reply_to % 100:
            return
        assert isinstance(msg, AddVoterResponse | RemoveVoterResponse)
        if self._check and src.replica is not None:
            v = vc.voter_change_answered(
                src.id,
                op.voter,
                op.add,
                msg.error,
                history=src.voter_hist,
                hwm=src.replica.view().high_watermark,
                accepted=reply_to in op.accepted,
                ack_when_committed=op.ack_when_committed,
            )
            if v is None:
                hist = src.voter_hist
                v = vt.voter_change_refusal_text(
                    src.id,
                    op.voter,
                    op.add,
                    msg.error,
                    message=msg.message,
                    voters=tuple(hist[-1][1].voters) if hist else None,
                )
            if v:
                self._violation(v.name, v.detail)
        if op.probe:
            op.answers.append(msg.error.name)
            if msg.error in (ErrorCode.DUPLICATE_VOTER, ErrorCode.VOTER_NOT_FOUND) and not (
                op.accepted
            ):
                self._change_probed = True  # made by a change of the fault phase meanwhile
                self._admin_done(op, ok=False)
                return
            if msg.error not in (
                ErrorCode.NONE,
                ErrorCode.REQUEST_TIMED_OUT,
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
            ):
                v = vc.eventually_acknowledged(
                    op.voter, op.add, self.config.liveness_bound, op.answers
                )
                self._violation(v.name, v.detail)
            if msg.error is ErrorCode.NONE:
                self._change_probed = True
        if msg.error is ErrorCode.NONE:
            self.result.changes_acked += 1
            self._admin_done(op, ok=True)
        elif msg.error in (ErrorCode.DUPLICATE_VOTER, ErrorCode.VOTER_NOT_FOUND):
            # Already done (an earlier attempt committed) or no longer possible.
            self._admin_done(op, ok=op.planned and self._already_done(op))
        else:
            self._admin_retry(op)

    def _probe_change(self, voters: VoterSet, leader: ReplicaKey) -> bool:
        """The liveness phase's voter change, once the settled leader (`leader`, with voter
        set `voters`) committed its latest one: asked once, then awaited; True once
        acknowledged (or when there is nothing to change)."""
        if self._change_probed:
            return True
        if self._change_probe is None:
            self._ops.clear()  # what the fault phase's operator still asks is abandoned
            self._plan = []
            spare = sorted(
                (
                    n.key
                    for n in self._nodes.values()
                    if n.replica is not None and not voters.contains_id(n.id)
                ),
                key=lambda k: k.id,
            )
            others = sorted((k for k in voters if k != leader), key=lambda k: k.id)
            if spare:
                op = self._new_op(True, spare[0])
                # On even seeds, answered once appended (KIP-1186): it must still commit.
                op.ack_when_committed = self.config.seed % 2 == 1
            elif len(voters) >= 3:
                op = self._new_op(False, others[-1])
            else:
                self._change_probed = True
                return True
            op.probe = True
            self._change_probe = op
            self._ops[op.rid] = op
            self._admin_send(op)
        return False

    def _already_done(self, op: _Op) -> bool:
        keys = self._current_voters()
        return (op.voter in keys) is op.add

    # ------------------------------------------------------------------ one-shot requests

    def _one_shot_ms(self) -> int:
        return 1 + int(self._one_rng.expovariate(self._profile.update_voter_rate) * 1000.0)

    def _send_one_shot(self) -> None:
        """A request whose answer the operator knows from what it sees of the replica:
        UpdateRaftVoter (valid, or malformed, or of an unknown voter, a stale epoch, another
        cluster), AddRaftVoter without the default listener, Add/RemoveRaftVoter of another
        cluster. Sent to the leader it finds (now and then to any running node)."""
        rng = self._one_rng
        up = [n for n in self._nodes.values() if n.replica is not None]
        if not up:
            return
        target = self._leader_node()
        if target is None or rng.random() < _ONE_SHOT_ANYWHERE:
            target = up[int(rng.random() * len(up))]
        assert target.replica is not None
        if self._dynamic:
            voters = target.voter_hist[-1][1] if target.voter_hist else None
            if voters is None or not len(voters):
                return
            keys = sorted(voters.voters, key=lambda k: k.id)
        else:  # a static quorum: its voters' own keys (each controller knows its directory)
            keys = [self._nodes[i].key for i in sorted(self._voter_ids)]
            if not keys:
                return
        key = keys[int(rng.random() * len(keys))]
        ours = ClusterId(self.config.cluster_id)
        epoch = target.replica.view().epoch
        port = 9093 + int(rng.random() * 4)
        good = (Endpoint(LISTENER, f"node-{key.id}", port), Endpoint("REPLICATION", "r", 9))
        bad = (Endpoint("REPLICATION", f"node-{key.id}", port),)
        # Ranges whose ends fall on, below and above both finalized kraft.versions (0 for a
        # static quorum, 1 for a dynamic one): each end of Kafka's validVersionRange is met.
        lo, hi = _RANGES[int(rng.random() * len(_RANGES))]
        kind = rng.random()
        msg: AddVoterRequest | RemoveVoterRequest | UpdateVoterRequest
        if kind < 0.4:  # valid, with or without the cluster id
            cid = None if rng.random() < 0.3 else ours
            msg = UpdateVoterRequest(cid, epoch, key, good, lo, hi)
        elif kind < 0.5:  # without the default listener
            msg = UpdateVoterRequest(ours, epoch, key, bad, lo, hi)
        elif kind < 0.6:  # max < min kraft.version, or a negative one
            bad_lo, bad_hi = _MALFORMED[int(rng.random() * len(_MALFORMED))]
            msg = UpdateVoterRequest(ours, epoch, key, good, bad_lo, bad_hi)
        elif kind < 0.65:  # a range above both finalized kraft.versions
            msg = UpdateVoterRequest(ours, epoch, key, good, 2, 2 + int(rng.random() * 2))
        elif kind < 0.7:  # a voter id with another directory, or an id no voter has
            other = ReplicaKey(key.id, directory_of(key.id, 77))
            if rng.random() < 0.5:
                stranger = NodeId(max(self._nodes) + 1 + int(rng.random() * 2))
                other = ReplicaKey(stranger, directory_of(stranger))
            msg = UpdateVoterRequest(ours, epoch, other, good, lo, hi)
        elif kind < 0.75:  # a stale epoch
            if epoch < 1:
                return
            msg = UpdateVoterRequest(ours, Epoch(epoch - 1), key, good, lo, hi)
        elif kind < 0.8:
            msg = UpdateVoterRequest(ClusterId("elsewhere"), epoch, key, good, lo, hi)
        elif kind < 0.85:  # AddRaftVoter without the default listener
            spare = max(self._nodes)
            msg = AddVoterRequest(ours, self._nodes[spare].key, bad)
        elif kind < 0.9:  # Add, Remove or UpdateRaftVoter of a key without a directory id
            keyless = ReplicaKey(max(self._nodes) if rng.random() < 0.5 else key.id, NO_DIRECTORY)
            cid = None if rng.random() < 0.3 else ours
            which = rng.random()
            if which < 0.35:
                msg = AddVoterRequest(cid, keyless, good)
            elif which < 0.7:
                msg = RemoveVoterRequest(cid, keyless)
            else:
                msg = UpdateVoterRequest(cid, epoch, keyless, good, lo, hi)
        elif kind < 0.95:
            msg = AddVoterRequest(ClusterId("elsewhere"), key, good)
        else:
            msg = RemoveVoterRequest(ClusterId("elsewhere"), key)
        self._next_one_shot += 1
        token = self._next_one_shot
        if self._loss and rng.random() < self._loss:
            self._side("DropMessage", target.id, lambda: message_json(msg, int(ADMIN), target.id))
            return
        at = self.now + self._delay()
        self._push(at, _ADMIN, target, ("one-shot", token, msg, target.inc))
        if isinstance(msg, UpdateVoterRequest) and rng.random() < _UPDATE_TWICE:
            # The same update again right behind it: it finds the first one's Voters record
            # not yet committed (Kafka: REQUEST_TIMED_OUT until the HWM passes it).
            self._next_one_shot += 1
            again = ("one-shot", self._next_one_shot, msg, target.inc)
            self._push(at, _ADMIN, target, again)

    def _receiver(self, node: _Node) -> vc.Receiver:
        """What the operator sees of `node` as a request reaches it (vc.Receiver)."""
        assert node.replica is not None
        v = node.replica.view()
        start = next((o for e, o in node.snap.epochs if e == v.epoch), None)  # whole history
        timeout = self.config.timing.request_timeout_ms
        pending = maybe = False
        for inc, epoch, at, early in self._changes_accepted.get(node.id, {}).values():
            if inc != node.inc or epoch != v.epoch:
                continue
            if not early:
                pending = True
            elif self.now <= at + timeout + self.config.timing.request_timeout_ms:
                maybe = True
        return vc.Receiver(
            node=node.id,
            state=v.state,
            epoch=v.epoch,
            shutting_down=node.shutting_down,
            cluster_id=ClusterId(self.config.cluster_id),
            listener=LISTENER,
            history=node.voter_hist,
            hwm=v.high_watermark,
            epoch_start=None if start is None else Offset(start),
            pending=pending,
            maybe_pending=maybe or pending,
            leader=v.leader_id,
            kraft_version=1 if self._dynamic else 0,
            voter_ids=frozenset(self._voter_ids),  # the static voters (kraft.version 0)
        )

    def _deliver_one_shot(self, target: _Node, payload: tuple[object, ...]) -> None:
        _, token, msg, inc = payload
        assert isinstance(token, int)
        assert isinstance(msg, AddVoterRequest | RemoveVoterRequest | UpdateVoterRequest)
        if target.replica is None or target.inc != inc:
            return  # connection refused: nothing to check
        before = self._receiver(target)
        self._one_shot, self._one_shot_answers, self._one_shot_hints = token, [], []
        try:
            self._step(target, Receive(self.now, ADMIN, msg, None, reply_to=token), None,
                       int(ADMIN), msg)  # fmt: skip
        finally:
            self._one_shot = None
        if self._check and target.replica is not None and target.inc == inc:
            v = vc.one_shot_answered(msg, before, self._one_shot_answers, target.voter_hist)
            if v is not None:
                self._violation(v.name, v.detail)
            if isinstance(msg, UpdateVoterRequest):
                for leader_id, leader_epoch in self._one_shot_hints:
                    h = vc.update_voter_leader_hint(msg, before, leader_id, leader_epoch)
                    if h is not None:
                        self._violation(h.name, h.detail)

    # ------------------------------------------------------------------ snapshots (KIP-853)

    def _snapshot_at_change(self, node: _Node, inc: object) -> None:
        replica = node.replica
        if replica is None or node.inc != inc or node.shutting_down or self._liveness:
            return
        hwm = replica.view().high_watermark
        snaps = node.snaps
        newest = max((s.offset for s in snaps.complete), default=0) if snaps else 0
        if hwm and hwm > newest:
            self._step(node, CreateSnapshot(self.now, hwm), None, None, None)

    def _snapshot_voters(self, node: _Node, snapshot_id: OffsetAndEpoch) -> VotersRecord | None:
        """The Voters record the node's snapshotter writes into a snapshot ending at
        `snapshot_id` (kraft.server.node: voters_record_at of the replica), checked against
        the voter set the node's log states there (SnapshotVotersMatchLog)."""
        replica = node.replica
        if replica is None:
            return None
        from kraft.core.replica import Replica

        assert isinstance(replica, Replica)
        record = voters_record_at(replica, snapshot_id.offset)
        if self._check:
            v = vc.snapshot_voters_match_log(node.id, snapshot_id.offset, record, node.voter_hist)
            if v is not None:
                self._violation(v.name, v.detail)
        return record

    def _snapshot_installed(self, node: _Node, data: bytes, snapshot_id: OffsetAndEpoch) -> None:
        """The node's storage now states the snapshot's voter set at its end (as the node's
        stated_voters reads it on restart), then its log's."""
        record = snapshot_voters(data)
        if record is not None:
            node.voter_hist = ((Offset(snapshot_id.offset - 1), voter_set_of(record)),)
