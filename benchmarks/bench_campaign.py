"""Campaign throughput and core scaling: `python -m benchmarks.bench_campaign`.

The same campaign (default 40 seeds x 5,000 events, profile mixed, every event kept, no
trace samples, no report) on local[1] then local[2]; campaign events per wall-clock second
from the first task to the last aggregate (JVM start excluded), and the 1 -> 2 core ratio.
Wall-clock, so other load on the machine lowers both figures (the load average is printed).
`--scale` runs the scale target instead: 1,000 seeds x 10,000 events on local[*].
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from benchmarks.figure import Figure
from refinement.pipeline.campaign import CampaignConfig, CampaignResult, run_campaign
from refinement.pipeline.spark import session

SEEDS = 40
EVENTS = 5000
SCALE_SEEDS = 1000
SCALE_EVENTS = 10_000
SCALE_TARGET_S = 600.0


def run_on(master: str, config: CampaignConfig) -> CampaignResult:
    spark = session(master, app_name=f"bench-campaign-{master}")
    try:
        # A warm-up job starts the Python workers, so both runs measure the campaign alone.
        spark.sparkContext.parallelize(range(8), 8).map(lambda x: x).count()
        return run_campaign(spark, config, progress=False)
    finally:
        spark.stop()


def scaling(seeds: int = SEEDS, events: int = EVENTS, keep: int = 1) -> dict[int, CampaignResult]:
    out = Path(tempfile.mkdtemp(prefix="bench-campaign-"))
    results = {}
    for cores in (1, 2):
        config = CampaignConfig(
            seeds=seeds,
            events=events,
            profile="mixed",
            out=out / f"local{cores}",
            keep_events_every=keep,
            trace_samples=0,
            report=False,
        )
        results[cores] = run_on(f"local[{cores}]", config)
    return results


def figures() -> list[Figure]:
    results = scaling()
    one, two = results[1].events_per_s, results[2].events_per_s
    return [
        Figure(
            name=f"campaign events/s on local[2] ({SEEDS} seeds x {EVENTS} events, mixed)",
            value=two,
            unit="events/s",
            target=">= 1.6x local[1]",
            met=two >= 1.6 * one,
            baseline_name="same campaign on local[1]",
            baseline_value=one,
        )
    ]


def _show(label: str, r: CampaignResult) -> None:
    print(
        f"{label}: {r.events:,} events in {r.wall_s:.1f}s = {r.events_per_s:,.0f} events/s"
        f" (stages {r.stages_s}; simulator CPU {r.sim_cpu_s:.1f}s; {r.failing} failing runs)"
    )


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_campaign")
    p.add_argument("--seeds", type=int, default=SEEDS)
    p.add_argument("--events", type=int, default=EVENTS)
    p.add_argument("--keep-events-every", type=int, default=1)
    p.add_argument("--scale", action="store_true", help="1,000 x 10,000 on local[*]")
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    if args.scale:
        out = Path(tempfile.mkdtemp(prefix="bench-campaign-scale-"))
        config = CampaignConfig(
            seeds=SCALE_SEEDS,
            events=SCALE_EVENTS,
            profile="mixed",
            out=out,
            keep_events_every=args.keep_events_every,
        )
        r = run_on("local[*]", config)
        _show("local[*]", r)
        print(r.summary())
        met = "met" if r.wall_s <= SCALE_TARGET_S else "MISSED"
        print(f"scale target {SCALE_TARGET_S:.0f}s: {met}")
        return
    results = scaling(args.seeds, args.events, args.keep_events_every)
    for cores, r in results.items():
        _show(f"local[{cores}]", r)
    ratio = results[2].events_per_s / results[1].events_per_s
    print(f"scaling local[1] -> local[2]: {ratio:.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
