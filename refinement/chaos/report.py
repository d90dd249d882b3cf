"""What a chaos run is asked to do and what it found: the run's configuration (ChaosConfig),
one record per fault cycle, and the report (ChaosReport: the verdict, the failover and
unavailability figures, per-fault rows, the replay command, PASSED or FAILED)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from refinement.chaos.procs import TailLoss
from refinement.chaos.schedule import ALL_KINDS, Fault, FaultKind
from refinement.chaos.verdict import Verdict, percentile


class ChaosError(Exception):
    """The run could not be carried out (not: the cluster misbehaved, which the verdict says)."""


@dataclass(frozen=True)
class ChaosConfig:
    seed: int = 1
    cycles: int = 10
    duration_s: float | None = None  # stop starting cycles after this many seconds
    nodes: int = 3
    writers: int = 3
    kinds: tuple[FaultKind, ...] = ALL_KINDS
    min_hold_ms: int = 1000
    max_hold_ms: int = 3000
    recovery_timeout_s: float = 20.0
    converge_timeout_s: float = 60.0
    writer_pause_s: float = 0.05
    resend: bool = True
    allow_duplicates: bool = False
    tlc: bool = True
    tlc_max_events: int = 0  # 0: the whole (validatable) trace
    tlc_timeout_s: float = 900.0
    root: Path | None = None
    keep: bool = False
    progress: bool = True


@dataclass
class CycleRecord:
    fault: Fault
    nodes: tuple[int, ...] = ()
    leader: int | None = None
    epoch: int = -1
    started: float = 0.0
    healed: float = 0.0
    recovered: float | None = None
    tail_loss: TailLoss | None = None
    unflushed_seen: bool = False
    failover_s: float | None = None

    def line(self) -> str:
        f = self.fault
        what = f.kind.value
        if f.kind is FaultKind.SLOW_NETWORK:
            what += f" {f.delay_ms}+-{f.jitter_ms} ms"
        elif f.kind is FaultKind.LOSSY_NETWORK:
            what += f" {f.loss:.0%}"
        elif f.kind in (FaultKind.PARTITION_LEADER, FaultKind.PARTITION_RANDOM):
            what += f" ({f.style})"
        elif f.kind is FaultKind.ONE_WAY:
            what += " (leader's sends)" if f.outbound else " (to the leader)"
        nodes = ",".join(map(str, self.nodes)) or "-"
        rec = (
            f"recovered {self.recovered - self.healed:.1f} s after heal"
            if self.recovered is not None
            else "NOT recovered in time"
        )
        extra = ""
        if self.tail_loss is not None:
            extra = f"; dropped {self.tail_loss.bytes_dropped} un-fsynced bytes"
        if self.failover_s is not None:
            extra += f"; failover {self.failover_s * 1000:.0f} ms"
        return (
            f"{what} on node(s) {nodes} (leader {self.leader}, epoch {self.epoch}), "
            f"held {self.healed - self.started:.1f} s, {rec}{extra}"
        )


@dataclass
class ChaosReport:
    config: ChaosConfig
    root: Path
    cycles: list[CycleRecord] = field(default_factory=list)
    verdict: Verdict | None = None
    attempts: int = 0
    unknown: int = 0  # attempts with an unknown outcome
    unresolved: int = 0  # values never acknowledged (given up or cut short by the end)
    refused: int = 0
    converged: bool = False
    exit_codes: dict[int, int | None] = field(default_factory=dict)
    failover_s: list[float] = field(default_factory=list)
    leader_fault_failover_s: list[float] = field(default_factory=list)
    longest_gap_s: float = 0.0
    longest_gap_cycle: str = ""
    longest_gap_at: float = 0.0
    wall_s: float = 0.0
    dropped_frames: int = 0
    tlc: str = "not run"
    tlc_ok: bool | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        v = self.verdict
        if v is None:
            return False
        return (
            v.lost == 0
            and v.identical
            and (self.config.allow_duplicates or v.duplicated == 0)
            and self.tlc_ok is not False
            and not self.problems
        )

    def replay_command(self) -> str:
        c = self.config
        kinds = ",".join(k.value for k in c.kinds) if c.kinds != ALL_KINDS else "all"
        return (
            f"kraft chaos --seed {c.seed} --cycles {len(self.cycles)} --faults {kinds} "
            f"--min-hold-ms {c.min_hold_ms} --max-hold-ms {c.max_hold_ms}"
        )

    def _per_kind(self) -> list[str]:
        """Per fault kind: cycles, recovery after the heal, failover (leader faults)."""
        rows = ["  per fault: kind, cycles, recovery after heal p50/max, failover p50/p99"]
        for kind in FaultKind:
            cs = [c for c in self.cycles if c.fault.kind is kind]
            if not cs:
                continue
            rec = [c.recovered - c.healed for c in cs if c.recovered is not None]
            fo = [c.failover_s for c in cs if c.failover_s is not None]
            rows.append(
                f"    {kind.value:<17} {len(cs):>4}  {_ms(percentile(rec, 50)):>8} "
                f"{_ms(max(rec, default=None)):>8}  "
                + (f"{_ms(percentile(fo, 50)):>8} {_ms(percentile(fo, 99)):>8}" if fo else "")
            )
        return rows

    def summary(self) -> str:
        v = self.verdict
        out = [f"chaos: seed {self.config.seed}, {len(self.cycles)} cycles in {self.wall_s:.0f} s"]
        if v is not None:
            dup = (
                "allowed (appends not idempotent yet)"
                if self.config.allow_duplicates
                else ("must be 0")
            )
            out += [
                f"  writes: {v.issued} values issued, {self.attempts} attempts, "
                f"{v.acknowledged} acknowledged, {self.unresolved} never acknowledged; "
                f"attempts: {self.unknown} unknown outcomes (resent), {self.refused} refused",
                f"  lost (acknowledged, not at its offset on every node): {v.lost}"
                + (f" {v.lost_by_node}" if v.lost_by_node else ""),
                f"  committed logs identical on all nodes: {'yes' if v.identical else 'NO'}"
                f" ({v.committed_end} offsets, {v.data_records} data records)",
                f"  duplicated values: {v.duplicated} ({v.extra_copies} extra copies; {dup})",
                f"  unacknowledged but present: {v.unacked_present}"
                f" (of which every attempt refused: {v.refused_present});"
                f" acknowledged epoch differs from the stored batch's: {v.epoch_mismatch}",
                f"  failover, SIGKILL of the leader (quorum left) -> first acknowledged write "
                f"of a later epoch: n={len(self.failover_s)}"
                f" p50 {_ms(percentile(self.failover_s, 50))}"
                f" p99 {_ms(percentile(self.failover_s, 99))}"
                f" max {_ms(max(self.failover_s, default=None))}",
                f"  failover, every leader fault (kill, pause, partition, one-way): "
                f"n={len(self.leader_fault_failover_s)}"
                f" p50 {_ms(percentile(self.leader_fault_failover_s, 50))}"
                f" p99 {_ms(percentile(self.leader_fault_failover_s, 99))}",
                f"  longest unavailability (gap between acknowledgements): "
                f"{_ms(self.longest_gap_s)} at {self.longest_gap_at:.1f} s{self.longest_gap_cycle}",
                f"  cycles not recovered within {self.config.recovery_timeout_s:.0f} s: "
                f"{sum(1 for c in self.cycles if c.recovered is None)};"
                f" crash-unflushed that dropped bytes: "
                f"{sum(1 for c in self.cycles if c.tail_loss and c.tail_loss.bytes_dropped)}"
                f"/{sum(1 for c in self.cycles if c.fault.kind is FaultKind.CRASH_UNFLUSHED)};"
                f" frames dropped by the proxies: {self.dropped_frames}",
                f"  converged after the last heal: {'yes' if self.converged else 'NO'};"
                f" node exit codes {self.exit_codes}",
            ]
            out += self._per_kind()
            out += [f"  lost: {e}" for e in v.lost_examples]
            out += [f"  divergence: {d}" for d in v.divergence]
            out += [f"  duplicate: {d}" for d in v.duplicate_examples[:3]]
        out.append(f"  TLC trace validation: {self.tlc}")
        out += [f"  problem: {p}" for p in self.problems]
        out.append(f"  replay the schedule: {self.replay_command()}")
        out.append(
            f"  data: {self.root} (node logs, traces, fsync journals, history.ndjson, cycles.txt)"
        )
        out.append(f"chaos: {'PASSED' if self.passed else 'FAILED'}")
        return "\n".join(out)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.0f} ms"
