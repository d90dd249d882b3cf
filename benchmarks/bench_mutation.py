"""The mutation campaign's score, time and core scaling: `python -m benchmarks.bench_mutation`.

One deterministic sample of the core's mutants (default 40, seed 41: a sample whose survivors
nobody has worked yet, so its score estimates what a new mutant meets) through the model-based
layers (scenarios, simulator sweep, hypothesis, TLC traces: issue #16's goal leaves the unit
tests out), the same campaign on local[1] and then on local[2]. Reported: the mutation score
(killed / non-equivalent, refinement/mutation/equivalent.toml), wall-clock seconds per
mutant on each, and the 1 -> 2 core ratio. Wall-clock, so other load on the machine lowers
both timings (the load average is printed); the score does not depend on it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.figure import Figure
from refinement.mutation.campaign import MutateConfig, MutateResult, run_campaign
from refinement.mutation.execute import MODEL_LAYERS, LayerSettings
from refinement.mutation.report import load_equivalents
from refinement.pipeline.spark import session

SAMPLE = 40
SEED = 41  # a fresh sample: the survivors of seeds 5-37 were each worked, so those overstate
GOAL = 0.95


@dataclass(frozen=True, slots=True)
class Outcome:
    cores: int
    mutants: int
    killed: int
    equivalent: int
    wall_s: float

    @property
    def score(self) -> float:
        counted = self.mutants - self.equivalent
        return self.killed / counted if counted else 1.0

    @property
    def s_per_mutant(self) -> float:
        return self.wall_s / self.mutants if self.mutants else 0.0


def _outcome(cores: int, result: MutateResult) -> Outcome:
    import pyarrow.parquet as pq

    table = pq.read_table(result.config.out / "mutants").to_pydict()
    listed = load_equivalents(result.config.equivalents)
    killed = sum(1 for k in table["killed"] if k)
    equivalent = sum(
        1 for mid, k in zip(table["id"], table["killed"], strict=True) if not k and mid in listed
    )
    return Outcome(cores, len(table["id"]), killed, equivalent, result.wall_s)


def run_on(cores: int, sample: int, seed: int, out: Path) -> Outcome:
    config = MutateConfig(
        sample=sample,
        seed=seed,
        settings=LayerSettings(layers=MODEL_LAYERS),
        out=out / f"local{cores}",
    )
    spark = session(f"local[{cores}]", app_name=f"bench-mutation-local{cores}")
    try:
        # A warm-up job starts the Python workers, so both runs measure the campaign alone.
        spark.sparkContext.parallelize(range(8), 8).map(lambda x: x).count()
        return _outcome(cores, run_campaign(spark, config, progress=False))
    finally:
        spark.stop()


def scaling(sample: int = SAMPLE, seed: int = SEED) -> dict[int, Outcome]:
    out = Path(tempfile.mkdtemp(prefix="bench-mutation-"))
    return {cores: run_on(cores, sample, seed, out) for cores in (1, 2)}


def figures(sample: int = SAMPLE, seed: int = SEED) -> list[Figure]:
    results = scaling(sample, seed)
    one, two = results[1], results[2]
    return [
        _score_figure(
            f"mutation score without the unit tests ({two.mutants} mutants, sample seed "
            f"{seed}; {two.killed} killed, {two.equivalent} equivalent)",
            two.score,
        ),
        Figure(
            name="campaign throughput on local[2] (mutants per hour)",
            value=3600 / two.s_per_mutant if two.s_per_mutant else 0.0,
            unit="mutants/h",
            target="",
            met=None,
            baseline_name="same campaign on local[1]",
            baseline_value=3600 / one.s_per_mutant if one.s_per_mutant else 0.0,
        ),
    ]


def _score_figure(name: str, score: float) -> Figure:
    """A mutation score (killed / non-equivalent) against issue #16's goal."""
    return Figure(
        name=name,
        value=100 * score,
        unit="%",
        target=f">= {100 * GOAL:.0f} %",
        met=score >= GOAL,
    )


def fresh_figures() -> list[Figure]:
    """The pooled score of the fresh samples on record (refinement/mutation/fresh_samples.csv,
    `python -m refinement.mutation.fresh score`), under today's equivalents file: the
    estimate of issue #16's goal, from every sample drawn before its survivors were worked."""
    from refinement.mutation import fresh
    from refinement.mutation.campaign import EQUIVALENTS

    pooled = fresh.pool(fresh.load(), load_equivalents(EQUIVALENTS))
    low, high = pooled.interval
    samples = pooled.samples
    last = samples[-1]
    return [
        _score_figure(
            f"mutation score without the unit tests, {len(samples)} fresh samples pooled "
            f"(seeds {samples[0].sample}-{last.sample}; {pooled.killed} killed of "
            f"{pooled.counted} non-equivalent; 95 % Wilson interval "
            f"{100 * low:.1f}-{100 * high:.1f} %)",
            pooled.score,
        ),
        _score_figure(
            f"the latest fresh sample (seed {last.sample}, drawn on {last.drawn_on}; "
            f"{last.killed} killed of {last.counted})",
            last.score,
        ),
    ]


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_mutation",
        description="Mutation score, time and 1 -> 2 core scaling of one campaign sample.",
    )
    p.add_argument("--sample", type=int, default=SAMPLE, help=f"mutants (default {SAMPLE})")
    p.add_argument("--seed", type=int, default=SEED, help=f"the sample's seed (default {SEED})")
    args = p.parse_args()
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    results = scaling(args.sample, args.seed)
    for cores, r in results.items():
        print(
            f"local[{cores}]: {r.mutants} mutants in {r.wall_s:.0f}s ({r.s_per_mutant:.1f}s each);"
            f" {r.killed} killed, {r.equivalent} equivalent, score {100 * r.score:.1f} %"
        )
    ratio = results[1].wall_s / results[2].wall_s if results[2].wall_s else 0.0
    print(f"scaling local[1] -> local[2]: {ratio:.2f}x")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
