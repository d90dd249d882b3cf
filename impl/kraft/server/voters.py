"""The node's voters at start (KIP-853): from its storage when it states them, else from the
configuration.

A dynamic quorum (kraft.version 1) states its voter set in the bootstrap checkpoint, in
snapshots and in Voters records of the log (kraft.storage.bootstrap.stated_voters). Then the
voter set, with every voter's directory id, is the log's and not the configuration's, and the
voters' addresses are the endpoints of the latest Voters record (on the node's controller
listener, else the first one given). A static quorum (kraft.version 0) keeps
`controller.quorum.voters`: ids only, any directory. A node whose storage states no voter set
and that is configured with `controller.quorum.bootstrap.servers` only starts with no voter:
an observer that finds the quorum through them (kraft.server.node). While it runs, the voter
set and the voters' endpoints follow the log (`voter_addresses` of the latest Voters record).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from kraft.control_records import VotersRecord
from kraft.core.voter_records import voter_set_of
from kraft.core.voter_set import VoterSet
from kraft.errors import KraftError
from kraft.ids import NodeId, Offset
from kraft.server.config import NodeConfig, VoterAddress
from kraft.storage.bootstrap import stated_voters
from kraft.storage.segmented_log import SegmentedLog
from kraft.storage.snapshot_files import (
    BOOTSTRAP_SNAPSHOT_ID,
    CorruptSnapshotError,
    SnapshotSummary,
    check_snapshot,
    checkpoint_path,
)

__all__ = ["NoVotersError", "voter_addresses", "voters_at_start"]

log = logging.getLogger("kraft.node")


class NoVotersError(KraftError):
    """Neither the configuration nor the data directory names any voter."""


def _bootstrap_checkpoint(partition_dir: Path) -> SnapshotSummary | None:
    path = checkpoint_path(partition_dir, BOOTSTRAP_SNAPSHOT_ID)
    if not path.exists():
        return None
    try:
        return check_snapshot(path)
    except CorruptSnapshotError as e:
        raise NoVotersError(f"the bootstrap checkpoint cannot be read: {e}") from None


def voter_addresses(record: VotersRecord, listener_name: str) -> tuple[VoterAddress, ...]:
    """Each voter's endpoint on `listener_name` (else its first); voters with none are left
    out (no address to reach them at)."""
    out: list[VoterAddress] = []
    for v in record.voters:
        chosen = next((e for e in v.endpoints if e.name == listener_name.upper()), None)
        if chosen is None and v.endpoints:
            chosen = v.endpoints[0]
        if chosen is not None:
            out.append(VoterAddress(NodeId(v.voter_id), chosen.host, chosen.port))
    return tuple(out)


def voters_at_start(
    config: NodeConfig, snapshot: SnapshotSummary | None, log_: SegmentedLog
) -> tuple[NodeConfig, tuple[tuple[Offset, VoterSet], ...]]:
    """The configuration with the voters' addresses the storage states (if it states any),
    and the voter-set history for `LogState.voter_history`. `snapshot` is the snapshot the
    state was loaded from; without one, the bootstrap checkpoint (which holds no record, so
    is never loaded) states the voters if it is there."""
    if snapshot is None:
        snapshot = _bootstrap_checkpoint(log_.dir)
    stated = stated_voters(snapshot, log_)
    latest = stated.latest
    if latest is None:
        if not config.voters and not config.bootstrap_servers:
            raise NoVotersError(
                f"{config.data_dir} states no voter set (it was not formatted with "
                "--standalone or --initial-controllers, and its log holds no Voters record) "
                "and neither controller.quorum.voters nor controller.quorum.bootstrap.servers "
                "is set"
            )
        # No voter known: with bootstrap servers only, the node starts as an observer that
        # finds the leader through them and learns the voters from the log it fetches
        # (kraft.server.node).
        return config, ()
    addresses = voter_addresses(latest, config.listener_name)
    if config.voters and {v.node_id for v in config.voters} != {v.node_id for v in addresses}:
        log.warning(
            "controller.quorum.voters (%s) is not the voter set of the log (%s): the log's is used",
            ",".join(str(v) for v in config.voters),
            ",".join(str(v) for v in addresses),
        )
    history = tuple((offset, voter_set_of(record)) for offset, record in stated.history)
    return replace(config, voters=addresses), history
