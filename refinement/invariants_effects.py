"""Checkers of the effect contract: which request an answer answers, that every request and
every client append gets its one answer, and that a shutdown completes once.

A driver hands every request it delivers a reply token (Receive.reply_to), and the core hands
that token back on the Send that answers it, however much later (a Fetch a leader holds is
answered on a later step): the node routes an answer by its token alone (kraft.server.inbound).
The simulator gives tokens as the node does and keeps a ledger per replica incarnation of the
requests and client appends it was given and has not answered (`EffectLedger`):

- ResponseAnswersItsRequest: a response names the token of a request this incarnation
  received from the node the response goes to, of the request type it answers, and not yet
  answered: no request is answered twice, and no answer is routed to a request it does not
  answer (the requester would take it for the answer to that one).
- RequestAnswered: a request is answered in the step that received it, except a Fetch a
  leader holds for its max wait (KIP-595's long poll); a replica that is not a leader holds
  no request, so a leader answers what it holds by the time it steps down (Kafka completes
  its delayed fetches when the epoch ends). A request never answered is a requester left
  waiting for its request timeout.
- ClientAppendAnsweredOnce: every ClientAppend gets exactly one AppendResult from the
  incarnation it was given to: none for an append it was not given or already answered, and
  none left unanswered by a replica that is not leading (a leader holds only what lingers in
  its accumulator, and only with quorum.append.linger.ms > 0).
- AppendDecidedAfterAccepted: a client append's outcome (AppendCommitted or AppendLost) comes
  after the AppendResult that accepted it, in the effects of the incarnation that accepted it,
  and only once: also when both come in one step (a producer's resend of a batch that already
  committed is accepted and decided at once, kraft.core.commits). A driver reading the effects
  in order learns that an append was accepted, at which offsets, before it learns its fate.
- ShutdownCompleteOnce: a replica says ShutdownComplete at most once per incarnation. A driver
  may step a replica with events it had queued after the one that completed the shutdown (the
  node's driver does, until its loop stops): those bring no second ShutdownComplete.
- ShutdownAwaitsEndQuorumEpoch: a leader told to shut down resigns with EndQuorumEpoch to the
  other voters and says ShutdownComplete only once each of those requests was answered or
  failed, or its request timeout since the Shutdown passed (the core's graceful shutdown,
  kraft.core.replica: the resigned leader stays up, bounded by the request timeout as Kafka's
  shutdown timer bounds it, so that its resignation is heard before it stops).

A crash ends an incarnation with whatever it held: its ledger is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft.core.messages import (
    BeginQuorumEpochRequest,
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
from kraft.core.vocabulary import ReplicaState
from kraft.ids import NodeId
from refinement.invariants import Violation

RESPONSE_ANSWERS_ITS_REQUEST = "ResponseAnswersItsRequest"
REQUEST_ANSWERED = "RequestAnswered"
CLIENT_APPEND_ANSWERED_ONCE = "ClientAppendAnsweredOnce"
APPEND_DECIDED_AFTER_ACCEPTED = "AppendDecidedAfterAccepted"
SHUTDOWN_COMPLETE_ONCE = "ShutdownCompleteOnce"
SHUTDOWN_AWAITS_END_QUORUM_EPOCH = "ShutdownAwaitsEndQuorumEpoch"

# The request each response answers (the peer RPCs a simulator delivers).
ANSWERS: dict[type, type] = {
    VoteResponse: VoteRequest,
    BeginQuorumEpochResponse: BeginQuorumEpochRequest,
    EndQuorumEpochResponse: EndQuorumEpochRequest,
    FetchResponse: FetchRequest,
    FetchSnapshotResponse: FetchSnapshotRequest,
}

L = ReplicaState.LEADER


@dataclass(frozen=True, slots=True)
class Held:
    """A request a replica was given and has not answered: from whom, and what."""

    src: NodeId
    request: Request

    @property
    def may_wait(self) -> bool:
        """A Fetch with a max wait: a leader may hold it (KIP-595's long poll)."""
        return type(self.request) is FetchRequest and self.request.max_wait_ms > 0


@dataclass(slots=True)
class _Incarnation:
    requests: dict[int, Held] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)
    appends: set[int] = field(default_factory=set)
    # Client appends it accepted (AppendResult without error) and has not decided.
    accepted: set[int] = field(default_factory=set)
    shutdowns: int = 0
    # When it was told to shut down, and the voters its EndQuorumEpoch since then went to
    # that have neither answered nor failed.
    shutdown_at: int | None = None
    end_out: set[NodeId] = field(default_factory=set)


