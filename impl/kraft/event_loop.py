"""The event loop a node and the command-line clients run on.

uvloop (libuv's loop, in C) when it is installed, else asyncio's own loop: on the request path
a node's CPU per one-record append goes mostly to the loop's own work (readiness polling,
reading and writing sockets, calling back), which uvloop does in C (benchmarks.bench_work
compares the two: KRAFT_EVENT_LOOP=asyncio forces asyncio's loop). Nothing in kraft depends on
which loop runs it: the node reads and writes through asyncio's Protocol and Transport
interfaces, which both implement.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import TypeVar

__all__ = ["EVENT_LOOP_ENV", "loop_factory", "loop_name", "run"]

EVENT_LOOP_ENV = "KRAFT_EVENT_LOOP"

_T = TypeVar("_T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for asyncio's (KRAFT_EVENT_LOOP=asyncio, or no uvloop)."""
    if os.environ.get(EVENT_LOOP_ENV, "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def loop_name() -> str:
    """The name of the loop `run` uses: uvloop or asyncio."""
    return "asyncio" if loop_factory() is None else "uvloop"


def run(main: Coroutine[object, object, _T]) -> _T:
    """asyncio.run(main) on the chosen loop."""
    factory = loop_factory()
    if factory is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
