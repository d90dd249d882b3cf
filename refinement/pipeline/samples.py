"""The trace samples of a campaign: a few runs whose trace prefixes together cover every
coverage class the campaign saw (choose_samples: a prefix of a behaviour is a behaviour, so
each run is cut after the last class it is there for), rerun on the executors into `traces/`
and validated with TLC (refinement.traces), and the `trace_samples` aggregate."""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from refinement.pipeline.seedrun import RunSpec


@dataclass(slots=True)
class TraceSample:
    profile: str
    seed: int
    classes: list[str]
    path: str
    events_validated: int  # the trace prefix written to `path` and validated
    validation: str


# validate_trace(path, voters=...): the run's voter ids (its other nodes are observers).
Validator = Callable[..., object]


def find_validator() -> tuple[Validator | None, str]:
    """refinement.traces.validate_trace if it exists, else why not."""
    try:
        module = importlib.import_module("refinement.traces")
    except ModuleNotFoundError:
        return None, "not validated (refinement.traces does not exist)"
    except Exception as exc:
        return None, f"not validated (refinement.traces failed to import: {exc})"
    fn = getattr(module, "validate_trace", None)
    if not callable(fn):
        return None, "not validated (refinement.traces has no validate_trace)"
    validator: Validator = fn
    return validator, ""


def verdict(outcome: object) -> str:
    """A validator's answer as deterministic text: no timings, so that a campaign's aggregates
    do not depend on how fast the executors were."""
    from refinement.traces import TraceValidation

    if isinstance(outcome, TraceValidation):
        if outcome.accepted:
            return (
                f"accepted by TLC: {outcome.events} events, "
                f"{outcome.distinct_states} distinct states"
            )
        return f"REJECTED by TLC at event {outcome.first_unmatched}: {outcome.event}"[:300]
    if isinstance(outcome, bool):
        return "valid" if outcome else "invalid"
    return f"validated: {str(outcome)[:300]}"


def validate_on_executor(path: str, voters: tuple[int, ...]) -> str:
    """Run on a Spark executor: TLC trace validation of one earmarked trace whose voters are
    `voters` (the disk-loss profile's observers are the other nodes); the trace file must be
    on storage the executors share with the driver, as --out already requires."""
    validator, why_not = find_validator()
    if validator is None:
        return why_not
    try:
        return verdict(validator(Path(path), voters=voters))
    except Exception as exc:
        return f"validator raised {type(exc).__name__}: {exc}"[:300]


Run: TypeAlias = tuple[str, int]  # (profile, seed)

# What one more TLC run costs beyond its events, in events (a JVM start, about a second, at
# TLC's 200-300 events/s): the planner opens a run only where it saves more than this.
RUN_COST_EVENTS = 300


@dataclass(frozen=True, slots=True)
class Earmark:
    """A run whose trace prefix is validated, and the classes that prefix is there for."""

    profile: str
    seed: int
    classes: tuple[str, ...]
    events: int  # the prefix: the trace's first `events` lines (a prefix of a behaviour is one)


@dataclass(frozen=True, slots=True)
class SamplePlan:
    earmarks: tuple[Earmark, ...]
    left_out: tuple[str, ...]  # covered classes in no earmarked run (the `limit` was reached)


def _assign(sites: Mapping[Run, Mapping[str, int]], runs: Iterable[Run]) -> dict[str, Run]:
    """Each class held by `runs` on the one where it occurs earliest (ties by profile, seed)."""
    best: dict[str, tuple[int, Run]] = {}
    for run in runs:
        for name, index in sites[run].items():
            if name not in best or (index, run) < best[name]:
                best[name] = (index, run)
    return {name: run for name, (_index, run) in best.items()}


def _prefixes(sites: Mapping[Run, Mapping[str, int]], owner: Mapping[str, Run]) -> dict[Run, int]:
    prefix: dict[Run, int] = {}
    for name, run in owner.items():
        prefix[run] = max(prefix.get(run, 0), sites[run][name] + 1)
    return prefix


def _gain(first: Mapping[str, int], unheld: set[str], run: Run) -> tuple[int, int, Run]:
    """How a run ranks for classes not yet held: most of them, then the shorter prefix."""
    held = unheld & first.keys()
    reach = max((first[n] for n in held), default=-1) + 1
    return -len(held), reach, run


def _cost(prefix: Mapping[Run, int], run_cost: int) -> int:
    return sum(prefix.values()) + run_cost * len(prefix)


def choose_samples(
    sites: Mapping[Run, Mapping[str, int]], limit: int, *, run_cost: int = RUN_COST_EVENTS
) -> SamplePlan:
    """Trace prefixes to validate, at most `limit` runs; sites[run][class] is the index of the
    trace line where `class` first occurs in `run`.

    1. Which classes: greedy maximum coverage; take the run holding the most classes not yet
       held (ties: the shorter prefix reaching them, then profile, seed) until every class is
       held or `limit` runs are taken. Classes held by none are left out.
    2. How cheaply: each class is validated on the taken run where it occurs earliest (ties by
       profile, seed), a run up to its last such class (prefix = that index + 1); while runs
       are left, add the run that lowers sum(prefix + run_cost) most, if one does. Runs left
       with no class are dropped."""
    runs = sorted(sites)
    unheld = {name for run in runs for name in sites[run]}
    taken: list[Run] = []
    while unheld and len(taken) < limit:
        keys = (_gain(sites[r], unheld, r) for r in runs if r not in taken)
        best = min(keys, default=None)
        if best is None or best[0] == 0:
            break
        run = best[2]
        taken.append(run)
        unheld -= sites[run].keys()
    owner = _assign(sites, taken)
    prefix = _prefixes(sites, owner)
    while len(prefix) < limit:
        options: list[tuple[int, Run, dict[str, Run]]] = []
        for run in runs:
            if run in prefix:
                continue
            moved = {
                n: run
                for n, i in sites[run].items()
                if n in owner and (i, run) < (sites[owner[n]][n], owner[n])
            }
            if moved:
                trial = {**owner, **moved}
                options.append((_cost(_prefixes(sites, trial), run_cost), run, trial))
        if not options:
            break
        cost, _run, trial = min(options, key=lambda o: (o[0], o[1]))
        if cost >= _cost(prefix, run_cost):
            break
        owner = trial
        prefix = _prefixes(sites, owner)
    classes: dict[Run, list[str]] = {}
    for name, run in sorted(owner.items()):
        classes.setdefault(run, []).append(name)
    ranked = sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    earmarks = tuple(Earmark(r[0], r[1], tuple(names), prefix[r]) for r, names in ranked)
    return SamplePlan(earmarks, tuple(sorted(unheld)))


