"""Golden simulator traces: a fixed set of seeds and fault profiles, written to a directory.

A refactoring that claims to change no behaviour writes the set before and after and compares
the two directories: every trace must be byte-identical, or the first differing line shows
where behaviour changed.

    python -m refinement.golden write DIR
    python -m refinement.golden compare DIR_BEFORE DIR_AFTER
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from refinement.faults import PROFILES
from refinement.sim import SimConfig, simulate

# (name, config): every profile on a few seeds, plus larger clusters and observers.
SEEDS = range(6)


def golden_set() -> Iterator[tuple[str, SimConfig]]:
    for profile in sorted(PROFILES):
        for seed in SEEDS:
            yield f"{profile}-{seed}", SimConfig(seed=seed, profile=PROFILES[profile])
    for seed in SEEDS:
        yield f"mixed-5v-{seed}", SimConfig(seed=seed, voters=5, profile=PROFILES["mixed"])
        yield (
            f"mixed-obs-{seed}",
            SimConfig(seed=seed, observers=2, profile=PROFILES["mixed"]),
        )


def write(directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    for name, config in golden_set():
        path = directory / f"{name}.ndjson"
        with path.open("w", encoding="utf-8") as out:
            result = simulate(config, trace=out)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        print(f"{name:16} {digest} {result.summary()}")
    return 0


def compare(before: Path, after: Path) -> int:
    differing = 0
    new = 0
    for name, _ in golden_set():
        if not (before / f"{name}.ndjson").exists():
            new += 1  # a trace the baseline has not got (a profile added since)
            print(f"{name}: new (not in {before})")
            continue
        a = (before / f"{name}.ndjson").read_text(encoding="utf-8").splitlines()
        b = (after / f"{name}.ndjson").read_text(encoding="utf-8").splitlines()
        if a == b:
            continue
        differing += 1
        line = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        if line is None:
            line = min(len(a), len(b))
        print(f"{name}: differs from line {line + 1} ({len(a)} vs {len(b)} lines)")
        print(f"  before: {a[line] if line < len(a) else '<end>'}")
        print(f"  after:  {b[line] if line < len(b) else '<end>'}")
    total = sum(1 for _ in golden_set()) - new
    print(f"{total - differing} of {total} traces byte-identical ({new} new)")
    return 1 if differing else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m refinement.golden",
        description="Write or compare the golden simulator traces (fixed seeds and profiles).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write every golden trace into DIR")
    w.add_argument("directory", type=Path)
    c = sub.add_parser("compare", help="compare two directories written by 'write'")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = p.parse_args(argv)
    if args.command == "write":
        return write(args.directory)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
