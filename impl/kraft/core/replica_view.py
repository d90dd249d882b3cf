"""The replica as checkers and traces see it: `ReplicaView`, an immutable picture of one
replica, and `ViewCache`, which rebuilds it only when something in it changed (drivers ask
after every event, and most events change none of it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey

if TYPE_CHECKING:
    from kraft.core.replica import Replica


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """An immutable snapshot of a replica, for checkers and traces."""

    node_id: NodeId
    state: ReplicaState
    epoch: Epoch
    leader_id: NodeId | None
    voted_for: ReplicaKey | None
    is_voter: bool
    end_offset: Offset
    last_epoch: Epoch
    high_watermark: Offset | None
    log_start_offset: Offset
    voters: tuple[NodeId, ...]
    # KIP-630: the snapshot it is fetching (Fetch is paused meanwhile), if any.
    fetching_snapshot: OffsetAndEpoch | None = None


class ViewCache:
    """The last view of one replica and what it was built from."""

    __slots__ = ("_key", "_view")

    def __init__(self) -> None:
        self._key: tuple[object, ...] = ()
        self._view: ReplicaView | None = None

    def view_of(self, r: Replica) -> ReplicaView:
        log = r._log
        transfer = None if r._fetcher is None else r._fetcher.transfer
        fetching = None if transfer is None else transfer.snapshot_id
        key = (
            r._state, r._epoch, r._leader_id, r._voted_for, r._hwm, log.version, r._voters,
            fetching,
        )  # fmt: skip
        if key == self._key and self._view is not None:
            return self._view
        self._key = key
        self._view = ReplicaView(
            node_id=r._me.id,
            state=r._state,
            epoch=r._epoch,
            leader_id=r._leader_id,
            voted_for=r._voted_for,
            is_voter=r.is_voter,
            end_offset=log.end_offset,
            last_epoch=log.last_epoch,
            high_watermark=r._hwm,
            log_start_offset=log.start_offset,
            voters=r._voters.ids,
            fetching_snapshot=fetching,
        )
        return self._view
