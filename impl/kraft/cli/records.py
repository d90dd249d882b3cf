"""The commands on records: `kraft append` (keyed records through the leader), `kraft read`
(committed records from the log, as a consumer) and `kraft get` (a key's committed value in a
node's key-value state machine)."""

from __future__ import annotations

import argparse
import sys

from kraft.cli.common import SubParsers, addresses, bootstrap_arg, fail


def add_commands(sub: SubParsers) -> None:
    app = sub.add_parser(
        "append",
        help="append records; returns once they are committed",
        description="Append the records as one batch through the leader (redirects followed); "
        "prints the committed offsets. KEY=VALUE sets a key in the nodes' key-value state "
        "machine (read it back with `kraft get`); a bare VALUE is a record with a null key; "
        "--delete KEY appends a record with a null value, which deletes the key. The batch "
        "holds the positional records in order, then the --value, --delete and --raw-hex "
        "ones. Only a kraft node takes appends (a private API, found through ApiVersions).",
    )
    bootstrap_arg(app)
    app.add_argument(
        "records",
        nargs="*",
        metavar="KEY=VALUE|VALUE",
        help="a keyed record (split at the first '=') or a value with a null key (UTF-8)",
    )
    app.add_argument(
        "--value",
        dest="plain",
        action="append",
        default=[],
        metavar="VALUE",
        help="a record with a null key and this value, taken verbatim even with '=' in it "
        "(repeatable)",
    )
    app.add_argument(
        "--delete",
        action="append",
        default=[],
        metavar="KEY",
        help="a record with this key and a null value: deletes the key (repeatable)",
    )
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
    bootstrap_arg(rd)
    rd.add_argument("--from", dest="from_offset", type=int, default=0, help="first offset")
    rd.set_defaults(handler=_cmd_read)

    get = sub.add_parser(
        "get",
        help="print a key's committed value from a node's key-value state machine",
        description="Ask the first bootstrap node for KEY's value in its key-value state "
        "machine (what `kraft append KEY=VALUE` sets): any node answers from the committed "
        "records it has applied, which may lag the leader's. Prints the value; the offset "
        "the node has applied up to goes to stderr. Exit status 3 when the node holds no "
        "such key, 1 when it cannot be asked.",
    )
    bootstrap_arg(get)
    get.add_argument("key", metavar="KEY", help="the record key (UTF-8)")
    get.add_argument("--timeout-ms", type=int, default=5_000, help="give up after this")
    get.set_defaults(handler=_cmd_get)


def _cmd_append(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError, append
    from kraft.metadata_records import (
        METADATA_VERSION_FEATURE,
        feature_level_record,
        no_op_record,
    )
    from kraft.records import KeyValue

    bootstrap = addresses("append", args.bootstrap)
    if bootstrap is None:
        return 2
    values: list[bytes | KeyValue] = []
    for text in args.records:
        key, sep, value = text.partition("=")
        if not sep:
            values.append(text.encode("utf-8"))
        elif not key:
            return fail("append", f"{text!r}: an empty key (use --value for a value with '=')", 2)
        else:
            values.append((key.encode("utf-8"), value.encode("utf-8")))
    values.extend(v.encode("utf-8") for v in args.plain)
    values.extend((k.encode("utf-8"), None) for k in args.delete)
    for text in args.raw_hex:
        try:
            values.append(bytes.fromhex(text))
        except ValueError:
            return fail("append", f"--raw-hex: not hexadecimal: {text!r}", 2)
    if args.noop < 0:
        return fail("append", "--noop must not be negative", 2)
    if args.metadata_version is not None:
        if not 1 <= args.metadata_version <= 0x7FFF:
            return fail("append", "--metadata-version must be a feature level (1..32767)", 2)
        values.insert(0, feature_level_record(METADATA_VERSION_FEATURE, args.metadata_version))
    values.extend([no_op_record()] * args.noop)
    if not values:
        return fail(
            "append",
            "nothing to append: give records, --value, --delete, --noop, --metadata-version "
            "or --raw-hex",
            2,
        )
    try:
        ack = asyncio.run(append(bootstrap, values, args.timeout_ms))
    except ClientError as e:
        return fail("append", str(e))
    print(
        f"committed offsets {ack.base_offset}..{ack.last_offset} "
        f"(epoch {ack.epoch}, leader {ack.leader_id})"
    )
    return 0


def _cmd_read(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError
    from kraft.client_read import read

    bootstrap = addresses("read", args.bootstrap)
    if bootstrap is None:
        return 2
    if args.from_offset < 0:
        return fail("read", "--from must not be negative", 2)
    try:
        result = asyncio.run(read(bootstrap[0], args.from_offset))
    except ClientError as e:
        return fail("read", str(e))
    for offset, value in result.records:
        text = "null" if value is None else value.decode("utf-8", errors="backslashreplace")
        print(f"{offset}\t{text}")
    print(f"high watermark {result.high_watermark}", file=sys.stderr)
    return 0


# Exit status of `kraft get` for a key the node does not hold.
NOT_FOUND_STATUS = 3


def _cmd_get(args: argparse.Namespace) -> int:
    import asyncio

    from kraft.client import ClientError
    from kraft.client_read import get

    bootstrap = addresses("get", args.bootstrap)
    if bootstrap is None:
        return 2
    if not bootstrap:
        return fail("get", "--bootstrap names no node", 2)
    try:
        result = asyncio.run(get(bootstrap[0], args.key.encode("utf-8"), args.timeout_ms / 1000))
    except ClientError as e:
        return fail("get", str(e))
    where = f"node {result.node_id}, applied up to offset {result.applied_offset}"
    if result.value is None:
        return fail("get", f"key {args.key!r} not found ({where})", NOT_FOUND_STATUS)
    print(result.value.decode("utf-8", errors="backslashreplace"))
    print(where, file=sys.stderr)
    return 0
