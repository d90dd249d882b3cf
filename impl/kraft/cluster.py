"""A local cluster: N nodes on one host, each a `kraft start` subprocess.

Layout under the data root: `node-<id>/` (the formatted data directory),
`node-<id>.properties` (its configuration) and `node-<id>.log` (its output).

A static quorum (`controller.quorum.voters`, kraft.version 0) by default; with `dynamic=True`
a dynamic one (KIP-853): each directory is formatted as `kraft format --initial-controllers`
does, with the voters' directory ids drawn once, and the nodes are configured with
`controller.quorum.bootstrap.servers`. `add_observer` adds a node outside the initial voters.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kraft.client import Address
from kraft.ids import NodeId
from kraft.server.config import render_properties
from kraft.storage.bootstrap import (
    DynamicVoter,
    parse_initial_controllers,
    voters_record_of,
    write_bootstrap_checkpoint,
)
from kraft.storage.meta_properties import (
    META_PROPERTIES,
    format_storage,
    generate_cluster_id,
    generate_directory_id,
)
from kraft.storage.segmented_log import LOG_DIR_NAME

__all__ = ["LocalCluster", "free_ports"]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct ports the OS just reported free (another process may still take one)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class NodeFiles:
    """Where a local cluster keeps each node's files, all under `root`."""

    root: Path

    def data_dir(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}"

    def config_path(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}.properties"

    def log_path(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}.log"

    def trace_path(self, node_id: int) -> Path:
        return self.root / f"node-{node_id}.trace.ndjson"


class LocalCluster(NodeFiles):
    def __init__(
        self,
        data_root: Path,
        ports: Sequence[int],
        *,
        host: str = "127.0.0.1",
        cluster_id: str | None = None,
        overrides: Mapping[str, str] | None = None,
        trace: bool = False,
        dynamic: bool = False,
    ) -> None:
        self.root = Path(data_root)
        self.host = host
        self.node_ids = tuple(range(1, len(ports) + 1))
        self.addresses = {n: Address(host, p) for n, p in zip(self.node_ids, ports, strict=True)}
        self.cluster_id = cluster_id or generate_cluster_id(random.Random())
        self.overrides = dict(overrides or {})
        self.trace = trace
        self.dynamic = dynamic
        rng = random.Random()
        # The voters' directory ids (a dynamic quorum's --initial-controllers).
        self.directory_ids = {n: generate_directory_id(rng) for n in self.node_ids}
        # Nodes that are not in the initial voter set (add_observer).
        self.observer_ids: tuple[int, ...] = ()
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def add_observer(self, port: int) -> int:
        """A node outside the initial voter set (the next id): formatted without a bootstrap
        checkpoint and configured with the voters (a static quorum) or only with
        `controller.quorum.bootstrap.servers` (a dynamic one), it fetches as an observer; in a
        dynamic quorum `kraft quorum add-voter` can make it a voter. Call format() after."""
        n = max(self.node_ids) + 1
        self.node_ids = (*self.node_ids, n)
        self.addresses = {**self.addresses, n: Address(self.host, port)}
        self.directory_ids[n] = generate_directory_id(random.Random())
        self.observer_ids = (*self.observer_ids, n)
        return n

    def _voter_addresses(self) -> dict[int, Address]:
        return {n: a for n, a in self.addresses.items() if n not in self.observer_ids}

    @property
    def voters(self) -> str:
        return ",".join(f"{n}@{a.host}:{a.port}" for n, a in self._voter_addresses().items())

    @property
    def initial_controllers(self) -> str:
        """`kraft format --initial-controllers` of this cluster (a dynamic quorum's voters)."""
        return ",".join(
            str(DynamicVoter(NodeId(n), a.host, a.port, self.directory_ids[n]))
            for n, a in self._voter_addresses().items()
        )

    def format(self) -> None:
        """Format every data directory not formatted yet and (re)write the config files."""
        self.root.mkdir(parents=True, exist_ok=True)
        voters = (
            parse_initial_controllers(self.initial_controllers)
            if self.dynamic and self._voter_addresses()
            else ()
        )
        for n, a in self.addresses.items():
            if not (self.data_dir(n) / META_PROPERTIES).exists():
                if self.dynamic and n not in self.observer_ids:
                    format_storage(
                        self.data_dir(n), self.cluster_id, n, directory_id=self.directory_ids[n]
                    )
                    write_bootstrap_checkpoint(
                        self.data_dir(n) / LOG_DIR_NAME,
                        voters_record_of(voters, "CONTROLLER"),
                        timestamp_ms=time.time_ns() // 1_000_000,
                    )
                else:
                    format_storage(
                        self.data_dir(n), self.cluster_id, n, directory_id=self.directory_ids[n]
                    )
            quorum = (
                (
                    "controller.quorum.bootstrap.servers",
                    ",".join(map(str, self._voter_addresses().values())),
                )
                if self.dynamic
                else ("controller.quorum.voters", self.voters)
            )
            props = {
                "node.id": str(n),
                "process.roles": "controller",
                quorum[0]: quorum[1],
                "listeners": f"CONTROLLER://{a.host}:{a.port}",
                # What Kafka's kafka-metadata-quorum add-controller needs to read the file.
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": str(self.data_dir(n)),
                **self.overrides,
            }
            if self.trace:
                props["kraft.trace.file"] = str(self.trace_path(n))
            self.config_path(n).write_text(render_properties(props), encoding="utf-8")

    def start(self, node_id: int | None = None) -> None:
        """Start one node (or every node not running)."""
        for n in self.node_ids if node_id is None else (node_id,):
            if self.is_running(n):
                continue
            out = open(self.log_path(n), "ab")  # noqa: SIM115 - the child inherits it
            try:
                self._procs[n] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "kraft.cli",
                        "start",
                        "--config",
                        str(self.config_path(n)),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    # Its own session: a terminal's Ctrl-C reaches the launcher only, which
                    # then stops each node once (a second signal could cut its shutdown short).
                    start_new_session=True,
                )
            finally:
                out.close()

    def is_running(self, node_id: int) -> bool:
        p = self._procs.get(node_id)
        return p is not None and p.poll() is None

    def pid(self, node_id: int) -> int | None:
        p = self._procs.get(node_id)
        return None if p is None else p.pid

    def kill(self, node_id: int) -> None:
        """SIGKILL: a crash, nothing flushed that was not already."""
        p = self._procs.get(node_id)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()

    def stop(self, node_id: int, timeout_s: float = 10.0) -> int | None:
        """SIGTERM and wait (SIGKILL after `timeout_s`); the exit status."""
        p = self._procs.get(node_id)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
        return self._wait(node_id, timeout_s)

    def _wait(self, node_id: int, timeout_s: float) -> int | None:
        p = self._procs.get(node_id)
        if p is None:
            return None
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        return p.returncode

    def stop_all(self, timeout_s: float = 10.0) -> dict[int, int | None]:
        """SIGTERM every node at once (one signal each), then wait for them all."""
        for n in self.node_ids:
            p = self._procs.get(n)
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        return {n: self._wait(n, timeout_s) for n in self.node_ids}
