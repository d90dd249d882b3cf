"""The key-value state machine on a real 3-node cluster: `kraft append k=v` through the
leader, `kraft get k` on every node once committed there, a delete, a restarted node that
replays its log, and the errors of `kraft get` (unknown key, node down)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import leader_of, make_cluster
from polling import wait_for

from kraft.cli.records import NOT_FOUND_STATUS
from kraft.client import Address
from kraft.client_read import GetResult, get
from kraft.cluster import LocalCluster


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = make_cluster(tmp_path)
    c.start()
    try:
        wait_for("a leader", lambda: leader_of(c, c.node_ids))
        yield c
    finally:
        c.stop_all()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft.cli", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _get(address: Address, key: bytes) -> GetResult:
    return asyncio.run(get(address, key))


def _bootstrap(cluster: LocalCluster) -> str:
    return ",".join(str(a) for a in cluster.addresses.values())


def test_append_then_get_on_every_node_then_delete(cluster: LocalCluster) -> None:
    boot = _bootstrap(cluster)
    done = _cli("append", "--bootstrap", boot, "k=v", "k2=v2", "plain", "k=v1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("committed offsets ")
    for n, address in cluster.addresses.items():
        got = wait_for(
            f"k on node {n}", lambda a=address: (r := _get(a, b"k")).found and r, timeout_s=10
        )
        assert isinstance(got, GetResult)
        assert got.value == b"v1"  # the later record of the batch wins
        assert got.node_id == n
        assert _get(address, b"k2").value == b"v2"
        assert not _get(address, b"plain").found  # a bare value sets no key
    shown = _cli("get", "--bootstrap", str(cluster.addresses[cluster.node_ids[-1]]), "k")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "v1\n"
    assert "applied up to offset" in shown.stderr

    deleted = _cli("append", "--bootstrap", boot, "--delete", "k")
    assert deleted.returncode == 0, deleted.stderr
    for n, address in cluster.addresses.items():
        wait_for(f"k deleted on node {n}", lambda a=address: not _get(a, b"k").found)
        assert _get(address, b"k2").value == b"v2"
    missing = _cli("get", "--bootstrap", str(cluster.addresses[cluster.node_ids[0]]), "k")
    assert missing.returncode == NOT_FOUND_STATUS
    assert missing.stdout == ""
    assert "key 'k' not found" in missing.stderr


def test_a_restarted_node_replays_its_log_and_a_down_node_is_an_error(
    cluster: LocalCluster,
) -> None:
    boot = _bootstrap(cluster)
    assert _cli("append", "--bootstrap", boot, "color=blue").returncode == 0
    lead = wait_for("a leader", lambda: leader_of(cluster, cluster.node_ids))
    follower = next(n for n in cluster.node_ids if n != lead.node_id)  # type: ignore[attr-defined]
    address = cluster.addresses[follower]
    wait_for("color on the follower", lambda: _get(address, b"color").found)
    assert cluster.stop(follower) == 0

    down = _cli("get", "--bootstrap", str(address), "color")
    assert down.returncode == 1
    assert "cannot connect" in down.stderr

    cluster.start(follower)
    got = wait_for("color replayed", lambda: (r := _get_or_none(address, b"color")) and r.found)
    assert got
    assert _get(address, b"color").value == b"blue"


def _get_or_none(address: Address, key: bytes) -> GetResult | None:
    from kraft.client import ClientError

    try:
        return _get(address, key)
    except ClientError:
        return None
