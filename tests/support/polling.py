"""Waiting on real nodes, shared by the integration and interop tests: poll a condition until
it holds (generous bounds, never a timing claim) and ask a node for its state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

from kraft.client import Address, ClientError, NodeInfo, node_info

T = TypeVar("T")


def wait_for(
    what: str, check: Callable[[], T | None], timeout_s: float = 60.0, *, every_s: float = 0.05
) -> T:
    """Poll `check()` until it returns something truthy, and return that; after `timeout_s`
    the test fails naming `what` it waited for."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)


def kraft_info(address: Address) -> NodeInfo | None:
    """A kraft node's state (DescribeQuorum of the node), or None while it does not answer."""
    try:
        return asyncio.run(node_info(address, timeout_s=1.0))
    except (ClientError, OSError):
        return None
