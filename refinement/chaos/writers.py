"""Concurrent writers: each appends unique values, one per KraftAppend, and records every
attempt (Jepsen's history): acknowledged with (offset, epoch), refused (the node said it is
not the leader: the value was not appended), or unknown (timeout, lost connection, truncated
after acceptance: it may or may not be in the log).

After an unknown outcome a writer sends the same value again (`resend`, as a client that
wants its write must). Appends are idempotent: each writer is a producer (kraft.client's
Producer semantics: an id and a per-record sequence), a resend carries the value's sequence
again, and the leader answers it with the offsets of the copy it has, so a value is stored
once; the verdict counts any duplicate. A writer that gives a value up (its outcome still
unknown) takes a new producer id, so that the next value cannot leave a sequence gap.
Writers talk to the nodes' real listeners, never through the proxies, and follow the leader
id a refusal names.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from enum import Enum

from kraft.client import Address, ClientError, Connection, new_producer_id
from kraft.errors import ErrorCode
from kraft.protocol import MessageDict, ProtocolError
from kraft.protocol.client_api import KRAFT_APPEND_KEY
from kraft.protocol.values import get_int, get_opt_str

__all__ = ["Attempt", "History", "Outcome", "Writer", "WriterConfig"]

_REFUSED_MESSAGE = "not the leader"


class Outcome(Enum):
    ACK = "ack"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Attempt:
    writer: int
    value: bytes
    node: int
    started: float  # time.monotonic()
    ended: float
    outcome: Outcome
    offset: int = -1
    epoch: int = -1
    error: str = ""


@dataclass(slots=True)
class History:
    attempts: list[Attempt] = field(default_factory=list)
    issued: list[bytes] = field(default_factory=list)
    acks: dict[bytes, Attempt] = field(default_factory=dict)
    last_ack: float = float("-inf")  # time.monotonic() of the latest acknowledgement

    def record(self, a: Attempt) -> None:
        self.attempts.append(a)
        if a.outcome is Outcome.ACK:
            self.last_ack = max(self.last_ack, a.ended)
            if a.value not in self.acks:
                self.acks[a.value] = a


@dataclass(frozen=True, slots=True)
class WriterConfig:
    request_timeout_ms: int = 3000
    value_timeout_s: float = 30.0  # give up resending a value after this
    pause_s: float = 0.05  # between two values of one writer
    resend: bool = True


class _Leader:
    """The writers' shared idea of the leader."""

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = nodes
        self.node = nodes[0]

    def rotate(self, after: int) -> None:
        if self.node == after:
            self.node = self.nodes[(self.nodes.index(after) + 1) % len(self.nodes)]


class Writer:
    def __init__(
        self,
        index: int,
        addresses: dict[int, Address],
        history: History,
        leader: _Leader,
        config: WriterConfig,
    ) -> None:
        self.index = index
        self.addresses = addresses
        self.history = history
        self.leader = leader
        self.config = config
        self._conns: dict[int, Connection] = {}
        self._seq = 0
        self._producer = new_producer_id()
        self._next_sequence = 0  # the producer sequence of the value being written
        self.stopping = False

    @staticmethod
    def shared_leader(nodes: list[int]) -> _Leader:
        return _Leader(nodes)

    async def run(self) -> None:
        try:
            while not self.stopping:
                value = f"w{self.index}-{self._seq}".encode()
                self._seq += 1
                self.history.issued.append(value)
                await self._write(value)
                await asyncio.sleep(self.config.pause_s)
        finally:
            for c in self._conns.values():
                with contextlib.suppress(Exception):
                    await c.close()

    async def _write(self, value: bytes) -> None:
        give_up = time.monotonic() + self.config.value_timeout_s
        while True:
            node = self.leader.node
            a = await self._attempt(node, value)
            self.history.record(a)
            if a.outcome is Outcome.ACK:
                self.leader.node = node
                self._next_sequence += 1
                return
            if a.error and a.error.startswith(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER.name):
                self._new_producer()  # a value before this one was never stored: start over
            if a.outcome is Outcome.UNKNOWN and not self.config.resend:
                self._new_producer()
                return
            if self.stopping or time.monotonic() > give_up:
                self._new_producer()
                return
            if a.outcome is Outcome.UNKNOWN or a.node == self.leader.node:
                self.leader.rotate(node)
            await asyncio.sleep(0.05)

    def _new_producer(self) -> None:
        self._producer = new_producer_id()
        self._next_sequence = 0

    async def _attempt(self, node: int, value: bytes) -> Attempt:
        t0 = time.monotonic()
        timeout_ms = self.config.request_timeout_ms
        body: MessageDict = {
            "records": [{"value": value}],
            "timeout_ms": timeout_ms,
            "producer_id": self._producer,
            "sequence": self._next_sequence,
        }
        try:
            conn = self._conns.get(node)
            if conn is None:
                conn = await Connection.open(self.addresses[node], timeout_s=1.0)
                self._conns[node] = conn
            answer = await conn.request(KRAFT_APPEND_KEY, 0, body, timeout_ms / 1000 + 0.5)
        except (ClientError, ProtocolError, OSError) as e:
            dead = self._conns.pop(node, None)
            if dead is not None:
                with contextlib.suppress(Exception):
                    await dead.close()
            return Attempt(
                self.index, value, node, t0, time.monotonic(), Outcome.UNKNOWN, error=str(e)
            )
        t1 = time.monotonic()
        error = ErrorCode(get_int(answer, "error_code"))
        if error is ErrorCode.NONE:
            return Attempt(
                self.index,
                value,
                node,
                t0,
                t1,
                Outcome.ACK,
                offset=get_int(answer, "base_offset"),
                epoch=get_int(answer, "leader_epoch"),
            )
        message = get_opt_str(answer, "error_message") or ""
        leader = get_int(answer, "leader_id")
        refused = error is ErrorCode.NOT_LEADER_OR_FOLLOWER and message == _REFUSED_MESSAGE
        if refused and leader in self.addresses and leader != node:
            self.leader.node = leader
        return Attempt(
            self.index,
            value,
            node,
            t0,
            t1,
            Outcome.REFUSED if refused else Outcome.UNKNOWN,
            error=f"{error.name}: {message}" if message else error.name,
        )
