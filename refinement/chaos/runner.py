"""One chaos run: start the cluster behind the proxies, run the writers, apply the schedule
cycle by cycle, heal, converge, stop, read the logs back, judge, validate the traces (its
configuration and report are report.py).

A cycle: find the leader (the schedule names roles, resolved here), apply the fault, hold it,
heal it (restart, SIGCONT, links back up), wait for recovery (every node up, one leader they
all follow, an acknowledged write after the heal), pause, next.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import tempfile
import time
from pathlib import Path

from kraft.client import Address, ClientError, NodeInfo, node_info
from kraft.cluster import free_ports
from refinement.chaos.procs import ChaosCluster
from refinement.chaos.proxy import Network
from refinement.chaos.report import ChaosConfig, ChaosError, ChaosReport, CycleRecord
from refinement.chaos.schedule import (
    Fault,
    FaultKind,
    Target,
    make_schedule,
)
from refinement.chaos.verdict import judge, read_log
from refinement.chaos.writers import History, Outcome, Writer, WriterConfig

# Shorter than Kafka's defaults, as `kraft demo` uses, so a failover takes about a second.
NODE_TIMEOUTS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
    "controller.quorum.request.timeout.ms": "1500",
    "controller.quorum.fetch.max.wait.ms": "200",
}

# Faults that take the leader away (its failover is measured).
LEADER_FAULTS = frozenset(
    {
        FaultKind.KILL_LEADER,
        FaultKind.KILL_TWO,
        FaultKind.PAUSE_LEADER,
        FaultKind.PARTITION_LEADER,
        FaultKind.ONE_WAY,
    }
)
# SIGKILLs of the leader with a quorum left (kill-leader, crash-unflushed of the leader): the
# figure `failover` reports. kill-two leaves no quorum until its restart; it is in the table.
LEADER_KILLS = frozenset({FaultKind.KILL_LEADER})


def _say(enabled: bool, text: str) -> None:
    if enabled:
        print(text, flush=True)


class _Run:
    def __init__(self, config: ChaosConfig, root: Path) -> None:
        self.config = config
        self.root = root
        self.history = History()
        self.report = ChaosReport(config, root)
        self.t0 = time.monotonic()
        self.network: Network
        self.cluster: ChaosCluster
        self.addresses: dict[int, Address] = {}
        self.writers: list[Writer] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.lossy_starts: set[tuple[int, int]] = set()  # (node, start number)

    def say(self, text: str) -> None:
        _say(self.config.progress, f"[{time.monotonic() - self.t0:6.1f}s] {text}")

    # ---- observing the cluster

    async def _info(self, n: int) -> NodeInfo | None:
        if not self.cluster.is_running(n) or self.cluster.is_paused(n):
            return None
        try:
            return await node_info(self.addresses[n], timeout_s=0.5)
        except ClientError:
            return None

    async def leader(self) -> NodeInfo | None:
        """The leader every node follows in its epoch (all nodes up), else None."""
        nodes = self.cluster.node_ids
        infos = await asyncio.gather(*(self._info(n) for n in nodes))
        leaders = [i for i in infos if i is not None and i.state == "Leader"]
        if len(leaders) != 1:
            return None
        lead = leaders[0]
        if all(
            i is not None and i.epoch == lead.epoch and i.leader_id == lead.node_id for i in infos
        ):
            return lead
        return None

    async def claimed_leader(self) -> NodeInfo | None:
        infos = await asyncio.gather(*(self._info(n) for n in self.cluster.node_ids))
        leaders = [i for i in infos if i is not None and i.state == "Leader"]
        return max(leaders, key=lambda i: i.epoch, default=None)

    async def wait_leader(self, timeout_s: float) -> NodeInfo | None:
        deadline = time.monotonic() + timeout_s
        while True:
            lead = await self.leader()
            if lead is not None or time.monotonic() > deadline:
                return lead
            await asyncio.sleep(0.1)

    # ---- the run

    async def main(self) -> ChaosReport:
        c = self.config
        ports = free_ports(c.nodes)
        ids = list(range(1, c.nodes + 1))
        self.addresses = {n: Address("127.0.0.1", p) for n, p in zip(ids, ports, strict=True)}
        self.network = Network(
            {n: ("127.0.0.1", p) for n, p in zip(ids, ports, strict=True)}, c.seed
        )
        await self.network.start()
        self.cluster = ChaosCluster(
            self.root,
            dict(zip(ids, ports, strict=True)),
            self.network.port,
            overrides=NODE_TIMEOUTS,
        )
        self.cluster.format()
        try:
            await self._body()
        finally:
            for w in self.writers:
                w.stopping = True
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.report.exit_codes = await asyncio.to_thread(self.cluster.stop_all)
            await self.network.close()
        await self._judge()
        if c.tlc:
            await asyncio.to_thread(self._validate_traces)
        self.report.wall_s = time.monotonic() - self.t0
        return self.report

    async def _body(self) -> None:
        c = self.config
        cluster = self.cluster
        self.say(
            f"starting {c.nodes} nodes under {self.root} "
            f"(clients: {', '.join(map(str, self.addresses.values()))}; peers via 6 proxies)"
            if c.nodes == 3
            else f"starting {c.nodes} nodes under {self.root}"
        )
        for n in cluster.node_ids:
            cluster.start(n)
        lead = await self.wait_leader(30.0)
        if lead is None:
            raise ChaosError(f"no leader elected within 30 s; node logs in {self.root}")
        self.say(f"node {lead.node_id} leads epoch {lead.epoch}; {c.writers} writers start")
        shared = Writer.shared_leader(list(cluster.node_ids))
        shared.node = lead.node_id
        wc = WriterConfig(pause_s=c.writer_pause_s, resend=c.resend)
        self.writers = [
            Writer(i, self.addresses, self.history, shared, wc) for i in range(c.writers)
        ]
        self.tasks = [asyncio.create_task(w.run()) for w in self.writers]
        schedule = make_schedule(
            c.seed, c.cycles, c.kinds, min_hold_ms=c.min_hold_ms, max_hold_ms=c.max_hold_ms
        )
        await asyncio.sleep(1.0)
        for fault in schedule:
            if c.duration_s is not None and time.monotonic() - self.t0 > c.duration_s:
                self.say(f"--duration {c.duration_s:.0f} s reached after {fault.cycle} cycles")
                break
            for t in self.tasks:
                if t.done() and t.exception() is not None:
                    raise ChaosError(f"a writer failed: {t.exception()!r}")
            record = await self._cycle(fault)
            self.report.cycles.append(record)
            acks = len(self.history.acks)
            self.say(f"cycle {fault.cycle + 1}/{len(schedule)}: {record.line()}; {acks} acked")
        await self._finish()

    async def _cycle(self, fault: Fault) -> CycleRecord:
        cluster, net = self.cluster, self.network
        rec = CycleRecord(fault)
        lead = await self.wait_leader(10.0) or await self.claimed_leader()
        nodes = list(cluster.node_ids)
        leader = lead.node_id if lead is not None else nodes[fault.pick % len(nodes)]
        rec.leader = lead.node_id if lead is not None else None
        rec.epoch = lead.epoch if lead is not None else -1
        followers = [n for n in nodes if n != leader]
        follower = followers[fault.pick % len(followers)] if followers else leader
        target = leader if fault.target is Target.LEADER else follower
        hold = fault.hold_ms / 1000
        kind = fault.kind
        rec.started = time.monotonic()
        if kind in (FaultKind.KILL_LEADER, FaultKind.KILL_FOLLOWER):
            rec.nodes = (target,)
            cluster.kill(target)
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            cluster.start(target)
        elif kind is FaultKind.KILL_TWO:
            rec.nodes = (leader, follower)
            cluster.kill(leader)
            cluster.kill(follower)
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            cluster.start(leader)
            cluster.start(follower)
        elif kind is FaultKind.PAUSE_LEADER:
            rec.nodes = (leader,)
            cluster.pause(leader)
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            cluster.resume(leader)
        elif kind in (FaultKind.PARTITION_LEADER, FaultKind.PARTITION_RANDOM):
            rec.nodes = (target,)
            net.isolate(target, fault.style)
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            net.heal()
        elif kind is FaultKind.ONE_WAY:
            rec.nodes = (leader,)
            for f in followers:
                if fault.outbound:
                    net.block(leader, f)
                else:
                    net.block(f, leader)
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            net.heal()
        elif kind in (FaultKind.SLOW_NETWORK, FaultKind.LOSSY_NETWORK):
            rec.nodes = tuple(nodes)
            if kind is FaultKind.SLOW_NETWORK:
                net.degrade(delay_ms=fault.delay_ms, jitter_ms=fault.jitter_ms)
            else:
                net.degrade(loss=fault.loss)
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            net.heal()
        elif kind is FaultKind.CRASH_UNFLUSHED:
            rec.nodes = (target,)
            rec.unflushed_seen = await asyncio.to_thread(cluster.kill_when_unflushed, target, 2.0)
            rec.started = time.monotonic()
            rec.tail_loss = cluster.lose_unflushed(target, fault.cut, fault.torn)
            if rec.tail_loss.bytes_dropped:
                self.lossy_starts.add((target, cluster.starts[target] + 1))
            await asyncio.sleep(hold)
            rec.healed = time.monotonic()
            cluster.start(target)
        else:  # pragma: no cover - every kind is handled above
            raise ChaosError(f"unhandled fault kind {kind}")
        rec.recovered = await self._recover(rec.healed)
        await asyncio.sleep(fault.quiet_ms / 1000)
        return rec

    async def _recover(self, healed: float) -> float | None:
        """When every node is up, follows one leader, and a write was acknowledged after the
        heal; None if that does not happen within recovery_timeout_s."""
        deadline = time.monotonic() + self.config.recovery_timeout_s
        while time.monotonic() < deadline:
            self._restart_exited()
            if self.history.last_ack > healed and await self.leader() is not None:
                return time.monotonic()
            await asyncio.sleep(0.1)
        return None

    def _restart_exited(self) -> None:
        """A node that exited on its own (not killed by the harness) is a problem; it is
        restarted so the run goes on."""
        for n in self.cluster.node_ids:
            if not self.cluster.is_running(n):
                code = self.cluster.exit_code(n)
                self.report.problems.append(
                    f"node {n} exited on its own (status {code}); see {self.cluster.log_path(n)}"
                )
                self.cluster.start(n)

    async def _finish(self) -> None:
        c, cluster = self.config, self.cluster
        self.network.heal()
        for n in cluster.node_ids:
            cluster.resume(n)
        self._restart_exited()  # every fault was healed: a node down now exited on its own
        self.say("healed everything; stopping the writers")
        for w in self.writers:
            w.stopping = True
        _, pending = await asyncio.wait(self.tasks, timeout=c.recovery_timeout_s)
        for t in pending:
            t.cancel()
        self.say("waiting for every node to hold the same committed log")
        deadline = time.monotonic() + c.converge_timeout_s
        final: NodeInfo | None = None
        while time.monotonic() < deadline:
            lead = await self.leader()
            infos = await asyncio.gather(*(self._info(n) for n in cluster.node_ids))
            if (
                lead is not None
                and lead.high_watermark is not None
                and all(
                    i is not None
                    and i.end_offset == lead.end_offset
                    and i.high_watermark == lead.high_watermark == lead.end_offset
                    for i in infos
                )
            ):
                final = lead
                break
            await asyncio.sleep(0.2)
        self.report.converged = final is not None
        if final is None:
            final = await self.claimed_leader()
            self.report.problems.append(
                f"the nodes did not converge within {c.converge_timeout_s:.0f} s of the last heal"
            )
        self.final_hwm = (
            None if final is None or final.high_watermark is None else int(final.high_watermark)
        )
        self.say(f"stopping the nodes (final high watermark {self.final_hwm})")

    async def _judge(self) -> None:
        rep, h = self.report, self.history
        logs = {n: read_log(self.cluster.data_dir(n)) for n in self.cluster.node_ids}
        end = getattr(self, "final_hwm", None)
        if end is None:
            end = min((recs[-1][0] + 1 if recs else 0) for recs in logs.values())
        rep.verdict = judge(h, logs, end)
        self._write_history()
        rep.attempts = len(h.attempts)
        rep.unknown = sum(1 for a in h.attempts if a.outcome is Outcome.UNKNOWN)
        rep.unresolved = sum(1 for v in h.issued if v not in h.acks)
        rep.refused = sum(1 for a in h.attempts if a.outcome is Outcome.REFUSED)
        rep.dropped_frames = self.network.dropped()
        self._availability()

    def _write_history(self) -> None:
        """The writers' history and the cycles, beside the node data, for a post-mortem."""
        with open(self.root / "history.ndjson", "w", encoding="utf-8") as f:
            for a in self.history.attempts:
                row = {
                    "writer": a.writer,
                    "value": a.value.decode(errors="replace"),
                    "node": a.node,
                    "started": round(a.started - self.t0, 4),
                    "ended": round(a.ended - self.t0, 4),
                    "outcome": a.outcome.value,
                    "offset": a.offset,
                    "epoch": a.epoch,
                    "error": a.error,
                }
                f.write(json.dumps(row, sort_keys=True) + "\n")
        with open(self.root / "cycles.txt", "w", encoding="utf-8") as f:
            for c in self.report.cycles:
                f.write(f"{c.fault.cycle + 1} {c.started - self.t0:.2f}s {c.line()}\n")
                f.write(f"    {c.fault.describe()}\n")

    def _availability(self) -> None:
        rep, h = self.report, self.history
        acks = sorted((a for a in h.attempts if a.outcome is Outcome.ACK), key=lambda a: a.ended)
        cycles = rep.cycles
        for i, cyc in enumerate(cycles):
            if cyc.fault.kind not in LEADER_FAULTS and not (
                cyc.fault.kind is FaultKind.CRASH_UNFLUSHED and cyc.nodes == (cyc.leader,)
            ):
                continue
            if cyc.leader is None:
                continue
            until = cycles[i + 1].started if i + 1 < len(cycles) else float("inf")
            first = next(
                (a for a in acks if cyc.started < a.ended < until and a.epoch > cyc.epoch), None
            )
            if first is None:
                continue
            cyc.failover_s = first.ended - cyc.started
            rep.leader_fault_failover_s.append(cyc.failover_s)
            if cyc.fault.kind in LEADER_KILLS or cyc.fault.kind is FaultKind.CRASH_UNFLUSHED:
                rep.failover_s.append(cyc.failover_s)
        times = [a.ended for a in acks]
        best, at = 0.0, 0.0
        for a, b in itertools.pairwise(times):
            if b - a > best:
                best, at = b - a, a
        rep.longest_gap_s = best
        rep.longest_gap_at = at - self.t0
        best_overlap = 0.0
        for cyc in cycles:
            end = cyc.recovered if cyc.recovered is not None else cyc.healed
            overlap = min(at + best, end) - max(at, cyc.started)
            if overlap > best_overlap:
                best_overlap = overlap
                rep.longest_gap_cycle = f" (cycle {cyc.fault.cycle + 1}: {cyc.fault.kind.value})"

    def _validate_traces(self) -> None:
        from refinement.tlc import TlcError
        from refinement.traces import merge_traces, validate_trace

        rep, c = self.report, self.config
        nodes = list(self.cluster.node_ids)
        events = merge_traces(self.cluster.trace_path(n) for n in nodes)
        total = len(events)
        cut = total
        why = ""
        # The spec's logs are durable on append (KRaft.tla's Crash keeps the log): a restart
        # after the un-fsynced tail was dropped is not a behaviour it has. Validate up to it.
        restarts: dict[int, int] = {}
        for i, ev in enumerate(events):
            if ev.actions[:1] == ("Restart",) and ev.node is not None:
                restarts[ev.node] = restarts.get(ev.node, 1) + 1
                if (ev.node, restarts[ev.node]) in self.lossy_starts:
                    cut = i - 1 if i > 0 and events[i - 1].action == "Crash" else i
                    why = (
                        f" (stopped before event {i}: node {ev.node} restarts without its"
                        " un-fsynced tail, which KRaft.tla cannot express: its logs are durable"
                        " on append)"
                    )
                    break
        if c.tlc_max_events and cut > c.tlc_max_events:
            cut = c.tlc_max_events
            why = f" (--tlc-max-events {c.tlc_max_events})"
        if cut == 0:
            rep.tlc = f"nothing to validate{why}"
            return
        self.say(f"TLC trace validation of {cut} of {total} merged events")
        try:
            res = validate_trace(events[:cut], timeout_s=c.tlc_timeout_s, voters=nodes)
        except TlcError as e:
            rep.tlc = f"did not finish: {str(e).splitlines()[0]}"
            rep.tlc_ok = False
            return
        rep.tlc_ok = res.accepted
        head = f"{cut} of {total} events{why}: "
        rep.tlc = head + res.summary().replace("\n", "\n    ")


def run_chaos(config: ChaosConfig) -> ChaosReport:
    """Carry out one run; the report (also on a failed verdict). Raises ChaosError when the
    run itself cannot be carried out."""
    if config.nodes < 3:
        raise ChaosError("--nodes must be at least 3 (faults need a leader and two followers)")
    if config.writers < 1:
        raise ChaosError("--writers must be at least 1")
    if config.cycles < 0:
        raise ChaosError("--cycles must not be negative")
    if not 0 < config.min_hold_ms <= config.max_hold_ms:
        raise ChaosError("need 0 < --min-hold-ms <= --max-hold-ms")
    root = config.root or Path(tempfile.mkdtemp(prefix="kraft-chaos-"))
    if config.root is not None and root.exists() and any(root.iterdir()):
        raise ChaosError(f"--data-root {root} is not empty")
    run = _Run(config, root)
    report = asyncio.run(run.main())
    if report.passed and not config.keep:
        shutil.rmtree(root, ignore_errors=True)
    return report
