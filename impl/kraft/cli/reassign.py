"""`kraft quorum reassign`: KIP-642 reassignment of the voter set, run as the single-member
voter changes (KIP-853/856) that kraft.reassign plans.

The target is given either as `--voters id@host:port:directory-id,...` (the form of `kraft
format --initial-controllers`; the endpoints take `--listener-name`) or as `--voters-from
FILE ...`, the configuration files of the target's nodes (read as `add-voter` reads one). Before
each step the leader's DescribeQuorum gives the current voters and leader and the plan is made
again (a leader change in between moves it last); then AddRaftVoter or RemoveRaftVoter, each
answered once it commits. The target's endpoints join the bootstrap nodes, so the quorum stays
reachable when the nodes given leave it. `--dry-run` prints the plan only. Each step is
printed when it starts (an add waits for the new voter to catch up) and when it has committed.

Exit status 0 once the voters are the target, 1 when a step is refused or times out (the
steps done stay done: running the command again continues), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kraft.cli.common import SubParsers, addresses, bootstrap_arg, fail, positive_ms
from kraft.client import Address, ClientError, describe_quorum
from kraft.ids import DirectoryId, NodeId, ReplicaKey
from kraft.protocol import uuid_to_base64
from kraft.protocol.rpc import Listener
from kraft.reassign import ReassignError, Step, StepKind, plan_reassignment

__all__ = ["add_command", "cmd_reassign"]

_COMMAND = "quorum reassign"


def add_command(qsub: SubParsers) -> None:
    p = qsub.add_parser(
        "reassign",
        help="move the voter set to a target set, one voter change at a time",
        description=(
            "Reassign the voters (KIP-642) to a target set as single-member voter changes: "
            "first add each new voter (its node must already run and fetch from the leader as "
            "an observer), then remove each voter not in the target, the leader last (it "
            "resigns once its removal commits). The plan is made again before every step from "
            "the leader's DescribeQuorum. Give the target as --voters "
            "id@host:port:directory-id,... (directory ids in Kafka's base64 form, as kraft "
            "format --initial-controllers takes them) or as --voters-from with the "
            "configuration file of each target node."
        ),
    )
    bootstrap_arg(p)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--voters",
        metavar="ID@HOST:PORT:DIRID[,...]",
        help="the target voter set, as kraft format --initial-controllers",
    )
    target.add_argument(
        "--voters-from",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="the configuration files of the target voters' nodes",
    )
    p.add_argument(
        "--listener-name",
        default="CONTROLLER",
        help="the listener name of the --voters endpoints (default CONTROLLER)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the plan only")
    p.add_argument(
        "--timeout-ms",
        type=positive_ms,
        default=30_000,
        help="give up on a step after this long",
    )
    p.set_defaults(handler=cmd_reassign)


def _target(args: argparse.Namespace) -> dict[ReplicaKey, tuple[Listener, ...]]:
    """The target voters and their endpoints; ReassignError when the arguments cannot say."""
    from kraft.cli.voters import BadConfigError, controller_of
    from kraft.storage.bootstrap import BootstrapError, parse_initial_controllers

    out: dict[ReplicaKey, tuple[Listener, ...]] = {}
    if args.voters is not None:
        try:
            voters = parse_initial_controllers(args.voters)
        except BootstrapError as e:
            raise ReassignError(f"--voters: {e}") from None
        name = args.listener_name.upper()
        for v in voters:
            out[ReplicaKey(v.node_id, v.directory_id)] = (Listener(name, v.host, v.port),)
        return out
    for path in args.voters_from:
        try:
            node_id, directory, endpoints = controller_of(path)
        except BadConfigError as e:
            raise ReassignError(str(e)) from None
        out[ReplicaKey(NodeId(node_id), DirectoryId(directory))] = endpoints
    return out


def _key_text(k: ReplicaKey) -> str:
    return f"{k.id} (directory id {uuid_to_base64(k.directory_id)})"


def _step_text(step: Step, endpoints: Mapping[ReplicaKey, Sequence[Listener]]) -> str:
    from kraft.cli.voters import endpoint_text

    if step.kind is StepKind.ADD:
        where = ", ".join(endpoint_text(x) for x in endpoints[step.voter])
        return f"add voter {_key_text(step.voter)} at {where}"
    return f"remove voter {_key_text(step.voter)}"


async def _state(
    bootstrap: Sequence[Address], timeout_ms: int
) -> tuple[frozenset[ReplicaKey], NodeId]:
    report = await describe_quorum(bootstrap, timeout_ms)
    voters = frozenset(r.replica for r in report.description.voters)
    return voters, report.description.leader_id


async def _run(
    bootstrap: Sequence[Address],
    target: Mapping[ReplicaKey, Sequence[Listener]],
    dry_run: bool,
    timeout_ms: int,
) -> int:
    from kraft.client_voters import add_voter, remove_voter

    voters, leader = await _state(bootstrap, timeout_ms)
    plan = plan_reassignment(voters, target, leader)
    print(
        f"Current voters: {', '.join(_key_text(k) for k in sorted(voters))}; leader {leader}",
        flush=True,
    )
    print(f"Plan of {len(plan)} step(s):", flush=True)
    for i, step in enumerate(plan, 1):
        print(f"  {i}. {_step_text(step, target)}", flush=True)
    if dry_run:
        return 0
    done = 0
    total = len(plan)
    # Each step is planned again (from the voters and leader of that moment); every step
    # brings the voters one member closer to the target, so the count stays `total`
    # (refinement/smt_reassign.py proves it for any leader between steps). A step that moved
    # nothing (cannot happen against a correct leader) must not loop forever.
    for _ in range(2 * total + 2):
        voters, leader = await _state(bootstrap, timeout_ms)
        steps = plan_reassignment(voters, target, leader)
        if not steps:
            print(f"Reassigned: the voters are {', '.join(str(k.id) for k in sorted(voters))}")
            return 0
        step = steps[0]
        done += 1
        text = _step_text(step, target)
        # Progress before the wait: adding a voter waits for it to catch up.
        print(f"Step {done}/{total}: {text} (leader {leader}) ...", flush=True)
        started = time.monotonic()
        try:
            if step.kind is StepKind.ADD:
                # The node being added is no voter yet: ask the others (so the error told is
                # the leader's answer, not that node's).
                mine = {Address(x.host, x.port) for x in target[step.voter]}
                answer = await add_voter(
                    [a for a in bootstrap if a not in mine] or bootstrap,
                    step.voter.id,
                    step.voter.directory_id,
                    target[step.voter],
                    timeout_ms,
                )
            else:
                answer = await remove_voter(
                    bootstrap, step.voter.id, step.voter.directory_id, timeout_ms
                )
        except ClientError as e:
            return fail(_COMMAND, f"step {done} ({text}) failed: {e}")
        took = time.monotonic() - started
        print(
            f"Step {done}/{total}: committed in {took:.2f} s (answered by leader "
            f"{answer.leader_id})",
            flush=True,
        )
    return fail(_COMMAND, f"the voters did not reach the target after {done} steps")


def cmd_reassign(args: argparse.Namespace) -> int:
    given = addresses(_COMMAND, args.bootstrap)
    if given is None:
        return 2
    try:
        target = _target(args)
    except ReassignError as e:
        return fail(_COMMAND, str(e), 2)
    bootstrap = list(given)
    for endpoints in target.values():
        for x in endpoints:
            if Address(x.host, x.port) not in bootstrap:
                bootstrap.append(Address(x.host, x.port))
    try:
        return asyncio.run(_run(bootstrap, target, args.dry_run, args.timeout_ms))
    except ReassignError as e:
        return fail(_COMMAND, str(e), 2)
    except ClientError as e:
        return fail(_COMMAND, str(e))
