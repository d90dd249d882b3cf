"""`kraft quorum describe`: the quorum as kafka-metadata-quorum.sh prints it (--status,
--replication); `kraft info`: each node's own view (KraftNodeInfo), with what Kafka's tools do
not show, such as the log start offset (DescribeQuorum carries none). `kraft quorum add-voter /
remove-voter` live in kraft.cli.voters."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kraft.cli import voters
from kraft.cli.common import SubParsers, addresses, bootstrap_arg, fail

if TYPE_CHECKING:
    from kraft.core.quorum_info import QuorumDescription, ReplicaDescription
    from kraft.protocol.rpc import NodeEndpoints


def add_commands(sub: SubParsers) -> None:
    quorum = sub.add_parser(
        "quorum",
        help="describe the quorum, add and remove voters, like kafka-metadata-quorum.sh",
        description=(
            "Describe the metadata quorum, add and remove voters, as kafka-metadata-quorum.sh does."
        ),
    )
    qsub = quorum.add_subparsers(dest="quorum_command", metavar="SUBCOMMAND", required=True)
    describe = qsub.add_parser(
        "describe",
        help="--status or --replication",
        description="Ask the leader (found through the bootstrap nodes) for DescribeQuorum.",
    )
    bootstrap_arg(describe)
    describe.add_argument("--status", action="store_true", help="a summary of the quorum")
    describe.add_argument("--replication", action="store_true", help="replication per replica")
    describe.add_argument(
        "--human-readable", action="store_true", help="timestamps as 'N ms ago' (--replication)"
    )
    describe.add_argument("--timeout-ms", type=int, default=10_000, help="wait for a leader")
    describe.set_defaults(handler=cmd_quorum)
    voters.add_commands(qsub)
    info = sub.add_parser(
        "info",
        help="each node's own view: state, epoch, leader, HWM, log start and end offsets",
        description=(
            "Ask every listed node for its own view (the private KraftNodeInfo API): state, "
            "epoch, leader, high watermark, log start offset and log end offset, one line a "
            "node. Exit status 1 if a node does not answer."
        ),
    )
    bootstrap_arg(info)
    info.set_defaults(handler=cmd_info)


class NoLeaderRowError(ValueError):
    """The description names a leader it does not describe."""


def leader_of(d: QuorumDescription) -> ReplicaDescription:
    """The leader's row: among the voters, else among the observers (KIP-856: a leader that
    removed itself leads until the change commits; Kafka's tool fails there)."""
    for r in (*d.voters, *d.observers):
        if r.replica.id == d.leader_id:
            return r
    raise NoLeaderRowError(f"the answer names leader {d.leader_id} but does not describe it")


def status_lines(
    cluster_id: str, d: QuorumDescription, nodes: Sequence[NodeEndpoints] = ()
) -> list[str]:
    """kafka-metadata-quorum.sh describe --status, field for field."""
    leader = leader_of(d)
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
        ("CurrentVoters", replica_list(d.voters, nodes)),
        ("CurrentObservers", replica_list(d.observers, nodes)),
    ]
    return [f"{name + ':':<24}{value}" for name, value in fields]


def replica_list(
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
        urls = ", ".join(f'"{endpoint_url(x.name, x.host, x.port)}"' for x in listeners)
        endpoint_list = f', "endpoints": [{urls}]' if listeners else ""
        items.append(f'{{"id": {r.replica.id}{directory}{endpoint_list}}}')
    return "[" + ", ".join(items) + "]"


def endpoint_url(name: str, host: str, port: int) -> str:
    """Kafka's RaftVoterEndpoint form: NAME://host:port, an IPv6 host in brackets."""
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


def replication_lines(d: QuorumDescription, *, human: bool, now_ms: int) -> list[str]:
    """kafka-metadata-quorum.sh describe --replication: a tab-separated, padded table."""
    from kraft.protocol import uuid_to_base64

    leader = leader_of(d)

    def when(ts: int) -> str:
        return str(ts) if ts < 0 or not human else f"{max(now_ms - ts, 0)} ms ago"

    groups = [
        ([leader], "Leader"),
        ([v for v in d.voters if v is not leader], "Follower"),
        ([o for o in d.observers if o is not leader], "Observer"),
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


def cmd_quorum(args: argparse.Namespace) -> int:
    import asyncio
    import time

    from kraft.client import ClientError, describe_quorum

    if args.status == args.replication:
        return fail("quorum", "describe needs exactly one of --status or --replication", 2)
    if args.human_readable and not args.replication:
        return fail("quorum", "--human-readable goes with --replication only", 2)
    bootstrap = addresses("quorum", args.bootstrap)
    if bootstrap is None:
        return 2
    try:
        report = asyncio.run(describe_quorum(bootstrap, args.timeout_ms))
    except ClientError as e:
        return fail("quorum", str(e))
    desc = report.description
    try:
        if args.status:
            lines = status_lines(report.cluster_id, desc, report.nodes)
        else:
            now_ms = int(time.time() * 1000)
            lines = replication_lines(desc, human=args.human_readable, now_ms=now_ms)
    except NoLeaderRowError as e:
        return fail("quorum", str(e))
    print("\n".join(lines))
    return 0


INFO_HEADER = (
    "NodeId",
    "State",
    "Epoch",
    "LeaderId",
    "HighWatermark",
    "LogStartOffset",
    "LogEndOffset",
)


def cmd_info(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError, node_info

    nodes = addresses("info", args.bootstrap)
    if nodes is None:
        return 2
    rows = [list(INFO_HEADER)]
    status = 0
    for address in nodes:
        try:
            i = asyncio.run(node_info(address))
        except (ClientError, OSError) as e:
            fail("info", f"{address}: {e}")
            status = 1
            continue
        rows.append(
            [
                str(i.node_id),
                i.state,
                str(i.epoch),
                "-1" if i.leader_id is None else str(i.leader_id),
                "-1" if i.high_watermark is None else str(i.high_watermark),
                str(i.log_start_offset),
                str(i.end_offset),
            ]
        )
    widths = [max(len(r[c]) for r in rows) for c in range(len(INFO_HEADER))]
    for r in rows:
        print("".join(f"{v:<{w}}\t" for v, w in zip(r, widths, strict=True)).rstrip())
    return status
