"""A real node's trace file: one line per step that took a spec action or changed state.

The line format (keys, what each carries, `ns`) is kraft.trace_format's, the same as the
simulator's; this module only decides which steps a node traces and appends them to its file.
It must not import `refinement`: a node carries no verification code.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO

from kraft.core.effects import ActionTaken, Effect, StateChanged
from kraft.core.events import ClientAppend, Event, Receive, SendFailed
from kraft.core.replica_view import ReplicaView
from kraft.ids import NodeId
from kraft.trace_format import (
    JsonObject,
    TraceEvent,
    encode,
    local_event_json,
    message_json,
    state_json,
)


class TraceFile:
    """Appends trace lines to a file, flushed per line so a killed node leaves a whole trace."""

    __slots__ = ("_out", "count", "node_id", "restarted")

    def __init__(self, path: Path, node_id: NodeId) -> None:
        # A restarted node continues its file: indices go on, and its first line says Restart.
        self.count = _line_count(path)
        self.restarted = self.count > 0
        self._out: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.node_id = node_id

    def start(self, now_ms: int, effects: list[Effect], view: ReplicaView) -> None:
        """The line of replica.start(): action Start, or Restart for a continued file."""
        first = "Restart" if self.restarted else "Start"
        actions = [first, *(e.action.value for e in effects if isinstance(e, ActionTaken))]
        self._write(now_ms, first, actions, None, view)

    def step(self, now_ms: int, event: Event, effects: list[Effect], view: ReplicaView) -> None:
        actions = [e.action.value for e in effects if isinstance(e, ActionTaken)]
        if not actions and not any(isinstance(e, StateChanged) for e in effects):
            return  # a tick that changed nothing
        me = int(self.node_id)
        message: JsonObject | None = None
        if isinstance(event, Receive):
            message = message_json(event.message, int(event.src), me)
        elif isinstance(event, SendFailed):
            message = message_json(event.request, me, int(event.dst))
        elif isinstance(event, ClientAppend):
            message = {
                "type": "ClientAppend",
                "requestId": event.request_id,
                "records": len(event.records),
            }
        else:
            message = local_event_json(event)  # the snapshot events trace validation reads
        voter = next((e.voter for e in effects if isinstance(e, ActionTaken) and e.voter), None)
        name = actions[0] if actions else type(event).__name__
        self._write(
            now_ms, name, actions, message, view, voter=None if voter is None else int(voter.id)
        )

    def _write(
        self,
        now_ms: int,
        action: str,
        actions: list[str],
        message: JsonObject | None,
        view: ReplicaView,
        *,
        voter: int | None = None,
    ) -> None:
        event = TraceEvent(
            index=self.count,
            time=now_ms,
            node=int(self.node_id),
            action=action,
            actions=tuple(actions),
            message=message,
            state=state_json(view),
            ns=time.monotonic_ns(),
            voter=voter,
        )
        self._out.write(encode(event) + "\n")
        self._out.flush()
        self.count += 1

    def close(self) -> None:
        self._out.close()


def _line_count(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return 0
