"""Simulator throughput: `python -m benchmarks.bench_sim` prints simulated events per second.

The workload is one seed of each fault profile, 5,000 fault-phase events each, 3 voters, the
real replica core, every checker after every event (the way the tests run it); the median of
5 runs, per CPU-second of this process (process_time: other load on the machine does not
skew it the way wall-clock time would). The baseline is the same workload with the checkers
off: the core, the in-memory logs and the simulated network alone, so the ratio is what
checking costs.
"""

from __future__ import annotations

import statistics
import time

from benchmarks.run import Figure
from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

RUNS = 5
EVENTS = 5000
TARGET = 50_000
WORKLOAD = ("none", "lossy", "partitions", "crashes", "shutdowns", "mixed")


def events_per_second(*, check: bool) -> float:
    """Simulated events per CPU-second over the whole workload, once."""
    events = 0
    start = time.process_time()
    for seed, profile in enumerate(WORKLOAD):
        config = SimConfig(
            seed=seed,
            profile=PROFILES[profile],
            max_events=EVENTS,
            check_liveness=False,
            check_invariants=check,
        )
        events += simulate(config).events
    return events / (time.process_time() - start)


def median_rate(*, check: bool, runs: int = RUNS) -> float:
    return statistics.median(events_per_second(check=check) for _ in range(runs))


def figures() -> list[Figure]:
    checked = median_rate(check=True)
    bare = median_rate(check=False)
    return [
        Figure(
            name="simulated events/s, every checker after every event",
            value=checked,
            unit="events/s",
            target=f">= {TARGET:,}",
            met=checked >= TARGET,
            baseline_name="same runs, checkers off",
            baseline_value=bare,
        )
    ]


def main() -> None:
    for f in figures():
        print(f"{f.name}: {f.value:,.0f} {f.unit} (median of {RUNS}; target {f.target})")
        if f.baseline_value is not None:
            print(f"{f.baseline_name}: {f.baseline_value:,.0f} {f.unit}")


if __name__ == "__main__":
    main()
