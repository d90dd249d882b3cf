"""The `kraft` command line: the parser and `main`, and the commands that only call into
another module (dump-log, snapshots, simulate, campaign, mutate, chaos, demo). The others are
grouped by what they work on: kraft.cli.node (format, start, cluster up), kraft.cli.quorum (quorum
describe), kraft.cli.records (append, read, get); kraft.cli.common holds what they share."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kraft.cli import node, quorum, records
from kraft.cli.common import Handler


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


def _cmd_snapshots(args: argparse.Namespace) -> int:
    from kraft.storage.segmented_log import LOG_DIR_NAME, read_log_start
    from kraft.storage.snapshot_directory import snapshot_files
    from kraft.storage.snapshot_files import CorruptSnapshotError, SnapshotFileKind, check_snapshot

    directory = args.data_dir / LOG_DIR_NAME
    if not directory.is_dir():
        print(f"kraft snapshots: {directory}: no such directory", file=sys.stderr)
        return 2
    status = 0
    # Kafka's tools show no log start offset (DescribeQuorum carries none): it is shown here.
    start = read_log_start(args.data_dir)
    segments = sorted(directory.glob("*.log"))
    seg_bytes = sum(p.stat().st_size for p in segments)
    print(f"log start offset: {0 if start is None else start} (log-start-offset-checkpoint)")
    print(f"log segments: {len(segments)} ({seg_bytes} bytes)")
    print(f"{'END OFFSET':>12} {'EPOCH':>6} {'BYTES':>12} {'RECORDS':>9}  STATUS  FILE")
    for found in snapshot_files(directory):
        sid, name = found.snapshot_id, found.path.name
        size = found.path.stat().st_size if found.path.exists() else 0
        if found.kind is not SnapshotFileKind.COMPLETE:
            state, records = found.kind.value, "-"
        else:
            try:
                records, state = str(check_snapshot(found.path).records), "valid"
            except (CorruptSnapshotError, OSError) as e:
                records, state = "-", "invalid"
                print(f"kraft snapshots: {name}: {e}", file=sys.stderr)
                status = 1
        print(f"{sid.offset:>12} {sid.epoch:>6} {size:>12} {records:>9}  {state:<7} {name}")
    return status


def _cmd_simulate(args: argparse.Namespace) -> int:
    from refinement import sim

    forwarded: list[str] = list(args.sim_args)
    if forwarded and forwarded[0] == "--":
        forwarded = forwarded[1:]
    return sim.main(forwarded)


def _cmd_campaign(args: argparse.Namespace) -> int:
    from refinement.pipeline import campaign

    return campaign.run_from_args(args)


def _cmd_mutate(args: argparse.Namespace) -> int:
    from refinement.mutation import campaign

    return campaign.run_from_args(args)


def _cmd_chaos(args: argparse.Namespace) -> int:
    from refinement.chaos.cli import run_from_args

    return run_from_args(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from kraft import demo

    return demo.main(data_root=args.data_root, keep=args.keep)


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

    snapshots = sub.add_parser(
        "snapshots",
        help="list a node's snapshots (checkpoint files) and check each",
        description=(
            "List the snapshot files of a node's metadata partition directory "
            "(<data-dir>/__cluster_metadata-0), after the log start offset and the log "
            "segments' count and bytes, oldest first: end offset, epoch, size, and "
            "for a checkpoint file its records and whether it passes validation (every batch's "
            "CRC, header first, footer last); leftover .part and .deleted files are listed as "
            "partial and deleted. Exit status 1 when a checkpoint file is invalid. Read-only: "
            "it may run beside a live node."
        ),
    )
    snapshots.add_argument(
        "--data-dir", type=Path, required=True, help="the node's data directory (metadata.log.dir)"
    )
    snapshots.set_defaults(handler=_cmd_snapshots)

    simulate = sub.add_parser(
        "simulate",
        help="run the deterministic cluster simulator (see `kraft simulate -- --help`)",
        description="Run the deterministic simulator; arguments after -- go to it.",
    )
    simulate.add_argument("sim_args", nargs=argparse.REMAINDER)
    simulate.set_defaults(handler=_cmd_simulate)

    campaign = sub.add_parser(
        "campaign",
        help="run many simulator seeds on Spark: coverage, distributions, violations, report",
        description="A simulation campaign on Spark (embedded local[*] unless --master).",
    )
    from refinement.pipeline.campaign import add_arguments

    add_arguments(campaign)
    campaign.set_defaults(handler=_cmd_campaign)

    mutate = sub.add_parser(
        "mutate",
        help="a mutation campaign on Spark: mutants of the core against the verification layers",
        description=(
            "Mutants of the pure core, each in an isolated copy, run against the layers"
            " (unit, scenarios, sim, hypothesis, tlc) cheapest first up to the first kill;"
            " writes Parquet and a report; exit 1 when a survivor is not listed as equivalent"
            " (refinement/mutation/equivalent.toml). Embedded local[*] unless --master."
        ),
    )
    from refinement.mutation.campaign import add_arguments as add_mutate_arguments

    add_mutate_arguments(mutate)
    mutate.set_defaults(handler=_cmd_mutate)

    from refinement.chaos.cli import DESCRIPTION as CHAOS_DESCRIPTION
    from refinement.chaos.cli import EPILOG as CHAOS_EPILOG
    from refinement.chaos.cli import add_arguments as add_chaos_arguments

    chaos = sub.add_parser(
        "chaos",
        help="a real cluster under seeded faults (kills, pauses, partitions, lost fsyncs)",
        description=CHAOS_DESCRIPTION,
        epilog=CHAOS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_chaos_arguments(chaos)
    chaos.set_defaults(handler=_cmd_chaos)

    demo = sub.add_parser(
        "demo",
        help="elect, append, crash the leader, re-elect, and show nothing acknowledged was lost",
        description="The main job on its embedded default: a seeded 3-voter cluster.",
    )
    demo.add_argument(
        "--data-root",
        type=Path,
        default=None,
        help="where the nodes keep data (default: a temp dir)",
    )
    demo.add_argument("--keep", action="store_true", help="keep the data directories afterwards")
    demo.set_defaults(handler=_cmd_demo)

    node.add_commands(sub)
    quorum.add_commands(sub)
    records.add_commands(sub)
    return parser


# Commands that run the simulator: they use the mypyc-compiled copy while it is fresh.
_COMPILED_COMMANDS = ("simulate", "campaign")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if argv is None and args.command in _COMPILED_COMMANDS:
        # Only from the command line: a caller passing argv keeps its own process.
        from refinement import accel

        accel.reexec_compiled(sys.argv[1:])
        if accel.running_compiled():
            print(f"kraft: {args.command} runs the mypyc-compiled simulator", file=sys.stderr)
        elif (why := accel.why_sources()) is not None:
            print(f"kraft: {args.command} runs the sources: {why}", file=sys.stderr)
    handler: Handler = args.handler
    return handler(args)
