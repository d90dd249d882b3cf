"""Benchmarks of this checkout beside those of another git revision, interleaved in one run.

A change that claims not to slow anything down is measured against the revision before it:
the revision is checked out into a temporary worktree (with its own compiled build where the
suite uses one), and the two trees run the same `benchmarks.run` suites alternately, A B B A
..., so that a busy or quiet stretch of the machine falls on both. Each figure is the median of
the rounds; the ratio is this checkout over the base.

    python -m benchmarks.compare --base REV [--only SUITE ...] [--rounds N] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# | name | 1,234 unit | target | met | baseline | baseline median | ratio |
_ROW = re.compile(r"^\| (?P<name>[^|]+?) \| (?P<value>[\d,.]+) (?P<unit>[^|]+?) \|")


def parse_figures(markdown: str) -> dict[str, tuple[float, str]]:
    """The figures of a BENCHMARKS.md written by `benchmarks.run`: name -> (value, unit)."""
    out: dict[str, tuple[float, str]] = {}
    suite = ""
    for line in markdown.splitlines():
        if line.startswith("## "):
            suite = line[3:].strip()
            continue
        m = _ROW.match(line)
        if m and m["name"] != "benchmark":
            out[f"{suite}: {m['name']}"] = (float(m["value"].replace(",", "")), m["unit"])
    return out


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{tree / 'impl'}{os.pathsep}{tree}"
    env.pop("KRAFT_COMPILED_TREE", None)
    return env


def run_suites(tree: Path, only: Sequence[str], out: Path) -> dict[str, tuple[float, str]]:
    cmd = [sys.executable, "-m", "benchmarks.run", "--out", str(out)]
    for o in only:
        cmd += ["--only", o]
    subprocess.run(cmd, cwd=tree, env=_env(tree), check=True, stdout=subprocess.DEVNULL)
    return parse_figures(out.read_text(encoding="utf-8"))


def prepare(tree: Path) -> None:
    """Build the tree's compiled copy (the simulator suite measures it) if it has none."""
    subprocess.run(
        [sys.executable, "-m", "refinement.accel", "build", "--if-stale"],
        cwd=tree,
        env=_env(tree),
        check=True,
        stdout=subprocess.DEVNULL,
    )


def render(
    base: str,
    rounds: int,
    before: dict[str, list[float]],
    after: dict[str, list[float]],
    units: dict[str, str],
) -> str:
    lines = [
        f"Benchmarks of this checkout beside revision `{base}`, {rounds} interleaved rounds, "
        "medians (`python -m benchmarks.compare`).",
        "",
        "| figure | base | this checkout | ratio |",
        "| --- | --- | --- | --- |",
    ]
    for name, values in before.items():
        if name not in after:
            lines.append(f"| {name} | {statistics.median(values):,.0f} | (gone) | |")
            continue
        b, a = statistics.median(values), statistics.median(after[name])
        ratio = f"{a / b:.2f}x" if b else ""
        lines.append(f"| {name} | {b:,.2f} {units[name]} | {a:,.2f} {units[name]} | {ratio} |")
    lines += [f"| {name} | (new) | {statistics.median(after[name]):,.2f} | |" for name in after
              if name not in before]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.compare",
        description="Run benchmark suites of this checkout and of a base revision, interleaved.",
    )
    p.add_argument("--base", required=True, help="git revision to compare against")
    p.add_argument("--only", action="append", default=[], help="suites to run (repeatable)")
    p.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    p.add_argument("--out", type=Path, help="write the table here (default: print it)")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    before: dict[str, list[float]] = {}
    after: dict[str, list[float]] = {}
    units: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="kraft-bench-base-") as tmp:
        base_tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base_tree), args.base],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        try:
            for tree in (base_tree, ROOT):
                prepare(tree)
            for r in range(args.rounds):
                order = [(base_tree, before), (ROOT, after)]
                for tree, into in order if r % 2 == 0 else order[::-1]:
                    label = "base" if tree is base_tree else "this checkout"
                    print(f"[compare] round {r + 1}/{args.rounds}: {label}", file=sys.stderr)
                    found = run_suites(tree, args.only, Path(tmp) / "out.md")
                    for name, (value, unit) in found.items():
                        into.setdefault(name, []).append(value)
                        units[name] = unit
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base_tree)],
                cwd=ROOT,
                check=False,
            )
    table = render(args.base, args.rounds, before, after, units)
    if args.out is not None:
        args.out.write_text(table, encoding="utf-8")
        print(f"wrote {args.out}")
    else:
        print(table, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
