"""The `kraft` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kraft.client import Address
    from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
    from kraft.protocol.rpc import NodeEndpoints

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


def _cmd_campaign(args: argparse.Namespace) -> int:
    from refinement.pipeline import campaign

    return campaign.run_from_args(args)


def _cmd_chaos(args: argparse.Namespace) -> int:
    from refinement.chaos.cli import run_from_args

    return run_from_args(args)


def _cmd_demo(args: argparse.Namespace) -> int:
    from kraft import demo

    return demo.main(data_root=args.data_root, keep=args.keep)


# --------------------------------------------------------------------------- node commands


def _fail(command: str, message: str, status: int = 1) -> int:
    print(f"kraft {command}: {message}", file=sys.stderr)
    return status


def _addresses(command: str, text: str) -> list[Address] | None:
    from kraft.client import parse_address

    try:
        return [parse_address(a) for a in text.split(",") if a.strip()]
    except ValueError as e:
        _fail(command, f"--bootstrap: {e}", 2)
        return None


def _cmd_format(args: argparse.Namespace) -> int:
    import random
    import uuid

    from kraft.errors import KraftError
    from kraft.ids import DirectoryId
    from kraft.protocol import uuid_from_base64
    from kraft.storage.meta_properties import format_storage, generate_cluster_id

    cluster_id = args.cluster_id
    if args.random_cluster_id:
        if cluster_id is not None:
            return _fail("format", "give --cluster-id or --random-cluster-id, not both", 2)
        cluster_id = generate_cluster_id(random.Random())
        if args.data_dir is None and args.node_id is None:
            print(cluster_id)
            return 0
    if args.data_dir is None or args.node_id is None or cluster_id is None:
        return _fail("format", "--data-dir, --node-id and --cluster-id are required", 2)
    directory_id = None
    if args.directory_id is not None:
        try:
            directory_id = DirectoryId(uuid_from_base64(args.directory_id))
        except ValueError:
            try:
                directory_id = DirectoryId(uuid.UUID(args.directory_id))
            except ValueError:
                return _fail("format", f"--directory-id: not a UUID: {args.directory_id!r}", 2)
    try:
        props = format_storage(args.data_dir, cluster_id, args.node_id, directory_id=directory_id)
    except KraftError as e:
        return _fail("format", str(e), 2)
    from kraft.protocol import uuid_to_base64

    print(
        f"Formatted {args.data_dir}: cluster.id={props.cluster_id} node.id={props.node_id} "
        f"directory.id={uuid_to_base64(props.directory_id)}"
    )
    return 0


_START_FLAGS = {
    "node_id": "node.id",
    "data_dir": "metadata.log.dir",
    "voters": "controller.quorum.voters",
    "listener": "listeners",
    "election_timeout_ms": "controller.quorum.election.timeout.ms",
    "fetch_timeout_ms": "controller.quorum.fetch.timeout.ms",
    "request_timeout_ms": "controller.quorum.request.timeout.ms",
    "append_linger_ms": "controller.quorum.append.linger.ms",
    "trace": "kraft.trace.file",
}


def _cmd_start(args: argparse.Namespace) -> int:
    import asyncio
    import logging

    from kraft.errors import KraftError
    from kraft.server.config import load_config
    from kraft.server.node import run_node

    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key:
            return _fail("start", f"--override: expected KEY=VALUE, got {item!r}", 2)
        overrides[key.strip()] = value.strip()
    for attr, key in _START_FLAGS.items():
        value = getattr(args, attr)
        if value is not None:
            overrides[key] = str(value)
    if args.config is not None and not args.config.is_file():
        return _fail("start", f"--config: {args.config}: no such file", 2)
    try:
        config = load_config(args.config, overrides)
    except KraftError as e:
        return _fail("start", str(e), 2)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format=f"%(asctime)s node-{config.node_id} %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        return asyncio.run(run_node(config))
    except KraftError as e:
        return _fail("start", str(e), 1)


def _status_lines(
    cluster_id: str, d: QuorumDescription, nodes: Sequence[NodeEndpoints] = ()
) -> list[str]:
    """kafka-metadata-quorum.sh describe --status, field for field."""
    leader = next(v for v in d.voters if v.replica.id == d.leader_id)
    laggard = min(d.voters, key=lambda v: v.log_end_offset)
    if laggard is leader:
        lag_ms = 0
    elif leader.last_caught_up_timestamp_ms >= 0 and laggard.last_caught_up_timestamp_ms >= 0:
        lag_ms = leader.last_caught_up_timestamp_ms - laggard.last_caught_up_timestamp_ms
    else:
        lag_ms = -1
    fields = [
        ("ClusterId", cluster_id),
        ("LeaderId", str(d.leader_id)),
        ("LeaderEpoch", str(d.leader_epoch)),
        ("HighWatermark", str(-1 if d.high_watermark is None else d.high_watermark)),
        ("MaxFollowerLag", str(leader.log_end_offset - laggard.log_end_offset)),
        ("MaxFollowerLagTimeMs", str(lag_ms)),
        ("CurrentVoters", _replica_list(d.voters, nodes)),
        ("CurrentObservers", _replica_list(d.observers, nodes)),
    ]
    return [f"{name + ':':<24}{value}" for name, value in fields]


def _replica_list(
    replicas: Sequence[ReplicaDescription], nodes: Sequence[NodeEndpoints] = ()
) -> str:
    """Kafka's form: {"id": N[, "directoryId": "..."][, "endpoints": ["NAME://host:port"]]},
    the directory id only when set, the endpoints only when DescribeQuorum v2 named some."""
    from kraft.ids import NO_DIRECTORY
    from kraft.protocol import uuid_to_base64

    endpoints = {n.node_id: n.listeners for n in nodes}
    items = []
    for r in replicas:
        d = r.replica.directory_id
        directory = "" if d == NO_DIRECTORY else f', "directoryId": "{uuid_to_base64(d)}"'
        listeners = endpoints.get(r.replica.id, ())
        urls = ", ".join(f'"{_endpoint_url(x.name, x.host, x.port)}"' for x in listeners)
        endpoint_list = f', "endpoints": [{urls}]' if listeners else ""
        items.append(f'{{"id": {r.replica.id}{directory}{endpoint_list}}}')
    return "[" + ", ".join(items) + "]"


def _endpoint_url(name: str, host: str, port: int) -> str:
    """Kafka's RaftVoterEndpoint form: NAME://host:port, an IPv6 host in brackets."""
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def _replication_lines(d: QuorumDescription, *, human: bool, now_ms: int) -> list[str]:
    """kafka-metadata-quorum.sh describe --replication: a tab-separated, padded table."""
    from kraft.protocol import uuid_to_base64

    leader = next(v for v in d.voters if v.replica.id == d.leader_id)

    def when(ts: int) -> str:
        return str(ts) if ts < 0 or not human else f"{max(now_ms - ts, 0)} ms ago"

    groups = [
        ([leader], "Leader"),
        ([v for v in d.voters if v is not leader], "Follower"),
        (list(d.observers), "Observer"),
    ]
    rows = [
        [
            str(r.replica.id),
            uuid_to_base64(r.replica.directory_id),
            str(r.log_end_offset),
            str(leader.log_end_offset - r.log_end_offset),
            when(r.last_fetch_timestamp_ms),
            when(r.last_caught_up_timestamp_ms),
            status,
        ]
        for replicas, status in groups
        for r in replicas
    ]
    header = [
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return [
        "".join(f"{c:<{w}}\t" for c, w in zip(row, widths, strict=True)) for row in [header, *rows]
    ]


def _cmd_quorum(args: argparse.Namespace) -> int:
    import asyncio
    import time

    from kraft.client import ClientError, describe_quorum

    if args.status == args.replication:
        return _fail("quorum", "describe needs exactly one of --status or --replication", 2)
    if args.human_readable and not args.replication:
        return _fail("quorum", "--human-readable goes with --replication only", 2)
    bootstrap = _addresses("quorum", args.bootstrap)
    if bootstrap is None:
        return 2
    try:
        report = asyncio.run(describe_quorum(bootstrap, args.timeout_ms))
    except ClientError as e:
        return _fail("quorum", str(e))
    desc = report.description
    if args.status:
        lines = _status_lines(report.cluster_id, desc, report.nodes)
    else:
        lines = _replication_lines(desc, human=args.human_readable, now_ms=int(time.time() * 1000))
    print("\n".join(lines))
    return 0


def _cmd_append(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError, append
    from kraft.metadata_records import (
        METADATA_VERSION_FEATURE,
        feature_level_record,
        no_op_record,
    )

    bootstrap = _addresses("append", args.bootstrap)
    if bootstrap is None:
        return 2
    values = [v.encode("utf-8") for v in args.values]
    for text in args.raw_hex:
        try:
            values.append(bytes.fromhex(text))
        except ValueError:
            return _fail("append", f"--raw-hex: not hexadecimal: {text!r}", 2)
    if args.noop < 0:
        return _fail("append", "--noop must not be negative", 2)
    if args.metadata_version is not None:
        if not 1 <= args.metadata_version <= 0x7FFF:
            return _fail("append", "--metadata-version must be a feature level (1..32767)", 2)
        values.insert(0, feature_level_record(METADATA_VERSION_FEATURE, args.metadata_version))
    values.extend([no_op_record()] * args.noop)
    if not values:
        return _fail(
            "append", "nothing to append: give values, --noop, --metadata-version or --raw-hex", 2
        )
    try:
        ack = asyncio.run(append(bootstrap, values, args.timeout_ms))
    except ClientError as e:
        return _fail("append", str(e))
    print(
        f"committed offsets {ack.base_offset}..{ack.last_offset} "
        f"(epoch {ack.epoch}, leader {ack.leader_id})"
    )
    return 0


def _cmd_read(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError, read

    bootstrap = _addresses("read", args.bootstrap)
    if bootstrap is None:
        return 2
    if args.from_offset < 0:
        return _fail("read", "--from must not be negative", 2)
    try:
        result = asyncio.run(read(bootstrap[0], args.from_offset))
    except ClientError as e:
        return _fail("read", str(e))
    for offset, value in result.records:
        text = "null" if value is None else value.decode("utf-8", errors="backslashreplace")
        print(f"{offset}\t{text}")
    print(f"high watermark {result.high_watermark}", file=sys.stderr)
    return 0


def _cmd_cluster(args: argparse.Namespace) -> int:
    import signal
    import tempfile
    import time

    from kraft.cluster import LocalCluster, free_ports

    if args.nodes < 1:
        return _fail("cluster", "--nodes must be at least 1", 2)
    if args.base_port is not None and not 0 < args.base_port <= 65535 - args.nodes:
        return _fail("cluster", f"--base-port {args.base_port} is out of range", 2)
    ports = (
        free_ports(args.nodes)
        if args.base_port is None
        else list(range(args.base_port, args.base_port + args.nodes))
    )
    root = args.data_root or Path(tempfile.mkdtemp(prefix="kraft-cluster-"))
    overrides = {"controller.quorum.election.timeout.ms": str(args.election_timeout_ms)}
    cluster = LocalCluster(root, ports, overrides=overrides, trace=args.trace)
    cluster.format()
    cluster.start()
    print(f"cluster {cluster.cluster_id}: {args.nodes} node(s), data under {root}")
    for n, a in cluster.addresses.items():
        print(f"  node {n}: {a}  config {cluster.config_path(n)}  log {cluster.log_path(n)}")
    print(f"bootstrap: {','.join(str(a) for a in cluster.addresses.values())}")
    print("Ctrl-C stops the cluster.", flush=True)
    stop = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    while not stop:
        time.sleep(0.2)
        for n in cluster.node_ids:
            if not cluster.is_running(n):
                print(f"node {n} exited; see {cluster.log_path(n)}", file=sys.stderr)
                stop = True
    codes = cluster.stop_all()
    print("stopped: " + ", ".join(f"node {n} exit {c}" for n, c in codes.items()))
    return 0


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

    campaign = sub.add_parser(
        "campaign",
        help="run many simulator seeds on Spark: coverage, distributions, violations, report",
        description="A simulation campaign on Spark (embedded local[*] unless --master).",
    )
    from refinement.pipeline.campaign import add_arguments

    add_arguments(campaign)
    campaign.set_defaults(handler=_cmd_campaign)

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

    _add_node_commands(sub)
    return parser


def _add_node_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fmt = sub.add_parser(
        "format",
        help="format a data directory (write meta.properties), like kafka-storage format",
        description="Write meta.properties (cluster id, node id, directory id) into a new "
        "data directory. Alone, --random-cluster-id prints a new cluster id.",
    )
    fmt.add_argument("--data-dir", type=Path, help="the node's data directory")
    fmt.add_argument("--cluster-id", help="the cluster id (22 characters of base64)")
    fmt.add_argument("--node-id", type=int, help="this node's id")
    fmt.add_argument("--directory-id", help="the directory id (default: a random one)")
    fmt.add_argument(
        "--random-cluster-id", action="store_true", help="use (or just print) a new cluster id"
    )
    fmt.set_defaults(handler=_cmd_format)

    start = sub.add_parser(
        "start",
        help="run a node until SIGTERM/SIGINT",
        description="Run a KRaft node. Settings come from --config (Kafka-style properties) "
        "and the flags below, which override the file.",
    )
    start.add_argument("--config", type=Path, help="properties file (node.id, ...)")
    start.add_argument("--node-id", type=int, help="node.id")
    start.add_argument("--data-dir", help="metadata.log.dir")
    start.add_argument("--voters", help="controller.quorum.voters: id@host:port,...")
    start.add_argument("--listener", help="listeners: host:port or NAME://host:port")
    start.add_argument("--election-timeout-ms", type=int, help="quorum.election.timeout.ms")
    start.add_argument("--fetch-timeout-ms", type=int, help="quorum.fetch.timeout.ms")
    start.add_argument("--request-timeout-ms", type=int, help="quorum.request.timeout.ms")
    start.add_argument("--append-linger-ms", type=int, help="quorum.append.linger.ms")
    start.add_argument("--trace", help="write an ndjson trace of the replica's steps here")
    start.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set any configuration key (repeatable)",
    )
    start.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    start.set_defaults(handler=_cmd_start)

    quorum = sub.add_parser(
        "quorum",
        help="describe the quorum, like kafka-metadata-quorum.sh",
        description="Describe the metadata quorum as kafka-metadata-quorum.sh does.",
    )
    qsub = quorum.add_subparsers(dest="quorum_command", metavar="SUBCOMMAND", required=True)
    describe = qsub.add_parser(
        "describe",
        help="--status or --replication",
        description="Ask the leader (found through the bootstrap nodes) for DescribeQuorum.",
    )
    _bootstrap_arg(describe)
    describe.add_argument("--status", action="store_true", help="a summary of the quorum")
    describe.add_argument("--replication", action="store_true", help="replication per replica")
    describe.add_argument(
        "--human-readable", action="store_true", help="timestamps as 'N ms ago' (--replication)"
    )
    describe.add_argument("--timeout-ms", type=int, default=10_000, help="wait for a leader")
    describe.set_defaults(handler=_cmd_quorum)

    app = sub.add_parser(
        "append",
        help="append records; returns once they are committed",
        description="Append the values as one batch through the leader (redirects followed); "
        "prints the committed offsets. Records have a null key. Only a kraft node takes "
        "appends (a private API, found through ApiVersions).",
    )
    _bootstrap_arg(app)
    app.add_argument("values", nargs="*", metavar="VALUE", help="record values (UTF-8)")
    app.add_argument(
        "--noop",
        type=int,
        default=0,
        metavar="N",
        help="also append N metadata NoOpRecords (what a Kafka controller in the quorum can "
        "replay; plain text values would stop it)",
    )
    app.add_argument(
        "--metadata-version",
        type=int,
        metavar="LEVEL",
        help="first append a metadata.version FeatureLevelRecord at this feature level (a "
        "Kafka controller needs one before it can replay the log; Kafka 4.3's is 30)",
    )
    app.add_argument(
        "--raw-hex",
        action="append",
        default=[],
        metavar="HEX",
        help="also append a record whose value is these bytes (repeatable)",
    )
    app.add_argument("--timeout-ms", type=int, default=30_000, help="give up after this")
    app.set_defaults(handler=_cmd_append)

    rd = sub.add_parser(
        "read",
        help="print committed records from an offset",
        description="Fetch committed records (below the node's high watermark) from the first "
        "bootstrap node, as a consumer does; prints offset<TAB>value.",
    )
    _bootstrap_arg(rd)
    rd.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    rd.set_defaults(handler=_cmd_read)

    cluster = sub.add_parser(
        "cluster",
        help="run a local cluster of nodes on 127.0.0.1",
        description="Local clusters of `kraft start` subprocesses.",
    )
    csub = cluster.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND", required=True)
    up = csub.add_parser(
        "up",
        help="format and start N nodes; Ctrl-C stops them",
        description="Format and start N nodes as subprocesses on 127.0.0.1, print where they "
        "are, and stop them cleanly on Ctrl-C or SIGTERM.",
    )
    up.add_argument("--nodes", type=int, default=3, help="number of voters (default 3)")
    up.add_argument("--base-port", type=int, help="first port (default: free ports)")
    up.add_argument("--data-root", type=Path, help="where the data goes (default: a temp dir)")
    up.add_argument(
        "--election-timeout-ms", type=int, default=1000, help="quorum.election.timeout.ms"
    )
    up.add_argument("--trace", action="store_true", help="each node writes an ndjson trace")
    up.set_defaults(handler=_cmd_cluster)


def _bootstrap_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        "--bootstrap-controller",
        dest="bootstrap",
        required=True,
        metavar="HOST:PORT[,...]",
        help="nodes to ask first",
    )


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
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    raise SystemExit(main())
