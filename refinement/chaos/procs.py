"""Process control for the chaos harness: N `kraft start` processes on 127.0.0.1, each with
its peers behind the link proxies, under SIGKILL, SIGSTOP/SIGCONT and restarts.

Layout under the root: `node-<id>/` (data), `node-<id>.properties`, `node-<id>.log` (output),
`node-<id>.trace.ndjson` (the replica's trace), `node-<id>.fsync` (the fsync journal of
refinement.chaos.probe). Node n's `controller.quorum.voters` gives its own real address and,
for every peer m, the port of the proxy Link(n, m); its listener is its real address, which is
also what clients use (clients are not behind proxies).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kraft.cluster import NodeFiles
from kraft.server.config import render_properties
from kraft.storage.meta_properties import META_PROPERTIES, format_storage, generate_cluster_id
from kraft.storage.segmented_log import LOG_DIR_NAME

__all__ = ["ChaosCluster", "Journal", "TailLoss", "drop_unflushed_tail", "segments"]

_LOG_SUFFIX = ".log"


class Journal:
    """Incremental reader of a node's fsync journal (refinement.chaos.probe)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pos = 0
        self._partial = b""
        self.sizes: dict[str, int] = {}

    def refresh(self) -> dict[str, int]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._pos)
                chunk = f.read()
        except FileNotFoundError:
            return self.sizes
        self._pos += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            size, sep, path = line.decode("utf-8", "replace").partition(" ")
            if sep and size.isdigit():
                self.sizes[path] = int(size)
        return self.sizes


@dataclass(frozen=True, slots=True)
class TailLoss:
    """What a crash-unflushed fault dropped from one node's segments."""

    node: int
    bytes_dropped: int
    files: tuple[tuple[str, int, int, int], ...]  # (name, durable, size before, size after)


def _batch_ends(path: Path, limit: int) -> list[int]:
    """Byte positions where whole batches end, up to `limit` (headers only)."""
    ends = [0]
    with open(path, "rb") as f:
        data = f.read(limit)
    pos = 0
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if length <= 0:
            break
        pos += 12 + length
        if pos > len(data):
            break
        ends.append(pos)
    return ends


