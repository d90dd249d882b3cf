"""`kraft mutate`: a mutation campaign on Spark. Each task applies one mutant of the pure core
to an isolated copy of impl/kraft and runs the verification layers against it, cheapest first,
up to the first kill (refinement.mutation.execute); the driver collects one row per mutant and
writes the `mutants` dataset (Parquet, with pyarrow: a Spark write job would cost more than the
rows), campaign.json and the report (report.md, report.html).

    kraft mutate --sample 80 --seed 1 --layers scenarios,sim,hypothesis --master local[1]
    kraft mutate --list --sample 10            (the mutants, without running anything)
    kraft mutate --changed-since main~3 --layers scenarios,sim   (after a core change)
    make mutate                                (every mutant, every layer)

Before the mutants, the unmutated core runs every chosen layer on the driver: a layer that
fails there stops the campaign, and the baseline's times set each layer's timeout
(--timeout-factor x its time, at least --min-timeout s). Exit status 1 when a mutant survives
that the equivalents file (refinement/mutation/equivalent.toml) does not list.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

from refinement.mutation.changed import RevisionError, git_changed_lines, on_changed_lines
from refinement.mutation.execute import (
    LAYERS,
    SIM_PROFILES,
    TLC_PROFILES,
    LayerSettings,
    MutantResult,
    run_baseline,
    run_mutant,
    timeouts_from_baseline,
)
from refinement.mutation.generate import Mutant, generate, sample
from refinement.pipeline.spark import DEFAULT_MASTER

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Accumulator
    from pyspark.sql import SparkSession

CHECKOUT = Path(__file__).resolve().parents[2]
EQUIVALENTS = Path(__file__).resolve().parent / "equivalent.toml"


@dataclass(frozen=True, slots=True)
class MutateConfig:
    checkout: Path = CHECKOUT
    files: tuple[str, ...] | None = None  # relative to impl/; None: the whole core
    ids: tuple[str, ...] = ()  # only these mutants (with --sample: sampled among them)
    changed_since: str | None = None  # only mutants on core lines changed since this git rev
    sample: int | None = None
    seed: int = 0
    settings: LayerSettings = field(default_factory=LayerSettings)
    timeout_factor: float = 8.0
    min_timeout_s: float = 60.0
    out: Path = Path("out/mutate")
    equivalents: Path = EQUIVALENTS
    partitions: int | None = None  # None: one mutant per partition


@dataclass(slots=True)
class MutateResult:
    config: MutateConfig
    generated: int
    mutants: int
    baseline: MutantResult
    timeouts_s: dict[str, float]
    wall_s: float
    report: Path
    summary: str
    unexplained: list[str]  # ids of survivors the equivalents file does not list


def select(config: MutateConfig) -> tuple[list[Mutant], int]:
    """The campaign's mutants and how many the generator made in all."""
    every = generate(config.checkout / "impl", config.files)
    pool = every
    if config.ids:
        wanted = set(config.ids)
        pool = [m for m in every if m.id in wanted]
        missing = wanted - {m.id for m in pool}
        if missing:
            raise SystemExit(f"unknown mutant id(s): {', '.join(sorted(missing))}")
    if config.changed_since is not None:
        try:
            changed = git_changed_lines(config.checkout, config.changed_since)
        except RevisionError as exc:
            raise SystemExit(str(exc)) from exc
        impl = config.checkout / "impl"
        sources = {f: (impl / f).read_text(encoding="utf-8") for f in {m.file for m in pool}}
        pool = on_changed_lines(pool, changed, sources)
    return sample(pool, config.sample, config.seed), len(every)


def mutants_schema() -> pa.Schema:
    """The `mutants` dataset: one row per mutant, the fields of MutantResult."""
    import pyarrow as pa

    types: dict[str, pa.DataType] = {
        "line": pa.int64(),
        "killed": pa.bool_(),
        "runs_needed": pa.int64(),
        "events_needed": pa.int64(),
        "kill_seed": pa.int64(),
        "layers_run": pa.list_(pa.string()),
        "layer_seconds": pa.list_(pa.float64()),
        "wall_s": pa.float64(),
    }
    nullable = {"killed_by", "kill_kind", "runs_needed", "events_needed"}
    nullable |= {"kill_profile", "kill_seed"}
    return pa.schema(
        [
            pa.field(f.name, types.get(f.name, pa.string()), nullable=f.name in nullable)
            for f in fields(MutantResult)
        ]
    )