class EffectLedger:
    """What each running replica incarnation was given and has not answered."""

    __slots__ = ("_linger", "_nodes")

    def __init__(self, *, linger: bool) -> None:
        # With quorum.append.linger.ms > 0 a leader may hold client appends across steps.
        self._linger = linger
        self._nodes: dict[NodeId, _Incarnation] = {}

    def _of(self, node: NodeId) -> _Incarnation:
        inc = self._nodes.get(node)
        if inc is None:
            inc = self._nodes[node] = _Incarnation()
        return inc

    def stopped(self, node: NodeId) -> None:
        """The incarnation ended (crash, clean stop, disk loss): what it held dies with it."""
        self._nodes.pop(node, None)

    # ------------------------------------------------------------------ requests

    def holds_request(self, node: NodeId) -> bool:
        """The incarnation holds a request it has not answered (a leader's held Fetch)."""
        inc = self._nodes.get(node)
        return inc is not None and bool(inc.requests)

    def request_received(self, node: NodeId, token: int, src: NodeId, request: Request) -> None:
        self._of(node).requests[token] = Held(src, request)

    def request_of(self, node: NodeId, token: int) -> Request | None:
        """The request the incarnation holds under `token`, not yet answered."""
        inc = self._nodes.get(node)
        held = None if inc is None else inc.requests.get(token)
        return None if held is None else held.request

    def response_sent(
        self, node: NodeId, dst: NodeId, msg: Message, token: int | None
    ) -> Violation | None:
        """ResponseAnswersItsRequest for one response Send."""
        inc = self._of(node)
        what = type(msg).__name__
        if token is None:
            return Violation(
                RESPONSE_ANSWERS_ITS_REQUEST,
                f"node {node} sent a {what} to {dst} that names no request (no reply token)",
            )
        held = inc.requests.pop(token, None)
        if held is None:
            again = "already answered" if token in inc.answered else "never received"
            return Violation(
                RESPONSE_ANSWERS_ITS_REQUEST,
                f"node {node} sent a {what} to {dst} as the answer to request {token}, which"
                f" it {again}",
            )
        inc.answered.add(token)
        want = ANSWERS.get(type(msg))
        if held.src != dst or type(held.request) is not want:
            return Violation(
                RESPONSE_ANSWERS_ITS_REQUEST,
                f"node {node} sent a {what} to {dst} as the answer to request {token}, the"
                f" {type(held.request).__name__} of node {held.src}",
            )
        return None

    # ------------------------------------------------------------------ client appends

    def append_received(self, node: NodeId, request_id: int) -> None:
        self._of(node).appends.add(request_id)

    def append_answered(self, node: NodeId, request_id: int) -> Violation | None:
        """ClientAppendAnsweredOnce for one AppendResult."""
        inc = self._of(node)
        if request_id in inc.appends:
            inc.appends.discard(request_id)
            return None
        return Violation(
            CLIENT_APPEND_ANSWERED_ONCE,
            f"node {node} answered client append {request_id}, which it was not given or had"
            " answered already",
        )

    def append_accepted(self, node: NodeId, request_id: int) -> None:
        """An AppendResult without error: the append awaits its outcome."""
        self._of(node).accepted.add(request_id)

    def append_decided(self, node: NodeId, request_id: int, outcome: str) -> Violation | None:
        """AppendDecidedAfterAccepted for one AppendCommitted or AppendLost (`outcome`)."""
        inc = self._of(node)
        if request_id in inc.accepted:
            inc.accepted.discard(request_id)
            return None
        return Violation(
            APPEND_DECIDED_AFTER_ACCEPTED,
            f"node {node} said {outcome} for client append {request_id}, which it had not"
            " answered accepted before (or had decided already)",
        )

    # ------------------------------------------------------------------ shutdown

    def shutdown_asked(self, node: NodeId, now: int) -> None:
        inc = self._of(node)
        if inc.shutdown_at is None:
            inc.shutdown_at = now

    def end_sent(self, node: NodeId, dst: NodeId) -> None:
        """An EndQuorumEpoch request went out (counted once the shutdown was asked)."""
        inc = self._of(node)
        if inc.shutdown_at is not None:
            inc.end_out.add(dst)

    def end_settled(self, node: NodeId, peer: NodeId) -> None:
        """`peer` answered an EndQuorumEpoch of `node`, or sending one to it failed."""
        inc = self._nodes.get(node)
        if inc is not None:
            inc.end_out.discard(peer)

    def shutdown_completed(
        self, node: NodeId, now: int | None = None, timeout_ms: int = 0
    ) -> Violation | None:
        """ShutdownCompleteOnce for one ShutdownComplete, and (given the time and the request
        timeout) ShutdownAwaitsEndQuorumEpoch."""
        inc = self._of(node)
        inc.shutdowns += 1
        at = inc.shutdown_at
        if (
            inc.shutdowns == 1
            and now is not None
            and at is not None
            and inc.end_out
            and now < at + timeout_ms
        ):
            return Violation(
                SHUTDOWN_AWAITS_END_QUORUM_EPOCH,
                f"node {node} said ShutdownComplete {now - at}ms after it was told to shut"
                f" down, before the request timeout ({timeout_ms}ms), while its EndQuorumEpoch"
                f" to {sorted(inc.end_out)} was neither answered nor failed",
            )
        if inc.shutdowns == 1:
            return None
        return Violation(
            SHUTDOWN_COMPLETE_ONCE,
            f"node {node} said ShutdownComplete {inc.shutdowns} times in one incarnation",
        )

    # ------------------------------------------------------------------ after a step

    def after_step(self, node: NodeId, state: ReplicaState | None) -> Violation | None:
        """RequestAnswered and the rest of ClientAppendAnsweredOnce, at the end of a step:
        what the replica still holds, it may hold."""
        inc = self._nodes.get(node)
        if inc is None:
            return None
        leading = state is L
        for token, held in inc.requests.items():
            if not (leading and held.may_wait):
                role = "a leader" if leading else f"{state.value if state else 'down'}"
                return Violation(
                    REQUEST_ANSWERED,
                    f"node {node} ({role}) left the {type(held.request).__name__} of node"
                    f" {held.src} (request {token}) unanswered",
                )
        if inc.appends and not (leading and self._linger):
            role = "leader" if leading else f"{state.value if state else 'down'}"
            return Violation(
                CLIENT_APPEND_ANSWERED_ONCE,
                f"node {node} ({role}) left client appends {sorted(inc.appends)[:10]} unanswered",
            )
        return None
