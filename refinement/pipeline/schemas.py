"""Spark schemas of the campaign datasets (the column order of seedrun's rows)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


def seeds_schema() -> StructType:
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    def f(name: str, t: object, nullable: bool = False) -> StructField:
        return StructField(name, t, nullable)  # type: ignore[arg-type]

    longs = ArrayType(LongType(), containsNull=False)
    return StructType(
        [
            f("seed", LongType()),
            f("profile", StringType()),
            f("events", LongType()),
            f("trace_events", LongType()),
            f("virtual_time_ms", LongType()),
            f("elections", IntegerType()),
            f("time_to_first_leader_ms", LongType(), True),
            f("election_ms", longs),
            f("commits", LongType()),
            f("accepted", LongType()),
            f("lost", LongType()),
            f("commit_latency_count", LongType()),
            f("commit_latency_p50_ms", LongType(), True),
            f("commit_latency_p99_ms", LongType(), True),
            f("commit_latency_max_ms", LongType(), True),
            f("commit_latency_ms", longs),
            f("crashes", IntegerType()),
            f("shutdowns", IntegerType()),
            f("partitions", IntegerType()),
            f("dropped", LongType()),
            f("recovery_ms", LongType(), True),
            f(
                "violations",
                ArrayType(
                    StructType([f("name", StringType()), f("detail", StringType())]),
                    containsNull=False,
                ),
            ),
            f("ok", BooleanType()),
            f("replay_command", StringType()),
            f("actions_covered", ArrayType(StringType(), containsNull=False)),
            f(
                "action_counts",
                ArrayType(
                    StructType(
                        [
                            f("name", StringType()),
                            f("kind", StringType()),
                            f("n", LongType()),
                            # the index of the trace line the class first occurs on
                            f("first", LongType()),
                        ]
                    ),
                    containsNull=False,
                ),
            ),
            f(
                "pair_counts",
                ArrayType(
                    StructType(
                        [
                            f("state", StringType()),
                            f("action", StringType()),
                            f("n", LongType()),
                            f("first", LongType()),
                        ]
                    ),
                    containsNull=False,
                ),
            ),
            f("sim_wall_ms", LongType()),
        ]
    )


def events_source_schema() -> StructType:
    """The hand-off from the simulation stage to the events dataset: one IPC blob a seed."""
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField("seed", LongType(), False),
            StructField("profile", StringType(), False),
            StructField("ipc", BinaryType(), True),
        ]
    )


def events_schema() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    from refinement.pipeline.seedrun import events_arrow_schema

    schema: StructType = from_arrow_schema(events_arrow_schema())
    return schema
