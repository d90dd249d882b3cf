"""`kraft quorum add-voter` / `remove-voter` (Kafka's names `add-controller` /
`remove-controller` are accepted too): voter changes (KIP-853) as kafka-metadata-quorum makes
them (org.apache.kafka.tools.MetadataQuorumCommand).

- add-voter reads the configuration file of the node to add (`--command-config`, as Kafka's):
  its `node.id`, its metadata directory (`metadata.log.dir`, else the first of `log.dirs`)
  whose meta.properties gives the directory id, and the endpoint of each
  `controller.listener.names` entry from `listeners` / `advertised.listeners` (kraft's
  default listener name when the file names none); then AddRaftVoter to the leader.
- remove-voter takes `--controller-id` and `--controller-directory-id`; RemoveRaftVoter.
- reassign (kraft.cli.reassign, registered here) runs a KIP-642 reassignment as such steps.

Both print what they did as Kafka's tool does (`--dry-run`: what they would do). Exit status
0 on success, 1 when the quorum refused or did not answer in time, 2 for bad arguments or an
unusable configuration file.
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Mapping
from pathlib import Path

from kraft.cli.common import SubParsers, addresses, bootstrap_arg, fail, positive_ms
from kraft.errors import KraftError
from kraft.protocol.rpc import Listener

__all__ = [
    "BadConfigError",
    "add_commands",
    "controller_endpoints",
    "controller_of",
    "endpoint_text",
]


class BadConfigError(KraftError):
    """The configuration file cannot describe a controller."""


def add_commands(qsub: SubParsers) -> None:
    add = qsub.add_parser(
        "add-voter",
        aliases=["add-controller"],
        help="add a node (running as an observer) to the voters",
        description=(
            "Add the node whose configuration file is given to the voter set (AddRaftVoter, "
            "KIP-853), as kafka-metadata-quorum add-controller does: its node.id, the "
            "directory id of its metadata directory's meta.properties and its controller "
            "listeners' endpoints. The node must already run and fetch from the leader as an "
            "observer. Answered once the change commits."
        ),
    )
    bootstrap_arg(add)
    add.add_argument(
        "--command-config",
        "--config",
        dest="config",
        type=Path,
        required=True,
        metavar="FILE",
        help="the configuration file of the node to add",
    )
    add.add_argument("--dry-run", action="store_true", help="print what would be done only")
    add.add_argument(
        "--timeout-ms", type=positive_ms, default=30_000, help="give up after this long"
    )
    add.set_defaults(handler=cmd_add_voter)

    remove = qsub.add_parser(
        "remove-voter",
        aliases=["remove-controller"],
        help="remove a voter (id and directory id) from the voters",
        description=(
            "Remove the voter with this id and directory id from the voter set "
            "(RemoveRaftVoter, KIP-853), as kafka-metadata-quorum remove-controller does."
        ),
    )
    bootstrap_arg(remove)
    remove.add_argument(
        "--controller-id", "-i", type=int, required=True, help="the id of the voter to remove"
    )
    remove.add_argument(
        "--controller-directory-id",
        "-d",
        required=True,
        help="the directory id of the voter to remove (Kafka's base64 form)",
    )
    remove.add_argument("--dry-run", action="store_true", help="print what would be done only")
    remove.add_argument(
        "--timeout-ms", type=positive_ms, default=30_000, help="give up after this long"
    )
    remove.set_defaults(handler=cmd_remove_voter)

    from kraft.cli import reassign

    reassign.add_command(qsub)


def endpoint_text(x: Listener) -> str:
    """NAME://host:port, an IPv6 host in brackets (Kafka's RaftVoterEndpoint)."""
    host = f"[{x.host}]" if ":" in x.host else x.host
    return f"{x.name}://{host}:{x.port}"


def _parse_listeners(text: str, key: str) -> dict[str, Listener]:
    out: dict[str, Listener] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not name or not colon or not port.isdigit() or int(port) > 65535:
            raise BadConfigError(f"{key}: expected NAME://host:port, got {item!r}")
        host = host.strip("[]") or "localhost"
        out[name.upper()] = Listener(name.upper(), host, int(port))
    return out


