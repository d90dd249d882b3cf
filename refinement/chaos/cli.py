"""`kraft chaos` (also `python -m refinement.chaos`): the real-cluster fault harness."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from refinement.chaos.schedule import FaultKind, make_schedule, parse_kinds

__all__ = ["add_arguments", "main", "run_from_args"]

DESCRIPTION = """\
Run a real cluster of `kraft start` processes on 127.0.0.1 under a seeded schedule of faults
(SIGKILL and restart of the leader, of a follower, of two nodes; SIGSTOP/SIGCONT of the
leader; partitions, one-way loss, delays and message loss through a TCP proxy per directed
link; a crash that drops the un-fsynced log tail), with concurrent writers, then check that
every acknowledged value is at its offset on every node, that the committed logs are
identical, count duplicates and unacknowledged-but-present values, report failover times and
the longest unavailability, and validate the nodes' merged traces with TLC.

The schedule is a function of --seed (see --print-schedule); the timing of real processes is
not, so two runs of one seed apply the same faults to the same roles but not at the same
instants of the protocol. Exit status: 0 passed, 1 failed verdict, 2 bad usage or the run
could not be carried out.
"""

EPILOG = "fault kinds: " + ", ".join(k.value for k in FaultKind)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=1, help="schedule seed (default 1)")
    p.add_argument("--cycles", type=int, default=10, help="fault cycles (default 10)")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="start no cycle after this many seconds (with a large --cycles: as many cycles "
        "as fit)",
    )
    p.add_argument("--nodes", type=int, default=3, help="voters (default 3)")
    p.add_argument("--writers", type=int, default=3, help="concurrent writers (default 3)")
    p.add_argument(
        "--faults",
        default="all",
        metavar="KIND[,KIND...]",
        help="fault kinds to draw from (default all; see below)",
    )
    p.add_argument("--min-hold-ms", type=int, default=1000, help="shortest fault (default 1000)")
    p.add_argument("--max-hold-ms", type=int, default=3000, help="longest fault (default 3000)")
    p.add_argument(
        "--recovery-timeout",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="how long a cycle waits for recovery after its heal (default 20)",
    )
    p.add_argument(
        "--writer-pause-ms",
        type=int,
        default=50,
        help="pause of each writer between two values (default 50)",
    )
    p.add_argument(
        "--no-resend",
        action="store_true",
        help="a writer gives up a value after one unknown outcome instead of resending it",
    )
    dup = p.add_mutually_exclusive_group()
    dup.add_argument(
        "--allow-duplicates",
        dest="allow_duplicates",
        action="store_true",
        default=False,
        help="duplicated values are reported, not a failure",
    )
    dup.add_argument(
        "--forbid-duplicates",
        dest="allow_duplicates",
        action="store_false",
        help="a duplicated value fails the run (default: appends are idempotent)",
    )
    p.add_argument("--no-tlc", action="store_true", help="skip TLC validation of the traces")
    p.add_argument(
        "--tlc-max-events",
        type=int,
        default=0,
        help="validate at most this many merged trace events (default 0: all)",
    )
    p.add_argument(
        "--tlc-timeout",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="TLC's time limit (default 900)",
    )
    p.add_argument("--data-root", type=Path, help="where the nodes live (default: a temp dir)")
    p.add_argument(
        "--keep",
        action="store_true",
        help="keep the data after a passed run (a failed one is kept)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines, only the report")
    p.add_argument(
        "--print-schedule",
        action="store_true",
        help="print the schedule of --seed/--cycles/--faults as JSON lines and exit",
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kraft chaos",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    return p


def run_from_args(args: argparse.Namespace) -> int:
    from refinement.chaos.report import ChaosConfig, ChaosError
    from refinement.chaos.runner import run_chaos

    try:
        kinds = parse_kinds(args.faults)
    except ValueError as e:
        print(f"kraft chaos: --faults: {e}", file=sys.stderr)
        return 2
    if args.print_schedule:
        try:
            schedule = make_schedule(
                args.seed,
                args.cycles,
                kinds,
                min_hold_ms=args.min_hold_ms,
                max_hold_ms=args.max_hold_ms,
            )
        except ValueError as e:
            print(f"kraft chaos: {e}", file=sys.stderr)
            return 2
        for fault in schedule:
            print(fault.describe())
        return 0
    for name, value in (
        ("--tlc-max-events", args.tlc_max_events),
        ("--writer-pause-ms", args.writer_pause_ms),
    ):
        if value < 0:
            print(f"kraft chaos: {name} must not be negative", file=sys.stderr)
            return 2
    config = ChaosConfig(
        seed=args.seed,
        cycles=args.cycles,
        duration_s=args.duration,
        nodes=args.nodes,
        writers=args.writers,
        kinds=kinds,
        min_hold_ms=args.min_hold_ms,
        max_hold_ms=args.max_hold_ms,
        recovery_timeout_s=args.recovery_timeout,
        writer_pause_s=args.writer_pause_ms / 1000,
        resend=not args.no_resend,
        allow_duplicates=args.allow_duplicates,
        tlc=not args.no_tlc,
        tlc_max_events=args.tlc_max_events,
        tlc_timeout_s=args.tlc_timeout,
        root=args.data_root,
        keep=args.keep,
        progress=not args.quiet,
    )
    try:
        report = run_chaos(config)
    except ChaosError as e:
        print(f"kraft chaos: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kraft chaos: interrupted", file=sys.stderr)
        return 130
    print(report.summary(), flush=True)
    return 0 if report.passed else 1


def main(argv: Sequence[str] | None = None) -> int:
    return run_from_args(_parser().parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