def _class_sites(
    spark: SparkSession, seeds_dir: Path
) -> tuple[dict[Run, dict[str, int]], frozenset[Run]]:
    """Per run, where each coverage class first occurs in its trace (the classes of
    action_coverage without no-ops, and of pair_coverage); and the failing runs."""
    from pyspark.sql import functions as sf

    seeds = spark.read.parquet(str(seeds_dir))
    actions = (
        seeds.select("profile", "seed", sf.explode("action_counts").alias("c"))
        .where("c.kind != 'noop'")
        .select("profile", "seed", sf.concat(sf.lit("action:"), "c.name").alias("cls"), "c.first")
    )
    pairs = seeds.select("profile", "seed", sf.explode("pair_counts").alias("c")).select(
        "profile",
        "seed",
        sf.concat(sf.lit("pair:"), "c.state", sf.lit("/"), "c.action").alias("cls"),
        "c.first",
    )
    sites: dict[Run, dict[str, int]] = {}
    for r in actions.unionByName(pairs).collect():
        sites.setdefault((r["profile"], r["seed"]), {})[r["cls"]] = r["first"]
    failing = frozenset((r["profile"], r["seed"]) for r in seeds.where("not ok").collect())
    return sites, failing


def sample_on_executor(spec: RunSpec, task: tuple[str, int, str, int | None]) -> tuple[int, str]:
    """Run on a Spark executor: rerun one earmarked unit with the first `lines` lines of its
    trace (None: all) written to `path`, then validate that with TLC; (lines written, verdict)."""
    from refinement.pipeline.seedrun import Unit

    # The simulator's node ids, voters first (`solo`'s profile sets its own count).
    voters = spec.config(Unit(task[0], task[1])).voter_ids
    return _write_sample(spec, task), validate_on_executor(task[2], voters)


def _write_sample(spec: RunSpec, task: tuple[str, int, str, int | None]) -> int:
    """Rerun one earmarked unit, its trace (or the first `lines` of it) written to `path`."""
    from refinement.pipeline.seedrun import Unit, write_trace

    profile, seed, path, lines = task
    return write_trace(Unit(profile, seed), spec, path, lines=lines)


def trace_samples(
    spark: SparkSession, spec: RunSpec, out: Path, *, limit: int, validate: bool
) -> tuple[list[TraceSample], list[str]]:
    """Earmark at most `limit` runs of the campaign in `out` (its `seeds` dataset), rerun each
    into out/traces and (if `validate`) validate it with TLC; the samples, and the covered
    classes left out."""
    traces = out / "traces"
    shutil.rmtree(traces, ignore_errors=True)
    traces.mkdir(parents=True)
    sites, failing = _class_sites(spark, out / "seeds")
    plan = choose_samples(sites, limit)
    tasks: list[tuple[str, int, str, int | None]] = []
    for mark in plan.earmarks:
        path = traces / f"{mark.profile}-seed{mark.seed}.ndjson"
        # A failing run is validated whole: TLC should see the step that broke an invariant.
        keep = None if (mark.profile, mark.seed) in failing else mark.events
        tasks.append((mark.profile, mark.seed, str(path), keep))
    if validate and tasks:
        # One task (rerun, then TLC) per trace, longest first: the executors finish together.
        order = sorted(range(len(tasks)), key=lambda i: (-(tasks[i][3] or 1 << 62), i))
        rdd = spark.sparkContext.parallelize([tasks[i] for i in order], len(tasks))
        done = rdd.map(lambda t: sample_on_executor(spec, t)).collect()
        answers = dict(zip(order, done, strict=True))
        outcomes = [answers[i] for i in range(len(tasks))]
    else:
        outcomes = [(_write_sample(spec, t), "not validated") for t in tasks]
    samples = [
        TraceSample(
            m.profile, m.seed, list(m.classes), str(Path(t[2]).relative_to(out)), n, verdict
        )
        for m, t, (n, verdict) in zip(plan.earmarks, tasks, outcomes, strict=True)
    ]
    return samples, list(plan.left_out)


def write_samples(spark: SparkSession, samples: list[TraceSample], agg_dir: Path) -> None:
    from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

    from refinement.pipeline import aggregate

    schema = StructType(
        [
            StructField("profile", StringType(), False),
            StructField("seed", LongType(), False),
            StructField("classes", ArrayType(StringType(), False), False),
            StructField("trace_path", StringType(), False),
            StructField("events_validated", LongType(), False),
            StructField("validation", StringType(), False),
        ]
    )
    rows = [
        (s.profile, s.seed, s.classes, s.path, s.events_validated, s.validation) for s in samples
    ]
    df = spark.createDataFrame(rows, schema)
    aggregate.write_sorted(df, str(agg_dir / "trace_samples"), ("profile", "seed"))