def write_mutants(rows: Sequence[tuple[object, ...]], path: Path) -> None:
    """The rows (collected on the driver anyway) as one Parquet file, sorted by id."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = mutants_schema()
    ordered = sorted(rows, key=lambda r: str(r[0]))
    columns = [pa.array([r[i] for r in ordered], f.type) for i, f in enumerate(schema)]
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_arrays(columns, schema=schema), path / "part-0.parquet")


def _row(r: MutantResult) -> tuple[object, ...]:
    return tuple(getattr(r, f.name) for f in fields(MutantResult))


def _task(
    items: Iterable[tuple[Mutant, str]],
    settings: LayerSettings,
    checkout: str,
    done: Accumulator[int],
    survived: Accumulator[int],
) -> Iterator[tuple[object, ...]]:
    """mapPartitions body: each mutant of a partition in turn."""
    for mutant, source in items:
        result = run_mutant(mutant, settings, Path(checkout), source=source)
        done.add(1)
        if not result.killed:
            survived.add(1)
        yield _row(result)


def run_mutants(
    spark: SparkSession,
    mutants: Sequence[Mutant],
    settings: LayerSettings,
    checkout: Path,
    *,
    partitions: int | None = None,
    progress: bool = True,
) -> list[tuple[object, ...]]:
    """Every mutant through the layers on Spark; rows in the order of MutantResult."""
    sc = spark.sparkContext
    sources = {m.file: (checkout / "impl" / m.file).read_text(encoding="utf-8") for m in mutants}
    items = [(m, sources[m.file]) for m in mutants]
    done = sc.accumulator(0)
    survived = sc.accumulator(0)
    home = str(checkout)
    rdd = sc.parallelize(items, partitions or max(1, len(items))).mapPartitions(
        lambda it: _task(it, settings, home, done, survived)
    )
    rows: list[tuple[object, ...]] = []
    failure: list[BaseException] = []

    def collect() -> None:
        try:
            rows.extend(rdd.collect())
        except BaseException as exc:  # re-raised on the driver's thread below
            failure.append(exc)

    worker = threading.Thread(target=collect, name="mutate", daemon=True)
    worker.start()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(items), unit="mutant", desc="mutants", file=sys.stderr)
    while worker.is_alive():
        worker.join(0.5)
        if bar is not None and done.value > bar.n:
            bar.set_postfix(survived=survived.value, refresh=False)
            bar.update(done.value - bar.n)
    if bar is not None:
        bar.set_postfix(survived=survived.value, refresh=False)
        bar.update(done.value - bar.n)
        bar.close()
    if failure:
        raise failure[0]
    return rows


def run_campaign(
    spark: SparkSession, config: MutateConfig, *, progress: bool = True
) -> MutateResult:
    from refinement.mutation.report import build_report

    started = time.perf_counter()
    mutants, generated = select(config)
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    if progress:
        print(
            f"kraft mutate: {len(mutants)} of {generated} mutants; layers"
            f" {','.join(config.settings.ordered())}; baseline first",
            file=sys.stderr,
        )
    baseline = run_baseline(config.settings, config.checkout)
    timeouts = timeouts_from_baseline(
        baseline, factor=config.timeout_factor, minimum_s=config.min_timeout_s
    )
    settings = config.settings.with_timeouts(timeouts)
    rows = run_mutants(
        spark, mutants, settings, config.checkout, partitions=config.partitions, progress=progress
    )
    write_mutants(rows, out / "mutants")
    wall = time.perf_counter() - started
    manifest = {
        "config": {
            "files": list(config.files) if config.files else None,
            "ids": list(config.ids),
            "changed_since": config.changed_since,
            "sample": config.sample,
            "seed": config.seed,
            "settings": {**asdict(settings), "layers": list(settings.ordered())},
            "timeout_factor": config.timeout_factor,
            "min_timeout_s": config.min_timeout_s,
            "equivalents": str(config.equivalents),
        },
        "generated": generated,
        "mutants": len(mutants),
        "baseline": dict(zip(baseline.layers_run, baseline.layer_seconds, strict=True)),
        "timeouts_s": timeouts,
        "cores": spark.sparkContext.defaultParallelism,
        "wall_s": round(wall, 1),
    }
    (out / "campaign.json").write_text(json.dumps(manifest, indent=2) + "\n")
    report = build_report(out, config.equivalents)
    return MutateResult(
        config,
        generated,
        len(mutants),
        baseline,
        timeouts,
        wall,
        report.path,
        report.summary,
        report.unexplained,
    )


# --------------------------------------------------------------------------- command line


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


# The layer defaults the command line starts from.
_DEFAULTS = LayerSettings()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample", type=int, help="a deterministic sample of N mutants (default all)")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--ids", help="only these mutant ids (comma-separated)")
    p.add_argument("--files", help="only these core files, relative to impl/ (comma-separated)")
    p.add_argument(
        "--changed-since",
        metavar="REV",
        help="only mutants on core lines changed since git revision REV (the work tree's lines)",
    )
    p.add_argument(
        "--layers",
        default=",".join(LAYERS),
        help=f"layers to run, cheapest first whatever the order (default {','.join(LAYERS)};"
        " the goal of issue #16 is measured without unit)",
    )
    p.add_argument("--sim-profiles", default=",".join(SIM_PROFILES), help="sweep's profiles")
    p.add_argument("--sim-seeds", type=int, default=3, help="sweep's seeds per profile")
    p.add_argument("--sim-first-seed", type=int, default=0)
    p.add_argument("--sim-events", type=int, default=1500, help="fault-phase events per run")
    p.add_argument("--hypothesis-examples", type=int, default=200)
    p.add_argument("--hypothesis-steps", type=int, default=40)
    p.add_argument("--tlc-profiles", default=",".join(TLC_PROFILES))
    p.add_argument(
        "--tlc-traces", type=int, default=_DEFAULTS.tlc_traces, help="traces validated by TLC"
    )
    p.add_argument(
        "--tlc-events", type=int, default=_DEFAULTS.tlc_events, help="fault-phase events per trace"
    )
    p.add_argument("--timeout-factor", type=float, default=8.0)
    p.add_argument("--min-timeout", type=float, default=60.0, help="seconds (default 60)")
    p.add_argument("--equivalents", type=Path, default=EQUIVALENTS)
    p.add_argument("--name", help="campaign name (output under out/mutate-NAME)")
    p.add_argument("--out", type=Path, help="output directory (overrides --name)")
    p.add_argument("--master", default=DEFAULT_MASTER, help="Spark master (default local[*])")
    p.add_argument("--partitions", type=int, help="partitions (default one per mutant)")
    p.add_argument(
        "--ship-code",
        choices=("auto", "yes", "no"),
        default="auto",
        help="zip kraft+refinement to the executors (auto: unless the master is local)",
    )
    p.add_argument("--list", action="store_true", help="list the mutants and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace) -> MutateConfig:
    settings = LayerSettings(
        layers=_csv(args.layers),
        sim_profiles=_csv(args.sim_profiles),
        sim_seeds=args.sim_seeds,
        sim_first_seed=args.sim_first_seed,
        sim_events=args.sim_events,
        hypothesis_examples=args.hypothesis_examples,
        hypothesis_steps=args.hypothesis_steps,
        tlc_profiles=_csv(args.tlc_profiles),
        tlc_traces=args.tlc_traces,
        tlc_events=args.tlc_events,
    )
    from refinement.faults import PROFILES
    from refinement.sim_config import sim_variant

    unknown = [p for p in settings.tlc_profiles if p not in PROFILES]
    for p in settings.sim_profiles:
        try:
            sim_variant(p)
        except KeyError:
            unknown.append(p)
    if unknown:
        raise SystemExit(f"unknown profile(s) {unknown}; known: {', '.join(PROFILES)}")
    name = args.name or (f"sample{args.sample}-seed{args.seed}" if args.sample else "all")
    return MutateConfig(
        files=_csv(args.files) if args.files else None,
        ids=_csv(args.ids) if args.ids else (),
        changed_since=args.changed_since,
        sample=args.sample,
        seed=args.seed,
        settings=settings,
        timeout_factor=args.timeout_factor,
        min_timeout_s=args.min_timeout,
        out=args.out or Path("out") / f"mutate-{name}",
        equivalents=args.equivalents,
        partitions=args.partitions,
    )


def run_from_args(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        raise SystemExit(str(exc)) from exc
    if args.list:
        mutants, generated = select(config)
        for m in mutants:
            print(m.describe())
        print(f"{len(mutants)} of {generated} mutants", file=sys.stderr)
        return 0
    from refinement.pipeline.spark import campaign_session

    with campaign_session(args.master, args.ship_code, app_name="kraft-mutate") as spark:
        result = run_campaign(spark, config, progress=not args.no_progress)
    print(result.summary)
    return 1 if result.unexplained else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m refinement.mutation.campaign",
        description="A mutation campaign on Spark (see `kraft mutate --help`).",
    )
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
