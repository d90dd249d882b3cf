"""Campaign aggregates, computed with the DataFrame API from the `seeds` dataset.

Every aggregate is a function of the multiset of seed rows only: sums of integers, exact
percentiles, minima, sorted collections; each table is written as one sorted Parquet file.
So the same seeds and profiles give the same aggregates however the work was partitioned.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from refinement.pipeline.seedrun import (
    KIND_SIM,
    KIND_SPEC,
    PAIR_ACTIONS,
    PAIR_STATES,
    SIM_ACTIONS,
    SPEC_ACTIONS,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

# Each aggregate table and the columns it is sorted by.
TABLES: dict[str, tuple[str, ...]] = {
    "profiles": ("profile",),
    "action_coverage": ("kind", "name"),
    "pair_coverage": ("state", "action"),
    "distributions": ("metric", "profile"),
    "histograms": ("metric", "profile", "bucket_lo"),
    "violations": ("invariant",),
}
METRICS = ("time_to_first_leader_ms", "election_ms", "commit_latency_ms")
_MAX_POWER = 48  # histogram buckets are powers of two up to 2^48 ms


def _bucket_lo(value: Column) -> Column:
    """The largest power of two <= value (0 for 0): exact integer buckets, no logarithms."""
    from pyspark.sql import functions as sf

    expr = sf.when(value <= 0, sf.lit(0))
    for k in range(1, _MAX_POWER + 1):
        expr = expr.when(value < sf.lit(1 << k), sf.lit(1 << (k - 1)))
    return expr.otherwise(sf.lit(1 << _MAX_POWER)).cast("long")


def profiles(seeds: DataFrame) -> DataFrame:
    from pyspark.sql import functions as sf

    return seeds.groupBy("profile").agg(
        sf.count("*").alias("seeds"),
        sf.sum("events").alias("events"),
        sf.sum("virtual_time_ms").alias("virtual_time_ms"),
        sf.sum("elections").cast("long").alias("elections"),
        sf.sum("commits").alias("commits"),
        sf.sum("lost").alias("lost"),
        sf.sum("crashes").cast("long").alias("crashes"),
        sf.sum("partitions").cast("long").alias("partitions"),
        sf.sum(sf.when(sf.col("ok"), 0).otherwise(1)).cast("long").alias("failing_seeds"),
    )


def _coverage(
    spark: SparkSession, counts: DataFrame, keys: list[str], universe: list[tuple[str, str]]
) -> DataFrame:
    """Counts per key over the campaign, every key of the universe present (0 if never seen).

    first_*: the first covering run in (profile, seed) order; earliest_*: the run whose trace
    reaches the key soonest (smallest line index `first`, ties by profile, seed)."""
    from pyspark.sql import functions as sf

    seen = counts.groupBy(*keys).agg(
        sf.sum("n").alias("events"),
        sf.count("*").alias("seeds"),
        sf.min(sf.struct("profile", "seed")).alias("first_run"),
        sf.min(sf.struct("first", "profile", "seed")).alias("earliest"),
    )
    known = spark.createDataFrame(universe, keys)
    joined = known.join(seen, on=keys, how="full_outer")
    return joined.select(
        *keys,
        sf.coalesce("events", sf.lit(0)).cast("long").alias("events"),
        sf.coalesce("seeds", sf.lit(0)).cast("long").alias("seeds"),
        sf.col("first_run.profile").alias("first_profile"),
        sf.col("first_run.seed").alias("first_seed"),
        sf.col("earliest.profile").alias("earliest_profile"),
        sf.col("earliest.seed").alias("earliest_seed"),
        sf.col("earliest.first").alias("earliest_index"),
        (sf.coalesce("events", sf.lit(0)) > 0).alias("covered"),
    )


def _counts(seeds: DataFrame, column: str, keys: list[str]) -> DataFrame:
    """One row per (run, key) of a per-seed count array: profile, seed, keys, n, first."""
    from pyspark.sql import functions as sf

    exploded = seeds.select("profile", "seed", sf.explode(column).alias("c"))
    return exploded.select(
        "profile", "seed", *(sf.col(f"c.{k}").alias(k) for k in keys), "c.n", "c.first"
    )


def action_coverage(spark: SparkSession, seeds: DataFrame) -> DataFrame:
    counts = _counts(seeds, "action_counts", ["kind", "name"])
    universe = [(KIND_SPEC, a) for a in SPEC_ACTIONS] + [(KIND_SIM, a) for a in SIM_ACTIONS]
    return _coverage(spark, counts, ["kind", "name"], universe)


def pair_coverage(spark: SparkSession, seeds: DataFrame) -> DataFrame:
    counts = _counts(seeds, "pair_counts", ["state", "action"])
    universe = [(s, a) for s in PAIR_STATES for a in PAIR_ACTIONS]
    return _coverage(spark, counts, ["state", "action"], universe)


def _metric_values(seeds: DataFrame) -> DataFrame:
    from pyspark.sql import functions as sf

    first = seeds.where(sf.col("time_to_first_leader_ms").isNotNull()).select(
        "profile", sf.lit(METRICS[0]).alias("metric"), sf.col(METRICS[0]).alias("value")
    )
    out = first
    for metric in METRICS[1:]:
        exploded = seeds.select(
            "profile", sf.lit(metric).alias("metric"), sf.explode(metric).alias("value")
        )
        out = out.unionByName(exploded)
    return out


def distributions(seeds: DataFrame) -> DataFrame:
    from pyspark.sql import functions as sf

    values = _metric_values(seeds)
    # Exact percentiles (linear interpolation between order statistics), integer sums.
    q = sf.expr("percentile(value, array(0.5, 0.9, 0.99))")
    stats = values.groupBy("metric", "profile").agg(
        sf.count("*").alias("count"),
        sf.min("value").alias("min"),
        sf.max("value").alias("max"),
        sf.sum("value").alias("sum"),
        q.alias("q"),
    )
    return stats.select(
        "metric",
        "profile",
        "count",
        "min",
        (sf.col("sum") / sf.col("count")).alias("mean"),
        sf.col("q")[0].alias("p50"),
        sf.col("q")[1].alias("p90"),
        sf.col("q")[2].alias("p99"),
        "max",
    )


def histograms(seeds: DataFrame) -> DataFrame:
    from pyspark.sql import functions as sf

    values = _metric_values(seeds).withColumn("bucket_lo", _bucket_lo(sf.col("value")))
    return values.groupBy("metric", "profile", "bucket_lo").agg(sf.count("*").alias("count"))


def violations(seeds: DataFrame) -> DataFrame:
    from pyspark.sql import functions as sf

    failing = seeds.select(
        "profile", "seed", "replay_command", sf.explode("violations").alias("v")
    ).select(
        sf.col("v.name").alias("invariant"),
        sf.struct("profile", "seed", "replay_command", sf.col("v.detail").alias("detail")).alias(
            "failure"
        ),
    )
    return failing.groupBy("invariant").agg(
        sf.count("*").alias("seeds"),
        sf.array_sort(sf.collect_list("failure")).alias("failures"),
    )


def compute(spark: SparkSession, seeds: DataFrame) -> dict[str, DataFrame]:
    return {
        "profiles": profiles(seeds),
        "action_coverage": action_coverage(spark, seeds),
        "pair_coverage": pair_coverage(spark, seeds),
        "distributions": distributions(seeds),
        "histograms": histograms(seeds),
        "violations": violations(seeds),
    }


def write_sorted(df: DataFrame, path: str, order: tuple[str, ...]) -> None:
    """One Parquet file, rows in `order` (so files compare equal across partitionings)."""
    df.coalesce(1).sortWithinPartitions(*order).write.mode("overwrite").parquet(path)