def controller_endpoints(props: Mapping[str, str]) -> tuple[Listener, ...]:
    """The endpoint of each controller listener name (`advertised.listeners` over
    `listeners`), in the order `controller.listener.names` gives them."""
    from kraft.server.config import listener_name_of

    known = _parse_listeners(props.get("listeners", ""), "listeners")
    known.update(_parse_listeners(props.get("advertised.listeners", ""), "advertised.listeners"))
    names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",")]
    names = [n for n in names if n] or [listener_name_of(props).upper()]
    out: list[Listener] = []
    for name in names:
        endpoint = known.get(name)
        if endpoint is None:
            raise BadConfigError(f"cannot find information about controller listener name: {name}")
        if endpoint not in out:
            out.append(endpoint)
    return tuple(out)


def controller_of(path: Path) -> tuple[int, uuid.UUID, tuple[Listener, ...]]:
    from kraft.ids import NO_DIRECTORY
    from kraft.server.config import ConfigError, parse_properties
    from kraft.storage.meta_properties import MetaPropertiesError, read_meta_properties

    try:
        props = parse_properties(path.read_text(encoding="utf-8"), str(path))
    except OSError as e:
        raise BadConfigError(f"cannot read {path}: {e.strerror or e}") from None
    except ConfigError as e:
        raise BadConfigError(str(e)) from None
    text = props.get("node.id")
    if text is None:
        raise BadConfigError(f"node.id not found in {path}: is it a controller's configuration?")
    try:
        node_id = int(text)
    except ValueError:
        raise BadConfigError(f"node.id: expected an integer, got {text!r}") from None
    if node_id < 0:
        raise BadConfigError(f"node.id is negative in {path}")
    roles = props.get("process.roles")
    if roles is not None and "controller" not in roles:
        raise BadConfigError(f"process.roles in {path} does not contain 'controller'")
    directory = props.get("metadata.log.dir") or props.get("log.dirs", "").split(",")[0].strip()
    if not directory:
        raise BadConfigError(f"neither metadata.log.dir nor log.dirs is set in {path}")
    try:
        meta = read_meta_properties(directory)
    except MetaPropertiesError as e:
        raise BadConfigError(str(e)) from None
    if meta.directory_id == NO_DIRECTORY:
        raise BadConfigError(f"no directory id found in {directory}/meta.properties")
    return node_id, meta.directory_id, controller_endpoints(props)


def cmd_add_voter(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError
    from kraft.client_voters import add_voter
    from kraft.ids import DirectoryId, NodeId
    from kraft.protocol import uuid_to_base64

    bootstrap = addresses("quorum", args.bootstrap)
    if bootstrap is None:
        return 2
    try:
        node_id, directory, endpoints = controller_of(args.config)
    except BadConfigError as e:
        return fail("quorum add-voter", str(e), 2)
    if not args.dry_run:
        try:
            asyncio.run(
                add_voter(
                    bootstrap, NodeId(node_id), DirectoryId(directory), endpoints, args.timeout_ms
                )
            )
        except ClientError as e:
            return fail("quorum add-voter", str(e))
    verb = "DRY RUN of adding" if args.dry_run else "Added"
    print(
        f"{verb} controller {node_id} with directory id {uuid_to_base64(directory)} and "
        f"endpoints: {', '.join(endpoint_text(x) for x in endpoints)}"
    )
    return 0


def cmd_remove_voter(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError
    from kraft.client_voters import remove_voter
    from kraft.ids import DirectoryId, NodeId
    from kraft.protocol import uuid_from_base64, uuid_to_base64

    if args.controller_id < 0:
        return fail(
            "quorum remove-voter", f"invalid negative --controller-id: {args.controller_id}", 2
        )
    try:
        directory = uuid_from_base64(args.controller_directory_id)
    except ValueError as e:
        return fail("quorum remove-voter", f"cannot parse --controller-directory-id: {e}", 2)
    bootstrap = addresses("quorum", args.bootstrap)
    if bootstrap is None:
        return 2
    if not args.dry_run:
        try:
            asyncio.run(
                remove_voter(
                    bootstrap, NodeId(args.controller_id), DirectoryId(directory), args.timeout_ms
                )
            )
        except ClientError as e:
            return fail("quorum remove-voter", str(e))
    # Kafka's words to the byte, the two spaces its format string puts after the verb too.
    verb = "DRY RUN of removing " if args.dry_run else "Removed "
    print(
        f"{verb} KRaft controller {args.controller_id} with directory id "
        f"{uuid_to_base64(directory)}"
    )
    return 0
