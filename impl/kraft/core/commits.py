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

Pure: no clock, no I/O. The log is read only through `EpochLookup` (the replica's LogMetadata).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Protocol

from kraft.core.effects import AppendCommitted, AppendLost
from kraft.ids import Epoch, Offset

__all__ = ["AppendDecided", "CommitRule", "EpochLookup"]

AppendDecided = AppendCommitted | AppendLost


class EpochLookup(Protocol):
    def epoch_at(self, offset: Offset) -> Epoch | None:
        """The epoch of the record at `offset`; None if the log does not hold it."""
        ...


# (last, request id, first, epoch): ordered by last offset first, so that the HWM decides from
# the low end and truncation from the top. A plain tuple: compared in C, on every append.
_Accepted = tuple[Offset, int, Offset, Epoch]


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
        undecided = self._undecided
        entry = (last, request_id, first, epoch)
        if not undecided or undecided[-1] < entry:
            undecided.append(entry)  # the usual case: appends are accepted in log order
        else:
            insort(undecided, entry)
        if high_watermark is not None and last < high_watermark:
            return self.high_watermark_raised(high_watermark, log)
        return []

    def high_watermark_raised(
        self, high_watermark: Offset, log: EpochLookup
    ) -> list[AppendDecided]:
        """The replica's HWM is now `high_watermark`: decide every append below it."""
        undecided = self._undecided
        if not undecided or undecided[0][0] >= high_watermark:
            return []
        n = bisect_left(undecided, (high_watermark,))  # the first whose last reaches the HWM
        due, self._undecided = undecided[:n], undecided[n:]
        return [_committed(a) if log.epoch_at(a[0]) == a[3] else _lost(a) for a in due]

    def truncated(self, offset: Offset) -> list[AppendDecided]:
        """The log lost every record at or after `offset`: what ended there is lost."""
        undecided = self._undecided
        if not undecided or undecided[-1][0] < offset:
            return []
        n = bisect_left(undecided, (offset,))  # the first whose last the truncation removed
        self._undecided, gone = undecided[:n], undecided[n:]
        return [_lost(a) for a in gone]


def _committed(a: _Accepted) -> AppendCommitted:
    last, request_id, first, epoch = a
    return AppendCommitted(request_id, first, last, epoch)


def _lost(a: _Accepted) -> AppendLost:
    last, request_id, first, epoch = a
    return AppendLost(request_id, first, last, epoch)
