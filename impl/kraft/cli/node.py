"""The commands that run nodes: `kraft format` (meta.properties, and a dynamic quorum's
bootstrap checkpoint with --standalone or --initial-controllers, as `kafka-storage format`),
`kraft start` (one node), `kraft cluster up` (a local cluster of node subprocesses)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kraft.cli.common import SubParsers, fail


def add_commands(sub: SubParsers) -> None:
    fmt = sub.add_parser(
        "format",
        help="format a data directory (write meta.properties), like kafka-storage format",
        description="Write meta.properties (cluster id, node id, directory id) into a new "
        "data directory. With --standalone or --initial-controllers, also bootstrap a dynamic "
        "quorum (KIP-853, kraft.version 1): the checkpoint "
        "__cluster_metadata-0/00000000000000000000-0000000000.checkpoint holds the initial "
        "voters with their directory ids, as kafka-storage format writes it. Without either, "
        "the node uses controller.quorum.voters (a static quorum, kraft.version 0) or, "
        "formatted for a dynamic quorum it joins later, starts as an observer. "
        "Alone, --random-cluster-id prints a new cluster id.",
    )
    fmt.add_argument("--data-dir", type=Path, help="the node's data directory")
    fmt.add_argument("--cluster-id", help="the cluster id (22 characters of base64)")
    fmt.add_argument("--node-id", type=int, help="this node's id")
    fmt.add_argument("--directory-id", help="the directory id (default: a random one)")
    fmt.add_argument(
        "--random-cluster-id", action="store_true", help="use (or just print) a new cluster id"
    )
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "--standalone",
        action="store_true",
        help="bootstrap a dynamic quorum with this node as its only voter (needs --listener)",
    )
    quorum.add_argument(
        "--initial-controllers",
        metavar="ID@HOST:PORT:DIRECTORY-ID,...",
        help="bootstrap a dynamic quorum with these voters; this node's directory id is the "
        "one given for its id",
    )
    quorum.add_argument(
        "--no-initial-controllers",
        action="store_true",
        help="no bootstrap (a node that joins a dynamic quorum later; the default)",
    )
    fmt.add_argument(
        "--listener", metavar="HOST:PORT", help="this node's controller endpoint (--standalone)"
    )
    fmt.add_argument(
        "--listener-name",
        default="CONTROLLER",
        help="the controller listener's name in the voters' endpoints (default CONTROLLER)",
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
        help="set any configuration key (repeatable), e.g. Kafka's snapshot and retention "
        "keys: metadata.log.max.record.bytes.between.snapshots (default 20971520), "
        "metadata.log.max.snapshot.interval.ms (3600000), metadata.max.retention.bytes "
        "(104857600; < 0: no limit), metadata.max.retention.ms (604800000; < 0: no limit), "
        "and KIP-630's metadata.start.offset.lag.time.max.ms (604800000)",
    )
    start.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    start.set_defaults(handler=_cmd_start)

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
    up.add_argument(
        "--dynamic",
        action="store_true",
        help="a dynamic quorum (KIP-853): formatted with --initial-controllers, the nodes "
        "configured with controller.quorum.bootstrap.servers",
    )
    up.set_defaults(handler=_cmd_cluster)


def _cmd_format(args: argparse.Namespace) -> int:
    import random
    import time
    import uuid

    from kraft.errors import KraftError
    from kraft.ids import DirectoryId, NodeId
    from kraft.protocol import uuid_from_base64, uuid_to_base64
    from kraft.storage.bootstrap import (
        DynamicVoter,
        parse_initial_controllers,
        voters_record_of,
        write_bootstrap_checkpoint,
    )
    from kraft.storage.meta_properties import (
        format_storage,
        generate_cluster_id,
        generate_directory_id,
    )
    from kraft.storage.segmented_log import LOG_DIR_NAME

    cluster_id = args.cluster_id
    if args.random_cluster_id:
        if cluster_id is not None:
            return fail("format", "give --cluster-id or --random-cluster-id, not both", 2)
        cluster_id = generate_cluster_id(random.Random())
        if args.data_dir is None and args.node_id is None:
            print(cluster_id)
            return 0
    if args.data_dir is None or args.node_id is None or cluster_id is None:
        return fail("format", "--data-dir, --node-id and --cluster-id are required", 2)
    directory_id = None
    if args.directory_id is not None:
        try:
            directory_id = DirectoryId(uuid_from_base64(args.directory_id))
        except ValueError:
            try:
                directory_id = DirectoryId(uuid.UUID(args.directory_id))
            except ValueError:
                return fail("format", f"--directory-id: not a UUID: {args.directory_id!r}", 2)
    voters: tuple[DynamicVoter, ...] = ()
    try:
        if args.standalone:
            if args.listener is None:
                return fail("format", "--standalone needs --listener HOST:PORT", 2)
            from kraft.server.config import parse_listener

            host, port = parse_listener(args.listener)
            if directory_id is None:
                directory_id = generate_directory_id(random.Random())
            voters = (DynamicVoter(NodeId(args.node_id), host, port, directory_id),)
        elif args.initial_controllers is not None:
            voters = parse_initial_controllers(args.initial_controllers)
            mine = next((v for v in voters if v.node_id == args.node_id), None)
            if mine is not None:
                # Kafka: a voter's directory id is the one --initial-controllers gives it.
                if directory_id is not None and directory_id != mine.directory_id:
                    return fail(
                        "format",
                        f"--directory-id differs from node {args.node_id}'s in "
                        "--initial-controllers",
                        2,
                    )
                directory_id = mine.directory_id
        props = format_storage(args.data_dir, cluster_id, args.node_id, directory_id=directory_id)
        if voters:
            record = voters_record_of(voters, args.listener_name)
            write_bootstrap_checkpoint(
                args.data_dir / LOG_DIR_NAME, record, timestamp_ms=time.time_ns() // 1_000_000
            )
    except KraftError as e:
        return fail("format", str(e), 2)
    kind = "a static quorum, or a dynamic one it joins later (no bootstrap checkpoint)"
    if voters:
        kind = "a dynamic quorum of " + ",".join(str(v) for v in voters)
    print(
        f"Formatted {args.data_dir}: cluster.id={props.cluster_id} node.id={props.node_id} "
        f"directory.id={uuid_to_base64(props.directory_id)} for {kind}"
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
    import logging

    from kraft import event_loop
    from kraft.errors import KraftError
    from kraft.server.config import load_config
    from kraft.server.node import run_node

    overrides: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key:
            return fail("start", f"--override: expected KEY=VALUE, got {item!r}", 2)
        overrides[key.strip()] = value.strip()
    for attr, key in _START_FLAGS.items():
        value = getattr(args, attr)
        if value is not None:
            overrides[key] = str(value)
    if args.config is not None and not args.config.is_file():
        return fail("start", f"--config: {args.config}: no such file", 2)
    try:
        config = load_config(args.config, overrides)
    except KraftError as e:
        return fail("start", str(e), 2)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format=f"%(asctime)s node-{config.node_id} %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        return event_loop.run(run_node(config))
    except KraftError as e:
        return fail("start", str(e), 1)


def _cmd_cluster(args: argparse.Namespace) -> int:
    import signal
    import tempfile
    import time

    from kraft.cluster import LocalCluster, free_ports

    if args.nodes < 1:
        return fail("cluster", "--nodes must be at least 1", 2)
    if args.base_port is not None and not 0 < args.base_port <= 65535 - args.nodes:
        return fail("cluster", f"--base-port {args.base_port} is out of range", 2)
    ports = (
        free_ports(args.nodes)
        if args.base_port is None
        else list(range(args.base_port, args.base_port + args.nodes))
    )
    root = args.data_root or Path(tempfile.mkdtemp(prefix="kraft-cluster-"))
    overrides = {"controller.quorum.election.timeout.ms": str(args.election_timeout_ms)}
    cluster = LocalCluster(root, ports, overrides=overrides, trace=args.trace, dynamic=args.dynamic)
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
