"""The commit rule: whether a client append this replica accepted is committed or lost.

One rule, decided here and nowhere else; the node, the simulator, the hypothesis machine and
the campaigns consume its outcome. The replica records every append it accepts (an
AppendResult with ErrorCode.NONE, including an idempotent resend answered with the offsets of
the batch the log already holds) and decides each exactly once:

- committed (AppendCommitted) when the replica's high watermark rises past `last` while its
  log holds a record of `epoch` at `last`. In any state: a leader that stepped down decides
  its appends as a follower once its HWM passes them;
- lost (AppendLost) when the log is truncated at or below `last`, or when the HWM passes `last`
  while the log holds another epoch there (or nothing): the records are not known to be
  committed.

An append accepted after the HWM already passed it (a resend of a committed batch) is decided
at once. The outcome is an outbound effect: a driver releases it, like a Send, only once what
came before it is durable (kraft.core.effects). The rule lives in the replica and dies with
it: a replica that crashes forgets what it accepted, and whoever asked a dead incarnation (the
node's client handler, the simulator) decides that append itself.

Pure: no clock, no I/O. The log is read only through `EpochLookup` (the replica's LogMirror).
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass
from typing import Protocol

from kraft.core.effects import AppendCommitted, AppendLost
from kraft.ids import Epoch, Offset

__all__ = ["AppendDecided", "CommitRule", "EpochLookup"]

AppendDecided = AppendCommitted | AppendLost


class EpochLookup(Protocol):
    def epoch_at(self, offset: Offset) -> Epoch | None:
        """The epoch of the record at `offset`; None if the log does not hold it."""
        ...


@dataclass(frozen=True, slots=True, order=True)
class _Accepted:
    # Ordered by last offset first: the HWM decides from the low end, truncation from the top.
    last: Offset
    request_id: int
    first: Offset
    epoch: Epoch


class CommitRule:
    """The undecided appends of one replica, and the rule that decides them."""

    __slots__ = ("_undecided",)

    def __init__(self) -> None:
        self._undecided: list[_Accepted] = []

    def __len__(self) -> int:
        return len(self._undecided)

    def accepted(
        self,
        request_id: int,
        first: Offset,
        last: Offset,
        epoch: Epoch,
        *,
        high_watermark: Offset | None,
        log: EpochLookup,
    ) -> list[AppendDecided]:
        """Record an accepted append; decided at once if the HWM already passed it."""
        insort(self._undecided, _Accepted(last, request_id, first, epoch))
        if high_watermark is not None and last < high_watermark:
            return self.high_watermark_raised(high_watermark, log)
        return []

    def high_watermark_raised(
        self, high_watermark: Offset, log: EpochLookup
    ) -> list[AppendDecided]:
        """The replica's HWM is now `high_watermark`: decide every append below it."""
        undecided = self._undecided
        n = 0
        while n < len(undecided) and undecided[n].last < high_watermark:
            n += 1
        if n == 0:
            return []
        due, self._undecided = undecided[:n], undecided[n:]
        return [_committed(a) if log.epoch_at(a.last) == a.epoch else _lost(a) for a in due]

    def truncated(self, offset: Offset) -> list[AppendDecided]:
        """The log lost every record at or after `offset`: what ended there is lost."""
        undecided = self._undecided
        n = len(undecided)
        while n > 0 and undecided[n - 1].last >= offset:
            n -= 1
        if n == len(undecided):
            return []
        self._undecided, gone = undecided[:n], undecided[n:]
        return [_lost(a) for a in gone]


def _committed(a: _Accepted) -> AppendCommitted:
    return AppendCommitted(a.request_id, a.first, a.last, a.epoch)


def _lost(a: _Accepted) -> AppendLost:
    return AppendLost(a.request_id, a.first, a.last, a.epoch)
