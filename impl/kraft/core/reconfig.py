"""Voter changes on the leader (KIP-853 as Apache Kafka 4.3 ships it; KIP-856's rules).

This module owns AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter in the core: their checks
(in Kafka's order: KafkaRaftClient's request checks, then AddVoterHandler, RemoveVoterHandler,
UpdateVoterHandler), the one change in flight (Kafka's LeaderState `isOperationPending`), the
Voters record the leader appends for a change, and the answer once that record is decided.

- One change at a time: a change is pending from its acceptance until it is answered; another
  one meanwhile gets REQUEST_TIMED_OUT. A pending change times out after request_timeout_ms.
- No change before the leader's high watermark is known (its epoch's LeaderChange record is
  committed), nor while the latest Voters record is not committed (REQUEST_TIMED_OUT).
- kraft.version 0 (a static voter set: one that no Voters record states) cannot change
  (UNSUPPORTED_VERSION); UpdateRaftVoter is answered there as Kafka does, keeping nothing.
- AddRaftVoter probes the new replica with ApiVersions (the effect CheckVoterVersions, answered
  by the event VoterVersionsChecked: the pure core sends no ApiVersions itself), then requires
  it to be caught up as Kafka does (`isReplicaCaughtUp`: fetching from this leader as an
  observer with that exact key, caught up once and last fetched within the hour).
- The change is a Voters record holding the whole new set, appended by the leader; it takes
  effect when appended (kraft.core.voter_records.refresh_voters) and is undone if truncated.
- Its answer follows the commit rule (kraft.core.commits, a CommitRule of its own): NONE once
  the record commits, NOT_LEADER_OR_FOLLOWER if it is lost. UpdateRaftVoter is answered when
  appended, as Kafka does; AddRaftVoter v1 with ack_when_committed false too (KIP-1186).
- A leader that is not in the committed voter set resigns (EndQuorumEpoch) at its next tick,
  as Kafka's RemoveVoterHandler requests it; until then it leads without counting itself
  toward the high watermark (kraft.core.leader.LeaderState.advance_hwm).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from kraft.control_records import Endpoint, VoterEntry, VotersRecord, encode_control_records
from kraft.core.commits import CommitRule
from kraft.core.effects import (
    ActionTaken,
    AppendCommitted,
    AppendLost,
    CheckVoterVersions,
)
from kraft.core.events import VoterVersionsChecked
from kraft.core.java_order import voter_keys_text
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
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_records import refresh_voters, voter_set_of
from kraft.core.voter_set import KRAFT_VERSION_DYNAMIC
from kraft.errors import ErrorCode
from kraft.ids import NO_DIRECTORY, ClusterId, Epoch, NodeId, Offset, ReplicaKey

if TYPE_CHECKING:
    from kraft.core.leader import Peer
    from kraft.core.replica import Replica

__all__ = [
    "CAUGHT_UP_WITHIN_MS",
    "VOTER_CHANGE_REQUESTS",
    "VOTER_CHANGE_RESPONSES",
    "VoterChanges",
]

L = ReplicaState.LEADER

# Kafka's LeaderState.isReplicaCaughtUp: a replica that fetched within the last hour.
CAUGHT_UP_WITHIN_MS = 3_600_000
# The VotersRecord version Kafka writes (ControlRecordUtils.KRAFT_VOTERS_CURRENT_VERSION).
VOTERS_RECORD_VERSION = 0


# The voter changes' requests (received only: never sent, so never failed) and responses
# (sent only).
VOTER_CHANGE_REQUESTS: tuple[type[Request], ...] = (
    AddVoterRequest,
    RemoveVoterRequest,
    UpdateVoterRequest,
)
VOTER_CHANGE_RESPONSES: tuple[type[Message], ...] = (
    AddVoterResponse,
    RemoveVoterResponse,
    UpdateVoterResponse,
)


class _Kind(Enum):
    ADD = "add"
    REMOVE = "remove"


@dataclass(slots=True)
class _Change:
    """A change this replica accepted, until it is answered."""

    kind: _Kind
    src: NodeId
    reply_to: int | None
    voter: ReplicaKey
    endpoints: tuple[Endpoint, ...]
    epoch: Epoch
    deadline: int
    ack_when_committed: bool = True
    # The offset of its Voters record once appended (None: still probing the new voter).
    offset: Offset | None = None
    # Answered already (at its append, when not acknowledged at commit).
    answered: bool = False


class VoterChanges:
    """The voter changes of one replica: the requests' checks, the change in flight, the
    answers. Holds a reference to the replica and works on its state."""

    __slots__ = ("_commits", "_next_id", "_pending", "_r")

    def __init__(self, replica: Replica) -> None:
        self._r = replica
        self._pending: dict[int, _Change] = {}
        self._commits = CommitRule()
        self._next_id = 0

    # ------------------------------------------------------------------ common checks

    def _kraft_version(self) -> int:
        """kraft.version 1 when a Voters record states the voter set, else 0 (the static
        `controller.quorum.voters`); a KRaftVersion record always comes with the first one."""
        return KRAFT_VERSION_DYNAMIC if self._r._voters.record is not None else 0

    def message_handlers(self) -> dict[type[Message], Callable[..., None]]:
        """The replica's dispatch entries for the requests this module answers."""
        return {
            AddVoterRequest: self.handle_add_request,
            RemoveVoterRequest: self.handle_remove_request,
            UpdateVoterRequest: self.handle_update_request,
        }

    def event_handlers(self) -> dict[type, Callable[..., None]]:
        return {VoterVersionsChecked: self.on_versions_checked}

    def refusals(self) -> dict[type[Message], Callable[[], Message]]:
        """The answers to a voter change refused for an unrepresentable value (none is:
        kraft.core.bounds leaves their checks to the handlers, as Kafka answers them)."""
        r = self._r
        return {
            AddVoterRequest: lambda: AddVoterResponse(ErrorCode.INVALID_REQUEST),
            RemoveVoterRequest: lambda: RemoveVoterResponse(ErrorCode.INVALID_REQUEST),
            UpdateVoterRequest: lambda: UpdateVoterResponse(
                ErrorCode.INVALID_REQUEST, r._leader_or_none(), r._epoch
            ),
        }

    def operation_pending(self) -> bool:
        """Kafka's isOperationPending: a change accepted by this leader, not yet answered."""
        r = self._r
        return any(c.epoch == r._epoch for c in self._pending.values())

    def _change_refusal(self, verb: str) -> tuple[ErrorCode, str] | None:
        """The handlers' shared checks, in Kafka's order, after the pending check."""
        r = self._r
        ld = r._leader
        assert ld is not None
        hwm = ld.hwm
        if hwm is None:
            return ErrorCode.REQUEST_TIMED_OUT, (
                "Request timed out waiting for leader to establish HWM and fence previous "
                "voter changes"
            )
        version = self._kraft_version()
        if version < KRAFT_VERSION_DYNAMIC:
            return ErrorCode.UNSUPPORTED_VERSION, (
                f"Cluster doesn't support {verb} voter because the kraft.version feature is "
                f"{version}"
            )
        voters_at = r._log.voters_offset
        if voters_at >= hwm:
            return ErrorCode.REQUEST_TIMED_OUT, (
                f"Request timed out waiting for voters to commit the latest voter change at "
                f"{voters_at} with HWM {hwm}"
            )
        return None

    def _has_default_listener(self, endpoints: tuple[Endpoint, ...]) -> bool:
        name = self._r._cfg.listener_name
        return any(e.name == name for e in endpoints)

    @staticmethod
    def _valid_key(voter: ReplicaKey) -> bool:
        return voter.id >= 0 and voter.directory_id != NO_DIRECTORY

    def _answer(self, dst: NodeId, reply_to: int | None, msg: Message) -> None:
        r = self._r
        outer, r._reply_to = r._reply_to, reply_to
        try:
            r._send(dst, msg)
        finally:
            r._reply_to = outer

    def _first_checks(
        self, cluster_id: ClusterId | None, voter: ReplicaKey, what: str
    ) -> tuple[ErrorCode, str | None] | None:
        """Kafka's first checks of AddRaftVoter and RemoveRaftVoter, in its order: the cluster
        id, that we lead, that the voter key is valid. The refusal, or None."""
        r = self._r
        if cluster_id is not None and r._request_error(cluster_id) is not None:
            return (
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f'The given id "{cluster_id}" doesn\'t match the cluster id "{r._cfg.cluster_id}"',
            )
        refused = r._leader_only_error(r._epoch)  # names our epoch: whether we lead
        if refused is not None:
            return refused, None
        if not self._valid_key(voter):
            return ErrorCode.INVALID_REQUEST, f"{what} voter request didn't include a valid voter"
        return None

    # ------------------------------------------------------------------ AddRaftVoter

    def handle_add_request(
        self, src: NodeId, req: AddVoterRequest, _in_reply_to: Request | None
    ) -> None:
        r = self._r

        def refuse(error: ErrorCode, message: str | None = None) -> None:
            r._send(src, AddVoterResponse(error, message))

        problem = self._first_checks(req.cluster_id, req.voter, "Add")
        if problem is not None:
            refuse(*problem)
            return
        if not self._has_default_listener(req.endpoints):
            refuse(
                ErrorCode.INVALID_REQUEST,
                "Add voter request didn't include the endpoint for the default listener "
                f"{r._cfg.listener_name}",
            )
            return
        if self.operation_pending():
            refuse(
                ErrorCode.REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to handle previous voter change request",
            )
            return
        refusal = self._change_refusal("adding")
        if refusal is not None:
            refuse(*refusal)
            return
        if r._voters.contains_id(req.voter.id):
            refuse(
                ErrorCode.DUPLICATE_VOTER,
                f"The voter id for {req.voter.kafka_text()} is already part of the set of "
                f"voters {voter_keys_text(r._voters.voters)}.",
            )
            return
        self._accept(
            _Change(
                _Kind.ADD,
                src,
                r._reply_to,
                req.voter,
                req.endpoints,
                r._epoch,
                r._now + r._timing.request_timeout_ms,
                req.ack_when_committed,
            )
        )
        r._out.append(CheckVoterVersions(req.voter, req.endpoints))

    def on_versions_checked(self, ev: VoterVersionsChecked) -> None:
        """The new voter's ApiVersions answer: add it if it supports our kraft.version and
        is caught up (Kafka's AddVoterHandler.handleApiVersionsResponse)."""
        r = self._r
        found = [
            (i, c)
            for i, c in self._pending.items()
            if c.kind is _Kind.ADD
            and c.offset is None
            and c.epoch == r._epoch
            and c.voter.id == ev.voter_id
        ]
        if not found or r._leader is None:
            return  # not expected: ignored, as Kafka does
        change_id, change = found[0]
        if ev.error is not ErrorCode.NONE:
            self._finish(
                change_id,
                ErrorCode.REQUEST_TIMED_OUT,
                f"Aborted add voter operation since API_VERSIONS returned an error {ev.error.name}",
            )
            return
        version = self._kraft_version()
        span = ev.kraft_versions
        if span is None or not span[0] <= version <= span[1]:
            # Kafka 4.3.1's texts, its missing closing parenthesis included.
            shown = "(min: 0, max: 0)" if span is None else f"(min: {span[0]}, max: {span[1]}"
            self._finish(
                change_id,
                ErrorCode.INVALID_REQUEST,
                f"Aborted add voter operation for {change.voter.kafka_text()} since the "
                f"kraft.version range {shown} doesn't support the finalized version {version}",
            )
            return
        if not self._caught_up(change.voter):
            self._finish(
                change_id,
                ErrorCode.REQUEST_TIMED_OUT,
                f"Aborted add voter operation for {change.voter.kafka_text()} since it is lagging "
                "behind",
            )
            return
        entry = VoterEntry(
            int(change.voter.id),
            change.voter.directory_id,
            change.endpoints,
            span[0],
            span[1],
        )
        current = r._voters.record
        assert current is not None
        voters = tuple(v for v in current.voters if v.voter_id != entry.voter_id)
        self._append_voters(change_id, change, (*voters, entry), Action.ADD_VOTER)

    def _caught_up(self, voter: ReplicaKey) -> bool:
        ld = self._r._leader
        assert ld is not None
        peer: Peer | None = ld.observers.get(voter)
        return (
            peer is not None
            and peer.last_caught_up_ms is not None
            and peer.last_fetch_ms is not None
            and peer.last_fetch_ms > self._r._now - CAUGHT_UP_WITHIN_MS
        )

    # ------------------------------------------------------------------ RemoveRaftVoter

    def handle_remove_request(
        self, src: NodeId, req: RemoveVoterRequest, _in_reply_to: Request | None
    ) -> None:
        r = self._r

        def refuse(error: ErrorCode, message: str | None = None) -> None:
            r._send(src, RemoveVoterResponse(error, message))

        problem = self._first_checks(req.cluster_id, req.voter, "Remove")
        if problem is not None:
            refuse(*problem)
            return
        if self.operation_pending():
            refuse(
                ErrorCode.REQUEST_TIMED_OUT,
                "Request timed out waiting for leader to handle previous voter change request",
            )
            return
        refusal = self._change_refusal("removing")
        if refusal is not None:
            refuse(*refusal)
            return
        current = r._voters.record
        assert current is not None
        # Kafka's VoterSet.removeVoter: the exact key, and never the last voter.
        keep = tuple(
            v
            for v in current.voters
            if not (v.voter_id == req.voter.id and v.voter_directory_id == req.voter.directory_id)
        )
        if len(keep) == len(current.voters) or not keep:
            refuse(
                ErrorCode.VOTER_NOT_FOUND,
                f"Cannot remove voter {req.voter.kafka_text()} from the set of voters "
                f"{voter_keys_text(r._voters.voters)}",
            )
            return
        change = _Change(
            _Kind.REMOVE,
            src,
            r._reply_to,
            req.voter,
            (),
            r._epoch,
            r._now + r._timing.request_timeout_ms,
        )
        change_id = self._accept(change)
        self._append_voters(change_id, change, keep, Action.REMOVE_VOTER)

    # ------------------------------------------------------------------ UpdateRaftVoter

    def handle_update_request(
        self, src: NodeId, req: UpdateVoterRequest, _in_reply_to: Request | None
    ) -> None:
        """Kafka's KafkaRaftClient.handleUpdateVoterRequest then UpdateVoterHandler: answered
        at once; a change is a Voters record with the voter's new endpoints and range."""
        r = self._r

        def answer(error: ErrorCode) -> None:
            leader = r._me.id if r._state is L else r._leader_or_none()
            r._send(src, UpdateVoterResponse(error, leader, r._epoch))

        if req.cluster_id is not None and r._request_error(req.cluster_id) is not None:
            answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
            return
        refused = r._leader_only_error(req.leader_epoch)
        ld = r._leader
        if refused is not None or ld is None:
            answer(refused or ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        lo, hi = req.min_kraft_version, req.max_kraft_version
        # Kafka also refuses max < 0; that is implied here: max < 0 <= min, or min <= max < 0.
        if (
            not self._valid_key(req.voter)
            or not self._has_default_listener(req.endpoints)
            or lo < 0
            or hi < lo
        ):
            answer(ErrorCode.INVALID_REQUEST)
            return
        if self.operation_pending() or ld.hwm is None:
            answer(ErrorCode.REQUEST_TIMED_OUT)
            return
        version = self._kraft_version()
        if version < KRAFT_VERSION_DYNAMIC:
            # Kafka at kraft.version 0 keeps the update in memory only; we keep nothing.
            if not lo <= version <= hi:
                answer(ErrorCode.INVALID_REQUEST)
            elif not r._voters.contains_id(req.voter.id):
                answer(ErrorCode.VOTER_NOT_FOUND)
            else:
                answer(ErrorCode.NONE)
            return
        if r._log.voters_offset >= ld.hwm:
            answer(ErrorCode.REQUEST_TIMED_OUT)
            return
        if not lo <= version <= hi:
            answer(ErrorCode.INVALID_REQUEST)
            return
        if not r._voters.contains(req.voter):
            answer(ErrorCode.VOTER_NOT_FOUND)
            return
        current = r._voters.record
        assert current is not None
        # The voter takes the request's key, as Kafka's VoterSet.updateVoter puts it: a voter
        # known by its id alone gains the directory id it names.
        updated = tuple(
            VoterEntry(v.voter_id, req.voter.directory_id, req.endpoints, lo, hi)
            if v.voter_id == req.voter.id
            else v
            for v in current.voters
        )
        self._write_voters(updated)
        answer(ErrorCode.NONE)

    # ------------------------------------------------------------------ the record

    def _accept(self, change: _Change) -> int:
        change_id = self._next_id
        self._next_id += 1
        self._pending[change_id] = change
        return change_id

    def _write_voters(self, voters: tuple[VoterEntry, ...]) -> Offset:
        """Append a Voters record of `voters` (sorted by id, as Kafka's VoterSet iterates
        them) as its own batch in the leader's epoch; the set is in force at once."""
        r = self._r
        record = VotersRecord(
            VOTERS_RECORD_VERSION, tuple(sorted(voters, key=lambda v: v.voter_id))
        )
        r._lead._append_lingering()  # waiting client values first, as Kafka's accumulator
        offset = r._log.end_offset
        data = encode_control_records(offset, r._epoch, [record], timestamp_ms=r._now)
        voter_set = voter_set_of(record)
        r._lead._append(offset, offset, data, [(offset, voter_set)])
        # The leader's next BeginQuorumEpoch round asks the voters of this set (a removed
        # voter's request in flight keeps its connection busy, as Kafka's RequestManager).
        refresh_voters(r)
        r._lead._maybe_advance_hwm()
        return offset

    def _append_voters(
        self, change_id: int, change: _Change, voters: tuple[VoterEntry, ...], action: Action
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(action, change.voter))
        offset = self._write_voters(voters)
        change.offset = offset
        if not change.ack_when_committed:
            self._reply(change, ErrorCode.NONE, None)
            change.answered = True
        self._decided(
            self._commits.accepted(
                change_id, offset, offset, r._epoch, high_watermark=r._hwm, log=r._log
            )
        )

    # ------------------------------------------------------------------ answers

    def _reply(self, change: _Change, error: ErrorCode, message: str | None) -> None:
        msg: Message
        if change.kind is _Kind.ADD:
            msg = AddVoterResponse(error, message)
        else:
            msg = RemoveVoterResponse(error, message)
        self._answer(change.src, change.reply_to, msg)

    def _finish(self, change_id: int, error: ErrorCode, message: str | None) -> None:
        change = self._pending.pop(change_id, None)
        if change is not None and not change.answered:
            self._reply(change, error, message)

    def _decided(self, outcomes: list[AppendCommitted | AppendLost]) -> None:
        """Answer the changes whose Voters record the commit rule decided."""
        for outcome in outcomes:
            if isinstance(outcome, AppendCommitted):
                self._finish(outcome.request_id, ErrorCode.NONE, None)
            else:
                self._finish(outcome.request_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)

    def high_watermark_raised(self, hwm: Offset) -> None:
        """The replica's HWM rose: answer the changes it committed; a leader outside the
        committed voter set asks to resign (at its next tick)."""
        r = self._r
        self._decided(self._commits.high_watermark_raised(hwm, r._log))
        ld = r._leader
        if (
            ld is not None
            and not r._is_voter
            and r._log.voters_offset < hwm
            and ld.resign_at is None
        ):
            ld.resign_at = r._now

    def left_leadership(self) -> None:
        """The leader stepped down: every change still pending is answered
        NOT_LEADER_OR_FOLLOWER at once, whether it still probes its new voter or its record
        is appended (Kafka's LeaderState.close resets both handler states with that error);
        nothing is left for the commit rule to decide (only a leader accepts changes, and a
        follower's truncation can only undo records of changes already answered)."""
        for change_id in list(self._pending):
            self._finish(change_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
        self._commits = CommitRule()

    def tick(self) -> None:
        """Changes pending longer than request_timeout_ms are answered REQUEST_TIMED_OUT."""
        now = self._r._now
        for change_id, change in list(self._pending.items()):
            if change.deadline <= now:
                self._finish(change_id, ErrorCode.REQUEST_TIMED_OUT, None)

    def next_deadline(self) -> int | None:
        return min((c.deadline for c in self._pending.values()), default=None)
