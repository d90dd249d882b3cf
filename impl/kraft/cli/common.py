"""What the `kraft` subcommands share: error output, --bootstrap and its parsing."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kraft.client import Address

Handler = Callable[[argparse.Namespace], int]
# What build_parser hands each group of commands to add theirs to.
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def fail(command: str, message: str, status: int = 1) -> int:
    print(f"kraft {command}: {message}", file=sys.stderr)
    return status


def addresses(command: str, text: str) -> list[Address] | None:
    from kraft.client import parse_address

    try:
        return [parse_address(a) for a in text.split(",") if a.strip()]
    except ValueError as e:
        fail(command, f"--bootstrap: {e}", 2)
        return None


def bootstrap_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        "--bootstrap-controller",
        dest="bootstrap",
        required=True,
        metavar="HOST:PORT[,...]",
        help="nodes to ask first",
    )


def positive_ms(text: str) -> int:
    """An argparse type: a positive number of milliseconds (argparse then exits 2 with the
    reason, never a traceback)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of milliseconds, got {text!r}"
        ) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value
