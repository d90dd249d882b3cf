"""A simulation campaign on Spark: many seeds, one or all fault profiles, every checker after
every event, and what the whole campaign covered and broke.

    kraft campaign --seeds 1000 --events 10000 --profile mixed [--master spark://h:7077]
    python -m refinement.pipeline.campaign ...   (the same)

Profiles (refinement.faults): none, lossy, partitions, crashes, shutdowns, mixed; snapshots;
the KIP-630 variant `X+snapshots` of each of the six (snapshots taken often and moved in small
chunks, corrupted chunks where X loses messages, crashes at each step of a transfer where X
has node faults); disk-loss (observers that lose their data directory and catch up from the
leader's snapshot); the KIP-853 variant `X+reconfig` of each of the six (a dynamic quorum
whose voters an operator adds and removes, refinement.sim_reconfig); or `all`, every one of
them whose traces TraceKRaft.tla validates over the same seeds (the `+reconfig` ones among
them: refinement.traces.conformance.reconfig_conformance_profiles). A seeded bug (`--mutant`,
refinement.pipeline.mutants) shows only under the faults it needs: eager-hwm under any
profile, the others under MUTANT_PROFILES' (snapshot-past-hwm and install-unvalidated under
lossy+snapshots, eager-log-start under partitions+snapshots, the voter-change ones under a
`+reconfig` profile), e.g. `kraft campaign --mutant install-unvalidated --profile
lossy+snapshots` or `kraft campaign --mutant two-uncommitted-changes --profile none+reconfig`.

Stages:
1. simulate: (profile, seed) units spread over partitions (RDD mapPartitions); each unit runs
   the simulator with its trace digested in memory (seedrun) into one `seeds` row and,
   for kept seeds, its events; a driver thread shows progress as tasks complete.
2. write `seeds` and `events` (Parquet; events decoded from Arrow IPC by mapInArrow);
3. aggregate `seeds` with the DataFrame API into `aggregates/<table>` (aggregate.py);
4. earmark a few runs whose trace prefixes cover every coverage class (choose_samples: a
   prefix of a behaviour is a behaviour, so each run is cut after the last class it is there
   for); each is rerun into `traces/` and validated with TLC in one executor task, told the
   run's voters (samples.py);
5. `report.html` (report.py) and a text summary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from refinement.faults import ADVERSARY_PROFILES, PROFILES
from refinement.pipeline.samples import TraceSample, trace_samples, write_samples
from refinement.pipeline.spark import DEFAULT_MASTER
from refinement.traces.conformance import reconfig_conformance_profiles

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import SparkSession

    from refinement.pipeline.seedrun import RunSpec, SeedRow, Unit

# The simulator and Spark are imported where used: `kraft --help` needs neither.

ALL = "all"
# "all": every profile whose sampled traces TraceKRaft.tla validates: the snapshots profiles'
# KIP-630 actions and the `+reconfig` profiles' voter changes (AddVoter, RemoveVoter) among them.
# The `+reconfig` profiles are those reconfig_conformance_profiles() names (every one: a voter
# that loses its disk is a new incarnation to TraceKRaft, refinement.traces.incarnations).
# `solo` among them: its one voter leads as it (re)starts (KRaft.tla's atStart), and its
# samples are validated with its own voter set (samples.py). Not the `+adversary` profiles: a
# forged message is no step of the spec.
PROFILE_ORDER: tuple[str, ...] = (
    tuple(n for n, p in PROFILES.items() if not p.dynamic and n not in ADVERSARY_PROFILES)
    + reconfig_conformance_profiles()
)


@dataclass(frozen=True, slots=True)
class CampaignConfig:
    seeds: int = 100
    first_seed: int = 0
    events: int = 2000
    profile: str = "mixed"  # a profile name or "all" (every profile over the same seeds)
    out: Path = Path("out/campaign")
    partitions: int | None = None  # None: 4 per core of the cluster
    keep_events_every: int = 1  # keep the events of seeds divisible by this; 0: none
    mutant: str | None = None
    trace_samples: int = 8
    validate: bool = True
    report: bool = True

    def profiles(self) -> tuple[str, ...]:
        return PROFILE_ORDER if self.profile == ALL else (self.profile,)

    def units(self) -> list[Unit]:
        from refinement.pipeline.seedrun import Unit

        seeds = range(self.first_seed, self.first_seed + self.seeds)
        return [Unit(p, s) for p in self.profiles() for s in seeds]

    def run_spec(self) -> RunSpec:
        from refinement.pipeline.seedrun import RunSpec

        return RunSpec(
            events=self.events, keep_events_every=self.keep_events_every, mutant=self.mutant
        )


@dataclass(slots=True)
class CampaignResult:
    config: CampaignConfig
    out: Path
    units: int = 0
    partitions: int = 0
    events: int = 0
    kept_events: int = 0
    failing: int = 0
    wall_s: float = 0.0
    simulate_s: float = 0.0
    stages_s: dict[str, float] = field(default_factory=dict)  # stage -> wall seconds
    sim_cpu_s: float = 0.0
    violations: dict[str, list[str]] = field(default_factory=dict)  # invariant -> replays
    uncovered_spec: list[str] = field(default_factory=list)
    uncovered_sim: list[str] = field(default_factory=list)
    pairs_covered: int = 0
    pairs_total: int = 0
    samples: list[TraceSample] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # covered, in no sample (--trace-samples)
    report: Path | None = None

    @property
    def events_per_s(self) -> float:
        return self.events / self.wall_s if self.wall_s > 0 else 0.0

    def summary(self) -> str:
        c = self.config
        lines = [
            f"campaign {self.out}: {self.units} runs ({c.seeds} seeds x "
            f"{len(c.profiles())} profile(s) {','.join(c.profiles())}, {c.events} events each)"
            f"{' mutant ' + c.mutant if c.mutant else ''}",
            f"  {self.events:,} events in {self.wall_s:.1f}s = {self.events_per_s:,.0f} events/s"
            f" (simulation stage {self.simulate_s:.1f}s, {self.partitions} partitions,"
            f" {self.kept_events:,} events kept)",
            f"  stages (s): {', '.join(f'{k} {v:.1f}' for k, v in self.stages_s.items())}",
            f"  failing runs: {self.failing}",
        ]
        for name, replays in sorted(self.violations.items()):
            lines.append(f"    {name}: {len(replays)} run(s), e.g. {replays[0]}")
        lines.append(
            f"  spec actions uncovered: {', '.join(self.uncovered_spec) or 'none'};"
            f" sim actions uncovered: {', '.join(self.uncovered_sim) or 'none'}"
        )
        lines.append(f"  (state, action) pairs covered: {self.pairs_covered}/{self.pairs_total}")
        verdicts = sorted({s.validation for s in self.samples})
        prefixes = ", ".join(f"{s.profile}/{s.seed}:{s.events_validated}" for s in self.samples)
        lines.append(
            f"  traces earmarked for TLC: {len(self.samples)} ({', '.join(verdicts)});"
            f" events validated {sum(s.events_validated for s in self.samples):,}"
            f" ({prefixes or 'none'})"
        )
        if self.left_out:
            lines.append(
                f"  covered classes in no earmarked trace (--trace-samples"
                f" {c.trace_samples}): {len(self.left_out)}: {', '.join(self.left_out)}"
            )
        if self.report is not None:
            lines.append(f"  report: {self.report}")
        return "\n".join(lines)


# --------------------------------------------------------------------------- stage 1


def _simulate(
    spark: SparkSession, config: CampaignConfig, units: list[Unit], partitions: int, progress: bool
) -> RDD[tuple[SeedRow, bytes | None]]:
    from pyspark import StorageLevel

    from refinement.pipeline.seedrun import run_units

    sc = spark.sparkContext
    spec = config.run_spec()
    done = sc.accumulator(0)
    rdd = (
        sc.parallelize(units, partitions)
        .mapPartitions(lambda it: run_units(it, spec, done))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    failure: list[BaseException] = []

    def materialize() -> None:
        try:
            rdd.count()
        except BaseException as exc:  # re-raised on the driver's thread below
            failure.append(exc)

    worker = threading.Thread(target=materialize, name="campaign-simulate", daemon=True)
    worker.start()
    bar = _progress_bar(len(units)) if progress else None
    while worker.is_alive():
        worker.join(0.25)
        if bar is not None:
            bar.update(done.value - bar.n)
    if bar is not None:
        bar.update(done.value - bar.n)
        bar.close()
    if failure:
        raise failure[0]
    return rdd


def _progress_bar(total: int) -> _Bar:
    from tqdm import tqdm

    bar: _Bar = tqdm(total=total, unit="seed", desc="simulating", file=sys.stderr)
    return bar


class _Bar:
    """The part of tqdm used here (for typing)."""

    n: int

    def update(self, n: int) -> None: ...
    def close(self) -> None: ...


# --------------------------------------------------------------------------- the campaign


def run_campaign(
    spark: SparkSession, config: CampaignConfig, *, progress: bool = True
) -> CampaignResult:
    """Run a campaign on `spark` and write its datasets under config.out."""
    from pyspark.sql import functions as sf

    from refinement.pipeline import aggregate
    from refinement.pipeline.schemas import events_schema, events_source_schema, seeds_schema
    from refinement.pipeline.seedrun import decode_events

    if config.profile != ALL and config.profile not in PROFILES:
        raise ValueError(f"unknown profile {config.profile!r}")
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    units = config.units()
    sc = spark.sparkContext
    partitions = config.partitions or min(len(units), max(1, 4 * sc.defaultParallelism))
    result = CampaignResult(config, out, units=len(units), partitions=partitions)
    started = time.perf_counter()

    clock = started

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        result.stages_s[stage] = round(now - clock, 3)
        clock = now

    rdd = _simulate(spark, config, units, partitions, progress)
    result.simulate_s = time.perf_counter() - started
    lap("simulate")
    try:
        seeds = spark.createDataFrame(rdd.map(lambda r: r[0]), seeds_schema())
        aggregate.write_sorted(seeds, str(out / "seeds"), ("profile", "seed"))
        events_path = str(out / "events")
        if config.keep_events_every > 0:
            source = rdd.filter(lambda r: r[1] is not None).map(lambda r: (r[0][0], r[0][1], r[1]))
            blobs = spark.createDataFrame(source, events_source_schema())
            blobs.mapInArrow(decode_events, events_schema()).write.mode("overwrite").parquet(
                events_path
            )
        else:
            shutil.rmtree(events_path, ignore_errors=True)
    finally:
        rdd.unpersist()
    lap("write")

    seeds = spark.read.parquet(str(out / "seeds"))
    agg_dir = out / "aggregates"
    for name, table in aggregate.compute(spark, seeds).items():
        aggregate.write_sorted(table, str(agg_dir / name), aggregate.TABLES[name])
    lap("aggregate")
    samples, left_out = trace_samples(
        spark,
        config.run_spec(),
        out,
        limit=config.trace_samples,
        validate=config.validate,
    )
    write_samples(spark, samples, agg_dir)
    lap("trace_samples")

    totals = seeds.agg(
        sf.sum("events").alias("events"),
        sf.sum(sf.when(sf.col("ok"), 0).otherwise(1)).alias("failing"),
        sf.sum("sim_wall_ms").alias("sim_ms"),
        sf.sum(
            sf.when(sf.col("seed") % max(1, config.keep_events_every) == 0, sf.col("trace_events"))
        ).alias("kept"),
    ).first()
    assert totals is not None
    result.events = int(totals["events"] or 0)
    result.failing = int(totals["failing"] or 0)
    result.sim_cpu_s = (totals["sim_ms"] or 0) / 1000.0
    result.kept_events = int(totals["kept"] or 0) if config.keep_events_every > 0 else 0
    for r in spark.read.parquet(str(agg_dir / "violations")).collect():
        result.violations[r["invariant"]] = [f["replay_command"] for f in r["failures"]]
    coverage = spark.read.parquet(str(agg_dir / "action_coverage"))
    for r in coverage.where("not covered").collect():
        (result.uncovered_spec if r["kind"] == "spec" else result.uncovered_sim).append(r["name"])
    pairs = spark.read.parquet(str(agg_dir / "pair_coverage"))
    result.pairs_total = pairs.count()
    result.pairs_covered = pairs.where("covered").count()
    result.samples = samples
    result.left_out = left_out
    lap("summary")
    # Throughput covers every stage but the report (plots are not the campaign's work).
    result.wall_s = time.perf_counter() - started
    _write_manifest(result)
    if config.report:
        from refinement.pipeline.report import build_report

        result.report = build_report(out)
    lap("report")
    return result


def _write_manifest(result: CampaignResult) -> None:
    """campaign.json: the configuration and timings (timings only here, not in aggregates)."""
    c = result.config
    manifest = {
        "config": {**asdict(c), "out": str(c.out)},
        "units": result.units,
        "partitions": result.partitions,
        "events": result.events,
        "kept_events": result.kept_events,
        "failing": result.failing,
        "wall_s": round(result.wall_s, 3),
        "simulate_s": round(result.simulate_s, 3),
        "sim_cpu_s": round(result.sim_cpu_s, 3),
        "stages_s": result.stages_s,
        "events_per_s": round(result.events_per_s, 1),
    }
    (result.out / "campaign.json").write_text(json.dumps(manifest, indent=2) + "\n")


# --------------------------------------------------------------------------- command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The campaign's options (shared with `kraft campaign`)."""
    p.add_argument("--seeds", type=int, default=100, help="number of seeds (default 100)")
    p.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--events", type=int, default=2000, help="fault-phase events per run")
    p.add_argument(
        "--profile",
        choices=[*sorted(PROFILES), ALL],
        default="mixed",
        help="fault profile, or 'all' to run every profile over the same seeds",
    )
    p.add_argument("--name", help="campaign name (output under out/campaign-NAME)")
    p.add_argument("--out", type=Path, help="output directory (overrides --name)")
    p.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (default local[*])")
    p.add_argument("--partitions", type=int, help="partitions of the seed range (default 4/core)")
    p.add_argument(
        "--keep-events-every",
        type=int,
        default=1,
        metavar="K",
        help="write the events of seeds divisible by K (1: all, 0: none)",
    )
    p.add_argument(
        "--ship-code",
        choices=("auto", "yes", "no"),
        default="auto",
        help="zip kraft+refinement to the executors (auto: unless the master is local)",
    )
    p.add_argument("--mutant", help="run a seeded bug (refinement.pipeline.mutants)")
    p.add_argument("--trace-samples", type=int, default=8, help="traces earmarked for TLC")
    p.add_argument("--no-validate", action="store_true", help="do not validate sample traces")
    p.add_argument("--no-report", action="store_true", help="skip report.html")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> CampaignConfig:
    name = args.name or f"{args.profile}-{args.seeds}x{args.events}"
    if args.mutant:
        from refinement.pipeline.mutants import MUTANTS

        if args.mutant not in MUTANTS:
            raise SystemExit(f"unknown mutant {args.mutant!r}; known: {', '.join(MUTANTS)}")
    return CampaignConfig(
        seeds=args.seeds,
        first_seed=args.seed,
        events=args.events,
        profile=args.profile,
        out=args.out or Path("out") / f"campaign-{name}",
        partitions=args.partitions,
        keep_events_every=args.keep_events_every,
        mutant=args.mutant,
        trace_samples=args.trace_samples,
        validate=not args.no_validate,
        report=not args.no_report,
    )


def run_from_args(args: argparse.Namespace) -> int:
    from refinement.pipeline.spark import campaign_session

    config = config_from_args(args)
    with campaign_session(args.master, args.ship_code, app_name="kraft-campaign") as spark:
        result = run_campaign(spark, config, progress=not args.no_progress)
    print(result.summary())
    return 1 if result.failing else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m refinement.pipeline.campaign",
        description="Run a simulation campaign on Spark (see `kraft campaign --help`).",
    )
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
