"""The record of fresh mutation samples, and their pooled score (issue #16's measured figure).

A fresh sample is one drawn before anyone worked its survivors: its score estimates what a new
mutant of the core meets. Samples are run with `kraft mutate --sample N --seed S` (about 15-25
minutes for 40-60 mutants on 2 cores), and their outcome is kept here, one row per mutant, in
`fresh_samples.csv`:

    python -m refinement.mutation.fresh record OUT --drawn-on REV   # add a campaign's sample
    python -m refinement.mutation.fresh score                       # the pooled table

The score is computed from the record under today's equivalents file, as `report --pool` does
from campaign directories: a survivor since listed as equivalent leaves the count, one killed
since by a new check still counts as a survivor of its sample, and a mutant drawn by two
samples counts once, from the first. The pooled score comes with a 95 % Wilson interval.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from refinement.mutation.report import load_equivalents, wilson_interval

RECORD = Path(__file__).with_name("fresh_samples.csv")
FIELDS = ("seed", "drawn_on", "id", "file", "operator", "killed", "killed_by")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One mutant of one sample (`sample`: its seed in the record, its directory for
    `report --pool`)."""

    sample: str
    drawn_on: str
    id: str
    file: str
    operator: str
    killed: bool
    killed_by: str


@dataclass(frozen=True, slots=True)
class SampleScore:
    sample: str
    drawn_on: str
    mutants: int  # not drawn by an earlier sample
    killed: int
    equivalent: int

    @property
    def counted(self) -> int:
        return self.mutants - self.equivalent

    @property
    def score(self) -> float:
        return self.killed / self.counted if self.counted else 1.0


@dataclass(frozen=True, slots=True)
class Pooled:
    samples: tuple[SampleScore, ...]

    @property
    def killed(self) -> int:
        return sum(s.killed for s in self.samples)

    @property
    def counted(self) -> int:
        return sum(s.counted for s in self.samples)

    @property
    def score(self) -> float:
        return self.killed / self.counted if self.counted else 1.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.killed, self.counted)


def load(path: Path = RECORD) -> list[Outcome]:
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return [
            Outcome(
                sample=row["seed"],
                drawn_on=row["drawn_on"],
                id=row["id"],
                file=row["file"],
                operator=row["operator"],
                killed=row["killed"] == "true",
                killed_by=row["killed_by"],
            )
            for row in csv.DictReader(f)
        ]


def pool(outcomes: Iterable[Outcome], equivalents: Mapping[str, object]) -> Pooled:
    """Each sample's score in the order recorded, and the pool (module doc)."""
    seen: set[str] = set()
    by_sample: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_sample.setdefault(o.sample, []).append(o)
    scores = []
    for sample, rows in by_sample.items():
        fresh = [o for o in rows if o.id not in seen]
        seen.update(o.id for o in rows)
        killed = sum(o.killed for o in fresh)
        equivalent = sum(1 for o in fresh if not o.killed and o.id in equivalents)
        scores.append(SampleScore(sample, rows[0].drawn_on, len(fresh), killed, equivalent))
    return Pooled(tuple(scores))


def outcomes_of(out: Path, drawn_on: str) -> list[Outcome]:
    """The sample a campaign directory holds (`kraft mutate --sample N --seed S --out OUT`)."""
    import pandas as pd

    config = json.loads((out / "campaign.json").read_text())["config"]
    if config.get("ids") or config.get("files") or not config.get("sample"):
        raise ValueError(f"{out} is not a sample campaign (--sample N --seed S, all files)")
    df = pd.read_parquet(out / "mutants", columns=["id", "file", "operator", "killed", "killed_by"])
    seed = str(int(config["seed"]))
    return [
        Outcome(
            seed,
            drawn_on,
            str(r.id),
            str(r.file),
            str(r.operator),
            bool(r.killed),
            str(r.killed_by) if r.killed_by else "",
        )
        for r in df.sort_values("id").itertuples()
    ]


def record(out: Path, drawn_on: str, path: Path = RECORD) -> list[Outcome]:
    """Add a campaign's sample to the record; refused if its seed is recorded already."""
    new = outcomes_of(out, drawn_on)
    if any(o.sample == new[0].sample for o in load(path)):
        raise ValueError(f"seed {new[0].sample} is recorded already in {path}")
    fresh_file = not path.exists()
    with path.open("a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if fresh_file:
            w.writerow(FIELDS)
        for o in new:
            w.writerow(
                [o.sample, o.drawn_on, o.id, o.file, o.operator, str(o.killed).lower(), o.killed_by]
            )
    return new


def table(pooled: Pooled) -> str:
    lines = [
        "| sample | drawn on | mutants | killed | equivalent now | survivors | score |",
        "|---|---|---|---|---|---|---|",
    ]
    lines.extend(
        f"| {s.sample} | {s.drawn_on} | {s.mutants} | {s.killed} | {s.equivalent} "
        f"| {s.counted - s.killed} | {100 * s.score:.1f} % |"
        for s in pooled.samples
    )
    low, high = pooled.interval
    lines.append(
        f"| pooled | | {sum(s.mutants for s in pooled.samples)} | {pooled.killed} | "
        f"| {pooled.counted - pooled.killed} | {100 * pooled.score:.1f} % "
        f"(95 % interval {100 * low:.1f} % - {100 * high:.1f} %) |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from refinement.mutation.campaign import EQUIVALENTS

    p = argparse.ArgumentParser(
        prog="python -m refinement.mutation.fresh",
        description="The record of fresh mutation samples and their pooled score.",
    )
    p.add_argument("--record", type=Path, default=RECORD, help=f"default {RECORD}")
    p.add_argument("--equivalents", type=Path, default=EQUIVALENTS)
    sub = p.add_subparsers(dest="command", required=True)
    add = sub.add_parser("record", help="add a sample campaign's outcome to the record")
    add.add_argument("out", type=Path, help="the campaign's directory")
    add.add_argument("--drawn-on", required=True, help="the revision the sample was run on")
    sub.add_parser("score", help="each recorded sample's score and the pooled one")
    args = p.parse_args(argv)
    if args.command == "record":
        try:
            new = record(args.out, args.drawn_on, args.record)
        except (ValueError, OSError) as e:
            p.error(str(e))
        print(f"recorded seed {new[0].sample}: {len(new)} mutants")
    print(table(pool(load(args.record), load_equivalents(args.equivalents))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
