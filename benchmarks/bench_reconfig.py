"""Voter changes on a real loopback cluster (issue #15's numbers): how long `kraft quorum
add-voter`, `remove-voter` (of the leader) and `reassign` take, and how long the quorum stops
acknowledging writes while they run.

`python -m benchmarks.bench_reconfig` prints the figures; `figures()` feeds benchmarks.run.

The cluster: a dynamic quorum of voters {1,2,3} (`kraft format --initial-controllers`) and
three observers {4,5,6} that know only `controller.quorum.bootstrap.servers`, `kraft start`
subprocesses (kraft.cluster.LocalCluster) with the election timeout of bench_cluster.
A background writer (its own thread and event loop) appends one 100-byte record after another,
one in flight, through the idempotent producer, and notes when each is acknowledged (committed).
The operations are the `kraft` command's own code, run in this process (kraft.cli.main: no
interpreter start-up counted), while the writer runs. Each round, from voters {1,2,3}:

1. add-voter 4 (caught up: it fetched to the leader's high watermark first), then
   remove-voter 4 (a follower), then remove-voter of the leader (it keeps leading until its
   removal commits, then resigns: an election follows), then add-voter of that node again;
2. reassign {1,2,3} -> {4,5,6} (`--voters-from` the new nodes' configuration files: three
   adds, then three removes, the leader last), then reassign back to {1,2,3}.

A quiet window (no operation) separates the operations; its writes give the baselines: one
committed write's latency, and the largest gap between consecutive acknowledgements with no
operation running. The unavailability of an operation is the largest gap between consecutive
acknowledgements that overlaps it (the last one before it starts to the first after it ends
included), beside the election timeout and the quiet gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import pairwise
from pathlib import Path

from benchmarks.bench_cluster import ELECTION_TIMEOUT_MS, NO_SNAPSHOTS, RECORD_BYTES, TIMEOUTS
from benchmarks.figure import Figure
from kraft.client import Address, ClientError, NodeInfo, Producer, append, node_info
from kraft.cluster import LocalCluster, free_ports
from kraft.protocol import uuid_to_base64

ROUNDS = 3
QUIET_S = 1.0
OLD = (1, 2, 3)
NEW = (4, 5, 6)
TIMEOUT_S = 60.0


def _log(text: str) -> None:
    print(f"[bench_reconfig] {text}", file=sys.stderr, flush=True)


class Writer:
    """One record after another, one in flight, on its own thread; `acks` holds
    (acknowledged at, latency) in perf_counter seconds."""

    def __init__(self, bootstrap: list[Address]) -> None:
        self.bootstrap = bootstrap
        self.acks: list[tuple[float, float]] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        producer = Producer()
        i = 0
        while not self._stop.is_set():
            value = (b"%012d" % i).ljust(RECORD_BYTES, b"w")
            sent = time.perf_counter()
            try:
                await append(self.bootstrap, [value], 5000, producer=producer)
            except ClientError:
                self.errors += 1
                await asyncio.sleep(0.01)
                continue
            now = time.perf_counter()
            self.acks.append((now, now - sent))
            i += 1

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_acks_after(self, t: float, n: int = 1, timeout_s: float = TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while sum(1 for at, _ in self.acks[-n - 1 :] if at > t) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the writer got no acknowledgement in {timeout_s:.0f} s")
            time.sleep(0.01)

    def max_gap(self, start: float, end: float) -> float:
        """The largest gap between consecutive acknowledgements overlapping [start, end]."""
        times = [at for at, _ in self.acks]
        gaps = [b - a for a, b in pairwise(times) if b > start and a < end]
        return max(gaps, default=float("nan"))

    def latencies(self, start: float, end: float) -> list[float]:
        return [lat for at, lat in self.acks if start <= at - lat and at <= end]


@dataclass
class Samples:
    """Seconds, per measured thing."""

    write_latency: list[float] = field(default_factory=list)  # medians of quiet windows
    quiet_gap: list[float] = field(default_factory=list)
    add: list[float] = field(default_factory=list)
    add_gap: list[float] = field(default_factory=list)
    remove_follower: list[float] = field(default_factory=list)
    remove_follower_gap: list[float] = field(default_factory=list)
    remove_leader: list[float] = field(default_factory=list)
    remove_leader_gap: list[float] = field(default_factory=list)
    reassign: list[float] = field(default_factory=list)
    reassign_gap: list[float] = field(default_factory=list)
    writer_errors: int = 0


def _info(address: Address) -> NodeInfo | None:
    try:
        return asyncio.run(node_info(address, timeout_s=0.5))
    except ClientError:
        return None


def _wait(what: str, check: Callable[[], object], timeout_s: float = TIMEOUT_S) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s:.0f} s for {what}")
        time.sleep(0.02)


def _leader(cluster: LocalCluster, voters: tuple[int, ...]) -> int | None:
    infos = [_info(cluster.addresses[n]) for n in voters]
    leaders = [i for i in infos if i is not None and i.state == "Leader"]
    if len(leaders) != 1:
        return None
    lead = leaders[0]
    ok = all(i is not None and i.leader_id == lead.node_id for i in infos)
    return lead.node_id if ok else None


def _caught_up(cluster: LocalCluster, node: int, leader: int) -> bool:
    lead, mine = _info(cluster.addresses[leader]), _info(cluster.addresses[node])
    if lead is None or mine is None or lead.high_watermark is None:
        return False
    return mine.leader_id == leader and mine.end_offset >= lead.high_watermark


def _voters_are(cluster: LocalCluster, nodes: tuple[int, ...], voters: tuple[int, ...]) -> bool:
    infos = [_info(cluster.addresses[n]) for n in nodes]
    return all(i is not None and sorted(i.voters) == sorted(voters) for i in infos)


def _kraft(*argv: str) -> tuple[int, str]:
    """The `kraft` command in this process: exit status and what it printed."""
    from kraft.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        status = main(list(argv))
    return status, out.getvalue()


class Bench:
    def __init__(self, cluster: LocalCluster, writer: Writer, samples: Samples) -> None:
        self.cluster = cluster
        self.writer = writer
        self.s = samples
        everyone = (*OLD, *NEW)
        self.everyone = everyone
        self.bootstrap = ",".join(str(cluster.addresses[n]) for n in everyone)

    def quiet(self) -> None:
        start = time.perf_counter()
        time.sleep(QUIET_S)
        end = time.perf_counter()
        self.writer.wait_acks_after(end)
        self.s.quiet_gap.append(self.writer.max_gap(start, end))
        lat = self.writer.latencies(start, end)
        if lat:
            self.s.write_latency.append(statistics.median(lat))

    def timed(self, what: str, *argv: str) -> tuple[float, float]:
        """Run one `kraft` command; its seconds and the largest acknowledgement gap."""
        start = time.perf_counter()
        status, out = _kraft(*argv)
        end = time.perf_counter()
        if status != 0:
            raise RuntimeError(f"{what} failed ({status}): {out}")
        self.writer.wait_acks_after(end)
        gap = self.writer.max_gap(start, end)
        _log(f"{what}: {end - start:.3f} s, max ack gap {gap * 1000:.0f} ms")
        return end - start, gap

    def add(self, node: int, voters: tuple[int, ...]) -> float:
        leader = _wait("a leader", lambda: _leader(self.cluster, voters))
        assert isinstance(leader, int)
        _wait(f"node {node} caught up", lambda: _caught_up(self.cluster, node, leader))
        config = str(self.cluster.config_path(node))
        took, gap = self.timed(
            f"add-voter {node}",
            *("quorum", "add-voter", "--bootstrap", self.bootstrap, "--command-config", config),
        )
        self.s.add.append(took)
        self.s.add_gap.append(gap)
        return took

    def remove(self, node: int) -> tuple[float, float]:
        directory = uuid_to_base64(self.cluster.directory_ids[node])
        return self.timed(
            f"remove-voter {node}",
            *("quorum", "remove-voter", "--bootstrap", self.bootstrap),
            *("--controller-id", str(node), "--controller-directory-id", directory),
        )

    def reassign(self, to: tuple[int, ...]) -> None:
        configs = [str(self.cluster.config_path(n)) for n in to]
        took, gap = self.timed(
            f"reassign to {to}",
            *("quorum", "reassign", "--bootstrap", self.bootstrap, "--voters-from", *configs),
        )
        self.s.reassign.append(took)
        self.s.reassign_gap.append(gap)
        _wait(f"voters {to} everywhere", lambda: _voters_are(self.cluster, self.everyone, to))

    def round(self) -> None:
        voters = OLD
        self.quiet()
        self.add(4, voters)
        _wait("4 voters", lambda: _voters_are(self.cluster, self.everyone, (*OLD, 4)))
        self.quiet()
        took, gap = self.remove(4)
        self.s.remove_follower.append(took)
        self.s.remove_follower_gap.append(gap)
        _wait("3 voters", lambda: _voters_are(self.cluster, self.everyone, OLD))
        self.quiet()
        leader = _wait("a leader", lambda: _leader(self.cluster, OLD))
        assert isinstance(leader, int)
        took, gap = self.remove(leader)
        self.s.remove_leader.append(took)
        self.s.remove_leader_gap.append(gap)
        rest = tuple(n for n in OLD if n != leader)
        _wait("2 voters", lambda: _voters_are(self.cluster, self.everyone, rest))
        self.quiet()
        self.add(leader, rest)
        _wait("3 voters again", lambda: _voters_are(self.cluster, self.everyone, OLD))
        self.quiet()
        for n in NEW:
            _wait(f"node {n} caught up", partial(_caught_up_any, self.cluster, n, OLD))
        self.reassign(NEW)
        self.quiet()
        for n in OLD:
            _wait(f"node {n} caught up", partial(_caught_up_any, self.cluster, n, NEW))
        self.reassign(OLD)


def _caught_up_any(cluster: LocalCluster, node: int, voters: tuple[int, ...]) -> bool:
    leader = _leader(cluster, voters)
    return leader is not None and _caught_up(cluster, node, leader)


@contextlib.contextmanager
def reconfig_cluster() -> Iterator[LocalCluster]:
    root = Path(tempfile.mkdtemp(prefix="kraft-bench-reconfig-"))
    ports = free_ports(len(OLD) + len(NEW))
    cluster = LocalCluster(
        root, ports[: len(OLD)], overrides={**TIMEOUTS, **NO_SNAPSHOTS}, dynamic=True
    )
    for p in ports[len(OLD) :]:
        cluster.add_observer(p)
    try:
        cluster.format()
        cluster.start()
        yield cluster
    finally:
        cluster.stop_all(timeout_s=5.0)
        shutil.rmtree(root, ignore_errors=True)


def measure(rounds: int = ROUNDS) -> Samples:
    samples = Samples()
    with reconfig_cluster() as cluster:
        _wait("a leader", lambda: _leader(cluster, OLD))
        for n in NEW:
            _wait(f"node {n} to observe", partial(_caught_up_any, cluster, n, OLD))
        addresses = [cluster.addresses[n] for n in (*OLD, *NEW)]
        with Writer(addresses) as writer:
            writer.wait_acks_after(time.perf_counter(), 20)
            bench = Bench(cluster, writer, samples)
            for r in range(rounds):
                _log(f"round {r + 1} of {rounds}")
                bench.round()
            bench.quiet()
        samples.writer_errors = writer.errors
    return samples


def _ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1000 if xs else float("nan")


def spread(xs: list[float]) -> str:
    """min..max in ms, for the log and the report."""
    return f"{min(xs) * 1000:,.0f}..{max(xs) * 1000:,.0f} ms (n={len(xs)})" if xs else "n=0"


def figures(rounds: int = ROUNDS) -> list[Figure]:
    return to_figures(measure(rounds))


def to_figures(s: Samples) -> list[Figure]:
    lat = _ms(s.write_latency)
    quiet = _ms(s.quiet_gap)
    et = float(ELECTION_TIMEOUT_MS)
    under = f"< {ELECTION_TIMEOUT_MS} (election timeout)"
    for name in ("write_latency", "quiet_gap", "add", "add_gap", "remove_follower",
                 "remove_follower_gap", "remove_leader", "remove_leader_gap", "reassign",
                 "reassign_gap"):  # fmt: skip
        _log(f"{name}: median {_ms(getattr(s, name)):,.1f} ms, {spread(getattr(s, name))}")
    _log(f"writer errors (appends retried): {s.writer_errors}")

    def gap(label: str, xs: list[float]) -> Figure:
        v = _ms(xs)
        return Figure(
            f"{label}: largest gap between acknowledged writes (election timeout "
            f"{ELECTION_TIMEOUT_MS} ms)",
            v,
            "ms",
            under,
            v < et,
            "largest gap with no operation",
            quiet,
        )

    add = _ms(s.add)
    remove_leader = _ms(s.remove_leader)
    reassign = _ms(s.reassign)
    return [
        Figure(
            "add-voter of a caught-up observer: request to committed answer",
            add,
            "ms",
            "(informative)",
            None,
            "one committed write (one record, under the same load)",
            lat,
        ),
        gap("add-voter", s.add_gap),
        Figure(
            "remove-voter of a follower: request to committed answer",
            _ms(s.remove_follower),
            "ms",
            "(informative)",
            None,
            "one committed write",
            lat,
        ),
        gap("remove-voter of a follower", s.remove_follower_gap),
        Figure(
            "remove-voter of the leader: request to committed answer (it resigns after)",
            remove_leader,
            "ms",
            "(informative)",
            None,
            "one committed write",
            lat,
        ),
        gap("remove-voter of the leader", s.remove_leader_gap),
        Figure(
            "reassign {1,2,3} -> {4,5,6} (and back): 3 adds + 3 removes, leader last",
            reassign,
            "ms",
            "(informative)",
            None,
            "one committed write",
            lat,
        ),
        gap("reassign", s.reassign_gap),
        Figure(
            f"largest gap between acknowledged writes with no operation ({QUIET_S:.0f} s windows)",
            quiet,
            "ms",
            "(informative)",
            None,
            "election timeout",
            et,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)
    for f in figures(args.rounds):
        ratio = f"  ratio {f.ratio:.2f}x" if f.ratio is not None else ""
        base = "" if f.baseline_value is None else f"{f.baseline_value:,.2f}"
        print(f"{f.name}: {f.value:,.1f} {f.unit} [target {f.target}]")
        print(f"    vs {f.baseline_name}: {base}{ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
