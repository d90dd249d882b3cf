"""A loopback TCP proxy per directed link: node `src` reaches node `dst` only through it.

Node `src` is configured with `dst`'s address replaced by the proxy's port, so every
connection `src` opens to `dst` (its requests out, `dst`'s responses back) crosses
`Link(src, dst)`. The proxy forwards whole Kafka frames (int32 size prefix), so a fault acts
on messages, never on half a frame:

- `forward` (requests, src -> dst) and `backward` (responses, dst -> src) each have a
  `Direction`: `blocked` (every frame silently dropped: a blackhole, the sender times out),
  `loss` (each frame dropped with that probability), `delay_ms` +- `jitter_ms` (order kept);
- `cut()` closes every open connection of the link, and while `refusing` new ones are
  closed as soon as they are accepted (the peer sees a reset, not a timeout).

"Messages from a to b" are a's requests on Link(a, b) and a's responses on Link(b, a):
`Network.block(a, b)` sets both. The proxies run in the harness's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import struct
from dataclasses import dataclass, field

__all__ = ["Direction", "Link", "Network"]

_SIZE = struct.Struct(">i")
_MAX_FRAME = 128 << 20


@dataclass(slots=True)
class Direction:
    blocked: bool = False
    loss: float = 0.0
    delay_ms: int = 0
    jitter_ms: int = 0
    frames: int = 0
    dropped: int = 0

    def heal(self) -> None:
        self.blocked = False
        self.loss = 0.0
        self.delay_ms = 0
        self.jitter_ms = 0


@dataclass(slots=True, eq=False)
class _Conn:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def close(self) -> None:
        for w in (self.client, self.server):
            with contextlib.suppress(Exception):
                w.transport.abort()
        for t in self.tasks:
            t.cancel()


class Link:
    """The proxy of connections from node `src` to node `dst`."""

    def __init__(
        self, src: int, dst: int, target: tuple[str, int], rng: random.Random, host: str
    ) -> None:
        self.src = src
        self.dst = dst
        self.target = target
        self.host = host
        self.port = 0
        self.forward = Direction()
        self.backward = Direction()
        self.refusing = False
        self.connections = 0
        self._rng = rng
        self._conns: set[_Conn] = set()
        self._server: asyncio.Server | None = None

    async def start(self, port: int = 0) -> int:
        self._server = await asyncio.start_server(self._accept, self.host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def cut(self) -> None:
        for c in list(self._conns):
            c.close()
        self._conns.clear()

    def heal(self) -> None:
        self.forward.heal()
        self.backward.heal()
        self.refusing = False

    def _is_refusing(self) -> bool:
        return self.refusing

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()  # dst is down: src sees its connection fail
            return
        if self._is_refusing():  # cut while connecting
            writer.transport.abort()
            up_writer.transport.abort()
            return
        self.connections += 1
        conn = _Conn(writer, up_writer)
        self._conns.add(conn)
        conn.tasks = [
            asyncio.create_task(self._pump(reader, up_writer, self.forward, conn)),
            asyncio.create_task(self._pump(up_reader, writer, self.backward, conn)),
        ]

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        d: Direction,
        conn: _Conn,
    ) -> None:
        """Read whole frames; drop, delay or pass each; deliver in order."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                item = await queue.get()
                if item is None:
                    return
                due, frame = item
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(frame)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if not 0 <= size <= _MAX_FRAME:
                    break
                body = await reader.readexactly(size)
                d.frames += 1
                if d.blocked or (d.loss > 0 and self._rng.random() < d.loss):
                    d.dropped += 1
                    continue
                delay = d.delay_ms
                if d.jitter_ms:
                    delay += self._rng.randint(-d.jitter_ms, d.jitter_ms)
                queue.put_nowait((loop.time() + max(delay, 0) / 1000, head + body))
        except (asyncio.IncompleteReadError, OSError):
            pass
        finally:
            # The sender's end closed (or broke): pass on what was read, then close.
            queue.put_nowait(None)
            try:
                await sender
            except (Exception, asyncio.CancelledError):
                sender.cancel()
            finally:
                conn.close()
                self._conns.discard(conn)


class Network:
    """Every directed link of a cluster, and the faults acting on messages between nodes."""

    def __init__(
        self, nodes: dict[int, tuple[str, int]], seed: int, host: str = "127.0.0.1"
    ) -> None:
        rng = random.Random(seed)
        self.links: dict[tuple[int, int], Link] = {
            (a, b): Link(a, b, nodes[b], random.Random(rng.random()), host)
            for a in nodes
            for b in nodes
            if a != b
        }

    async def start(self) -> None:
        for link in self.links.values():
            await link.start()

    async def close(self) -> None:
        for link in self.links.values():
            await link.close()

    def port(self, src: int, dst: int) -> int:
        return self.links[(src, dst)].port

    def block(self, a: int, b: int) -> None:
        """Every message from a to b is dropped (a's requests and a's responses)."""
        self.links[(a, b)].forward.blocked = True
        self.links[(b, a)].backward.blocked = True

    def isolate(self, node: int, style: str) -> None:
        """`node` cut off from every peer both ways: blackholed, or connections reset."""
        for (a, b), link in self.links.items():
            if node in (a, b):
                if style == "reset":
                    link.refusing = True
                    link.cut()
                else:
                    link.forward.blocked = link.backward.blocked = True

    def degrade(self, *, delay_ms: int = 0, jitter_ms: int = 0, loss: float = 0.0) -> None:
        for link in self.links.values():
            for d in (link.forward, link.backward):
                d.delay_ms, d.jitter_ms, d.loss = delay_ms, jitter_ms, loss

    def heal(self) -> None:
        for link in self.links.values():
            link.heal()

    def dropped(self) -> int:
        return sum(lk.forward.dropped + lk.backward.dropped for lk in self.links.values())
