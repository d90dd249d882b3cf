"""Conformance runs: simulate seeds under fault profiles and validate each trace with TLC
(`python -m refinement.traces conformance`, `make conformance`).

The default profiles, one per seed in turn: the base fault profiles lossy, crashes, partitions
and mixed; `snapshots`; every `X+snapshots` variant of refinement.faults (chunks corrupted
where X loses messages, crashes at each step of a transfer where X has node faults: a
corrupted chunk fails validation, the bridging step AbandonSnapFetch; a crash is KRaft's
Crash); and `disk-loss`, whose observers lose their data directory (the bridging step
LoseDisk of spec/TraceKRaft.tla); and `solo`, one voter and two observers, whose voter leads
as it (re)starts (Kafka's KafkaRaftClient.initialize: KRaft.tla's atStart). The simulator's
voters are nodes 1..3 (SIM_VOTERS), or 1..n for a profile that sets its own count (`solo`: 1;
profile_voters), and any further node an observer, which TLC is told.

Voter changes (KIP-853): a trace of a dynamic quorum (refinement.faults' `NAME+reconfig`
profiles, `solo+lossy+reconfig` among them) is validated the same way: the profile's voters
are its bootstrap voters and validate_trace
sees from the trace that the quorum is dynamic (mapping.is_dynamic: KRaft.tla's Dynamic and
VoterChanges). A voter that loses its disk comes back with a new directory id: a new replica,
a server of its own to TLC (refinement.traces.incarnations). reconfig_conformance_profiles()
names those profiles; pass them as `profiles`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kraft.trace_format import read_trace
from refinement.traces.validate import TraceValidation, validate_trace

BASE_CONFORMANCE_PROFILES = ("lossy", "crashes", "partitions", "mixed")
SNAPSHOT_CONFORMANCE_PROFILES = (
    "snapshots",
    "none+snapshots",
    "lossy+snapshots",
    "partitions+snapshots",
    "crashes+snapshots",
    "shutdowns+snapshots",
    "mixed+snapshots",
    "disk-loss",
)
# A single voter (and two observers) under mixed faults: it leads as it (re)starts.
CONFORMANCE_PROFILES = BASE_CONFORMANCE_PROFILES + SNAPSHOT_CONFORMANCE_PROFILES + ("solo",)
# The voters of a simulated run whose profile sets no count of its own (SimConfig's default
# count, ids 1..n).
SIM_VOTERS: tuple[int, ...] = tuple(range(1, 4))


def profile_voters(profile: str) -> tuple[int, ...]:
    """The voter ids of a simulated run of `profile` (SIM_VOTERS unless it sets its own
    count, as `solo` does: its one voter)."""
    from refinement.faults import PROFILES
    from refinement.sim import SimConfig

    return SimConfig(profile=PROFILES[profile]).voter_ids


def reconfig_conformance_profiles(*, voter_disk_loss: bool = True) -> tuple[str, ...]:
    """The simulator's profiles of a dynamic quorum whose voters change (empty where
    refinement.faults has none); those whose voters lose their disk (a new incarnation with a
    new directory id, refinement.traces.incarnations) only if `voter_disk_loss`."""
    from refinement.faults import PROFILES

    return tuple(
        name
        for name, p in PROFILES.items()
        if getattr(p, "dynamic", False)
        and (voter_disk_loss or not getattr(p, "voter_disk_loss_rate", 0.0))
        and not getattr(p, "update_voter_rate", 0.0)  # KRaft.tla has no UpdateRaftVoter
    )


@dataclass(frozen=True)
class ConformanceRun:
    seed: int
    profile: str
    events: int
    result: TraceValidation
    trace_path: Path | None

    def replay(self, budget: int) -> str:
        voters = ",".join(str(v) for v in profile_voters(self.profile))
        return (
            f"python -m refinement.sim --seed {self.seed} --profile {self.profile}"
            f" --events {budget} --trace /tmp/trace-{self.seed}.ndjson && "
            f"python -m refinement.traces validate /tmp/trace-{self.seed}.ndjson"
            f" --voters {voters}"
        )


def simulate_trace(seed: int, profile: str, events: int, out: Path) -> None:
    """Run the simulator on one seed with faults and write its trace to `out`."""
    from refinement.faults import PROFILES
    from refinement.sim import SimConfig, simulate

    config = SimConfig(seed=seed, max_events=events, profile=PROFILES[profile])
    with open(out, "w", encoding="utf-8") as f:
        simulate(config, trace=f)


def conformance(
    seeds: Iterable[int],
    *,
    events: int = 300,
    profiles: Sequence[str] = CONFORMANCE_PROFILES,
    jobs: int = 2,
    timeout_s: float | None = 600.0,
    keep_dir: Path | None = None,
) -> list[ConformanceRun]:
    """Simulate each seed (profiles in turn), validate its trace; in seed order."""
    seeds = list(seeds)
    out_dir = keep_dir or Path(tempfile.mkdtemp(prefix="conformance-"))
    out_dir.mkdir(parents=True, exist_ok=True)

    def one(i: int, seed: int) -> ConformanceRun:
        profile = profiles[i % len(profiles)]
        path = out_dir / f"trace-{profile}-{seed}.ndjson"
        simulate_trace(seed, profile, events, path)
        trace = read_trace(path)
        res = validate_trace(trace, timeout_s=timeout_s, voters=profile_voters(profile))
        if res.accepted and keep_dir is None:
            path.unlink()
        return ConformanceRun(seed, profile, len(trace), res, path)

    with ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
        runs = list(pool.map(lambda p: one(*p), enumerate(seeds)))
    if keep_dir is None and all(r.result.accepted for r in runs):
        shutil.rmtree(out_dir, ignore_errors=True)
    return runs
