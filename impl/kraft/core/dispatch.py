"""Which handler of a replica takes each event, message and failed request, and the path of a
received message to its handler.

`dispatch_tables` builds the replica's four tables, keyed by the exact type: events
(`Replica._on_event`), messages (`_on_message`: a handler takes the sender, the message and the
request it answers), the answer to a request refused for an unrepresentable value
(`_refusals`), and what a request that could not be delivered does (`_on_failed`). The
handlers live by role (kraft.core.election, leader, follower, snapshots, snapshot_transfer) or
on the replica (kraft.core.replica: timers, shutdown, EndQuorumEpoch answers); a type added to
kraft.core.events or kraft.core.messages needs an entry here (tests/unit/test_replica_dispatch).

`on_receive` is the receive path: the reply token of the request being answered is set for the
responses the handler sends, a message carrying a value out of bounds (kraft.core.bounds) is
refused before it touches any state, every other goes to its handler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kraft.core.bounds import out_of_bounds
from kraft.core.effects import MessageRefused
from kraft.core.events import (
    ClientAppend,
    CreateSnapshot,
    DeleteBeforeSnapshot,
    Receive,
    SendFailed,
    Shutdown,
    SnapshotValidated,
    SnapshotWritten,
    Tick,
)
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
from kraft.core.reconfig import VOTER_CHANGE_REQUESTS, VOTER_CHANGE_RESPONSES
from kraft.ids import NodeId

if TYPE_CHECKING:
    from kraft.core.replica import Replica

__all__ = ["DispatchTables", "Handler", "dispatch_tables"]

# A message handler of the dispatch table: (sender, message, the request it answers). Each
# handler is registered under the one message type it takes.
Handler = Callable[[NodeId, Any, Request | None], None]


@dataclass(frozen=True, slots=True)
class DispatchTables:
    """A replica's tables (mutable dicts: the simulator's mutants re-point entries)."""

    on_event: dict[type, Callable[[Any], None]]
    on_message: dict[type[Message], Handler]
    refusals: dict[type[Message], Callable[[], Message]]
    on_failed: dict[type[Request], Callable[[SendFailed], None]]


def dispatch_tables(r: Replica) -> DispatchTables:
    """The tables of `r`, whose roles exist already."""
    fetcher = r._fetcher
    return DispatchTables(
        on_event={
            Tick: r._on_tick,
            Receive: lambda ev: on_receive(r, ev),
            SendFailed: lambda ev: r._on_failed[type(ev.request)](ev),
            ClientAppend: r._appends.on_client_append,
            Shutdown: r._on_shutdown,
            CreateSnapshot: r._snaps.on_create_snapshot,
            SnapshotWritten: r._snaps.on_snapshot_written,
            DeleteBeforeSnapshot: r._snaps.on_delete_before_snapshot,
            SnapshotValidated: lambda ev: _on_snapshot_validated(r, ev),
            **r._reconfig.event_handlers(),
        },
        on_message={
            VoteRequest: r._elect.handle_vote_request,
            VoteResponse: r._elect.handle_vote_response,
            BeginQuorumEpochRequest: r._follow.handle_begin_request,
            BeginQuorumEpochResponse: r._lead.handle_begin_response,
            EndQuorumEpochRequest: r._follow.handle_end_request,
            EndQuorumEpochResponse: r._handle_end_response,
            FetchRequest: r._lead.handle_fetch_request,
            FetchResponse: r._follow.handle_fetch_response,
            FetchSnapshotRequest: r._snaps.handle_fetch_snapshot_request,
            # A replica that fetches no snapshot ignores an answer.
            FetchSnapshotResponse: _ignore if fetcher is None else fetcher.handle_response,
            **r._reconfig.message_handlers(),
            **dict.fromkeys(VOTER_CHANGE_RESPONSES, _ignore),  # the core sends these only
        },
        refusals={
            VoteRequest: r._elect.refusal,
            FetchRequest: r._lead.fetch_refusal,
            BeginQuorumEpochRequest: r._follow.begin_refusal,
            EndQuorumEpochRequest: r._follow.end_refusal,
            FetchSnapshotRequest: r._snaps.fetch_snapshot_refusal,
            **r._reconfig.refusals(),
        },
        # A request that could not be delivered: retried after retry_backoff_ms by its role
        # (EndQuorumEpoch is not retried).
        on_failed={
            VoteRequest: r._elect.vote_failed,
            BeginQuorumEpochRequest: r._lead.begin_failed,
            FetchRequest: r._follow.fetch_failed,
            EndQuorumEpochRequest: r._end_failed,
            FetchSnapshotRequest: (
                _ignore_failed if fetcher is None else fetcher.fetch_snapshot_failed
            ),
            **dict.fromkeys(VOTER_CHANGE_REQUESTS, _ignore_failed),  # received, never sent
        },
    )


def on_receive(r: Replica, ev: Receive) -> None:
    r._reply_to = ev.reply_to
    try:
        msg = ev.message
        problem = out_of_bounds(msg)
        if problem is not None:
            _refuse_out_of_bounds(r, ev.src, msg, problem)
            return
        r._on_message[type(msg)](ev.src, msg, ev.in_reply_to)
    finally:
        r._reply_to = None


def _refuse_out_of_bounds(r: Replica, src: NodeId, msg: Message, reason: str) -> None:
    """Answer a request carrying an unrepresentable value with INVALID_REQUEST, before it
    touches any state; drop such a response (the request it answers is retried)."""
    r._out.append(MessageRefused(src, type(msg).__name__, reason))
    refusal = r._refusals.get(type(msg))
    if refusal is not None:
        r._send(src, refusal())


def _on_snapshot_validated(r: Replica, ev: SnapshotValidated) -> None:
    if r._fetcher is not None:
        r._fetcher.on_validated(ev)


def _ignore(_src: NodeId, _msg: Message, _in_reply_to: Request | None) -> None:
    pass


def _ignore_failed(_ev: SendFailed) -> None:
    pass
