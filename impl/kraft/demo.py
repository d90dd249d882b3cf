"""The main job: a real 3-node KRaft cluster on loopback, end to end.

Formats and starts three `kraft start` processes, appends records, kills the leader with
SIGKILL, shows the new leader taking writes, restarts the killed node, checks that every
acknowledged record is on every node and that every node's key-value state machine holds the
last value of each key, then prints the quorum description and stops.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kraft.client import Address, AppendAck, ClientError, NodeInfo, append, node_info
from kraft.client_read import get, read
from kraft.cluster import LocalCluster, free_ports
from kraft.ids import Offset

# Shorter than Kafka's defaults (1 s / 2 s) so the demo takes seconds, not minutes.
DEMO_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.fetch.max.wait.ms": "200",
}


class DemoError(Exception):
    """A step of the demo did not reach its goal in time."""


@dataclass
class Acked:
    values: dict[int, bytes]

    def add(self, ack: AppendAck, values: list[bytes]) -> None:
        for i, value in enumerate(values):
            self.values[ack.base_offset + i] = value


def _say(text: str) -> None:
    print(text, flush=True)


async def _info(address: Address) -> NodeInfo | None:
    try:
        return await node_info(address, timeout_s=1.0)
    except ClientError:
        return None


async def _wait_leader(
    cluster: LocalCluster, nodes: list[int], timeout_s: float, not_epoch: int = -1
) -> NodeInfo:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        infos = [await _info(cluster.addresses[n]) for n in nodes]
        leaders = [i for i in infos if i is not None and i.state == "Leader"]
        if len(leaders) == 1 and leaders[0].epoch != not_epoch:
            lead = leaders[0]
            if all(i is not None and i.leader_id == lead.node_id for i in infos):
                return lead
        await asyncio.sleep(0.05)
    raise DemoError(f"no single leader among nodes {nodes} within {timeout_s} s")


async def _append_batches(
    bootstrap: list[Address], prefix: str, batches: int, per_batch: int, acked: Acked
) -> None:
    async def one(b: int) -> None:
        values = [f"{prefix}-{b}-{i}".encode() for i in range(per_batch)]
        ack = await append(bootstrap, values, timeout_ms=15_000)
        acked.add(ack, values)

    await asyncio.gather(*(one(b) for b in range(batches)))


async def _verify(cluster: LocalCluster, acked: Acked, timeout_s: float) -> None:
    """Every acknowledged record is on every node at its offset (waits for catch-up)."""
    deadline = time.monotonic() + timeout_s
    want_end = max(acked.values) + 1
    for node in cluster.node_ids:
        while True:
            result = await read(cluster.addresses[node], 0)
            got = dict(result.records)
            if result.next_offset >= want_end or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        missing = [o for o, v in acked.values.items() if got.get(Offset(o)) != v]
        if missing:
            raise DemoError(
                f"node {node} lacks {len(missing)} acknowledged records (first at offset "
                f"{missing[0]}): an acknowledged record was lost"
            )
        _say(
            f"  node {node}: all {len(acked.values)} acknowledged records present "
            f"(committed up to offset {result.next_offset - 1})"
        )


async def _run(cluster: LocalCluster) -> None:
    ids = list(cluster.node_ids)
    bootstrap = [cluster.addresses[n] for n in ids]
    acked = Acked({})

    _say(f"[1/6] formatting and starting {len(ids)} nodes under {cluster.root}")
    cluster.format()
    started = time.monotonic()
    cluster.start()
    lead = await _wait_leader(cluster, ids, 15.0)
    _say(
        f"      node {lead.node_id} elected leader of epoch {lead.epoch} after "
        f"{(time.monotonic() - started) * 1000:.0f} ms "
        f"({', '.join(f'{n}={cluster.addresses[n]}' for n in ids)})"
    )

    _say("[2/6] appending 50 batches of 10 records")
    await _append_batches(bootstrap, "before", 50, 10, acked)
    _say(f"      {len(acked.values)} records acknowledged (committed on a majority, fsynced)")

    _say(f"[3/6] SIGKILL of the leader, node {lead.node_id}")
    killed = lead.node_id
    killed_at = time.monotonic()
    cluster.kill(killed)
    survivors = [n for n in ids if n != killed]
    first = [f"after-kill-{i}".encode() for i in range(10)]
    ack = await append([cluster.addresses[n] for n in survivors], first, timeout_ms=20_000)
    acked.add(ack, first)
    new_lead = await _wait_leader(cluster, survivors, 10.0)
    _say(
        f"      node {new_lead.node_id} leads epoch {new_lead.epoch}; first write accepted "
        f"{(time.monotonic() - killed_at) * 1000:.0f} ms after the kill"
    )
    await _append_batches([cluster.addresses[n] for n in survivors], "after", 20, 10, acked)
    _say(f"      {len(acked.values)} records acknowledged in all")

    _say(f"[4/6] restarting node {killed}; it rejoins as a follower and catches up")
    cluster.start(killed)
    await _wait_leader(cluster, ids, 15.0)

    _say("[5/6] reading every node's committed log back")
    await _verify(cluster, acked, 20.0)
    _say(
        "      and its key-value state machine (`kraft get`): color=blue, shape=round, color=green"
    )
    records = [(b"color", b"blue"), (b"shape", b"round"), (b"color", b"green")]
    kv = await append(bootstrap, records, timeout_ms=15_000)
    await _check_key_values(cluster, {b"color": b"green", b"shape": b"round"}, kv.last_offset, 20.0)


async def _check_key_values(
    cluster: LocalCluster, want: dict[bytes, bytes], committed: Offset, timeout_s: float
) -> None:
    """Every node's key-value state machine holds `want` once it has applied `committed`."""
    deadline = time.monotonic() + timeout_s
    for node in cluster.node_ids:
        for key, value in want.items():
            while True:
                got = await get(cluster.addresses[node], key)
                if got.applied_offset > committed or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            if got.value != value:
                raise DemoError(
                    f"node {node} has {key!r} = {got.value!r}, not {value!r} (applied up to"
                    f" offset {got.applied_offset})"
                )
        shown = ", ".join(f"{k.decode()}={v.decode()}" for k, v in want.items())
        _say(f"  node {node}: {shown}")


def _describe(cluster: LocalCluster) -> int:
    """Step 6 through the `kraft quorum describe` command itself (it runs its own loop)."""
    from kraft.cli import main as kraft_main

    _say("[6/6] the quorum as `kraft quorum describe` reports it")
    hosts = ",".join(str(cluster.addresses[n]) for n in cluster.node_ids)
    status = kraft_main(["quorum", "describe", "--bootstrap", hosts, "--status"])
    return status or kraft_main(["quorum", "describe", "--bootstrap", hosts, "--replication"])


def main(*, data_root: Path | None = None, keep: bool = False) -> int:
    root = data_root or Path(tempfile.mkdtemp(prefix="kraft-demo-"))
    cluster = LocalCluster(root, free_ports(3), overrides=DEMO_TIMEOUTS)
    status = 0
    try:
        asyncio.run(_run(cluster))
        if _describe(cluster) != 0:
            raise DemoError("DescribeQuorum failed")
        _say("demo: OK (no acknowledged record lost)")
    except (DemoError, ClientError) as exc:
        _say(f"demo: FAILED: {exc}")
        _say(f"      node logs are in {root}")
        keep = True
        status = 1
    except KeyboardInterrupt:
        status = 130
    finally:
        cluster.stop_all()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
