"""ndjson traces of a real node, in the simulator's trace shape (see refinement.trace).

One line per step of the replica that took a spec action or changed state:
{"index", "time", "node", "action", "actions", "message", "state", "ns"}, keys sorted, no spaces.
`message` is the message received ({"type", "src", "dst", fields in camelCase, record data as
"batches": [[base offset, last offset, epoch], ...]}); `state` is the node's state after the
step. `ns` is time.monotonic_ns() when the line is written: one clock for every process of a
machine, finer than `time`, so the traces of several local nodes merge in causal order (the
line is written before the step's sends leave). This module must not import `refinement`: a
node carries no verification code.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO

from kraft.core.effects import ActionTaken, Effect, StateChanged
from kraft.core.events import ClientAppend, Event, Receive, SendFailed
from kraft.core.replica import ReplicaView
from kraft.ids import NodeId
from kraft.trace_format import (
    JsonObject,
    JsonValue,
    message_json,
    state_json,
    summarize_batches,
)

__all__ = ["JsonObject", "TraceFile", "message_json", "state_json", "summarize_batches"]


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
        self._write(now_ms, actions[0] if actions else type(event).__name__, actions, message, view)

    def _write(
        self,
        now_ms: int,
        action: str,
        actions: list[str],
        message: JsonObject | None,
        view: ReplicaView,
    ) -> None:
        line: JsonObject = {
            "index": self.count,
            "time": now_ms,
            "node": int(self.node_id),
            "action": action,
            "actions": list[JsonValue](actions),
            "message": message,
            "state": state_json(view),
            "ns": time.monotonic_ns(),
        }
        self._out.write(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
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
