"""etcd as a 3-node cluster on 127.0.0.1 and its `benchmark put` tool, for
benchmarks/bench_peers.py. Both binaries are built from Go modules by `make etcd` into
tools/etcd/bin (versions pinned in the Makefile).

Durability: etcd appends every raft entry to its write-ahead log and fsyncs it before the
entry is sent as persisted (the raft Ready loop saves the WAL first), unless started with
--unsafe-no-fsync, which this module never passes; a put is answered once applied after commit.

`benchmark put` sends one put per request from --clients gRPC clients over --conns connections,
--total puts in all (closed loop), or at most --rate puts/s (open loop); it prints a summary
with "Requests/sec:" and a latency distribution ("99% in 0.0123 secs.").
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from benchmarks.peers.processes import spawn_logged, stop_all
from kraft.cluster import free_ports


@dataclass(frozen=True, slots=True)
class PutReport:
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    total_s: float


_RPS = re.compile(r"Requests/sec:\s*([\d.]+)")
_TOTAL = re.compile(r"Total:\s*([\d.]+)\s*secs")
_PCT = re.compile(r"^\s*([\d.]+)% in ([\d.]+) secs", re.MULTILINE)


def parse_put_report(text: str) -> PutReport:
    """The summary `benchmark put` printed (ValueError if there is none)."""
    rps = _RPS.search(text)
    total = _TOTAL.search(text)
    if rps is None or total is None:
        raise ValueError(f"no benchmark summary in: {text[-500:]!r}")
    pct = {float(p): float(s) * 1000 for p, s in _PCT.findall(text)}
    return PutReport(
        float(rps.group(1)),
        pct.get(50.0, float("nan")),
        pct.get(99.0, float("nan")),
        float(total.group(1)),
    )


class EtcdCluster:
    def __init__(self, root: Path, bin_dir: Path) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.names = ("e1", "e2", "e3")
        ports = free_ports(6)
        self.client_ports = dict(zip(self.names, ports[:3], strict=True))
        self.peer_ports = dict(zip(self.names, ports[3:], strict=True))
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        root.mkdir(parents=True, exist_ok=True)

    def endpoint(self, name: str) -> str:
        return f"127.0.0.1:{self.client_ports[name]}"

    def endpoints(self) -> str:
        return ",".join(self.endpoint(n) for n in self.names)

    def start(self) -> None:
        cluster = ",".join(f"{n}=http://127.0.0.1:{self.peer_ports[n]}" for n in self.names)
        for n in self.names:
            client = f"http://127.0.0.1:{self.client_ports[n]}"
            peer = f"http://127.0.0.1:{self.peer_ports[n]}"
            self.procs[n] = spawn_logged(
                [
                    str(self.bin_dir / "etcd"),
                    "--name",
                    n,
                    "--data-dir",
                    str(self.root / n),
                    "--listen-client-urls",
                    client,
                    "--advertise-client-urls",
                    client,
                    "--listen-peer-urls",
                    peer,
                    "--initial-advertise-peer-urls",
                    peer,
                    "--initial-cluster",
                    cluster,
                    "--initial-cluster-state",
                    "new",
                    "--initial-cluster-token",
                    "kraft-bench",
                    "--log-level",
                    "warn",
                ],
                self.root / f"{n}.log",
            )

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]

    def status(self, name: str) -> dict[str, object] | None:
        """The node's Maintenance.Status over etcd's JSON gateway (None: no answer)."""
        url = f"http://{self.endpoint(name)}/v3/maintenance/status"
        try:
            req = urllib.request.Request(url, data=b"{}", method="POST")
            with urllib.request.urlopen(req, timeout=1.0) as r:
                answer: dict[str, object] = json.loads(r.read())
                return answer
        except (OSError, ValueError):
            return None

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = [self.status(n) for n in self.names]
            leaders = {str(s.get("leader")) for s in states if s is not None}
            if all(s is not None for s in states) and len(leaders) == 1 and "0" not in leaders:
                return
            time.sleep(0.1)
        raise TimeoutError(f"etcd: no leader agreed by all nodes within {timeout_s} s")

    def put(self, clients: int, total: int, rate: int = 0, value_bytes: int = 100) -> PutReport:
        """One `benchmark put` run against the leader (--target-leader)."""
        cmd = [
            str(self.bin_dir / "benchmark"),
            "--endpoints",
            self.endpoints(),
            "--target-leader",
            "--clients",
            str(clients),
            "--conns",
            str(max(1, min(clients, 100))),
            "put",
            "--key-size",
            "8",
            "--val-size",
            str(value_bytes),
            "--total",
            str(total),
            "--sequential-keys",
            "--key-space-size",
            str(max(total, 1)),
            *(["--rate", str(rate)] if rate else []),
        ]
        done = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            raise RuntimeError(f"benchmark put failed ({done.returncode}): {done.stderr[-500:]}")
        return parse_put_report(done.stdout + done.stderr)

    def stop_all(self, timeout_s: float = 10.0) -> None:
        stop_all(self.procs.values(), timeout_s)
