"""The link proxies act on whole frames: pass, drop (blackhole), lose, delay in order, cut
and refuse; `Network.block(a, b)` drops a's requests to b and a's responses to b."""

from __future__ import annotations

import asyncio
import struct

from refinement.chaos.proxy import Link, Network

_SIZE = struct.Struct(">i")


def frame(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


async def echo_server() -> tuple[asyncio.Server, int]:
    """Answers each frame with the same frame prefixed by b're:'."""

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                (n,) = _SIZE.unpack(await r.readexactly(4))
                w.write(frame(b"re:" + await r.readexactly(n)))
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def read_frame(r: asyncio.StreamReader, timeout: float) -> bytes | None:
    try:
        (n,) = _SIZE.unpack(await asyncio.wait_for(r.readexactly(4), timeout))
        return await r.readexactly(n)
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        return None


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_frames_pass_and_blocked_directions_drop_them() -> None:
    async def body() -> None:
        server, port = await echo_server()
        net = Network({1: ("127.0.0.1", 1), 2: ("127.0.0.1", port)}, seed=1)
        await net.start()
        r, w = await asyncio.open_connection("127.0.0.1", net.port(1, 2))
        w.write(frame(b"a"))
        assert await read_frame(r, 2.0) == b"re:a"
        net.block(1, 2)  # node 1's requests to 2 are dropped
        w.write(frame(b"b"))
        assert await read_frame(r, 0.3) is None
        assert net.links[(1, 2)].forward.dropped == 1
        net.heal()
        w.write(frame(b"c"))
        assert await read_frame(r, 2.0) == b"re:c"
        net.block(2, 1)  # node 2's responses to 1 are dropped
        w.write(frame(b"d"))
        assert await read_frame(r, 0.3) is None
        assert net.links[(1, 2)].backward.dropped == 1
        w.close()
        await net.close()
        server.close()

    run(body())


def test_delay_keeps_order_and_loss_drops_some() -> None:
    async def body() -> None:
        server, port = await echo_server()
        net = Network({1: ("127.0.0.1", 1), 2: ("127.0.0.1", port)}, seed=3)
        await net.start()
        r, w = await asyncio.open_connection("127.0.0.1", net.port(1, 2))
        net.degrade(delay_ms=100, jitter_ms=30)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        for i in range(5):
            w.write(frame(b"%d" % i))
        got = [await read_frame(r, 3.0) for _ in range(5)]
        assert got == [b"re:%d" % i for i in range(5)]
        assert loop.time() - t0 >= 0.14  # at least 70 ms each way
        net.heal()
        net.degrade(loss=0.5)
        for i in range(40):
            w.write(frame(b"x%d" % i))
        answers = 0
        while await read_frame(r, 0.5) is not None:
            answers += 1
        assert 0 < answers < 40
        link = net.links[(1, 2)]
        assert link.forward.dropped + link.backward.dropped == 40 - answers
        w.close()
        await net.close()
        server.close()

    run(body())


def test_isolate_with_reset_cuts_and_refuses_connections() -> None:
    async def body() -> None:
        server, port = await echo_server()
        net = Network({1: ("127.0.0.1", 1), 2: ("127.0.0.1", port)}, seed=1)
        await net.start()
        r, w = await asyncio.open_connection("127.0.0.1", net.port(1, 2))
        w.write(frame(b"a"))
        assert await read_frame(r, 2.0) == b"re:a"
        net.isolate(2, "reset")
        assert await read_frame(r, 2.0) is None  # the open connection was closed
        r2, w2 = await asyncio.open_connection("127.0.0.1", net.port(1, 2))
        w2.write(frame(b"b"))
        assert await read_frame(r2, 1.0) is None  # a new one is closed at once
        net.heal()
        r3, w3 = await asyncio.open_connection("127.0.0.1", net.port(1, 2))
        w3.write(frame(b"c"))
        assert await read_frame(r3, 2.0) == b"re:c"
        for wr in (w, w2, w3):
            wr.close()
        await net.close()
        server.close()

    run(body())


def test_a_down_target_closes_the_connection() -> None:
    async def body() -> None:
        import random

        link = Link(1, 2, ("127.0.0.1", 1), random.Random(0), "127.0.0.1")
        await link.start()
        r, w = await asyncio.open_connection("127.0.0.1", link.port)
        w.write(frame(b"a"))
        assert await read_frame(r, 2.0) is None
        w.close()
        await link.close()

    run(body())
