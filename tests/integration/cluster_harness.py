"""Helpers for tests that run real nodes as subprocesses on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from pathlib import Path

from kraft.client import Address, ClientError, NodeInfo, node_info
from kraft.cluster import LocalCluster, free_ports

# Short timeouts keep a failover to about a second (Kafka's defaults are 1 s and 2 s).
FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "600",
    "controller.quorum.election.backoff.max.ms": "300",
    "controller.quorum.request.timeout.ms": "1000",
    "controller.quorum.fetch.max.wait.ms": "200",
}


def make_cluster(root: Path, n: int = 3, **kwargs: bool) -> LocalCluster:
    cluster = LocalCluster(root, free_ports(n), overrides=FAST, **kwargs)
    cluster.format()
    return cluster


def info(address: Address) -> NodeInfo | None:
    try:
        return asyncio.run(node_info(address, timeout_s=1.0))
    except ClientError:
        return None


def wait_for(what: str, check: object, timeout_s: float = 10.0) -> object:
    """Poll `check()` (a callable) until it returns something truthy."""
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def leader_of(cluster: LocalCluster, nodes: Iterable[int]) -> NodeInfo | None:
    """The node that says it leads, once every listed node follows it in its epoch."""
    infos = [info(cluster.addresses[n]) for n in nodes]
    leaders = [i for i in infos if i is not None and i.state == "Leader"]
    if len(leaders) != 1:
        return None
    lead = leaders[0]
    if all(i is not None and i.epoch == lead.epoch and i.leader_id == lead.node_id for i in infos):
        return lead
    return None