class ChaosCluster(NodeFiles):
    def __init__(
        self,
        root: Path,
        ports: Mapping[int, int],
        proxy_port: Callable[[int, int], int],
        *,
        overrides: Mapping[str, str],
        host: str = "127.0.0.1",
        trace: bool = True,
    ) -> None:
        self.root = root
        self.host = host
        self.ports = dict(ports)
        self.node_ids = tuple(sorted(ports))
        self._proxy_port = proxy_port
        self.overrides = dict(overrides)
        self.trace = trace
        self.cluster_id = generate_cluster_id(random.Random())
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._paused: set[int] = set()
        self.journals = {n: Journal(self.journal_path(n)) for n in self.node_ids}
        self.starts = dict.fromkeys(self.node_ids, 0)

    # ---- paths

    def log_dir(self, n: int) -> Path:
        return self.data_dir(n) / LOG_DIR_NAME

    def journal_path(self, n: int) -> Path:
        return self.root / f"node-{n}.fsync"

    def address(self, n: int) -> tuple[str, int]:
        return (self.host, self.ports[n])

    # ---- lifecycle

    def format(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for n in self.node_ids:
            if not (self.data_dir(n) / META_PROPERTIES).exists():
                format_storage(self.data_dir(n), self.cluster_id, n)
            voters = ",".join(
                f"{m}@{self.host}:{self.ports[m] if m == n else self._proxy_port(n, m)}"
                for m in self.node_ids
            )
            props = {
                "node.id": str(n),
                "process.roles": "controller",
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://{self.host}:{self.ports[n]}",
                "metadata.log.dir": str(self.data_dir(n)),
                **self.overrides,
            }
            if self.trace:
                props["kraft.trace.file"] = str(self.trace_path(n))
            self.config_path(n).write_text(render_properties(props), encoding="utf-8")

    def start(self, n: int) -> None:
        if self.is_running(n):
            return
        with open(self.log_path(n), "ab") as out:
            self._procs[n] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "refinement.chaos.probe",
                    str(self.journal_path(n)),
                    "start",
                    "--config",
                    str(self.config_path(n)),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        self._paused.discard(n)
        self.starts[n] += 1

    def is_running(self, n: int) -> bool:
        p = self._procs.get(n)
        return p is not None and p.poll() is None

    def is_paused(self, n: int) -> bool:
        return n in self._paused and self.is_running(n)

    def exit_code(self, n: int) -> int | None:
        p = self._procs.get(n)
        return None if p is None else p.poll()

    def kill(self, n: int) -> None:
        """SIGKILL (works on a stopped process too) and reap."""
        p = self._procs.get(n)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
        self._paused.discard(n)

    def kill_when_unflushed(self, n: int, within_s: float) -> bool:
        """SIGKILL `n` at a moment its log holds bytes not yet fsynced, if one comes within
        `within_s` (else kill anyway); True if such a moment was seen."""
        journal = self.journals[n]
        deadline = time.monotonic() + within_s
        seen = False
        while time.monotonic() < deadline and not seen:
            durable = journal.refresh()
            for seg in self._segments(n):
                try:
                    size = seg.stat().st_size
                except FileNotFoundError:
                    continue
                if size > durable.get(os.path.realpath(seg), 0):
                    seen = True
                    break
            else:
                time.sleep(0.003)
        self.kill(n)
        return seen

    def pause(self, n: int) -> None:
        p = self._procs.get(n)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGSTOP)
            self._paused.add(n)

    def resume(self, n: int) -> None:
        p = self._procs.get(n)
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGCONT)
        self._paused.discard(n)

    def stop_all(self, timeout_s: float = 15.0) -> dict[int, int | None]:
        """SIGCONT then SIGTERM every node, wait (SIGKILL after `timeout_s`)."""
        for n in self.node_ids:
            self.resume(n)
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: dict[int, int | None] = {}
        for n in self.node_ids:
            p = self._procs.get(n)
            if p is None:
                codes[n] = None
                continue
            try:
                p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            codes[n] = p.returncode
        return codes

    # ---- losing the un-fsynced tail

    def _segments(self, n: int) -> list[Path]:
        names = sorted(p for p in self.log_dir(n).glob("*" + _LOG_SUFFIX) if p.name[:-4].isdigit())
        return names

    def lose_unflushed(self, n: int, cut: float, torn: bool) -> TailLoss:
        """Cut node `n`'s segments (it must be down) back towards what it fsynced; see
        `drop_unflushed_tail`."""
        if self.is_running(n):
            raise RuntimeError(f"node {n} is running; kill it before dropping its tail")
        dropped, files = drop_unflushed_tail(self.log_dir(n), self.journals[n].refresh(), cut, torn)
        return TailLoss(n, dropped, files)


def segments(log_dir: Path) -> list[Path]:
    """The `%020d.log` segment files of a log directory, oldest first."""
    return sorted(p for p in log_dir.glob("*" + _LOG_SUFFIX) if p.name[:-4].isdigit())


def drop_unflushed_tail(
    log_dir: Path, durable: Mapping[str, int], cut: float, torn: bool
) -> tuple[int, tuple[tuple[str, int, int, int], ...]]:
    """What a power loss may do to a log whose process is gone: in the first segment that has
    bytes beyond its durable size (`durable`: real path -> size, from the fsync journal),
    cut inside that un-fsynced part at `cut` (0 drops all of it, 1 none), on a batch boundary
    unless `torn`; every later segment back to its durable size (unflushed data of a newer
    segment does not outlive that of an older one). Never below a durable size: what was
    fsynced is kept. Returns (bytes dropped, (name, durable, size before, size after) per
    file cut)."""
    files: list[tuple[str, int, int, int]] = []
    dropped = 0
    cutting = False
    for seg in segments(log_dir):
        size = seg.stat().st_size
        keep = durable.get(os.path.realpath(seg), 0)
        if size <= keep:
            continue
        if cutting:
            new = keep
        else:
            new = keep + int(min(max(cut, 0.0), 1.0) * (size - keep))
            if not torn:
                new = max([e for e in _batch_ends(seg, new) if e <= new] + [keep])
        if new < size:
            os.truncate(seg, new)
            files.append((seg.name, keep, size, new))
            dropped += size - new
            cutting = True
    return dropped, tuple(files)
