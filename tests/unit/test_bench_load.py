"""The kraft load generator of the benchmarks, against a stand-in server that answers every
append at once: what it counts, and how late the client itself sent."""

from __future__ import annotations

import asyncio
import math
import struct
import time

from benchmarks import bench_cluster as bc
from kraft.client import Address

_SIZE = struct.Struct(">i")


async def _answering_server() -> tuple[asyncio.Server, Address]:
    """Reads size-framed requests and answers each with its correlation id, no tagged fields
    and error code 0, the head of a KraftAppend answer."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = _SIZE.unpack(await reader.readexactly(4))
                payload = await reader.readexactly(size)
                corr = payload[4:8]  # api key i16, api version i16, then the correlation id
                answer = corr + b"\x00" + b"\x00\x00"
                writer.write(_SIZE.pack(len(answer)) + answer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, Address("127.0.0.1", port)


def _open_loop(block_s: float) -> bc.LoadResult:
    async def go() -> bc.LoadResult:
        server, address = await _answering_server()

        async def stall() -> None:
            await asyncio.sleep(0.15)  # inside the measured window
            time.sleep(block_s)  # the client's own loop is blocked, as by a GC pause

        try:
            staller = asyncio.ensure_future(stall())
            got = await bc.open_loop(address, 2000, 1, 2, 0.05, 0.4)
            await staller
            return got
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(go())


def test_an_open_loop_counts_answered_requests_and_the_clients_own_lateness() -> None:
    got = _open_loop(0.0)
    assert got.requests > 0 and got.errors == 0
    assert got.records_per_s > 0
    assert got.send_lag_p99_ms >= 0 and not math.isnan(got.send_lag_p99_ms)


def test_a_blocked_client_shows_as_send_lag_not_only_as_latency() -> None:
    # 0.1 s blocked at 2,000 requests/s: 200 sends fall due in it, a sixth of the window's,
    # each sent late by up to 0.1 s once the loop runs again.
    got = _open_loop(0.1)
    assert got.send_lag_p99_ms >= 50
    assert got.p99_ms >= got.send_lag_p99_ms - 1  # latency counts from the scheduled send
