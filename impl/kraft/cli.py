"""The `kraft` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

Handler = Callable[[argparse.Namespace], int]


def _cmd_dump_log(args: argparse.Namespace) -> int:
    from kraft.dump_log import dump_file

    status = 0
    for path in args.files:
        if not path.is_file():
            print(f"kraft dump-log: {path}: no such file", file=sys.stderr)
            status = 2
            continue
        lines, problem = dump_file(path, print_records=args.print_records)
        print("\n".join(lines))
        if problem is not None:
            print(
                f"kraft dump-log: {path}: cannot decode at position {problem.position}: "
                f"{problem.reason}",
                file=sys.stderr,
            )
            status = 1
    return status


def _cmd_simulate(args: argparse.Namespace) -> int:
    from refinement import sim

    forwarded: list[str] = list(args.sim_args)
    if forwarded and forwarded[0] == "--":
        forwarded = forwarded[1:]
    return sim.main(forwarded)


def _cmd_demo(args: argparse.Namespace) -> int:
    from refinement import demo

    return demo.main(seed=args.seed)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kraft",
        description="A reference implementation of Kafka's Raft (KRaft) metadata quorum.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    dump = sub.add_parser(
        "dump-log",
        help="decode log segments (.log) and snapshot files (.checkpoint)",
        description="Decode record batches batch by batch, with CRC validity per batch.",
    )
    dump.add_argument("files", nargs="+", type=Path, metavar="FILE")
    dump.add_argument(
        "--print-records", action="store_true", help="also print every record of valid batches"
    )
    dump.set_defaults(handler=_cmd_dump_log)

    simulate = sub.add_parser(
        "simulate",
        help="run the deterministic cluster simulator (see `kraft simulate -- --help`)",
        description="Run the deterministic simulator; arguments after -- go to it.",
    )
    simulate.add_argument("sim_args", nargs=argparse.REMAINDER)
    simulate.set_defaults(handler=_cmd_simulate)

    demo = sub.add_parser(
        "demo",
        help="elect, append, crash the leader, re-elect, and show nothing acknowledged was lost",
        description="The main job on its embedded default: a seeded 3-voter cluster.",
    )
    demo.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    demo.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
