"""The command line of trace validation:

python -m refinement.traces validate TRACE.ndjson [--voters 1,2,3]
python -m refinement.traces conformance --seeds N [--events E] [--profile P]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from refinement.faults import PROFILES
from refinement.traces.conformance import CONFORMANCE_PROFILES, conformance
from refinement.traces.validate import validate_trace


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m refinement.traces")
    sub = p.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("validate", help="validate one ndjson trace with TLC")
    v.add_argument("trace", type=Path)
    v.add_argument("--timeout", type=float, default=600.0)
    v.add_argument("--no-invariants", action="store_true", help="skip KRaft's invariants")
    v.add_argument(
        "--voters",
        help="comma-separated voter ids (default: every node of the trace; the simulator's"
        " observers, e.g. of disk-loss, are the nodes after 1,2,3)",
    )
    c = sub.add_parser("conformance", help="simulate seeds with faults and validate each")
    c.add_argument("--seeds", type=int, default=20)
    c.add_argument("--first-seed", type=int, default=0)
    c.add_argument("--events", type=int, default=300)
    c.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help="one profile for all seeds (default: lossy, crashes, partitions, mixed, snapshots,"
        " every X+snapshots, disk-loss and solo in turn)",
    )
    c.add_argument("--jobs", type=int, default=2)
    c.add_argument("--keep", type=Path, help="keep the traces in this directory")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "validate":
        voters = None
        if args.voters:
            try:
                voters = [int(v) for v in args.voters.split(",")]
            except ValueError:
                print(f"--voters: expected comma-separated ids, got {args.voters!r}")
                return 2
        res = validate_trace(
            args.trace, timeout_s=args.timeout, invariants=not args.no_invariants, voters=voters
        )
        print(res.summary())
        return 0 if res.accepted else 1
    profiles = (args.profile,) if args.profile else CONFORMANCE_PROFILES
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    start = time.monotonic()
    runs = conformance(
        seeds, events=args.events, profiles=profiles, jobs=args.jobs, keep_dir=args.keep
    )
    rejected = [r for r in runs if not r.result.accepted]
    total = sum(r.events for r in runs)
    for r in runs:
        print(f"seed={r.seed} profile={r.profile} {r.result.summary()}")
        if not r.result.accepted:
            print(f"  trace: {r.trace_path}\n  replay: {r.replay(args.events)}")
    print(
        f"{len(runs)} traces, {total} events, {len(rejected)} rejected,"
        f" {time.monotonic() - start:.0f}s"
    )
    return 1 if rejected else 0


if __name__ == "__main__":
    sys.exit(main())
